/*
 * health.c — grpc.health.v1.Health: Check, and the pieces of Watch that
 * h2.c's connection thread calls (health.h says why Watch lives there).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "server/handlers.h"
#include "server/health.h"
#include "server/internal.h"

#define WATCH_PATH "/grpc.health.v1.Health/Watch"

/* Process-wide counters for /metrics. */
static _Atomic uint64_t health_checks, health_watches;

bool health_is_watch(const char *path)
{
	return strcmp(path, WATCH_PATH) == 0;
}

/* "/pkg.Service/Method" names "pkg.Service" for service when it matches. */
static bool route_has_service(const char *path, const char *service)
{
	size_t n = strlen(service);
	return path[0] == '/' && strncmp(path + 1, service, n) == 0 && path[1 + n] == '/';
}

enum health_status health_status(struct server *s, const char *service)
{
	bool known = service[0] == '\0';

	for (size_t i = 0; i < server_n_grpc_methods && !known; i++)
		known = route_has_service(server_grpc_methods[i].path, service);
	if (!known)
		return HEALTH_SERVICE_UNKNOWN;
	return atomic_load(&s->ready) && !server_stopping(s) ? HEALTH_SERVING : HEALTH_NOT_SERVING;
}

int health_parse_request(const uint8_t *msg, size_t len, char *service, size_t size)
{
	Grpc__Health__V1__HealthCheckRequest *r =
	    grpc__health__v1__health_check_request__unpack(NULL, len, msg);
	int rc = 0;

	if (!r)
		return -EINVAL;
	if (strlen(r->service) >= size)
		rc = -EINVAL;
	else
		strcpy(service, r->service);
	grpc__health__v1__health_check_request__free_unpacked(r, NULL);
	return rc;
}

static size_t encode_response(enum health_status st, uint8_t *out)
{
	Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)st;
	return grpc__health__v1__health_check_response__pack(&r, out);
}

int health_append_framed(struct buf *out, enum health_status st)
{
	uint8_t msg[16];
	size_t n = encode_response(st, msg);
	uint8_t prefix[5] = {0, 0, 0, 0, (uint8_t)n};

	if (buf_append(out, prefix, 5) || buf_append(out, msg, n))
		return -ENOMEM;
	return 0;
}

void health_count_watch(void)
{
	atomic_fetch_add(&health_watches, 1);
}

void health_metrics_render(struct buf *out)
{
	buf_printf(out,
		   "# HELP kiln_grpc_health_requests_total grpc.health.v1.Health calls by "
		   "method.\n# TYPE kiln_grpc_health_requests_total counter\n"
		   "kiln_grpc_health_requests_total{method=\"Check\"} %lu\n"
		   "kiln_grpc_health_requests_total{method=\"Watch\"} %lu\n",
		   (unsigned long)atomic_load(&health_checks),
		   (unsigned long)atomic_load(&health_watches));
}

void rpc_health_check(struct grpc_call *c)
{
	char service[256];
	enum health_status st;
	uint8_t msg[16];
	size_t n;

	atomic_fetch_add(&health_checks, 1);
	if (health_parse_request(c->req, c->req_len, service, sizeof(service))) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "not a HealthCheckRequest");
		return;
	}
	st = health_status(c->srv, service);
	if (st == HEALTH_SERVICE_UNKNOWN) {
		grpc_fail(c, GRPC_STATUS_NOT_FOUND, "unknown service \"%s\"", service);
		return;
	}
	n = encode_response(st, msg);
	if (buf_append(&c->resp, msg, n))
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

void rpc_health_watch(struct grpc_call *c)
{
	/* Never reached: h2.c serves Watch on the connection thread. */
	grpc_fail(c, GRPC_STATUS_INTERNAL, "Watch is a streaming method");
}
