/*
 * dwarf_die.h — the DIE layer of Kiln's DWARF reader, internal to it: the
 * reader's state (struct kdw), abbreviation tables and one DIE's
 * attributes. Its files, bottom to top, each calling only those below
 * (and the forms, dwarf_form.h):
 *   dwarf_abbrev.c  abbreviation tables;
 *   dwarf_die.c     attribute values, a unit's base DIE, names through
 *                   abstract_origin / specification, code ranges;
 *   dwarf_walk.c    the function-DIE walk (kdw_walk_cu);
 *   dwarf_info.c    opening a reader (unit headers, .debug_aranges), and
 *                   a unit's line table (through dwarf_line.c).
 * What dwarf_reader.h promises is implemented here; nothing outside the
 * DWARF reader includes this header.
 */
#ifndef KILN_SYMBOLS_DWARF_DIE_H
#define KILN_SYMBOLS_DWARF_DIE_H

#include <dwarf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/dwarf_reader.h"

#define MAX_DIE_DEPTH 64 /* as the libdw index: deeper DIEs are not looked at */
#define MAX_CHAIN     16 /* abstract_origin / specification hops (libdw's) */

struct kdw_spec {
	uint16_t name, form;
	int8_t slot;	  /* enum slot of name, -1: none */
	int8_t size;	  /* kdw_form_fixed_size of form (-1: varies) */
	int64_t implicit; /* DW_FORM_implicit_const */
};

struct kdw_abbrev {
	uint32_t tag;
	/* specs[first .. first + nattrs); lazy: first is the offset of the
	 * attribute list from the table's start in .debug_abbrev instead. */
	uint32_t first, nattrs;
	int32_t fixed;	/* bytes of all attributes, -1 when they vary */
	int32_t sib_at; /* DW_AT_sibling's byte offset when fixed, else -1 */
	uint16_t sib_form;
	bool children, defined;
	/* Its specs were not decoded: an abbreviation that is no function
	 * and no unit, with fixed-size attributes, is only ever stepped over
	 * by its size (in libc, 55% of the specs). A DIE of it read in full
	 * after all (an origin or specification leading to it: rare) has its
	 * specs decoded from the bytes again (read_die). */
	bool lazy;
	/* The walk reads this DIE's attributes: a function with code
	 * attributes (low_pc and high_pc, or ranges). Other DIEs it steps
	 * over: their values would not be used. */
	bool walk_full;
	/* No children and fixed-size attributes: a DIE the walk steps over
	 * (not walk_full) is skipped in line, without read_die. */
	bool leaf_fixed;
	/* What skip_leaf steps (the code byte and the attributes), 0 when it
	 * does not: [0] in the walk (not walk_full ones), [1] when skipping.
	 * One load and test per DIE instead of four fields': the walk steps
	 * over most DIEs, so this test is its innermost loop. */
	int32_t leaf_step[2];
	/* Children, fixed-size attributes and a DW_FORM_ref4 DW_AT_sibling:
	 * that value's offset from the code byte (skip_sibling), else 0. */
	int32_t sib_jump;
};

struct kdw_abbrevs {
	struct kdw_abbrev *by_code; /* [ncodes], code 0 unused */
	uint32_t ncodes;
	struct kdw_spec *specs;
	/* What it was decoded for (a scratch table is reused). */
	uint64_t offset;
	uint16_t version;
	uint8_t addr_size;
	bool valid;
	size_t cap_codes, cap_specs; /* scratch tables: their arrays' sizes */
};

struct kdw_arange {
	uint64_t low, high;
	struct kdw_cu *cu; /* NULL in a stream reader */
	uint64_t unit;	   /* the unit's offset in .debug_info */
	void *user;	   /* kdw_arange_user's */
};

struct kdw {
	struct kdw_sections s;
	struct arena *arena;
	bool own_arena;
	struct kdw_cu *cus; /* by offset */
	size_t ncus;
	struct kdw_arange *aranges; /* by low */
	size_t naranges;
	/* aranges[i].low: what the per-address search reads, 8 to a cache
	 * line rather than 2.7 (the table is 100+ KiB for libc). */
	uint64_t *arange_lows;
	/* Buckets over [arange_lows[0], arange_lows[naranges - 1]), each
	 * 1 << bucket_shift bytes of addresses (about two per range):
	 * buckets[b] is the last range starting at or below bucket b's first
	 * address (buckets[nbuckets]: the last range). A lookup searches only
	 * between its bucket's entry and the next one's, mostly one or two
	 * ranges, not the whole table (a twentieth of the per-address
	 * instructions of kiln's binary, three dependent loads fewer). */
	uint32_t *buckets;
	size_t nbuckets;
	unsigned bucket_shift;
	struct htab *abbrevs; /* (offset, addr size, version) -> kept struct kdw_abbrevs * */
	/* The abbreviations of the unit decoded last (the one walked), and
	 * where other units' are decoded before they are kept: a unit's
	 * table is used while its DIEs are walked, and decoding them all
	 * into the arena was megabytes of fresh memory (libc: 6.6 MB for
	 * 1930 units), most of a cold run's page faults. */
	struct kdw_abbrevs scratch, tmp;
	const struct kdw_cu *walking; /* the unit kdw_walk_cu is in, or NULL */
	struct kdw_line_scratch line_scratch;
	struct form_sizes {
		int8_t size[0x2d];
		uint8_t addr_size;
		uint16_t version;
		bool valid;
	} form_sizes;
	struct {
		uint64_t low, high;
	} * ranges; /* one DIE's ranges */
	size_t nranges, ranges_cap;
	bool rnglists_base_read;
	uint64_t rnglists_default_base;
	bool aranges_bad; /* .debug_aranges was malformed: dropped whole */
	/* A stream reader (kdw_open_stream): no unit table; the units it was
	 * asked for, by offset (key: the offset's 8 bytes). */
	struct htab *stream_units;
	/* func_names' chains by origin offset, for the walk of generation
	 * origins_gen (an entry of another generation is empty). */
	struct origin_entry *origins;
	size_t norigins;
	uint32_t origins_gen;
};

enum slot {
	S_SIBLING,
	S_LOW_PC,
	S_HIGH_PC,
	S_RANGES,
	S_NAME,
	S_LINKAGE,
	S_MIPS_LINKAGE,
	S_DECL_LINE,
	S_ORIGIN,
	S_SPEC,
	S_CALL_FILE,
	S_CALL_LINE,
	S_ENTRY_PC,
	S_STMT_LIST,
	S_COMP_DIR,
	S_STR_OFFSETS_BASE,
	S_ADDR_BASE,
	S_RNGLISTS_BASE,
	S_LANGUAGE,
	NSLOTS
};

struct aval {
	uint16_t form;
	uint64_t u;
	const uint8_t *p; /* DW_FORM_string */
};

struct die {
	uint64_t offset;
	const struct kdw_abbrev *ab;
	uint32_t have; /* bit per slot */
	struct aval v[NSLOTS];
};

enum die_mode {
	DIE_FULL, /* every attribute of a slot */
	DIE_WALK, /* full for functions and scopes, else only DW_AT_sibling */
	DIE_SKIP, /* only DW_AT_sibling */
};

static inline int die_bad(struct kiln_error *e, uint64_t off, const char *what)
{
	return kiln_error_set(e, EINVAL, ".debug_info+0x%llx: %s", (unsigned long long)off, what);
}

static inline bool is_function(uint32_t tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

/* DIEs whose children may hold functions with code. In C a structure or
 * union holds members only (C++ may define member functions there), so a
 * C unit's are stepped over: in libc's units they were a quarter of the
 * DIEs read. */
static inline bool is_scope(const struct kdw_cu *cu, uint32_t tag)
{
	switch (tag) {
	case DW_TAG_lexical_block:
	case DW_TAG_namespace:
	case DW_TAG_module:
		return true;
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
		return !cu->lang_c;
	default:
		return false;
	}
}

static inline bool has(const struct die *die, enum slot s)
{
	return die->have & (1u << s);
}

/* dwarf_formudata for the forms a constant takes. */
static inline bool val_udata(const struct aval *v, uint64_t *out)
{
	switch (v->form) {
	case DW_FORM_data1:
	case DW_FORM_data2:
	case DW_FORM_data4:
	case DW_FORM_data8:
	case DW_FORM_udata:
	case DW_FORM_sdata:
	case DW_FORM_implicit_const:
		*out = v->u;
		return true;
	default:
		return false;
	}
}

static inline int unsupported(struct kiln_error *e, uint64_t off, unsigned form)
{
	return kiln_error_set(e, ENOTSUP, ".debug_info+0x%llx: form 0x%x left to libdw",
			      (unsigned long long)off, form);
}

/* A reference as a .debug_info offset. */
static inline int val_ref(const struct kdw_cu *cu, const struct aval *v, uint64_t die_off,
			  uint64_t *out, struct kiln_error *e)
{
	switch (v->form) {
	case DW_FORM_ref1:
	case DW_FORM_ref2:
	case DW_FORM_ref4:
	case DW_FORM_ref8:
	case DW_FORM_ref_udata:
		if (v->u >= cu->end - cu->offset)
			return die_bad(e, die_off, "reference past the end of its unit");
		*out = cu->offset + v->u;
		return 0;
	case DW_FORM_ref_addr:
		*out = v->u;
		return 0;
	default:
		return unsupported(e, die_off, v->form);
	}
}

/* The unit holding .debug_info offset off, or NULL. */
struct kdw_cu *kdw_cu_containing(struct kdw *d, uint64_t off);

/* The slot of attribute name, -1 when the reader keeps none for it. */
int kdw_slot_of(unsigned name);

/* cu's abbreviation table, decoded on first use (the scratch table, or a
 * kept copy for a unit reached from another's walk). 0 or an error (e set). */
int kdw_abbrevs_for(struct kdw *d, struct kdw_cu *cu, const struct kdw_abbrevs **out,
		    struct kiln_error *e);

/* Reads the DIE at the cursor (its abbreviation code first), its
 * attributes as mode says. Returns 1 for a DIE (in *die, the cursor after
 * its attributes), 0 for a null entry, or -errno (e set). */
int kdw_read_die(struct kdw *d, const struct kdw_cu *cu, const struct kdw_abbrevs *t,
		 struct kdw_cur *c, struct die *die, enum die_mode mode, struct kiln_error *e);

/* Reads cu's unit DIE once (its bases, comp_dir, stmt_list, language):
 * 0 or an error (e set). */
int kdw_cu_base(struct kdw *d, struct kdw_cu *cu, struct kiln_error *e);

/* The names and declaration line of the function DIE first: its own,
 * then those of its abstract_origin / specification chain (kept per walk
 * by the origin's offset), into *fn. 0 or -errno (e set). */
int kdw_func_names(struct kdw *d, struct kdw_cu *cu, const struct die *first, struct kdw_func *fn,
		   struct kiln_error *e);

/* The ranges of a function DIE, as dwarf_ranges gives them, into
 * d->ranges[0 .. d->nranges). 0 or -errno (e set). */
int kdw_die_ranges(struct kdw *d, const struct kdw_cu *cu, const struct die *die,
		   struct kiln_error *e);

#endif
