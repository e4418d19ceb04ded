/*
 * rpc_ingest.c — ProfileStoreService/WriteRaw: ingest_prepare (ingest.c)
 * validates the whole request, then every profile is written to the store,
 * each acknowledged only once durable (store_write_profile).
 */
#include <errno.h>
#include <malloc.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "server/handlers.h"
#include "server/ingest.h"
#include "server/internal.h"

/* Requests above this are decoded twice rather than held decoded (ingest.h):
 * an agent's push (well under 1 MiB) keeps the one decode. */
#define INGEST_DECODE_AT_COMMIT_BYTES (4u << 20)
#define INGEST_TRIM_AFTER_BYTES	      (16u << 20)

int ingest_commit(struct store *s, const struct ingest_batch *b, struct kiln_error *err)
{
	for (size_t i = 0; i < b->n_profiles; i++) {
		const struct ingest_profile *ip = &b->profiles[i];
		const struct ingest_series *se = &b->series[ip->series];
		struct pprof_profile *p = ip->profile;
		int rc = 0;
		if (!p) /* validated by ingest_prepare already: decodes the same */
			rc = pprof_decoder_decode(b->decoder, ip->raw, ip->raw_bytes, &b->dopts, &p,
						  err);
		if (rc == 0)
			rc = store_write_profile_exec(s, se->labels, se->n_labels, p, ip->exec,
						      ip->n_exec, ip->timestamp_ms, ip->delta, err);
		if (!ip->profile)
			pprof_decoder_recycle(b->decoder, p);
		if (rc) {
			kiln_error_prefix(err, "series[%zu]: ", ip->series);
			return rc;
		}
	}
	return 0;
}

void rpc_write_raw(struct grpc_call *c)
{
	struct server *s = c->srv;
	struct server_metrics *m = server_metrics(s);
	struct kiln_error err = {0};
	struct ingest_batch b = {0};
	struct ingest_limits lim = {.max_inflate = server_config(s)->max_profile_inflate,
				    .now_ms = realtime_ms(),
				    .max_future_skew_ms =
					server_config(s)->ingest_max_future_skew_ms,
				    .max_labels = server_config(s)->ingest_max_labels,
				    .max_series = server_config(s)->ingest_max_series,
				    .max_label_bytes = server_config(s)->ingest_max_label_bytes,
				    .max_stack_depth = server_config(s)->ingest_max_stack_depth,
				    .max_sample_types = server_config(s)->ingest_max_sample_types,
				    .decoder = ingest_decoder_take(s->decoders)};
	struct arena *a = arena_new(0);
	/* A big request keeps no decoded profile around (ingest.h). */
	lim.decode_at_commit = c->req_len > INGEST_DECODE_AT_COMMIT_BYTES;
	int rc;

	if (!a) {
		ingest_decoder_give(s->decoders, lim.decoder);
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	rc = ingest_prepare(c->req, c->req_len, &lim, a, &b, &err);
	if (rc == 0)
		rc = ingest_commit(server_store(s), &b, &err);
	if (rc) {
		atomic_fetch_add(&m->ingest_errors, 1);
		int code = rc == -EFBIG ? GRPC_STATUS_RESOURCE_EXHAUSTED : grpc_code_from_errno(rc);
		grpc_fail(c, code, "%s", err.msg[0] ? err.msg : "write failed");
		log_debug("WriteRaw: %s", err.msg);
	} else {
		atomic_fetch_add(&m->ingested_profiles, b.n_profiles);
		atomic_fetch_add(&m->ingested_samples, b.total_samples);
		atomic_fetch_add(&m->ingested_bytes, b.total_bytes);
		/* WriteRawResponse is empty: zero bytes. */
	}
	ingest_batch_release(&b);
	ingest_decoder_give(s->decoders, lim.decoder);
	arena_free(a);
	/* The heap keeps what it freed (main.c's mallopt, for the queries'
	 * sake): after a request this big that is tens of MiB that would
	 * otherwise stay resident until some later request reuses it. */
	if (c->req_len > INGEST_TRIM_AFTER_BYTES)
		malloc_trim(0);
}
