/*
 * health.h — grpc.health.v1.Health (health.c): Check on the worker pool like
 * any unary method; Watch, the one server-streaming method, is served by
 * the HTTP/2 connection thread (h2.c) through the calls below, because a
 * watch must outlive a pool job: it sends the current status at once and a
 * new message whenever the status changes, until the client goes away or
 * the server stops (then NOT_SERVING is sent and the stream ends).
 *
 * The status is what /ready reports: SERVING once the server is ready and
 * until it begins to stop, NOT_SERVING otherwise. Services: "" (the server)
 * and the fully qualified name of every service in routes.c.
 *
 * Bounds: a watch is one HTTP/2 stream, so it counts against the
 * connection's stream limit (100) and --max-connections; a connection holds
 * at most HEALTH_MAX_WATCHES_PER_CONN of them (more are refused with
 * RESOURCE_EXHAUSTED).
 */
#ifndef KILN_SERVER_HEALTH_H
#define KILN_SERVER_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

struct server;

#define HEALTH_MAX_WATCHES_PER_CONN 16

enum health_status {
	HEALTH_UNKNOWN = 0,
	HEALTH_SERVING = 1,
	HEALTH_NOT_SERVING = 2,
	HEALTH_SERVICE_UNKNOWN = 3,
};

/* True for the Watch method's path. */
bool health_is_watch(const char *path);
/* Decodes a HealthCheckRequest (the unwrapped message) and copies the
 * service name to service; -EINVAL when it is not one. */
int health_parse_request(const uint8_t *msg, size_t len, char *service, size_t size);
/* The status of service now (SERVICE_UNKNOWN for a name the server lacks). */
enum health_status health_status(struct server *s, const char *service);
/* Appends one gRPC-framed HealthCheckResponse (5-byte prefix + message). */
int health_append_framed(struct buf *out, enum health_status st);
/* Counts a Watch stream opened (for /metrics). */
void health_count_watch(void);
/* Appends the kiln_grpc_health_* metrics. */
void health_metrics_render(struct buf *out);

#endif
