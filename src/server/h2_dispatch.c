/*
 * h2_dispatch.c — from a complete request to a job on a worker pool and
 * back. h2_dispatch_grpc unwraps the one gRPC message (h2.c's file comment,
 * step 3) and queues the method's handler; h2_dispatch_http sends a plain
 * HTTP request through the HTTP/1.1 route table. The worker links the
 * finished job into conn->done and kicks the eventfd; h2_collect_done, on
 * the connection thread, submits the responses (h2_respond.c).
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "server/h2_internal.h"

static void job_free(struct h2_job *j);
static void run_job(void *arg);

/* ---- plain HTTP over HTTP/2 ----------------------------------------------------------
 * Browsers speak HTTP/2 to a TLS port (ALPN "h2"), and curl may use prior
 * knowledge: requests that are not gRPC go through the same route table as
 * HTTP/1.1, on the query pool. */

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent- and '+'-decodes s[0..n) into a new string. */
static char *url_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			*o++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i] == '+' ? ' ' : s[i];
		}
	}
	*o = '\0';
	return out;
}

static int parse_args(struct h2_job *j, const char *qs)
{
	size_t cap = 1;
	for (const char *p = qs; *p; p++)
		cap += *p == '&';
	j->hreq.arg_names = calloc(cap, sizeof(char *));
	j->hreq.arg_values = calloc(cap, sizeof(char *));
	if (!j->hreq.arg_names || !j->hreq.arg_values)
		return -ENOMEM;
	while (*qs) {
		const char *end = strchr(qs, '&');
		size_t len = end ? (size_t)(end - qs) : strlen(qs);
		const char *eq = memchr(qs, '=', len);
		size_t klen = eq ? (size_t)(eq - qs) : len;
		if (klen) {
			char *k = url_decode(qs, klen);
			char *v = eq ? url_decode(eq + 1, len - klen - 1) : strdup("");
			if (!k || !v) {
				free(k);
				free(v);
				return -ENOMEM;
			}
			j->hreq.arg_names[j->hreq.n_args] = k;
			j->hreq.arg_values[j->hreq.n_args++] = v;
		}
		if (!end)
			break;
		qs = end + 1;
	}
	return 0;
}

void h2_dispatch_http(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	size_t idx = 0;
	char *q = strchr(st->path, '?');
	struct h2_job *j = calloc(1, sizeof(*j));

	st->start_ns = mono_ns();
	st->metrics = &server_metrics(s)->unknown_http;
	protocol_count(PROTOCOL_HTTP);
	if (strcmp(st->method, "OPTIONS") == 0) { /* CORS preflight */
		struct http_response r = {.status = 204};
		free(j);
		st->preflight = true;
		h2_submit_http(c, st, &r);
		return;
	}
	if (!j)
		return h2_submit_http_error(c, st, 503, "out of memory");
	j->hpath = q ? strndup(st->path, (size_t)(q - st->path)) : strdup(st->path);
	if (!j->hpath || parse_args(j, q ? q + 1 : "")) {
		job_free(j);
		return h2_submit_http_error(c, st, 503, "out of memory");
	}
	const char *method = st->method[0] ? st->method : "GET";
	j->route = server_find_http(method, j->hpath, &idx);
	if (!j->route) {
		bool other = server_find_http(NULL, j->hpath, NULL) != NULL;
		job_free(j);
		return h2_submit_http_error(c, st, other ? 405 : 404,
					    other ? "method not allowed" : "no such route");
	}
	st->metrics = &server_metrics(s)->http[idx];
	j->conn = c;
	j->stream_id = st->id;
	j->hreq = (struct http_request){.srv = s,
					.method = method,
					.path = j->hpath,
					.body = st->body.data,
					.body_len = st->body.len,
					.arg_names = j->hreq.arg_names,
					.arg_values = j->hreq.arg_values,
					.n_args = j->hreq.n_args};
	j->req_owned = buf_steal(&st->body, &j->hreq.body_len);
	j->hreq.body = j->req_owned;
	j->hresp =
	    (struct http_response){.status = 200, .content_type = "text/plain; charset=utf-8"};
	st->dispatched = true;
	c->inflight++;
	pool_submit(s->query_pool, run_job, j);
}

/* ---- worker side ------------------------------------------------------------------ */

static void run_job(void *arg)
{
	struct h2_job *j = arg;
	struct h2_conn *c = j->conn;

	if (j->web)
		webrpc_serve(c->srv, &j->wreq, &j->hresp);
	else if (j->route)
		j->route->handler(&j->hreq, &j->hresp);
	else if (j->call.deadline_ns && mono_ns() > j->call.deadline_ns)
		grpc_fail(&j->call, GRPC_STATUS_DEADLINE_EXCEEDED,
			  "deadline exceeded before the call started");
	else
		j->method->handler(&j->call);

	pthread_mutex_lock(&c->lock);
	j->next = c->done;
	c->done = j;
	pthread_mutex_unlock(&c->lock);
	uint64_t one = 1;
	if (write(c->efd, &one, sizeof(one)) < 0)
		log_warn("h2: eventfd write: %s", strerror(errno));
}

static void job_free(struct h2_job *j)
{
	buf_free(&j->call.resp);
	buf_free(&j->hresp.body);
	free(j->req_owned);
	free(j->hpath);
	for (size_t i = 0; i < j->hreq.n_args; i++) {
		free(j->hreq.arg_names[i]);
		free(j->hreq.arg_values[i]);
	}
	free(j->hreq.arg_names);
	free(j->hreq.arg_values);
	free(j);
}

/* Connection thread: submits the responses of finished jobs. */
void h2_collect_done(struct h2_conn *c)
{
	uint64_t n;
	if (read(c->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("h2: eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&c->lock);
	struct h2_job *list = c->done;
	c->done = NULL;
	pthread_mutex_unlock(&c->lock);

	while (list) {
		struct h2_job *j = list;
		list = j->next;
		c->inflight--;
		struct h2_stream *st =
		    nghttp2_session_get_stream_user_data(c->session, j->stream_id);
		if (st && !st->answered && (j->route || j->web)) {
			st->dispatched = false;
			h2_submit_http(c, st, &j->hresp);
		} else if (st && !st->answered) {
			st->dispatched = false;
			if (j->call.status != GRPC_STATUS_OK)
				h2_submit_error(c, st, j->call.status, "%s", j->call.message);
			else
				h2_submit_ok(c, st, &j->call.resp);
		}
		job_free(j);
	}
}

/* ---- request handling ------------------------------------------------------------- */

void h2_dispatch_grpc(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	size_t idx = 0;
	const struct grpc_method *m = server_find_grpc(st->path, &idx);
	size_t max = server_config(s)->grpc_max_msg_bytes;

	st->start_ns = mono_ns();
	st->metrics = m ? &server_metrics(s)->grpc[idx] : &server_metrics(s)->unknown_grpc;
	protocol_count(PROTOCOL_GRPC);
	if (!m)
		return h2_submit_error(c, st, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s",
				       st->path);
	if (server_stopping(s))
		return h2_submit_error(c, st, GRPC_STATUS_UNAVAILABLE, "server is shutting down");
	if (health_is_watch(st->path))
		return h2_watch_start(c, st);

	struct kiln_error err = {0};
	struct grpc_frame fr = {0};
	int rc = 0;
	bool streaming = server_grpc_client_streaming(st->path);
	if (streaming) /* the handler parses the frames itself */
		fr.len = st->body.len;
	else
		rc = grpc_frame_unwrap(st->body.data, st->body.len, st->gzip_encoding, max, &fr,
				       &err);
	if (rc)
		return h2_submit_error(c, st,
				       rc == -EFBIG    ? GRPC_STATUS_RESOURCE_EXHAUSTED
				       : rc == -ENOSYS ? GRPC_STATUS_UNIMPLEMENTED
						       : GRPC_STATUS_INTERNAL,
				       "%s", err.msg);
	struct h2_job *j = calloc(1, sizeof(*j));
	if (!j) {
		free(fr.owned);
		return h2_submit_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	if (fr.owned) {
		j->req_owned = fr.owned;
	} else {
		/* Steal the body; the message starts 5 bytes in. */
		size_t len;
		j->req_owned = buf_steal(&st->body, &len);
		fr.msg = j->req_owned ? j->req_owned + (streaming ? 0 : 5) : (const uint8_t *)"";
	}
	j->call.req = fr.msg;
	j->call.req_len = fr.len;
	j->conn = c;
	j->stream_id = st->id;
	j->method = m;
	j->call.srv = s;
	j->call.deadline_ns = st->deadline_ns;
	st->dispatched = true;
	c->inflight++;
	pool_submit(m->pool == POOL_INGEST ? s->ingest_pool : s->query_pool, run_job, j);
}

void h2_dispatch_web(struct h2_conn *c, struct h2_stream *st)
{
	struct server *s = c->srv;
	const struct grpc_method *m = server_find_grpc(st->path, NULL);
	struct h2_job *j = calloc(1, sizeof(*j));

	st->start_ns = mono_ns();
	if (health_is_watch(st->path) && webrpc_is_streaming(st->web)) {
		free(j);
		return h2_web_watch_start(c, st);
	}
	if (!j)
		return h2_submit_web_error(c, st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	j->web = true;
	j->conn = c;
	j->stream_id = st->id;
	snprintf(j->wpath, sizeof(j->wpath), "%.*s", (int)strcspn(st->path, "?"), st->path);
	snprintf(j->wauth, sizeof(j->wauth), "%s",
		 st->authorization_overlong ? "Bearer (longer than any token)" : st->authorization);
	snprintf(j->wgrpc_timeout, sizeof(j->wgrpc_timeout), "%s", st->grpc_timeout);
	snprintf(j->wencoding, sizeof(j->wencoding), "%s", st->encoding);
	snprintf(j->wconnect_timeout, sizeof(j->wconnect_timeout), "%s", st->connect_timeout);
	snprintf(j->wconnect_version, sizeof(j->wconnect_version), "%s", st->connect_version);
	snprintf(j->wcontent_encoding, sizeof(j->wcontent_encoding), "%s", st->content_encoding);
	j->req_owned = buf_steal(&st->body, &j->wreq.body_len);
	j->wreq = (struct webrpc_request){
	    .proto = st->web,
	    .path = j->wpath,
	    .body = j->req_owned,
	    .body_len = j->wreq.body_len,
	    .authorization = j->wauth[0] ? j->wauth : NULL,
	    .grpc_timeout = j->wgrpc_timeout,
	    .grpc_encoding = j->wencoding,
	    .connect_timeout = j->wconnect_timeout,
	    .connect_version = j->wconnect_version[0] ? j->wconnect_version : NULL,
	    .content_encoding = j->wcontent_encoding,
	    .start_ns = st->start_ns,
	};
	j->hresp = (struct http_response){.status = 200};
	st->dispatched = true;
	c->inflight++;
	pool_submit(m && m->pool == POOL_INGEST ? s->ingest_pool : s->query_pool, run_job, j);
}
