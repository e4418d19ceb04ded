/*
 * cu_index.c — the per-CU index of an object (see cu_index.h): built with
 * Kiln's reader (dwarf_reader.h) or, for a unit it leaves, with libdw;
 * found per address through .debug_aranges (the reader's table, else a
 * copy of libdw's, else dwarf_addrdie).
 */
#include <dwarf.h>
#include <errno.h>
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "common/log.h"
#include "symbols/cu_index.h"
#include "symbols/symfile.h"

#define MAX_DIE_DEPTH 64

/* A segment as the sweep makes it. */
struct cu_segment {
	uint64_t low, high;
	int32_t node;
};

/* A zeroed cu_index in arena, 64-byte aligned. */
struct cu_index *cu_index_new(struct arena *arena)
{
	uint8_t *p = arena_alloc(arena, sizeof(struct cu_index) + 48);
	struct cu_index *idx;

	if (!p)
		return NULL;
	idx = (struct cu_index *)(p + ((64 - (uintptr_t)p % 64) % 64));
	memset(idx, 0, sizeof(*idx));
	return idx;
}

/* Makes room for n elements of size sz in *p (capacity *cap). */
static bool grow(void *pp, size_t *cap, size_t n, size_t sz)
{
	void **p = pp;
	size_t c = *cap ? *cap : 256;

	if (n <= *cap)
		return true;
	while (c < n)
		c *= 2;
	void *np = realloc(*p, c * sz);
	if (!np)
		return false;
	*p = np;
	*cap = c;
	return true;
}

struct cu_range {
	uint64_t low, high;
	int32_t node, depth;
};

struct cu_reader symfile_reader(struct symfile *f)
{
	return (struct cu_reader){f->kdw, f->arena, f->names, &f->scratch};
}

/* A build with the symfile's own reader, arena and names. */
static struct cu_build cu_build_of(struct symfile *f)
{
	return (struct cu_build){.f = f, .r = symfile_reader(f)};
}

static void die_names(struct symfile *f, Dwarf_Die *die, struct symbols_frame *fr)
{
	Dwarf_Attribute attr;
	const char *raw = NULL, *name;
	Dwarf_Word decl = 0;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		raw = dwarf_formstring(&attr);
	name = dwarf_attr_integrate(die, DW_AT_name, &attr) ? dwarf_formstring(&attr) : NULL;
	if (!raw)
		raw = name;
	fr->system_name = raw;
	fr->function = raw ? symtab_name(f, raw) : NULL;
	if (dwarf_attr_integrate(die, DW_AT_decl_line, &attr) && dwarf_formudata(&attr, &decl) == 0)
		fr->start_line = (int64_t)decl;
}

static int32_t add_node(struct cu_build *b, Dwarf_Die *die, int32_t parent, bool inlined)
{
	struct cu_index *idx = b->idx;
	struct symbols_frame fr = {0};
	Dwarf_Attribute attr;
	Dwarf_Word w;

	if (!grow(&b->r.sc->nodes, &b->r.sc->cap_nodes, b->nnodes + 1, sizeof(*b->r.sc->nodes))) {
		b->oom = true;
		return -1;
	}
	struct cu_node *node = &b->r.sc->nodes[b->nnodes];
	memset(node, 0, sizeof(*node));
	die_names(b->f, die, &fr);
	node->function = fr.function;
	node->system_name = fr.system_name;
	node->start_line = fr.start_line;
	node->parent = parent;
	node->inlined = inlined;
	if (inlined) {
		if (dwarf_attr(die, DW_AT_call_file, &attr) && dwarf_formudata(&attr, &w) == 0 &&
		    (b->files || dwarf_getsrcfiles(&idx->cudie, &b->files, NULL) == 0))
			node->call_file = dwarf_filesrc(b->files, w, NULL, NULL);
		if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &w) == 0)
			node->call_line = (int64_t)w;
	}
	return (int32_t)b->nnodes++;
}

static void add_range(struct cu_build *b, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	if (high <= low)
		return;
	if (!grow(&b->r.sc->ranges, &b->r.sc->cap_ranges, b->nranges + 1,
		  sizeof(*b->r.sc->ranges))) {
		b->oom = true;
		return;
	}
	b->r.sc->ranges[b->nranges++] = (struct cu_range){low, high, node, depth};
}

static void index_children(struct cu_build *b, Dwarf_Die *parent_die, int32_t parent, int depth)
{
	Dwarf_Die child;

	if (depth > MAX_DIE_DEPTH || b->oom || dwarf_child(parent_die, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);

		switch (tag) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_entry_point: {
			Dwarf_Addr base, low, high;
			ptrdiff_t off = 0;
			int32_t node = -1;

			while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0) {
				if (node < 0)
					node = add_node(b, &child, parent,
							tag == DW_TAG_inlined_subroutine);
				if (node < 0)
					return;
				add_range(b, low, high, node, depth);
			}
			/* Without code (declarations, abstract instances)
			 * nothing below can hold an address either. */
			if (node >= 0)
				index_children(b, &child, node, depth + 1);
			break;
		}
		case DW_TAG_lexical_block:
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			index_children(b, &child, parent, depth + 1);
			break;
		default:
			break;
		}
	} while (!b->oom && dwarf_siblingof(&child, &child) == 0);
}

struct cu_event {
	uint64_t addr;
	int32_t range; /* index into ranges */
	bool start;
};

static bool event_before(const struct cu_event *x, const struct cu_event *y)
{
	if (x->addr != y->addr)
		return x->addr < y->addr;
	return !x->start && y->start; /* ends before starts */
}

/* Bottom-up merge sort of ev[0..n) with tmp[0..n) (stable, O(n log n), no
 * allocation: qsort allocates its own buffer on every call). Returns the
 * sorted array (ev or tmp). */
static struct cu_event *sort_events(struct cu_event *ev, struct cu_event *tmp, size_t n)
{
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = event_before(&ev[j], &ev[i]) ? ev[j++] : ev[i++];
			while (i < mid)
				tmp[k++] = ev[i++];
			while (j < hi)
				tmp[k++] = ev[j++];
		}
		struct cu_event *t = ev;
		ev = tmp;
		tmp = t;
	}
	return ev;
}

/* Turns the (possibly nested) ranges into disjoint innermost segments,
 * copied with the nodes into the symfile's arena. */
static int build_segments(struct cu_build *b)
{
	struct cu_scratch *sc = b->r.sc;
	const struct cu_range *ranges = sc->ranges;
	size_t nev = b->nranges * 2, nactive = 0, nsegs = 0;
	struct cu_event *ev;
	struct cu_segment *segs;
	int32_t *active;

	/* ev holds two halves: the events and the sort's buffer. */
	if (!grow(&sc->ev, &sc->cap_ev, 2 * nev + 1, sizeof(*sc->ev)) ||
	    !grow(&sc->active, &sc->cap_active, b->nranges + 1, sizeof(*sc->active)) ||
	    !grow(&sc->segs, &sc->cap_segs, nev + 1, sizeof(*sc->segs)))
		return -ENOMEM;
	active = sc->active;
	segs = sc->segs;
	for (size_t i = 0; i < b->nranges; i++) {
		sc->ev[2 * i] = (struct cu_event){ranges[i].low, (int32_t)i, true};
		sc->ev[2 * i + 1] = (struct cu_event){ranges[i].high, (int32_t)i, false};
	}
	ev = sort_events(sc->ev, sc->ev + nev, nev);
	for (size_t i = 0; i < nev;) {
		uint64_t at = ev[i].addr;

		for (; i < nev && ev[i].addr == at; i++) {
			if (ev[i].start) {
				active[nactive++] = ev[i].range;
				continue;
			}
			for (size_t k = 0; k < nactive; k++)
				if (active[k] == ev[i].range) {
					active[k] = active[--nactive];
					break;
				}
		}
		if (nactive == 0 || i == nev)
			continue;
		int32_t best = active[0];
		for (size_t k = 1; k < nactive; k++)
			if (ranges[active[k]].depth > ranges[best].depth)
				best = active[k];
		int32_t node = ranges[best].node;
		if (nsegs && segs[nsegs - 1].high == at && segs[nsegs - 1].node == node)
			segs[nsegs - 1].high = ev[i].addr;
		else
			segs[nsegs++] = (struct cu_segment){at, ev[i].addr, node};
	}
	if (nsegs > UINT32_MAX) /* cu_index.nsegs */
		return -ENOMEM;
	/* The segments' low addresses as sorted keys with search levels
	 * (dwarf_reader.h), the rest of each segment right after them. */
	size_t words = kdw_keys64_words(nsegs);
	uint8_t *p = arena_alloc(b->r.arena, words * sizeof(uint64_t) +
						 (nsegs ? nsegs : 1) * sizeof(struct cu_seg) + 48);
	uint64_t *lows;

	b->idx->nodes = arena_alloc(b->r.arena, (b->nnodes ? b->nnodes : 1) * sizeof(*sc->nodes));
	if (!p || !b->idx->nodes)
		return -ENOMEM;
	lows = kdw_keys64_at((uint64_t *)(p + ((64 - (uintptr_t)p % 64) % 64)), nsegs);
	b->idx->segs = (struct cu_seg *)(lows + kdw_keys64_pad(nsegs));
	for (size_t i = 0; i < nsegs; i++) {
		lows[i] = segs[i].low;
		b->idx->segs[i] = (struct cu_seg){segs[i].high, segs[i].node};
	}
	kdw_keys64_finish(lows, nsegs);
	if (b->nnodes) /* a CU without functions never grew the nodes */
		memcpy(b->idx->nodes, sc->nodes, b->nnodes * sizeof(*sc->nodes));
	b->idx->nsegs = nsegs;
	b->idx->nnodes = b->nnodes;
	return 0;
}

void cu_scratch_free(struct cu_scratch *sc)
{
	free(sc->nodes);
	free(sc->ranges);
	free(sc->ev);
	free(sc->active);
	free(sc->segs);
}

/* The index of the CU whose DIE is cudie, built on first use (in the
 * symfile's arena: it lives as long as the symfile). */
static struct cu_index *cu_index_get(struct symfile *f, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct cu_build b = cu_build_of(f);
	uint64_t v;

	if (htab_get(f->cus, &off, sizeof(off), &v))
		return (struct cu_index *)(uintptr_t)v;
	b.idx = cu_index_new(f->arena);
	if (!b.idx)
		return NULL;
	b.idx->cudie = *cudie;
	index_children(&b, cudie, -1, 0);
	if (b.oom || build_segments(&b) < 0 ||
	    htab_put(f->cus, &off, sizeof(off), (uint64_t)(uintptr_t)b.idx) < 0)
		return NULL;
	f->libdw_cus++;
	return b.idx;
}

int32_t cu_index_fast_func(void *ctx, const struct kdw_func *fn, int32_t parent)
{
	struct cu_build *b = ctx;
	const char *raw = fn->linkage_name ? fn->linkage_name : fn->name;

	if (!grow(&b->r.sc->nodes, &b->r.sc->cap_nodes, b->nnodes + 1, sizeof(*b->r.sc->nodes)))
		return -1;
	b->r.sc->nodes[b->nnodes] = (struct cu_node){
	    .function = raw ? symtab_intern(b->r.names, b->r.arena, raw) : NULL,
	    .system_name = raw,
	    .start_line = fn->decl_line,
	    .parent = parent,
	    .inlined = fn->inlined,
	};
	if (fn->inlined) {
		struct cu_node *node = &b->r.sc->nodes[b->nnodes];

		if (fn->has_call_file && b->lines)
			node->call_file =
			    kdw_lines_file(b->lines, fn->call_file, kdw_arena(b->r.kdw));
		if (fn->has_call_line)
			node->call_line = (int64_t)fn->call_line;
	}
	return (int32_t)b->nnodes++;
}

static int fast_range(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	struct cu_build *b = ctx;

	add_range(b, low, high, node, depth);
	return b->oom ? -1 : 0;
}

/* The index of a CU of the reader (kcu), built with the reader; NULL when
 * it cannot (the caller then asks libdw). */
static struct cu_index *cu_index_fast(struct symfile *f, struct kdw_cu *kcu)
{
	struct cu_build b = cu_build_of(f);
	struct kdw_walk_ops ops = {.ctx = &b, .func = cu_index_fast_func, .range = fast_range};
	struct kiln_error e = {0};

	b.lines = kdw_cu_lines(f->kdw, kcu, &e);
	if (!b.lines && e.code != -ENOENT)
		goto fail;
	memset(&e, 0, sizeof(e));
	b.idx = cu_index_new(f->arena);
	if (!b.idx)
		return NULL;
	b.idx->fast = true;
	if (b.lines) {
		b.idx->lines = *b.lines;
		b.idx->has_lines = true;
	}
	if (kdw_walk_cu(f->kdw, kcu, &ops, &e) < 0 || b.oom)
		goto fail;
	if (build_segments(&b) < 0 || htab_put(f->cus, &kcu->die_offset, sizeof(kcu->die_offset),
					       (uint64_t)(uintptr_t)b.idx) < 0)
		return NULL;
	f->reader_cus++;
	return b.idx;
fail:
	log_debug("symbolizer: %s: %s; libdw reads this CU", f->path,
		  e.code ? e.msg : "out of memory");
	return NULL;
}

/* The keys of idx's segments: their low addresses (build_segments). */
/* Segments are disjoint and ascending: addr's is the last one starting at
 * or below it, if it ends above. */
static int arange_cmp(const void *a, const void *b)
{
	const struct cu_arange *x = a, *y = b;

	return x->low < y->low ? -1 : x->low > y->low;
}

/* The CU holding addr (its DIE in *cudie) and its index: steps 2 and 3 of
 * the order symfile_resolve (resolve.c) states, the reader's index
 * (cu_index_fast) before libdw's (cu_index_get). The reader's ranges
 * first; without them the address ranges of libdw's .debug_aranges are
 * copied once into a sorted array of our own (dwarf_addrdie per address
 * searched them and then looked the CU up by offset in a tree). Addresses
 * outside the table (no .debug_aranges, or an incomplete one) still go
 * to dwarf_addrdie. */
struct cu_index *cu_lookup(struct symfile *f, uint64_t addr, Dwarf_Die *cudie)
{
	size_t lo = 0, hi;
	uint64_t v;
	struct kdw_cu *kcu = NULL;
	void **slot = f->kdw ? kdw_arange_user(f->kdw, addr, &kcu) : NULL;

	if (slot && *slot) { /* through this range before: no other lookup */
		struct cu_index *idx = *slot;

		if (!idx->fast)
			*cudie = idx->cudie;
		return idx;
	}
	if (kcu) {
		uint64_t off = kcu->die_offset;
		struct cu_index *idx;

		if (kcu->user) { /* indexed before: no hash lookup */
			idx = kcu->user;
			*cudie = idx->cudie;
			*slot = idx;
			return idx;
		}
		if (htab_get(f->cus, &off, sizeof(off), &v)) {
			idx = (struct cu_index *)(uintptr_t)v;
			*cudie = idx->cudie;
			return idx;
		}
		if ((idx = cu_index_fast(f, kcu)) != NULL ||
		    (dwarf_offdie(f->dwarf, off, cudie) && (idx = cu_index_get(f, cudie)))) {
			kcu->user = idx;
			*slot = idx;
		}
		return idx;
	}
	/* libdw's dwarf_addrdie searches the same .debug_aranges: no unit.
	 * (Reading its copy of the table was a twentieth of a cold run.) */
	if (f->kdw && kdw_aranges_whole(f->kdw))
		return NULL;

	if (!f->aranges_read) {
		Dwarf_Aranges *ar;
		size_t n = 0;

		f->aranges_read = true;
		if (dwarf_getaranges(f->dwarf, &ar, &n) == 0 && n > 0 &&
		    (f->aranges = malloc(n * sizeof(*f->aranges))) != NULL) {
			for (size_t i = 0; i < n; i++) {
				Dwarf_Addr a;
				Dwarf_Word len;
				Dwarf_Off off;

				if (dwarf_getarangeinfo(dwarf_onearange(ar, i), &a, &len, &off) ==
					0 &&
				    len > 0)
					f->aranges[f->naranges++] =
					    (struct cu_arange){a, a + len, off};
			}
			qsort(f->aranges, f->naranges, sizeof(*f->aranges), arange_cmp);
		}
	}
	hi = f->naranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->aranges[mid].low <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && addr < f->aranges[lo - 1].high) {
		Dwarf_Off off = f->aranges[lo - 1].cu;

		if (htab_get(f->cus, &off, sizeof(off), &v)) {
			struct cu_index *idx = (struct cu_index *)(uintptr_t)v;

			*cudie = idx->cudie;
			return idx;
		}
		if (dwarf_offdie(f->dwarf, off, cudie))
			return cu_index_get(f, cudie);
	}
	if (!dwarf_addrdie(f->dwarf, addr, cudie))
		return NULL;
	return cu_index_get(f, cudie);
}
