/*
 * arena.h — a bump allocator for memory that dies together.
 *
 * Per-request and per-profile data is allocated from an arena and released in
 * one arena_free, so that no error path can leak. Allocations are 16-byte
 * aligned. The arena also implements protobuf-c's allocator interface, which
 * lets a decoded message live in it (pprof decoding uses this: one free
 * instead of one per submessage).
 */
#ifndef KILN_COMMON_ARENA_H
#define KILN_COMMON_ARENA_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

struct arena;

/* chunk_size: bytes per block (0 = 64 KiB). Returns NULL on out-of-memory. */
struct arena *arena_new(size_t chunk_size);
/* An arena for large, long-lived data (a big file's symbol tables): chunks of
 * 2 MiB-aligned transparent huge pages, faulted in at once. Use it only
 * when megabytes are expected: the first chunk takes 2 MiB. */
struct arena *arena_new_huge(void);
/* Releases every allocation; NULL-safe. */
void arena_free(struct arena *a);
/* Forgets every allocation but keeps the arena's largest chunk for reuse
 * (the others are freed), so that the next user of the arena starts with
 * that much room and no malloc. */
void arena_reset(struct arena *a);
/* Bytes left in the current chunk (after arena_reset: the kept chunk's
 * size; 0 for an arena that never allocated). */
size_t arena_capacity(const struct arena *a);
/* Returns NULL on out-of-memory. The memory is not zeroed. */
void *arena_alloc(struct arena *a, size_t n);
/* As arena_alloc, but a large block goes into the current chunk, or a new
 * one with the usual chunk's room left after it, rather than a chunk of its
 * own: for a block that would leave most of its own chunk unused (in a
 * huge-page arena, a 1 MiB block took a 2 MiB page of its own, cleared by
 * the kernel for nothing). The memory is not zeroed. */
void *arena_alloc_shared(struct arena *a, size_t n);
void *arena_calloc(struct arena *a, size_t n, size_t size);
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* Faults in [p, p+len) at once if it spans at least 1 MiB (advice only). */
void mem_populate(void *p, size_t len);
/* Bytes handed out so far (for memory accounting). */
size_t arena_used(const struct arena *a);
/* A protobuf-c allocator backed by a; frees are no-ops. */
void arena_protobuf_allocator(struct arena *a, ProtobufCAllocator *out);

#endif
