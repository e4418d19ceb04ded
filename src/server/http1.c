/*
 * http1.c — HTTP/1.1 through libmicrohttpd.
 *
 * The daemon has no listen socket of its own (MHD_USE_NO_LISTEN_SOCKET): it
 * serves one end of a socketpair per HTTP/1.x connection, added with
 * MHD_add_connection by the connection's relay (http1_relay.c), which lets
 * through only requests whose head and framing it checked, so that every
 * refusal of a malformed or oversized request is Kiln's JSON and never
 * libmicrohttpd's HTML. Thread-per-connection mode, so a handler computing
 * a large merge only occupies its own connection's thread. Each
 * connection's entry in the connection table (conn_limits.h) is found by fd
 * when libmicrohttpd starts it and marked busy from a request's first
 * callback to its completion: the relay times the next request's head from
 * then, and the accept loop's reaper closes a connection whose body is too
 * slow.
 *
 * Request bodies are buffered up to --grpc-max-message-size; larger ones get
 * 413, and one that does not fit --max-inflight-request-bytes gets 503. Dispatch goes
 * through server_http_routes[] (routes.c); the route's token role is checked
 * (server_authorize_http) on the first call, when only the headers are in,
 * so a refused request's body is never buffered. CORS headers follow
 * --cors-allowed-origins.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "server/cors.h"
#include "server/internal.h"
#include "server/webrpc.h"
#include "server/http1_watch.h"
#include "server/health.h"

#define CONNECTION_TIMEOUT_S 60

struct http_conn_state {
	struct buf body;
	bool too_large;
	bool over_budget; /* --max-inflight-request-bytes was full */
	bool refused;	  /* the gate answered 401/403 already */
	int64_t start_ns;
	uint64_t received; /* body bytes so far */
	uint64_t reserved; /* of --max-inflight-request-bytes */
	struct conn_entry *entry;
	enum webrpc_protocol web; /* a gRPC-Web/Connect call (webrpc.h) */
};

/* The connection's entry in the table (conn_limits.h), NULL if untracked. */
static struct conn_entry *conn_entry_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

const char *http_arg(const struct http_request *req, const char *name)
{
	if (req->mhd_conn)
		return MHD_lookup_connection_value(req->mhd_conn, MHD_GET_ARGUMENT_KIND, name);
	for (size_t i = 0; i < req->n_args; i++)
		if (strcmp(req->arg_names[i], name) == 0)
			return req->arg_values[i];
	return NULL;
}

struct arg_all {
	const char *name;
	const char **out;
	size_t max, n;
};

static enum MHD_Result arg_all_cb(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct arg_all *aa = cls;
	if (key && strcmp(key, aa->name) == 0) {
		if (aa->n < aa->max)
			aa->out[aa->n] = value ? value : "";
		aa->n++;
	}
	return MHD_YES;
}

size_t http_arg_all(const struct http_request *req, const char *name, const char **out, size_t max)
{
	struct arg_all aa = {.name = name, .out = out, .max = max};
	if (req->mhd_conn) {
		MHD_get_connection_values(req->mhd_conn, MHD_GET_ARGUMENT_KIND, arg_all_cb, &aa);
		return aa.n;
	}
	for (size_t i = 0; i < req->n_args; i++)
		arg_all_cb(&aa, MHD_GET_ARGUMENT_KIND, req->arg_names[i], req->arg_values[i]);
	return aa.n;
}

void http_error(struct http_response *resp, int status, long position, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	resp->status = status;
	resp->content_type = "application/json";
	buf_reset(&resp->body);
	buf_append_str(&resp->body, "{\"error\":\"");
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		if (*p == '"' || *p == '\\')
			buf_printf(&resp->body, "\\%c", *p);
		else if (*p < 0x20)
			buf_printf(&resp->body, "\\u%04x", *p);
		else
			buf_append(&resp->body, p, 1);
	}
	buf_append_str(&resp->body, "\"");
	if (position >= 0)
		buf_printf(&resp->body, ",\"position\":%ld", position);
	buf_append_str(&resp->body, "}\n");
}

int http_status_from_errno(int e)
{
	switch (e) {
	case -EINVAL:
	case -EBADMSG:
	case -ERANGE:
		return 400;
	case -ENOENT:
		return 404;
	case -EFBIG:
	case -E2BIG:
		return 413;
	case -ESHUTDOWN:
	case -EAGAIN:
	case -ECONNREFUSED: /* the store's backend (ClickHouse) is unreachable */
		return 503;
	case -ENOSPC:
		return 507;
	default:
		return 500;
	}
}

/* The Access-Control-Allow-Origin value for this request, or NULL (cors.h). */
static const char *cors_origin(struct server *s, struct MHD_Connection *conn)
{
	return cors_allow_origin(s->cfg.cors_origins,
				 MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"));
}

static enum MHD_Result send_response(struct server *s, struct MHD_Connection *conn,
				     struct http_response *r)
{
	size_t len = 0;
	uint8_t *data = buf_steal(&r->body, &len);
	struct MHD_Response *mr = MHD_create_response_from_buffer(
	    len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!mr) {
		free(data);
		return MHD_NO;
	}
	if (r->content_type)
		MHD_add_response_header(mr, "Content-Type", r->content_type);
	if (r->disposition[0])
		MHD_add_response_header(mr, "Content-Disposition", r->disposition);
	if (r->timing[0])
		MHD_add_response_header(mr, "Server-Timing", r->timing);
	if (r->www_authenticate)
		MHD_add_response_header(mr, "WWW-Authenticate", r->www_authenticate);
	if (r->retry_after)
		MHD_add_response_header(mr, "Retry-After", r->retry_after);
	const char *origin = cors_origin(s, conn);
	if (origin) {
		MHD_add_response_header(mr, "Access-Control-Allow-Origin", origin);
		MHD_add_response_header(mr, "Vary", "Origin");
		MHD_add_response_header(mr, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS);
	}
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, mr);
	MHD_destroy_response(mr);
	return ret;
}

/* A gRPC-Web or Connect call (webrpc.h): answered on this connection's
 * thread, like every HTTP/1.1 request. */
static enum MHD_Result serve_web(struct server *s, struct MHD_Connection *conn,
				 struct http_conn_state *st, const char *url,
				 struct http_response *resp)
{
#define HDR(name) MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name)
	if (st->too_large || st->over_budget) {
		char why[200];
		protocol_count(webrpc_is_grpc_web(st->web) ? PROTOCOL_GRPC_WEB : PROTOCOL_CONNECT);
		if (st->over_budget)
			atomic_fetch_add(&s->metrics.requests_over_budget, 1);
		snprintf(why, sizeof(why),
			 st->too_large ? "request larger than --grpc-max-message-size=%zu bytes"
				       : "the server holds --max-inflight-request-bytes of request "
					 "bodies already; retry in a few seconds (limit %zu)",
			 st->too_large ? s->cfg.grpc_max_msg_bytes
				       : (size_t)s->cfg.max_inflight_request_bytes);
		webrpc_fail(st->web, GRPC_STATUS_RESOURCE_EXHAUSTED, why, resp);
	} else {
		const char *cenc = HDR("Connect-Content-Encoding");
		struct webrpc_request wr = {
		    .proto = st->web,
		    .path = url,
		    .body = st->body.data,
		    .body_len = st->body.len,
		    .authorization = HDR("Authorization"),
		    .grpc_timeout = HDR("Grpc-Timeout"),
		    .grpc_encoding = HDR("Grpc-Encoding"),
		    .connect_timeout = HDR("Connect-Timeout-Ms"),
		    .connect_version = HDR("Connect-Protocol-Version"),
		    .content_encoding = cenc ? cenc : HDR("Content-Encoding"),
		    .start_ns = st->start_ns,
		};
		if (health_is_watch(url) && webrpc_is_streaming(st->web)) {
			enum MHD_Result ret;
			if (http1_web_watch(s, conn, &wr, cors_origin(s, conn), &ret, resp) == 0)
				return ret;
		} else {
			webrpc_serve(s, &wr, resp);
		}
	}
#undef HDR
	return send_response(s, conn, resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **con_cls)
{
	struct server *s = cls;
	struct http_conn_state *st = *con_cls;

	if (!st) { /* first call: headers only */
		st = calloc(1, sizeof(*st));
		if (!st)
			return MHD_NO;
		st->start_ns = mono_ns();
		st->entry = conn_entry_of(conn);
		conn_entry_set_busy(st->entry, true);
		/* Until the last call, a body may be on its way: its rate counts
		 * from here (a client that sends none is as slow as can be). */
		conn_entry_body_progress(st->entry, st->start_ns, 0);
		*con_cls = st;
		/* The authorization gate, before any body is read. */
		const char *authz =
		    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
		st->web = webrpc_select(
		    method, url,
		    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"));
		if (st->web) {
			struct http_response refused = {0};
			if (webrpc_authorize(s, st->web, url, authz, &refused) == 0)
				return MHD_YES;
			protocol_count(webrpc_is_grpc_web(st->web) ? PROTOCOL_GRPC_WEB
								   : PROTOCOL_CONNECT);
			enum MHD_Result ret = send_response(s, conn, &refused);
			buf_free(&refused.body);
			st->refused = true;
			return ret;
		}
		size_t idx = 0;
		const struct http_route *r =
		    strcmp(method, "OPTIONS") == 0 ? NULL : server_find_http(method, url, &idx);
		struct http_response denied = {0};
		if (r && server_authorize_http(s, r, url, authz, &denied) != 0) {
			metrics_observe(&s->metrics.http[idx], (uint64_t)(mono_ns() - st->start_ns),
					false);
			enum MHD_Result ret = send_response(s, conn, &denied);
			buf_free(&denied.body);
			st->refused = true;
			return ret;
		}
		return MHD_YES;
	}
	if (st->refused) { /* never reaches a handler; the body is dropped */
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t max = st->web ? webrpc_max_body(st->web, s->cfg.grpc_max_msg_bytes)
				     : s->cfg.grpc_max_msg_bytes;
		st->received += *upload_size;
		conn_entry_body_progress(st->entry, st->start_ns, st->received);
		if (!st->too_large && st->body.len + *upload_size > max) {
			st->too_large = true;
			buf_free(&st->body);
		}
		if (!st->too_large && !st->over_budget &&
		    !inflight_reserve(&s->inflight_bytes, s->cfg.max_inflight_request_bytes,
				      *upload_size)) {
			st->over_budget = true;
			buf_free(&st->body);
		}
		if (st->too_large || st->over_budget) {
			*upload_size = 0;
			return MHD_YES;
		}
		st->reserved += *upload_size;
		if (!st->too_large && buf_append(&st->body, upload_data, *upload_size))
			st->too_large = true;
		*upload_size = 0;
		return MHD_YES;
	}

	conn_entry_body_progress(st->entry, 0, 0);
	struct http_response resp = {.status = 200, .content_type = "text/plain; charset=utf-8"};
	struct http_request req = {.srv = s,
				   .method = method,
				   .path = url,
				   .body = st->body.data,
				   .body_len = st->body.len,
				   .mhd_conn = conn};
	size_t idx = 0;
	const struct http_route *route = NULL;
	struct route_metrics *rm = &s->metrics.unknown_http;

	if (strcmp(method, "OPTIONS") == 0) { /* CORS preflight */
		resp.status = 204;
		enum MHD_Result ret;
		size_t len = 0;
		struct MHD_Response *mr =
		    MHD_create_response_from_buffer(len, (void *)"", MHD_RESPMEM_PERSISTENT);
		const char *origin = cors_origin(s, conn);
		if (origin) {
			MHD_add_response_header(mr, "Access-Control-Allow-Origin", origin);
			MHD_add_response_header(mr, "Access-Control-Allow-Methods",
						CORS_ALLOW_METHODS);
			MHD_add_response_header(mr, "Access-Control-Allow-Headers",
						CORS_ALLOW_HEADERS);
			MHD_add_response_header(mr, "Access-Control-Max-Age", CORS_MAX_AGE);
			MHD_add_response_header(mr, "Vary", "Origin");
		}
		ret = MHD_queue_response(conn, 204, mr);
		MHD_destroy_response(mr);
		return ret;
	}
	if (st->web) {
		enum MHD_Result ret = serve_web(s, conn, st, url, &resp);
		buf_free(&resp.body);
		return ret;
	}
	protocol_count(PROTOCOL_HTTP);
	if (st->too_large) {
		http_error(&resp, 413, -1,
			   "request body larger than --grpc-max-message-size=%zu bytes",
			   s->cfg.grpc_max_msg_bytes);
	} else if (st->over_budget) {
		atomic_fetch_add(&s->metrics.requests_over_budget, 1);
		http_error(&resp, 503, -1,
			   "the server holds --max-inflight-request-bytes=%llu bytes of request "
			   "bodies already; retry in a few seconds",
			   (unsigned long long)s->cfg.max_inflight_request_bytes);
		resp.retry_after = "5";
	} else if ((route = server_find_http(method, url, &idx)) != NULL) {
		rm = &s->metrics.http[idx];
		route->handler(&req, &resp);
	} else if (server_find_http(NULL, url, NULL)) {
		http_error(&resp, 405, -1, "method %s not allowed on %s", method, url);
	} else {
		http_error(&resp, 404, -1, "no route for %s %s", method, url);
	}
	metrics_observe(rm, (uint64_t)(mono_ns() - st->start_ns), resp.status >= 500);
	enum MHD_Result ret = send_response(s, conn, &resp);
	buf_free(&resp.body);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct http_conn_state *st = *con_cls;
	if (st) {
		conn_entry_body_progress(st->entry, 0, 0);
		conn_entry_set_busy(st->entry, false);
		inflight_release(&s->inflight_bytes, st->reserved);
		buf_free(&st->body);
		free(st);
		*con_cls = NULL;
	}
}

/* libmicrohttpd's connections find their entry (conn_limits.h) by fd when
 * they start, and give it back before closing the socket. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct server *s = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = ci ? conn_table_mhd_started(s->conns, ci->connect_fd) : NULL;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		conn_table_mhd_closed(s->conns, *socket_context);
		*socket_context = NULL;
	}
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	size_t n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	log_debug("http: %s", line);
}

int http1_start(struct server *s, struct kiln_error *err)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_POLL;
	struct MHD_Daemon *d = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)CONNECTION_TIMEOUT_S,
	    /* The table (conn_limits.c) enforces the limits; libmicrohttpd's
	     * own would refuse without a word. */
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections * 2 + 16,
	    /* Room for a header of --max-request-header-size and more (the
	     * relay refuses larger ones), so that libmicrohttpd's own HTML
	     * 414/431 never answers first. */
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->cfg.max_header_bytes * 2 + (size_t)(64 << 10),
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s, MHD_OPTION_END);
	if (!d)
		return kiln_error_set(err, EIO, "libmicrohttpd: cannot start the HTTP/1.1 daemon");
	s->mhd = d;
	return 0;
}

void http1_stop(struct server *s)
{
	/* Open Watch streams send NOT_SERVING and their end first: stopping
	 * the daemon shuts their sockets. */
	http1_watch_drain(HTTP1_WATCH_DRAIN_MS);
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
}

int http1_add_connection(struct server *s, int fd, struct conn_entry *entry)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (!s->mhd || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
		conn_table_remove(s->conns, entry);
		close(fd);
		return -EINVAL;
	}
	if (entry) {
		conn_entry_set_mhd_fd(s->conns, entry, fd, true);
		/* A whole request header is waiting: busy (not to be evicted)
		 * until its completion, as if on_request had run. */
		conn_entry_set_busy(entry, true);
	}
	/* On failure libmicrohttpd closes the socket itself (and gave the
	 * entry back if it had taken it). */
	if (MHD_add_connection(s->mhd, fd, (struct sockaddr *)&ss, sl) != MHD_YES) {
		conn_table_remove(s->conns, entry);
		return -EIO;
	}
	return 0; /* the reference went with the socket (conn_table_mhd_started) */
}
