/*
 * htab.c — open-addressing hash table (see htab.h).
 *
 * Invariants: cap is a power of two; count <= cap * 3 / 4 after every insert;
 * a slot is empty iff its key pointer is NULL (keys of length 0 point at a
 * static byte so that they are still non-NULL). There is no delete, so linear
 * probing needs no tombstones.
 */
#include "common/htab.h"

#include "common/arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct htab_slot {
	uint64_t hash;
	const void *key;
	size_t len;
	uint64_t value;
};

struct htab {
	struct htab_slot *slots;
	size_t cap;
	size_t count;
	struct arena *keys;
};

static const unsigned char empty_key;

uint64_t htab_hash(const void *key, size_t len)
{
	return XXH3_64bits(key, len);
}

struct htab *htab_new(size_t hint)
{
	struct htab *h = calloc(1, sizeof(*h));
	size_t cap = 16;

	if (!h)
		return NULL;
	while (cap * 3 / 4 < hint)
		cap *= 2;
	h->slots = calloc(cap, sizeof(*h->slots));
	/* Keys in an arena sized like the table: a 64 KiB first chunk for a
	 * table meant for a handful of keys made every small table (the
	 * agent builds a few per process per window) a large malloc and page
	 * faults; a small first chunk doubles as the table grows. */
	h->keys = arena_new(cap >= 512 ? 0 : cap * 128);
	if (!h->slots || !h->keys) {
		htab_free(h);
		return NULL;
	}
	h->cap = cap;
	return h;
}

void htab_free(struct htab *h)
{
	if (!h)
		return;
	free(h->slots);
	arena_free(h->keys);
	free(h);
}

void htab_clear(struct htab *h, size_t max_keys)
{
	size_t cap = 16;

	while (cap * 3 / 4 < max_keys)
		cap *= 2;
	arena_reset(h->keys);
	h->count = 0;
	if (h->cap > cap) {
		struct htab_slot *small = calloc(cap, sizeof(*small));

		if (small) {
			free(h->slots);
			h->slots = small;
			h->cap = cap;
			return;
		}
	}
	memset(h->slots, 0, h->cap * sizeof(*h->slots));
}

static struct htab_slot *find_slot(const struct htab *h, uint64_t hash, const void *key, size_t len)
{
	size_t mask = h->cap - 1;
	size_t i = (size_t)hash & mask;

	for (;;) {
		struct htab_slot *s = &h->slots[i];
		if (!s->key)
			return s;
		if (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
		i = (i + 1) & mask;
	}
}

static int resize(struct htab *h, size_t cap)
{
	struct htab_slot *old = h->slots;
	size_t old_cap = h->cap, i;
	struct htab_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	mem_populate(slots, cap * sizeof(*slots));
	h->slots = slots;
	h->cap = cap;
	for (i = 0; i < old_cap; i++) {
		if (old[i].key)
			*find_slot(h, old[i].hash, old[i].key, old[i].len) = old[i];
	}
	free(old);
	return 0;
}

static int grow(struct htab *h)
{
	return resize(h, h->cap * 2);
}

int htab_reserve(struct htab *h, size_t n)
{
	size_t cap = h->cap;

	if (n > SIZE_MAX / 4 - h->count)
		return -ENOMEM;
	while ((h->count + n) > cap * 3 / 4)
		cap *= 2;
	return cap == h->cap ? 0 : resize(h, cap);
}

static int insert(struct htab *h, uint64_t hash, const void *key, size_t len, uint64_t value,
		  struct htab_slot **out)
{
	struct htab_slot *s;
	void *copy;

	if ((h->count + 1) > h->cap * 3 / 4) {
		int rc = grow(h);
		if (rc)
			return rc;
	}
	s = find_slot(h, hash, key, len);
	if (len) {
		copy = arena_alloc(h->keys, len);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, key, len);
	} else {
		copy = (void *)&empty_key;
	}
	s->hash = hash;
	s->key = copy;
	s->len = len;
	s->value = value;
	h->count++;
	*out = s;
	return 0;
}

int htab_intern(struct htab *h, const void *key, size_t len, uint64_t *value)
{
	uint64_t hash = htab_hash(key, len);
	struct htab_slot *s = find_slot(h, hash, key, len);

	if (s->key) {
		*value = s->value;
		return 1;
	}
	return insert(h, hash, key, len, *value, &s);
}

int htab_put(struct htab *h, const void *key, size_t len, uint64_t value)
{
	uint64_t hash = htab_hash(key, len);
	struct htab_slot *s = find_slot(h, hash, key, len);

	if (s->key) {
		s->value = value;
		return 0;
	}
	return insert(h, hash, key, len, value, &s);
}

bool htab_get(const struct htab *h, const void *key, size_t len, uint64_t *value)
{
	struct htab_slot *s = find_slot(h, htab_hash(key, len), key, len);

	if (!s->key)
		return false;
	if (value)
		*value = s->value;
	return true;
}

uint64_t *htab_lookup(struct htab *h, const void *key, size_t len)
{
	struct htab_slot *s = find_slot(h, htab_hash(key, len), key, len);

	return s->key ? &s->value : NULL;
}

uint64_t *htab_lookup_hashed(struct htab *h, uint64_t hash, const void *key, size_t len)
{
	struct htab_slot *s = find_slot(h, hash, key, len);

	return s->key ? &s->value : NULL;
}

const void *htab_insert_hashed(struct htab *h, uint64_t hash, const void *key, size_t len,
			       uint64_t value)
{
	struct htab_slot *s;

	return insert(h, hash, key, len, value, &s) ? NULL : s->key;
}

size_t htab_count(const struct htab *h)
{
	return h->count;
}

bool htab_next(const struct htab *h, size_t *iter, const void **key, size_t *len, uint64_t *value)
{
	while (*iter < h->cap) {
		const struct htab_slot *s = &h->slots[(*iter)++];
		if (!s->key)
			continue;
		if (key)
			*key = s->key;
		if (len)
			*len = s->len;
		if (value)
			*value = s->value;
		return true;
	}
	return false;
}
