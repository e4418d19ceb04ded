/*
 * http1_watch.c — Health/Watch as a stream over HTTP/1.1 (http1_watch.h).
 *
 * libmicrohttpd asks read_stream for more body whenever the last piece is
 * out; it runs on the connection's own thread, so waiting there for the
 * next status change holds up nothing else. Shutdown ends the wait: the
 * server's stopping flag is checked on every turn, NOT_SERVING and the
 * protocol's end are sent, and the stream ends. A client that goes away is
 * noticed by polling its socket for a hang-up while waiting (nothing is
 * written while the status holds), so its thread does not wait for the
 * next change.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/cors.h"
#include "server/health.h"
#include "server/http1_watch.h"

#define WATCH_POLL_MS 100

/* Streams whose response libmicrohttpd still holds (until it has sent the
 * end and freed it): what http1_watch_drain waits for. */
static _Atomic int open_streams;

struct web_watch {
	struct server *srv;
	enum webrpc_protocol proto;
	int fd; /* the client's socket, watched for a hang-up; -1 if unknown */
	char service[256];
	enum health_status sent;
	struct buf out;
	size_t off;
	bool ending;  /* the end is in out: after it, the stream ends */
	bool counted; /* in open_streams */
};

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct web_watch *w = cls;

	while (w->off == w->out.len) {
		if (w->ending)
			return MHD_CONTENT_READER_END_OF_STREAM;
		buf_reset(&w->out);
		w->off = 0;
		enum health_status now = health_status(w->srv, w->service);
		bool stopping = server_stopping(w->srv);
		if (now != w->sent) {
			if (webrpc_watch_message(w->proto, now, &w->out))
				return MHD_CONTENT_READER_END_WITH_ERROR;
			w->sent = now;
		}
		if (stopping) {
			if (webrpc_watch_end(w->proto, &w->out))
				return MHD_CONTENT_READER_END_WITH_ERROR;
			w->ending = true;
		}
		if (w->out.len == 0 && w->fd >= 0) {
			struct pollfd pfd = {.fd = w->fd, .events = POLLRDHUP};
			if (poll(&pfd, 1, WATCH_POLL_MS) > 0 &&
			    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
				return MHD_CONTENT_READER_END_WITH_ERROR;
		} else if (w->out.len == 0) {
			struct timespec ts = {0, WATCH_POLL_MS * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	size_t n = w->out.len - w->off < max ? w->out.len - w->off : max;
	memcpy(buf, w->out.data + w->off, n);
	w->off += n;
	return (ssize_t)n;
}

static void free_stream(void *cls)
{
	struct web_watch *w = cls;

	if (w->counted)
		atomic_fetch_sub(&open_streams, 1);
	buf_free(&w->out);
	free(w);
}

void http1_watch_drain(int timeout_ms)
{
	for (int waited = 0; atomic_load(&open_streams) > 0 && waited < timeout_ms; waited += 10) {
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

int http1_web_watch(struct server *s, struct MHD_Connection *conn, const struct webrpc_request *wr,
		    const char *origin, enum MHD_Result *ret, struct http_response *resp)
{
	struct web_watch *w = calloc(1, sizeof(*w));
	struct MHD_Response *mr;
	char why[512] = "";
	int code;

	protocol_count(webrpc_is_grpc_web(wr->proto) ? PROTOCOL_GRPC_WEB : PROTOCOL_CONNECT);
	if (!w) {
		webrpc_fail(wr->proto, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", resp);
		return -1;
	}
	w->srv = s;
	w->proto = wr->proto;
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	w->fd = ci ? ci->connect_fd : -1;
	code = webrpc_watch_begin(s, wr, w->service, sizeof(w->service), why, sizeof(why));
	if (code != GRPC_STATUS_OK) {
		webrpc_fail(wr->proto, code, why, resp);
		free(w);
		return -1;
	}
	health_count_watch();
	w->sent = health_status(s, w->service);
	if (webrpc_watch_message(w->proto, w->sent, &w->out)) {
		webrpc_fail(wr->proto, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", resp);
		free_stream(w);
		return -1;
	}
	mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, w, free_stream);
	if (!mr) {
		free_stream(w);
		*ret = MHD_NO;
		return 0;
	}
	w->counted = true;
	atomic_fetch_add(&open_streams, 1);
	MHD_add_response_header(mr, "Content-Type", webrpc_response_type(wr->proto));
	if (origin) {
		MHD_add_response_header(mr, "Access-Control-Allow-Origin", origin);
		MHD_add_response_header(mr, "Vary", "Origin");
		MHD_add_response_header(mr, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS);
	}
	*ret = MHD_queue_response(conn, 200, mr);
	MHD_destroy_response(mr);
	return 0;
}
