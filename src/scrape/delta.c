/*
 * delta.c — turns cumulative profiles into deltas between two scrapes, and
 * projects a profile onto some of its sample types.
 *
 * Samples of prev and cur are matched by content (a baseline): the stack
 * identity is the resolved frames (function names, files, lines, mapping,
 * address) and the labels, not the source ids, which differ between two
 * scrapes of the same process. The output is cut out of cur with
 * pprof_profile_subset (the changed samples, new values, only the objects
 * they use, no re-interning), so a scrape costs one hashing pass over cur
 * and a copy of what changed.
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

/* ---- stack keys ---------------------------------------------------------------
 * One-shot XXH3 over a scratch buffer: first a hash per mapping, function
 * and location of the profile (by position, each computed once), then per
 * sample the hashes of its locations and its labels. */

struct hasher {
	const struct pprof_profile *p;
	XXH128_hash_t *map, *fn, *loc; /* by position */
	struct buf key;
};

static void hasher_release(struct hasher *h)
{
	free(h->map);
	buf_free(&h->key);
}

static int key_str(struct buf *k, const char *s)
{
	return buf_append(k, s, strlen(s) + 1);
}

static int key_u64(struct buf *k, uint64_t v)
{
	return buf_append(k, &v, sizeof(v));
}

static XXH128_hash_t key_digest(const struct buf *k)
{
	return XXH3_128bits(k->data, k->len);
}

static int hasher_init(struct hasher *h, const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct buf *k = &h->key;
	int rc = 0;

	h->p = p;
	buf_init(k);
	h->map = malloc((m->n_mapping + m->n_function + m->n_location + 1) * sizeof(*h->map));
	if (!h->map || buf_reserve(k, 256) < 0)
		return -ENOMEM;
	h->fn = h->map + m->n_mapping;
	h->loc = h->fn + m->n_function;
	for (size_t i = 0; i < m->n_mapping && rc == 0; i++) {
		const pprof_mapping_msg *mp = m->mapping[i];
		buf_reset(k);
		rc = key_u64(k, mp->memory_start) || key_u64(k, mp->memory_limit) ||
		     key_u64(k, mp->file_offset) || key_str(k, pprof_string(p, mp->filename)) ||
		     key_str(k, pprof_string(p, mp->build_id)) ||
		     key_u64(k, (uint64_t)mp->has_functions | (uint64_t)mp->has_filenames << 1 |
				    (uint64_t)mp->has_line_numbers << 2 |
				    (uint64_t)mp->has_inline_frames << 3);
		h->map[i] = key_digest(k);
	}
	for (size_t i = 0; i < m->n_function && rc == 0; i++) {
		const pprof_function_msg *f = m->function[i];
		buf_reset(k);
		rc = key_str(k, pprof_string(p, f->name)) ||
		     key_str(k, pprof_string(p, f->system_name)) ||
		     key_str(k, pprof_string(p, f->filename)) ||
		     key_u64(k, (uint64_t)f->start_line);
		h->fn[i] = key_digest(k);
	}
	for (size_t i = 0; i < m->n_location && rc == 0; i++) {
		const pprof_location_msg *l = m->location[i];
		size_t mp = l->mapping_id ? pprof_mapping_pos(p, l->mapping_id) : SIZE_MAX;
		buf_reset(k);
		rc = mp == SIZE_MAX ? key_u64(k, UINT64_MAX)
				    : buf_append(k, &h->map[mp], sizeof(h->map[mp]));
		rc = rc || key_u64(k, l->address) || key_u64(k, l->n_line);
		for (size_t j = 0; j < l->n_line && rc == 0; j++) {
			size_t fp = pprof_function_pos(p, l->line[j]->function_id);
			if (fp == SIZE_MAX)
				return -EINVAL;
			rc = buf_append(k, &h->fn[fp], sizeof(h->fn[fp])) ||
			     key_u64(k, (uint64_t)l->line[j]->line) ||
			     key_u64(k, (uint64_t)l->line[j]->column);
		}
		h->loc[i] = key_digest(k);
	}
	return rc ? -ENOMEM : 0;
}

static int sample_key(struct hasher *h, const pprof_sample_msg *s, XXH128_hash_t *out)
{
	const struct pprof_profile *p = h->p;
	struct buf *k = &h->key;
	int rc = 0;

	buf_reset(k);
	if (buf_reserve(k, (s->n_location_id + 1) * sizeof(XXH128_hash_t)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_location_id; i++) {
		size_t lp = pprof_location_pos(p, s->location_id[i]);
		if (lp == SIZE_MAX)
			return -EINVAL;
		memcpy(k->data + k->len, &h->loc[lp], sizeof(XXH128_hash_t));
		k->len += sizeof(XXH128_hash_t);
	}
	rc = key_u64(k, UINT64_MAX); /* end of stack */
	for (size_t i = 0; i < s->n_label && rc == 0; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		rc = key_str(k, pprof_string(p, l->key)) || key_u64(k, l->str ? 1 : 0) ||
		     key_str(k, l->str ? pprof_string(p, l->str) : "") ||
		     key_u64(k, (uint64_t)l->num) ||
		     key_str(k, l->num_unit ? pprof_string(p, l->num_unit) : "");
	}
	if (rc)
		return -ENOMEM;
	*out = key_digest(k);
	return 0;
}

/* Groups the samples of p (types map[0..n)) by key into a new baseline;
 * rep[i] (when rep is not NULL) is the position in p of the first sample of
 * key i. */
static int group(const struct pprof_profile *p, const size_t *map, size_t n,
		 struct scrape_baseline **out, size_t **rep)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct scrape_baseline *b = calloc(1, sizeof(*b));
	struct hasher h = {0};
	size_t *r = NULL;
	int rc = 0;

	*out = NULL;
	if (rep)
		*rep = NULL;
	size_t cap = m->n_sample ? m->n_sample : 1;
	if (!b || !(b->keys = htab_new(cap)) || !(b->types = calloc(n + 1, sizeof(char *))) ||
	    !(b->units = calloc(n + 1, sizeof(char *))) ||
	    !(b->values = malloc(cap * n * sizeof(*b->values))) ||
	    !(b->key_of = malloc(cap * sizeof(*b->key_of))) ||
	    (rep && !(r = malloc(cap * sizeof(*r))))) {
		rc = -ENOMEM;
		goto done;
	}
	b->cap = cap;
	b->n_types = n;
	b->time_nanos = m->time_nanos;
	for (size_t t = 0; t < n; t++)
		if (!(b->types[t] = strdup(pprof_string(p, m->sample_type[map[t]]->type))) ||
		    !(b->units[t] = strdup(pprof_string(p, m->sample_type[map[t]]->unit)))) {
			rc = -ENOMEM;
			goto done;
		}
	if ((rc = hasher_init(&h, p)) < 0)
		goto done;
	for (size_t i = 0; i < m->n_sample && rc == 0; i++) {
		const pprof_sample_msg *s = m->sample[i];
		XXH128_hash_t key;
		if ((rc = sample_key(&h, s, &key)) < 0)
			break;
		uint64_t ix = b->n_keys;
		int found = htab_intern(b->keys, &key, sizeof(key), &ix);
		if (found < 0) {
			rc = -ENOMEM;
			break;
		}
		if (!found) { /* at most one key per sample: cap is enough */
			memset(&b->values[ix * n], 0, n * sizeof(int64_t));
			b->key_of[ix] = key;
			if (r)
				r[ix] = i;
			b->n_keys++;
		}
		for (size_t t = 0; t < n; t++)
			b->values[ix * n + t] += s->value[map[t]];
	}
done:
	hasher_release(&h);
	if (rc) {
		scrape_baseline_free(b);
		free(r);
		return rc;
	}
	*out = b;
	if (rep)
		*rep = r;
	return 0;
}

int scrape_baseline_new(const struct pprof_profile *p, const size_t *idx, size_t n,
			struct scrape_baseline **out, struct kiln_error *err)
{
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "baseline over %zu sample types", n);
	int rc = group(p, idx, n, out, NULL);
	return rc < 0 ? kiln_error_set(err, -rc, "baseline: %s", strerror(-rc)) : 0;
}

/* cur's samples whose selected values are not all zero, with those values:
 * a projection, and the delta when there is no usable baseline. */
static int whole(const struct pprof_profile *cur, const size_t *idx, size_t n,
		 struct pprof_profile **out, struct kiln_error *err)
{
	const pprof_msg *m = pprof_profile_msg(cur);
	size_t *keep = malloc((m->n_sample + 1) * sizeof(*keep));
	int64_t *v = malloc((m->n_sample * n + 1) * sizeof(*v));
	size_t k = 0;
	int rc;

	if (!keep || !v) {
		rc = kiln_error_set(err, ENOMEM, "delta: out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->n_sample; i++) {
		bool any = false;
		for (size_t t = 0; t < n; t++) {
			v[k * n + t] = m->sample[i]->value[idx[t]];
			any = any || v[k * n + t] != 0;
		}
		if (any)
			keep[k++] = i;
	}
	rc = pprof_profile_subset(cur, idx, n, keep, v, k, m->time_nanos, m->duration_nanos, out,
				  err);
out:
	free(keep);
	free(v);
	return rc;
}

int scrape_delta_next(const struct scrape_baseline *prev, const struct pprof_profile *cur,
		      const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		      struct scrape_baseline **next, struct kiln_error *err)
{
	const pprof_msg *cm = pprof_profile_msg(cur);
	struct scrape_baseline *nb = NULL;
	size_t *rep = NULL, *keep = NULL;
	int64_t *v = NULL;
	bool *seen = NULL;
	int rc;

	*out = NULL;
	*reset = false;
	if (next)
		*next = NULL;
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "delta over %zu sample types", n);
	if (prev && prev->n_types != n)
		prev = NULL, *reset = true; /* the sample types changed: a new process */
	for (size_t k = 0; prev && k < n; k++)
		if (strcmp(prev->types[k], pprof_string(cur, cm->sample_type[idx[k]]->type)) ||
		    strcmp(prev->units[k], pprof_string(cur, cm->sample_type[idx[k]]->unit)))
			prev = NULL, *reset = true;
	if (!prev && !next) /* a projection (the gauge types): no grouping needed */
		return whole(cur, idx, n, out, err);
	if ((rc = group(cur, idx, n, &nb, &rep)) < 0) {
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
		rc = whole(cur, idx, n, out, err);
		goto done;
	}
	int64_t duration = cm->duration_nanos;
	if (prev->time_nanos && cm->time_nanos)
		duration = cm->time_nanos - prev->time_nanos;
	if (!(keep = malloc((nb->n_keys + 1) * sizeof(*keep))) ||
	    !(v = malloc((nb->n_keys * n + 1) * sizeof(*v)))) {
		rc = kiln_error_set(err, ENOMEM, "delta: out of memory");
		goto done;
	}
	/* The changed samples, in order of first appearance in cur. */
	size_t k = 0;
	for (size_t ci = 0; ci < nb->n_keys; ci++) {
		uint64_t pi;
		bool in_prev = htab_get(prev->keys, &nb->key_of[ci], sizeof(XXH128_hash_t), &pi);
		bool any = false;
		for (size_t t = 0; t < n; t++) {
			v[k * n + t] =
			    nb->values[ci * n + t] - (in_prev ? prev->values[pi * n + t] : 0);
			any = any || v[k * n + t] != 0;
		}
		if (any)
			keep[k++] = rep[ci];
	}
	rc = pprof_profile_subset(cur, idx, n, keep, v, k, cm->time_nanos, duration, out, err);
done:
	free(seen);
	free(rep);
	free(keep);
	free(v);
	if (rc == 0 && next)
		*next = nb;
	else
		scrape_baseline_free(nb);
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
