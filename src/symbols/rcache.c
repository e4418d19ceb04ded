/*
 * rcache.c — the result cache of one object: address -> its frames (see
 * rcache.h). Above hugemem.c, which gives its tables their memory.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "common/arena.h"
#include "symbols/hugemem.h"
#include "symbols/rcache.h"

void rcache_free(struct rcache *r)
{
	if (r->cap && r->map_size)
		munmap(r->keys, r->map_size);
}

/* Makes r's first table (r->first_cap slots) in arena, which outlives r:
 * the table then shares the huge pages of a large file's arena instead of
 * taking a 2 MiB page of its own, half of it unused and all of it cleared
 * by the kernel. Without it (out of memory) the table is made on the first
 * insertion, as for other files. */
void rcache_init_in(struct rcache *r, struct arena *arena)
{
	size_t cap = r->first_cap, size = cap * (sizeof(*r->keys) + sizeof(*r->vals)) + cap / 8;
	uint64_t *keys = arena_alloc_shared(arena, size);

	if (!keys)
		return;
	r->keys = keys;
	r->vals = (uintptr_t *)(keys + cap);
	r->used = (uint64_t *)(r->vals + cap);
	memset(r->used, 0, cap / 8); /* every slot empty */
	r->cap = cap;
	r->shift = 64u - (unsigned)__builtin_ctzll(cap);
	r->map_size = 0;
}

/* Forgets every entry (the table stays). */
void rcache_clear(struct rcache *r)
{
	if (r->cap)
		memset(r->used, 0, r->cap / 8);
	r->n = 0;
}

/* Caches c for addr (not cached before). slot: where rcache_get's probe
 * for addr ended, with nothing put since (SIZE_MAX: unknown), which saves
 * probing again. */
int rcache_put(struct rcache *r, uint64_t addr, uintptr_t c, size_t slot)
{
	size_t i;

	if (addr == UINT64_MAX)
		return 0;
	if (2 * (r->n + 1) > r->cap) {
		struct rcache g = {.cap = r->cap	 ? r->cap * 2
					  : r->first_cap ? r->first_cap
							 : 4096,
				   .first_cap = r->first_cap};

		/* Fresh anonymous memory is zero: every slot empty. Faulted
		 * in at once, not page by page (a third of the insertions'
		 * cost was page faults); in huge pages from 1 MiB on. */
		g.shift = 64u - (unsigned)__builtin_ctzll(g.cap);
		g.map_size = g.cap * (sizeof(*g.keys) + sizeof(*g.vals)) + g.cap / 8;
		if (g.map_size >= ((size_t)1 << 20))
			g.keys = hugemem_alloc(&g.map_size, true);
		else
			g.keys = hugemem_alloc_big(g.map_size);
		if (!g.keys)
			return -ENOMEM;
		g.vals = (uintptr_t *)(g.keys + g.cap);
		g.used = (uint64_t *)(g.vals + g.cap);
		for (size_t k = 0; k < r->cap; k++)
			if (rcache_used(r, k)) {
				size_t j = rcache_slot(&g, r->keys[k]);

				g.keys[j] = r->keys[k];
				g.vals[j] = r->vals[k];
				g.used[j / 64] |= (uint64_t)1 << (j % 64);
			}
		g.n = r->n;
		rcache_free(r);
		*r = g;
		slot = SIZE_MAX;
	}
	i = slot != SIZE_MAX ? slot : rcache_slot(r, addr + 1);
	if (!rcache_used(r, i)) {
		r->n++;
		r->used[i / 64] |= (uint64_t)1 << (i % 64);
	}
	r->keys[i] = addr + 1;
	r->vals[i] = c;
	return 0;
}
