/*
 * http1_relay.c — the relay between an HTTP/1.x client and libmicrohttpd
 * (contract in http1_relay.h).
 *
 * Why a relay: libmicrohttpd answers what it cannot parse with its own HTML
 * page, or closes without a word, and offers no hook to change that. Once
 * it owns a socket, the second request on a kept-alive connection is its
 * alone to judge. So libmicrohttpd never gets the client's socket: it
 * serves one end of a socketpair, and this thread copies bytes across,
 * letting through only what the framer (http1_frame.c) accepted.
 *
 * The loop, one thread per connection, never blocking on either side:
 *   client -> rx: read while rx has room; the framer decides on rx's
 *     first bytes: forward (approved, written to libmicrohttpd as it takes
 *     them), drop (after a "Connection: close" request), need more, or
 *     refuse. A pipelined request's head waits until libmicrohttpd has
 *     answered the one before (frame_held says why).
 *   libmicrohttpd -> tx -> client: read only when tx is empty, so that a
 *     TLS write is always retried with the same buffer.
 * On a refusal, libmicrohttpd's side is half-closed: it finishes and sends
 * the responses to the requests already forwarded, then closes (it does so
 * on a read EOF, and drops a request whose body is cut short); the JSON
 * error goes after them, and the connection closes.
 *
 * Deadlines (the reaper in conn_limits.c leaves relayed connections' idle
 * time to this thread): while no request is in flight, the next head must
 * be complete --request-header-timeout after the connection went idle (its
 * entry's idle clock: the accept, or the end of the last response).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "server/http1_frame.h"
#include "server/http1_relay.h"
#include "server/internal.h"

#define TX_CAP (64u << 10)
#define RX_MIN (64u << 10)
/* How long a write may make no progress before the peer is given up on. */
#define STALL_MS 30000

struct relay {
	struct server *s;
	struct conn_io *io; /* the client */
	int mhd_fd;	    /* our end of the socketpair; -1 until the first request */
	struct http1_framer f;
	uint8_t *rx;
	size_t rx_len, rx_cap;
	size_t approved; /* rx's first bytes that the framer let through */
	uint8_t *tx;
	size_t tx_off, tx_len;
	bool client_eof;  /* the client half-closed: no more requests */
	bool mhd_wr_shut; /* libmicrohttpd got its EOF */
	/* How many times in a row the next head waited for libmicrohttpd to
	 * finish the previous request (held_wait_ms says how long each). */
	unsigned held;
	int64_t opened_ns; /* the idle clock without a table entry */
};

static const char *reason_of(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 408:
		return "Request Timeout";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

/* Opens libmicrohttpd's side for the connection's first request. */
static int open_mhd(struct relay *r)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	/* The entry stays this thread's; libmicrohttpd's callbacks find it by
	 * its side of the pair and report the requests on it. */
	if (r->io->entry)
		conn_entry_set_mhd_fd(r->io->table, r->io->entry, sv[1], false);
	if (http1_add_connection(r->s, sv[1], NULL) != 0) { /* it closed sv[1] */
		close(sv[0]);
		return -EIO;
	}
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	r->mhd_fd = sv[0];
	return 0;
}

/* When the connection went idle (no request in flight), or 0 while one is. */
static int64_t idle_since(const struct relay *r)
{
	return r->io->entry ? conn_entry_idle_since(r->io->entry) : r->opened_ns;
}

/* Writes all of buf to the client, waiting while it is slow (up to
 * STALL_MS without progress). */
static int client_write_all(struct relay *r, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = conn_write(r->io, buf, len);
		if (n == -EAGAIN) {
			struct pollfd p = {.fd = r->io->fd, .events = POLLOUT};
			if (poll(&p, 1, STALL_MS) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n <= 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copies what libmicrohttpd still sends to the client until it closes its
 * side (it was told EOF) or the client stops taking it. */
static void drain_mhd(struct relay *r)
{
	for (;;) {
		if (r->tx_off < r->tx_len) {
			if (client_write_all(r, r->tx + r->tx_off, r->tx_len - r->tx_off))
				return;
			r->tx_off = r->tx_len = 0;
		}
		ssize_t n = read(r->mhd_fd, r->tx, TX_CAP);
		if (n > 0) {
			r->tx_len = (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return;
		struct pollfd p = {.fd = r->mhd_fd, .events = POLLIN};
		if (poll(&p, 1, STALL_MS) <= 0)
			return;
	}
}

/* Answers status with Kiln's JSON error after the responses libmicrohttpd
 * still owes, then closes the write side and reads for a moment what the
 * client still sends, so that the kernel does not reset the connection
 * (losing the answer) over unread bytes. */
static void answer_and_close(struct relay *r, int status, const char *why)
{
	if (r->mhd_fd >= 0) {
		shutdown(r->mhd_fd, SHUT_WR);
		drain_mhd(r);
	}
	struct http_response resp = {0};
	char head[256];
	http_error(&resp, status, -1, "%s", why);
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			  status, reason_of(status), resp.body.len);
	if (client_write_all(r, (const uint8_t *)head, (size_t)hn) == 0 &&
	    client_write_all(r, resp.body.data, resp.body.len) == 0) {
		if (r->io->ssl)
			SSL_shutdown(r->io->ssl);
		shutdown(r->io->fd, SHUT_WR);
		int64_t until = mono_ns() + 1000000000LL;
		for (size_t total = 0; total < (256u << 10);) {
			ssize_t got = conn_read(r->io, r->rx, r->rx_cap);
			if (got > 0) {
				total += (size_t)got;
				continue;
			}
			int64_t left = (until - mono_ns()) / 1000000;
			struct pollfd p = {.fd = r->io->fd, .events = POLLIN};
			if (got != -EAGAIN || left <= 0 || poll(&p, 1, (int)left) <= 0)
				break;
		}
	} else {
		log_debug("http: answer %d not sent", status);
	}
	buf_free(&resp.body);
}

/* How long to wait before looking again whether libmicrohttpd finished the
 * previous request: it usually has within microseconds of its last byte
 * (a client that waited for the answer), so the first looks only yield;
 * a long request behind a pipelined one is looked at ever less often. */
static int held_wait_ms(unsigned held)
{
	if (held == 0)
		return 250;
	if (held <= 8) {
		sched_yield();
		return 0;
	}
	return held - 8 >= 6 ? 64 : 1 << (held - 8);
}

/* Lets the framer decide on what rx holds past the approved bytes, as far
 * as it can (consecutive pieces of a body are approved together). Returns
 * 0, -1 when libmicrohttpd's side cannot be opened, or the HTTP status to
 * refuse with once everything approved before the refusal is forwarded. */
static int frame_held(struct relay *r)
{
	while (r->approved < r->rx_len) {
		/* One request at a time: libmicrohttpd leaves a pipelined
		 * request it read along with the previous one unanswered until
		 * more bytes come, so the next head waits for the previous
		 * request's completion (its entry going idle). */
		if (r->f.state == HTTP1_AT_HEAD && r->f.requests > 0 && r->io->entry &&
		    (r->approved > 0 || conn_entry_idle_since(r->io->entry) == 0)) {
			if (r->approved == 0)
				r->held++;
			return 0;
		}
		r->held = 0;
		size_t n = 0;
		uint8_t *b = r->rx + r->approved;
		size_t len = r->rx_len - r->approved;
		uint64_t heads = r->f.requests;
		enum http1_frame_action a = http1_frame_step(&r->f, b, len, &n);
		if (a == HTTP1_NEED_MORE)
			return 0;
		if (a == HTTP1_REFUSE)
			return r->approved ? 0 : r->f.status;
		if (a == HTTP1_DROP) {
			memmove(b, b + n, len - n);
			r->rx_len -= n;
			continue;
		}
		if (r->f.requests != heads) {
			if (r->mhd_fd < 0 && open_mhd(r) != 0)
				return -1;
			/* In flight from now (libmicrohttpd's completion ends
			 * it), so that its start is not mistaken for idleness. */
			conn_entry_set_busy(r->io->entry, true);
		}
		r->approved += n;
	}
	return 0;
}

/* Writes approved bytes to libmicrohttpd as far as it takes them. Returns
 * -1 when its side is gone. */
static int forward_approved(struct relay *r)
{
	while (r->approved) {
		ssize_t n = send(r->mhd_fd, r->rx, r->approved, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		memmove(r->rx, r->rx + n, r->rx_len - (size_t)n);
		r->rx_len -= (size_t)n;
		r->approved -= (size_t)n;
	}
	return 0;
}

/* The relay's loop; returns when the connection is done (the caller
 * closes). */
static void relay_loop(struct relay *r)
{
	struct server *s = r->s;
	int64_t timeout_ns = (int64_t)s->cfg.header_timeout_s * 1000000000LL;

	for (;;) {
		int refuse = frame_held(r);
		if (refuse < 0) {
			answer_and_close(r, 503,
					 "the server cannot take another HTTP/1.1 connection now; "
					 "retry in a few seconds");
			return;
		}
		if (refuse > 0) {
			atomic_fetch_add(&s->metrics.connections_refused, 1);
			answer_and_close(r, refuse, r->f.why);
			return;
		}
		if (r->mhd_fd >= 0 && forward_approved(r) != 0)
			return; /* libmicrohttpd closed: so does the connection */
		if (r->approved == 0 && r->f.state == HTTP1_REFUSED)
			continue; /* what came before the refusal is through */
		if (r->tx_off < r->tx_len) {
			ssize_t n = conn_write(r->io, r->tx + r->tx_off, r->tx_len - r->tx_off);
			if (n < 0 && n != -EAGAIN)
				return;
			if (n > 0 && (r->tx_off += (size_t)n) == r->tx_len)
				r->tx_off = r->tx_len = 0;
		}
		/* The client is done sending and all it sent is through: let
		 * libmicrohttpd finish, then close. */
		if (r->client_eof && r->approved == 0 && !r->mhd_wr_shut) {
			if (r->mhd_fd < 0)
				return;
			shutdown(r->mhd_fd, SHUT_WR);
			r->mhd_wr_shut = true;
		}

		/* Idle between requests: the next head has a deadline. */
		int wait_ms = held_wait_ms(r->held);
		int64_t since = idle_since(r);
		if (since && r->approved == 0 && r->f.state == HTTP1_AT_HEAD && !r->client_eof) {
			int64_t left = since + timeout_ns - mono_ns();
			if (left <= 0) {
				atomic_fetch_add(&s->metrics.connections_timed_out, 1);
				if (r->rx_len == 0)
					return; /* an idle keep-alive connection */
				char msg[160];
				snprintf(msg, sizeof(msg),
					 "the request header did not arrive within "
					 "--request-header-timeout=%ds",
					 s->cfg.header_timeout_s);
				answer_and_close(r, 408, msg);
				return;
			}
			if (server_stopping(s) && r->rx_len == 0 && r->tx_len == 0)
				return;
			if (left / 1000000 < wait_ms)
				wait_ms = (int)(left / 1000000) + 1;
		}

		bool want_client_in = !r->client_eof && r->rx_len < r->rx_cap;
		bool ssl_ready = want_client_in && r->io->ssl && SSL_pending(r->io->ssl) > 0;
		/* libmicrohttpd's side is watched only when there is something
		 * to do on it, so that a hang-up there cannot spin the loop. */
		bool want_mhd = r->mhd_fd >= 0 && (r->approved || r->tx_len == 0);
		struct pollfd p[2] = {
		    {.fd = r->io->fd,
		     .events = (short)((want_client_in ? POLLIN : 0) | (r->tx_len ? POLLOUT : 0))},
		    {.fd = r->mhd_fd,
		     .events = (short)((r->approved ? POLLOUT : 0) | (r->tx_len ? 0 : POLLIN))},
		};
		if (poll(p, want_mhd ? 2 : 1, ssl_ready ? 0 : wait_ms) < 0 && errno != EINTR)
			return;
		if (ssl_ready || (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (!want_client_in)
				return; /* hung up, and nothing is read from it now */
			ssize_t n = conn_read(r->io, r->rx + r->rx_len, r->rx_cap - r->rx_len);
			if (n > 0)
				r->rx_len += (size_t)n;
			else if (n == 0)
				r->client_eof = true;
			else if (n != -EAGAIN)
				return;
		}
		if (want_mhd && r->tx_len == 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(r->mhd_fd, r->tx, TX_CAP);
			/* libmicrohttpd closed: what it sent before is already
			 * on its way (tx was empty), and so is the connection. */
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return;
			if (n > 0)
				r->tx_len = (size_t)n;
		}
	}
}

void http1_relay(struct server *s, struct conn_io *io)
{
	size_t cap = s->cfg.max_header_bytes > RX_MIN ? s->cfg.max_header_bytes : RX_MIN;
	struct relay r = {.s = s, .io = io, .mhd_fd = -1, .rx_cap = cap, .opened_ns = mono_ns()};

	http1_framer_init(&r.f, s->cfg.max_header_bytes);
	r.rx = malloc(cap);
	r.tx = malloc(TX_CAP);
	if (!r.rx || !r.tx)
		goto out;
	fcntl(io->fd, F_SETFL, fcntl(io->fd, F_GETFL) | O_NONBLOCK);
	relay_loop(&r);
out:
	if (r.mhd_fd >= 0)
		close(r.mhd_fd);
	conn_close(io);
	free(r.rx);
	free(r.tx);
}
