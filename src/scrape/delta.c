/*
 * delta.c — turns cumulative profiles into deltas between two scrapes, and
 * projects a profile onto some of its sample types.
 *
 * Samples of prev and cur are matched by content (a baseline): the stack
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

#include <xxhash.h>

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

/* ---- baselines: sample identity without a builder ---------------------------
 * A baseline is what a delta needs of the previous scrape: for every sample
 * key (a 128-bit XXH3 of its resolved frames — mapping, address, lines with
 * function names, files and line numbers — and of its labels, i.e. the
 * builder's notion of "same stack") the summed values of the selected
 * types, plus those types' names and the profile's time. It is a few bytes
 * per sample instead of a whole decoded profile. */

struct scrape_baseline {
	struct htab *keys;     /* 16-byte key -> index */
	XXH128_hash_t *key_of; /* index -> key */
	int64_t *values;       /* n_keys x n_types */
	size_t n_keys, cap, n_types;
	char **types, **units;
	int64_t time_nanos;
};

void scrape_baseline_free(struct scrape_baseline *b)
{
	if (!b)
		return;
	htab_free(b->keys);
	free(b->key_of);
	free(b->values);
	for (size_t i = 0; i < b->n_types; i++) {
		free(b->types[i]);
		free(b->units[i]);
	}
	free(b->types);
	free(b->units);
	free(b);
}

static int put_str(XXH3_state_t *h, const char *s)
{
	s = s ? s : "";
	return XXH3_128bits_update(h, s, strlen(s) + 1) == XXH_OK ? 0 : -ENOMEM;
}

static int put_u64(XXH3_state_t *h, uint64_t v)
{
	return XXH3_128bits_update(h, &v, sizeof(v)) == XXH_OK ? 0 : -ENOMEM;
}

/* Hash of the content of location id of p (cache: id -> index in hashes). */
static int location_hash(const struct pprof_profile *p, uint64_t id, struct htab *cache,
			 XXH128_hash_t **hashes, size_t *n, size_t *cap, XXH128_hash_t *out)
{
	uint64_t ix;
	if (htab_get(cache, &id, sizeof(id), &ix)) {
		*out = (*hashes)[ix];
		return 0;
	}
	const pprof_location_msg *l = pprof_location(p, id);
	if (!l)
		return -EINVAL;
	XXH3_state_t *h = XXH3_createState();
	int rc = h && XXH3_128bits_reset(h) == XXH_OK ? 0 : -ENOMEM;
	const pprof_mapping_msg *m = l->mapping_id ? pprof_mapping(p, l->mapping_id) : NULL;
	if (rc == 0 && m)
		rc = put_u64(h, m->memory_start) || put_u64(h, m->memory_limit) ||
			     put_u64(h, m->file_offset) ||
			     put_str(h, pprof_string(p, m->filename)) ||
			     put_str(h, pprof_string(p, m->build_id)) ||
			     put_u64(h, (uint64_t)m->has_functions |
					    (uint64_t)m->has_filenames << 1 |
					    (uint64_t)m->has_line_numbers << 2 |
					    (uint64_t)m->has_inline_frames << 3)
			 ? -ENOMEM
			 : 0;
	else if (rc == 0)
		rc = put_u64(h, UINT64_MAX);
	if (rc == 0 && (put_u64(h, l->address) || put_u64(h, l->n_line)))
		rc = -ENOMEM;
	for (size_t i = 0; i < l->n_line && rc == 0; i++) {
		const pprof_function_msg *f = pprof_function(p, l->line[i]->function_id);
		if (!f)
			rc = -EINVAL;
		else if (put_str(h, pprof_string(p, f->name)) ||
			 put_str(h, pprof_string(p, f->system_name)) ||
			 put_str(h, pprof_string(p, f->filename)) ||
			 put_u64(h, (uint64_t)f->start_line) ||
			 put_u64(h, (uint64_t)l->line[i]->line) ||
			 put_u64(h, (uint64_t)l->line[i]->column))
			rc = -ENOMEM;
	}
	if (rc == 0)
		*out = XXH3_128bits_digest(h);
	XXH3_freeState(h);
	if (rc)
		return rc;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		XXH128_hash_t *nh = realloc(*hashes, nc * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		*hashes = nh;
		*cap = nc;
	}
	(*hashes)[*n] = *out;
	if (htab_put(cache, &id, sizeof(id), *n) < 0)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Groups the samples of p (types map[0..n)) by key into a new baseline;
 * rep[i] (when rep is not NULL) is the first sample of key i. */
static int group(const struct pprof_profile *p, const int *map, size_t n,
		 struct scrape_baseline **out, const pprof_sample_msg ***rep)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct scrape_baseline *b = calloc(1, sizeof(*b));
	struct htab *cache = htab_new(m->n_location);
	XXH128_hash_t *lh = NULL;
	size_t n_lh = 0, cap_lh = 0;
	XXH3_state_t *h = XXH3_createState();
	const pprof_sample_msg **r = NULL;
	int rc = 0;

	*out = NULL;
	if (rep)
		*rep = NULL;
	if (!b || !cache || !h || !(b->keys = htab_new(m->n_sample)) ||
	    !(b->types = calloc(n + 1, sizeof(char *))) ||
	    !(b->units = calloc(n + 1, sizeof(char *)))) {
		rc = -ENOMEM;
		goto done;
	}
	b->n_types = n;
	b->time_nanos = m->time_nanos;
	for (size_t t = 0; t < n; t++)
		if (!(b->types[t] = strdup(pprof_string(p, m->sample_type[map[t]]->type))) ||
		    !(b->units[t] = strdup(pprof_string(p, m->sample_type[map[t]]->unit)))) {
			rc = -ENOMEM;
			goto done;
		}
	for (size_t i = 0; i < m->n_sample && rc == 0; i++) {
		const pprof_sample_msg *s = m->sample[i];
		if (XXH3_128bits_reset(h) != XXH_OK) {
			rc = -ENOMEM;
			break;
		}
		for (size_t k = 0; k < s->n_location_id && rc == 0; k++) {
			XXH128_hash_t x;
			rc = location_hash(p, s->location_id[k], cache, &lh, &n_lh, &cap_lh, &x);
			if (rc == 0 && XXH3_128bits_update(h, &x, sizeof(x)) != XXH_OK)
				rc = -ENOMEM;
		}
		if (rc == 0 && put_u64(h, UINT64_MAX)) /* end of stack */
			rc = -ENOMEM;
		for (size_t k = 0; k < s->n_label && rc == 0; k++) {
			const Perftools__Profiles__Label *l = s->label[k];
			if (put_str(h, pprof_string(p, l->key)) || put_u64(h, l->str ? 1 : 0) ||
			    put_str(h, l->str ? pprof_string(p, l->str) : NULL) ||
			    put_u64(h, (uint64_t)l->num) ||
			    put_str(h, l->num_unit ? pprof_string(p, l->num_unit) : NULL))
				rc = -ENOMEM;
		}
		if (rc)
			break;
		XXH128_hash_t key = XXH3_128bits_digest(h);
		uint64_t ix = b->n_keys;
		int found = htab_intern(b->keys, &key, sizeof(key), &ix);
		if (found < 0) {
			rc = -ENOMEM;
			break;
		}
		if (!found) {
			if (b->n_keys == b->cap) {
				size_t nc = b->cap ? b->cap * 2 : 256;
				int64_t *nv = realloc(b->values, nc * n * sizeof(*nv));
				XXH128_hash_t *nk = realloc(b->key_of, nc * sizeof(*nk));
				const pprof_sample_msg **nr =
				    rep ? realloc(r, nc * sizeof(*nr)) : NULL;
				if (nv)
					b->values = nv;
				if (nk)
					b->key_of = nk;
				if (nr)
					r = nr;
				if (!nv || !nk || (rep && !nr)) {
					rc = -ENOMEM;
					break;
				}
				b->cap = nc;
			}
			memset(&b->values[ix * n], 0, n * sizeof(int64_t));
			b->key_of[ix] = key;
			if (rep)
				r[ix] = s;
			b->n_keys++;
		}
		for (size_t t = 0; t < n; t++)
			b->values[ix * n + t] += s->value[map[t]];
	}
done:
	XXH3_freeState(h);
	htab_free(cache);
	free(lh);
	if (rc) {
		scrape_baseline_free(b);
		free(r);
		return rc;
	}
	*out = b;
	if (rep)
		*rep = r;
	else
		free(r);
	return 0;
}

int scrape_baseline_new(const struct pprof_profile *p, const size_t *idx, size_t n,
			struct scrape_baseline **out, struct kiln_error *err)
{
	int map[64];
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "baseline over %zu sample types", n);
	for (size_t k = 0; k < n; k++)
		map[k] = (int)idx[k];
	int rc = group(p, map, n, out, NULL);
	return rc < 0 ? kiln_error_set(err, -rc, "baseline: %s", strerror(-rc)) : 0;
}

/* No baseline, or a counter reset: cur itself, zero samples left out. */
static int whole(const struct pprof_profile *cur, const size_t *idx, const int *cur_map, size_t n,
		 struct pprof_profile **out, struct kiln_error *err)
{
	struct pprof_builder *b = NULL;
	int rc;
	if ((rc = start_builder(cur, idx, n, pprof_profile_msg(cur)->duration_nanos, &b)) < 0 ||
	    (rc = copy_all(b, cur, cur_map, n, 1, true)) < 0 ||
	    (rc = pprof_builder_to_profile(b, out, err)) < 0) {
		pprof_builder_free(b);
		if (rc == -ENOMEM)
			return kiln_error_set(err, ENOMEM, "delta: out of memory");
		return kiln_error_set(err, -rc, "delta: cannot build the profile (%d)", rc);
	}
	pprof_builder_free(b);
	return 0;
}

int scrape_delta_next(const struct scrape_baseline *prev, const struct pprof_profile *cur,
		      const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		      struct scrape_baseline **next, struct kiln_error *err)
{
	const pprof_msg *cm = pprof_profile_msg(cur);
	struct scrape_baseline *nb = NULL;
	const pprof_sample_msg **rep = NULL;
	struct pprof_builder *b = NULL;
	struct copier c = {0};
	bool *seen = NULL;
	int cur_map[64];
	int64_t v[64];
	int rc;

	*out = NULL;
	*reset = false;
	if (next)
		*next = NULL;
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "delta over %zu sample types", n);
	for (size_t k = 0; k < n; k++)
		cur_map[k] = (int)idx[k];
	if (prev && prev->n_types != n)
		prev = NULL, *reset = true; /* the sample types changed: a new process */
	for (size_t k = 0; prev && k < n; k++)
		if (strcmp(prev->types[k], pprof_string(cur, cm->sample_type[idx[k]]->type)) ||
		    strcmp(prev->units[k], pprof_string(cur, cm->sample_type[idx[k]]->unit)))
			prev = NULL, *reset = true;
	if (!prev && !next) /* a projection (the gauge types): no grouping needed */
		return whole(cur, idx, cur_map, n, out, err);
	if ((rc = group(cur, cur_map, n, &nb, &rep)) < 0) {
		rc = kiln_error_set(err, -rc, "delta: %s", strerror(-rc));
		goto done;
	}
	if (prev) {
		/* Every key of prev must still be there with values that did
		 * not go down; a missing key with values went to zero. */
		if (!(seen = calloc(prev->n_keys + 1, sizeof(*seen)))) {
			rc = kiln_error_set(err, ENOMEM, "delta: out of memory");
			goto done;
		}
		for (size_t ci = 0; ci < nb->n_keys && !*reset; ci++) {
			uint64_t pi;
			if (!htab_get(prev->keys, &nb->key_of[ci], sizeof(XXH128_hash_t), &pi))
				continue;
			seen[pi] = true;
			for (size_t t = 0; t < n; t++)
				if (nb->values[ci * n + t] < prev->values[pi * n + t])
					*reset = true;
		}
		for (size_t i = 0; i < prev->n_keys && !*reset; i++)
			for (size_t t = 0; t < n && !seen[i]; t++)
				if (prev->values[i * n + t] != 0)
					*reset = true;
	}
	if (!prev || *reset) {
		rc = whole(cur, idx, cur_map, n, out, err);
		goto done;
	}
	int64_t duration = cm->duration_nanos;
	if (prev->time_nanos && cm->time_nanos)
		duration = cm->time_nanos - prev->time_nanos;
	if ((rc = start_builder(cur, idx, n, duration, &b)) < 0 ||
	    (rc = copier_init(&c, b, cur)) < 0) {
		rc = kiln_error_set(err, -rc, "delta: cannot build the profile (%d)", rc);
		goto done;
	}
	/* The changed samples, in order of first appearance in cur. */
	for (size_t ci = 0; ci < nb->n_keys && rc == 0; ci++) {
		uint64_t pi;
		bool in_prev = htab_get(prev->keys, &nb->key_of[ci], sizeof(XXH128_hash_t), &pi);
		bool any = false;
		for (size_t t = 0; t < n; t++) {
			v[t] = nb->values[ci * n + t] - (in_prev ? prev->values[pi * n + t] : 0);
			any = any || v[t] != 0;
		}
		if (any)
			rc = copy_sample(&c, rep[ci], v);
	}
	if (rc < 0)
		rc = kiln_error_set(err, -rc, "delta: cannot build the profile (%d)", rc);
	else
		rc = pprof_builder_to_profile(b, out, err);
done:
	if (c.b)
		copier_release(&c);
	pprof_builder_free(b);
	free(seen);
	free(rep);
	if (rc == 0 && next)
		*next = nb;
	else
		scrape_baseline_free(nb);
	return rc;
}

int scrape_delta(const struct pprof_profile *prev, const struct pprof_profile *cur,
		 const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		 struct kiln_error *err)
{
	struct scrape_baseline *base = NULL;
	bool types_changed = false;
	size_t pidx[64];
	int rc;

	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "delta over %zu sample types", n);
	for (size_t k = 0; prev && k < n && !types_changed; k++) {
		int j = same_type(prev, cur, idx[k]);
		types_changed = j < 0;
		pidx[k] = j < 0 ? 0 : (size_t)j;
	}
	if (prev && !types_changed && (rc = scrape_baseline_new(prev, pidx, n, &base, err)) < 0)
		return rc;
	rc = scrape_delta_next(base, cur, idx, n, out, reset, NULL, err);
	if (rc == 0 && types_changed)
		*reset = true;
	scrape_baseline_free(base);
	return rc;
}
