/*
 * unwind_pool.h — the kernel's row pool of the table unwinder, from user
 * space: chunks (BPF arrays of UNWIND_CHUNK_ROWS rows, mmapped here so
 * that an upload is a memcpy) created on demand and put into the
 * unwind_chunks array of maps, up to a cap; and the allocator of row
 * slots inside them (unwind_row.h, "paged storage").
 *
 * An allocation never crosses a chunk (the BPF search indexes one inner
 * map). Freed slots are quarantined for QUARANTINE_NS before reuse: a
 * walk that read a process's mappings just before they were dropped may
 * still be reading the old rows, and each free bumps the BPF program's
 * unwind_pool_gen, which its per-CPU rule caches check. Chunks are never
 * given back: the pool only grows, to its cap; the owner (unwinder.c)
 * evicts tables when a full pool has no room.
 *
 * A chunk is mapped into the agent only while it is written or read
 * (unwind_pool_at maps it, unwind_pool_unmap drops every mapping): the
 * kernel maps a BPF array's pages all at once, so chunks left mapped
 * would count the whole pool (up to 32 MiB) in the agent's RSS.
 *
 * Private to the unwinder: not thread-safe, one owner.
 */
#ifndef KILN_AGENT_UNWIND_POOL_H
#define KILN_AGENT_UNWIND_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include <stdint.h>

#include "unwind/unwind_row.h"

struct unwind_extent {
	uint32_t slot, n;
	uint64_t freed_ns; /* quarantined until freed_ns + QUARANTINE_NS */
};

struct unwind_pool {
	int outer_fd;	     /* unwind_chunks (-1: a pool in memory, for tests) */
	uint32_t max_chunks; /* the cap */
	uint32_t nchunks;
	struct unwind_row *chunk[UNWIND_MAX_CHUNKS]; /* mmapped (NULL: not now), or allocated */
	int fd[UNWIND_MAX_CHUNKS];		     /* the chunks' maps (-1: in memory) */
	struct unwind_extent *free_list;	     /* sorted by slot, coalesced per chunk */
	size_t nfree, capfree;
	struct unwind_extent *quarantine;
	size_t nquar, capquar;
	volatile uint32_t *gen; /* unwind_pool_gen (NULL: no BPF program) */
	uint64_t used;		/* slots allocated (quarantined ones included) */
};

/* outer_fd: the array of maps the chunks go into; -1 for chunks in
 * plain memory. max_chunks is clamped to UNWIND_MAX_CHUNKS. */
/* gen: the BPF program's unwind_pool_gen (NULL in tests). */
void unwind_pool_init(struct unwind_pool *p, int outer_fd, uint32_t max_chunks,
		      volatile uint32_t *gen);
/* Unmaps and closes every chunk (the kernel keeps the maps alive for as
 * long as the array of maps holds them). NULL-safe. */
void unwind_pool_free(struct unwind_pool *p);
/* n (1..UNWIND_CHUNK_ROWS) slots in one chunk, a new chunk if none has
 * room and the cap allows. False when the pool is full (or the kernel
 * refused a new chunk). */
bool unwind_pool_alloc(struct unwind_pool *p, uint32_t n, uint32_t *slot, uint64_t now);
/* Gives slots back, reusable after the quarantine. */
void unwind_pool_release(struct unwind_pool *p, uint32_t slot, uint32_t n, uint64_t now);
/* Gives back slots the kernel was never told about (a table whose upload
 * failed half-way): reusable at once. */
void unwind_pool_unalloc(struct unwind_pool *p, uint32_t slot, uint32_t n);
/* Slots that could still be allocated now: free ones plus the chunks the
 * cap still allows (an upper bound: a request must fit one chunk). */
uint64_t unwind_pool_room(struct unwind_pool *p, uint64_t now);
/* The row at slot (writable), or NULL outside the chunks. */
struct unwind_row *unwind_pool_at(struct unwind_pool *p, uint32_t slot);
/* Unmaps every chunk mapped since the last call (their rows stay in the
 * kernel; the next unwind_pool_at maps a chunk again). */
void unwind_pool_unmap(struct unwind_pool *p);
/* Bytes of map memory the chunks take. */
uint64_t unwind_pool_bytes(const struct unwind_pool *p);

#endif
