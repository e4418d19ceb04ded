/*
 * listener.c — the port: bind, accept, tell HTTP/2 from HTTP/1.1.
 *
 * The accept loop never reads from a client: each accepted socket gets a
 * detached connection thread, which peeks (MSG_PEEK, so nothing is
 * consumed) at the first bytes. The 24-byte HTTP/2 client preface
 * "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" means gRPC and the thread becomes the
 * connection's nghttp2 loop; the first byte that differs from the preface
 * means HTTP/1.x: the thread then becomes the connection's relay to
 * libmicrohttpd (http1_relay.c), which checks every request's head and
 * framing, so that a malformed or oversized one is answered with Kiln's
 * JSON error (400, 414, 431, 501) and a head that trickles in is cut off at
 * --request-header-timeout (408), on a connection's first request as on
 * its later ones. With TLS, the handshake runs in the connection thread
 * too and ALPN ("h2" or "http/1.1") decides instead.
 *
 * Every accepted socket is admitted by the connection table first
 * (conn_limits.h: per-client and total limits, eviction of the idlest);
 * the accept loop also runs the table's reaper a few times a second.
 * Deadlines: the TLS handshake and the protocol sniff within
 * --handshake-timeout of the accept; each request's head within
 * --request-header-timeout (the relay's).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "server/http1_relay.h"
#include "server/internal.h"

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN 24

ssize_t conn_read(struct conn_io *io, void *buf, size_t len)
{
	if (io->ssl) {
		int n = SSL_read(io->ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
		if (n > 0)
			return n;
		int e = SSL_get_error(io->ssl, n);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return -EAGAIN;
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0;
		return -EIO;
	}
	for (;;) {
		ssize_t n = recv(io->fd, buf, len, 0);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

ssize_t conn_write(struct conn_io *io, const void *buf, size_t len)
{
	if (io->ssl) {
		int n = SSL_write(io->ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
		if (n > 0)
			return n;
		int e = SSL_get_error(io->ssl, n);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return -EAGAIN;
		return -EIO;
	}
	for (;;) {
		ssize_t n = send(io->fd, buf, len, MSG_NOSIGNAL);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

void conn_close(struct conn_io *io)
{
	if (io->entry)
		conn_table_remove(io->table, io->entry);
	io->entry = NULL;
	if (io->ssl) {
		SSL_shutdown(io->ssl);
		SSL_free(io->ssl);
		io->ssl = NULL;
	}
	if (io->fd >= 0)
		close(io->fd);
	io->fd = -1;
}

/* Splits "host:port", "[v6]:port" or ":port". */
static int parse_address(const char *addr, char *host, size_t hostcap, char *port, size_t portcap)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || !colon[1])
		return -EINVAL;
	const char *h = addr;
	size_t hlen = (size_t)(colon - addr);
	if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
		h++;
		hlen -= 2;
	}
	if (hlen >= hostcap || strlen(colon + 1) >= portcap)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	snprintf(port, portcap, "%s", colon + 1);
	return 0;
}

int listener_open(struct server *s, struct kiln_error *err)
{
	char host[256], port[32];
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*res = NULL;
	const char *addr = s->cfg.http_address;

	if (parse_address(addr, host, sizeof(host), port, sizeof(port)))
		return kiln_error_set(
		    err, EINVAL, "--http-address=%s: expected HOST:PORT, [V6]:PORT or :PORT", addr);
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc)
		return kiln_error_set(err, EINVAL, "--http-address=%s: %s", addr, gai_strerror(rc));
	int fd = -1, last = 0;
	/* Prefer the IPv6 wildcard (dual-stack) for ":port". */
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			last = errno;
			continue;
		}
		int one = 1, zero = 0;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 512) == 0)
			break;
		last = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return kiln_error_set(err, last ? last : EADDRNOTAVAIL, "--http-address=%s: %s",
				      addr, strerror(last ? last : EADDRNOTAVAIL));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	s->listen_fd = fd;
	return 0;
}

bool listener_loopback_only(const struct server *s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (s->listen_fd < 0 || getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) != 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)&ss)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		/* ::ffff:127.x.y.z */
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

/* Waits until the peer has sent enough to decide. Returns 1 for HTTP/2, 0
 * for HTTP/1.x, -1 to drop the connection (closed, error, or stalled). */
static int sniff_protocol(struct server *s, int fd, int64_t deadline)
{
	char b[H2_PREFACE_LEN];

	for (;;) {
		ssize_t n = recv(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (n == 0)
			return -1;
		if (n > 0) {
			if (memcmp(b, h2_preface, (size_t)n) != 0)
				return 0;
			if (n == H2_PREFACE_LEN)
				return 1;
		}
		int64_t left = (deadline - mono_ns()) / 1000000;
		if (left <= 0 || server_stopping(s))
			return -1;
		if (left > 250)
			left = 250; /* notice shutdown */
		/* A partial preface stays readable: wait a little, then peek again. */
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (n > 0) {
			usleep(5000);
		} else if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			return -1;
		}
	}
}

struct conn_start {
	struct server *s;
	int fd;
	struct conn_entry *entry;
	int64_t accepted_ns;
};

static void conn_thread_done(struct server *s)
{
	pthread_mutex_lock(&s->conn_lock);
	s->n_conns--;
	pthread_cond_broadcast(&s->conn_cond);
	pthread_mutex_unlock(&s->conn_lock);
	atomic_fetch_sub(&s->metrics.connections_open, 1);
}

static void *conn_thread(void *arg)
{
	struct conn_start cs = *(struct conn_start *)arg;
	struct server *s = cs.s;
	struct conn_io io = {.fd = cs.fd, .table = s->conns, .entry = cs.entry};
	int64_t handshake_deadline =
	    cs.accepted_ns + (int64_t)s->cfg.handshake_timeout_s * 1000000000LL;
	free(arg);

	if (s->tls) {
		bool h2 = false;
		if (tls_accept(s, io.fd, handshake_deadline, &io.ssl, &h2) != 0) {
			conn_close(&io);
			goto done;
		}
		fcntl(io.fd, F_SETFL, fcntl(io.fd, F_GETFL) | O_NONBLOCK);
		if (h2)
			h2_serve(s, &io);
		else
			http1_relay(s, &io);
		goto done;
	}
	int64_t t0 = mono_ns();
	int proto = sniff_protocol(s, io.fd, handshake_deadline);
	log_debug("connection: %s after %lld ms",
		  proto < 0 ? "dropped"
		  : proto   ? "HTTP/2"
			    : "HTTP/1.x",
		  (long long)((mono_ns() - t0) / 1000000));
	if (proto < 0) {
		conn_close(&io);
	} else if (proto == 1) {
		fcntl(io.fd, F_SETFL, fcntl(io.fd, F_GETFL) | O_NONBLOCK);
		h2_serve(s, &io);
	} else {
		http1_relay(s, &io);
	}
done:
	conn_thread_done(s);
	return NULL;
}

/* The accept loop; returns once server_stop was called. A SIGHUP's reload
 * runs here, between accepts (it reads two small files). */
void listener_run(struct server *s)
{
	int64_t last_reap = 0;
	while (!s->stop_requested) {
		struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
		if (s->reload_requested) {
			s->reload_requested = 0;
			server_reload(s);
		}
		int64_t now = mono_ns();
		if (now - last_reap > 200000000LL) {
			last_reap = now;
			atomic_fetch_add(&s->metrics.connections_timed_out,
					 conn_table_reap(s->conns, now));
		}
		int n = poll(&p, 1, 200);
		if (n <= 0)
			continue;
		struct sockaddr_storage peer = {0};
		socklen_t peer_len = sizeof(peer);
		int fd = accept4(s->listen_fd, (struct sockaddr *)&peer, &peer_len, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of descriptors: make room as at --max-connections. */
				if (conn_table_evict_idlest(s->conns))
					atomic_fetch_add(&s->metrics.connections_evicted, 1);
				usleep(50000); /* let connections close */
			}
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		atomic_fetch_add(&s->metrics.connections_total, 1);
		char why[160];
		uint64_t evicted = 0;
		struct conn_entry *entry =
		    conn_table_admit(s->conns, fd, &peer, &evicted, why, sizeof(why));
		atomic_fetch_add(&s->metrics.connections_evicted, evicted);
		if (!entry) {
			char host[INET6_ADDRSTRLEN] = "?";
			getnameinfo((struct sockaddr *)&peer, peer_len, host, sizeof(host), NULL, 0,
				    NI_NUMERICHOST);
			log_debug("connection from %s refused: %s", host, why);
			atomic_fetch_add(&s->metrics.connections_refused, 1);
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->conn_lock);
		s->n_conns++;
		pthread_mutex_unlock(&s->conn_lock);
		atomic_fetch_add(&s->metrics.connections_open, 1);
		struct conn_start *cs = malloc(sizeof(*cs));
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (!cs || (cs->s = s, cs->fd = fd, cs->entry = entry, cs->accepted_ns = mono_ns(),
			    pthread_create(&t, &attr, conn_thread, cs))) {
			free(cs);
			conn_table_remove(s->conns, entry);
			close(fd);
			conn_thread_done(s);
		}
		pthread_attr_destroy(&attr);
	}
}
