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

void h2_watch_poll(struct h2_conn *c)
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
