/*
 * webrpc.h — gRPC-Web and Connect on the server's one port, over HTTP/1.1
 * (http1.c) and HTTP/2 (h2.c), for browsers, Grafana's Parca data source
 * (connect-go in gRPC-Web mode) and Parca's web UI (protobuf-ts gRPC-Web).
 *
 * Every call runs the handler that native gRPC runs: server_grpc_methods[]
 * (routes.c) is the one dispatch table, server_authorize_grpc the one gate.
 * A transport only recognises the request (webrpc_select), collects its
 * headers into a struct webrpc_request and its body, and sends back the
 * struct http_response that webrpc_serve fills. What differs per protocol,
 * the framing of messages and of the status, lives here:
 *
 *   gRPC-Web (application/grpc-web[+proto]): the body is gRPC's
 *     length-prefixed messages; the response ends with a trailer frame
 *     (flag 0x80) carrying "grpc-status: N\r\ngrpc-message: ...\r\n". HTTP
 *     status 200 whatever the outcome.
 *   gRPC-Web-text (application/grpc-web-text[+proto]): the same bytes in
 *     base64, both ways (a request may be several padded chunks).
 *   Connect unary (application/proto, application/json): the body is the
 *     bare message; an error is an HTTP status mapped from the code and a
 *     JSON body {"code":"not_found","message":"..."}.
 *   Connect streaming (application/connect+proto|+json): messages in
 *     5-byte envelopes; the last envelope (flag 0x02) is the JSON end-stream
 *     message {} or {"error":{...}}. HTTP status 200.
 *
 * JSON bodies are translated to and from protobuf through the messages'
 * protobuf-c descriptors (pbjson.h), so every method has them.
 *
 * Server streaming (grpc.health.v1.Health/Watch) streams over gRPC-Web,
 * gRPC-Web-text and Connect streaming as over gRPC: the transport holds the
 * response open and sends one message per status change, then the
 * protocol's end (webrpc_watch_*, webrpc_watch.c). Connect's unary protocol
 * has no streams: there Watch answers the current status once. Client streaming
 * (DebuginfoService/Upload) takes every framed message of the body, as over
 * native gRPC; Connect's unary protocol refuses it (Connect says so too).
 *
 * Bad input (truncated frames, bad base64, a content type that is none of
 * these, oversize messages) is answered in the protocol's error form with a
 * message saying what and where; the pure decoders below are fuzzed by
 * fuzz/fuzz_grpcweb_frame.c.
 */
#ifndef KILN_SERVER_WEBRPC_H
#define KILN_SERVER_WEBRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "server/server.h"

enum webrpc_protocol {
	WEBRPC_NONE = 0,
	WEBRPC_GRPC_WEB,	     /* application/grpc-web, application/grpc-web+proto */
	WEBRPC_GRPC_WEB_TEXT,	     /* application/grpc-web-text[+proto] */
	WEBRPC_CONNECT_PROTO,	     /* application/proto */
	WEBRPC_CONNECT_JSON,	     /* application/json */
	WEBRPC_CONNECT_STREAM_PROTO, /* application/connect+proto */
	WEBRPC_CONNECT_STREAM_JSON,  /* application/connect+json */
	WEBRPC_UNSUPPORTED,	     /* application/grpc-web+json and other codecs */
};

/* The protocol of a request's Content-Type (parameters after ';' ignored,
 * case-insensitive). NONE for anything that is not one of the above, e.g.
 * native application/grpc. */
enum webrpc_protocol webrpc_protocol_of(const char *content_type, size_t len);

/* Whether a request is a gRPC-Web/Connect call that webrpc_serve answers:
 * gRPC-Web and Connect streaming content types always (an unknown method is
 * answered UNIMPLEMENTED in their form), the bare application/proto and
 * application/json only on a method's path (POST /pkg.Service/Method), so
 * that JSON posted to an HTTP route still reaches it. */
enum webrpc_protocol webrpc_select(const char *http_method, const char *path,
				   const char *content_type);

bool webrpc_is_grpc_web(enum webrpc_protocol p);
/* "grpc-web" or "connect" (for metrics and logs). */
const char *webrpc_family(enum webrpc_protocol p);

struct webrpc_request {
	enum webrpc_protocol proto;
	const char *path; /* "/pkg.Service/Method", no query string */
	const uint8_t *body;
	size_t body_len;
	const char *authorization;    /* NULL = none */
	const char *grpc_timeout;     /* gRPC-Web's grpc-timeout, or NULL */
	const char *grpc_encoding;    /* gRPC-Web's grpc-encoding, or NULL */
	const char *connect_timeout;  /* connect-timeout-ms, or NULL */
	const char *connect_version;  /* connect-protocol-version, or NULL */
	const char *content_encoding; /* Connect: content-encoding or connect-content-encoding */
	int64_t start_ns;	      /* when the request began (metrics) */
};

/* Runs the call on the calling thread and fills resp (status, content type,
 * body). The transport sends resp as is, adding only its CORS headers. */
void webrpc_serve(struct server *s, const struct webrpc_request *req, struct http_response *resp);

/* An answer that needs no handler (refused at the gate, body too large, out
 * of memory), in p's form; code is a GRPC_STATUS_*. */
void webrpc_fail(enum webrpc_protocol p, int code, const char *message, struct http_response *resp);

/* The gate alone, for transports that check it before reading the body:
 * 0, or -EACCES/-EPERM with resp filled (webrpc_fail's form). Unknown
 * methods pass (webrpc_serve answers them). */
int webrpc_authorize(struct server *s, enum webrpc_protocol p, const char *path,
		     const char *authorization, struct http_response *resp);

/* The largest body a request of p may have for --grpc-max-message-size
 * max_msg: base64 grows it by a third. */
size_t webrpc_max_body(enum webrpc_protocol p, size_t max_msg);

/* The Content-Type of p's answers ("application/grpc-web+proto", ...). */
const char *webrpc_response_type(enum webrpc_protocol p);

/* ---- Health/Watch as a stream (webrpc.c, webrpc_watch.c) ------------------------ */

/* Whether p can carry a server stream: gRPC-Web (binary and text) and
 * Connect streaming; Connect's unary protocol cannot. */
bool webrpc_is_streaming(enum webrpc_protocol p);
/* Starts Watch for req (a streaming protocol): the checks webrpc_serve
 * makes (protocol version, gate, shutdown) and the request unwrapped into
 * service. GRPC_STATUS_OK, or a code with why (answer it with
 * webrpc_fail). */
int webrpc_watch_begin(struct server *s, const struct webrpc_request *req, char *service,
		       size_t size, char *why, size_t why_cap);
/* Appends one HealthCheckResponse with status st in p's framing: an
 * envelope of protobuf (JSON for connect+json), base64 for gRPC-Web-text.
 * 0 or -ENOMEM. */
int webrpc_watch_message(enum webrpc_protocol p, int status, struct buf *out);
/* Appends the end of a stream that ended well: gRPC-Web's trailer frame
 * (grpc-status 0), Connect's end-stream envelope {}. 0 or -ENOMEM. */
int webrpc_watch_end(enum webrpc_protocol p, struct buf *out);

/* ---- pure decoders and encoders (webrpc_frame.c) ------------------------------- */

/* Standard base64 (RFC 4648 section 4) of in, as gRPC-Web-text sends it:
 * '=' padding may end any 4-character group, so padded chunks may follow
 * one another. -EBADMSG with the offset of the first bad character. */
int webrpc_base64_decode(const uint8_t *in, size_t len, struct buf *out, struct kiln_error *err);
int webrpc_base64_encode(const uint8_t *in, size_t len, struct buf *out);

/* Walks a body of 5-byte envelopes (flag byte, 4-byte big-endian length,
 * message): each flag must be within allowed_flags, each message at most
 * max_msg bytes and wholly inside the body. Returns the number of
 * envelopes, or -EBADMSG / -EFBIG with err saying which envelope and why. */
int webrpc_envelopes_check(const uint8_t *body, size_t len, uint8_t allowed_flags, size_t max_msg,
			   struct kiln_error *err);

/* connect-timeout-ms ("1" to 10 digits) in nanoseconds, -1 if malformed. */
int64_t webrpc_connect_timeout_parse(const char *v);

/* Connect's name of a gRPC code ("invalid_argument") and its HTTP status. */
const char *webrpc_connect_code(int grpc_code);
int webrpc_connect_http_status(int grpc_code);

/* Appends a gRPC-Web trailer frame (flag 0x80) for status and message. */
int webrpc_append_trailer(struct buf *out, int status, const char *message);
/* Appends a Connect error as JSON: {"code":"...","message":"..."}. */
int webrpc_append_connect_error(struct buf *out, int status, const char *message);
/* Appends one 5-byte envelope with flags around msg. */
int webrpc_append_envelope(struct buf *out, uint8_t flags, const uint8_t *msg, size_t len);

/* ---- per-protocol request counts (/metrics) -------------------------------------- */

enum server_protocol { PROTOCOL_GRPC, PROTOCOL_GRPC_WEB, PROTOCOL_CONNECT, PROTOCOL_HTTP };
void protocol_count(enum server_protocol p);
/* Appends kiln_protocol_requests_total{protocol="grpc|grpc-web|connect|http"}. */
void protocol_metrics_render(struct buf *out);

#endif
