/*
 * webrpc_frame.c — the pure parts of gRPC-Web and Connect (webrpc.h):
 * content types, base64, envelopes, trailer frames, Connect's error codes
 * and timeouts, and the per-protocol request counters. No server state, so
 * that fuzz/fuzz_grpcweb_frame.c drives them directly.
 */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "server/webrpc.h"

/* ---- content types -------------------------------------------------------------- */

static bool ct_is(const char *ct, size_t len, const char *want)
{
	size_t n = strlen(want);
	return len == n && strncasecmp(ct, want, n) == 0;
}

enum webrpc_protocol webrpc_protocol_of(const char *content_type, size_t len)
{
	if (!content_type)
		return WEBRPC_NONE;
	/* The media type alone: parameters (";charset=utf-8") and spaces off. */
	size_t n = 0;
	while (n < len && content_type[n] != ';')
		n++;
	while (n && content_type[n - 1] == ' ')
		n--;
	const char *ct = content_type;
	if (ct_is(ct, n, "application/grpc-web") || ct_is(ct, n, "application/grpc-web+proto"))
		return WEBRPC_GRPC_WEB;
	if (ct_is(ct, n, "application/grpc-web-text") ||
	    ct_is(ct, n, "application/grpc-web-text+proto"))
		return WEBRPC_GRPC_WEB_TEXT;
	if (ct_is(ct, n, "application/proto"))
		return WEBRPC_CONNECT_PROTO;
	if (ct_is(ct, n, "application/json"))
		return WEBRPC_CONNECT_JSON;
	if (ct_is(ct, n, "application/connect+proto"))
		return WEBRPC_CONNECT_STREAM_PROTO;
	if (ct_is(ct, n, "application/connect+json"))
		return WEBRPC_CONNECT_STREAM_JSON;
	if ((n > 21 && strncasecmp(ct, "application/grpc-web+", 21) == 0) ||
	    (n > 26 && strncasecmp(ct, "application/grpc-web-text+", 26) == 0) ||
	    (n > 20 && strncasecmp(ct, "application/connect+", 20) == 0))
		return WEBRPC_UNSUPPORTED;
	return WEBRPC_NONE;
}

enum webrpc_protocol webrpc_select(const char *http_method, const char *path,
				   const char *content_type)
{
	enum webrpc_protocol p =
	    webrpc_protocol_of(content_type, content_type ? strlen(content_type) : 0);
	if (p == WEBRPC_NONE || !http_method || strcmp(http_method, "POST") != 0)
		return WEBRPC_NONE;
	if (p == WEBRPC_CONNECT_PROTO || p == WEBRPC_CONNECT_JSON)
		return server_find_grpc(path, NULL) ? p : WEBRPC_NONE;
	return p;
}

bool webrpc_is_grpc_web(enum webrpc_protocol p)
{
	return p == WEBRPC_GRPC_WEB || p == WEBRPC_GRPC_WEB_TEXT;
}

const char *webrpc_family(enum webrpc_protocol p)
{
	return webrpc_is_grpc_web(p) ? "grpc-web" : "connect";
}

size_t webrpc_max_body(enum webrpc_protocol p, size_t max_msg)
{
	size_t framed = max_msg + 5 + 5; /* a message and gRPC-Web's optional trailer */
	return p == WEBRPC_GRPC_WEB_TEXT ? (framed + 2) / 3 * 4 + 64 : framed;
}

/* ---- base64 ----------------------------------------------------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(uint8_t c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static bool b64_space(uint8_t c)
{
	return c == '\n' || c == '\r' || c == ' ' || c == '\t';
}

int webrpc_base64_decode(const uint8_t *in, size_t len, struct buf *out, struct kiln_error *err)
{
	/* Line breaks and spaces (as base64(1) writes, or a proxy folds) are
	 * skipped: the body is read without them. */
	for (size_t i = 0; i < len; i++) {
		if (!b64_space(in[i]))
			continue;
		struct buf packed = {0};
		if (buf_reserve(&packed, len))
			return kiln_error_set(err, ENOMEM, "out of memory for the decoded body");
		for (size_t k = 0; k < len; k++)
			if (!b64_space(in[k]))
				packed.data[packed.len++] = in[k];
		int rc = webrpc_base64_decode(packed.data, packed.len, out, err);
		buf_free(&packed);
		return rc;
	}
	if (len % 4)
		return kiln_error_set(err, EBADMSG,
				      "gRPC-Web-text body: %zu base64 characters, not a multiple "
				      "of 4 (truncated?)",
				      len);
	if (buf_reserve(out, out->len + len / 4 * 3))
		return kiln_error_set(err, ENOMEM, "out of memory for the decoded body");
	for (size_t i = 0; i < len; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			uint8_t c = in[i + k];
			if (c == '=' && k >= 2) {
				pad++;
				v[k] = 0;
				continue;
			}
			v[k] = pad ? -1 : b64_value(c);
			if (v[k] < 0)
				return kiln_error_set(
				    err, EBADMSG,
				    "gRPC-Web-text body: byte %zu (0x%02x) is not "
				    "base64",
				    i + (size_t)k, c);
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		uint8_t b[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
		/* Bits the padding hides must be zero (RFC 4648 section 3.5). */
		if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
			return kiln_error_set(err, EBADMSG,
					      "gRPC-Web-text body: non-canonical base64 group at "
					      "byte %zu",
					      i);
		memcpy(out->data + out->len, b, (size_t)(3 - pad));
		out->len += (size_t)(3 - pad);
	}
	return 0;
}

int webrpc_base64_encode(const uint8_t *in, size_t len, struct buf *out)
{
	if (buf_reserve(out, out->len + (len + 2) / 3 * 4))
		return -ENOMEM;
	char *o = (char *)out->data + out->len;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t w = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*o++ = b64_alphabet[w >> 18];
		*o++ = b64_alphabet[(w >> 12) & 63];
		*o++ = b64_alphabet[(w >> 6) & 63];
		*o++ = b64_alphabet[w & 63];
	}
	if (i < len) {
		uint32_t w = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
		*o++ = b64_alphabet[w >> 18];
		*o++ = b64_alphabet[(w >> 12) & 63];
		*o++ = i + 1 < len ? b64_alphabet[(w >> 6) & 63] : '=';
		*o++ = '=';
	}
	out->len = (size_t)((uint8_t *)o - out->data);
	return 0;
}

/* ---- envelopes ---------------------------------------------------------------------- */

int webrpc_envelopes_check(const uint8_t *body, size_t len, uint8_t allowed_flags, size_t max_msg,
			   struct kiln_error *err)
{
	size_t off = 0;
	int n = 0;
	while (off < len) {
		if (len - off < 5)
			return kiln_error_set(err, EBADMSG,
					      "envelope %d at byte %zu: %zu bytes left, need a "
					      "5-byte prefix (truncated?)",
					      n, off, len - off);
		const uint8_t *p = body + off;
		uint32_t mlen =
		    (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
		if (p[0] & ~allowed_flags)
			return kiln_error_set(err, EBADMSG,
					      "envelope %d at byte %zu: flags 0x%02x not allowed "
					      "here",
					      n, off, p[0]);
		if (mlen > max_msg)
			return kiln_error_set(err, EFBIG,
					      "envelope %d: message of %u bytes exceeds "
					      "--grpc-max-message-size=%zu",
					      n, mlen, max_msg);
		if (mlen > len - off - 5)
			return kiln_error_set(err, EBADMSG,
					      "envelope %d at byte %zu: says %u bytes, %zu follow "
					      "(truncated?)",
					      n, off, mlen, len - off - 5);
		off += 5 + (size_t)mlen;
		if (n == INT32_MAX)
			return kiln_error_set(err, EBADMSG, "too many envelopes");
		n++;
	}
	return n;
}

int webrpc_append_envelope(struct buf *out, uint8_t flags, const uint8_t *msg, size_t len)
{
	uint8_t prefix[5] = {flags, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			     (uint8_t)len};
	if (len > UINT32_MAX)
		return -EFBIG;
	if (buf_append(out, prefix, 5) || buf_append(out, msg, len))
		return -ENOMEM;
	return 0;
}

int webrpc_append_trailer(struct buf *out, int status, const char *message)
{
	struct buf t = {0};
	int rc = buf_printf(&t, "grpc-status: %d\r\n", status);
	if (rc == 0 && message && *message) {
		/* grpc-message is percent-encoded like over HTTP/2: printable
		 * ASCII but '%' as is. */
		rc = buf_append_str(&t, "grpc-message: ");
		for (const unsigned char *c = (const unsigned char *)message; rc == 0 && *c; c++)
			rc = *c >= 0x20 && *c <= 0x7e && *c != '%' ? buf_append(&t, c, 1)
								   : buf_printf(&t, "%%%02X", *c);
		if (rc == 0)
			rc = buf_append_str(&t, "\r\n");
	}
	if (rc == 0)
		rc = webrpc_append_envelope(out, 0x80, t.data, t.len);
	buf_free(&t);
	return rc;
}

/* ---- Connect's codes, errors and timeouts ------------------------------------------------ */

static const struct {
	const char *name;
	int http;
} connect_codes[] = {
    [GRPC_STATUS_OK] = {"ok", 200},
    [GRPC_STATUS_CANCELLED] = {"canceled", 499},
    [GRPC_STATUS_UNKNOWN] = {"unknown", 500},
    [GRPC_STATUS_INVALID_ARGUMENT] = {"invalid_argument", 400},
    [GRPC_STATUS_DEADLINE_EXCEEDED] = {"deadline_exceeded", 504},
    [GRPC_STATUS_NOT_FOUND] = {"not_found", 404},
    [GRPC_STATUS_ALREADY_EXISTS] = {"already_exists", 409},
    [GRPC_STATUS_PERMISSION_DENIED] = {"permission_denied", 403},
    [GRPC_STATUS_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
    [GRPC_STATUS_FAILED_PRECONDITION] = {"failed_precondition", 400},
    [GRPC_STATUS_ABORTED] = {"aborted", 409},
    [GRPC_STATUS_OUT_OF_RANGE] = {"out_of_range", 400},
    [GRPC_STATUS_UNIMPLEMENTED] = {"unimplemented", 501},
    [GRPC_STATUS_INTERNAL] = {"internal", 500},
    [GRPC_STATUS_UNAVAILABLE] = {"unavailable", 503},
    [GRPC_STATUS_DATA_LOSS] = {"data_loss", 500},
    [GRPC_STATUS_UNAUTHENTICATED] = {"unauthenticated", 401},
};

const char *webrpc_connect_code(int grpc_code)
{
	if (grpc_code < 0 || grpc_code > GRPC_STATUS_UNAUTHENTICATED)
		return "unknown";
	return connect_codes[grpc_code].name;
}

int webrpc_connect_http_status(int grpc_code)
{
	if (grpc_code < 0 || grpc_code > GRPC_STATUS_UNAUTHENTICATED)
		return 500;
	return connect_codes[grpc_code].http;
}

int webrpc_append_connect_error(struct buf *out, int status, const char *message)
{
	struct json_writer w;
	json_writer_init(&w, out);
	json_begin_object(&w);
	json_key(&w, "code");
	json_string(&w, webrpc_connect_code(status));
	if (message && *message) {
		json_key(&w, "message");
		json_string(&w, message);
	}
	json_end_object(&w);
	return json_writer_error(&w);
}

int64_t webrpc_connect_timeout_parse(const char *v)
{
	size_t n = v ? strlen(v) : 0;
	int64_t ms = 0;
	if (n < 1 || n > 10)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)v[i]))
			return -1;
		ms = ms * 10 + (v[i] - '0');
	}
	return ms * 1000000;
}

/* ---- per-protocol counters ------------------------------------------------------------ */

static _Atomic uint64_t protocol_requests[PROTOCOL_HTTP + 1];

void protocol_count(enum server_protocol p)
{
	if ((unsigned)p <= PROTOCOL_HTTP)
		atomic_fetch_add(&protocol_requests[p], 1);
}

void protocol_metrics_render(struct buf *out)
{
	static const char *const names[] = {"grpc", "grpc-web", "connect", "http"};
	buf_append_str(out, "# HELP kiln_protocol_requests_total Requests by protocol: native "
			    "gRPC, gRPC-Web (binary and text), Connect (unary and streaming), "
			    "plain HTTP.\n"
			    "# TYPE kiln_protocol_requests_total counter\n");
	for (size_t i = 0; i <= PROTOCOL_HTTP; i++)
		buf_printf(out, "kiln_protocol_requests_total{protocol=\"%s\"} %llu\n", names[i],
			   (unsigned long long)atomic_load(&protocol_requests[i]));
}
