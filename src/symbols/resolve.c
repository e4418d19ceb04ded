/*
 * resolve.c — resolving one address of one object (see resolve.h): the
 * result cache, then Kiln's DWARF reader, then libdw, then the symbol
 * table, in that order, stated once at symfile_resolve. Above the object
 * (symfile.h: its symbol table, result cache and CU index); below the
 * batches (batch.c), which make their answers with resolve_frames and
 * resolve_answer, and the public API.
 *
 * A DWARF answer is the CU index's innermost node holding the address and
 * its chain of inlined_subroutine nodes up to the enclosing subprogram:
 * frame i+1's file:line is the DW_AT_call_file / DW_AT_call_line of
 * inlined node i, where the callee was inlined; the innermost frame's is
 * the line table's row for the address.
 */
#include <string.h>

#include "common/arena.h"
#include "symbols/resolve.h"
#include "symbols/symfile.h"

/* The frames of node k of idx (-1: none) and its inlined callers,
 * innermost first, the innermost at file:lineno. Each inlined node's call
 * site is the position of the frame that follows it. Returns how many. */
static size_t node_frames(const struct cu_index *idx, int32_t k, const char *file, int lineno,
			  struct symbols_frame *frames)
{
	size_t n = 0;

	for (; k >= 0 && n < SYMBOLS_MAX_FRAMES; k = idx->nodes[k].parent) {
		const struct cu_node *node = &idx->nodes[k];

		frames[n++] = (struct symbols_frame){.function = node->function,
						     .system_name = node->system_name,
						     .file = file,
						     .line = lineno,
						     .start_line = node->start_line};
		if (!node->inlined)
			break;
		file = node->call_file;
		lineno = (int)node->call_line;
	}
	return n;
}

/* Steps 2 and 3 of symfile_resolve: the CU's index (Kiln's reader, else
 * libdw: cu_lookup), its line row and innermost node. Returns the number
 * of frames (0: no DWARF here); when the frames are node_frames' alone,
 * *ref says how to make them again (ref->idx NULL otherwise). */
static size_t resolve_dwarf(struct symfile *f, uint64_t addr, struct symbols_frame *frames,
			    struct cached_ref *ref)
{
	Dwarf_Die cudie;
	const char *file = NULL;
	int lineno = 0;
	bool line = false;
	struct cu_index *idx;
	const struct cu_seg *seg;

	if (!f->dwarf || !(idx = cu_lookup(f, addr, &cudie)))
		return 0;
	if (idx->fast) {
		struct kdw_row row;

		/* The segment search's first probe, so that its miss overlaps
		 * the line search's. */
		if (idx->nsegs)
			kdw_keys64_prefetch(segment_lows(idx), idx->nsegs);

		if (idx->has_lines && kdw_lines_find(&idx->lines, addr, &row)) {
			line = true;
			file = kdw_lines_file(&idx->lines, row.file, kdw_arena(f->kdw));
			lineno = row.line;
		}
	} else {
		Dwarf_Line *dl = dwarf_getsrc_die(&cudie, addr);

		if (dl) {
			line = true;
			file = dwarf_linesrc(dl, NULL, NULL);
			dwarf_lineno(dl, &lineno);
		}
	}
	seg = idx ? segment_lookup(idx, addr) : NULL;
	return resolve_frames(f, idx, seg ? seg->node : -1, line, file, lineno, addr, frames, ref);
}

/* The frames of addr in idx: node k's (-1: none) with the line found (line
 * set: file:lineno), else the symbol table's name where DWARF has a line
 * but no function. Returns how many; *ref as for resolve_dwarf. */
size_t resolve_frames(struct symfile *f, const struct cu_index *idx, int32_t k, bool line,
		      const char *file, int lineno, uint64_t addr, struct symbols_frame *frames,
		      struct cached_ref *ref)
{
	size_t n = node_frames(idx, k, file, lineno, frames);

	if (n > 0 && frames[n - 1].function)
		*ref = (struct cached_ref){idx, file, k, lineno};
	if (n == 0 && line) {
		/* A line but no function DIE (assembly, stripped DIEs): name
		 * from the symbol table, place from the line table. */
		const struct fsym *s = symtab_lookup(f, addr);

		if (s) {
			frames[0] = (struct symbols_frame){.function = symtab_name(f, s->name),
							   .system_name = s->name,
							   .file = file,
							   .line = lineno};
			n = 1;
		}
	}
	/* A subprogram DIE without a name (rare): borrow the symbol's. */
	if (n > 0 && !frames[n - 1].function) {
		const struct fsym *s = symtab_lookup(f, addr);

		if (s) {
			frames[n - 1].function = symtab_name(f, s->name);
			frames[n - 1].system_name = s->name;
		}
	}
	return n;
}

/* The one place that says which engine answers an address of f:
 *   1. the result cache: an address resolved before (one probe);
 *   2. Kiln's DWARF reader, when f has DWARF and the reader supports the
 *      CU holding addr (found through .debug_aranges): the CU's line table
 *      and its index of functions and inlined calls;
 *   3. libdw, for a CU the reader leaves (64-bit DWARF, split or type
 *      units, dwz forms, DW_LNE_define_file, relocatable objects, a
 *      malformed unit: see dwarf_reader.h) or an address .debug_aranges
 *      does not cover (dwarf_addrdie);
 *   4. the symbol table (.symtab, else .dynsym): for a file without
 *      DWARF, an address in no CU or in no function DIE (a name without
 *      file:line, or with the line table's file:line), and for a
 *      function DIE without a name.
 * Steps 2 and 3 choose per CU, once (cu_lookup: the CU's index is built
 * by one or the other and kept); the answer is cached either way. */
int symfile_resolve(struct symbolizer *s, struct symfile *f, uint64_t addr,
		    struct symbols_location *out)
{
	struct cached_ref ref = {0};
	uintptr_t v;
	size_t n, slot;

	out->stripped = !f->dwarf && !f->info.has_symtab;
	out->partial = !f->dwarf;
	if ((v = rcache_get(&f->results, addr, &slot)) != 0) {
		resolve_cached(v, out);
		return 0;
	}
	n = resolve_dwarf(f, addr, out->frames, &ref);
	resolve_answer(s, f, addr, n, &ref, out, slot);
	return 0;
}

/* out's frames from the result cache's value v. */
void resolve_cached(uintptr_t v, struct symbols_location *out)
{
	const struct cached *c;

	if (v & CACHED_REF) {
		const struct cached_ref *r = (const struct cached_ref *)(v & ~CACHED_REF);

		out->nframes = node_frames(r->idx, r->node, r->file, r->line, out->frames);
		return;
	}
	c = (const struct cached *)v;
	out->nframes = c->nframes;
	memcpy(out->frames, c->frames, c->nframes * sizeof(c->frames[0]));
}

/* Completes the answer for addr, whose n frames DWARF gave in out->frames
 * (0: none, then the symbol table's name), and caches it (ref: how, when
 * ref->idx is set; slot: rcache_get's, or SIZE_MAX). */
void resolve_answer(struct symbolizer *s, struct symfile *f, uint64_t addr, size_t n,
		    const struct cached_ref *ref, struct symbols_location *out, size_t slot)
{
	struct cached *c;

	if (n == 0) {
		const struct fsym *sym = symtab_lookup(f, addr);

		if (sym) {
			out->frames[0] = (struct symbols_frame){
			    .function = symtab_name(f, sym->name), .system_name = sym->name};
			n = 1;
		}
	}
	out->nframes = n;
	if (f->results.n >= s->max_cached)
		return; /* full: still correct, just not cached */
	if (ref->idx) {
		if (!f->refs_left) {
			f->refs_left = 2048;
			f->refs = arena_alloc(f->arena, f->refs_left * sizeof(*f->refs));
			if (!f->refs) {
				f->refs_left = 0;
				return;
			}
		}
		*f->refs = *ref;
		/* (On failure: not cached.) */
		rcache_put(&f->results, addr, (uintptr_t)f->refs | CACHED_REF, slot);
		f->refs++;
		f->refs_left--;
		return;
	}
	c = arena_alloc(f->arena, sizeof(*c) + n * sizeof(c->frames[0]));
	if (!c)
		return;
	c->nframes = (uint32_t)n;
	memcpy(c->frames, out->frames, n * sizeof(c->frames[0]));
	rcache_put(&f->results, addr, (uintptr_t)c, slot); /* on failure: not cached */
}
