/*
 * server.c — the server's lifetime: start-up in dependency order (store,
 * pools, HTTP/1.1 daemon, TLS, listener, extensions), serving, and the
 * graceful stop that server_run performs after server_stop.
 *
 * Authentication (auth.h, docs/SECURITY.md) is set up right after the port
 * is bound: a server bound beyond loopback with no tokens file refuses to
 * start unless --auth-disable says so, before the store replays its WAL.
 *
 * Stop sequence: stop accepting; mark `stopping` so that new gRPC calls get
 * UNAVAILABLE and HTTP/2 connections receive GOAWAY; wait (bounded) for the
 * connection threads, which leave once their in-flight calls are answered;
 * stop libmicrohttpd; drain the pools; stop extensions; close the store.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "server/handlers.h"
#include "server/ingest.h"
#include "server/ingest_stream.h"
#include "server/internal.h"
#include "store/store.h"

#define DRAIN_TIMEOUT_S 10

void server_config_defaults(struct server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->http_address = ":7070";
	c->storage_path = "./data";
	c->retention_ms = 15LL * 24 * 3600 * 1000;
	c->grpc_max_msg_bytes = 64u << 20;
	c->max_profile_inflate = 256u << 20;
	/* An ingest thread spends most of a WriteRaw waiting for the WAL
	 * fsync; the writers waiting together share one (group commit), so
	 * with 2 threads no batch held more than 2 profiles and a slow disk
	 * capped ingest at ~2 profiles per fsync. Waiting costs no CPU. */
	c->ingest_threads = 8;
	c->query_threads = 2;
	c->max_connections = 1024;
	c->idle_timeout_s = 300;
	c->debuginfod_timeout_s = 30;
	c->debuginfod_negative_ttl_s = 600;
	c->ingest_max_future_skew_ms = 3600 * 1000;
	c->max_connections_per_client = 64;
	c->handshake_timeout_s = 10;
	c->header_timeout_s = 10;
	c->body_min_rate = 4096;
	c->max_header_bytes = 32u << 10;
	c->max_inflight_request_bytes = 256u << 20;
	c->ingest_max_series = INGEST_MAX_SERIES;
	c->ingest_max_labels = INGEST_MAX_LABELS;
	c->ingest_max_label_bytes = INGEST_MAX_LABEL_BYTES;
	c->ingest_max_stack_depth = INGEST_MAX_STACK_DEPTH;
	c->ingest_max_sample_types = INGEST_MAX_SAMPLE_TYPES;
}

struct store *server_store(struct server *s)
{
	return s->store;
}

const struct server_config *server_config(const struct server *s)
{
	return &s->cfg;
}

bool server_stopping(const struct server *s)
{
	return atomic_load(&s->stopping);
}

struct server_metrics *server_metrics(struct server *s)
{
	return &s->metrics;
}

int server_port(const struct server *s)
{
	return s->port;
}

int grpc_fail(struct grpc_call *c, int code, const char *fmt, ...)
{
	va_list ap;
	c->status = code;
	va_start(ap, fmt);
	vsnprintf(c->message, sizeof(c->message), fmt, ap);
	va_end(ap);
	return code;
}

int grpc_code_from_errno(int e)
{
	switch (e) {
	case 0:
		return GRPC_STATUS_OK;
	case -EINVAL:
	case -EBADMSG:
	case -ERANGE:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case -ENOENT:
		return GRPC_STATUS_NOT_FOUND;
	case -EFBIG:
	case -E2BIG:
	case -ENOMEM:
	case -ENOSPC:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case -ESHUTDOWN:
	case -ECONNREFUSED: /* the store's backend (ClickHouse) is unreachable */
		return GRPC_STATUS_UNAVAILABLE;
	case -ETIMEDOUT:
		return GRPC_STATUS_DEADLINE_EXCEEDED;
	case -ENOSYS:
		return GRPC_STATUS_UNIMPLEMENTED;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

/* Loads the tokens, applies the loopback rule, and makes the self-scrape
 * token. */
static int setup_auth(struct server *s, struct kiln_error *err)
{
	const struct server_config *c = &s->cfg;
	struct auth_config ac = {.tokens_file = c->auth_tokens_file,
				 .metrics_open = c->auth_metrics_open};
	unsigned char rnd[24];
	int rc;

	if (c->auth_tokens_file && c->auth_disable)
		return kiln_error_set(err, EINVAL,
				      "--auth-tokens-file and --auth-disable exclude each other");
	rc = auth_new(&ac, &s->auth, err);
	if (rc)
		return rc;
	if (!auth_enabled(s->auth)) {
		if (listener_loopback_only(s))
			return 0;
		const char *colon = strrchr(c->http_address, ':');
		if (!c->auth_disable)
			return kiln_error_set(
			    err, EACCES,
			    "--http-address=%s listens beyond loopback without authentication: "
			    "pass --auth-tokens-file=FILE (see docs/SECURITY.md), listen on "
			    "127.0.0.1:%s, or pass --auth-disable to serve anyone who connects",
			    c->http_address, colon ? colon + 1 : "PORT");
		log_warn("auth: --auth-disable: anyone who reaches %s may read, write and "
			 "administer this server",
			 c->http_address);
		return 0;
	}
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return kiln_error_set(err, EIO, "getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(s->self_token + 2 * i, 3, "%02x", rnd[i]);
	return auth_add_internal(s->auth, s->self_token, AUTH_ADMIN) == 0
		   ? 0
		   : kiln_error_set(err, ENOMEM, "out of memory");
}

void server_request_reload(struct server *s)
{
	s->reload_requested = 1;
}

void server_reload(struct server *s)
{
	struct kiln_error err = {0};

	if (auth_enabled(s->auth)) {
		if (auth_reload(s->auth, &err) < 0)
			log_error("SIGHUP: tokens not reloaded, the old ones stay in effect: %s",
				  err.msg);
		else
			log_info("SIGHUP: reloaded %s", s->cfg.auth_tokens_file);
	}
	for (size_t i = 0; i < server_n_extensions; i++)
		if (s->ext_state && s->ext_state[i] && server_extensions[i].reload)
			server_extensions[i].reload(s->ext_state[i]);
}

/* Each connection takes up to three descriptors (the socket; an HTTP/2
 * connection's eventfd; a TLS relay's socketpair): lift the soft limit to
 * the hard one, as the Go runtime does, and say so when --max-connections
 * still cannot be reached (accept would fail first, and the accept loop
 * would have to evict idle connections for lack of descriptors). */
static void check_fd_limit(const struct server_config *c)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	rlim_t need = (rlim_t)c->max_connections * 3 + 256;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		log_warn("--max-connections=%d needs about %llu file descriptors, the limit is "
			 "%llu: raise it (ulimit -n, systemd LimitNOFILE=) or lower "
			 "--max-connections",
			 c->max_connections, (unsigned long long)need,
			 (unsigned long long)rl.rlim_cur);
}

int server_new(const struct server_config *c, struct server **out, struct kiln_error *err)
{
	struct server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return kiln_error_set(err, ENOMEM, "out of memory");
	s->cfg = *c;
	s->listen_fd = -1;
	pthread_mutex_init(&s->conn_lock, NULL);
	pthread_cond_init(&s->conn_cond, NULL);
	s->conns = conn_table_new(&s->cfg);
	if (!s->conns) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = metrics_init(&s->metrics);
	if (rc) {
		kiln_error_set(err, -rc, "out of memory for metrics");
		goto fail;
	}
	/* Bind first: a taken port should fail before the store replays its WAL. */
	rc = listener_open(s, err);
	if (rc)
		goto fail;
	check_fd_limit(c);
	rc = setup_auth(s, err);
	if (rc)
		goto fail;
	/* Resolved by the debuginfo extension once it runs (handlers_debuginfo.c). */
	struct store_symbolizer sym = {.ctx = s,
				       .resolve = server_symbolize_resolve,
				       .resolve_batch = server_symbolize_resolve_batch,
				       .unresolved = server_symbolize_unresolved};
	struct store_options so = {.path = c->storage_path,
				   .retention_ms = c->retention_ms,
				   .max_labels_per_series = c->ingest_max_labels,
				   .symbolizer = &sym};
	if (c->storage_clickhouse) {
		so.backend = STORE_BACKEND_CLICKHOUSE;
		so.clickhouse =
		    (struct store_clickhouse_options){.url = c->clickhouse_url,
						      .database = c->clickhouse_database,
						      .user = c->clickhouse_user,
						      .password = c->clickhouse_password};
	}
	rc = store_open(&so, &s->store, err);
	if (rc) {
		kiln_error_prefix(
		    err, c->storage_clickhouse ? "--storage=clickhouse: " : "--storage-path=%s: ",
		    c->storage_path);
		goto fail;
	}
	s->ingest_pool = pool_new("ingest", c->ingest_threads);
	s->query_pool = pool_new("query", c->query_threads);
	s->decoders = ingest_decoders_new((size_t)c->ingest_threads);
	if (!s->ingest_pool || !s->query_pool || !s->decoders) {
		rc = kiln_error_set(err, ENOMEM, "cannot start worker threads");
		goto fail;
	}
	rc = http1_start(s, err);
	if (rc)
		goto fail;
	if (c->tls_cert_file && c->tls_key_file) {
		rc = tls_init(s, err);
		if (rc)
			goto fail;
	}
	s->ext_state = calloc(server_n_extensions + 1, sizeof(void *));
	if (!s->ext_state) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < server_n_extensions; i++) {
		rc = server_extensions[i].start(s, c->config_path, &s->ext_state[i], err);
		if (rc) {
			kiln_error_prefix(err, "%s: ", server_extensions[i].name);
			goto fail;
		}
	}
	atomic_store(&s->ready, true);
	*out = s;
	return 0;
fail:
	server_free(s);
	return rc < 0 ? rc : -EIO;
}

void *server_extension_state(struct server *s, const char *name)
{
	if (!s->ext_state)
		return NULL;
	for (size_t i = 0; i < server_n_extensions; i++)
		if (strcmp(server_extensions[i].name, name) == 0)
			return s->ext_state[i];
	return NULL;
}

void server_stop(struct server *s)
{
	s->stop_requested = 1;
}

int server_run(struct server *s)
{
	log_info("listening on %s (port %d, %s), storage %s", s->cfg.http_address, s->port,
		 s->tls ? "TLS" : "plaintext", s->cfg.storage_path);
	listener_run(s);

	log_info("shutting down: finishing in-flight requests");
	atomic_store(&s->stopping, true);
	atomic_store(&s->ready, false);
	close(s->listen_fd);
	s->listen_fd = -1;

	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DRAIN_TIMEOUT_S;
	pthread_mutex_lock(&s->conn_lock);
	while (s->n_conns > 0) {
		if (pthread_cond_timedwait(&s->conn_cond, &s->conn_lock, &until) == ETIMEDOUT) {
			log_warn("shutdown: %d connection(s) still open after %ds", s->n_conns,
				 DRAIN_TIMEOUT_S);
			break;
		}
	}
	pthread_mutex_unlock(&s->conn_lock);
	log_debug("shutdown: connections drained");
	return 0;
}

void server_free(struct server *s)
{
	if (!s)
		return;
	atomic_store(&s->stopping, true);
	/* MHD first: its connection threads run handlers that use the store. */
	http1_stop(s);
	log_debug("shutdown: HTTP/1.1 daemon stopped");
	/* Connection threads that outlived the drain timeout still reference s
	 * and may have jobs on the pools: wait for them (an HTTP/2 connection
	 * gives up on a peer that stopped reading within seconds). */
	pthread_mutex_lock(&s->conn_lock);
	while (s->n_conns > 0)
		pthread_cond_wait(&s->conn_cond, &s->conn_lock);
	pthread_mutex_unlock(&s->conn_lock);
	pool_free(s->ingest_pool);
	pool_free(s->query_pool);
	ingest_decoders_free(s->decoders);
	if (s->ext_state) {
		for (size_t i = server_n_extensions; i-- > 0;)
			if (s->ext_state[i] && server_extensions[i].stop)
				server_extensions[i].stop(s->ext_state[i]);
		free(s->ext_state);
	}
	log_debug("shutdown: extensions stopped; closing the store");
	store_close(s->store);
	stream_sessions_free(atomic_load(&s->stream_sessions));
	if (s->tls)
		SSL_CTX_free(s->tls);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	metrics_release(&s->metrics);
	conn_table_free(s->conns);
	auth_free(s->auth);
	pthread_mutex_destroy(&s->conn_lock);
	pthread_cond_destroy(&s->conn_cond);
	free(s);
}
