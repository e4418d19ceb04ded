/*
 * rcache.h — the result cache of one object (a symfile): address -> the
 * frames resolved for it, the warm path of every lookup (one hash probe).
 * Internal to src/symbols; rcache.c grows and fills it, the lookups are
 * inline here (they are the whole of a warm lookup).
 */
#ifndef KILN_SYMBOLS_RCACHE_H
#define KILN_SYMBOLS_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/symbols.h"

struct arena;

/* A result cache value is one of two kinds, told apart by the low bit of
 * its pointer (both are at least 8-byte aligned):
 *   struct cached (bit clear): the frames, copied;
 *   struct cached_ref (bit set): what the frames are made from again — the
 *     innermost node of the address's segment in its CU index, and the
 *     line row's file and line. Nearly every result of a DWARF file is
 *     one; at 24 bytes against 48 or more for copied frames, the cold
 *     pass writes half the memory (kiln's binary: a megabyte of fresh
 *     arena that was half its arena). */
struct cached {
	uint32_t nframes;
	struct symbols_frame frames[];
};

struct cu_index;

struct cached_ref {
	const struct cu_index *idx;
	const char *file;
	int32_t node;
	int32_t line;
};

#define CACHED_REF ((uintptr_t)1)

/* The result cache: open addressing on the address, linear probing, at
 * most half full. It is looked up once per address of every batch, so it
 * must cost less than the DWARF reading it saves: no hashing or copying of
 * key bytes as a generic htab does. The keys (address + 1) are an array of
 * their own, apart from the values: a cold lookup misses the cache, and a
 * probe then touches one cache line of 8 keys rather than of 4 whole
 * slots. Which slots are in use is a bitmap (fresh zeroed memory is an
 * empty table; 8 KiB for 64k slots: it stays in cache): an address not
 * cached ends its probe at an empty slot, and in a table at most half full
 * most first slots are empty, so most cold lookups never touch the keys,
 * whose cache miss would otherwise dominate a lookup. Address UINT64_MAX
 * is never cached. */
struct rcache {
	uint64_t *keys;	  /* [cap], then the values and the bitmap: one mapping, populated */
	uintptr_t *vals;  /* [cap]: struct cached *, or struct cached_ref * | CACHED_REF */
	uint64_t *used;	  /* [cap / 64]: bit i set when keys[i] is */
	size_t cap, n;	  /* cap: a power of two */
	unsigned shift;	  /* 64 - log2(cap): the hash is the product's top bits */
	size_t first_cap; /* the first table's; 0: 4096 */
	size_t map_size;  /* of the mapping keys starts; 0: in an arena */
};

void rcache_free(struct rcache *r);

/* Makes r's first table (r->first_cap slots) in arena, which outlives r:
 * the table then shares the huge pages of a large file's arena instead of
 * taking a 2 MiB page of its own, half of it unused and all of it cleared
 * by the kernel. Without it (out of memory) the table is made on the first
 * insertion, as for other files. */
void rcache_init_in(struct rcache *r, struct arena *arena);

/* Forgets every entry (the table stays). */
void rcache_clear(struct rcache *r);

/* Caches c for addr (not cached before). slot: where rcache_get's probe
 * for addr ended, with nothing put since (SIZE_MAX: unknown), which saves
 * probing again. -ENOMEM when the table cannot grow (then not cached). */
int rcache_put(struct rcache *r, uint64_t addr, uintptr_t c, size_t slot);

static inline bool rcache_used(const struct rcache *r, size_t i)
{
	return r->used[i / 64] & ((uint64_t)1 << (i % 64));
}

/* The slot holding key, or the empty slot where its probe ends. */
static inline size_t rcache_slot(const struct rcache *r, uint64_t key)
{
	/* Fibonacci hashing: the top bits of the product (its middle bits,
	 * taken before, clustered a binary's addresses: 7x the probes). */
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> r->shift);

	while (rcache_used(r, i) && r->keys[i] != key)
		i = (i + 1) & (r->cap - 1);
	return i;
}

/* addr's value (0: not cached). When not cached, *slot is the empty slot
 * its probe ended at (SIZE_MAX: none), for rcache_put. */
static inline uintptr_t rcache_get(const struct rcache *r, uint64_t addr, size_t *slot)
{
	size_t i;

	*slot = SIZE_MAX;
	if (!r->cap || addr == UINT64_MAX)
		return 0;
	i = rcache_slot(r, addr + 1);
	if (rcache_used(r, i))
		return r->vals[i];
	*slot = i;
	/* Not cached: rcache_put will most likely write this slot once the
	 * address is resolved. Its key and value lines (misses in a cold
	 * run: the table is a megabyte) start loading now, overlapping the
	 * resolution's own misses rather than adding two after them. */
	__builtin_prefetch(&r->keys[i], 1);
	__builtin_prefetch(&r->vals[i], 1);
	return 0;
}

#endif
