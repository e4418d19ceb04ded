/*
 * h2_internal.h — what the files of the HTTP/2 server share: a stream, a
 * job and a connection, and the steps each file provides.
 *
 *   h2.c          the connection loop: deadlines, idle/handshake timeouts,
 *                 shutdown, reading the socket (h2_serve)
 *   h2_session.c  nghttp2 callbacks: headers, body limits, authorization
 *   h2_dispatch.c complete request -> job on a pool -> response
 *   h2_respond.c  submitting gRPC and plain HTTP responses
 *   h2_watch.c    the server-streaming Health/Watch
 *
 * Everything here runs on the connection's thread except run_job's handler
 * (a worker), which touches only its job and, under conn->lock, conn->done.
 */
#ifndef KILN_SERVER_H2_INTERNAL_H
#define KILN_SERVER_H2_INTERNAL_H

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/cors.h"
#include "server/health.h"
#include "server/internal.h"
#include "server/reflection.h"
#include "server/webrpc.h"

struct h2_stream {
	int32_t id;
	char path[4096]; /* with the query string for HTTP requests */
	char method[16];
	bool grpc_content_type;
	bool gzip_encoding;
	char encoding[32];
	int64_t deadline_ns;
	char authorization[AUTH_TOKEN_MAX + 32]; /* "" when absent */
	bool authorization_overlong;
	bool authorized; /* passed the gate (server_authorize_*) at HEADERS */
	struct buf body;
	uint64_t reserved; /* bytes of --max-inflight-request-bytes held */
	int64_t begin_ns;  /* HEADERS began: the body's rate counts from here */
	bool dispatched;   /* a job is running */
	bool answered;	   /* a response has been submitted */
	/* Answered before the client finished sending: once the response's
	 * last frame is out, RST_STREAM(NO_ERROR) asks it to stop (RFC 9113
	 * section 8.1), which closes the stream. Sent earlier, the reset could
	 * overtake the response. */
	bool reset_when_sent;
	/* response */
	struct buf out; /* prefix + message */
	size_t out_off;
	int status;
	char message[512];
	/* metrics */
	struct route_metrics *metrics;
	int64_t start_ns;
	/* grpc.health.v1.Health/Watch (health.h): the status last sent. */
	bool watching, watch_ending;
	enum health_status watch_sent;
	char watch_service[256];
	/* gRPC-Web and Connect (webrpc.h): decided when the headers are in. */
	enum webrpc_protocol web;
	char content_type[96];
	char origin[256]; /* for CORS (cors.h); "" when absent */
	bool preflight;	  /* an OPTIONS request: answered with the CORS allowances */
	char grpc_timeout[16], connect_timeout[16], connect_version[8];
	char content_encoding[32];
	/* A bidirectional stream (reflection.h): each message answered as it
	 * arrives, through read_watch; watch_ending once the client is done. */
	bool bidi;
	struct h2_stream *next, *prev;
};

struct h2_job {
	struct h2_conn *conn;
	int32_t stream_id;
	const struct grpc_method *method; /* a gRPC call ... */
	struct grpc_call call;
	uint8_t *req_owned;
	const struct http_route *route; /* ... or a plain HTTP request over HTTP/2 */
	struct http_request hreq;
	struct http_response hresp;
	char *hpath; /* owned: path without the query string */
	/* ... or a gRPC-Web/Connect call, with copies of what it needs from
	 * the stream (which a client reset may free while the job runs) */
	bool web;
	struct webrpc_request wreq;
	char wpath[4096], wauth[AUTH_TOKEN_MAX + 32];
	char wgrpc_timeout[16], wencoding[32], wconnect_timeout[16], wconnect_version[8];
	char wcontent_encoding[32];
	struct h2_job *next;
};

struct h2_conn {
	struct server *srv;
	struct conn_io io;
	nghttp2_session *session;
	int efd;
	pthread_mutex_t lock;
	struct h2_job *done; /* finished jobs, guarded by lock */
	int inflight;	     /* jobs queued or running (connection thread only) */
	struct h2_stream *streams;
	int watching;	    /* Watch streams open */
	bool settings_seen; /* the client's SETTINGS (after its preface) */
};

/* An nghttp2 name/value pair from two C strings. */
#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE         \
	}

/* ---- h2_respond.c ---- each answers st (a second answer is ignored). */
/* A trailers-only gRPC error with grpc-status code. */
void h2_submit_error(struct h2_conn *c, struct h2_stream *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A gRPC success carrying msg (copied); RESOURCE_EXHAUSTED past the limit. */
void h2_submit_ok(struct h2_conn *c, struct h2_stream *st, struct buf *msg);
/* A plain HTTP response; r's body is moved into the stream. */
void h2_submit_http(struct h2_conn *c, struct h2_stream *st, struct http_response *r);
/* A plain HTTP error with a JSON body (http_error). */
void h2_submit_http_error(struct h2_conn *c, struct h2_stream *st, int status, const char *msg);
/* An error of a gRPC-Web or Connect call, in its own protocol's form. */
void h2_submit_web_error(struct h2_conn *c, struct h2_stream *st, int code, const char *msg);
/* Copies the next piece of st->out into an nghttp2 data buffer. */
size_t h2_copy_out(struct h2_stream *st, uint8_t *buf, size_t length);
/* Records the stream's latency and outcome once. */
void h2_stream_finish_metrics(struct h2_stream *st);

/* ---- h2_dispatch.c ---- */
/* A complete gRPC request: unwrapped and queued on the method's pool, or
 * answered at once (unknown method, shutting down, malformed). */
void h2_dispatch_grpc(struct h2_conn *c, struct h2_stream *st);
/* A complete plain HTTP request: routed and queued on the query pool. */
void h2_dispatch_http(struct h2_conn *c, struct h2_stream *st);
/* A gRPC-Web or Connect call: webrpc_serve on the method's pool, answered
 * as a plain HTTP response. */
void h2_dispatch_web(struct h2_conn *c, struct h2_stream *st);
/* Connection thread: submits the responses of finished jobs. */
void h2_collect_done(struct h2_conn *c);

/* ---- h2_watch.c ---- */
void h2_watch_start(struct h2_conn *c, struct h2_stream *st);
/* The same over gRPC-Web or Connect streaming (st->web). */
void h2_web_watch_start(struct h2_conn *c, struct h2_stream *st);
/* Sends status changes on every open Watch stream; run on each loop turn. */
void h2_watch_poll(struct h2_conn *c);
/* Bidirectional streams (reflection.h), in h2_watch.c beside Watch, whose
 * deferred sending they share: each complete request message is answered
 * on the connection thread and appended to st->out. */
void h2_bidi_send(struct h2_conn *c, struct h2_stream *st);
int h2_bidi_data(struct h2_conn *c, struct h2_stream *st, const uint8_t *data, size_t len);

/* ---- h2_session.c ---- */
/* Creates c->session with Kiln's callbacks and settings: 0 or -ENOMEM. */
int h2_open_session(struct h2_conn *c);

#endif
