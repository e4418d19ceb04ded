/*
 * h2_watch.c — grpc.health.v1.Health/Watch, the one server-streaming method
 * (see the section comment below).
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
	size_t n = h2_copy_out(st, buf, length);

	if (st->out_off < st->out.len)
		return (ssize_t)n;
	buf_reset(&st->out);
	st->out_off = 0;
	if (!st->watch_ending)
		return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
	if (st->web) { /* the protocol's end went out in the body */
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
		return (ssize_t)n;
	}
	*data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	nghttp2_nv tr[] = {NV("grpc-status", "0")};
	if (nghttp2_submit_trailer(session, stream_id, tr, 1))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return (ssize_t)n;
}

void h2_watch_start(struct h2_conn *c, struct h2_stream *st)
{
	struct kiln_error err = {0};
	struct grpc_frame fr = {0};
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;

	if (grpc_frame_unwrap(st->body.data, st->body.len, st->gzip_encoding, max, &fr, &err) ||
	    health_parse_request(fr.msg, fr.len, st->watch_service, sizeof(st->watch_service))) {
		free(fr.owned);
		return h2_submit_error(c, st, GRPC_STATUS_INVALID_ARGUMENT,
				       "not a HealthCheckRequest");
	}
	free(fr.owned);
	if (c->watching >= HEALTH_MAX_WATCHES_PER_CONN)
		return h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
				       "more than %d Watch streams on one connection",
				       HEALTH_MAX_WATCHES_PER_CONN);
	health_count_watch();
	st->watch_sent = health_status(c->srv, st->watch_service);
	buf_reset(&st->out);
	st->out_off = 0;
	if (health_append_framed(&st->out, st->watch_sent))
		return h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	st->watching = true;
	st->answered = true;
	c->watching++;
	nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_watch};
	nghttp2_submit_response(c->session, st->id, nva, 2, &prd);
	h2_stream_finish_metrics(st);
}

/* Watch over gRPC-Web or Connect streaming (webrpc.h): the same stream,
 * each message and the end in the call's own framing, ending with the
 * stream's last DATA frame instead of trailers. */
void h2_web_watch_start(struct h2_conn *c, struct h2_stream *st)
{
	char why[512] = "";
	struct webrpc_request wr = {
	    .proto = st->web,
	    .path = st->path,
	    .body = st->body.data,
	    .body_len = st->body.len,
	    .authorization = st->authorization_overlong ? "Bearer (longer than any token)"
			     : st->authorization[0]	? st->authorization
							: NULL,
	    .grpc_encoding = st->encoding,
	    .connect_version = st->connect_version[0] ? st->connect_version : NULL,
	    .content_encoding = st->content_encoding,
	};
	int code;

	protocol_count(webrpc_is_grpc_web(st->web) ? PROTOCOL_GRPC_WEB : PROTOCOL_CONNECT);
	code = webrpc_watch_begin(c->srv, &wr, st->watch_service, sizeof(st->watch_service), why,
				  sizeof(why));
	if (code != GRPC_STATUS_OK)
		return h2_submit_web_error(c, st, code, why);
	if (c->watching >= HEALTH_MAX_WATCHES_PER_CONN) {
		snprintf(why, sizeof(why), "more than %d Watch streams on one connection",
			 HEALTH_MAX_WATCHES_PER_CONN);
		return h2_submit_web_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, why);
	}
	health_count_watch();
	st->watch_sent = health_status(c->srv, st->watch_service);
	buf_reset(&st->out);
	st->out_off = 0;
	if (webrpc_watch_message(st->web, st->watch_sent, &st->out))
		return h2_submit_web_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	st->watching = true;
	st->answered = true;
	st->status = GRPC_STATUS_OK;
	c->watching++;

	nghttp2_nv nva[6] = {NV(":status", "200")};
	size_t n = 1;
	const char *origin = cors_allow_origin(server_config(c->srv)->cors_origins,
					       st->origin[0] ? st->origin : NULL);
	if (origin) {
		nva[n++] = (nghttp2_nv)NV("access-control-allow-origin", origin);
		nva[n++] = (nghttp2_nv)NV("vary", "Origin");
		nva[n++] = (nghttp2_nv)NV("access-control-expose-headers", CORS_EXPOSE_HEADERS);
	}
	nva[n++] = (nghttp2_nv)NV("content-type", webrpc_response_type(st->web));
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_watch};
	nghttp2_submit_response(c->session, st->id, nva, n, &prd);
	h2_stream_finish_metrics(st);
}

void h2_watch_poll(struct h2_conn *c)
{
	for (struct h2_stream *st = c->streams; st; st = st->next) {
		if (!st->watching || st->watch_ending)
			continue;
		enum health_status now = health_status(c->srv, st->watch_service);
		bool stopping = server_stopping(c->srv);
		if (now == st->watch_sent && !stopping)
			continue;
		if (now != st->watch_sent && (st->web ? webrpc_watch_message(st->web, now, &st->out)
						      : health_append_framed(&st->out, now)))
			continue; /* out of memory: try again next turn */
		if (stopping && st->web && webrpc_watch_end(st->web, &st->out))
			continue;
		st->watch_sent = now;
		st->watch_ending = stopping;
		nghttp2_session_resume_data(c->session, st->id);
	}
}

/* ---- bidirectional streams (reflection.h) ----------------------------------------------
 * Each complete message of the request is answered on the connection thread
 * (the answers are lookups in embedded bytes) and its response appended to
 * st->out; read_watch sends what is there and defers, and sends the
 * trailers once the client has ended its side (watch_ending). */

void h2_bidi_send(struct h2_conn *c, struct h2_stream *st)
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

int h2_bidi_data(struct h2_conn *c, struct h2_stream *st, const uint8_t *data, size_t len)
{
	size_t max = server_config(c->srv)->grpc_max_msg_bytes;
	if (st->watch_ending || !st->authorized)
		return 0;
	if (st->body.len + len > max + 5 || buf_append(&st->body, data, len)) {
		buf_free(&st->body);
		if (!st->answered)
			h2_submit_error(
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
				h2_submit_error(c, st, call.status, "%s", call.message);
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
		h2_bidi_send(c, st);
	}
	return 0;
}
