/*
 * cors.h — Cross-Origin Resource Sharing for browser clients (Parca's web
 * UI served from another origin, gRPC-Web and Connect from a page), shared
 * by the HTTP/1.1 (http1.c) and HTTP/2 (h2.c) transports.
 *
 * --cors-allowed-origins is a comma-separated list of origins, or "*"; by
 * default it is empty and no CORS header is ever sent (browsers then refuse
 * cross-origin calls, which is the safe default). A request whose Origin is
 * on the list gets Access-Control-Allow-Origin with that origin (and Vary:
 * Origin); with "*" every origin is allowed. Responses expose the gRPC
 * status headers, so that a browser's gRPC-Web client can read a
 * trailers-only answer; preflights (OPTIONS) allow the headers gRPC-Web and
 * Connect clients send.
 */
#ifndef KILN_SERVER_CORS_H
#define KILN_SERVER_CORS_H

/* The Access-Control-Allow-Origin value for a request from origin (NULL
 * when it sent none), or NULL for no CORS headers. allowed is the flag's
 * value (NULL or "" = none). The result is origin itself or "*". */
const char *cors_allow_origin(const char *allowed, const char *origin);

#define CORS_ALLOW_METHODS "GET, POST, DELETE, OPTIONS"
#define CORS_ALLOW_HEADERS                                                                         \
	"Content-Type, Authorization, X-Grpc-Web, X-User-Agent, Grpc-Timeout, Grpc-Encoding, "     \
	"Grpc-Accept-Encoding, Connect-Protocol-Version, Connect-Timeout-Ms, "                     \
	"Connect-Content-Encoding, Connect-Accept-Encoding"
#define CORS_EXPOSE_HEADERS "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin"
#define CORS_MAX_AGE	    "600"

#endif
