/*
 * h2_respond.c — how an HTTP/2 stream is answered: a gRPC success (HEADERS,
 * one length-prefixed DATA message, grpc-status trailers), a gRPC
 * "trailers-only" error, or a plain HTTP response for requests over HTTP/2
 * that are not gRPC. Each marks the stream answered and records its
 * latency in the route's metrics; nothing here blocks or touches the socket
 * (nghttp2 sends what was submitted on the connection loop's next turn).
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "server/h2_internal.h"

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

void h2_stream_finish_metrics(struct h2_stream *st)
{
	if (st->metrics)
		metrics_observe(st->metrics, (uint64_t)(mono_ns() - st->start_ns),
				st->status != GRPC_STATUS_OK);
	st->metrics = NULL;
}

/* Trailers-only error response. */
void h2_submit_error(struct h2_conn *c, struct h2_stream *st, int code, const char *fmt, ...)
{
	char msg[512], enc[1600], status[16];
	va_list ap;

	if (st->answered)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (st->web) {
		h2_submit_web_error(c, st, code, msg);
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
	h2_stream_finish_metrics(st);
}

/* Copies the next piece of the stream's response body into nghttp2's
 * buffer; both data providers below start with it. */
size_t h2_copy_out(struct h2_stream *st, uint8_t *buf, size_t length)
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
	size_t n = h2_copy_out(st, buf, length);

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
void h2_submit_ok(struct h2_conn *c, struct h2_stream *st, struct buf *msg)
{
	uint8_t prefix[5] = {0, (uint8_t)(msg->len >> 24), (uint8_t)(msg->len >> 16),
			     (uint8_t)(msg->len >> 8), (uint8_t)msg->len};
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;

	if (msg->len > max) {
		h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
				"response message of %zu bytes exceeds --grpc-max-message-size=%zu",
				msg->len, max);
		return;
	}
	buf_reset(&st->out);
	if (buf_append(&st->out, prefix, 5) || buf_append(&st->out, msg->data, msg->len)) {
		h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
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
	h2_stream_finish_metrics(st);
}

static ssize_t read_http_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
			      size_t length, uint32_t *data_flags, nghttp2_data_source *source,
			      void *user_data)
{
	struct h2_stream *st = source->ptr;
	size_t n = h2_copy_out(st, buf, length);

	if (st->out_off == st->out.len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

void h2_submit_http(struct h2_conn *c, struct h2_stream *st, struct http_response *r)
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
	h2_stream_finish_metrics(st);
}

void h2_submit_web_error(struct h2_conn *c, struct h2_stream *st, int code, const char *msg)
{
	struct http_response r = {0};
	webrpc_fail(st->web, code, msg, &r);
	h2_submit_http(c, st, &r);
	st->status = code;
	buf_free(&r.body);
}

void h2_submit_http_error(struct h2_conn *c, struct h2_stream *st, int status, const char *msg)
{
	struct http_response r = {0};
	if (st->web) { /* in the call's own protocol */
		h2_submit_web_error(c, st,
				    status == 413 || status == 503 ? GRPC_STATUS_RESOURCE_EXHAUSTED
				    : status == 408		   ? GRPC_STATUS_DEADLINE_EXCEEDED
								   : GRPC_STATUS_INTERNAL,
				    msg);
		return;
	}
	http_error(&r, status, -1, "%s", msg);
	h2_submit_http(c, st, &r);
	buf_free(&r.body);
}
