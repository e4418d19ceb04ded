/*
 * routes.c — every endpoint of the server, one line each.
 *
 * To add a gRPC method: a handler `void rpc_x(struct grpc_call *)` and a line
 * in server_grpc_methods[] (POOL_INGEST for writes, POOL_QUERY for reads).
 * To add an HTTP route: `void http_x(const struct http_request *, struct
 * http_response *)` and a line in server_http_routes[]; prefix routes match
 * every path below them, and the first match wins (keep "/" last: it is the
 * web UI with its single-page-app fallback).
 *
 * Each line names the token role the endpoint takes (auth.h): AUTH_WRITE
 * for what agents and scrapers push, AUTH_READ for queries and the UI's API,
 * AUTH_ADMIN for deleting debuginfo and profiling the server itself,
 * AUTH_OPEN for health checks and the UI's static files (it must load to ask
 * for a token), AUTH_METRICS for /metrics (read unless --auth-metrics-open).
 * Every transport passes server_authorize_grpc/_http below before a handler
 * runs, so a new line cannot be reached without its role.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/handlers.h"
#include "server/internal.h"
#include "server/reflection.h"

const struct grpc_method server_grpc_methods[] = {
    {"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw", AUTH_WRITE, POOL_INGEST,
     rpc_write_raw},
    {"/kiln.ingest.v1.IngestService/Push", AUTH_WRITE, POOL_INGEST, rpc_ingest_push},
    {"/parca.query.v1alpha1.QueryService/ProfileTypes", AUTH_READ, POOL_QUERY, rpc_profile_types},
    {"/parca.query.v1alpha1.QueryService/Labels", AUTH_READ, POOL_QUERY, rpc_labels},
    {"/parca.query.v1alpha1.QueryService/Values", AUTH_READ, POOL_QUERY, rpc_values},
    {"/parca.query.v1alpha1.QueryService/QueryRange", AUTH_READ, POOL_QUERY, rpc_query_range},
    {"/parca.query.v1alpha1.QueryService/Query", AUTH_READ, POOL_QUERY, rpc_query},
    {"/parca.query.v1alpha1.QueryService/Series", AUTH_READ, POOL_QUERY, rpc_unimplemented},
    {"/parca.query.v1alpha1.QueryService/ShareProfile", AUTH_READ, POOL_QUERY, rpc_unimplemented},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload", AUTH_WRITE, POOL_QUERY,
     rpc_debuginfo_should_initiate},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/InitiateUpload", AUTH_WRITE, POOL_QUERY,
     rpc_debuginfo_initiate},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/Upload", AUTH_WRITE, POOL_QUERY,
     rpc_debuginfo_upload},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/MarkUploadFinished", AUTH_WRITE, POOL_QUERY,
     rpc_debuginfo_mark_finished},
    {"/parca.scrape.v1alpha1.ScrapeService/Targets", AUTH_READ, POOL_QUERY, rpc_scrape_targets},
    {"/grpc.health.v1.Health/Check", AUTH_OPEN, POOL_QUERY, rpc_health_check},
    {"/grpc.health.v1.Health/Watch", AUTH_OPEN, POOL_QUERY, rpc_health_watch},
    {"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export", AUTH_WRITE,
     POOL_INGEST, rpc_otlp_export},
    /* Bidirectional streams, answered message by message (reflection.h). */
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", AUTH_READ, POOL_QUERY,
     rpc_reflection_info},
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", AUTH_READ, POOL_QUERY,
     rpc_reflection_info},
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
    {"GET", "/healthy", false, AUTH_OPEN, http_healthy},
    {"GET", "/ready", false, AUTH_OPEN, http_ready},
    {"GET", "/metrics", false, AUTH_METRICS, http_metrics},
    {"GET", "/api/v1/profile-types", false, AUTH_READ, http_profile_types},
    {"GET", "/api/v1/labels", false, AUTH_READ, http_labels},
    {"GET", "/api/v1/values", false, AUTH_READ, http_values},
    {"GET", "/api/v1/query_range", false, AUTH_READ, http_query_range},
    {"GET", "/api/v1/query", false, AUTH_READ, http_query},
    {"GET", "/api/v1/debuginfo", false, AUTH_READ, http_debuginfo_list},
    {"DELETE", "/api/v1/debuginfo/", true, AUTH_ADMIN, http_debuginfo_delete},
    {"GET", "/api/v1/targets", false, AUTH_READ, http_targets},
    {"POST", "/ingest", false, AUTH_WRITE, http_pyroscope_ingest},
    {"GET", "/debug/pprof/profile", false, AUTH_ADMIN, http_debug_pprof_profile},
    {"GET", "/debug/pprof/", true, AUTH_ADMIN, http_debug_pprof_other},
    {"POST", "/v1development/profiles", false, AUTH_WRITE, http_otlp_profiles},
    {"GET", "/", true, AUTH_OPEN, http_ui},
};
const size_t server_n_http_routes = sizeof(server_http_routes) / sizeof(server_http_routes[0]);

/* Subsystems started with the server (the scrape manager joins here). */
const struct server_extension server_extensions[] = {
    {"debuginfo", ext_debuginfo_start, ext_debuginfo_stop, NULL},
    {"scrape", ext_scrape_start, ext_scrape_stop, ext_scrape_reload},
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

int server_authorize_grpc(struct server *s, const struct grpc_method *m, const char *authorization,
			  struct grpc_call *c)
{
	char why[400];
	int rc = auth_check(s->auth, m->need, authorization, m->path, why, sizeof(why));

	if (rc == -EACCES)
		grpc_fail(c, GRPC_STATUS_UNAUTHENTICATED, "%s", why);
	else if (rc == -EPERM)
		grpc_fail(c, GRPC_STATUS_PERMISSION_DENIED, "%s", why);
	return rc;
}

int server_authorize_http(struct server *s, const struct http_route *r, const char *path,
			  const char *authorization, struct http_response *resp)
{
	char why[400], what[160];
	int rc;

	snprintf(what, sizeof(what), "%s %.120s", r->method, path);
	rc = auth_check(s->auth, r->need, authorization, what, why, sizeof(why));
	if (rc == -EACCES) {
		http_error(resp, 401, -1, "%s", why);
		resp->www_authenticate = authorization && *authorization
					     ? "Bearer realm=\"kiln\", error=\"invalid_token\""
					     : "Bearer realm=\"kiln\"";
	} else if (rc == -EPERM) {
		http_error(resp, 403, -1, "%s", why);
		resp->www_authenticate = "Bearer realm=\"kiln\", error=\"insufficient_scope\"";
	}
	return rc;
}
