/*
 * handlers.h — the endpoint handlers that routes.c lists. Each file
 * implements one group: rpc_ingest.c (WriteRaw), rpc_query.c (QueryService),
 * http_api.c (the JSON API), http_basic.c (health, metrics, UI, config hook).
 */
#ifndef KILN_SERVER_HANDLERS_H
#define KILN_SERVER_HANDLERS_H

#include "server/server.h"

void rpc_write_raw(struct grpc_call *c);
void rpc_profile_types(struct grpc_call *c);
void rpc_labels(struct grpc_call *c);
void rpc_values(struct grpc_call *c);
void rpc_query_range(struct grpc_call *c);
void rpc_query(struct grpc_call *c);
void rpc_unimplemented(struct grpc_call *c);

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

/* Self-profiling (selfprof.c): CPU profile of the server's own threads. */
void http_debug_pprof_profile(const struct http_request *req, struct http_response *resp);

/* --config-path: checked for readability here; the scrape manager (pull
 * mode) replaces this extension with its own. */
int ext_config_start(struct server *s, const char *config_path, void **state,
		     struct kiln_error *err);
void ext_config_stop(void *state);

#endif
