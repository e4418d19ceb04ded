/*
 * conn_limits.h — the server's table of live client connections, and the
 * limits a client cannot push past: connections in total and per client
 * address, the deadlines of a connection's phases, and the bytes of request
 * bodies the server holds at once. docs/SECURITY.md lists every limit.
 *
 * Contract:
 *   - The accept loop admits every accepted socket (conn_table_admit) before
 *     any byte is read. A client address (an IPv6 client is its /64) at
 *     --max-connections-per-client is refused. At --max-connections a
 *     connection of the client holding the most is closed to make room
 *     (conn_limits.c says which and why); when none may go, the new one is
 *     refused.
 *   - An entry belongs to whoever holds the socket: the connection thread
 *     (HTTP/2, TLS, the protocol sniff) or libmicrohttpd (plaintext HTTP/1.1
 *     after the hand-off). The owner removes it (conn_table_remove) BEFORE
 *     closing the socket, so the table never shuts down a reused fd number.
 *   - Closing someone else's connection is shutdown(2) on its socket under
 *     the table's lock: its owner sees EOF and cleans up as for any peer.
 *   - The owner reports activity with conn_entry_set_busy; the idle clock
 *     counts from the last time it went idle. Pings and other bytes that are
 *     not requests never reset it.
 */
#ifndef KILN_SERVER_CONN_LIMITS_H
#define KILN_SERVER_CONN_LIMITS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct server_config;
struct conn_table;
struct conn_entry;

/* NULL when out of memory. The table keeps a pointer to cfg. */
struct conn_table *conn_table_new(const struct server_config *cfg);
/* Every entry must have been removed. NULL-safe. */
void conn_table_free(struct conn_table *t);

/* Admits fd from peer; returns its entry (owned by the caller until handed
 * on), or NULL when refused, with the reason in why. May close the idlest
 * connection to make room (counted in *evicted). */
struct conn_entry *conn_table_admit(struct conn_table *t, int fd,
				    const struct sockaddr_storage *peer, uint64_t *evicted,
				    char *why, size_t whycap);
/* The caller is about to close e's socket: e leaves the table, and the
 * caller's reference is dropped (e is freed with the last). NULL-safe. */
void conn_table_remove(struct conn_table *t, struct conn_entry *e);

/* busy: a request is in flight (an HTTP/1.1 request past its header, an
 * HTTP/2 stream open). Going idle restarts the idle clock. */
void conn_entry_set_busy(struct conn_entry *e, bool busy);
/* When e went idle (no request in flight), 0 while one is: the clock a
 * relay (http1_relay.c) times the next request head by. */
int64_t conn_entry_idle_since(const struct conn_entry *e);
/* The fd libmicrohttpd will see for e's connection, set before the
 * hand-off: the socket itself (mhd_owns: libmicrohttpd closes it), or the
 * TLS relay's socketpair end (the relay's thread keeps the socket). */
void conn_entry_set_mhd_fd(struct conn_table *t, struct conn_entry *e, int mhd_fd, bool mhd_owns);
/* libmicrohttpd started a connection on mhd_fd: returns its entry (NULL if
 * none) with a reference for libmicrohttpd — the one handed over with a
 * plaintext socket, a new one for a relay's — which it gives back with
 * conn_table_mhd_closed before it closes mhd_fd. */
struct conn_entry *conn_table_mhd_started(struct conn_table *t, int mhd_fd);
void conn_table_mhd_closed(struct conn_table *t, struct conn_entry *e);
/* A request body is arriving: start_ns when it began, bytes so far; 0/0 =
 * none. libmicrohttpd's connections report theirs (conn_table_reap closes
 * them if too slow); an HTTP/2 connection reports its slowest stream's. Both
 * make the connection a candidate for eviction when it is that slow. */
void conn_entry_body_progress(struct conn_entry *e, int64_t start_ns, uint64_t bytes);

/* Closes (shutdown) the libmicrohttpd connections that broke a deadline: no
 * request for --request-header-timeout since the last one ended (the whole
 * next request header must arrive in that time; a relayed connection's
 * relay times that itself, to answer 408), or a body below
 * --request-body-min-rate. Returns how many.
 * Called by the accept loop a few times a second. */
unsigned conn_table_reap(struct conn_table *t, int64_t now_ns);

/* Whether a body that started at start_ns and has bytes so far is too slow:
 * after the header timeout's grace, it must average the minimum rate. */
bool conn_body_too_slow(const struct server_config *cfg, int64_t start_ns, uint64_t bytes,
			int64_t now_ns);

/* Closes (shutdown) the connection idle the longest, if any: the accept
 * loop's answer to running out of file descriptors. */
bool conn_table_evict_idlest(struct conn_table *t);

/* Live connections (evicted ones still closing included). */
unsigned conn_table_count(struct conn_table *t);

/* ---- the in-flight request budget ---------------------------------------------- */

/* Reserves n bytes of --max-inflight-request-bytes for a request body;
 * false (nothing reserved) when the budget cannot hold them. */
bool inflight_reserve(_Atomic uint64_t *used, uint64_t budget, uint64_t n);
void inflight_release(_Atomic uint64_t *used, uint64_t n);

#endif
