/*
 * routes.c — every endpoint of the server, one line each.
 *
 * To add a gRPC method: a handler `void rpc_x(struct grpc_call *)` and a line
 * in server_grpc_methods[] (POOL_INGEST for writes, POOL_QUERY for reads).
 * To add an HTTP route: `void http_x(const struct http_request *, struct
 * http_response *)` and a line in server_http_routes[]; prefix routes match
 * every path below them, and the first match wins (keep "/" last: it is the
 * web UI with its single-page-app fallback).
 */
#include <string.h>

#include "server/handlers.h"
#include "server/internal.h"

const struct grpc_method server_grpc_methods[] = {
    {"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw", POOL_INGEST, rpc_write_raw},
    {"/parca.query.v1alpha1.QueryService/ProfileTypes", POOL_QUERY, rpc_profile_types},
    {"/parca.query.v1alpha1.QueryService/Labels", POOL_QUERY, rpc_labels},
    {"/parca.query.v1alpha1.QueryService/Values", POOL_QUERY, rpc_values},
    {"/parca.query.v1alpha1.QueryService/QueryRange", POOL_QUERY, rpc_query_range},
    {"/parca.query.v1alpha1.QueryService/Query", POOL_QUERY, rpc_query},
    {"/parca.query.v1alpha1.QueryService/Series", POOL_QUERY, rpc_unimplemented},
    {"/parca.query.v1alpha1.QueryService/ShareProfile", POOL_QUERY, rpc_unimplemented},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload", POOL_QUERY,
     rpc_debuginfo_should_initiate},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/InitiateUpload", POOL_QUERY,
     rpc_debuginfo_initiate},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/Upload", POOL_QUERY, rpc_debuginfo_upload},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/MarkUploadFinished", POOL_QUERY,
     rpc_debuginfo_mark_finished},
    {"/parca.scrape.v1alpha1.ScrapeService/Targets", POOL_QUERY, rpc_scrape_targets},
};
const size_t server_n_grpc_methods = sizeof(server_grpc_methods) / sizeof(server_grpc_methods[0]);

/* The client-streaming methods among them. */
static const char *const client_streaming_methods[] = {
    "/parca.debuginfo.v1alpha1.DebuginfoService/Upload",
};

bool server_grpc_client_streaming(const char *path)
{
	for (size_t i = 0;
	     i < sizeof(client_streaming_methods) / sizeof(client_streaming_methods[0]); i++)
		if (strcmp(client_streaming_methods[i], path) == 0)
			return true;
	return false;
}

const struct http_route server_http_routes[] = {
    {"GET", "/healthy", false, http_healthy},
    {"GET", "/ready", false, http_ready},
    {"GET", "/metrics", false, http_metrics},
    {"GET", "/api/v1/profile-types", false, http_profile_types},
    {"GET", "/api/v1/labels", false, http_labels},
    {"GET", "/api/v1/values", false, http_values},
    {"GET", "/api/v1/query_range", false, http_query_range},
    {"GET", "/api/v1/query", false, http_query},
    {"GET", "/api/v1/debuginfo", false, http_debuginfo_list},
    {"GET", "/api/v1/targets", false, http_targets},
    {"GET", "/debug/pprof/profile", false, http_debug_pprof_profile},
    {"GET", "/debug/pprof/", true, http_debug_pprof_other},
    {"GET", "/", true, http_ui},
};
const size_t server_n_http_routes = sizeof(server_http_routes) / sizeof(server_http_routes[0]);

/* Subsystems started with the server (the scrape manager joins here). */
const struct server_extension server_extensions[] = {
    {"debuginfo", ext_debuginfo_start, ext_debuginfo_stop},
    {"scrape", ext_scrape_start, ext_scrape_stop},
};
const size_t server_n_extensions = sizeof(server_extensions) / sizeof(server_extensions[0]);

const struct grpc_method *server_find_grpc(const char *path, size_t *index)
{
	for (size_t i = 0; i < server_n_grpc_methods; i++) {
		if (strcmp(server_grpc_methods[i].path, path) == 0) {
			if (index)
				*index = i;
			return &server_grpc_methods[i];
		}
	}
	return NULL;
}

static bool path_matches(const struct http_route *r, const char *path)
{
	if (!r->prefix)
		return strcmp(r->path, path) == 0;
	return strncmp(r->path, path, strlen(r->path)) == 0;
}

const struct http_route *server_find_http(const char *method, const char *path, size_t *index)
{
	for (size_t i = 0; i < server_n_http_routes; i++) {
		const struct http_route *r = &server_http_routes[i];
		if (!path_matches(r, path))
			continue;
		if (method && strcmp(r->method, method) != 0 &&
		    !(strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0))
			continue;
		if (index)
			*index = i;
		return r;
	}
	return NULL;
}
