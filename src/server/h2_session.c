/*
 * h2_session.c — the nghttp2 server session of one connection: its
 * callbacks record a stream's headers and body (steps 1-3 of h2.c's file
 * comment), apply the per-request limits as DATA arrives (message size,
 * --max-inflight-request-bytes), run the authorization gate once the header
 * block is complete, and free a stream when nghttp2 closes it.
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
		return h2_bidi_data(c, st, data, len);
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
			h2_submit_http_error(c, st, 413,
					     "request body larger than --grpc-max-message-size");
			return 0;
		}
		h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
				"request message larger than --grpc-max-message-size=%zu bytes",
				max);
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
			h2_submit_http_error(c, st, 503,
					     "the server holds --max-inflight-request-bytes of "
					     "request bodies already; retry in a few seconds");
		else
			h2_submit_error(
			    c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    "the server holds --max-inflight-request-bytes=%llu bytes of "
			    "request bodies already; retry in a few seconds",
			    (unsigned long long)cfg->max_inflight_request_bytes);
		st->reset_when_sent = true;
		return 0;
	}
	st->reserved += len;
	if (buf_append(&st->body, data, len))
		h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED,
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
			h2_submit_http(c, st, &resp);
			buf_free(&resp.body);
			return false;
		}
	} else if (st->grpc_content_type) {
		const struct grpc_method *m = server_find_grpc(st->path, &idx);
		struct grpc_call call = {0};
		if (m && server_authorize_grpc(s, m, authz, &call) != 0) {
			st->start_ns = mono_ns();
			st->metrics = &server_metrics(s)->grpc[idx];
			h2_submit_error(c, st, call.status, "%s", call.message);
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
			h2_submit_http(c, st, &resp);
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
		h2_bidi_send(c, st);
		return 0;
	}
	if (!st || st->answered || st->dispatched || !st->authorized)
		return 0;
	if (st->web)
		h2_dispatch_web(c, st);
	else if (st->grpc_content_type)
		h2_dispatch_grpc(c, st);
	else
		h2_dispatch_http(c, st);
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
		h2_stream_finish_metrics(st);
	}
	inflight_release(&c->srv->inflight_bytes, st->reserved);
	buf_free(&st->body);
	buf_free(&st->out);
	free(st);
	return 0;
}

int h2_open_session(struct h2_conn *c)
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
