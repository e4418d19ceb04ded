/*
 * ingest.c — WriteRaw's decode and validation (see ingest.h). Needs no
 * store, so the fuzz target links it alone; rpc_ingest.c commits.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labels.h"
#include "common/pbwire.h"
#include "common/utf8.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "server/ingest.h"

typedef Parca__Profilestore__V1alpha1__WriteRawRequest write_raw_req;

/* --- NUL bytes in labels, on the wire ------------------------------------ */

/* One protobuf field read off the wire: its number and, for a
 * length-delimited one, its bytes. */
/* Label (name = 1, value = 2) of series si: -EINVAL if either holds NUL. */
static int check_label(const struct pbwire_field *label, size_t si, struct kiln_error *err)
{
	const uint8_t *p = label->p, *end = label->p + label->len;
	const uint8_t *name = NULL;
	size_t name_len = 0;
	struct pbwire_field f;

	while (pbwire_next(&p, end, &f)) {
		if (!f.has_bytes || (f.number != 1 && f.number != 2))
			continue;
		if (f.number == 1) {
			name = f.p;
			name_len = f.len;
		}
		const uint8_t *nul = memchr(f.p, 0, f.len);
		if (nul)
			return kiln_error_set(
			    err, EINVAL,
			    "series[%zu]: label %s \"%.*s\" holds a NUL byte at offset %zu: label "
			    "names and values must not contain NUL",
			    si, f.number == 1 ? "name" : "value",
			    (int)(f.number == 1 ? (size_t)(nul - f.p)
						: (name_len > 100 ? 100 : name_len)),
			    f.number == 1 ? (const char *)f.p
			    : name	  ? (const char *)name
					  : "",
			    (size_t)(nul - f.p));
	}
	return 0;
}

int ingest_check_label_bytes(const uint8_t *req, size_t len, struct kiln_error *err)
{
	const uint8_t *p = req, *end = req + len;
	struct pbwire_field series, set, label;
	size_t si = 0;
	int rc;

	/* WriteRawRequest.series = 2 -> RawProfileSeries.labels = 1 ->
	 * LabelSet.labels = 1 -> Label. */
	while (pbwire_next(&p, end, &series)) {
		if (series.number != 2 || !series.has_bytes)
			continue;
		const uint8_t *sp = series.p, *send = series.p + series.len;
		while (pbwire_next(&sp, send, &set)) {
			if (set.number != 1 || !set.has_bytes)
				continue;
			const uint8_t *lp = set.p, *lend = set.p + set.len;
			while (pbwire_next(&lp, lend, &label)) {
				if (label.number == 1 && label.has_bytes &&
				    (rc = check_label(&label, si, err)) < 0)
					return rc;
			}
		}
		si++;
	}
	return 0;
}

/* Parca's delta rule, narrowed to CPU profiles: see ingest.h. */
static bool profile_is_delta(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	const char *period_type = m->period_type ? pprof_string(p, m->period_type->type) : "";
	const char *first_type = m->n_sample_type ? pprof_string(p, m->sample_type[0]->type) : "";

	/* CPU samples and Parca agent's off-CPU time (wallclock/nanoseconds,
	 * each window's own) are per-window amounts. */
	return strcmp(period_type, "cpu") == 0 || strcmp(first_type, "wallclock") == 0;
}

static int validate_series(const Parca__Profilestore__V1alpha1__RawProfileSeries *rs, size_t si,
			   size_t max_labels, size_t max_label_bytes, struct arena *a,
			   struct ingest_series *out, struct kiln_error *err)
{
	size_t n = rs->labels ? rs->labels->n_labels : 0;
	const char *name = NULL;

	for (size_t i = 0; i < n; i++) {
		const Parca__Profilestore__V1alpha1__Label *l = rs->labels->labels[i];
		size_t nl = strlen(l->name), vl = strlen(l->value);
		if (nl > max_label_bytes || vl > max_label_bytes)
			return kiln_error_set(
			    err, EINVAL,
			    "series[%zu]: label \"%.60s\": %s of %zu bytes, at most %zu allowed "
			    "(--ingest-max-label-size)",
			    si, l->name, nl > max_label_bytes ? "name" : "value",
			    nl > max_label_bytes ? nl : vl, max_label_bytes);
	}

	if (n > max_labels + 1)
		return kiln_error_set(
		    err, EINVAL, "series[%zu]: %zu labels, at most %zu allowed besides __name__",
		    si, n, max_labels);
	out->labels = arena_calloc(a, n + 1, sizeof(*out->labels));
	if (!out->labels)
		return kiln_error_set(err, ENOMEM, "out of memory");
	out->n_labels = 1;
	for (size_t i = 0; i < n; i++) {
		const Parca__Profilestore__V1alpha1__Label *l = rs->labels->labels[i];
		if (strcmp(l->name, "__name__") == 0) {
			if (name)
				return kiln_error_set(
				    err, EINVAL, "series[%zu]: duplicate label name __name__", si);
			if (!metric_name_valid(l->value))
				return kiln_error_set(
				    err, EINVAL,
				    "series[%zu]: invalid __name__ value \"%.100s\": "
				    "must match [a-zA-Z_:][a-zA-Z0-9_:]*",
				    si, l->value);
			name = l->value;
			continue;
		}
		if (!label_name_valid(l->name))
			return kiln_error_set(
			    err, EINVAL,
			    "series[%zu]: invalid label name \"%.100s\": must match "
			    "[a-zA-Z_][a-zA-Z0-9_]*",
			    si, l->name);
		if (strncmp(l->name, "__", 2) == 0)
			return kiln_error_set(
			    err, EINVAL,
			    "series[%zu]: label name \"%.100s\" is reserved (\"__\" "
			    "prefix)",
			    si, l->name);
		if (!utf8_valid_str(l->value))
			return kiln_error_set(err, EINVAL,
					      "series[%zu]: label %s: value is not valid UTF-8", si,
					      l->name);
		for (size_t j = 1; j < out->n_labels; j++)
			if (strcmp(out->labels[j].name, l->name) == 0)
				return kiln_error_set(err, EINVAL,
						      "series[%zu]: duplicate label name \"%s\"",
						      si, l->name);
		if (out->n_labels > max_labels)
			return kiln_error_set(err, EINVAL,
					      "series[%zu]: more than %zu labels besides __name__",
					      si, max_labels);
		out->labels[out->n_labels].name = l->name;
		out->labels[out->n_labels].value = l->value;
		out->n_labels++;
	}
	if (!name)
		return kiln_error_set(err, EINVAL,
				      "series[%zu]: missing __name__ label (it names the profile "
				      "type, e.g. __name__=\"parca_agent\")",
				      si);
	out->labels[0].name = "__name__";
	out->labels[0].value = name;
	return 0;
}

/* What one decoded profile may hold beyond pprof's own validity. */
static int check_profile_shape(const pprof_msg *m, size_t max_types, size_t max_depth,
			       struct kiln_error *err)
{
	if (m->n_sample_type > max_types)
		return kiln_error_set(err, EINVAL,
				      "%zu sample types, at most %zu allowed "
				      "(--ingest-max-sample-types)",
				      m->n_sample_type, max_types);
	for (size_t i = 0; i < m->n_sample; i++)
		if (m->sample[i]->n_location_id > max_depth)
			return kiln_error_set(err, EINVAL,
					      "sample[%zu]: stack of %zu locations, at most %zu "
					      "allowed (--ingest-max-stack-depth)",
					      i, m->sample[i]->n_location_id, max_depth);
	return 0;
}

/* Copies a RawSample's executable_info (Parca's: one per pprof mapping, in
 * mapping order; the symbolizer normalizes addresses with it). An entry
 * without a load segment or with an ELF type other than ET_EXEC/ET_DYN
 * (the kernel's is 0) carries nothing and is kept as "none"; entries past
 * the last mapping are ignored. */
static int exec_infos(const Parca__Profilestore__V1alpha1__RawSample *rs, struct arena *a,
		      struct ingest_profile *ip, struct kiln_error *err)
{
	const pprof_msg *m = pprof_profile_msg(ip->profile);
	size_t n = rs->n_executable_info;

	if (n > m->n_mapping)
		n = m->n_mapping; /* extras describe no mapping: ignored */
	if (n == 0)
		return 0;
	ip->exec = arena_calloc(a, n, sizeof(*ip->exec));
	if (!ip->exec)
		return kiln_error_set(err, ENOMEM, "out of memory");
	ip->n_exec = n;
	for (size_t k = 0; k < n; k++) {
		const Parca__Profilestore__V1alpha1__ExecutableInfo *ei = rs->executable_info[k];

		if (!ei || !ei->load_segment || (ei->elf_type != 2 && ei->elf_type != 3))
			continue; /* 2: ET_EXEC, 3: ET_DYN */
		ip->exec[k] = (struct store_exec_info){ei->elf_type, ei->load_segment->offset,
						       ei->load_segment->vaddr};
	}
	return 0;
}

int ingest_prepare(const uint8_t *req, size_t len, const struct ingest_limits *lim, struct arena *a,
		   struct ingest_batch *out, struct kiln_error *err)
{
	ProtobufCAllocator alloc;
	size_t max_labels = lim->max_labels ? lim->max_labels : INGEST_MAX_LABELS;
	size_t max_series = lim->max_series ? lim->max_series : INGEST_MAX_SERIES;
	size_t max_label_bytes =
	    lim->max_label_bytes ? lim->max_label_bytes : INGEST_MAX_LABEL_BYTES;
	size_t max_depth = lim->max_stack_depth ? lim->max_stack_depth : INGEST_MAX_STACK_DEPTH;
	size_t max_types = lim->max_sample_types ? lim->max_sample_types : INGEST_MAX_SAMPLE_TYPES;
	struct pprof_decode_opts dopts = {.max_inflated_bytes = lim->max_inflate};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->decoder = lim->decoder;
	out->dopts = dopts;
	arena_protobuf_allocator(a, &alloc);
	int64_t skew_ms =
	    lim->max_future_skew_ms > 0 ? lim->max_future_skew_ms : INGEST_DEFAULT_FUTURE_SKEW_MS;
	write_raw_req *r =
	    parca__profilestore__v1alpha1__write_raw_request__unpack(&alloc, len, req);
	if (!r)
		return kiln_error_set(
		    err, EINVAL, "WriteRawRequest: not a valid protobuf message (%zu bytes)", len);
	rc = ingest_check_label_bytes(req, len, err);
	if (rc)
		return rc;

	if (r->n_series > max_series)
		return kiln_error_set(
		    err, EINVAL,
		    "WriteRawRequest: %zu series, at most %zu allowed in one request "
		    "(--ingest-max-series-per-request): split it",
		    r->n_series, max_series);
	size_t n_profiles = 0;
	for (size_t i = 0; i < r->n_series; i++)
		n_profiles += r->series[i]->n_samples;
	out->series = arena_calloc(a, r->n_series + 1, sizeof(*out->series));
	out->profiles = calloc(n_profiles + 1, sizeof(*out->profiles));
	if (!out->series || !out->profiles) {
		free(out->profiles);
		out->profiles = NULL;
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	out->n_series = r->n_series;
	for (size_t i = 0; i < r->n_series; i++) {
		rc = validate_series(r->series[i], i, max_labels, max_label_bytes, a,
				     &out->series[i], err);
		if (rc)
			goto fail;
	}
	for (size_t i = 0; i < r->n_series; i++) {
		const Parca__Profilestore__V1alpha1__RawProfileSeries *rs = r->series[i];
		for (size_t j = 0; j < rs->n_samples; j++) {
			const ProtobufCBinaryData *raw = &rs->samples[j]->raw_profile;
			struct ingest_profile *ip = &out->profiles[out->n_profiles];
			rc = pprof_decoder_decode(out->decoder, raw->data, raw->len, &dopts,
						  &ip->profile, err);
			if (rc) {
				kiln_error_prefix(err, "series[%zu].samples[%zu]: ", i, j);
				goto fail;
			}
			out->n_profiles++;
			const pprof_msg *m = pprof_profile_msg(ip->profile);
			ip->series = i;
			ip->raw_bytes = raw->len;
			ip->timestamp_ms =
			    m->time_nanos != 0 ? m->time_nanos / 1000000 : lim->now_ms;
			if (ip->timestamp_ms < INGEST_MIN_TIME_MS ||
			    (ip->timestamp_ms > lim->now_ms &&
			     ip->timestamp_ms - lim->now_ms > skew_ms)) {
				rc = kiln_error_set(
				    err, EINVAL,
				    "series[%zu].samples[%zu]: profile time_nanos %lld is %s "
				    "(accepted: 2000-01-01 to %lld s past the server's clock, "
				    "--ingest-max-future-skew)",
				    i, j, (long long)m->time_nanos,
				    ip->timestamp_ms < INGEST_MIN_TIME_MS ? "before 2000-01-01"
									  : "too far in the future",
				    (long long)(skew_ms / 1000));
				goto fail;
			}
			rc = check_profile_shape(m, max_types, max_depth, err);
			if (rc) {
				kiln_error_prefix(err, "series[%zu].samples[%zu]: ", i, j);
				goto fail;
			}
			ip->delta = profile_is_delta(ip->profile);
			rc = exec_infos(rs->samples[j], a, ip, err);
			if (rc) {
				kiln_error_prefix(err, "series[%zu].samples[%zu]: ", i, j);
				goto fail;
			}
			out->total_samples += (uint64_t)m->n_sample * m->n_sample_type;
			out->total_bytes += raw->len;
			ip->raw = raw->data;
			if (lim->decode_at_commit) {
				pprof_decoder_recycle(out->decoder, ip->profile);
				ip->profile = NULL;
			}
		}
	}
	return 0;
fail:
	ingest_batch_release(out);
	return rc;
}

int ingest_prepare_built(const struct label *labels, size_t n_labels, struct pprof_profile *p,
			 size_t wire_bytes, const struct ingest_limits *lim, struct arena *a,
			 struct ingest_batch *out, struct kiln_error *err)
{
	size_t max_labels = lim->max_labels ? lim->max_labels : INGEST_MAX_LABELS;
	size_t max_label_bytes =
	    lim->max_label_bytes ? lim->max_label_bytes : INGEST_MAX_LABEL_BYTES;
	size_t max_depth = lim->max_stack_depth ? lim->max_stack_depth : INGEST_MAX_STACK_DEPTH;
	size_t max_types = lim->max_sample_types ? lim->max_sample_types : INGEST_MAX_SAMPLE_TYPES;
	int64_t skew_ms =
	    lim->max_future_skew_ms > 0 ? lim->max_future_skew_ms : INGEST_DEFAULT_FUTURE_SKEW_MS;
	Parca__Profilestore__V1alpha1__LabelSet set =
	    PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries rs =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
	int rc;

	memset(out, 0, sizeof(*out));
	out->decoder = lim->decoder;
	out->series = arena_calloc(a, 1, sizeof(*out->series));
	out->profiles = calloc(1, sizeof(*out->profiles));
	if (!out->series || !out->profiles) {
		free(out->profiles);
		out->profiles = NULL;
		pprof_profile_free(p);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	/* The batch owns p from here: ingest_batch_release frees it. */
	out->profiles[0].profile = p;
	out->n_profiles = 1;
	out->n_series = 1;

	/* The labels as a series of a request, for WriteRaw's own checks. */
	Parca__Profilestore__V1alpha1__Label *lab = arena_calloc(a, n_labels + 1, sizeof(*lab));
	Parca__Profilestore__V1alpha1__Label **labp = arena_calloc(a, n_labels + 1, sizeof(*labp));
	if (!lab || !labp) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n_labels; i++) {
		parca__profilestore__v1alpha1__label__init(&lab[i]);
		lab[i].name = (char *)labels[i].name;
		lab[i].value = (char *)labels[i].value;
		labp[i] = &lab[i];
	}
	set.labels = labp;
	set.n_labels = n_labels;
	rs.labels = &set;
	if ((rc = validate_series(&rs, 0, max_labels, max_label_bytes, a, &out->series[0], err)))
		goto fail;

	const pprof_msg *m = pprof_profile_msg(p);
	struct ingest_profile *ip = &out->profiles[0];
	ip->timestamp_ms = m->time_nanos != 0 ? m->time_nanos / 1000000 : lim->now_ms;
	if (ip->timestamp_ms < INGEST_MIN_TIME_MS ||
	    (ip->timestamp_ms > lim->now_ms && ip->timestamp_ms - lim->now_ms > skew_ms)) {
		rc = kiln_error_set(
		    err, EINVAL,
		    "profile time %lld ns is %s (accepted: 2000-01-01 to %lld s past "
		    "the server's clock, --ingest-max-future-skew)",
		    (long long)m->time_nanos,
		    ip->timestamp_ms < INGEST_MIN_TIME_MS ? "before 2000-01-01"
							  : "too far in the future",
		    (long long)(skew_ms / 1000));
		goto fail;
	}
	if ((rc = check_profile_shape(m, max_types, max_depth, err)))
		goto fail;
	ip->delta = profile_is_delta(p);
	ip->raw_bytes = wire_bytes;
	out->total_samples = (uint64_t)m->n_sample * m->n_sample_type;
	out->total_bytes = wire_bytes;
	return 0;
fail:
	ingest_batch_release(out);
	return rc;
}

void ingest_batch_release(struct ingest_batch *b)
{
	for (size_t i = 0; i < b->n_profiles; i++)
		pprof_decoder_recycle(b->decoder, b->profiles[i].profile);
	free(b->profiles);
	b->profiles = NULL;
	b->n_profiles = 0;
}

struct ingest_decoders {
	pthread_mutex_t mu;
	struct pprof_decoder **idle;
	size_t n_idle, max_kept;
};

struct ingest_decoders *ingest_decoders_new(size_t max_kept)
{
	struct ingest_decoders *ds = calloc(1, sizeof(*ds));

	if (!ds)
		return NULL;
	ds->idle = calloc(max_kept + 1, sizeof(*ds->idle));
	if (!ds->idle) {
		free(ds);
		return NULL;
	}
	pthread_mutex_init(&ds->mu, NULL);
	ds->max_kept = max_kept;
	return ds;
}

void ingest_decoders_free(struct ingest_decoders *ds)
{
	if (!ds)
		return; /* NULL-safe */
	for (size_t i = 0; i < ds->n_idle; i++)
		pprof_decoder_free(ds->idle[i]);
	pthread_mutex_destroy(&ds->mu);
	free(ds->idle);
	free(ds);
}

struct pprof_decoder *ingest_decoder_take(struct ingest_decoders *ds)
{
	struct pprof_decoder *d = NULL;

	pthread_mutex_lock(&ds->mu);
	if (ds->n_idle)
		d = ds->idle[--ds->n_idle];
	pthread_mutex_unlock(&ds->mu);
	return d ? d : pprof_decoder_new();
}

void ingest_decoder_give(struct ingest_decoders *ds, struct pprof_decoder *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&ds->mu);
	if (ds->n_idle < ds->max_kept) {
		ds->idle[ds->n_idle++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&ds->mu);
	pprof_decoder_free(d); /* more requests at once than ingest threads */
}
