/*
 * handlers.h — the endpoint handlers that routes.c lists. Each file
 * implements one group: rpc_ingest.c (WriteRaw), rpc_query.c (QueryService),
 * http_api.c (the JSON API), http_basic.c (health, metrics, UI, config hook).
 */
#ifndef KILN_SERVER_HANDLERS_H
#define KILN_SERVER_HANDLERS_H

#include "server/server.h"

void rpc_write_raw(struct grpc_call *c);
void rpc_ingest_push(struct grpc_call *c); /* rpc_ingest_stream.c */
/* Push's sessions for /metrics (rpc_ingest_stream.c). */
struct buf;
void stream_metrics_render(struct server *s, struct buf *out);
void rpc_profile_types(struct grpc_call *c);
void rpc_labels(struct grpc_call *c);
void rpc_values(struct grpc_call *c);
void rpc_query_range(struct grpc_call *c);
void rpc_query(struct grpc_call *c);
void rpc_unimplemented(struct grpc_call *c);

/* handlers_debuginfo.c: DebuginfoService, GET /api/v1/debuginfo, and the
 * "debuginfo" extension (debuginfo store, symbolizer, background thread). */
void rpc_debuginfo_should_initiate(struct grpc_call *c);
void rpc_debuginfo_initiate(struct grpc_call *c);
void rpc_debuginfo_upload(struct grpc_call *c);
void rpc_debuginfo_mark_finished(struct grpc_call *c);
void http_debuginfo_list(const struct http_request *req, struct http_response *resp);
/* DELETE /api/v1/debuginfo/BUILD_ID: removes an uploaded or fetched file. */
void http_debuginfo_delete(const struct http_request *req, struct http_response *resp);
int ext_debuginfo_start(struct server *s, const char *config_path, void **state,
			struct kiln_error *err);
void ext_debuginfo_stop(void *state);
struct store_mapping_info;
struct store_line_out;
struct store_symbolize_item;
/* The store's symbolizer hook; ctx is the struct server. */
void server_symbolize_unresolved(void *ctx, const struct store_mapping_info *m, uint64_t address,
				 char *name, size_t size);
int server_symbolize_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			     struct store_line_out *lines, size_t max_lines, size_t *n_lines);
int server_symbolize_resolve_batch(void *ctx, const struct store_symbolize_item *items, size_t n,
				   void (*emit)(void *ectx, size_t i, int status,
						const struct store_line_out *lines, size_t n_lines),
				   void *ectx);

void http_healthy(const struct http_request *req, struct http_response *resp);
void http_ready(const struct http_request *req, struct http_response *resp);
void http_metrics(const struct http_request *req, struct http_response *resp);
void http_profile_types(const struct http_request *req, struct http_response *resp);
void http_labels(const struct http_request *req, struct http_response *resp);
void http_values(const struct http_request *req, struct http_response *resp);
void http_query_range(const struct http_request *req, struct http_response *resp);
void http_query(const struct http_request *req, struct http_response *resp);
void http_ui(const struct http_request *req, struct http_response *resp);

/* Pull mode (handlers_scrape.c): the scrape extension and targets. */
void rpc_scrape_targets(struct grpc_call *c);
void http_targets(const struct http_request *req, struct http_response *resp);
int ext_scrape_start(struct server *s, const char *config_path, void **state,
		     struct kiln_error *err);
void ext_scrape_stop(void *state);
/* SIGHUP: rereads --config-path; a bad file keeps the old config. */
void ext_scrape_reload(void *state);
/* Appends the kiln_scrape_* metrics (CPU by phase, scrapes, errors). */
void ext_scrape_metrics(struct server *s, struct buf *out);

/* Self-profiling (selfprof.c): CPU profile of the server's own threads. */
void http_debug_pprof_profile(const struct http_request *req, struct http_response *resp);
/* Any other /debug/pprof/ path (heap, allocs, ...): 404 with the reason. */
void http_debug_pprof_other(const struct http_request *req, struct http_response *resp);

/* Pyroscope's push API, POST /ingest (handlers_pyroscope.c). */
void http_pyroscope_ingest(const struct http_request *req, struct http_response *resp);
void pyroscope_metrics_render(struct buf *out);
/* grpc.health.v1.Health (health.c; Watch is streamed by h2.c). */
void rpc_health_check(struct grpc_call *c);
void rpc_health_watch(struct grpc_call *c);
/* OpenTelemetry profiles ingest (handlers_otlp.c): gRPC ProfilesService/Export
 * and POST /v1development/profiles; otlp_metrics_render appends kiln_otlp_*. */
void rpc_otlp_export(struct grpc_call *c);
void http_otlp_profiles(const struct http_request *req, struct http_response *resp);
void otlp_metrics_render(struct buf *out);

#endif
