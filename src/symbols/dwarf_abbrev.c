/*
 * dwarf_abbrev.c — abbreviation tables of Kiln's DWARF reader: decoded per
 * unit (into a scratch table reused by the next unit; units reached by
 * reference from another's walk keep a copy, shared by units with the
 * same table), each attribute given its slot (the attributes the
 * symbolizer reads) and its size when fixed, so that the walk steps over
 * DIEs it does not look into in one step. Part of the DIE layer
 * (dwarf_die.h), above the forms (dwarf_form.h).
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "symbols/dwarf_die.h"

static int slot_of_switch(unsigned name);

/* The slot of each attribute name below 0x80, plus one (0: none). */
static const int8_t slot_table[0x80] = {
    [DW_AT_sibling] = S_SIBLING + 1,
    [DW_AT_low_pc] = S_LOW_PC + 1,
    [DW_AT_high_pc] = S_HIGH_PC + 1,
    [DW_AT_ranges] = S_RANGES + 1,
    [DW_AT_name] = S_NAME + 1,
    [DW_AT_linkage_name] = S_LINKAGE + 1,
    [DW_AT_decl_line] = S_DECL_LINE + 1,
    [DW_AT_abstract_origin] = S_ORIGIN + 1,
    [DW_AT_specification] = S_SPEC + 1,
    [DW_AT_call_file] = S_CALL_FILE + 1,
    [DW_AT_call_line] = S_CALL_LINE + 1,
    [DW_AT_entry_pc] = S_ENTRY_PC + 1,
    [DW_AT_stmt_list] = S_STMT_LIST + 1,
    [DW_AT_comp_dir] = S_COMP_DIR + 1,
    [DW_AT_str_offsets_base] = S_STR_OFFSETS_BASE + 1,
    [DW_AT_addr_base] = S_ADDR_BASE + 1,
    [DW_AT_rnglists_base] = S_RNGLISTS_BASE + 1,
    [DW_AT_language] = S_LANGUAGE + 1,
};

int kdw_slot_of(unsigned name)
{
	return name < sizeof(slot_table) ? slot_table[name] - 1 : slot_of_switch(name);
}

static int slot_of_switch(unsigned name)
{
	switch (name) {
	case DW_AT_sibling:
		return S_SIBLING;
	case DW_AT_low_pc:
		return S_LOW_PC;
	case DW_AT_high_pc:
		return S_HIGH_PC;
	case DW_AT_ranges:
		return S_RANGES;
	case DW_AT_name:
		return S_NAME;
	case DW_AT_linkage_name:
		return S_LINKAGE;
	case DW_AT_MIPS_linkage_name:
		return S_MIPS_LINKAGE;
	case DW_AT_decl_line:
		return S_DECL_LINE;
	case DW_AT_abstract_origin:
		return S_ORIGIN;
	case DW_AT_specification:
		return S_SPEC;
	case DW_AT_call_file:
		return S_CALL_FILE;
	case DW_AT_call_line:
		return S_CALL_LINE;
	case DW_AT_entry_pc:
		return S_ENTRY_PC;
	case DW_AT_stmt_list:
		return S_STMT_LIST;
	case DW_AT_comp_dir:
		return S_COMP_DIR;
	case DW_AT_str_offsets_base:
		return S_STR_OFFSETS_BASE;
	case DW_AT_addr_base:
	case DW_AT_GNU_addr_base:
		return S_ADDR_BASE;
	case DW_AT_language:
		return S_LANGUAGE;
	case DW_AT_rnglists_base:
		return S_RNGLISTS_BASE;
	default:
		return -1;
	}
}

/* kdw_form_fixed_size for the standard forms (below 0x2d) of one address
 * size and version, as a table: the decoder asks for each attribute. */
static const int8_t *form_sizes(struct form_sizes *fs, uint8_t addr_size, uint16_t version)
{
	if (!fs->valid || fs->addr_size != addr_size || fs->version != version) {
		for (unsigned f = 0; f < sizeof(fs->size); f++)
			fs->size[f] = (int8_t)kdw_form_fixed_size(f, addr_size, version);
		fs->addr_size = addr_size;
		fs->version = version;
		fs->valid = true;
	}
	return fs->size;
}

static inline void set_leaf_step(struct kdw_abbrev *a)
{
	int32_t step = a->leaf_fixed && a->fixed < INT32_MAX ? a->fixed + 1 : 0;

	a->leaf_step[0] = a->walk_full ? 0 : step;
	a->leaf_step[1] = step;
	a->sib_jump = a->children && a->fixed >= 0 && a->fixed < INT32_MAX && a->sib_at >= 0 &&
			      a->sib_form == DW_FORM_ref4
			  ? a->sib_at + 1
			  : 0;
}

/* Decodes cu's abbreviation table into the scratch table t, in one pass. */
static int abbrevs_decode(struct kdw *d, const struct kdw_cu *cu, struct kdw_abbrevs *t,
			  struct kiln_error *e)
{
	struct kdw_cur c = {d->s.p[KDW_ABBREV] + cu->abbrev_offset,
			    d->s.p[KDW_ABBREV] + d->s.size[KDW_ABBREV], false};
	const int8_t *sizes = form_sizes(&d->form_sizes, cu->addr_size, cu->version);
	size_t nspecs = 0, cap_specs = t->cap_specs;
	struct kdw_spec *specs = t->specs;
	uint32_t maxcode = 0, ndecls = 0;

	/* Only the codes the previous table used can be marked defined. */
	if (t->ncodes)
		memset(t->by_code, 0, t->ncodes * sizeof(*t->by_code));
	t->valid = false;
	t->ncodes = 0;
	for (;;) {
		uint64_t code = kdw_uleb(&c), tag, name, form;
		struct kdw_abbrev *a, dup;

		if (c.bad || code == 0)
			break;
		if (code > 65536)
			return kiln_error_set(e, ENOTSUP, ".debug_abbrev+0x%llx: code %llu",
					      (unsigned long long)cu->abbrev_offset,
					      (unsigned long long)code);
		if (code >= t->cap_codes &&
		    !kdw_grow(&t->by_code, &t->cap_codes, code + 1, sizeof(*t->by_code), 64, true))
			return kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
		if (code > maxcode) {
			maxcode = (uint32_t)code;
			t->ncodes = maxcode + 1u; /* what the next decode clears */
		}
		ndecls++;
		tag = kdw_uleb(&c);
		a = &t->by_code[code];
		if (a->defined) /* a repeated code: libdw keeps the first */
			a = &dup;
		a->tag = (uint32_t)tag;
		a->children = kdw_u8(&c) != 0;
		a->first = (uint32_t)nspecs;
		a->defined = true;
		a->lazy = false;
		/* An abbreviation the walk only steps over: its size and where
		 * its DW_AT_sibling is, from the specs' forms alone. Anything
		 * unusual (a multi-byte name or form, a form of varying or
		 * unknown size) goes the full way below from the start. */
		if (!is_function(a->tag) && a->tag != DW_TAG_compile_unit &&
		    a->tag != DW_TAG_partial_unit &&
		    (uint64_t)(c.p - d->s.p[KDW_ABBREV]) - cu->abbrev_offset < UINT32_MAX) {
			const uint8_t *attrs = c.p, *p = c.p, *end = c.end;
			int64_t fx = 0;
			int32_t sat = -1;
			uint16_t sform = 0;
			uint32_t na = 0;
			bool ok = false;

			/* (Locals only: no store per spec.) */
			while (end - p >= 2 && !((p[0] | p[1]) & 0x80)) {
				unsigned nm = p[0], fm = p[1];
				int n;

				p += 2;
				if ((nm | fm) == 0) {
					ok = fx <= INT32_MAX;
					break;
				}
				if (fm >= sizeof(d->form_sizes.size) || (n = sizes[fm]) < 0)
					break;
				if (fm == DW_FORM_implicit_const) { /* its value: one sleb128 */
					while (p < end && (*p & 0x80))
						p++;
					if (p++ >= end)
						break;
				}
				if (nm == DW_AT_sibling && sat < 0) {
					sat = (int32_t)fx;
					sform = (uint16_t)fm;
				}
				fx += n;
				na++;
			}
			if (ok) {
				c.p = p;
				a->first = (uint32_t)((uint64_t)(attrs - d->s.p[KDW_ABBREV]) -
						      cu->abbrev_offset);
				a->nattrs = na;
				a->fixed = (int32_t)fx;
				a->sib_at = sat;
				a->sib_form = sform;
				a->walk_full = false;
				a->leaf_fixed = !a->children;
				a->lazy = true;
				set_leaf_step(a);
				continue;
			}
		}
		/* The attribute loop is most of the decoding (libc: 240 specs
		 * per unit, every unit a table of its own): names and forms
		 * below 0x80 (nearly all) are read as two bytes, and the sums
		 * are kept in locals rather than stored through a. */
		int32_t fixed = 0, sib_at = -1;
		uint16_t sib_form = 0;
		uint32_t seen = 0; /* bit per slot */

		for (;;) {
			int64_t implicit = 0;
			int n, slot;

			if (c.end - c.p >= 2 && !((c.p[0] | c.p[1]) & 0x80)) {
				name = c.p[0];
				form = c.p[1];
				c.p += 2;
				if (name == 0 && form == 0)
					break;
			} else {
				name = kdw_uleb(&c);
				form = kdw_uleb(&c);
				if (c.bad || (name == 0 && form == 0))
					break;
				if (name > 0xffff || form > 0xffff)
					return kiln_error_set(
					    e, EINVAL,
					    ".debug_abbrev+0x%llx: attribute 0x%llx form "
					    "0x%llx out of range",
					    (unsigned long long)cu->abbrev_offset,
					    (unsigned long long)name, (unsigned long long)form);
			}
			if (form == DW_FORM_implicit_const) {
				implicit = kdw_sleb(&c);
				if (c.bad)
					break;
			}
			/* (specs and cap_specs in locals: the stores through
			 * specs could alias t's fields, which were reloaded
			 * per spec.) */
			if (nspecs >= cap_specs) {
				if (!kdw_grow(&t->specs, &t->cap_specs, nspecs + 1,
					      sizeof(*t->specs), 64, true))
					return kiln_error_set(e, ENOMEM,
							      "DWARF reader: out of memory");
				specs = t->specs;
				cap_specs = t->cap_specs;
			}
			n = form < sizeof(d->form_sizes.size)
				? sizes[form]
				: kdw_form_fixed_size(form, cu->addr_size, cu->version);
			slot = kdw_slot_of((unsigned)name);
			specs[nspecs++] = (struct kdw_spec){(uint16_t)name, (uint16_t)form,
							    (int8_t)slot, (int8_t)n, implicit};
			if (slot == S_SIBLING && sib_at < 0 && fixed >= 0 && n >= 0) {
				sib_at = fixed;
				sib_form = (uint16_t)form;
			}
			fixed = fixed < 0 || n < 0 ? -1 : fixed + n;
			if (slot >= 0)
				seen |= 1u << slot;
		}
		a->fixed = fixed;
		a->sib_at = sib_at;
		a->sib_form = sib_form;
		a->nattrs = (uint32_t)nspecs - a->first;
		a->walk_full = is_function(a->tag) &&
			       (((seen & (1u << S_LOW_PC)) && (seen & (1u << S_HIGH_PC))) ||
				(seen & (1u << S_RANGES)));
		a->leaf_fixed = !a->children && fixed >= 0;
		set_leaf_step(a);
	}
	if (c.bad)
		return kiln_error_set(e, EINVAL, ".debug_abbrev+0x%llx: truncated table",
				      (unsigned long long)cu->abbrev_offset);
	/* Sparse codes (never written by compilers, easy to forge in an
	 * upload) would cost memory out of proportion to the bytes read. */
	if (maxcode > 16u * ndecls + 256)
		return kiln_error_set(e, ENOTSUP, ".debug_abbrev+0x%llx: sparse codes (%u for %u)",
				      (unsigned long long)cu->abbrev_offset, maxcode, ndecls);
	t->ncodes = maxcode + 1u;
	t->offset = cu->abbrev_offset;
	t->version = cu->version;
	t->addr_size = cu->addr_size;
	t->valid = true;
	return 0;
}

static bool abbrevs_match(const struct kdw_abbrevs *t, const struct kdw_cu *cu)
{
	return t->valid && t->offset == cu->abbrev_offset && t->version == cu->version &&
	       t->addr_size == cu->addr_size;
}

/* cu's abbreviation table. The walked unit's (and any unit's outside a
 * walk) is the scratch table, decoded again when it holds another's;
 * units reached from a walk by reference get a copy kept in the arena
 * (shared by units with the same table), so that the walk's stays. */
int kdw_abbrevs_for(struct kdw *d, struct kdw_cu *cu, const struct kdw_abbrevs **out,
		    struct kiln_error *e)
{
	struct {
		uint64_t off;
		uint16_t version;
		uint8_t addr_size;
	} key;
	struct kdw_abbrevs *t;
	size_t nspecs = 0;
	uint64_t v;
	int rc;

	if (cu->abbrevs) {
		*out = cu->abbrevs;
		return 0;
	}
	if (abbrevs_match(&d->scratch, cu)) {
		*out = &d->scratch;
		return 0;
	}
	if (!d->walking || d->walking == cu) {
		*out = &d->scratch;
		return abbrevs_decode(d, cu, &d->scratch, e);
	}
	memset(&key, 0, sizeof(key));
	key.off = cu->abbrev_offset;
	key.version = cu->version;
	key.addr_size = cu->addr_size;
	if (htab_get(d->abbrevs, &key, sizeof(key), &v)) {
		cu->abbrevs = (struct kdw_abbrevs *)(uintptr_t)v;
		*out = cu->abbrevs;
		return 0;
	}
	rc = abbrevs_decode(d, cu, &d->tmp, e);
	if (rc < 0)
		return rc;
	for (uint32_t k = 0; k < d->tmp.ncodes; k++) {
		const struct kdw_abbrev *a = &d->tmp.by_code[k];

		if (a->defined && !a->lazy && a->first + a->nattrs > nspecs)
			nspecs = a->first + a->nattrs;
	}
	t = arena_calloc(d->arena, 1, sizeof(*t));
	if (!t || !(t->by_code = arena_alloc(d->arena, d->tmp.ncodes * sizeof(*t->by_code))) ||
	    !(t->specs = arena_alloc(d->arena, (nspecs ? nspecs : 1) * sizeof(*t->specs))) ||
	    htab_put(d->abbrevs, &key, sizeof(key), (uint64_t)(uintptr_t)t) < 0)
		return kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
	memcpy(t->by_code, d->tmp.by_code, d->tmp.ncodes * sizeof(*t->by_code));
	if (nspecs)
		memcpy(t->specs, d->tmp.specs, nspecs * sizeof(*t->specs));
	t->ncodes = d->tmp.ncodes;
	t->offset = d->tmp.offset;
	t->version = d->tmp.version;
	t->addr_size = d->tmp.addr_size;
	t->valid = true;
	cu->abbrevs = t;
	*out = t;
	return 0;
}
