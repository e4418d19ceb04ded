/*
 * rpc_ingest_stream.c — kiln.ingest.v1.IngestService/Push: decodes the
 * request (common/ingest_proto.c) and applies it through the session table
 * (ingest_stream.c). With --disable-stream-ingest it answers UNIMPLEMENTED,
 * which is what makes an agent fall back to WriteRaw.
 */
#include <errno.h>

#include "common/ingest_proto.h"
#include "common/log.h"
#include "server/handlers.h"
#include "server/ingest_stream.h"
#include "server/internal.h"

/* The session table, created by the first Push. */
static struct stream_sessions *sessions_of(struct server *s)
{
	struct stream_sessions *t = atomic_load(&s->stream_sessions), *fresh;

	if (t)
		return t;
	if (!(fresh = stream_sessions_new(NULL)))
		return NULL;
	if (!atomic_compare_exchange_strong(&s->stream_sessions, &t, fresh)) {
		stream_sessions_free(fresh);
		return t;
	}
	return fresh;
}

void rpc_ingest_push(struct grpc_call *c)
{
	struct server *s = c->srv;
	struct server_metrics *m = server_metrics(s);
	struct stream_push_result res;
	struct kiln_error err = {0};
	struct ingest_push push;
	struct stream_sessions *t;
	struct arena *a;
	int rc;

	if (server_config(s)->stream_ingest_disabled) {
		grpc_fail(c, GRPC_STATUS_UNIMPLEMENTED, "stream ingest is disabled on this server");
		return;
	}
	if (!(t = sessions_of(s)) || !(a = arena_new(0))) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	rc = ingest_push_decode(c->req, c->req_len, a, &push, &err);
	if (rc == 0)
		rc = stream_push_apply(t, server_store(s), &push, &res, &err);
	if (rc == 0)
		rc = ingest_response_encode(res.acked, res.n_acked, res.reset_session, &c->resp);
	if (rc) {
		atomic_fetch_add(&m->ingest_errors, 1);
		grpc_fail(c,
			  rc == -EBUSY ? GRPC_STATUS_RESOURCE_EXHAUSTED : grpc_code_from_errno(rc),
			  "%s", err.msg[0] ? err.msg : "push failed");
		log_debug("Push: %s", err.msg);
	} else {
		atomic_fetch_add(&m->ingested_samples, res.rows_written);
		atomic_fetch_add(&m->ingested_bytes, c->req_len);
	}
	arena_free(a);
}

void stream_metrics_render(struct server *s, struct buf *out)
{
	struct stream_sessions *t = atomic_load(&s->stream_sessions);
	size_t n = 0, bytes = 0;

	if (t)
		stream_sessions_stats(t, &n, &bytes);
	buf_printf(out,
		   "# HELP kiln_stream_sessions IngestService/Push sessions held (one per "
		   "agent).\n# TYPE kiln_stream_sessions gauge\nkiln_stream_sessions %zu\n"
		   "# HELP kiln_stream_session_bytes Memory of the sessions' reference "
		   "tables.\n# TYPE kiln_stream_session_bytes gauge\n"
		   "kiln_stream_session_bytes %zu\n",
		   n, bytes);
}
