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
 *
 * This file is the connection loop; h2_internal.h lists the files that do
 * each step.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "server/h2_internal.h"

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
				h2_submit_error(c, st, GRPC_STATUS_DEADLINE_EXCEEDED,
						"request arrived slower than "
						"--request-body-min-rate=%zu bytes/s",
						cfg->body_min_rate);
			else
				h2_submit_http_error(c, st, 408,
						     "request arrived slower than "
						     "--request-body-min-rate");
			st->reset_when_sent = true;
			continue;
		}
		if (!st->deadline_ns || st->answered)
			continue;
		if (st->deadline_ns <= now)
			h2_submit_error(c, st, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
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

void h2_serve(struct server *s, struct conn_io *io)
{
	struct h2_conn c = {.srv = s, .io = *io};
	bool read_closed = false, goaway = false, terminated = false;
	int64_t stop_seen_ns = 0, start_ns = mono_ns(), idle_since_ns = start_ns;
	const struct server_config *cfg = server_config(s);
	uint8_t rbuf[16384];

	pthread_mutex_init(&c.lock, NULL);
	c.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c.efd < 0 || h2_open_session(&c)) {
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
					h2_submit_error(&c, st, GRPC_STATUS_UNAVAILABLE,
							"server is shutting down");
			/* A peer that stopped reading must not hold shutdown. */
			if (c.inflight == 0 && now - stop_seen_ns > 5000000000LL)
				break;
		}
		h2_watch_poll(&c);
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
			h2_collect_done(&c);
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
			h2_collect_done(&c);
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
