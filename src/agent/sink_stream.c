/*
 * sink_stream.c — the push sink's streaming protocol
 * (kiln.ingest.v1.IngestService/Push, docs/API.md): turns one queued
 * window into rows keyed by per-session references, describing only the
 * series and stacks this session has not sent yet. The agent's windows
 * come as captured stacks (push_window.h: stream_client_encode_window,
 * which builds a pprof only for the StackDefs of new stacks); the load
 * generator's as WriteRawRequests (stream_client_encode, which reads
 * their pprofs).
 *
 * The session is the agent's "sent" set: series key -> reference, stack
 * content hash -> reference. A stack's hash is computed from what the
 * server stores of it (mapping, address, lines by name), so the same stack
 * of two windows gets one reference whatever else either window holds.
 * The server answers reset_session when it holds no state of the session
 * (it restarted, or evicted it): the sink then starts a new session and
 * encodes the same window again from scratch; so does a failed call
 * (sink_remote.c), so a retry never depends on what reached the server.
 */
#include "agent/agent.h"
#include "agent/push_window.h"
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
	/* Kept between windows: a pushed window's new stacks are described
	 * with defs (emptied each time); scratch and rows hold encodings. */
	struct pprof_builder *defs;
	struct buf scratch, rows;
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
	buf_free(&sc->scratch);
	buf_free(&sc->rows);
	pprof_builder_free(sc->defs);
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

struct series_label {
	const char *name, *value;
};

/* What a series is besides its labels (SeriesDef's other fields). */
struct series_type {
	const char *sample_type, *sample_unit, *period_type, *period_unit;
	int64_t period;
	bool delta;
};

/* The session's reference of the series (ty, labels), defined in win (a
 * Window being built) on first use. 0 or -ENOMEM. */
static int series_ref(struct stream_client *sc, const struct series_type *ty,
		      const struct series_label *labels, size_t n_labels, struct buf *win,
		      uint32_t *out)
{
	struct buf sub = {0}, lab = {0};
	uint64_t ref;
	int rc;

	buf_reset(&sc->key);
	rc = buf_printf(&sc->key, "%s\x1f%s\x1f%s\x1f%s\x1f%lld\x1f%d", ty->sample_type,
			ty->sample_unit, ty->period_type, ty->period_unit, (long long)ty->period,
			ty->delta);
	for (size_t i = 0; i < n_labels && !rc; i++)
		rc = buf_printf(&sc->key, "\x1e%s\x1f%s", labels[i].name, labels[i].value);
	if (rc)
		return rc;
	if (htab_get(sc->series, sc->key.data, sc->key.len, &ref)) {
		*out = (uint32_t)ref;
		return 0;
	}
	ref = sc->n_series;
	if ((rc = htab_put(sc->series, sc->key.data, sc->key.len, ref)))
		return rc;
	sc->n_series++;
	*out = (uint32_t)ref;
	rc = ingest_put_field_varint(&sub, 1, ref);
	for (size_t i = 0; i < n_labels && !rc; i++) {
		buf_reset(&lab);
		rc = ingest_put_field_str(&lab, 1, labels[i].name);
		rc = rc ?: ingest_put_field_str(&lab, 2, labels[i].value);
		rc = rc ?: ingest_put_field_bytes(&sub, 2, lab.data, lab.len);
	}
	rc = rc ?: ingest_put_field_str(&sub, 3, ty->sample_type);
	rc = rc ?: ingest_put_field_str(&sub, 4, ty->sample_unit);
	rc = rc ?: ingest_put_field_str(&sub, 5, ty->period_type);
	rc = rc ?: ingest_put_field_str(&sub, 6, ty->period_unit);
	rc = rc ?: ingest_put_field_varint(&sub, 7, (uint64_t)ty->period);
	rc = rc ?: ingest_put_field_varint(&sub, 8, ty->delta);
	rc = rc ?: ingest_put_field_bytes(win, 3, sub.data, sub.len);
	buf_free(&sub);
	buf_free(&lab);
	return rc;
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
	struct series_label *labels = calloc(rs->labels->n_labels + 1, sizeof(*labels));
	if (!series_refs || !labels)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < rs->labels->n_labels; i++)
		labels[i] = (struct series_label){rs->labels->labels[i]->name,
						  rs->labels->labels[i]->value};
	for (size_t t = 0; t < m->n_sample_type && !rc; t++) {
		struct series_type ty = {
		    .sample_type = pprof_string(p, m->sample_type[t]->type),
		    .sample_unit = pprof_string(p, m->sample_type[t]->unit),
		    .period_type = m->period_type ? pprof_string(p, m->period_type->type) : "",
		    .period_unit = m->period_type ? pprof_string(p, m->period_type->unit) : "",
		    .period = m->period,
		    .delta = delta,
		};

		rc = series_ref(sc, &ty, labels, rs->labels->n_labels, win, &series_refs[t]);
	}
	free(labels);

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

/* The series types of a captured process profile (profile.c's shapes). */
static size_t proc_series_types(const struct push_window *pw, const struct push_proc *pr,
				struct series_type ty[2])
{
	if (pr->kind == AGENT_PROFILE_OFFCPU) {
		/* Parca's delta rule: a first sample type "wallclock" is a delta. */
		ty[0] =
		    (struct series_type){"wallclock", "nanoseconds", "samples", "count", 1, true};
		return 1;
	}
	ty[0] = (struct series_type){"samples", "count", "cpu", "nanoseconds", pw->period_ns, true};
	ty[1] =
	    (struct series_type){"cpu", "nanoseconds", "cpu", "nanoseconds", pw->period_ns, true};
	return 2;
}

/* Appends to win the StackDefs of the window's samples fresh[0..n) (pw
 * sample indexes, proc_of: each one's process), the session's stack
 * references first_ref onwards. */
static int encode_stack_defs(struct stream_client *sc, const struct push_window *pw,
			     const uint32_t *fresh, const uint32_t *proc_of, size_t n,
			     uint32_t first_ref, struct buf *win)
{
	uint64_t locs[PROFILER_MAX_FRAMES];
	struct agent_exec_infos ex = {0};
	struct buf sub = {0}, lab = {0};
	const int64_t one = 1;
	int rc;

	if (!sc->defs && !(sc->defs = pprof_builder_new_sized(64)))
		return -ENOMEM;
	if ((rc = pprof_builder_reset(sc->defs, 16 + 4 * n)) ||
	    (rc = pprof_builder_add_sample_type(sc->defs, "samples", "count")))
		goto out;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct push_sample *sm = &pw->samples[fresh[i]];
		const struct push_proc *pr = &pw->procs[proc_of[i]];
		size_t nf = sm->n_frames < PROFILER_MAX_FRAMES ? sm->n_frames : PROFILER_MAX_FRAMES;

		for (size_t f = 0; f < nf && !rc; f++)
			if (!(locs[f] = push_window_location(
				  sc->defs, pw, pr, &pw->frames[sm->first_frame + f], &ex)))
				rc = -ENOMEM;
		rc = rc ?: pprof_builder_add_sample(sc->defs, locs, nf, &one, NULL, 0);
		/* Sample i defines reference first_ref + i: two fresh stacks
		 * the builder found equal would shift every later one. */
		if (!rc && pprof_builder_sample_count(sc->defs) != i + 1) {
			log_warn("remote store: two stacks of different hashes have one content");
			rc = -EPROTO;
		}
	}
	rc = rc ?: ingest_put_field_varint(&sub, 1, first_ref);
	buf_reset(&sc->scratch);
	rc = rc ?: pprof_builder_encode(sc->defs, false, &sc->scratch);
	rc = rc ?: ingest_put_field_bytes(&sub, 2, sc->scratch.data, sc->scratch.len);
	for (size_t j = 0; j < ex.n && !rc; j++) {
		buf_reset(&lab);
		rc = ingest_put_field_varint(&lab, 1, ex.v[j].elf_type);
		if (!rc && ex.v[j].has_load) {
			rc = ingest_put_field_varint(&lab, 2, ex.v[j].load_offset);
			rc = rc ?: ingest_put_field_varint(&lab, 3, ex.v[j].load_vaddr);
		}
		rc = rc ?: ingest_put_field_bytes(&sub, 3, lab.data, lab.len);
	}
	rc = rc ?: ingest_put_field_bytes(win, 4, sub.data, sub.len);
out:
	agent_exec_infos_free(&ex);
	buf_free(&sub);
	buf_free(&lab);
	return rc;
}

/* Appends process pr's rows, one SeriesRows per series type, references
 * ascending (rr: its samples' (reference, sample) pairs, sorted here). */
static int encode_proc_rows(struct stream_client *sc, const struct push_window *pw,
			    const struct push_proc *pr, struct ref_row *rr, struct buf *win,
			    size_t *n_rows)
{
	struct series_label *labels = calloc(pr->n_labels + 1, sizeof(*labels));
	struct series_type ty[2];
	size_t n_types = proc_series_types(pw, pr, ty), n_labels = 1;
	struct buf sub = {0};
	int rc = 0;

	if (!labels)
		return -ENOMEM;
	/* WriteRaw's label set (sink_remote.c): __name__ sorts first. */
	labels[0] = (struct series_label){"__name__", "parca_agent"};
	for (uint32_t i = 0; i < pr->n_labels; i++) {
		const struct push_label *l = &pw->labels[pr->first_label + i];

		labels[n_labels++] =
		    (struct series_label){push_str(pw, l->name), push_str(pw, l->value)};
	}
	qsort(rr, pr->n_samples, sizeof(*rr), cmp_ref_row);
	for (size_t t = 0; t < n_types && !rc; t++) {
		uint32_t series, last = 0;

		rc = series_ref(sc, &ty[t], labels, n_labels, win, &series);
		buf_reset(&sc->rows);
		for (uint32_t i = 0; i < pr->n_samples && !rc; i++) {
			int64_t v = pw->samples[rr[i].sample].values[t];

			if (v == 0)
				continue;
			rc = ingest_put_row(&sc->rows, rr[i].ref - last, v);
			last = rr[i].ref;
			(*n_rows)++;
		}
		buf_reset(&sub);
		rc = rc ?: ingest_put_field_varint(&sub, 1, series);
		rc = rc ?: ingest_put_field_bytes(&sub, 2, sc->rows.data, sc->rows.len);
		rc = rc ?: ingest_put_field_varint(&sub, 3, (uint64_t)(pw->time_ns / 1000000));
		rc = rc ?: ingest_put_field_bytes(win, 5, sub.data, sub.len);
	}
	buf_free(&sub);
	free(labels);
	return rc;
}

int stream_client_encode_window(struct stream_client *sc, const struct push_window *pw,
				uint64_t window_id, struct buf *req, size_t *n_rows)
{
	size_t n = pw->n_samples + 1, n_fresh = 0;
	struct ref_row *rr = calloc(n, sizeof(*rr));
	uint32_t *fresh = calloc(n, sizeof(*fresh)), *proc_of = calloc(n, sizeof(*proc_of));
	uint32_t first_new;
	struct buf win = {0};
	int rc = 0;

	*n_rows = 0;
	buf_reset(req);
	if (!rr || !fresh || !proc_of) {
		rc = -ENOMEM;
		goto out;
	}
	if (sc->n_stacks > MAX_SESSION_STACKS)
		stream_client_reset(sc);
	first_new = sc->n_stacks;
	rc = ingest_put_field_fixed64(req, 1, sc->agent_id);
	rc = rc ?: ingest_put_field_fixed64(req, 2, sc->session_id);
	if (!rc && !sc->started)
		rc = ingest_put_field_varint(req, 3, 1);
	rc = rc ?: ingest_put_field_varint(&win, 1, window_id);
	/* References by content; a stack this session has not seen gets the
	 * next one and is described below. */
	for (size_t p = 0; p < pw->n_procs && !rc; p++) {
		const struct push_proc *pr = &pw->procs[p];

		for (uint32_t i = 0; i < pr->n_samples && !rc; i++) {
			uint32_t si = pr->first_sample + i;
			uint64_t ref;

			if (!htab_get(sc->stacks, &pw->samples[si].stack,
				      sizeof(pw->samples[si].stack), &ref)) {
				ref = sc->n_stacks++;
				rc = htab_put(sc->stacks, &pw->samples[si].stack,
					      sizeof(pw->samples[si].stack), ref);
				fresh[n_fresh] = si;
				proc_of[n_fresh++] = (uint32_t)p;
			}
			rr[si] = (struct ref_row){(uint32_t)ref, si};
		}
	}
	if (!rc && n_fresh)
		rc = encode_stack_defs(sc, pw, fresh, proc_of, n_fresh, first_new, &win);
	for (size_t p = 0; p < pw->n_procs && !rc; p++)
		rc = encode_proc_rows(sc, pw, &pw->procs[p], rr + pw->procs[p].first_sample, &win,
				      n_rows);
	rc = rc ?: ingest_put_field_bytes(req, 4, win.data, win.len);
	if (rc)
		/* The session's sent set already holds this window's new
		 * stacks, which the server will never see: start over. */
		stream_client_reset(sc);
out:
	free(rr);
	free(fresh);
	free(proc_of);
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
