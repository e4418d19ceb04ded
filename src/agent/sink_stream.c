/*
 * sink_stream.c — the push sink's streaming protocol
 * (kiln.ingest.v1.IngestService/Push, docs/API.md): turns one queued
 * window (kept as the WriteRawRequest sink_remote.c packed, so that the
 * same bytes can still go to a server without the service) into rows keyed
 * by per-session references, describing only the series and stacks this
 * session has not sent yet.
 *
 * The session is the agent's "sent" set: series key -> reference, stack
 * content hash -> reference. A stack's hash is computed from what the
 * server stores of it (mapping, address, lines by name), so the same stack
 * of two windows gets one reference whatever the pprof ids of each window.
 * The server answers reset_session when it holds no state of the session
 * (it restarted, or evicted it): the sink then starts a new session and
 * encodes the same window again from scratch; so does a failed call
 * (sink_remote.c), so a retry never depends on what reached the server.
 */
#include "agent/agent.h"
#include "agent/sink_stream.h"
#include "common/htab.h"
#include "common/ingest_proto.h"
#include "common/log.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "pprof/pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

/* A session past this many stacks starts over, so that a long-running
 * agent's sent set stays bounded (and so does the server's). */
#define MAX_SESSION_STACKS (256u << 10)

struct stream_client {
	uint64_t agent_id, session_id;
	bool started; /* a request of this session was acknowledged */
	struct htab *series, *stacks;
	uint32_t n_series, n_stacks;
	struct buf key;
};

static uint64_t random_id(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&v;
	return v;
}

static int session_new(struct stream_client *sc)
{
	htab_free(sc->series);
	htab_free(sc->stacks);
	sc->series = htab_new(64);
	sc->stacks = htab_new(1024);
	sc->n_series = sc->n_stacks = 0;
	sc->session_id = random_id();
	sc->started = false;
	return sc->series && sc->stacks ? 0 : -ENOMEM;
}

struct stream_client *stream_client_new(void)
{
	struct stream_client *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	sc->agent_id = random_id();
	if (session_new(sc)) {
		stream_client_free(sc);
		return NULL;
	}
	return sc;
}

void stream_client_free(struct stream_client *sc)
{
	if (!sc)
		return;
	htab_free(sc->series);
	htab_free(sc->stacks);
	buf_free(&sc->key);
	free(sc);
}

void stream_client_reset(struct stream_client *sc)
{
	if (session_new(sc))
		log_warn("remote store: out of memory starting a stream session");
}

/* Parca's delta rule as the server applies it to WriteRaw (ingest.c). */
static bool profile_is_delta(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	const char *period_type = m->period_type ? pprof_string(p, m->period_type->type) : "";
	const char *first_type = m->n_sample_type ? pprof_string(p, m->sample_type[0]->type) : "";

	return strcmp(period_type, "cpu") == 0 || strcmp(first_type, "wallclock") == 0;
}

static XXH128_hash_t str_hash(const struct pprof_profile *p, int64_t idx)
{
	const char *s = pprof_string(p, idx);

	return XXH3_128bits(s, strlen(s));
}

/* The content hash of sample sm's stack: every location by mapping,
 * address and lines (function names, files, lines). */
static XXH128_hash_t stack_hash(const struct pprof_profile *p, const pprof_sample_msg *sm)
{
	XXH3_state_t st;

	XXH3_128bits_reset(&st);
	for (size_t i = 0; i < sm->n_location_id; i++) {
		const pprof_location_msg *l = pprof_location(p, sm->location_id[i]);
		const pprof_mapping_msg *mp = l ? pprof_mapping(p, l->mapping_id) : NULL;
		uint64_t head[4] = {l ? l->address : 0, mp ? mp->memory_start : 0,
				    mp ? mp->memory_limit : 0, mp ? mp->file_offset : 0};
		XXH128_hash_t h;

		XXH3_128bits_update(&st, head, sizeof(head));
		if (mp) {
			h = str_hash(p, mp->filename);
			XXH3_128bits_update(&st, &h, sizeof(h));
			h = str_hash(p, mp->build_id);
			XXH3_128bits_update(&st, &h, sizeof(h));
		}
		for (size_t j = 0; l && j < l->n_line; j++) {
			const pprof_function_msg *f = pprof_function(p, l->line[j]->function_id);
			int64_t nums[2] = {l->line[j]->line, f ? f->start_line : 0};

			if (f) {
				h = str_hash(p, f->name);
				XXH3_128bits_update(&st, &h, sizeof(h));
				h = str_hash(p, f->system_name);
				XXH3_128bits_update(&st, &h, sizeof(h));
				h = str_hash(p, f->filename);
				XXH3_128bits_update(&st, &h, sizeof(h));
			}
			XXH3_128bits_update(&st, nums, sizeof(nums));
		}
		XXH3_128bits_update(&st, "|", 1); /* location boundary */
	}
	return XXH3_128bits_digest(&st);
}

struct ref_row {
	uint32_t ref;
	uint32_t sample;
};

static int cmp_ref_row(const void *a, const void *b)
{
	const struct ref_row *x = a, *y = b;

	return x->ref < y->ref ? -1 : x->ref > y->ref;
}

/* Appends one process profile's series, new stacks and rows (with the
 * profile's own time) to the fields of a Window being built in win. */
static int encode_process(struct stream_client *sc,
			  const Parca__Profilestore__V1alpha1__RawProfileSeries *rs,
			  struct buf *win, size_t *n_rows)
{
	const Parca__Profilestore__V1alpha1__RawSample *raw = rs->samples[0];
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct buf sub = {0}, lab = {0}, rows = {0}, defs = {0};
	struct ref_row *rr = NULL;
	const pprof_sample_msg **fresh = NULL;
	size_t n_fresh = 0;
	const pprof_msg *m;
	int rc;

	if ((rc = pprof_decode(raw->raw_profile.data, raw->raw_profile.len, NULL, &p, &err))) {
		log_warn("remote store: cannot read our own profile: %s", err.msg);
		return rc;
	}
	m = pprof_profile_msg(p);
	rr = calloc(m->n_sample + 1, sizeof(*rr));
	fresh = calloc(m->n_sample + 1, sizeof(*fresh));
	if (!rr || !fresh) {
		rc = -ENOMEM;
		goto out;
	}
	int64_t ts = m->time_nanos / 1000000;
	bool delta = profile_is_delta(p);

	/* Series: one per sample type, labels sent with the first use. */
	uint32_t *series_refs = calloc(m->n_sample_type + 1, sizeof(*series_refs));
	if (!series_refs)
		rc = -ENOMEM;
	for (size_t t = 0; t < m->n_sample_type && !rc; t++) {
		const char *st = pprof_string(p, m->sample_type[t]->type),
			   *su = pprof_string(p, m->sample_type[t]->unit),
			   *pt = m->period_type ? pprof_string(p, m->period_type->type) : "",
			   *pu = m->period_type ? pprof_string(p, m->period_type->unit) : "";
		uint64_t ref;

		buf_reset(&sc->key);
		rc = buf_printf(&sc->key, "%s\x1f%s\x1f%s\x1f%s\x1f%lld\x1f%d", st, su, pt, pu,
				(long long)m->period, delta);
		for (size_t i = 0; i < rs->labels->n_labels && !rc; i++)
			rc = buf_printf(&sc->key, "\x1e%s\x1f%s", rs->labels->labels[i]->name,
					rs->labels->labels[i]->value);
		if (rc)
			break;
		if (htab_get(sc->series, sc->key.data, sc->key.len, &ref)) {
			series_refs[t] = (uint32_t)ref;
			continue;
		}
		ref = sc->n_series;
		if ((rc = htab_put(sc->series, sc->key.data, sc->key.len, ref)))
			break;
		sc->n_series++;
		series_refs[t] = (uint32_t)ref;
		buf_reset(&sub);
		rc = ingest_put_field_varint(&sub, 1, ref);
		for (size_t i = 0; i < rs->labels->n_labels && !rc; i++) {
			buf_reset(&lab);
			rc = ingest_put_field_str(&lab, 1, rs->labels->labels[i]->name);
			rc = rc ?: ingest_put_field_str(&lab, 2, rs->labels->labels[i]->value);
			rc = rc ?: ingest_put_field_bytes(&sub, 2, lab.data, lab.len);
		}
		rc = rc ?: ingest_put_field_str(&sub, 3, st);
		rc = rc ?: ingest_put_field_str(&sub, 4, su);
		rc = rc ?: ingest_put_field_str(&sub, 5, pt);
		rc = rc ?: ingest_put_field_str(&sub, 6, pu);
		rc = rc ?: ingest_put_field_varint(&sub, 7, (uint64_t)m->period);
		rc = rc ?: ingest_put_field_varint(&sub, 8, delta);
		rc = rc ?: ingest_put_field_bytes(win, 3, sub.data, sub.len);
	}

	/* Stacks: references by content; the new ones described together. */
	uint32_t first_new = sc->n_stacks;
	for (size_t i = 0; i < m->n_sample && !rc; i++) {
		XXH128_hash_t h = stack_hash(p, m->sample[i]);
		uint64_t ref;

		if (!htab_get(sc->stacks, &h, sizeof(h), &ref)) {
			ref = sc->n_stacks++;
			rc = htab_put(sc->stacks, &h, sizeof(h), ref);
			fresh[n_fresh++] = m->sample[i];
		}
		rr[i] = (struct ref_row){(uint32_t)ref, (uint32_t)i};
	}
	if (!rc && n_fresh) {
		pprof_msg only_new = *m;

		only_new.sample = (pprof_sample_msg **)fresh;
		only_new.n_sample = n_fresh;
		buf_reset(&sub);
		rc = ingest_put_field_varint(&sub, 1, first_new);
		rc = rc ?: pprof_encode(&only_new, true, &defs);
		rc = rc ?: ingest_put_field_bytes(&sub, 2, defs.data, defs.len);
		for (size_t j = 0; j < raw->n_executable_info && !rc; j++) {
			const Parca__Profilestore__V1alpha1__ExecutableInfo *x =
			    raw->executable_info[j];

			buf_reset(&lab);
			rc = ingest_put_field_varint(&lab, 1, x->elf_type);
			if (!rc && x->load_segment) {
				rc = ingest_put_field_varint(&lab, 2, x->load_segment->offset);
				rc = rc ?: ingest_put_field_varint(&lab, 3, x->load_segment->vaddr);
			}
			rc = rc ?: ingest_put_field_bytes(&sub, 3, lab.data, lab.len);
		}
		rc = rc ?: ingest_put_field_bytes(win, 4, sub.data, sub.len);
	}

	/* Rows: per sample type, references ascending, delta-coded. */
	if (!rc)
		qsort(rr, m->n_sample, sizeof(*rr), cmp_ref_row);
	for (size_t t = 0; t < m->n_sample_type && !rc; t++) {
		uint32_t last = 0;

		buf_reset(&rows);
		for (size_t i = 0; i < m->n_sample && !rc; i++) {
			const pprof_sample_msg *sm = m->sample[rr[i].sample];
			int64_t v = t < sm->n_value ? sm->value[t] : 0;

			if (v == 0)
				continue;
			rc = ingest_put_row(&rows, rr[i].ref - last, v);
			last = rr[i].ref;
			(*n_rows)++;
		}
		buf_reset(&sub);
		rc = rc ?: ingest_put_field_varint(&sub, 1, series_refs[t]);
		rc = rc ?: ingest_put_field_bytes(&sub, 2, rows.data, rows.len);
		rc = rc ?: ingest_put_field_varint(&sub, 3, (uint64_t)ts);
		rc = rc ?: ingest_put_field_bytes(win, 5, sub.data, sub.len);
	}
	free(series_refs);
out:
	pprof_profile_free(p);
	free(rr);
	free(fresh);
	buf_free(&sub);
	buf_free(&lab);
	buf_free(&rows);
	buf_free(&defs);
	return rc;
}

int stream_client_encode(struct stream_client *sc, const uint8_t *writeraw, size_t len,
			 uint64_t window_id, struct buf *req, size_t *n_rows)
{
	Parca__Profilestore__V1alpha1__WriteRawRequest *wr =
	    parca__profilestore__v1alpha1__write_raw_request__unpack(NULL, len, writeraw);
	struct buf win = {0};
	int rc = 0;

	*n_rows = 0;
	buf_reset(req);
	if (!wr)
		return -EINVAL;
	if (sc->n_stacks > MAX_SESSION_STACKS)
		stream_client_reset(sc);
	rc = ingest_put_field_fixed64(req, 1, sc->agent_id);
	rc = rc ?: ingest_put_field_fixed64(req, 2, sc->session_id);
	if (!rc && !sc->started)
		rc = ingest_put_field_varint(req, 3, 1);
	/* One Window for the whole agent window: one WAL record, one fsync. */
	rc = rc ?: ingest_put_field_varint(&win, 1, window_id);
	for (size_t i = 0; i < wr->n_series && !rc; i++) {
		if (!wr->series[i]->labels || wr->series[i]->n_samples != 1)
			continue;
		rc = encode_process(sc, wr->series[i], &win, n_rows);
	}
	rc = rc ?: ingest_put_field_bytes(req, 4, win.data, win.len);
	parca__profilestore__v1alpha1__write_raw_request__free_unpacked(wr, NULL);
	buf_free(&win);
	return rc;
}

int stream_client_answer(struct stream_client *sc, const uint8_t *resp, size_t len,
			 uint64_t window_id, struct kiln_error *err)
{
	struct ingest_push_response r;
	size_t covered = 0;
	int rc = ingest_response_decode(resp, len, &r, err);

	if (rc)
		return rc;
	if (r.reset_session) {
		free(r.acked);
		stream_client_reset(sc);
		return -ECONNRESET;
	}
	for (size_t i = 0; i < r.n_acked; i++)
		covered += r.acked[i] == window_id;
	free(r.acked);
	if (!covered)
		return kiln_error_set(err, EPROTO, "the server did not acknowledge window %llu",
				      (unsigned long long)window_id);
	sc->started = true;
	return 0;
}
