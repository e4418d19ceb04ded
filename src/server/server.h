/*
 * server.h — the kiln server: one TCP port, gRPC and HTTP/1.1 on it.
 *
 * Shape (see docs/ARCHITECTURE.md, "server"):
 *
 *   listener.c   accepts; a connection thread peeks at the first bytes. The
 *                HTTP/2 connection preface means gRPC (h2.c, nghttp2);
 *                anything else is handed to libmicrohttpd (http1.c). TLS
 *                (tls.c) is terminated first when configured, ALPN decides.
 *   h2.c         one thread per HTTP/2 connection runs the nghttp2 session;
 *                complete gRPC requests go to a worker pool (pool.c), one
 *                pool for ingestion and one for queries, so that a slow
 *                query never delays a WriteRaw.
 *   http1.c      libmicrohttpd in thread-per-connection mode.
 *   routes.c     THE tables: every gRPC method and HTTP route is one line.
 *   rpc_*.c, http_*.c  the handlers; metrics.c the Prometheus registry.
 *
 * Adding an endpoint: write a handler with the signature below and add one
 * line to server_grpc_methods[] or server_http_routes[] in routes.c. A
 * subsystem with its own lifetime (the scrape manager, the debuginfo store)
 * adds one line to server_extensions[] there.
 *
 * Ownership: struct server owns the store, pools, metrics and listener; it
 * outlives every connection thread (server_run waits for them).
 */
#ifndef KILN_SERVER_H
#define KILN_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/grpc_status.h"
#include "server/auth.h"

struct server;
struct store;

struct server_config {
	const char *http_address;   /* "[host]:port"; ":7070" */
	const char *storage_path;   /* "./data" */
	int64_t retention_ms;	    /* 15 days */
	const char *cors_origins;   /* comma-separated, "*" = any, NULL/"" = no CORS */
	size_t grpc_max_msg_bytes;  /* request and response message limit */
	size_t max_profile_inflate; /* gzip bomb guard for one pprof */
	const char *ui_path;	    /* directory with index.html; NULL = none */
	const char *config_path;    /* for extensions (scrape config); may be NULL */
	const char *tls_cert_file;  /* both set = TLS on the port */
	const char *tls_key_file;
	/* Client certificates (mTLS): set = a client must present one that
	 * this CA bundle verifies, or with tls_client_auth_optional may present
	 * none (a certificate it does present must still verify). */
	const char *tls_client_ca_file;
	bool tls_client_auth_optional;
	int ingest_threads; /* worker pool sizes */
	int query_threads;
	int max_connections;
	int idle_timeout_s; /* an HTTP/2 connection with no stream open is closed after this */
	const char *const *debuginfod_upstreams; /* NULL-terminated URLs; NULL = none */
	int debuginfod_timeout_s;		 /* per debuginfod request */
	int debuginfod_negative_ttl_s;		 /* how long "not found" is remembered */
	/* Directories searched for symbols by build ID (DIR/.build-id/xx/...),
	 * NULL-terminated; NULL = none. Never a path a client names. */
	const char *const *symbols_local_dirs;
	/* A pushed profile's time may lie at most this far ahead of the
	 * server's clock (1 h); one before 2000-01-01 is always refused. */
	int64_t ingest_max_future_skew_ms;
	/* Authentication (docs/SECURITY.md): tokens with a role each; NULL =
	 * none, which server_new accepts only on a loopback address or with
	 * auth_disable. */
	const char *auth_tokens_file;
	bool auth_disable;	/* no tokens even on a non-loopback address */
	bool auth_metrics_open; /* /metrics without a token */
	/* What one client may hold (conn_limits.h, docs/SECURITY.md). */
	int max_connections_per_client; /* per client address; 0 = no limit */
	int handshake_timeout_s;	/* TLS handshake, protocol sniff, HTTP/2 SETTINGS */
	int header_timeout_s;		/* a whole HTTP/1.1 request header */
	size_t body_min_rate;		/* bytes/s a body must average after that */
	size_t max_header_bytes;	/* HTTP/1.1 request line and headers */
	/* Request bodies held at once, server-wide; past it RESOURCE_EXHAUSTED
	 * or 503. */
	uint64_t max_inflight_request_bytes;
	/* What one WriteRaw may hold (ingest.h); 0 = the INGEST_MAX_* default. */
	size_t ingest_max_series;
	size_t ingest_max_labels; /* besides __name__ */
	size_t ingest_max_label_bytes;
	size_t ingest_max_stack_depth;
	size_t ingest_max_sample_types;
	/* --storage=clickhouse (docs/SCALE-OUT.md): the store is ClickHouse
	 * at clickhouse_url instead of files under storage_path, which then
	 * holds only uploaded debuginfo. */
	bool storage_clickhouse;
	const char *clickhouse_url;
	const char *clickhouse_database; /* NULL = "kiln" */
	const char *clickhouse_user;	 /* NULL = "default" */
	const char *clickhouse_password; /* NULL = none */
	/* --disable-stream-ingest: IngestService/Push answers UNIMPLEMENTED. */
	bool stream_ingest_disabled;
};

/* Fills defaults (the values documented above). */
void server_config_defaults(struct server_config *c);

/* Opens the store, binds the port, starts the pools and extensions. */
int server_new(const struct server_config *c, struct server **out, struct kiln_error *err);
/* Serves until server_stop is called (from a signal handler: it only sets a
 * flag). Then drains: refuses new gRPC calls with UNAVAILABLE, finishes the
 * ones in flight, closes connections and the store. */
int server_run(struct server *s);
/* Async-signal-safe. */
void server_stop(struct server *s);
/* Async-signal-safe (SIGHUP): the tokens file and the scrape config are
 * reread soon after, on the accept thread. */
void server_request_reload(struct server *s);
void server_free(struct server *s);

/* The bound port (useful with ":0"). */
int server_port(const struct server *s);

/* Accessors for handlers. */
struct store *server_store(struct server *s);
const struct server_config *server_config(const struct server *s);
bool server_stopping(const struct server *s);
/* The state an extension's start() stored, by its name in routes.c; NULL
 * before it started. */
void *server_extension_state(struct server *s, const char *name);
struct server_metrics *server_metrics(struct server *s);

/* ---- gRPC ----------------------------------------------------------------- */

/* One unary call. The handler reads req, appends the serialized response
 * message (without the 5-byte gRPC prefix) to resp, and sets status and
 * message on failure (use grpc_fail). */
struct grpc_call {
	struct server *srv;
	const uint8_t *req;
	size_t req_len;
	struct buf resp;
	int status;
	char message[512];
	int64_t deadline_ns; /* CLOCK_MONOTONIC; 0 = none */
};
typedef void (*grpc_handler_fn)(struct grpc_call *call);

enum server_pool { POOL_INGEST, POOL_QUERY };

struct grpc_method {
	const char *path;    /* "/package.Service/Method" */
	enum auth_role need; /* the token role it takes (auth.h) */
	enum server_pool pool;
	grpc_handler_fn handler;
};

/* Client-streaming methods (routes.c lists them): their handler gets in req
 * every framed message of the stream, unparsed, still bounded by
 * grpc_max_msg_bytes in total. */
bool server_grpc_client_streaming(const char *path);

/* Records a failure; returns code. */
int grpc_fail(struct grpc_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Maps a negative errno to the status a client should see. */
int grpc_code_from_errno(int neg_errno);

/* ---- HTTP/1.1 ---------------------------------------------------------------- */

struct http_request {
	struct server *srv;
	const char *method;
	const char *path;
	const uint8_t *body;
	size_t body_len;
	void *mhd_conn; /* for http_arg over HTTP/1.1 ... */
	/* ... or, over HTTP/2, the decoded query-string arguments */
	char **arg_names;
	char **arg_values;
	size_t n_args;
};

struct http_response {
	int status;
	const char *content_type; /* static string */
	struct buf body;
	char disposition[128];	      /* Content-Disposition when not empty */
	char timing[128];	      /* Server-Timing when not empty ("merge;dur=1.2, ...") */
	const char *www_authenticate; /* WWW-Authenticate (static string) when set */
	const char *retry_after;      /* Retry-After (static string) when set */
};

typedef void (*http_handler_fn)(const struct http_request *req, struct http_response *resp);

struct http_route {
	const char *method; /* "GET", "POST" */
	const char *path;
	bool prefix;	     /* path matches as a prefix */
	enum auth_role need; /* the token role it takes (auth.h) */
	http_handler_fn handler;
};

/* A query-string argument, or NULL. */
const char *http_arg(const struct http_request *req, const char *name);
/* Every value of a repeated query-string argument (?q=a&q=b), in order, at
 * most max of them; returns how many there are (may exceed max). */
size_t http_arg_all(const struct http_request *req, const char *name, const char **out, size_t max);
/* Sets a JSON error body {"error":msg[,"position":N]}; position < 0 = omitted. */
void http_error(struct http_response *resp, int status, long position, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps a negative errno to an HTTP status. */
int http_status_from_errno(int neg_errno);

/* ---- the tables (routes.c) ------------------------------------------------------- */

struct server_extension {
	const char *name;
	/* Called after the store is open; config_path may be NULL. */
	int (*start)(struct server *s, const char *config_path, void **state,
		     struct kiln_error *err);
	void (*stop)(void *state);
	/* SIGHUP (server_request_reload); may be NULL. Logs its own outcome. */
	void (*reload)(void *state);
};

extern const struct grpc_method server_grpc_methods[];
extern const size_t server_n_grpc_methods;
extern const struct http_route server_http_routes[];
extern const size_t server_n_http_routes;
extern const struct server_extension server_extensions[];
extern const size_t server_n_extensions;

/* Looks a method or route up; NULL = unknown. The index is for metrics. */
const struct grpc_method *server_find_grpc(const char *path, size_t *index);
const struct http_route *server_find_http(const char *method, const char *path, size_t *index);

/* The one authorization gate: every transport calls it with the route it
 * found and the request's `authorization` value (NULL if none) before the
 * handler runs, and before a request body is read where it can. Returns 0,
 * or fails the request: for gRPC sets c->status/c->message (UNAUTHENTICATED
 * or PERMISSION_DENIED), for HTTP fills resp (401 with WWW-Authenticate:
 * Bearer, or 403, with the JSON error body). Returns -EACCES or -EPERM. */
int server_authorize_grpc(struct server *s, const struct grpc_method *m, const char *authorization,
			  struct grpc_call *c);
int server_authorize_http(struct server *s, const struct http_route *r, const char *path,
			  const char *authorization, struct http_response *resp);

#endif
