/*
 * h2.c — gRPC over HTTP/2: one thread per connection runs an nghttp2 server
 * session; handlers run on the worker pools.
 *
 * A stream's life:
 *   1. HEADERS: :path, content-type, grpc-timeout, grpc-encoding and
 *      authorization are recorded in a struct h2_stream (nghttp2 stream
 *      user data). Once the header block is complete the route's token role
 *      is checked (server_authorize_grpc/_http): a refused stream is
 *      answered at once and its DATA is never buffered.
 *   2. DATA: appended to the stream's body, at most grpc_max_msg_bytes + 5
 *      bytes. Past that the stream is answered RESOURCE_EXHAUSTED at once
 *      and later data is dropped.
 *   3. END_STREAM: the body must be exactly one length-prefixed message
 *      (1 flag byte, 4 length bytes big-endian); it is unwrapped (gunzipped
 *      when flagged and grpc-encoding is gzip) and queued on the method's
 *      pool as a struct h2_job. The connection thread goes back to reading.
 *   4. The worker runs the handler, links the job into conn->done and kicks
 *      the connection's eventfd. The connection thread submits HEADERS,
 *      one DATA message and the grpc-status/grpc-message trailers.
 *   Errors that need no handler are "trailers-only" responses: one HEADERS
 *   frame with :status 200, grpc-status and grpc-message, END_STREAM.
 *
 * Deadlines: a stream whose grpc-timeout expires before its job finishes is
 * answered DEADLINE_EXCEEDED by the connection thread; the late result is
 * dropped. A request whose body arrives slower than --request-body-min-rate
 * is answered and reset; the client's SETTINGS must come within
 * --handshake-timeout; a connection with no stream open for
 * --connection-idle-timeout gets GOAWAY (PINGs do not count). DATA reserves
 * its bytes in --max-inflight-request-bytes (conn_limits.h) until the
 * stream closes. The connection thread never exits while jobs are in flight (they
 * point at the connection), so no reference counting is needed.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "server/cors.h"
#include "server/health.h"
#include "server/internal.h"
#include "server/reflection.h"
#include "server/webrpc.h"

struct h2_stream {
	int32_t id;
	char path[4096]; /* with the query string for HTTP requests */
	char method[16];
	bool grpc_content_type;
	bool gzip_encoding;
	char encoding[32];
	int64_t deadline_ns;
	char authorization[AUTH_TOKEN_MAX + 32]; /* "" when absent */
	bool authorization_overlong;
	bool authorized; /* passed the gate (server_authorize_*) at HEADERS */
	struct buf body;
	uint64_t reserved; /* bytes of --max-inflight-request-bytes held */
	int64_t begin_ns;  /* HEADERS began: the body's rate counts from here */
	bool dispatched;   /* a job is running */
	bool answered;	   /* a response has been submitted */
	/* Answered before the client finished sending: once the response's
	 * last frame is out, RST_STREAM(NO_ERROR) asks it to stop (RFC 9113
	 * section 8.1), which closes the stream. Sent earlier, the reset could
	 * overtake the response. */
	bool reset_when_sent;
	/* response */
	struct buf out; /* prefix + message */
	size_t out_off;
	int status;
	char message[512];
	/* metrics */
	struct route_metrics *metrics;
	int64_t start_ns;
	/* grpc.health.v1.Health/Watch (health.h): the status last sent. */
	bool watching, watch_ending;
	enum health_status watch_sent;
	char watch_service[256];
	/* gRPC-Web and Connect (webrpc.h): decided when the headers are in. */
	enum webrpc_protocol web;
	char content_type[96];
	char origin[256]; /* for CORS (cors.h); "" when absent */
	bool preflight;	  /* an OPTIONS request: answered with the CORS allowances */
	char grpc_timeout[16], connect_timeout[16], connect_version[8];
	char content_encoding[32];
	/* A bidirectional stream (reflection.h): each message answered as it
	 * arrives, through read_watch; watch_ending once the client is done. */
	bool bidi;
	struct h2_stream *next, *prev;
};

struct h2_job {
	struct h2_conn *conn;
	int32_t stream_id;
	const struct grpc_method *method; /* a gRPC call ... */
	struct grpc_call call;
	uint8_t *req_owned;
	const struct http_route *route; /* ... or a plain HTTP request over HTTP/2 */
	struct http_request hreq;
	struct http_response hresp;
	char *hpath; /* owned: path without the query string */
	/* ... or a gRPC-Web/Connect call, with copies of what it needs from
	 * the stream (which a client reset may free while the job runs) */
	bool web;
	struct webrpc_request wreq;
	char wpath[4096], wauth[AUTH_TOKEN_MAX + 32];
	char wgrpc_timeout[16], wencoding[32], wconnect_timeout[16], wconnect_version[8];
	char wcontent_encoding[32];
	struct h2_job *next;
};

struct h2_conn {
	struct server *srv;
	struct conn_io io;
	nghttp2_session *session;
	int efd;
	pthread_mutex_t lock;
	struct h2_job *done; /* finished jobs, guarded by lock */
	int inflight;	     /* jobs queued or running (connection thread only) */
	struct h2_stream *streams;
	int watching;	    /* Watch streams open */
	bool settings_seen; /* the client's SETTINGS (after its preface) */
};

int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- response submission ------------------------------------------------------ */

/* grpc-message is percent-encoded (gRPC over HTTP/2 spec): printable ASCII
 * except '%' as is, everything else %XX. */
static void percent_encode(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
		if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
}

#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE         \
	}

static void stream_finish_metrics(struct h2_stream *st)
{
	if (st->metrics)
		metrics_observe(st->metrics, (uint64_t)(mono_ns() - st->start_ns),
				st->status != GRPC_STATUS_OK);
	st->metrics = NULL;
}

static void submit_web_error(struct h2_conn *c, struct h2_stream *st, int code, const char *msg);

/* Trailers-only error response. */
static void submit_error(struct h2_conn *c, struct h2_stream *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void submit_error(struct h2_conn *c, struct h2_stream *st, int code, const char *fmt, ...)
{
	char msg[512], enc[1600], status[16];
	va_list ap;

	if (st->answered)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (st->web) {
		submit_web_error(c, st, code, msg);
		return;
	}
	percent_encode(msg, enc, sizeof(enc));
	snprintf(status, sizeof(status), "%d", code);
	nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
			    NV("grpc-status", status), NV("grpc-message", enc)};
	st->status = code;
	st->answered = true;
	log_debug("grpc %s stream %d: %s: %s", st->path, st->id, grpc_status_name(code), msg);
	nghttp2_submit_response(c->session, st->id, nva, 4, NULL);
	stream_finish_metrics(st);
}

/* Copies the next piece of the stream's response body into nghttp2's
 * buffer; both data providers below start with it. */
static size_t copy_out(struct h2_stream *st, uint8_t *buf, size_t length)
{
	size_t left = st->out.len - st->out_off;
	size_t n = left < length ? left : length;

	memcpy(buf, st->out.data + st->out_off, n);
	st->out_off += n;
	return n;
}

static ssize_t read_response(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
			     size_t length, uint32_t *data_flags, nghttp2_data_source *source,
			     void *user_data)
{
	struct h2_stream *st = source->ptr;
	size_t n = copy_out(st, buf, length);

	if (st->out_off == st->out.len) {
		char status[16], enc[1600];
		*data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		snprintf(status, sizeof(status), "%d", st->status);
		percent_encode(st->message, enc, sizeof(enc));
		nghttp2_nv tr[] = {NV("grpc-status", status), NV("grpc-message", enc)};
		int rv = nghttp2_submit_trailer(session, stream_id, tr, st->message[0] ? 2 : 1);
		if (rv)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	return (ssize_t)n;
}

/* Success: HEADERS, DATA (the message), trailers. */
static void submit_ok(struct h2_conn *c, struct h2_stream *st, struct buf *msg)
{
	uint8_t prefix[5] = {0, (uint8_t)(msg->len >> 24), (uint8_t)(msg->len >> 16),
			     (uint8_t)(msg->len >> 8), (uint8_t)msg->len};
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;

	if (msg->len > max) {
		submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			     "response message of %zu bytes exceeds --grpc-max-message-size=%zu",
			     msg->len, max);
		return;
	}
	buf_reset(&st->out);
	if (buf_append(&st->out, prefix, 5) || buf_append(&st->out, msg->data, msg->len)) {
		submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			     "out of memory for the response");
		return;
	}
	st->out_off = 0;
	st->status = GRPC_STATUS_OK;
	st->message[0] = '\0';
	st->answered = true;
	nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
			    NV("grpc-accept-encoding", "identity,gzip")};
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_response};
	nghttp2_submit_response(c->session, st->id, nva, 3, &prd);
	stream_finish_metrics(st);
}

static void job_free(struct h2_job *j);
static void run_job(void *arg);

/* ---- plain HTTP over HTTP/2 ----------------------------------------------------------
 * Browsers speak HTTP/2 to a TLS port (ALPN "h2"), and curl may use prior
 * knowledge: requests that are not gRPC go through the same route table as
 * HTTP/1.1, on the query pool. */

static ssize_t read_http_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
			      size_t length, uint32_t *data_flags, nghttp2_data_source *source,
			      void *user_data)
{
	struct h2_stream *st = source->ptr;
	size_t n = copy_out(st, buf, length);

	if (st->out_off == st->out.len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static void submit_http(struct h2_conn *c, struct h2_stream *st, struct http_response *r)
{
	char status[8];
	snprintf(status, sizeof(status), "%d", r->status);
	nghttp2_nv nva[11] = {NV(":status", status)};
	size_t n = 1;
	const char *origin = cors_allow_origin(server_config(c->srv)->cors_origins,
					       st->origin[0] ? st->origin : NULL);
	if (origin) {
		nva[n++] = (nghttp2_nv)NV("access-control-allow-origin", origin);
		nva[n++] = (nghttp2_nv)NV("vary", "Origin");
		nva[n++] = (nghttp2_nv)NV("access-control-expose-headers", CORS_EXPOSE_HEADERS);
		if (st->preflight) {
			nva[n++] =
			    (nghttp2_nv)NV("access-control-allow-methods", CORS_ALLOW_METHODS);
			nva[n++] =
			    (nghttp2_nv)NV("access-control-allow-headers", CORS_ALLOW_HEADERS);
			nva[n++] = (nghttp2_nv)NV("access-control-max-age", CORS_MAX_AGE);
		}
	}
	nva[n++] = (nghttp2_nv)NV("content-type",
				  r->content_type ? r->content_type : "text/plain; charset=utf-8");
	if (r->disposition[0])
		nva[n++] = (nghttp2_nv)NV("content-disposition", r->disposition);
	if (r->timing[0])
		nva[n++] = (nghttp2_nv)NV("server-timing", r->timing);
	if (r->www_authenticate)
		nva[n++] = (nghttp2_nv)NV("www-authenticate", r->www_authenticate);
	buf_free(&st->out);
	st->out = r->body; /* moved */
	memset(&r->body, 0, sizeof(r->body));
	st->out_off = 0;
	st->answered = true;
	st->status = r->status >= 500 ? GRPC_STATUS_INTERNAL : GRPC_STATUS_OK;
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_http_body};
	nghttp2_submit_response(c->session, st->id, nva, n, st->out.len ? &prd : NULL);
	stream_finish_metrics(st);
}

static void submit_web_error(struct h2_conn *c, struct h2_stream *st, int code, const char *msg)
{
	struct http_response r = {0};
	webrpc_fail(st->web, code, msg, &r);
	submit_http(c, st, &r);
	st->status = code;
	buf_free(&r.body);
}

static void submit_http_error(struct h2_conn *c, struct h2_stream *st, int status, const char *msg)
{
	struct http_response r = {0};
	if (st->web) { /* in the call's own protocol */
		submit_web_error(c, st,
				 status == 413 || status == 503 ? GRPC_STATUS_RESOURCE_EXHAUSTED
				 : status == 408		? GRPC_STATUS_DEADLINE_EXCEEDED
								: GRPC_STATUS_INTERNAL,
				 msg);
		return;
	}
	http_error(&r, status, -1, "%s", msg);
	submit_http(c, st, &r);
	buf_free(&r.body);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent- and '+'-decodes s[0..n) into a new string. */
static char *url_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			*o++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i] == '+' ? ' ' : s[i];
		}
	}
	*o = '\0';
	return out;
}

static int parse_args(struct h2_job *j, const char *qs)
{
	size_t cap = 1;
	for (const char *p = qs; *p; p++)
		cap += *p == '&';
	j->hreq.arg_names = calloc(cap, sizeof(char *));
	j->hreq.arg_values = calloc(cap, sizeof(char *));
	if (!j->hreq.arg_names || !j->hreq.arg_values)
		return -ENOMEM;
	while (*qs) {
		const char *end = strchr(qs, '&');
		size_t len = end ? (size_t)(end - qs) : strlen(qs);
		const char *eq = memchr(qs, '=', len);
		size_t klen = eq ? (size_t)(eq - qs) : len;
		if (klen) {
			char *k = url_decode(qs, klen);
			char *v = eq ? url_decode(eq + 1, len - klen - 1) : strdup("");
			if (!k || !v) {
				free(k);
				free(v);
				return -ENOMEM;
			}
			j->hreq.arg_names[j->hreq.n_args] = k;
			j->hreq.arg_values[j->hreq.n_args++] = v;
		}
		if (!end)
			break;
		qs = end + 1;
	}
	return 0;
}

static void dispatch_http(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	size_t idx = 0;
	char *q = strchr(st->path, '?');
	struct h2_job *j = calloc(1, sizeof(*j));

	st->start_ns = mono_ns();
	st->metrics = &server_metrics(s)->unknown_http;
	protocol_count(PROTOCOL_HTTP);
	if (strcmp(st->method, "OPTIONS") == 0) { /* CORS preflight */
		struct http_response r = {.status = 204};
		free(j);
		st->preflight = true;
		submit_http(c, st, &r);
		return;
	}
	if (!j)
		return submit_http_error(c, st, 503, "out of memory");
	j->hpath = q ? strndup(st->path, (size_t)(q - st->path)) : strdup(st->path);
	if (!j->hpath || parse_args(j, q ? q + 1 : "")) {
		job_free(j);
		return submit_http_error(c, st, 503, "out of memory");
	}
	const char *method = st->method[0] ? st->method : "GET";
	j->route = server_find_http(method, j->hpath, &idx);
	if (!j->route) {
		bool other = server_find_http(NULL, j->hpath, NULL) != NULL;
		job_free(j);
		return submit_http_error(c, st, other ? 405 : 404,
					 other ? "method not allowed" : "no such route");
	}
	st->metrics = &server_metrics(s)->http[idx];
	j->conn = c;
	j->stream_id = st->id;
	j->hreq = (struct http_request){.srv = s,
					.method = method,
					.path = j->hpath,
					.body = st->body.data,
					.body_len = st->body.len,
					.arg_names = j->hreq.arg_names,
					.arg_values = j->hreq.arg_values,
					.n_args = j->hreq.n_args};
	j->req_owned = buf_steal(&st->body, &j->hreq.body_len);
	j->hreq.body = j->req_owned;
	j->hresp =
	    (struct http_response){.status = 200, .content_type = "text/plain; charset=utf-8"};
	st->dispatched = true;
	c->inflight++;
	pool_submit(s->query_pool, run_job, j);
}

/* ---- worker side ------------------------------------------------------------------ */

static void run_job(void *arg)
{
	struct h2_job *j = arg;
	struct h2_conn *c = j->conn;

	if (j->web)
		webrpc_serve(c->srv, &j->wreq, &j->hresp);
	else if (j->route)
		j->route->handler(&j->hreq, &j->hresp);
	else if (j->call.deadline_ns && mono_ns() > j->call.deadline_ns)
		grpc_fail(&j->call, GRPC_STATUS_DEADLINE_EXCEEDED,
			  "deadline exceeded before the call started");
	else
		j->method->handler(&j->call);

	pthread_mutex_lock(&c->lock);
	j->next = c->done;
	c->done = j;
	pthread_mutex_unlock(&c->lock);
	uint64_t one = 1;
	if (write(c->efd, &one, sizeof(one)) < 0)
		log_warn("h2: eventfd write: %s", strerror(errno));
}

static void job_free(struct h2_job *j)
{
	buf_free(&j->call.resp);
	buf_free(&j->hresp.body);
	free(j->req_owned);
	free(j->hpath);
	for (size_t i = 0; i < j->hreq.n_args; i++) {
		free(j->hreq.arg_names[i]);
		free(j->hreq.arg_values[i]);
	}
	free(j->hreq.arg_names);
	free(j->hreq.arg_values);
	free(j);
}

/* Connection thread: submits the responses of finished jobs. */
static void collect_done(struct h2_conn *c)
{
	uint64_t n;
	if (read(c->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("h2: eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&c->lock);
	struct h2_job *list = c->done;
	c->done = NULL;
	pthread_mutex_unlock(&c->lock);

	while (list) {
		struct h2_job *j = list;
		list = j->next;
		c->inflight--;
		struct h2_stream *st =
		    nghttp2_session_get_stream_user_data(c->session, j->stream_id);
		if (st && !st->answered && (j->route || j->web)) {
			st->dispatched = false;
			submit_http(c, st, &j->hresp);
		} else if (st && !st->answered) {
			st->dispatched = false;
			if (j->call.status != GRPC_STATUS_OK)
				submit_error(c, st, j->call.status, "%s", j->call.message);
			else
				submit_ok(c, st, &j->call.resp);
		}
		job_free(j);
	}
}

/* ---- grpc.health.v1.Health/Watch ----------------------------------------------------
 * The one server-streaming method: HEADERS, then one DATA message per status
 * change. The data provider defers while there is nothing new; watch_poll,
 * run on every turn of the connection loop (at least every 250 ms), appends
 * a message when the status changed and resumes it. When the server stops,
 * NOT_SERVING is sent and the stream ends with grpc-status 0. */

static ssize_t read_watch(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
			  uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
	struct h2_stream *st = source->ptr;
	size_t n = copy_out(st, buf, length);

	if (st->out_off < st->out.len)
		return (ssize_t)n;
	buf_reset(&st->out);
	st->out_off = 0;
	if (!st->watch_ending)
		return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
	*data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	nghttp2_nv tr[] = {NV("grpc-status", "0")};
	if (nghttp2_submit_trailer(session, stream_id, tr, 1))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return (ssize_t)n;
}

static void watch_start(struct h2_conn *c, struct h2_stream *st)
{
	struct kiln_error err = {0};
	struct grpc_frame fr = {0};
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;

	if (grpc_frame_unwrap(st->body.data, st->body.len, st->gzip_encoding, max, &fr, &err) ||
	    health_parse_request(fr.msg, fr.len, st->watch_service, sizeof(st->watch_service))) {
		free(fr.owned);
		return submit_error(c, st, GRPC_STATUS_INVALID_ARGUMENT,
				    "not a HealthCheckRequest");
	}
	free(fr.owned);
	if (c->watching >= HEALTH_MAX_WATCHES_PER_CONN)
		return submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
				    "more than %d Watch streams on one connection",
				    HEALTH_MAX_WATCHES_PER_CONN);
	health_count_watch();
	st->watch_sent = health_status(c->srv, st->watch_service);
	buf_reset(&st->out);
	st->out_off = 0;
	if (health_append_framed(&st->out, st->watch_sent))
		return submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	st->watching = true;
	st->answered = true;
	c->watching++;
	nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_watch};
	nghttp2_submit_response(c->session, st->id, nva, 2, &prd);
	stream_finish_metrics(st);
}

static void watch_poll(struct h2_conn *c)
{
	for (struct h2_stream *st = c->streams; st; st = st->next) {
		if (!st->watching || st->watch_ending)
			continue;
		enum health_status now = health_status(c->srv, st->watch_service);
		bool stopping = server_stopping(c->srv);
		if (now == st->watch_sent && !stopping)
			continue;
		if (now != st->watch_sent && health_append_framed(&st->out, now))
			continue; /* out of memory: try again next turn */
		st->watch_sent = now;
		st->watch_ending = stopping;
		nghttp2_session_resume_data(c->session, st->id);
	}
}

/* ---- request handling ------------------------------------------------------------- */

static void dispatch(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	size_t idx = 0;
	const struct grpc_method *m = server_find_grpc(st->path, &idx);
	size_t max = server_config(s)->grpc_max_msg_bytes;

	st->start_ns = mono_ns();
	st->metrics = m ? &server_metrics(s)->grpc[idx] : &server_metrics(s)->unknown_grpc;
	protocol_count(PROTOCOL_GRPC);
	if (!m)
		return submit_error(c, st, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s",
				    st->path);
	if (server_stopping(s))
		return submit_error(c, st, GRPC_STATUS_UNAVAILABLE, "server is shutting down");
	if (health_is_watch(st->path))
		return watch_start(c, st);

	struct kiln_error err = {0};
	struct grpc_frame fr = {0};
	int rc = 0;
	bool streaming = server_grpc_client_streaming(st->path);
	if (streaming) /* the handler parses the frames itself */
		fr.len = st->body.len;
	else
		rc = grpc_frame_unwrap(st->body.data, st->body.len, st->gzip_encoding, max, &fr,
				       &err);
	if (rc)
		return submit_error(c, st,
				    rc == -EFBIG    ? GRPC_STATUS_RESOURCE_EXHAUSTED
				    : rc == -ENOSYS ? GRPC_STATUS_UNIMPLEMENTED
						    : GRPC_STATUS_INTERNAL,
				    "%s", err.msg);
	struct h2_job *j = calloc(1, sizeof(*j));
	if (!j) {
		free(fr.owned);
		return submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	if (fr.owned) {
		j->req_owned = fr.owned;
	} else {
		/* Steal the body; the message starts 5 bytes in. */
		size_t len;
		j->req_owned = buf_steal(&st->body, &len);
		fr.msg = j->req_owned ? j->req_owned + (streaming ? 0 : 5) : (const uint8_t *)"";
	}
	j->call.req = fr.msg;
	j->call.req_len = fr.len;
	j->conn = c;
	j->stream_id = st->id;
	j->method = m;
	j->call.srv = s;
	j->call.deadline_ns = st->deadline_ns;
	st->dispatched = true;
	c->inflight++;
	pool_submit(m->pool == POOL_INGEST ? s->ingest_pool : s->query_pool, run_job, j);
}

/* A gRPC-Web or Connect call: webrpc_serve runs on the method's pool and
 * its answer goes out as a plain HTTP response. */
static void dispatch_web(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	const struct grpc_method *m = server_find_grpc(st->path, NULL);
	struct h2_job *j = calloc(1, sizeof(*j));

	st->start_ns = mono_ns();
	if (!j)
		return submit_web_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	j->web = true;
	j->conn = c;
	j->stream_id = st->id;
	snprintf(j->wpath, sizeof(j->wpath), "%.*s", (int)strcspn(st->path, "?"), st->path);
	snprintf(j->wauth, sizeof(j->wauth), "%s",
		 st->authorization_overlong ? "Bearer (longer than any token)" : st->authorization);
	snprintf(j->wgrpc_timeout, sizeof(j->wgrpc_timeout), "%s", st->grpc_timeout);
	snprintf(j->wencoding, sizeof(j->wencoding), "%s", st->encoding);
	snprintf(j->wconnect_timeout, sizeof(j->wconnect_timeout), "%s", st->connect_timeout);
	snprintf(j->wconnect_version, sizeof(j->wconnect_version), "%s", st->connect_version);
	snprintf(j->wcontent_encoding, sizeof(j->wcontent_encoding), "%s", st->content_encoding);
	j->req_owned = buf_steal(&st->body, &j->wreq.body_len);
	j->wreq = (struct webrpc_request){
	    .proto = st->web,
	    .path = j->wpath,
	    .body = j->req_owned,
	    .body_len = j->wreq.body_len,
	    .authorization = j->wauth[0] ? j->wauth : NULL,
	    .grpc_timeout = j->wgrpc_timeout,
	    .grpc_encoding = j->wencoding,
	    .connect_timeout = j->wconnect_timeout,
	    .connect_version = j->wconnect_version[0] ? j->wconnect_version : NULL,
	    .content_encoding = j->wcontent_encoding,
	    .start_ns = st->start_ns,
	};
	j->hresp = (struct http_response){.status = 200};
	st->dispatched = true;
	c->inflight++;
	pool_submit(m && m->pool == POOL_INGEST ? s->ingest_pool : s->query_pool, run_job, j);
}

/* ---- bidirectional streams (reflection.h) ----------------------------------------------
 * Each complete message of the request is answered on the connection thread
 * (the answers are lookups in embedded bytes) and its response appended to
 * st->out; read_watch sends what is there and defers, and sends the
 * trailers once the client has ended its side (watch_ending). */

static void bidi_send(struct h2_conn *c, struct h2_stream *st)
{
	if (!st->answered) {
		st->answered = true;
		st->status = GRPC_STATUS_OK;
		nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
		nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_watch};
		nghttp2_submit_response(c->session, st->id, nva, 2, &prd);
	} else {
		nghttp2_session_resume_data(c->session, st->id);
	}
}

static int bidi_data(struct h2_conn *c, struct h2_stream *st, const uint8_t *data, size_t len)
{
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;
	if (st->watch_ending || !st->authorized)
		return 0;
	if (st->body.len + len > max + 5 || buf_append(&st->body, data, len)) {
		buf_free(&st->body);
		if (!st->answered)
			submit_error(
			    c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    "request message larger than --grpc-max-message-size=%zu bytes", max);
		else
			nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
						  NGHTTP2_INTERNAL_ERROR);
		st->watch_ending = true;
		return 0;
	}
	while (st->body.len >= 5) {
		const uint8_t *b = st->body.data;
		size_t mlen = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
		if (st->body.len < 5 + mlen)
			break;
		const struct grpc_method *m = server_find_grpc(st->path, NULL);
		struct grpc_call call = {.srv = c->srv, .req = b + 5, .req_len = mlen};
		protocol_count(PROTOCOL_GRPC);
		if (b[0] != 0)
			grpc_fail(&call, GRPC_STATUS_UNIMPLEMENTED,
				  "compressed messages are not taken on this stream");
		else
			m->handler(&call);
		if (call.status != GRPC_STATUS_OK) {
			buf_free(&call.resp);
			if (!st->answered)
				submit_error(c, st, call.status, "%s", call.message);
			else
				nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
							  NGHTTP2_INTERNAL_ERROR);
			st->watch_ending = true;
			return 0;
		}
		int rc = webrpc_append_envelope(&st->out, 0, call.resp.data, call.resp.len);
		buf_free(&call.resp);
		if (rc) {
			nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
						  NGHTTP2_INTERNAL_ERROR);
			st->watch_ending = true;
			return 0;
		}
		memmove(st->body.data, st->body.data + 5 + mlen, st->body.len - 5 - mlen);
		st->body.len -= 5 + mlen;
		bidi_send(c, st);
	}
	return 0;
}

/* ---- nghttp2 callbacks -------------------------------------------------------------- */

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
		       void *user_data)
{
	struct h2_conn *c = user_data;
	ssize_t n = conn_write(&c->io, data, length);
	if (n == -EAGAIN)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (n < 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return n;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2_conn *c = user_data;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct h2_stream *st = calloc(1, sizeof(*st));
	if (!st)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	st->id = frame->hd.stream_id;
	st->begin_ns = mono_ns();
	st->next = c->streams;
	if (c->streams)
		c->streams->prev = st;
	c->streams = st;
	nghttp2_session_set_stream_user_data(session, st->id, st);
	return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user_data)
{
	struct h2_conn *c = user_data;
	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (!st)
		return 0;
#define IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)
	if (IS(":path")) {
		size_t n = valuelen < sizeof(st->path) - 1 ? valuelen : sizeof(st->path) - 1;
		memcpy(st->path, value, n);
		st->path[n] = '\0';
	} else if (IS(":method")) {
		size_t n = valuelen < sizeof(st->method) - 1 ? valuelen : sizeof(st->method) - 1;
		memcpy(st->method, value, n);
		st->method[n] = '\0';
	} else if (IS("content-type")) {
		/* application/grpc-web... is gRPC-Web, not native gRPC. */
		st->grpc_content_type =
		    valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
		    webrpc_protocol_of((const char *)value, valuelen) == WEBRPC_NONE;
		snprintf(st->content_type, sizeof(st->content_type), "%.*s", (int)valuelen,
			 (const char *)value);
	} else if (IS("origin")) {
		snprintf(st->origin, sizeof(st->origin), "%.*s", (int)valuelen,
			 (const char *)value);
	} else if (IS("connect-timeout-ms")) {
		snprintf(st->connect_timeout, sizeof(st->connect_timeout), "%.*s", (int)valuelen,
			 (const char *)value);
	} else if (IS("connect-protocol-version")) {
		snprintf(st->connect_version, sizeof(st->connect_version), "%.*s", (int)valuelen,
			 (const char *)value);
	} else if (IS("connect-content-encoding") ||
		   (IS("content-encoding") && !st->content_encoding[0])) {
		snprintf(st->content_encoding, sizeof(st->content_encoding), "%.*s", (int)valuelen,
			 (const char *)value);
	} else if (IS("grpc-encoding")) {
		size_t n =
		    valuelen < sizeof(st->encoding) - 1 ? valuelen : sizeof(st->encoding) - 1;
		memcpy(st->encoding, value, n);
		st->encoding[n] = '\0';
		st->gzip_encoding = strcmp(st->encoding, "gzip") == 0;
	} else if (IS("authorization")) {
		st->authorization_overlong = valuelen >= sizeof(st->authorization);
		if (!st->authorization_overlong) {
			memcpy(st->authorization, value, valuelen);
			st->authorization[valuelen] = '\0';
		}
	} else if (IS("grpc-timeout")) {
		snprintf(st->grpc_timeout, sizeof(st->grpc_timeout), "%.*s", (int)valuelen,
			 (const char *)value);
		int64_t t = grpc_timeout_parse((const char *)value, valuelen);
		if (t >= 0)
			st->deadline_ns = mono_ns() + t;
	}
#undef IS
	(void)c;
	return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
			 const uint8_t *data, size_t len, void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
	if (st && st->bidi)
		return bidi_data(c, st, data, len);
	if (!st || st->answered)
		return 0;
	const struct server_config *cfg = server_config(c->srv);
	size_t max = cfg->grpc_max_msg_bytes;
	if (st->body.len + len > (st->web ? webrpc_max_body(st->web, max) : max + 5)) {
		size_t idx = 0;
		const struct grpc_method *m = server_find_grpc(st->path, &idx);
		st->start_ns = mono_ns();
		st->metrics =
		    m ? &server_metrics(c->srv)->grpc[idx] : &server_metrics(c->srv)->unknown_grpc;
		buf_free(&st->body);
		if (!st->grpc_content_type) {
			submit_http_error(c, st, 413,
					  "request body larger than --grpc-max-message-size");
			return 0;
		}
		submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			     "request message larger than --grpc-max-message-size=%zu bytes", max);
		return 0;
	}
	if (!inflight_reserve(&c->srv->inflight_bytes, cfg->max_inflight_request_bytes, len)) {
		atomic_fetch_add(&server_metrics(c->srv)->requests_over_budget, 1);
		/* What this request held goes back at once, so that the others
		 * can finish: of several big requests at once, some complete. */
		buf_free(&st->body);
		inflight_release(&c->srv->inflight_bytes, st->reserved);
		st->reserved = 0;
		if (!st->grpc_content_type)
			submit_http_error(c, st, 503,
					  "the server holds --max-inflight-request-bytes of "
					  "request bodies already; retry in a few seconds");
		else
			submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
				     "the server holds --max-inflight-request-bytes=%llu bytes of "
				     "request bodies already; retry in a few seconds",
				     (unsigned long long)cfg->max_inflight_request_bytes);
		st->reset_when_sent = true;
		return 0;
	}
	st->reserved += len;
	if (buf_append(&st->body, data, len))
		submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			     "out of memory for the request");
	return 0;
}

/* The authorization gate for a stream whose request headers are complete:
 * returns true when it may proceed, else the stream has been answered (401
 * or 403, UNAUTHENTICATED or PERMISSION_DENIED). Unknown methods and
 * routes pass: dispatch answers them 404 / UNIMPLEMENTED. */
static bool authorize_stream(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	const char *authz = st->authorization_overlong ? "Bearer (longer than any token)"
			    : st->authorization[0]     ? st->authorization
						       : NULL;
	size_t idx = 0;

	if (st->web) {
		char path[sizeof(st->path)];
		struct http_response resp = {0};
		snprintf(path, sizeof(path), "%.*s", (int)strcspn(st->path, "?"), st->path);
		if (webrpc_authorize(s, st->web, path, authz, &resp) != 0) {
			protocol_count(webrpc_is_grpc_web(st->web) ? PROTOCOL_GRPC_WEB
								   : PROTOCOL_CONNECT);
			submit_http(c, st, &resp);
			buf_free(&resp.body);
			return false;
		}
	} else if (st->grpc_content_type) {
		const struct grpc_method *m = server_find_grpc(st->path, &idx);
		struct grpc_call call = {0};
		if (m && server_authorize_grpc(s, m, authz, &call) != 0) {
			st->start_ns = mono_ns();
			st->metrics = &server_metrics(s)->grpc[idx];
			submit_error(c, st, call.status, "%s", call.message);
			return false;
		}
	} else {
		char path[sizeof(st->path)];
		const char *method = st->method[0] ? st->method : "GET";
		snprintf(path, sizeof(path), "%.*s", (int)strcspn(st->path, "?"), st->path);
		const struct http_route *r = server_find_http(method, path, &idx);
		struct http_response resp = {0};
		if (r && server_authorize_http(s, r, path, authz, &resp) != 0) {
			st->start_ns = mono_ns();
			st->metrics = &server_metrics(s)->http[idx];
			submit_http(c, st, &resp);
			buf_free(&resp.body);
			return false;
		}
	}
	st->authorized = true;
	return true;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2_conn *c = user_data;
	if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK))
		c->settings_seen = true;
	if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
		struct h2_stream *st =
		    nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
		if (st && !st->answered) {
			char path[sizeof(st->path)];
			snprintf(path, sizeof(path), "%.*s", (int)strcspn(st->path, "?"), st->path);
			st->web = webrpc_select(st->method[0] ? st->method : "GET", path,
						st->content_type[0] ? st->content_type : NULL);
		}
		if (st && !st->answered && !authorize_stream(c, st))
			return 0;
		if (st && st->grpc_content_type && reflection_is_path(st->path))
			st->bidi = true;
	}
	if ((frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) ||
	    !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (st && st->bidi && st->authorized && !st->watch_ending) {
		st->watch_ending = true;
		bidi_send(c, st);
		return 0;
	}
	if (!st || st->answered || st->dispatched || !st->authorized)
		return 0;
	if (st->web)
		dispatch_web(c, st);
	else if (st->grpc_content_type)
		dispatch(c, st);
	else
		dispatch_http(c, st);
	return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
	    !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (st && st->reset_when_sent) {
		st->reset_when_sent = false;
		nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
	}
	return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
			   void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(session, stream_id);
	if (!st)
		return 0;
	nghttp2_session_set_stream_user_data(session, stream_id, NULL);
	if (st->prev)
		st->prev->next = st->next;
	else
		c->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	if (st->watching)
		c->watching--;
	if (!st->answered && st->metrics) { /* the client reset it */
		st->status = GRPC_STATUS_CANCELLED;
		stream_finish_metrics(st);
	}
	inflight_release(&c->srv->inflight_bytes, st->reserved);
	buf_free(&st->body);
	buf_free(&st->out);
	free(st);
	return 0;
}

/* ---- the connection loop ---------------------------------------------------------------- */

static void check_deadlines(struct h2_conn *c, int64_t now, int64_t *next)
{
	const struct server_config *cfg = server_config(c->srv);
	const struct h2_stream *slowest = NULL;
	double slowest_rate = 0;
	for (struct h2_stream *st = c->streams; st; st = st->next) {
		if (!st->answered && !st->dispatched && now > st->begin_ns) {
			double rate = (double)st->body.len / (double)(now - st->begin_ns);
			if (!slowest || rate < slowest_rate) {
				slowest = st;
				slowest_rate = rate;
			}
		}
	}
	/* The table may close this connection to make room if that is slow. */
	conn_entry_body_progress(c->io.entry, slowest ? slowest->begin_ns : 0,
				 slowest ? slowest->body.len : 0);
	for (struct h2_stream *st = c->streams; st; st = st->next) {
		/* A request that trickles in holds memory and a stream slot. */
		if (!st->answered && !st->dispatched &&
		    conn_body_too_slow(cfg, st->begin_ns, st->body.len, now)) {
			buf_free(&st->body);
			if (st->grpc_content_type)
				submit_error(c, st, GRPC_STATUS_DEADLINE_EXCEEDED,
					     "request arrived slower than "
					     "--request-body-min-rate=%zu bytes/s",
					     cfg->body_min_rate);
			else
				submit_http_error(c, st, 408,
						  "request arrived slower than "
						  "--request-body-min-rate");
			st->reset_when_sent = true;
			continue;
		}
		if (!st->deadline_ns || st->answered)
			continue;
		if (st->deadline_ns <= now)
			submit_error(c, st, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
		else if (!*next || st->deadline_ns < *next)
			*next = st->deadline_ns;
	}
}

static bool all_answered(const struct h2_conn *c)
{
	for (const struct h2_stream *st = c->streams; st; st = st->next)
		if (!st->answered)
			return false;
	return true;
}

static int open_session(struct h2_conn *c)
{
	nghttp2_session_callbacks *cb;
	if (nghttp2_session_callbacks_new(&cb))
		return -ENOMEM;
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	int rv = nghttp2_session_server_new(&c->session, cb, c);
	nghttp2_session_callbacks_del(cb);
	if (rv)
		return -ENOMEM;
	/* Bigger windows than HTTP/2's 64 KiB so that a multi-megabyte WriteRaw
	 * does not crawl; concurrency bounded so one client cannot queue
	 * unbounded work. */
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4 << 20},
	    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 64 << 10},
	};
	nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 3);
	nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, 16 << 20);
	return 0;
}

void h2_serve(struct server *s, struct conn_io *io)
{
	struct h2_conn c = {.srv = s, .io = *io};
	bool read_closed = false, goaway = false, terminated = false;
	int64_t stop_seen_ns = 0, start_ns = mono_ns(), idle_since_ns = start_ns;
	const struct server_config *cfg = server_config(s);
	uint8_t rbuf[16384];

	pthread_mutex_init(&c.lock, NULL);
	c.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c.efd < 0 || open_session(&c)) {
		log_warn("h2: cannot set up a session");
		goto out;
	}

	for (;;) {
		int64_t now = mono_ns();
		if (server_stopping(s) && !goaway) {
			nghttp2_submit_shutdown_notice(c.session);
			goaway = true;
			stop_seen_ns = now;
		}
		if (goaway && stop_seen_ns) {
			/* Requests still arriving will not be served. */
			for (struct h2_stream *st = c.streams; st; st = st->next)
				if (!st->answered && !st->dispatched)
					submit_error(&c, st, GRPC_STATUS_UNAVAILABLE,
						     "server is shutting down");
			/* A peer that stopped reading must not hold shutdown. */
			if (c.inflight == 0 && now - stop_seen_ns > 5000000000LL)
				break;
		}
		watch_poll(&c);
		if (goaway && !terminated && c.inflight == 0 && c.watching == 0 &&
		    all_answered(&c)) {
			nghttp2_session_terminate_session(c.session, NGHTTP2_NO_ERROR);
			terminated = true;
		}
		if (!read_closed && nghttp2_session_send(c.session) != 0)
			read_closed = true; /* write side broken: finish jobs, then leave */
		if (read_closed && c.inflight == 0)
			break;
		if (!nghttp2_session_want_read(c.session) &&
		    !nghttp2_session_want_write(c.session) && c.inflight == 0)
			break;

		int64_t next_deadline = 0;
		check_deadlines(&c, now, &next_deadline);
		if (nghttp2_session_want_write(c.session) && !read_closed &&
		    nghttp2_session_send(c.session) != 0)
			read_closed = true;

		int timeout_ms = 250; /* notices server_stop promptly */
		if (next_deadline) {
			int64_t ms = (next_deadline - now) / 1000000 + 1;
			if (ms < timeout_ms)
				timeout_ms = (int)ms;
		}
		struct pollfd pfd[2] = {{.fd = c.efd, .events = POLLIN}, {.fd = io->fd}};
		if (!read_closed) {
			pfd[1].events = POLLIN;
			if (nghttp2_session_want_write(c.session))
				pfd[1].events |= POLLOUT;
		}
		bool pending = c.io.ssl && SSL_pending(c.io.ssl) > 0;
		int n = pending ? 1 : poll(pfd, read_closed ? 1 : 2, timeout_ms);
		if (n < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN)
			collect_done(&c);
		if (!read_closed && (pending || (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))) {
			for (;;) {
				ssize_t r = conn_read(&c.io, rbuf, sizeof(rbuf));
				if (r == -EAGAIN)
					break;
				if (r <= 0) {
					read_closed = true;
					break;
				}
				ssize_t rv = nghttp2_session_mem_recv(c.session, rbuf, (size_t)r);
				if (rv < 0) {
					log_debug("h2: protocol error: %s",
						  nghttp2_strerror((int)rv));
					/* Tell the peer why before leaving. */
					nghttp2_session_send(c.session);
					read_closed = true;
					break;
				}
				if ((size_t)r < sizeof(rbuf))
					break;
			}
		}
		/* Idle means no stream open and no job running: PINGs, SETTINGS
		 * and WINDOW_UPDATEs do not keep a connection alive, or a client
		 * could hold a slot forever for one frame every few seconds. */
		bool busy = c.inflight > 0 || c.streams != NULL;
		conn_entry_set_busy(c.io.entry, busy);
		now = mono_ns();
		if (busy)
			idle_since_ns = now;
		if (!goaway && !busy &&
		    now - idle_since_ns > (int64_t)cfg->idle_timeout_s * 1000000000LL) {
			nghttp2_session_terminate_session(c.session, NGHTTP2_NO_ERROR);
			goaway = terminated = true;
		}
		/* The client's SETTINGS must follow its preface promptly. */
		if (!c.settings_seen && !read_closed &&
		    now - start_ns > (int64_t)cfg->handshake_timeout_s * 1000000000LL) {
			log_debug("h2: no SETTINGS within --handshake-timeout; closing");
			break;
		}
	}
out:
	/* Jobs hold pointers into c: wait for every one (only reachable with
	 * inflight == 0 above, except on setup failure where none started). */
	while (c.inflight > 0) {
		struct pollfd p = {.fd = c.efd, .events = POLLIN};
		if (poll(&p, 1, 1000) > 0)
			collect_done(&c);
	}
	if (c.session)
		nghttp2_session_del(c.session); /* closes streams: frees them */
	while (c.streams) {
		struct h2_stream *st = c.streams;
		c.streams = st->next;
		buf_free(&st->body);
		buf_free(&st->out);
		free(st);
	}
	if (c.efd >= 0)
		close(c.efd);
	log_debug("h2: connection closed after %lld ms",
		  (long long)((mono_ns() - start_ns) / 1000000));
	pthread_mutex_destroy(&c.lock);
	conn_close(&c.io);
}
