/*
 * unwind_pool.c — chunks of the kernel's row pool and the slot allocator
 * (see unwind_pool.h).
 */
#include "agent/unwind_pool.h"

#include "common/log.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define QUARANTINE_NS (2000ull * 1000000)
#define CHUNK_BYTES   ((size_t)UNWIND_CHUNK_ROWS * sizeof(struct unwind_row))

void unwind_pool_init(struct unwind_pool *p, int outer_fd, uint32_t max_chunks,
		      volatile uint32_t *gen)
{
	memset(p, 0, sizeof(*p));
	p->outer_fd = outer_fd;
	p->max_chunks = max_chunks < UNWIND_MAX_CHUNKS ? max_chunks : UNWIND_MAX_CHUNKS;
	p->gen = gen;
}

void unwind_pool_free(struct unwind_pool *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nchunks; i++) {
		if (p->outer_fd < 0) {
			free(p->chunk[i]);
			continue;
		}
		if (p->chunk[i])
			munmap(p->chunk[i], CHUNK_BYTES);
		close(p->fd[i]);
	}
	free(p->free_list);
	free(p->quarantine);
	memset(p, 0, sizeof(*p));
	p->outer_fd = -1;
}

static int extents_push(struct unwind_extent **v, size_t *n, size_t *cap, struct unwind_extent e)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct unwind_extent *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = e;
	return 0;
}

static bool same_chunk(uint32_t a, uint32_t b)
{
	return a >> UNWIND_CHUNK_SHIFT == b >> UNWIND_CHUNK_SHIFT;
}

/* Returns [slot, slot + n) to the free list, merging neighbours of the
 * same chunk. */
static int free_list_add(struct unwind_pool *p, uint32_t slot, uint32_t n)
{
	struct unwind_extent *f;
	size_t i = 0;
	int rc;

	if (p->gen) /* rules cached from these slots are stale from now */
		__atomic_store_n(p->gen, *p->gen + 1, __ATOMIC_RELEASE);

	while (i < p->nfree && p->free_list[i].slot < slot)
		i++;
	f = p->free_list;
	if (i > 0 && f[i - 1].slot + f[i - 1].n == slot && same_chunk(f[i - 1].slot, slot)) {
		f[i - 1].n += n;
		if (i < p->nfree && slot + n == f[i].slot && same_chunk(slot, f[i].slot)) {
			f[i - 1].n += f[i].n;
			memmove(&f[i], &f[i + 1], (p->nfree - i - 1) * sizeof(*f));
			p->nfree--;
		}
		return 0;
	}
	if (i < p->nfree && slot + n == f[i].slot && same_chunk(slot, f[i].slot)) {
		f[i].slot = slot;
		f[i].n += n;
		return 0;
	}
	rc = extents_push(&p->free_list, &p->nfree, &p->capfree, (struct unwind_extent){0});
	if (rc)
		return rc;
	f = p->free_list;
	memmove(&f[i + 1], &f[i], (p->nfree - 1 - i) * sizeof(*f));
	f[i] = (struct unwind_extent){.slot = slot, .n = n};
	return 0;
}

/* Moves quarantined slots whose time is up to the free list. */
static void quarantine_release(struct unwind_pool *p, uint64_t now)
{
	size_t out = 0;

	for (size_t i = 0; i < p->nquar; i++) {
		struct unwind_extent e = p->quarantine[i];

		if (now - e.freed_ns >= QUARANTINE_NS && free_list_add(p, e.slot, e.n) == 0) {
			p->used -= e.n;
			continue;
		}
		p->quarantine[out++] = e;
	}
	p->nquar = out;
}

static bool take_free(struct unwind_pool *p, uint32_t n, uint32_t *slot)
{
	for (size_t i = 0; i < p->nfree; i++) {
		struct unwind_extent *e = &p->free_list[i];

		if (e->n < n)
			continue;
		*slot = e->slot;
		e->slot += n;
		e->n -= n;
		if (e->n == 0) {
			memmove(e, e + 1, (p->nfree - i - 1) * sizeof(*e));
			p->nfree--;
		}
		p->used += n;
		return true;
	}
	return false;
}

/* A new chunk: a BPF array put into the array of maps and mmapped. */
static bool add_chunk(struct unwind_pool *p)
{
	uint32_t idx = p->nchunks;
	struct unwind_row *rows;
	int fd = -1;

	if (idx >= p->max_chunks)
		return false;
	if (p->outer_fd >= 0) {
		LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);

		fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(uint32_t),
				    CHUNK_BYTES, 1, &opts);
		if (fd < 0) {
			log_warn("unwind: a new table chunk was refused: %s", strerror(errno));
			return false;
		}
		if (bpf_map_update_elem(p->outer_fd, &idx, &fd, BPF_ANY) != 0) {
			log_warn("unwind: adding a table chunk: %s", strerror(errno));
			close(fd);
			return false;
		}
		/* Mapped when written (unwind_pool_at); the fd is kept for that. */
		rows = NULL;
	} else {
		rows = calloc(UNWIND_CHUNK_ROWS, sizeof(*rows));
		if (!rows)
			return false;
	}
	if (free_list_add(p, idx << UNWIND_CHUNK_SHIFT, UNWIND_CHUNK_ROWS) != 0) {
		/* unreachable in practice (a push of one extent); the chunk
		 * stays in the kernel unused */
		if (p->outer_fd < 0)
			free(rows);
		else
			close(fd);
		return false;
	}
	p->chunk[idx] = rows;
	p->fd[idx] = fd;
	p->nchunks++;
	return true;
}

bool unwind_pool_alloc(struct unwind_pool *p, uint32_t n, uint32_t *slot, uint64_t now)
{
	if (n == 0 || n > UNWIND_CHUNK_ROWS)
		return false;
	quarantine_release(p, now);
	if (take_free(p, n, slot))
		return true;
	return add_chunk(p) && take_free(p, n, slot);
}

void unwind_pool_release(struct unwind_pool *p, uint32_t slot, uint32_t n, uint64_t now)
{
	if (n == 0)
		return;
	if (extents_push(&p->quarantine, &p->nquar, &p->capquar,
			 (struct unwind_extent){.slot = slot, .n = n, .freed_ns = now}) != 0) {
		p->used -= n; /* lost to the pool, but never reused early */
	}
}

void unwind_pool_unalloc(struct unwind_pool *p, uint32_t slot, uint32_t n)
{
	if (n == 0)
		return;
	if (free_list_add(p, slot, n) == 0)
		p->used -= n;
	else
		unwind_pool_release(p, slot, n, 0); /* out of memory: the slow way */
}

uint64_t unwind_pool_room(struct unwind_pool *p, uint64_t now)
{
	uint64_t room = (uint64_t)(p->max_chunks - p->nchunks) * UNWIND_CHUNK_ROWS;

	quarantine_release(p, now);
	for (size_t i = 0; i < p->nfree; i++)
		room += p->free_list[i].n;
	return room;
}

struct unwind_row *unwind_pool_at(struct unwind_pool *p, uint32_t slot)
{
	uint32_t c = slot >> UNWIND_CHUNK_SHIFT;

	if (c >= p->nchunks)
		return NULL;
	if (!p->chunk[c]) {
		void *rows =
		    mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd[c], 0);

		if (rows == MAP_FAILED) {
			log_warn("unwind: mapping a table chunk: %s", strerror(errno));
			return NULL;
		}
		p->chunk[c] = rows;
	}
	return &p->chunk[c][slot & (UNWIND_CHUNK_ROWS - 1)];
}

void unwind_pool_unmap(struct unwind_pool *p)
{
	if (p->outer_fd < 0)
		return;
	for (uint32_t i = 0; i < p->nchunks; i++) {
		if (p->chunk[i]) {
			munmap(p->chunk[i], CHUNK_BYTES);
			p->chunk[i] = NULL;
		}
	}
}

uint64_t unwind_pool_bytes(const struct unwind_pool *p)
{
	return (uint64_t)p->nchunks * CHUNK_BYTES;
}
