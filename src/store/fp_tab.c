/*
 * fp_tab.c — the store's one table keyed by a 128-bit content hash (an
 * XXH3-128 of the bytes that identify an object) mapping to a 32-bit id.
 * The metastore keys stacks by it (meta.fp_ix, written under meta.mu) and
 * a merge written as pprof (merge_pprof.c) deduplicates its strings,
 * mappings, functions, locations and samples with it.
 *
 * Open addressing with linear probing and the key inline, 96 of its bits
 * (the low half and 32 bits of the high half: with XXH3 the chance that
 * two of n distinct objects share them is about n^2 / 2^97, far below
 * that of a disk error), so that a slot is 16 bytes and a probe touches
 * one cache line; no copy of the hashed bytes is kept (a
 * generic htab keeps keys in an arena: two misses per lookup on the
 * hottest path of ingest). The home slot is the low bits of the key's low
 * half, already uniform as a hash output. The load factor stays at most
 * 1/2 so that probe runs stay short (3/4 for a dense table, whose memory
 * counts more); the table doubles from 1,024 slots.
 * Ids are stored plus one so that a zeroed slot is empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

static size_t fp_home(const struct fp_tab *t, uint64_t lo)
{
	return (size_t)lo & (t->cap - 1);
}

bool fp_tab_get(const struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t *id)
{
	if (!t->cap)
		return false;
	for (size_t i = fp_home(t, lo);; i = (i + 1) & (t->cap - 1)) {
		const struct fp_slot *s = &t->slots[i];

		if (!s->id1)
			return false;
		if (s->lo == lo && s->hi == (uint32_t)hi) {
			*id = s->id1 - 1;
			return true;
		}
	}
}

/* The slot holding (lo, hi), or the empty one where it would go. */
static struct fp_slot *fp_find(struct fp_tab *t, uint64_t lo, uint32_t hi)
{
	for (size_t i = fp_home(t, lo);; i = (i + 1) & (t->cap - 1)) {
		struct fp_slot *s = &t->slots[i];

		if (!s->id1 || (s->lo == lo && s->hi == hi))
			return s;
	}
}

/* Makes room for one more key; 0 or -ENOMEM. */
static int fp_reserve(struct fp_tab *t)
{
	if (t->dense ? (t->count + 1) * 4 <= t->cap * 3 : (t->count + 1) * 2 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct fp_tab n = {calloc(cap, sizeof(*n.slots)), cap, t->count, t->dense};

	if (!n.slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].id1)
			*fp_find(&n, t->slots[i].lo, t->slots[i].hi) = t->slots[i];
	free(t->slots);
	*t = n;
	return 0;
}

int fp_tab_put(struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t id)
{
	struct fp_slot *s;

	if (id == UINT32_MAX)
		return -ERANGE;
	if (fp_reserve(t))
		return -ENOMEM;
	s = fp_find(t, lo, (uint32_t)hi);
	if (!s->id1)
		t->count++;
	*s = (struct fp_slot){lo, (uint32_t)hi, id + 1};
	return 0;
}

int fp_tab_intern(struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t fresh, uint32_t *id)
{
	struct fp_slot *s;

	if (fresh == UINT32_MAX)
		return -ERANGE;
	if (fp_reserve(t))
		return -ENOMEM;
	s = fp_find(t, lo, (uint32_t)hi);
	if (s->id1) {
		*id = s->id1 - 1;
		return 1;
	}
	*s = (struct fp_slot){lo, (uint32_t)hi, fresh + 1};
	t->count++;
	*id = fresh;
	return 0;
}

void fp_tab_free(struct fp_tab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
