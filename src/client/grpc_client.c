/*
 * grpc_client.c — gRPC unary and client-streaming calls over libcurl.
 *
 * One call is one HTTP/2 POST: request messages are produced lazily by the
 * read callback (so a large upload is never held in memory twice), the body
 * is collected by the write callback and parsed after the transfer, and the
 * status comes from the header callback, which libcurl also calls for the
 * trailers. See client.h for the contract.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/client.h"

struct grpc_client {
	CURL *curl;
	char *base; /* "http://host:port" without a trailing slash */
	char *auth_header;
	int timeout_ms;
	size_t max_response;
	bool skip_verify;
};

/* Per-call state shared by the three callbacks. */
struct call {
	struct grpc_client *client;
	grpc_next_fn next;
	void *next_arg;
	struct buf pending; /* framed request bytes not yet handed to curl */
	size_t pending_off;
	bool request_done;
	int request_error;
	struct buf body;
	long http_status;
	int grpc_status; /* -1 until seen */
	char grpc_message[512];
	bool too_large;
};

int grpc_frame_append(struct buf *b, const void *msg, size_t len)
{
	uint8_t hdr[GRPC_FRAME_HEADER] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
					  (uint8_t)(len >> 8), (uint8_t)len};
	int rc;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	rc = buf_append(b, hdr, sizeof(hdr));
	if (rc == 0 && len)
		rc = buf_append(b, msg, len);
	return rc;
}

int grpc_frame_parse(const uint8_t *data, size_t len, size_t max, const uint8_t **msg,
		     size_t *msg_len, bool *compressed, size_t *consumed)
{
	size_t n;

	if (len < GRPC_FRAME_HEADER)
		return 0;
	n = (size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4];
	if (n > max)
		return -EMSGSIZE;
	if (len - GRPC_FRAME_HEADER < n)
		return 0;
	*compressed = data[0] & 1;
	*msg = data + GRPC_FRAME_HEADER;
	*msg_len = n;
	*consumed = GRPC_FRAME_HEADER + n;
	return 1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void grpc_percent_decode(char *s)
{
	char *w = s;

	for (const char *r = s; *r; r++) {
		int hi, lo;

		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0) {
			*w++ = (char)(hi << 4 | lo);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static size_t read_cb(char *out, size_t size, size_t nmemb, void *arg)
{
	struct call *call = arg;
	size_t room = size * nmemb;

	while (call->pending_off == call->pending.len && !call->request_done) {
		const void *msg;
		size_t len;
		int rc;

		buf_reset(&call->pending);
		call->pending_off = 0;
		rc = call->next(call->next_arg, &msg, &len);
		if (rc < 0) {
			call->request_error = rc;
			return CURL_READFUNC_ABORT;
		}
		if (rc == 0) {
			call->request_done = true;
			break;
		}
		if (grpc_frame_append(&call->pending, msg, len) < 0) {
			call->request_error = -ENOMEM;
			return CURL_READFUNC_ABORT;
		}
	}
	size_t n = call->pending.len - call->pending_off;
	if (n > room)
		n = room;
	if (n)
		memcpy(out, call->pending.data + call->pending_off, n);
	call->pending_off += n;
	return n;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct call *call = arg;
	size_t n = size * nmemb;

	if (call->body.len + n > call->client->max_response + GRPC_FRAME_HEADER) {
		call->too_large = true;
		return 0;
	}
	return buf_append(&call->body, ptr, n) == 0 ? n : 0;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct call *call = arg;
	size_t n = size * nmemb, vlen;
	char line[600];

	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
		const char *sp = memchr(ptr, ' ', n);

		if (sp)
			call->http_status = strtol(sp + 1, NULL, 10);
		return n;
	}
	if (n > 13 && strncasecmp(ptr, "grpc-status:", 12) == 0) {
		call->grpc_status = (int)strtol(ptr + 12, NULL, 10);
	} else if (n > 14 && strncasecmp(ptr, "grpc-message:", 13) == 0) {
		vlen = n - 13;
		if (vlen >= sizeof(line))
			vlen = sizeof(line) - 1;
		memcpy(line, ptr + 13, vlen);
		line[vlen] = '\0';
		char *v = line;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\r\n")] = '\0';
		grpc_percent_decode(v);
		snprintf(call->grpc_message, sizeof(call->grpc_message), "%.500s", v);
	}
	return n;
}

/* Maps an HTTP status without grpc-status to a gRPC code, as the gRPC
 * HTTP/2 spec's table does. */
/* libcurl's progress callback (called about once a second, and on I/O):
 * non-zero aborts the transfer. */
static int cancel_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		     curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return atomic_load((const atomic_bool *)arg) ? 1 : 0;
}

static int code_from_http(long http)
{
	switch (http) {
	case 400:
		return GRPC_STATUS_INTERNAL;
	case 401:
		return GRPC_STATUS_UNAUTHENTICATED;
	case 403:
		return GRPC_STATUS_PERMISSION_DENIED;
	case 404:
		return GRPC_STATUS_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504:
		return GRPC_STATUS_UNAVAILABLE;
	default:
		return GRPC_STATUS_UNKNOWN;
	}
}

static int set_status(struct grpc_status *st, int code, const char *fmt, const char *detail)
{
	st->code = code;
	snprintf(st->message, sizeof(st->message), fmt, detail);
	return 0;
}

/* known_size: the framed request size when known (unary), else -1. */
static int do_call(struct grpc_client *c, const char *method, struct call *call,
		   curl_off_t known_size, struct buf *resp, struct grpc_status *st)
{
	char url[2048], timeout_hdr[64];
	struct curl_slist *hdrs = NULL;
	CURLcode cc;
	int rc = 0;

	buf_reset(resp);
	st->code = GRPC_STATUS_UNKNOWN;
	st->message[0] = '\0';
	call->client = c;
	call->grpc_status = -1;
	snprintf(url, sizeof(url), "%s%s", c->base, method);
	snprintf(timeout_hdr, sizeof(timeout_hdr), "grpc-timeout: %dm", c->timeout_ms);
	hdrs = curl_slist_append(hdrs, "content-type: application/grpc+proto");
	hdrs = curl_slist_append(hdrs, "te: trailers");
	hdrs = curl_slist_append(hdrs, "grpc-accept-encoding: identity");
	hdrs = curl_slist_append(hdrs, "user-agent: kiln-grpc/1");
	hdrs = curl_slist_append(hdrs, timeout_hdr);
	if (c->auth_header)
		hdrs = curl_slist_append(hdrs, c->auth_header);
	if (!hdrs)
		return -ENOMEM;

	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c->curl, CURLOPT_READDATA, call);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, call);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, call);
	curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, known_size);
	/* Debian 12's libcurl 7.88 fails the second request on a reused
	 * prior-knowledge HTTP/2 connection when the body comes from a read
	 * callback ("Error in the HTTP2 framing layer"); a connection per
	 * call costs one handshake and is what the callers' rates can afford
	 * (a push every window, uploads rarely). */
	curl_easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(c->curl, CURLOPT_FORBID_REUSE, 1L);

	cc = curl_easy_perform(c->curl);
	curl_slist_free_all(hdrs);
	if (call->request_error) {
		rc = call->request_error;
		set_status(st, GRPC_STATUS_CANCELLED, "request aborted: %s", strerror(-rc));
		return rc;
	}
	if (call->too_large) {
		set_status(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "response larger than %s",
			   "the client's limit");
		return -EMSGSIZE;
	}
	if (cc == CURLE_ABORTED_BY_CALLBACK) {
		set_status(st, GRPC_STATUS_CANCELLED, "%s", "call cancelled by the client");
		return -ECANCELED;
	}
	if (cc != CURLE_OK && call->grpc_status < 0) {
		set_status(st,
			   cc == CURLE_OPERATION_TIMEDOUT ? GRPC_STATUS_DEADLINE_EXCEEDED
							  : GRPC_STATUS_UNAVAILABLE,
			   "%s", curl_easy_strerror(cc));
		return cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
	}
	if (call->grpc_status < 0) {
		char detail[64];

		snprintf(detail, sizeof(detail), "%ld", call->http_status);
		set_status(st,
			   call->http_status == 200 ? GRPC_STATUS_INTERNAL
						    : code_from_http(call->http_status),
			   call->http_status == 200 ? "no grpc-status in response (HTTP %s)"
						    : "HTTP status %s",
			   detail);
		return 0;
	}
	st->code = call->grpc_status;
	snprintf(st->message, sizeof(st->message), "%s", call->grpc_message);
	if (call->body.len) {
		const uint8_t *msg;
		size_t mlen, used;
		bool compressed = false;
		int pr = grpc_frame_parse(call->body.data, call->body.len, c->max_response, &msg,
					  &mlen, &compressed, &used);

		if (pr <= 0 || compressed) {
			set_status(st, GRPC_STATUS_INTERNAL, "%s",
				   compressed ? "compressed response (not negotiated)"
					      : "truncated response message");
			return -EPROTO;
		}
		if (buf_append(resp, msg, mlen) < 0)
			return -ENOMEM;
	}
	return 0;
}

struct single {
	const void *msg;
	size_t len;
	bool sent;
};

static int next_single(void *arg, const void **msg, size_t *len)
{
	struct single *s = arg;

	if (s->sent)
		return 0;
	s->sent = true;
	*msg = s->msg;
	*len = s->len;
	return 1;
}

int grpc_client_unary(struct grpc_client *c, const char *method, const void *req, size_t req_len,
		      struct buf *resp, struct grpc_status *status)
{
	struct single one = {req, req_len, false};
	struct call call = {.next = next_single, .next_arg = &one};
	int rc = do_call(c, method, &call, (curl_off_t)(req_len + GRPC_FRAME_HEADER), resp, status);

	buf_free(&call.pending);
	buf_free(&call.body);
	return rc;
}

int grpc_client_stream(struct grpc_client *c, const char *method, grpc_next_fn next, void *arg,
		       struct buf *resp, struct grpc_status *status)
{
	struct call call = {.next = next, .next_arg = arg};
	int rc = do_call(c, method, &call, -1, resp, status);

	buf_free(&call.pending);
	buf_free(&call.body);
	return rc;
}

void tls_client_files_apply(void *curl, const struct tls_client_files *f)
{
	if (f->ca_file)
		curl_easy_setopt(curl, CURLOPT_CAINFO, f->ca_file);
	if (f->cert_file)
		curl_easy_setopt(curl, CURLOPT_SSLCERT, f->cert_file);
	if (f->key_file)
		curl_easy_setopt(curl, CURLOPT_SSLKEY, f->key_file);
}

struct grpc_client *grpc_client_new(const struct grpc_client_config *cfg, struct kiln_error *e)
{
	struct grpc_client *c = calloc(1, sizeof(*c));
	const char *addr = cfg->address;
	size_t n;

	if (!c)
		goto nomem;
	if (!addr || !*addr) {
		kiln_error_set(e, EINVAL, "gRPC client: no address");
		goto err;
	}
	n = strlen(addr);
	while (n > 0 && addr[n - 1] == '/')
		n--;
	c->base = malloc(n + 16);
	if (!c->base)
		goto nomem;
	if (strncmp(addr, "http://", 7) == 0 || strncmp(addr, "https://", 8) == 0)
		snprintf(c->base, n + 16, "%.*s", (int)n, addr);
	else
		snprintf(c->base, n + 16, "%s://%.*s", cfg->insecure ? "http" : "https", (int)n,
			 addr);
	if (cfg->bearer_token && *cfg->bearer_token) {
		size_t tl = strlen(cfg->bearer_token) + 32;

		c->auth_header = malloc(tl);
		if (!c->auth_header)
			goto nomem;
		snprintf(c->auth_header, tl, "authorization: Bearer %s", cfg->bearer_token);
	}
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
	c->max_response = cfg->max_response ? cfg->max_response : ((size_t)64 << 20);
	c->skip_verify = cfg->skip_verify;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c->curl = curl_easy_init();
	if (!c->curl)
		goto nomem;
	/* Set once: the handle (and its connection) is reused by every call. */
	curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION,
			 strncmp(c->base, "https:", 6) == 0
			     ? (long)CURL_HTTP_VERSION_2TLS
			     : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	/* An upload of unknown size sent as POST: libcurl streams it in DATA
	 * frames as the read callback produces it (CURLOPT_POST without a size
	 * trips libcurl 7.88's HTTP/2 code). */
	curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, "POST");
	curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, read_cb);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	if (cfg->cancel) {
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, cancel_cb);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, (void *)cfg->cancel);
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	}
	if (getenv("KILN_GRPC_VERBOSE"))
		curl_easy_setopt(c->curl, CURLOPT_VERBOSE, 1L);
	if (c->skip_verify) {
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	tls_client_files_apply(c->curl, &cfg->tls);
	return c;
nomem:
	kiln_error_set(e, ENOMEM, "gRPC client: out of memory");
err:
	grpc_client_free(c);
	return NULL;
}

void grpc_client_free(struct grpc_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->auth_header);
	free(c);
}
