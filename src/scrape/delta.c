/*
 * delta.c — turns cumulative profiles into deltas between two scrapes, and
 * projects a profile onto some of its sample types.
 *
 * Samples of prev and cur are matched by content (keyed_delta): the stack
 * identity is the resolved frames (function names, files, lines, mapping,
 * address) and the labels, not the source ids, which differ between two
 * scrapes of the same process. Only samples whose delta is not zero are
 * then copied through the pprof builder, once (the cost of a scrape of an
 * idle target is the matching, not a rebuild of the whole profile).
 *
 * Counter-reset rule (documented in scrape.h): when any value of the
 * difference is negative, the counters went backwards — the target
 * restarted or reset its profile — so cur itself is the delta.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/htab.h"
#include "scrape/scrape.h"

struct copier {
	struct pprof_builder *b;
	const struct pprof_profile *src;
	struct htab *locs;  /* source location id -> builder id */
	struct htab *funcs; /* source function id -> builder id */
	struct htab *maps;  /* source mapping id -> builder id */
};

static int copier_init(struct copier *c, struct pprof_builder *b, const struct pprof_profile *src)
{
	c->b = b;
	c->src = src;
	c->locs = htab_new(256);
	c->funcs = htab_new(256);
	c->maps = htab_new(8);
	return c->locs && c->funcs && c->maps ? 0 : -ENOMEM;
}

static void copier_release(struct copier *c)
{
	htab_free(c->locs);
	htab_free(c->funcs);
	htab_free(c->maps);
}

static uint64_t copy_mapping(struct copier *c, uint64_t id)
{
	uint64_t out;
	if (id == 0)
		return 0;
	if (htab_get(c->maps, &id, sizeof(id), &out))
		return out;
	const pprof_mapping_msg *m = pprof_mapping(c->src, id);
	if (!m)
		return 0;
	struct pprof_mapping_desc d = {
	    .memory_start = m->memory_start,
	    .memory_limit = m->memory_limit,
	    .file_offset = m->file_offset,
	    .filename = pprof_string(c->src, m->filename),
	    .build_id = pprof_string(c->src, m->build_id),
	    .has_functions = m->has_functions,
	    .has_filenames = m->has_filenames,
	    .has_line_numbers = m->has_line_numbers,
	    .has_inline_frames = m->has_inline_frames,
	};
	out = pprof_builder_mapping(c->b, &d);
	if (out && htab_put(c->maps, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

static uint64_t copy_function(struct copier *c, uint64_t id)
{
	uint64_t out;
	if (htab_get(c->funcs, &id, sizeof(id), &out))
		return out;
	const pprof_function_msg *f = pprof_function(c->src, id);
	if (!f)
		return 0;
	out = pprof_builder_function(c->b, pprof_string(c->src, f->name),
				     pprof_string(c->src, f->system_name),
				     pprof_string(c->src, f->filename), f->start_line);
	if (out && htab_put(c->funcs, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

static uint64_t copy_location(struct copier *c, uint64_t id)
{
	uint64_t out;
	struct pprof_line_desc lines_stack[16], *lines = lines_stack;

	if (htab_get(c->locs, &id, sizeof(id), &out))
		return out;
	const pprof_location_msg *l = pprof_location(c->src, id);
	if (!l)
		return 0;
	if (l->n_line > 16 && !(lines = calloc(l->n_line, sizeof(*lines))))
		return 0;
	out = 1;
	for (size_t i = 0; i < l->n_line && out; i++) {
		lines[i].function_id = copy_function(c, l->line[i]->function_id);
		lines[i].line = l->line[i]->line;
		lines[i].column = l->line[i]->column;
		out = lines[i].function_id;
	}
	if (out) {
		uint64_t map = copy_mapping(c, l->mapping_id);
		out = (l->mapping_id && !map)
			  ? 0
			  : pprof_builder_location(c->b, map, l->address, lines, l->n_line);
	}
	if (lines != lines_stack)
		free(lines);
	if (out && htab_put(c->locs, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

/* Adds one source sample with the values v (already selected and scaled). */
static int copy_sample(struct copier *c, const pprof_sample_msg *s, const int64_t *v)
{
	uint64_t ids_stack[128], *ids = ids_stack;
	struct pprof_label_desc lab_stack[16], *lab = lab_stack;
	int rc = 0;

	if (s->n_location_id > 128 && !(ids = calloc(s->n_location_id, sizeof(*ids))))
		return -ENOMEM;
	if (s->n_label > 16 && !(lab = calloc(s->n_label, sizeof(*lab)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->n_location_id; i++) {
		if (!(ids[i] = copy_location(c, s->location_id[i]))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		lab[i].key = pprof_string(c->src, l->key);
		lab[i].str = l->str ? pprof_string(c->src, l->str) : NULL;
		lab[i].num = l->num;
		lab[i].num_unit = l->num_unit ? pprof_string(c->src, l->num_unit) : NULL;
	}
	rc = pprof_builder_add_sample(c->b, ids, s->n_location_id, v, lab, s->n_label);
out:
	if (ids != ids_stack)
		free(ids);
	if (lab != lab_stack)
		free(lab);
	return rc;
}

/* Index in p of the sample type with the same type and unit strings as
 * type t of ref, or -1. */
static int same_type(const struct pprof_profile *p, const struct pprof_profile *ref, size_t t)
{
	const pprof_msg *m = pprof_profile_msg(p), *r = pprof_profile_msg(ref);
	const char *ty = pprof_string(ref, r->sample_type[t]->type);
	const char *un = pprof_string(ref, r->sample_type[t]->unit);
	for (size_t i = 0; i < m->n_sample_type; i++)
		if (strcmp(pprof_string(p, m->sample_type[i]->type), ty) == 0 &&
		    strcmp(pprof_string(p, m->sample_type[i]->unit), un) == 0)
			return (int)i;
	return -1;
}

static int start_builder(const struct pprof_profile *cur, const size_t *idx, size_t n,
			 int64_t duration, struct pprof_builder **out)
{
	const pprof_msg *m = pprof_profile_msg(cur);
	struct pprof_builder *b = pprof_builder_new();
	int rc = 0;
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = pprof_builder_add_sample_type(b,
						   pprof_string(cur, m->sample_type[idx[i]]->type),
						   pprof_string(cur, m->sample_type[idx[i]]->unit));
	if (rc == 0 && m->period_type)
		rc = pprof_builder_set_period(b, pprof_string(cur, m->period_type->type),
					      pprof_string(cur, m->period_type->unit), m->period);
	pprof_builder_set_time(b, m->time_nanos, duration);
	if (rc < 0) {
		pprof_builder_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* Copies the samples of src (types map[0..n) of src, times sign) into b;
 * with skip_zero, samples whose selected values are all 0 are left out. */
static int copy_all(struct pprof_builder *b, const struct pprof_profile *src, const int *map,
		    size_t n, int64_t sign, bool skip_zero)
{
	const pprof_msg *m = pprof_profile_msg(src);
	struct copier c;
	int64_t v[64];
	int rc = copier_init(&c, b, src);

	for (size_t i = 0; i < m->n_sample && rc == 0; i++) {
		bool any = false;
		for (size_t k = 0; k < n; k++) {
			v[k] = sign * m->sample[i]->value[map[k]];
			any = any || v[k] != 0;
		}
		if (skip_zero && !any)
			continue;
		rc = copy_sample(&c, m->sample[i], v);
	}
	copier_release(&c);
	return rc;
}

/* ---- sample identity without a builder ------------------------------------
 * The delta pass matches the samples of prev and cur by content, with the
 * builder's notion of identity (mapping, address and resolved lines of every
 * frame, then the labels), so that only the samples that changed are copied
 * into a builder once. Location contents are interned into one table shared
 * by both profiles (content bytes -> global id); a sample's key is its
 * global location ids followed by its labels. */

struct matcher {
	struct htab *loc_content; /* content bytes -> global location id */
	struct htab *samples;	  /* sample key -> index */
	struct buf kb;
	size_t n_keys;
	size_t n_types;
	int64_t *cur, *prev;	      /* n_keys x n_types */
	const pprof_sample_msg **rep; /* a cur sample with that key, or NULL */
	size_t cap;
};

static int put_str(struct buf *b, const char *s)
{
	return buf_append(b, s ? s : "", strlen(s ? s : "") + 1);
}

static int put_u64(struct buf *b, uint64_t v)
{
	return buf_append(b, &v, sizeof(v));
}

/* Global id of location id of p (cache: p's id -> global id). */
static int location_gid(struct matcher *mt, struct htab *cache, const struct pprof_profile *p,
			uint64_t id, uint64_t *gid)
{
	if (htab_get(cache, &id, sizeof(id), gid))
		return 0;
	const pprof_location_msg *l = pprof_location(p, id);
	struct buf *b = &mt->kb;
	int rc = 0;
	if (!l)
		return -EINVAL;
	buf_reset(b);
	const pprof_mapping_msg *m = l->mapping_id ? pprof_mapping(p, l->mapping_id) : NULL;
	if (m)
		rc = put_u64(b, m->memory_start) || put_u64(b, m->memory_limit) ||
		     put_u64(b, m->file_offset) || put_str(b, pprof_string(p, m->filename)) ||
		     put_str(b, pprof_string(p, m->build_id)) ||
		     put_u64(b, (uint64_t)m->has_functions | (uint64_t)m->has_filenames << 1 |
				    (uint64_t)m->has_line_numbers << 2 |
				    (uint64_t)m->has_inline_frames << 3);
	else
		rc = put_u64(b, UINT64_MAX);
	rc = rc || put_u64(b, l->address) || put_u64(b, l->n_line);
	for (size_t i = 0; i < l->n_line && !rc; i++) {
		const pprof_function_msg *f = pprof_function(p, l->line[i]->function_id);
		if (!f)
			return -EINVAL;
		rc = put_str(b, pprof_string(p, f->name)) ||
		     put_str(b, pprof_string(p, f->system_name)) ||
		     put_str(b, pprof_string(p, f->filename)) ||
		     put_u64(b, (uint64_t)f->start_line) ||
		     put_u64(b, (uint64_t)l->line[i]->line) ||
		     put_u64(b, (uint64_t)l->line[i]->column);
	}
	if (rc)
		return -ENOMEM;
	*gid = htab_count(mt->loc_content) + 1;
	if (htab_intern(mt->loc_content, b->data, b->len, gid) < 0 ||
	    htab_put(cache, &id, sizeof(id), *gid) < 0)
		return -ENOMEM;
	return 0;
}

static int grow(struct matcher *mt)
{
	size_t cap = mt->cap ? mt->cap * 2 : 256;
	int64_t *c = realloc(mt->cur, cap * mt->n_types * sizeof(*c));
	if (c)
		mt->cur = c;
	int64_t *pv = realloc(mt->prev, cap * mt->n_types * sizeof(*pv));
	if (pv)
		mt->prev = pv;
	const pprof_sample_msg **r = realloc(mt->rep, cap * sizeof(*r));
	if (r)
		mt->rep = r;
	if (!c || !pv || !r)
		return -ENOMEM;
	mt->cap = cap;
	return 0;
}

/* Adds the samples of p (types map[0..n_types)) to the cur or prev sums. */
static int match_all(struct matcher *mt, const struct pprof_profile *p, const int *map, bool is_cur)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct htab *cache = htab_new(m->n_location);
	struct buf key;
	int rc = 0;

	buf_init(&key);
	if (!cache)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_sample && rc == 0; i++) {
		const pprof_sample_msg *s = m->sample[i];
		buf_reset(&key);
		for (size_t k = 0; k < s->n_location_id && rc == 0; k++) {
			uint64_t gid;
			if ((rc = location_gid(mt, cache, p, s->location_id[k], &gid)) == 0 &&
			    put_u64(&key, gid))
				rc = -ENOMEM;
		}
		for (size_t k = 0; k < s->n_label && rc == 0; k++) {
			const Perftools__Profiles__Label *l = s->label[k];
			if (put_str(&key, pprof_string(p, l->key)) ||
			    put_u64(&key, l->str ? 1 : 0) ||
			    put_str(&key, l->str ? pprof_string(p, l->str) : NULL) ||
			    put_u64(&key, (uint64_t)l->num) ||
			    put_str(&key, l->num_unit ? pprof_string(p, l->num_unit) : NULL))
				rc = -ENOMEM;
		}
		if (rc)
			break;
		uint64_t idx = mt->n_keys;
		int found = htab_intern(mt->samples, key.data ? key.data : (const uint8_t *)"",
					key.len, &idx);
		if (found < 0) {
			rc = -ENOMEM;
			break;
		}
		if (!found) {
			if (mt->n_keys == mt->cap && (rc = grow(mt)) < 0)
				break;
			memset(&mt->cur[idx * mt->n_types], 0, mt->n_types * sizeof(int64_t));
			memset(&mt->prev[idx * mt->n_types], 0, mt->n_types * sizeof(int64_t));
			mt->rep[idx] = NULL;
			mt->n_keys++;
		}
		int64_t *sum = is_cur ? &mt->cur[idx * mt->n_types] : &mt->prev[idx * mt->n_types];
		for (size_t t = 0; t < mt->n_types; t++)
			sum[t] += s->value[map[t]];
		if (is_cur && !mt->rep[idx])
			mt->rep[idx] = s;
	}
	buf_free(&key);
	htab_free(cache);
	return rc;
}

static void matcher_release(struct matcher *mt)
{
	htab_free(mt->loc_content);
	htab_free(mt->samples);
	buf_free(&mt->kb);
	free(mt->cur);
	free(mt->prev);
	free(mt->rep);
}

/* cur - prev into a new builder-made profile, samples with a zero delta left
 * out. Sets *reset (and makes nothing) when any delta is negative. */
static int keyed_delta(const struct pprof_profile *prev, const struct pprof_profile *cur,
		       const size_t *idx, size_t n, const int *cur_map, const int *prev_map,
		       int64_t duration, struct pprof_profile **out, bool *reset,
		       struct kiln_error *err)
{
	struct matcher mt = {.n_types = n};
	struct pprof_builder *b = NULL;
	struct copier c = {0};
	int64_t v[64];
	int rc;

	buf_init(&mt.kb);
	mt.loc_content = htab_new(pprof_profile_msg(cur)->n_location);
	mt.samples = htab_new(pprof_profile_msg(cur)->n_sample);
	if (!mt.loc_content || !mt.samples) {
		rc = -ENOMEM;
		goto done;
	}
	if ((rc = match_all(&mt, cur, cur_map, true)) < 0 ||
	    (rc = match_all(&mt, prev, prev_map, false)) < 0)
		goto done;
	for (size_t i = 0; i < mt.n_keys * n && !*reset; i++)
		*reset = mt.cur[i] - mt.prev[i] < 0;
	if (*reset)
		goto done;
	if ((rc = start_builder(cur, idx, n, duration, &b)) < 0 ||
	    (rc = copier_init(&c, b, cur)) < 0)
		goto done;
	for (size_t i = 0; i < mt.n_keys && rc == 0; i++) {
		bool any = false;
		for (size_t t = 0; t < n; t++) {
			v[t] = mt.cur[i * n + t] - mt.prev[i * n + t];
			any = any || v[t] != 0;
		}
		if (any) /* a nonzero delta implies a cur sample (no negatives) */
			rc = copy_sample(&c, mt.rep[i], v);
	}
	if (rc == 0)
		rc = pprof_builder_to_profile(b, out, err);
done:
	if (c.b)
		copier_release(&c);
	pprof_builder_free(b);
	matcher_release(&mt);
	return rc;
}

int scrape_delta(const struct pprof_profile *prev, const struct pprof_profile *cur,
		 const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		 struct kiln_error *err)
{
	const pprof_msg *cm = pprof_profile_msg(cur);
	struct pprof_builder *b = NULL;
	int cur_map[64], prev_map[64];
	int rc;

	*out = NULL;
	*reset = false;
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "delta over %zu sample types", n);
	for (size_t k = 0; k < n; k++) {
		cur_map[k] = (int)idx[k];
		prev_map[k] = prev ? same_type(prev, cur, idx[k]) : -1;
		if (prev && prev_map[k] < 0) {
			prev = NULL; /* the sample types changed: a new process */
			*reset = true;
		}
	}
	int64_t duration = cm->duration_nanos;
	if (prev && pprof_profile_msg(prev)->time_nanos && cm->time_nanos)
		duration = cm->time_nanos - pprof_profile_msg(prev)->time_nanos;

	if (prev) {
		rc = keyed_delta(prev, cur, idx, n, cur_map, prev_map, duration, out, reset, err);
		if (rc < 0)
			goto fail;
		if (!*reset)
			return 0;
	}
	/* No baseline, or a counter reset: cur itself, zero samples left out. */
	if ((rc = start_builder(cur, idx, n, cm->duration_nanos, &b)) < 0 ||
	    (rc = copy_all(b, cur, cur_map, n, 1, true)) < 0 ||
	    (rc = pprof_builder_to_profile(b, out, err)) < 0)
		goto fail;
	pprof_builder_free(b);
	return 0;
fail:
	pprof_builder_free(b);
	if (rc == -ENOMEM)
		return kiln_error_set(err, ENOMEM, "delta: out of memory");
	return kiln_error_set(err, -rc, "delta: cannot build the profile (%d)", rc);
}
