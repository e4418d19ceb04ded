/*
 * arena.c — bump allocator (see arena.h).
 *
 * Chunks form a singly linked list, newest first. An allocation larger than a
 * quarter of the chunk size gets a chunk of its own, linked behind the
 * current one, so that big blocks do not waste the rest of a chunk.
 */
#include "common/arena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	size_t used;
	_Alignas(16) unsigned char data[];
};

struct arena {
	struct arena_chunk *head;
	size_t chunk_size;
	size_t used;
	bool grows;
	bool huge; /* chunks are mappings in transparent huge pages */
};

/* An arena that starts with small chunks doubles them up to this as it
 * grows, so that a big one (a merge interning millions of keys) takes few,
 * large, prefaulted chunks. Arenas sized by their caller keep their size. */
#define MAX_CHUNK     ((size_t)8 << 20)
#define GROWING_BELOW ((size_t)1 << 20)

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

struct arena *arena_new(size_t chunk_size)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
	a->grows = a->chunk_size < GROWING_BELOW;
	return a;
}

#define HUGE_PAGE ((size_t)2 << 20)

struct arena *arena_new_huge(void)
{
	struct arena *a = arena_new(HUGE_PAGE - sizeof(struct arena_chunk));

	if (a)
		a->huge = true;
	return a;
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		if (a->huge)
			munmap(c, sizeof(*c) + c->size);
		else
			free(c);
	}
	free(a);
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *keep = NULL, *c, *next;

	for (c = a->head; c; c = c->next)
		if (!keep || c->size > keep->size)
			keep = c;
	for (c = a->head; c; c = next) {
		next = c->next;
		if (c != keep)
			free(c);
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	a->head = keep;
	a->used = 0;
}

size_t arena_capacity(const struct arena *a)
{
	return a->head ? a->head->size - a->head->used : 0;
}

void mem_populate(void *p, size_t len)
{
	uintptr_t start = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t end = ((uintptr_t)p + len) & ~(uintptr_t)4095;

	/* One call instead of a page fault per 4 KiB: faults are what fresh
	 * memory costs most, above all in a VM. Advice only (Linux >= 5.14). */
	if (len >= ((size_t)1 << 20) && end > start)
		madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}

/* A chunk of at least size bytes in whole 2 MiB pages, 2 MiB-aligned and
 * populated: in a VM whose page tables the hypervisor shadows, the first
 * touch of each fresh 4 KiB page costs microseconds, of a huge page about
 * as much. */
static struct arena_chunk *chunk_new_huge(size_t size)
{
	size_t len = (sizeof(struct arena_chunk) + size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uint8_t *p, *al;
	struct arena_chunk *c;

	if (len < size)
		return NULL;
	p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	al = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	if (al > p)
		munmap(p, (size_t)(al - p));
	if (al + len < p + len + HUGE_PAGE)
		munmap(al + len, (size_t)(p + len + HUGE_PAGE - (al + len)));
	madvise(al, len, MADV_HUGEPAGE);
	madvise(al, len, 23 /* MADV_POPULATE_WRITE, Linux 5.14: advice only */);
	c = (struct arena_chunk *)al;
	c->size = len - sizeof(*c);
	c->used = 0;
	c->next = NULL;
	return c;
}

static struct arena_chunk *chunk_new(const struct arena *a, size_t size, bool populate)
{
	if (a->huge)
		return chunk_new_huge(size);

	struct arena_chunk *c = malloc(sizeof(*c) + size);

	if (!c)
		return NULL;
	if (populate)
		mem_populate(c, sizeof(*c) + size);
	c->size = size;
	c->used = 0;
	c->next = NULL;
	return c;
}

/* A new chunk of at least size bytes, now the one allocations come from. */
static struct arena_chunk *push_chunk(struct arena *a, size_t size)
{
	struct arena_chunk *c = chunk_new(a, size, a->grows);

	if (!c)
		return NULL;
	c->next = a->head;
	a->head = c;
	return c;
}

/* n bytes (aligned, and known to fit) from c. */
static void *take(struct arena *a, struct arena_chunk *c, size_t n)
{
	void *p = c->data + c->used;

	c->used += n;
	a->used += n;
	return p;
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c;

	n = ALIGN16(n ? n : 1);
	if (n > SIZE_MAX / 2)
		return NULL;
	if (n > a->chunk_size / 4) {
		c = chunk_new(a, n, a->grows);
		if (!c)
			return NULL;
		c->used = c->size; /* nothing else goes there */
		if (a->head) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			a->head = c;
		}
		a->used += n;
		return c->data;
	}
	c = a->head;
	if (!c || c->size - c->used < n) {
		if (a->head && a->grows && a->chunk_size < MAX_CHUNK)
			a->chunk_size *= 2;
		c = push_chunk(a, a->chunk_size);
		if (!c)
			return NULL;
	}
	return take(a, c, n);
}

void *arena_alloc_shared(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;

	n = ALIGN16(n ? n : 1);
	if (n > SIZE_MAX / 2 - a->chunk_size)
		return NULL;
	if (!c || c->size - c->used < n) {
		/* Room for n and a usual chunk's worth after it. */
		c = push_chunk(a, n + a->chunk_size);
		if (!c)
			return NULL;
	}
	return take(a, c, n);
}

void *arena_calloc(struct arena *a, size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	p = arena_alloc(a, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

size_t arena_used(const struct arena *a)
{
	return a->used;
}

static void *pb_alloc(void *data, size_t size)
{
	return arena_alloc(data, size);
}

static void pb_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

void arena_protobuf_allocator(struct arena *a, ProtobufCAllocator *out)
{
	out->alloc = pb_alloc;
	out->free = pb_free;
	out->allocator_data = a;
}
