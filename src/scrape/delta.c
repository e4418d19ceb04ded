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

#include "scrape/scrape.h"

/* ---- baselines: sample identity without a builder ---------------------------
 * A baseline is what a delta needs of the previous scrape: for every sample
 * key (a 128-bit XXH3 of its resolved frames — mapping, address, lines with
 * function names, files and line numbers — and of its labels, i.e. the
 * builder's notion of "same stack") the summed values of the selected
 * types, plus those types' names and the profile's time. It is a few bytes
 * per sample instead of a whole decoded profile. The keys are found through
 * a small open-addressing table of their indices (the keys are hashes
 * already: no copies, no rehashing), all in one allocation. */

struct scrape_baseline {
	XXH128_hash_t *key_of; /* index -> key */
	int64_t *values;       /* n_keys x n_types */
	uint32_t *slots;       /* index + 1 by key (0 = empty); n_slots is a power of 2 */
	size_t n_slots, n_keys, cap, n_types;
	size_t n_nonzero; /* keys with a value that is not 0 */
	char **types, **units;
	int64_t time_nanos;
};

void scrape_baseline_free(struct scrape_baseline *b)
{
	if (!b)
		return;
	free(b->key_of); /* with values and slots */
	for (size_t i = 0; b->types && i < b->n_types; i++) {
		free(b->types[i]);
		free(b->units[i]);
	}
	free(b->types);
	free(b->units);
	free(b);
}

static bool key_eq(XXH128_hash_t a, XXH128_hash_t b)
{
	return a.low64 == b.low64 && a.high64 == b.high64;
}

/* The slot of key: where it is, or the empty slot where it goes. */
static size_t key_slot(const struct scrape_baseline *b, XXH128_hash_t key)
{
	size_t mask = b->n_slots - 1, i = (size_t)key.low64 & mask;
	while (b->slots[i] && !key_eq(b->key_of[b->slots[i] - 1], key))
		i = (i + 1) & mask;
	return i;
}

/* Index of key in b, or SIZE_MAX. */
static size_t key_find(const struct scrape_baseline *b, XXH128_hash_t key)
{
	size_t i = key_slot(b, key);
	return b->slots[i] ? b->slots[i] - 1 : SIZE_MAX;
}

/* ---- stack keys ---------------------------------------------------------------
 * One-shot XXH3 over a scratch buffer: first a 64-bit hash per mapping,
 * function and location of the profile (by position, each computed once),
 * then per sample the 128-bit key over the hashes of its locations and its
 * labels. Two stacks share a key only if the 128-bit hashes collide or two
 * of the profile's locations (or functions, mappings, label strings) share
 * a 64-bit hash; 64 bits per frame halve what a sample's key hashes, which
 * takes it under XXH3's 128-byte step for typical Go stacks. Each key is
 * laid out with one size check (the scratch only grows), not one per field. */

struct hasher {
	const struct pprof_profile *p;
	uint64_t *map, *fn, *loc; /* by position */
	/* Location id -> the location's hash (0 = none, or a hash that
	 * happens to be 0: both resolved through pprof_location_pos) when
	 * the ids are dense, as every producer numbers them: the samples'
	 * location ids (most of a profile's references) then take one load
	 * each, not a call to pprof_location_pos and a second lookup. */
	uint64_t *loc_by_id;
	size_t n_loc_by_id;
	/* By string index: the hash of the string, computed when a label
	 * first uses it (str_done[i]); labels repeat a few strings over
	 * every sample (Go's allocs samples: the key "bytes"), which then
	 * are not measured and copied into each sample's key again. */
	uint64_t *str_h;
	uint8_t *str_done;
	size_t n_str;
	/* The strings of the last label hashed (key, str, num_unit indices)
	 * and their combined hash: consecutive labels mostly have the same. */
	int64_t last_key, last_str, last_unit;
	uint64_t last_h;
	bool has_last;
	uint8_t *key;
	size_t cap;
};

static void hasher_release(struct hasher *h)
{
	free(h->map);
	free(h->loc_by_id);
	free(h->str_h); /* with str_done */
	free(h->key);
}

/* The hash of string idx of the profile ("" when out of range, as
 * pprof_string). */
static uint64_t hasher_str(struct hasher *h, int64_t idx)
{
	if (idx < 0 || (uint64_t)idx >= h->n_str)
		idx = 0;
	if (!h->str_done[idx]) {
		const char *s = pprof_string(h->p, idx);
		h->str_h[idx] = XXH3_64bits(s, strlen(s));
		h->str_done[idx] = 1;
	}
	return h->str_h[idx];
}

/* The hash of location id into *out; false when p has no such location. */
static inline bool hasher_loc(const struct hasher *h, uint64_t id, uint64_t *out)
{
	if (id < h->n_loc_by_id && (*out = h->loc_by_id[id]) != 0)
		return true;
	size_t pos = pprof_location_pos(h->p, id);
	if (pos == SIZE_MAX)
		return false;
	*out = h->loc[pos];
	return true;
}

/* Room for n bytes of key; false on out-of-memory. */
static bool key_room(struct hasher *h, size_t n)
{
	if (n <= h->cap)
		return true;
	size_t cap = h->cap ? h->cap : 256;
	while (cap < n)
		cap *= 2;
	uint8_t *k = realloc(h->key, cap);
	if (!k)
		return false;
	h->key = k;
	h->cap = cap;
	return true;
}

static uint8_t *put_u64(uint8_t *k, uint64_t v)
{
	memcpy(k, &v, sizeof(v));
	return k + sizeof(v);
}

/* Copies s with its NUL (len = strlen(s)). */
static uint8_t *put_str(uint8_t *k, const char *s, size_t len)
{
	memcpy(k, s, len + 1);
	return k + len + 1;
}

static int hasher_init(struct hasher *h, const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	uint8_t *k;

	h->p = p;
	h->map = malloc((m->n_mapping + m->n_function + m->n_location + 1) * sizeof(*h->map));
	h->n_str = m->n_string_table ? m->n_string_table : 1;
	h->str_h = calloc(h->n_str, sizeof(*h->str_h) + 1);
	if (!h->map || !h->str_h || !key_room(h, 256))
		return -ENOMEM;
	h->str_done = (uint8_t *)(h->str_h + h->n_str);
	h->fn = h->map + m->n_mapping;
	h->loc = h->fn + m->n_function;
	for (size_t i = 0; i < m->n_mapping; i++) {
		const pprof_mapping_msg *mp = m->mapping[i];
		const char *file = pprof_string(p, mp->filename),
			   *id = pprof_string(p, mp->build_id);
		size_t fl = strlen(file), il = strlen(id);
		if (!key_room(h, 4 * 8 + fl + il + 2))
			return -ENOMEM;
		k = put_u64(h->key, mp->memory_start);
		k = put_u64(k, mp->memory_limit);
		k = put_u64(k, mp->file_offset);
		k = put_str(k, file, fl);
		k = put_str(k, id, il);
		k = put_u64(k, (uint64_t)mp->has_functions | (uint64_t)mp->has_filenames << 1 |
				   (uint64_t)mp->has_line_numbers << 2 |
				   (uint64_t)mp->has_inline_frames << 3);
		h->map[i] = XXH3_64bits(h->key, (size_t)(k - h->key));
	}
	for (size_t i = 0; i < m->n_function; i++) {
		const pprof_function_msg *f = m->function[i];
		const char *name = pprof_string(p, f->name), *sys = pprof_string(p, f->system_name),
			   *file = pprof_string(p, f->filename);
		size_t nl = strlen(name), sl = strlen(sys), fl = strlen(file);
		if (!key_room(h, nl + sl + fl + 3 + 8))
			return -ENOMEM;
		k = put_str(h->key, name, nl);
		k = put_str(k, sys, sl);
		k = put_str(k, file, fl);
		k = put_u64(k, (uint64_t)f->start_line);
		h->fn[i] = XXH3_64bits(h->key, (size_t)(k - h->key));
	}
	for (size_t i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		size_t mp = l->mapping_id ? pprof_mapping_pos(p, l->mapping_id) : SIZE_MAX;
		if (!key_room(h, 3 * 8 + l->n_line * 24))
			return -ENOMEM;
		if (mp == SIZE_MAX)
			k = put_u64(h->key, UINT64_MAX);
		else
			k = put_u64(h->key, h->map[mp]);
		k = put_u64(k, l->address);
		k = put_u64(k, l->n_line);
		for (size_t j = 0; j < l->n_line; j++) {
			size_t fp = pprof_function_pos(p, l->line[j]->function_id);
			if (fp == SIZE_MAX)
				return -EINVAL;
			k = put_u64(k, h->fn[fp]);
			k = put_u64(k, (uint64_t)l->line[j]->line);
			k = put_u64(k, (uint64_t)l->line[j]->column);
		}
		h->loc[i] = XXH3_64bits(h->key, (size_t)(k - h->key));
	}
	uint64_t max_id = 0;
	for (size_t i = 0; i < m->n_location; i++)
		if (m->location[i]->id > max_id)
			max_id = m->location[i]->id;
	if (m->n_location && max_id <= 4 * (uint64_t)m->n_location + 1024) {
		if (!(h->loc_by_id = calloc(max_id + 1, sizeof(*h->loc_by_id))))
			return -ENOMEM;
		h->n_loc_by_id = max_id + 1;
		for (size_t i = 0; i < m->n_location; i++) /* ids are unique (validated) */
			h->loc_by_id[m->location[i]->id] = h->loc[i];
	}
	return 0;
}

/* The hash of a label's strings: key, whether str is set, str, num_unit. */
static uint64_t hasher_label(struct hasher *h, const Perftools__Profiles__Label *l)
{
	if (!h->has_last || l->key != h->last_key || l->str != h->last_str ||
	    l->num_unit != h->last_unit) {
		uint64_t part[4] = {hasher_str(h, l->key), l->str ? 1 : 0, hasher_str(h, l->str),
				    hasher_str(h, l->num_unit)};
		h->last_h = XXH3_64bits(part, sizeof(part));
		h->last_key = l->key;
		h->last_str = l->str;
		h->last_unit = l->num_unit;
		h->has_last = true;
	}
	return h->last_h;
}

/* A sample's key: the hashes of its locations, then per label the hash of
 * its strings and its number. */
static int sample_key(struct hasher *h, const pprof_sample_msg *s, XXH128_hash_t *out)
{
	size_t need = (s->n_location_id + 1 + 2 * s->n_label) * sizeof(uint64_t);

	if (!key_room(h, need))
		return -ENOMEM;
	uint8_t *k = h->key;
	for (size_t i = 0; i < s->n_location_id; i++) {
		uint64_t lh;
		if (!hasher_loc(h, s->location_id[i], &lh))
			return -EINVAL;
		k = put_u64(k, lh);
	}
	k = put_u64(k, UINT64_MAX); /* end of stack */
	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		k = put_u64(k, hasher_label(h, l));
		k = put_u64(k, (uint64_t)l->num);
	}
	*out = XXH3_128bits(h->key, (size_t)(k - h->key));
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
	size_t cap = m->n_sample ? m->n_sample : 1, slots = 16;
	while (slots < 2 * cap)
		slots *= 2;
	if (cap > UINT32_MAX - 1 || !b || !(b->types = calloc(n + 1, sizeof(char *))) ||
	    !(b->units = calloc(n + 1, sizeof(char *))) ||
	    !(b->key_of = malloc(cap * (sizeof(XXH128_hash_t) + n * sizeof(int64_t)) +
				 slots * sizeof(uint32_t))) ||
	    (rep && !(r = malloc(cap * sizeof(*r))))) {
		rc = -ENOMEM;
		goto done;
	}
	b->values = (int64_t *)(b->key_of + cap);
	b->slots = (uint32_t *)(b->values + cap * n);
	memset(b->slots, 0, slots * sizeof(uint32_t));
	b->n_slots = slots;
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
		size_t slot = key_slot(b, key), ix;
		if (b->slots[slot]) {
			ix = b->slots[slot] - 1;
		} else { /* at most one key per sample: cap is enough */
			ix = b->n_keys++;
			b->slots[slot] = (uint32_t)ix + 1;
			memset(&b->values[ix * n], 0, n * sizeof(int64_t));
			b->key_of[ix] = key;
			if (r)
				r[ix] = i;
		}
		for (size_t t = 0; t < n; t++)
			b->values[ix * n + t] =
			    (int64_t)((uint64_t)b->values[ix * n + t] + (uint64_t)s->value[map[t]]);
	}
	for (size_t i = 0; i < b->n_keys && rc == 0; i++)
		for (size_t t = 0; t < n; t++)
			if (b->values[i * n + t] != 0) {
				b->n_nonzero++;
				break;
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
	if (!prev) {
		rc = whole(cur, idx, n, out, err);
		goto done;
	}
	if (!(keep = malloc((nb->n_keys + 1) * sizeof(*keep))) ||
	    !(v = malloc((nb->n_keys * n + 1) * sizeof(*v)))) {
		rc = kiln_error_set(err, ENOMEM, "delta: out of memory");
		goto done;
	}
	/* One pass over cur's keys: the differences of the changed ones, in
	 * order of first appearance in cur. Every key of prev must still be
	 * there with values that did not go down; a key of prev that is
	 * missing with values went to zero. cur's keys are distinct, so each
	 * key of prev is matched at most once and counting the matched
	 * non-zero ones tells whether one is missing. */
	size_t k = 0, matched_nonzero = 0;
	for (size_t ci = 0; ci < nb->n_keys && !*reset; ci++) {
		size_t pi = key_find(prev, nb->key_of[ci]);
		bool any = false, prev_any = false;
		for (size_t t = 0; t < n; t++) {
			int64_t pv = pi == SIZE_MAX ? 0 : prev->values[pi * n + t];
			int64_t cv = nb->values[ci * n + t];
			if (cv < pv)
				*reset = true;
			prev_any = prev_any || pv != 0;
			v[k * n + t] = (int64_t)((uint64_t)cv - (uint64_t)pv);
			any = any || v[k * n + t] != 0;
		}
		matched_nonzero += prev_any;
		if (any)
			keep[k++] = rep[ci];
	}
	if (matched_nonzero < prev->n_nonzero)
		*reset = true;
	if (*reset) {
		rc = whole(cur, idx, n, out, err);
		goto done;
	}
	int64_t duration = cm->duration_nanos;
	if (prev->time_nanos && cm->time_nanos)
		duration = cm->time_nanos - prev->time_nanos;
	rc = pprof_profile_subset(cur, idx, n, keep, v, k, cm->time_nanos, duration, out, err);
done:
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
