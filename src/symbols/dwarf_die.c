/*
 * dwarf_die.c — reading one DIE of Kiln's DWARF reader: attribute values
 * (strx/addrx/rnglistx through the unit's bases), a unit's base DIE,
 * function names through abstract_origin / specification (also across
 * units with DW_FORM_ref_addr) and code ranges (low_pc/high_pc, else
 * DW_AT_ranges in .debug_ranges / .debug_rnglists). Part of the DIE layer
 * (dwarf_die.h): above the abbreviations (dwarf_abbrev.c), below the walk
 * (dwarf_walk.c).
 *
 * The results mirror libdw's (dwarf_ranges / dwarf_attr_integrate): a
 * function's ranges are low_pc/high_pc when both read, otherwise
 * DW_AT_ranges; names and the declaration line come from the first DIE
 * having them along abstract_origin, else specification, at most 17 DIEs;
 * range-list offsets use the unit's base address (low_pc, else entry_pc,
 * else 0).
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "symbols/dwarf_die.h"

static int cu_cmp_off(const void *k, const void *e)
{
	uint64_t off = *(const uint64_t *)k;
	const struct kdw_cu *cu = e;

	return off < cu->offset ? -1 : off >= cu->end ? 1 : 0;
}

/* The unit holding .debug_info offset off. */
struct kdw_cu *kdw_cu_containing(struct kdw *d, uint64_t off)
{
	/* (A stream reader has no table.) */
	return d->ncus ? bsearch(&off, d->cus, d->ncus, sizeof(*d->cus), cu_cmp_off) : NULL;
}

/* Reads one value of form into *v (strings, offsets and indexes raw). */
static bool read_value(struct kdw_cur *c, const struct kdw_cu *cu, uint64_t form, int64_t implicit,
		       struct aval *v)
{
	v->form = (uint16_t)form;
	v->p = NULL;
	switch (form) {
	case DW_FORM_addr:
		v->u = kdw_fixed(c, cu->addr_size);
		break;
	case DW_FORM_data1:
	case DW_FORM_ref1:
	case DW_FORM_flag:
	case DW_FORM_strx1:
	case DW_FORM_addrx1:
		v->u = kdw_fixed(c, 1);
		break;
	case DW_FORM_data2:
	case DW_FORM_ref2:
	case DW_FORM_strx2:
	case DW_FORM_addrx2:
		v->u = kdw_fixed(c, 2);
		break;
	case DW_FORM_strx3:
	case DW_FORM_addrx3:
		v->u = kdw_fixed(c, 3);
		break;
	case DW_FORM_data4:
	case DW_FORM_ref4:
	case DW_FORM_strx4:
	case DW_FORM_addrx4:
	case DW_FORM_strp:
	case DW_FORM_line_strp:
	case DW_FORM_sec_offset:
		v->u = kdw_fixed(c, 4);
		break;
	case DW_FORM_ref_addr:
		v->u = kdw_fixed(c, cu->version == 2 ? cu->addr_size : 4);
		break;
	case DW_FORM_data8:
	case DW_FORM_ref8:
	case DW_FORM_ref_sig8:
		v->u = kdw_fixed(c, 8);
		break;
	case DW_FORM_udata:
	case DW_FORM_ref_udata:
	case DW_FORM_strx:
	case DW_FORM_addrx:
	case DW_FORM_rnglistx:
	case DW_FORM_loclistx:
		v->u = kdw_uleb(c);
		break;
	case DW_FORM_sdata:
		v->u = (uint64_t)kdw_sleb(c);
		break;
	case DW_FORM_implicit_const:
		v->u = (uint64_t)implicit;
		break;
	case DW_FORM_flag_present:
		v->u = 1;
		break;
	case DW_FORM_string:
		v->p = (const uint8_t *)kdw_cstr(c);
		break;
	case DW_FORM_indirect: {
		uint64_t f = kdw_uleb(c);

		if (c->bad || f == DW_FORM_indirect || f == DW_FORM_implicit_const)
			return false;
		return read_value(c, cu, f, 0, v);
	}
	default:
		/* Blocks and the rest: skipped, kept as "some other form". */
		return kdw_form_skip(c, form, cu->addr_size, cu->version);
	}
	return !c->bad;
}

/* The little-endian value of n (1, 2, 4 or 8) bytes at p. */
static inline uint64_t load_le(const uint8_t *p, int n)
{
	uint64_t v8;
	uint32_t v4;
	uint16_t v2;

	switch (n) {
	case 1:
		return *p;
	case 2:
		memcpy(&v2, p, 2);
		return v2;
	case 4:
		memcpy(&v4, p, 4);
		return v4;
	default:
		memcpy(&v8, p, 8);
		return v8;
	}
}

/* kdw_form_skip for a form of varying size, the usual ones (location
 * expressions, strings in line, LEB128 data) without its fixed-size
 * lookup and call: parameters' and variables' DIEs inside functions, which
 * the walk steps over attribute by attribute, are most such attributes. */
static inline bool skip_varying(struct kdw_cur *c, uint64_t form, const struct kdw_cu *cu)
{
	switch (form) {
	case DW_FORM_exprloc:
	case DW_FORM_block:
		kdw_skip(c, kdw_uleb(c));
		return !c->bad;
	case DW_FORM_udata:
	case DW_FORM_strx:
	case DW_FORM_addrx:
	case DW_FORM_loclistx:
	case DW_FORM_rnglistx:
		kdw_uleb(c);
		return !c->bad;
	case DW_FORM_sdata:
		kdw_sleb(c);
		return !c->bad;
	case DW_FORM_string:
		return kdw_cstr(c) != NULL;
	default:
		return kdw_form_skip(c, form, cu->addr_size, cu->version);
	}
}

/* read_die's attribute loop for a lazy abbreviation read in full (the
 * rare case: an origin or specification leading to a DIE the walk only
 * steps over), its specs decoded again from their bytes: they were decoded
 * once, so they are sound and in the simple encoding abbrevs_decode let
 * through (one-byte names and forms, fixed sizes). */
static __attribute__((noinline)) int read_lazy_attrs(struct kdw *d, const struct kdw_cu *cu,
						     const struct kdw_abbrevs *t, struct kdw_cur *c,
						     struct die *die, struct kiln_error *e)
{
	struct kdw_cur ac = {d->s.p[KDW_ABBREV] + t->offset + die->ab->first,
			     d->s.p[KDW_ABBREV] + d->s.size[KDW_ABBREV], false};

	for (uint32_t i = 0; i < die->ab->nattrs; i++) {
		unsigned name = kdw_u8(&ac), form = kdw_u8(&ac);
		int64_t implicit = form == DW_FORM_implicit_const ? kdw_sleb(&ac) : 0;
		int slot = kdw_slot_of(name);
		struct aval tmp;

		if (ac.bad)
			return die_bad(e, die->offset, "truncated abbreviation");
		if (!read_value(c, cu, form, implicit, &tmp))
			return die_bad(e, die->offset, "unknown form or truncated attribute");
		if (slot >= 0 && !(die->have & (1u << slot))) {
			die->v[slot] = tmp;
			die->have |= 1u << slot;
		}
	}
	return 1;
}

/* Reads the DIE at the cursor (its abbreviation code first). Returns 1 for
 * a DIE (in *die, the cursor after its attributes), 0 for a null entry,
 * or -errno. */
int kdw_read_die(struct kdw *d, const struct kdw_cu *cu, const struct kdw_abbrevs *t,
		 struct kdw_cur *c, struct die *die, enum die_mode mode, struct kiln_error *e)
{
	uint64_t code;

	die->offset = (uint64_t)(c->p - d->s.p[KDW_INFO]);
	code = kdw_uleb(c);
	if (c->bad)
		return die_bad(e, die->offset, "truncated DIE");
	if (code == 0)
		return 0;
	if (code >= t->ncodes || !t->by_code[code].defined)
		return die_bad(e, die->offset, "unknown abbreviation code");
	die->ab = &t->by_code[code];
	die->have = 0;
	if (mode == DIE_WALK && !die->ab->walk_full)
		mode = DIE_SKIP;
	if (mode == DIE_SKIP && die->ab->fixed >= 0) {
		if (die->ab->sib_at >= 0 && die->ab->children) {
			struct kdw_cur sc = {c->p + die->ab->sib_at, c->end, false};

			/* DW_FORM_ref4, what compilers write, read in line
			 * (read_value's call was a tenth of read_die's work). */
			if (die->ab->sib_form == DW_FORM_ref4 && sc.end - sc.p >= 4) {
				uint32_t v;

				memcpy(&v, sc.p, 4);
				die->v[S_SIBLING] = (struct aval){DW_FORM_ref4, v, NULL};
			} else if (!read_value(&sc, cu, die->ab->sib_form, 0, &die->v[S_SIBLING])) {
				return die_bad(e, die->offset, "truncated DW_AT_sibling");
			}
			die->have = 1u << S_SIBLING;
		}
		kdw_skip(c, (uint64_t)die->ab->fixed);
		return c->bad ? die_bad(e, die->offset, "DIE past the end of its unit") : 1;
	}
	/* (A lazy abbreviation is fixed-size and no function: only DIE_FULL
	 * gets here with one.) */
	if (die->ab->lazy)
		return read_lazy_attrs(d, cu, t, c, die, e);
	for (uint32_t i = 0; i < die->ab->nattrs; i++) {
		const struct kdw_spec *sp = &t->specs[die->ab->first + i];
		int slot = mode != DIE_SKIP || sp->slot == S_SIBLING ? sp->slot : -1;
		struct aval tmp;

		if (slot < 0 || (die->have & (1u << slot))) {
			if (sp->size >= 0) {
				if ((size_t)(c->end - c->p) < (size_t)sp->size)
					return die_bad(e, die->offset, "truncated attribute");
				c->p += sp->size;
			} else if (!skip_varying(c, sp->form, cu)) {
				return die_bad(e, die->offset,
					       "unknown form or truncated attribute");
			}
			continue;
		}
		/* Values of 1, 2, 4 or 8 bytes (most: addresses, strp,
		 * references, data) in line; read_value reads these forms so
		 * and the rest its way. (The other forms of these sizes, which
		 * read_value steps over, keep their form: no reader of a slot
		 * takes a value of theirs.) */
		if (sp->size == 1 || sp->size == 2 || sp->size == 4 || sp->size == 8) {
			if ((size_t)(c->end - c->p) < (size_t)sp->size)
				return die_bad(e, die->offset, "truncated attribute");
			tmp = (struct aval){sp->form, load_le(c->p, sp->size), NULL};
			c->p += sp->size;
		} else if (!read_value(c, cu, sp->form, sp->implicit, &tmp)) {
			return die_bad(e, die->offset, "unknown form or truncated attribute");
		}
		die->v[slot] = tmp;
		die->have |= 1u << slot;
	}
	return 1;
}

/* A string value into *out; -errno with e set when it cannot be read. */
static int val_string(struct kdw *d, const struct kdw_cu *cu, const struct aval *v,
		      uint64_t die_off, const char **out, struct kiln_error *e)
{
	const char *s = NULL;

	switch (v->form) {
	case DW_FORM_string:
		s = (const char *)v->p;
		break;
	case DW_FORM_strp:
		s = kdw_str_at(&d->s, KDW_STR, v->u);
		break;
	case DW_FORM_line_strp:
		s = kdw_str_at(&d->s, KDW_LINE_STR, v->u);
		break;
	case DW_FORM_strx:
	case DW_FORM_strx1:
	case DW_FORM_strx2:
	case DW_FORM_strx3:
	case DW_FORM_strx4: {
		uint64_t at = cu->str_offsets_base + v->u * 4;
		struct kdw_cur c;

		if (v->u > UINT64_MAX / 8 || at < cu->str_offsets_base ||
		    at + 4 > d->s.size[KDW_STR_OFFSETS])
			break;
		c = (struct kdw_cur){d->s.p[KDW_STR_OFFSETS] + at,
				     d->s.p[KDW_STR_OFFSETS] + d->s.size[KDW_STR_OFFSETS], false};
		s = kdw_str_at(&d->s, KDW_STR, kdw_fixed(&c, 4));
		break;
	}
	default:
		return unsupported(e, die_off, v->form);
	}
	*out = s;
	return s ? 0 : die_bad(e, die_off, "string offset out of range");
}

/* Entry idx of .debug_addr for cu. */
static bool addrx(struct kdw *d, const struct kdw_cu *cu, uint64_t idx, uint64_t *out)
{
	uint64_t at = cu->addr_base + idx * cu->addr_size;
	struct kdw_cur c;

	if (idx > UINT64_MAX / 16 || at < cu->addr_base || at + cu->addr_size > d->s.size[KDW_ADDR])
		return false;
	c = (struct kdw_cur){d->s.p[KDW_ADDR] + at, d->s.p[KDW_ADDR] + d->s.size[KDW_ADDR], false};
	*out = kdw_fixed(&c, cu->addr_size);
	return !c.bad;
}

/* dwarf_formaddr. */
static bool val_addr(struct kdw *d, const struct kdw_cu *cu, const struct aval *v, uint64_t *out)
{
	switch (v->form) {
	case DW_FORM_addr:
		*out = v->u;
		return true;
	case DW_FORM_addrx:
	case DW_FORM_addrx1:
	case DW_FORM_addrx2:
	case DW_FORM_addrx3:
	case DW_FORM_addrx4:
		return addrx(d, cu, v->u, out);
	default:
		return false;
	}
}

/* The unit DIE's attributes the others depend on (read once per unit). */
int kdw_cu_base(struct kdw *d, struct kdw_cu *cu, struct kiln_error *e)
{
	const struct kdw_abbrevs *t;
	struct kdw_cur c;
	struct die die;
	int rc;

	if (cu->base_read)
		return cu->base_ok ? 0
				   : kiln_error_set(e, EINVAL, ".debug_info+0x%llx: bad unit",
						    (unsigned long long)cu->offset);
	cu->base_read = true;
	if (!cu->supported)
		return kiln_error_set(e, ENOTSUP, ".debug_info+0x%llx: unit kind left to libdw",
				      (unsigned long long)cu->offset);
	rc = kdw_abbrevs_for(d, cu, &t, e);
	if (rc < 0)
		return rc;
	c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end, false};
	rc = kdw_read_die(d, cu, t, &c, &die, DIE_FULL, e);
	if (rc <= 0)
		return rc < 0 ? rc : die_bad(e, cu->die_offset, "unit without a DIE");
	/* Bases first: the others may be strx / addrx. */
	/* libdw's defaults: string offsets after a v5 table's header, no
	 * address base, the rnglists base found when it is needed. */
	cu->str_offsets_base = cu->version >= 5 ? 8 : 0;
	if (has(&die, S_STR_OFFSETS_BASE))
		cu->str_offsets_base = die.v[S_STR_OFFSETS_BASE].u;
	cu->addr_base = has(&die, S_ADDR_BASE) ? die.v[S_ADDR_BASE].u : 0;
	if (has(&die, S_LANGUAGE)) {
		uint64_t lang;

		/* C89, C, C99, C11, C17 */
		cu->lang_c = val_udata(&die.v[S_LANGUAGE], &lang) &&
			     (lang == DW_LANG_C89 || lang == DW_LANG_C || lang == DW_LANG_C99 ||
			      lang == DW_LANG_C11 || lang == 0x2c);
	}
	cu->rnglists_base = has(&die, S_RNGLISTS_BASE) ? die.v[S_RNGLISTS_BASE].u : 0;
	if (!has(&die, S_LOW_PC) || !val_addr(d, cu, &die.v[S_LOW_PC], &cu->low_pc))
		if (!has(&die, S_ENTRY_PC) || !val_addr(d, cu, &die.v[S_ENTRY_PC], &cu->low_pc))
			cu->low_pc = 0;
	if (has(&die, S_STMT_LIST)) {
		const struct aval *v = &die.v[S_STMT_LIST];

		if (v->form == DW_FORM_sec_offset || v->form == DW_FORM_data4 ||
		    v->form == DW_FORM_data8) {
			cu->has_stmt_list = true;
			cu->stmt_list = v->u;
		}
	}
	if (has(&die, S_COMP_DIR) &&
	    val_string(d, cu, &die.v[S_COMP_DIR], die.offset, &cu->comp_dir, NULL) < 0)
		cu->comp_dir = NULL; /* as dwarf_formstring failing */
	cu->base_ok = true;
	return 0;
}

/* --- names through abstract_origin / specification -------------------------- */

/* What a chain of DIEs along abstract_origin / specification names: each
 * attribute from the first DIE having it (libdw searches the chain once
 * per attribute: linkage_name, then MIPS_linkage_name, then name, then
 * decl_line). */
struct chain_names {
	const char *link, *name;
	int64_t decl_line;
	bool got_link, got_name, got_decl, decl_ok;
	struct aval mips;
	const struct kdw_cu *mips_cu;
	uint64_t mips_off;
};

#define ORIGIN_BITS  8
#define ORIGIN_SLOTS (1u << ORIGIN_BITS)

struct origin_entry {
	uint64_t ref;
	uint32_t gen; /* 0: never used (generations start at 1) */
	struct chain_names names;
};

/* The DIE at ref (an offset in .debug_info), referred to by from in *cu,
 * into *out; *cu becomes the unit holding it. */
static int read_ref(struct kdw *d, struct kdw_cu **cu, const struct die *from, uint64_t ref,
		    struct die *out, struct kiln_error *e)
{
	const struct kdw_abbrevs *t;
	struct kdw_cur c;
	int rc;

	if (ref < (*cu)->die_offset || ref >= (*cu)->end) {
		struct kdw_cu *to = kdw_cu_containing(d, ref);

		if (!to || ref < to->die_offset)
			return die_bad(e, from->offset, "reference to no DIE");
		rc = kdw_cu_base(d, to, e);
		if (rc < 0)
			return rc;
		*cu = to;
	}
	c = (struct kdw_cur){d->s.p[KDW_INFO] + ref, d->s.p[KDW_INFO] + (*cu)->end, false};
	rc = kdw_abbrevs_for(d, *cu, &t, e);
	if (rc < 0)
		return rc;
	rc = kdw_read_die(d, *cu, t, &c, out, DIE_FULL, e);
	if (rc <= 0)
		return rc < 0 ? rc : die_bad(e, ref, "reference to a null entry");
	return 0;
}

/* Adds to *r what die (in cu) and the DIEs it leads to, at most hops more,
 * name that r does not have yet. */
static int chain_names(struct kdw *d, struct kdw_cu *cu, const struct die *die, int hops,
		       struct chain_names *r, struct kiln_error *e)
{
	struct die other;
	int rc;

	for (int hop = 0;; hop++) {
		uint64_t ref = 0;

		if (!r->got_link && has(die, S_LINKAGE)) {
			rc = val_string(d, cu, &die->v[S_LINKAGE], die->offset, &r->link, e);
			if (rc < 0)
				return rc;
			r->got_link = true;
		}
		if (!r->mips_cu && has(die, S_MIPS_LINKAGE)) {
			r->mips = die->v[S_MIPS_LINKAGE];
			r->mips_cu = cu;
			r->mips_off = die->offset;
		}
		if (!r->got_name && has(die, S_NAME)) {
			rc = val_string(d, cu, &die->v[S_NAME], die->offset, &r->name, e);
			if (rc < 0)
				return rc;
			r->got_name = true;
		}
		if (!r->got_decl && has(die, S_DECL_LINE)) {
			uint64_t v;

			if (val_udata(&die->v[S_DECL_LINE], &v)) {
				r->decl_line = (int64_t)v;
				r->decl_ok = true;
			}
			r->got_decl = true;
		}
		if (hop == hops || (!has(die, S_ORIGIN) && !has(die, S_SPEC)))
			return 0;
		rc = val_ref(cu, &die->v[has(die, S_ORIGIN) ? S_ORIGIN : S_SPEC], die->offset, &ref,
			     e);
		if (rc < 0)
			return rc;
		rc = read_ref(d, &cu, die, ref, &other, e);
		if (rc < 0)
			return rc;
		die = &other;
	}
}

/* The chain names kept for ref in this walk, or NULL. */
static const struct chain_names *origin_get(const struct kdw *d, uint64_t ref)
{
	size_t i = (size_t)((ref * 0x9e3779b97f4a7c15ull) >> (64 - ORIGIN_BITS));

	if (!d->origins)
		return NULL;
	for (;; i = (i + 1) & (ORIGIN_SLOTS - 1)) {
		const struct origin_entry *o = &d->origins[i];

		if (o->gen != d->origins_gen)
			return NULL;
		if (o->ref == ref)
			return &o->names;
	}
}

/* Keeps *r for ref (not kept yet) in this walk; returns the copy, or r
 * itself when the table is half full or cannot be made. */
static const struct chain_names *origin_put(struct kdw *d, uint64_t ref,
					    const struct chain_names *r)
{
	size_t i = (size_t)((ref * 0x9e3779b97f4a7c15ull) >> (64 - ORIGIN_BITS));

	if (!d->origins && !(d->origins = calloc(ORIGIN_SLOTS, sizeof(*d->origins))))
		return r;
	if (2 * (d->norigins + 1) > ORIGIN_SLOTS)
		return r;
	while (d->origins[i].gen == d->origins_gen)
		i = (i + 1) & (ORIGIN_SLOTS - 1);
	d->origins[i] = (struct origin_entry){ref, d->origins_gen, *r};
	d->norigins++;
	return &d->origins[i].names;
}

/* The names of the function DIE first: its own, then its chain's. The
 * chain from its origin (or specification) is kept per walk, keyed by
 * the origin's offset: every inlined copy of a function leads to the same
 * origin, which was read again for each (kiln's binary: 1836 reads of 461
 * origins). A chain that fails is not kept: first's names are then looked
 * up the one-pass way, which fails (or not) exactly as before. */
int kdw_func_names(struct kdw *d, struct kdw_cu *cu, const struct die *first, struct kdw_func *fn,
		   struct kiln_error *e)
{
	struct chain_names r = {0};
	int rc = chain_names(d, cu, first, 0, &r, e);

	if (rc < 0)
		return rc;
	if (has(first, S_ORIGIN) || has(first, S_SPEC)) {
		const struct chain_names *tail;
		struct chain_names t = {0};
		struct kiln_error te = {0};
		struct kdw_cu *tcu = cu;
		struct die other;
		uint64_t ref = 0;

		rc = val_ref(cu, &first->v[has(first, S_ORIGIN) ? S_ORIGIN : S_SPEC], first->offset,
			     &ref, e);
		if (rc < 0)
			return rc;
		tail = origin_get(d, ref);
		if (!tail && read_ref(d, &tcu, first, ref, &other, &te) == 0 &&
		    chain_names(d, tcu, &other, MAX_CHAIN - 1, &t, &te) == 0)
			tail = origin_put(d, ref, &t);
		if (tail) {
			if (!r.got_link && tail->got_link) {
				r.link = tail->link;
				r.got_link = true;
			}
			if (!r.mips_cu && tail->mips_cu) {
				r.mips = tail->mips;
				r.mips_cu = tail->mips_cu;
				r.mips_off = tail->mips_off;
			}
			if (!r.got_name && tail->got_name) {
				r.name = tail->name;
				r.got_name = true;
			}
			if (!r.got_decl && tail->got_decl) {
				r.decl_line = tail->decl_line;
				r.decl_ok = tail->decl_ok;
				r.got_decl = true;
			}
		} else {
			memset(&r, 0, sizeof(r));
			rc = chain_names(d, cu, first, MAX_CHAIN, &r, e);
			if (rc < 0)
				return rc;
		}
	}
	if (r.got_link)
		fn->linkage_name = r.link;
	if (r.got_name)
		fn->name = r.name;
	if (r.decl_ok)
		fn->decl_line = r.decl_line;
	if (!r.got_link && r.mips_cu)
		return val_string(d, r.mips_cu, &r.mips, r.mips_off, &fn->linkage_name, e);
	return 0;
}

/* --- ranges --------------------------------------------------------------- */

#define MAX_DIE_RANGES 65536 /* more in one DIE: malformed or forged */

static int add_range(struct kdw *d, uint64_t low, uint64_t high)
{
	if (d->nranges >= MAX_DIE_RANGES)
		return -E2BIG;
	if (d->nranges == d->ranges_cap) {
		size_t ncap = d->ranges_cap ? d->ranges_cap * 2 : 64;
		void *n = realloc(d->ranges, ncap * sizeof(*d->ranges));

		if (!n)
			return -ENOMEM;
		d->ranges = n;
		d->ranges_cap = ncap;
	}
	d->ranges[d->nranges].low = low;
	d->ranges[d->nranges].high = high;
	d->nranges++;
	return 0;
}

/* libdw's default rnglists base when the unit names none: right after the
 * first table's header, if that header is sound. */
static uint64_t rnglists_default(struct kdw *d)
{
	if (!d->rnglists_base_read) {
		struct kdw_cur c = {d->s.p[KDW_RNGLISTS],
				    d->s.p[KDW_RNGLISTS] + d->s.size[KDW_RNGLISTS], false};
		uint64_t len = kdw_fixed(&c, 4);
		uint16_t version = (uint16_t)kdw_fixed(&c, 2);
		uint8_t asz = kdw_u8(&c), seg = kdw_u8(&c);
		uint32_t count = (uint32_t)kdw_fixed(&c, 4);

		d->rnglists_base_read = true;
		if (!c.bad && len != 0xffffffff && len >= 8 && len <= d->s.size[KDW_RNGLISTS] - 4 &&
		    version == 5 && (asz == 4 || asz == 8) && seg == 0 && count > 0 &&
		    len - 8 >= (uint64_t)count * 4)
			d->rnglists_default_base = 12;
	}
	return d->rnglists_default_base;
}

/* The ranges of DW_AT_ranges value v into d->ranges (dwarf_ranges). */
static int read_ranges(struct kdw *d, const struct kdw_cu *cu, const struct aval *v,
		       uint64_t die_off, struct kiln_error *e)
{
	bool v5 = cu->version >= 5;
	enum kdw_sec sec = v5 ? KDW_RNGLISTS : KDW_RANGES;
	uint64_t off, base = cu->low_pc;
	size_t size = d->s.size[sec];
	struct kdw_cur c;

	if (v->form == DW_FORM_rnglistx) {
		uint64_t rb = cu->rnglists_base ? cu->rnglists_base : rnglists_default(d);
		struct kdw_cur oc;

		if (!v5 || size < 4 || rb > size - 4 || v->u > (size - 4 - rb) / 4)
			return die_bad(e, die_off, "rnglistx index out of range");
		oc = (struct kdw_cur){d->s.p[sec] + rb + v->u * 4, d->s.p[sec] + size, false};
		off = kdw_fixed(&oc, 4) + rb;
	} else if (v->form == DW_FORM_sec_offset ||
		   (!v5 && (v->form == DW_FORM_data4 || v->form == DW_FORM_data8))) {
		off = v->u;
	} else {
		return unsupported(e, die_off, v->form);
	}
	if (off >= size)
		return kiln_error_set(e, EINVAL,
				      "%s: offset 0x%llx (from .debug_info+0x%llx) past "
				      "the end",
				      kdw_sec_names[sec], (unsigned long long)off,
				      (unsigned long long)die_off);
	c = (struct kdw_cur){d->s.p[sec] + off, d->s.p[sec] + size, false};
	for (;;) {
		uint64_t b, en;
		const uint8_t *at = c.p;

		if (!v5) {
			uint64_t escape = cu->addr_size == 8 ? UINT64_MAX : 0xffffffffu;

			b = kdw_fixed(&c, cu->addr_size);
			en = kdw_fixed(&c, cu->addr_size);
			if (c.bad)
				goto bad;
			if (b == escape) {
				if (en == escape)
					goto bad;
				base = en;
				continue;
			}
			if (b == 0 && en == 0)
				return 0;
			if (add_range(d, b + base, en + base) < 0)
				goto bad;
			continue;
		}
		uint8_t kind = kdw_u8(&c);
		uint64_t i1, i2;

		switch (kind) {
		case DW_RLE_end_of_list:
			return c.bad ? -EINVAL : 0;
		case DW_RLE_base_addressx:
			i1 = kdw_uleb(&c);
			if (c.bad || !addrx(d, cu, i1, &base))
				goto bad;
			continue;
		case DW_RLE_startx_endx:
			i1 = kdw_uleb(&c);
			i2 = kdw_uleb(&c);
			if (c.bad || !addrx(d, cu, i1, &b) || !addrx(d, cu, i2, &en))
				goto bad;
			break;
		case DW_RLE_startx_length:
			i1 = kdw_uleb(&c);
			i2 = kdw_uleb(&c);
			if (c.bad || !addrx(d, cu, i1, &b))
				goto bad;
			en = b + i2;
			break;
		case DW_RLE_offset_pair:
			b = kdw_uleb(&c) + base;
			en = kdw_uleb(&c) + base;
			break;
		case DW_RLE_base_address:
			base = kdw_fixed(&c, cu->addr_size);
			if (c.bad)
				goto bad;
			continue;
		case DW_RLE_start_end:
			b = kdw_fixed(&c, cu->addr_size);
			en = kdw_fixed(&c, cu->addr_size);
			break;
		case DW_RLE_start_length:
			b = kdw_fixed(&c, cu->addr_size);
			en = b + kdw_uleb(&c);
			break;
		default:
			goto bad;
		}
		if (c.bad || add_range(d, b, en) < 0)
			goto bad;
		continue;
bad:
		return kiln_error_set(e, EINVAL,
				      "%s+0x%llx: bad range list entry (for "
				      ".debug_info+0x%llx)",
				      kdw_sec_names[sec], (unsigned long long)(at - d->s.p[sec]),
				      (unsigned long long)die_off);
	}
}

/* The ranges of a function DIE, as dwarf_ranges gives them. */
int kdw_die_ranges(struct kdw *d, const struct kdw_cu *cu, const struct die *die,
		   struct kiln_error *e)
{
	uint64_t low, high;

	d->nranges = 0;
	if (has(die, S_LOW_PC) && has(die, S_HIGH_PC) && val_addr(d, cu, &die->v[S_LOW_PC], &low)) {
		if (val_addr(d, cu, &die->v[S_HIGH_PC], &high))
			return add_range(d, low, high);
		if (val_udata(&die->v[S_HIGH_PC], &high))
			return add_range(d, low, low + high);
	}
	if (!has(die, S_RANGES))
		return 0;
	return read_ranges(d, cu, &die->v[S_RANGES], die->offset, e);
}
