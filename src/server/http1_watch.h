/*
 * http1_watch.h — grpc.health.v1.Health/Watch over gRPC-Web and Connect
 * streaming on HTTP/1.1 (webrpc.h): the response is held open, chunked,
 * and carries one message per status change, then the protocol's end when
 * the server stops. The connection's own thread (libmicrohttpd runs one per
 * connection) waits for the changes, checking every 100 ms.
 */
#ifndef KILN_SERVER_HTTP1_WATCH_H
#define KILN_SERVER_HTTP1_WATCH_H

#include <microhttpd.h>

#include "server/internal.h"
#include "server/webrpc.h"

/* Starts the stream for wr (Watch over a streaming protocol): returns 0
 * with *ret the result of queueing it, or -1 with resp filled with the
 * refusal (webrpc_fail's form) for the caller to send. origin: the CORS
 * origin to allow, or NULL. */
int http1_web_watch(struct server *s, struct MHD_Connection *conn, const struct webrpc_request *wr,
		    const char *origin, enum MHD_Result *ret, struct http_response *resp);

/* Waits until every open stream has ended (each sees the server stopping
 * within its 100 ms check and sends its end), at most timeout_ms; for the
 * shutdown, before the daemon shuts the connections. */
#define HTTP1_WATCH_DRAIN_MS 2000
void http1_watch_drain(int timeout_ms);

#endif
