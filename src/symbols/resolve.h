/*
 * resolve.h — resolving one address of one object (internal to
 * src/symbols): the layer above the object (symfile.h), below batches
 * (batch.c) and the public API. symfile_resolve says, in one place, which
 * engine answers: the result cache, Kiln's DWARF reader, libdw, the symbol
 * table.
 */
#ifndef KILN_SYMBOLS_RESOLVE_H
#define KILN_SYMBOLS_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/rcache.h"
#include "symbols/symbols.h"

struct symbolizer;
struct symfile;
struct cu_index;

/* Resolves addr in f into *out (nframes 0: not found), caching the
 * answer. The serial reference path: a batch's answers are the same. */
int symfile_resolve(struct symbolizer *s, struct symfile *f, uint64_t addr,
		    struct symbols_location *out);

/* The frames of addr in idx: node k's (-1: none) with the line found (line
 * set: file:lineno), else the symbol table's name where DWARF has a line
 * but no function. Returns how many; when they are the node chain's
 * alone, *ref says how to make them again (ref->idx NULL otherwise). */
size_t resolve_frames(struct symfile *f, const struct cu_index *idx, int32_t k, bool line,
		      const char *file, int lineno, uint64_t addr, struct symbols_frame *frames,
		      struct cached_ref *ref);

/* out's frames from the result cache's value v. */
void resolve_cached(uintptr_t v, struct symbols_location *out);

/* Completes the answer for addr, whose n frames DWARF gave in out->frames
 * (0: none, then the symbol table's name), and caches it (ref: how, when
 * ref->idx is set; slot: rcache_get's, or SIZE_MAX). */
void resolve_answer(struct symbolizer *s, struct symfile *f, uint64_t addr, size_t n,
		    const struct cached_ref *ref, struct symbols_location *out, size_t slot);

#endif
