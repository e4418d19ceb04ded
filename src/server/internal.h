/*
 * internal.h — what the server's files share and nothing outside src/server
 * may use: the server struct, the worker pool, the metrics registry and the
 * connection entry points.
 */
#ifndef KILN_SERVER_INTERNAL_H
#define KILN_SERVER_INTERNAL_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "server/conn_limits.h"
#include "server/server.h"

/* ---- worker pool (pool.c) ---------------------------------------------------- */

struct pool;
/* nthreads >= 1. Returns NULL on failure. */
struct pool *pool_new(const char *name, int nthreads);
/* Queues fn(arg). Never fails once the pool exists (the queue is a list). */
void pool_submit(struct pool *p, void (*fn)(void *arg), void *arg);
/* Runs what is queued, then joins the threads. NULL-safe. */
void pool_free(struct pool *p);

/* ---- metrics (metrics.c) ------------------------------------------------------ */

#define METRIC_BUCKETS 12
struct metric_histogram {
	_Atomic uint64_t buckets[METRIC_BUCKETS]; /* cumulative at render time */
	_Atomic uint64_t count;
	_Atomic uint64_t sum_us;
};

struct route_metrics {
	_Atomic uint64_t requests;
	_Atomic uint64_t errors;
	struct metric_histogram latency;
};

struct server_metrics {
	_Atomic uint64_t ingested_profiles;
	_Atomic uint64_t ingested_samples;
	_Atomic uint64_t ingested_bytes;
	_Atomic uint64_t ingest_errors;
	_Atomic uint64_t connections_total;
	_Atomic int64_t connections_open;
	_Atomic uint64_t connections_refused;	/* per-client or total limit */
	_Atomic uint64_t connections_evicted;	/* idlest closed to make room */
	_Atomic uint64_t connections_timed_out; /* a deadline of conn_limits.h */
	_Atomic uint64_t requests_over_budget;	/* --max-inflight-request-bytes */
	struct route_metrics *grpc;		/* by index in server_grpc_methods */
	struct route_metrics *http;		/* by index in server_http_routes */
	struct route_metrics unknown_grpc, unknown_http;
};

int metrics_init(struct server_metrics *m);
void metrics_release(struct server_metrics *m);
void metrics_observe(struct route_metrics *r, uint64_t elapsed_ns, bool error);
/* Prometheus text exposition of everything, store sizes included. */
int metrics_render(struct server *s, struct buf *out);

/* ---- the server ------------------------------------------------------------------ */

struct server {
	struct server_config cfg;
	struct store *store;
	int listen_fd;
	int port;
	SSL_CTX *tls; /* NULL = plaintext */
	struct pool *ingest_pool, *query_pool;
	struct ingest_decoders *decoders; /* WriteRaw's decode memory, reused */
	void *mhd;			  /* struct MHD_Daemon */
	struct server_metrics metrics;
	struct auth *auth; /* who may call what (auth.h); admits all without tokens */
	/* A random admin token the server's own scrapes of itself send (the
	 * scrape extension); "" when authentication is off. Never logged. */
	char self_token[65];
	volatile sig_atomic_t stop_requested;
	volatile sig_atomic_t reload_requested; /* SIGHUP: see server_reload */
	_Atomic bool stopping;
	_Atomic bool ready;
	void **ext_state;

	pthread_mutex_t conn_lock;
	pthread_cond_t conn_cond;
	int n_conns;			 /* live connection threads */
	struct conn_table *conns;	 /* every client connection (conn_limits.h) */
	_Atomic uint64_t inflight_bytes; /* request bodies held (conn_limits.h) */
	/* IngestService/Push sessions (ingest_stream.h); made by the first Push. */
	_Atomic(struct stream_sessions *) stream_sessions;
};

#include "common/clock.h" /* mono_ns, for the deadlines */

/* ---- gRPC framing (grpc_frame.c) ---------------------------------------------- */

struct grpc_frame {
	const uint8_t *msg; /* the message: into the body, or into owned */
	size_t len;
	uint8_t *owned; /* inflated copy (free()), NULL when not compressed */
};
/* Unwraps exactly one length-prefixed message. -EBADMSG (malformed),
 * -EFBIG (over max_msg, also after inflation), -ENOSYS (compressed without
 * gzip encoding). */
int grpc_frame_unwrap(const uint8_t *body, size_t len, bool gzip_encoding, size_t max_msg,
		      struct grpc_frame *out, struct kiln_error *err);
/* grpc-timeout header value ("100m", "5S") -> nanoseconds, -1 if malformed. */
int64_t grpc_timeout_parse(const char *v, size_t len);

/* ---- connections ------------------------------------------------------------------ */

/* A byte stream: a plain socket or TLS on one. */
struct conn_io {
	int fd;
	SSL *ssl; /* NULL = plain */
	/* The connection's entry in the table, removed by conn_close before
	 * the socket closes; NULL = untracked. */
	struct conn_table *table;
	struct conn_entry *entry;
};
/* Non-blocking-aware read/write: >0 bytes, 0 EOF (read), -EAGAIN, or -errno. */
ssize_t conn_read(struct conn_io *io, void *buf, size_t len);
ssize_t conn_write(struct conn_io *io, const void *buf, size_t len);
void conn_close(struct conn_io *io);

/* listener.c: binds --http-address; runs the accept loop until stop, and
 * runs server_reload (server.c) on that thread when one was requested. */
int listener_open(struct server *s, struct kiln_error *err);
void listener_run(struct server *s);
/* Whether the bound address is loopback only (127.0.0.0/8, ::1): false for
 * a wildcard (":7070", "0.0.0.0") or any other interface. */
bool listener_loopback_only(const struct server *s);
/* Rereads what SIGHUP reloads: the tokens file, then each extension's
 * reload hook (the scrape config). Failures are logged; the old settings
 * stay. */
void server_reload(struct server *s);

/* Serves one HTTP/2 connection until it ends; owns and closes io. */
void h2_serve(struct server *s, struct conn_io *io);
/* Starts/stops libmicrohttpd without a listen socket. */
int http1_start(struct server *s, struct kiln_error *err);
void http1_stop(struct server *s);
/* Hands a socket to libmicrohttpd (which owns it, and entry if not NULL,
 * after, unless this fails): the relay's end of a socketpair
 * (http1_relay.h), whose entry stays the relay's. */
int http1_add_connection(struct server *s, int fd, struct conn_entry *entry);

/* TLS (tls.c). */
int tls_init(struct server *s, struct kiln_error *err);
/* Handshakes on fd (made non-blocking) by deadline_ns (CLOCK_MONOTONIC);
 * *h2 says ALPN chose "h2". */
int tls_accept(struct server *s, int fd, int64_t deadline_ns, SSL **out, bool *h2);

#endif
