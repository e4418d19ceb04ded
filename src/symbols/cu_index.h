/*
 * cu_index.h — the per-CU index of one object (internal to src/symbols):
 * part of the object layer (symfile.h), above Kiln's DWARF reader and
 * libdw, below resolving one address (resolve.c) and batches (batch.c).
 *
 * Walking a CU's DIE tree for every address (what dwarf_getscopes does)
 * dominates cold symbolization: libc's CUs have thousands of top-level
 * DIEs. So the first address in a CU walks it once and keeps:
 *   nodes:    one per subprogram / inlined_subroutine with code, with its
 *             names, declaration line, call site and enclosing node;
 *   segments: disjoint address intervals, each mapped to the innermost node
 *             covering it (a sweep over every node's ranges).
 * A lookup is then a search of the segments' low addresses (sorted keys
 * with search levels, keysearch.h: two or three cache misses on a cold
 * index, not one per probe) plus a walk up the parent links.
 */
#ifndef KILN_SYMBOLS_CU_INDEX_H
#define KILN_SYMBOLS_CU_INDEX_H

#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/dwarf_reader.h"

struct arena;
struct htab;
struct symfile;
struct cu_range;
struct cu_event;
struct cu_segment;

struct cu_node {
	const char *function, *system_name, *call_file;
	int64_t start_line, call_line;
	int32_t parent; /* -1: outermost */
	bool inlined;
};

/* A segment as the index keeps it: its low address is its search key
 * (segment_lows), kept beside it rather than in it. */
struct cu_seg {
	uint64_t high;
	int32_t node;
};

/* What a lookup reads comes first and fits one cache line (the index is
 * allocated 64-byte aligned): per address of a cold run the CU's index is
 * most likely out of cache, and each further line is another miss. */
struct cu_index {
	struct cu_seg *segs;
	struct cu_node *nodes; /* in the symfile's arena, like the index */
	uint32_t nsegs;
	bool fast;
	bool has_lines; /* fast: lines holds the unit's line table */
	/* fast: a copy of the reader's table (sharing its arrays); its
	 * lookup fields are its first 40 bytes */
	struct kdw_lines lines;
	size_t nnodes;
	Dwarf_Die cudie; /* libdw's CUs */
};
_Static_assert(offsetof(struct cu_index, lines) + offsetof(struct kdw_lines, nfiles) <= 64,
	       "a lookup's fields of cu_index fit one cache line");

/* Growable arrays reused by every CU index build of a symfile: a CU is
 * indexed once, so allocating per build would pay the page faults of
 * fresh memory for every CU, a large part of a cold run. */
struct cu_scratch {
	struct cu_node *nodes;
	size_t cap_nodes;
	struct cu_range *ranges;
	size_t cap_ranges;
	struct cu_event *ev;
	size_t cap_ev;
	int32_t *active;
	size_t cap_active;
	struct cu_segment *segs;
	size_t cap_segs;
};

/* What CU indexes are built with: Kiln's reader, the arena the index, its
 * nodes and their display names go to, the display-name table and the
 * scratch arrays. The symfile's own (symfile_reader), or a batch helper
 * thread's (struct batch_helper). */
struct cu_reader {
	struct kdw *kdw;
	struct arena *arena;
	struct htab *names;
	struct cu_scratch *sc;
};

/* One CU index build. */
struct cu_build {
	struct symfile *f;
	struct cu_reader r;
	struct cu_index *idx;
	Dwarf_Files *files;
	struct kdw_lines *lines; /* the reader's */
	size_t nnodes, nranges;
	bool oom;
};

/* A zeroed cu_index in arena, 64-byte aligned. */
struct cu_index *cu_index_new(struct arena *arena);

void cu_scratch_free(struct cu_scratch *sc);

/* The symfile's own reader, arena, names and scratch. */
struct cu_reader symfile_reader(struct symfile *f);

/* The CU holding addr (its libdw DIE in *cudie when libdw indexed it) and
 * its index, built on first use: Kiln's reader first, libdw for a unit
 * the reader leaves. NULL: no CU holds addr (or out of memory). */
struct cu_index *cu_lookup(struct symfile *f, uint64_t addr, Dwarf_Die *cudie);

/* kdw_walk_ops.func for a build (ctx: its struct cu_build): one node per
 * function the reader's walk reports. */
int32_t cu_index_fast_func(void *ctx, const struct kdw_func *fn, int32_t parent);

static inline const uint64_t *segment_lows(const struct cu_index *idx)
{
	return (const uint64_t *)idx->segs - kdw_keys64_pad(idx->nsegs);
}

static inline const struct cu_seg *segment_lookup(const struct cu_index *idx, uint64_t addr)
{
	size_t i =
	    kdw_keys64_find(segment_lows(idx), idx->nsegs, addr, idx->segs, sizeof(*idx->segs));

	return i != SIZE_MAX && addr < idx->segs[i].high ? &idx->segs[i] : NULL;
}

#endif
