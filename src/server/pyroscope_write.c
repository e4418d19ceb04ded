/*
 * pyroscope_write.c — one /ingest profile into the store (pyroscope.h,
 * pyro_write_pprof), on WriteRaw's own path: the series is encoded as a
 * WriteRawRequest and handed to ingest_prepare and ingest_commit, so the
 * limits, label checks, durability and metrics are WriteRaw's.
 *
 * The profile is decoded once, by ingest_prepare, with a decoder borrowed
 * from the server's pool as WriteRaw borrows one; a profile the server
 * built itself (folded stacks) skips the encode and decode and gets the
 * same checks from ingest_prepare_built. Two things Pyroscope
 * derives from the profile are settled after that decode rather than by a
 * decode of its own: the metric (__name__, from the sample types) and the
 * time of a profile without time_nanos (the request's `from`).
 */
#include <errno.h>
#include <string.h>

#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "server/ingest.h"
#include "server/pyroscope.h"

const char *pyro_pprof_metric(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	const char *st = "";

	for (size_t i = 0; i < m->n_sample_type; i++)
		if (strcmp(pprof_string(p, m->sample_type[i]->type), "wall") == 0)
			return "wall";
	for (size_t i = 0; i < m->n_sample_type; i++) {
		st = pprof_string(p, m->sample_type[i]->type);
		if (strstr(st, "cpu"))
			return "process_cpu";
		if (strstr(st, "alloc_") || strstr(st, "inuse_") || !strcmp(st, "space") ||
		    !strcmp(st, "objects"))
			return "memory";
		if (strstr(st, "mutex_"))
			return "mutex";
		if (strstr(st, "block_"))
			return "block";
		if (strstr(st, "goroutines"))
			return "goroutines";
	}
	return *st ? st : "unknown";
}

/* One series with one raw pprof, as WriteRaw receives it. */
static int encode_write_raw(const struct pyro_labels *l, const uint8_t *pprof, size_t len,
			    struct buf *out)
{
	Parca__Profilestore__V1alpha1__Label lab[PYRO_MAX_NAME_LABELS + 4];
	Parca__Profilestore__V1alpha1__Label *labp[PYRO_MAX_NAME_LABELS + 4];
	Parca__Profilestore__V1alpha1__LabelSet set =
	    PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
	Parca__Profilestore__V1alpha1__RawSample sample =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_SAMPLE__INIT;
	Parca__Profilestore__V1alpha1__RawSample *samplep = &sample;
	Parca__Profilestore__V1alpha1__RawProfileSeries series =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries *seriesp = &series;
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;

	for (size_t i = 0; i < l->n; i++) {
		parca__profilestore__v1alpha1__label__init(&lab[i]);
		lab[i].name = (char *)l->names[i];
		lab[i].value = (char *)l->values[i];
		labp[i] = &lab[i];
	}
	set.labels = labp;
	set.n_labels = l->n;
	sample.raw_profile.data = (uint8_t *)pprof;
	sample.raw_profile.len = len;
	series.labels = &set;
	series.samples = &samplep;
	series.n_samples = 1;
	req.series = &seriesp;
	req.n_series = 1;
	size_t n = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
	if (buf_reserve(out, n))
		return -ENOMEM;
	parca__profilestore__v1alpha1__write_raw_request__pack(&req, out->data);
	out->len = n;
	return 0;
}

int pyro_write_pprof(struct pyro_write *w, const struct pyro_labels *labels,
		     bool metric_from_profile, const uint8_t *pprof, size_t len,
		     struct kiln_error *err)
{
	struct ingest_batch b = {0};
	struct buf wr = {0};
	struct arena *a = arena_new(0);
	struct pprof_decoder *d = w->decoders ? ingest_decoder_take(w->decoders) : NULL;
	struct ingest_limits lim = {.max_inflate = w->max_inflate,
				    .now_ms = w->now_ms,
				    .max_future_skew_ms = w->max_future_skew_ms,
				    .decoder = d};
	int rc;

	rc = a ? encode_write_raw(labels, pprof, len, &wr) : -ENOMEM;
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ingest_prepare(wr.data, wr.len, &lim, a, &b, err);
	if (rc) {
		if (metric_from_profile)
			kiln_error_prefix(err, "profile: ");
		goto out;
	}
	const struct pprof_profile *p = b.profiles[0].profile;
	if (metric_from_profile) /* labels[0] is __name__ (pyroscope.h) */
		b.series[0].labels[0].value = pyro_pprof_metric(p);
	if (pprof_profile_msg(p)->time_nanos == 0) {
		if (w->timeless_ms < INGEST_MIN_TIME_MS) {
			rc = kiln_error_set(err, EINVAL,
					    "from=%lld: before 2000-01-01 (the profile has no "
					    "time of its own)",
					    (long long)(w->timeless_ms / 1000));
			goto out;
		}
		b.profiles[0].timestamp_ms = w->timeless_ms;
	}
	rc = w->store ? ingest_commit(w->store, &b, err) : 0;
	if (rc == 0) {
		w->profiles += b.n_profiles;
		w->samples += b.total_samples;
		w->bytes += b.total_bytes;
	}
out:
	ingest_batch_release(&b);
	if (d)
		ingest_decoder_give(w->decoders, d);
	arena_free(a);
	buf_free(&wr);
	return rc;
}

int pyro_write_built(struct pyro_write *w, const struct pyro_labels *labels,
		     struct pprof_profile *p, size_t wire_bytes, struct kiln_error *err)
{
	struct label l[PYRO_MAX_NAME_LABELS + 4];
	struct ingest_batch b = {0};
	struct arena *a = arena_new(0);
	struct ingest_limits lim = {.now_ms = w->now_ms,
				    .max_future_skew_ms = w->max_future_skew_ms};
	int rc;

	if (!a) {
		pprof_profile_free(p);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < labels->n; i++)
		l[i] = (struct label){labels->names[i], labels->values[i]};
	rc = ingest_prepare_built(l, labels->n, p, wire_bytes, &lim, a, &b, err);
	if (rc == 0)
		rc = w->store ? ingest_commit(w->store, &b, err) : 0;
	if (rc == 0) {
		w->profiles += b.n_profiles;
		w->samples += b.total_samples;
		w->bytes += b.total_bytes;
	}
	ingest_batch_release(&b);
	arena_free(a);
	return rc;
}
