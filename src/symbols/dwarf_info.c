/*
 * dwarf_info.c — unit headers, aranges, abbreviations and the function-DIE
 * walk of the symbolizer's own DWARF reader (see dwarf_reader.h).
 *
 * Opening reads only the unit headers (a hop from length to length) and
 * .debug_aranges. A CU is decoded when an address first falls into it:
 * its abbreviation table (into a scratch table reused by the next unit;
 * units reached by reference from another's walk keep a copy, shared by
 * units with the same table), its unit DIE (the bases strx/addrx/rnglistx
 * need, comp_dir, stmt_list, language), then its DIE tree once. Only
 * function DIEs whose abbreviation has code ranges have their attributes
 * read; DIEs the walk does not look into are skipped whole: by
 * DW_AT_sibling when there is one, else attribute by attribute, in one
 * step when the abbreviation's attributes all have fixed sizes.
 *
 * The walk mirrors what the symbolizer's libdw index did (dwarf_child /
 * dwarf_siblingof / dwarf_ranges / dwarf_attr_integrate) so answers stay
 * the same: a function's ranges are low_pc/high_pc when both read,
 * otherwise DW_AT_ranges; names and the declaration line come from the
 * first DIE having them along abstract_origin, else specification, at most
 * 17 DIEs; range-list offsets use the unit's base address (low_pc, else
 * entry_pc, else 0). One difference, with the same answers: a C unit's
 * structures and unions are not entered (C puts no functions there).
 *
 * Not read here (the unit is "unsupported" or the walk returns -ENOTSUP and
 * libdw takes over for that CU): 64-bit DWARF, type / skeleton / split
 * units, DW_FORM_ref_sig8, dwz's DW_FORM_GNU_ref_alt / GNU_strp_alt and
 * supplementary-file forms, GNU split-DWARF index forms.
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
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
	 * One load and test per DIE instead of four fields' (a fifth of the
	 * walk's instructions on libc). */
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

/* --- opening --------------------------------------------------------------- */

static int cu_cmp_off(const void *k, const void *e)
{
	uint64_t off = *(const uint64_t *)k;
	const struct kdw_cu *cu = e;

	return off < cu->offset ? -1 : off >= cu->end ? 1 : 0;
}

/* The unit holding .debug_info offset off. */
static struct kdw_cu *cu_containing(struct kdw *d, uint64_t off)
{
	/* (A stream reader has no table.) */
	return d->ncus ? bsearch(&off, d->cus, d->ncus, sizeof(*d->cus), cu_cmp_off) : NULL;
}

/* The number of units: a hop from length to length (the array is then
 * allocated once, in the arena). */
static size_t count_units(const struct kdw *d)
{
	const uint8_t *sec = d->s.p[KDW_INFO];
	size_t size = d->s.size[KDW_INFO], n = 0;
	uint64_t off = 0;

	while (off + 4 <= size) {
		struct kdw_cur c = {sec + off, sec + size, false};
		uint64_t len = kdw_fixed(&c, 4);

		if (len == 0xffffffff)
			len = kdw_fixed(&c, 8);
		if (c.bad || len > (uint64_t)(c.end - c.p))
			break;
		n++;
		off = (uint64_t)(c.p - sec) + len;
	}
	return n;
}

/* The header of the unit at off into *out, reading no byte of .debug_info
 * at or past limit (at most its size): 1, 0 when the unit runs past limit
 * but not past the section (a stream reader: not all there yet), or
 * -EINVAL when there is no unit at off. */
static int unit_header(const struct kdw *d, uint64_t off, size_t limit, struct kdw_cu *out,
		       struct kiln_error *e)
{
	const uint8_t *sec = d->s.p[KDW_INFO];
	size_t size = d->s.size[KDW_INFO];
	struct kdw_cur c;
	struct kdw_cu cu = {.offset = off};
	uint64_t len = 0;
	bool dwarf64 = false;

	if (off >= limit) {
		if (limit < size)
			return 0;
		return kiln_error_set(e, EINVAL, ".debug_info+0x%llx: no unit there",
				      (unsigned long long)off);
	}
	c = (struct kdw_cur){sec + off, sec + limit, false};
	len = kdw_fixed(&c, 4);
	dwarf64 = len == 0xffffffff;
	if (dwarf64)
		len = kdw_fixed(&c, 8);
	if (c.bad && limit < size)
		return 0;
	if (c.bad || len > (uint64_t)(sec + size - c.p) || (!dwarf64 && len >= 0xfffffff0))
		return kiln_error_set(e, EINVAL,
				      ".debug_info+0x%llx: unit length 0x%llx "
				      "past the end of the section",
				      (unsigned long long)off, (unsigned long long)len);
	if (len > (uint64_t)(c.end - c.p))
		return 0;
	cu.end = (uint64_t)(c.p - sec) + len;
	c.end = c.p + len;
	cu.version = (uint16_t)kdw_fixed(&c, 2);
	if (cu.version >= 5) {
		cu.unit_type = kdw_u8(&c);
		cu.addr_size = kdw_u8(&c);
		cu.abbrev_offset = kdw_fixed(&c, dwarf64 ? 8 : 4);
		if (cu.unit_type == DW_UT_skeleton || cu.unit_type == DW_UT_split_compile)
			kdw_skip(&c, 8);
		else if (cu.unit_type == DW_UT_type || cu.unit_type == DW_UT_split_type)
			kdw_skip(&c, dwarf64 ? 16 : 12);
	} else {
		cu.unit_type = DW_UT_compile;
		cu.abbrev_offset = kdw_fixed(&c, dwarf64 ? 8 : 4);
		cu.addr_size = kdw_u8(&c);
	}
	cu.die_offset = (uint64_t)(c.p - sec);
	cu.supported = !c.bad && !dwarf64 && cu.version >= 2 && cu.version <= 5 &&
		       (cu.unit_type == DW_UT_compile || cu.unit_type == DW_UT_partial) &&
		       (cu.addr_size == 4 || cu.addr_size == 8) &&
		       cu.abbrev_offset < d->s.size[KDW_ABBREV];
	*out = cu;
	return 1;
}

static int read_units(struct kdw *d, struct kiln_error *e)
{
	size_t size = d->s.size[KDW_INFO], cap = count_units(d);
	uint64_t off = 0;

	d->cus = arena_alloc(d->arena, (cap ? cap : 1) * sizeof(*d->cus));
	if (!d->cus)
		return -ENOMEM;
	while (off + 4 <= size) {
		struct kdw_cu cu;
		int rc = unit_header(d, off, size, &cu, e);

		if (rc < 0)
			return rc;
		if (d->ncus == cap) /* (count_units stopped early: cannot be) */
			return kiln_error_set(e, EINVAL, ".debug_info+0x%llx: unit past the count",
					      (unsigned long long)off);
		d->cus[d->ncus++] = cu;
		off = cu.end;
	}
	return 0;
}

static int arange_cmp(const void *a, const void *b)
{
	const struct kdw_arange *x = a, *y = b;

	return x->low < y->low ? -1 : x->low > y->low;
}

/* .debug_aranges into a sorted table. Any error drops the whole table (as
 * libdw's dwarf_getaranges fails whole): addresses then take libdw's path. */
static int read_aranges(struct kdw *d)
{
	const uint8_t *sec = d->s.p[KDW_ARANGES];
	size_t size = d->s.size[KDW_ARANGES], cap = 0;
	uint64_t off = 0;

	while (off < size) {
		struct kdw_cur c = {sec + off, sec + size, false};
		uint64_t len = kdw_fixed(&c, 4), info_off;
		uint8_t asz, seg;
		struct kdw_cu *cu;

		if (c.bad || len == 0xffffffff || len > (uint64_t)(c.end - c.p))
			goto bad;
		c.end = c.p + len;
		if (kdw_fixed(&c, 2) != 2)
			goto bad;
		info_off = kdw_fixed(&c, 4);
		asz = kdw_u8(&c);
		seg = kdw_u8(&c);
		if (c.bad || (asz != 4 && asz != 8) || seg != 0)
			goto bad;
		/* (A stream reader has no units to check it against: the
		 * reader opened once .debug_info is whole does.) */
		cu = d->stream_units ? NULL : cu_containing(d, info_off);
		if (!d->stream_units && (!cu || cu->offset != info_off))
			goto bad;
		/* Tuples start at a multiple of twice the address size. */
		kdw_skip(&c, (2 * asz - (uint64_t)(c.p - (sec + off)) % (2 * asz)) % (2 * asz));
		for (;;) {
			uint64_t a = kdw_fixed(&c, asz), l = kdw_fixed(&c, asz);

			if (c.bad)
				goto bad;
			if (a == 0 && l == 0)
				break;
			if (l == 0)
				continue;
			if (d->naranges == cap) {
				size_t ncap = cap ? cap * 2 : 1024;
				struct kdw_arange *n = realloc(d->aranges, ncap * sizeof(*n));

				if (!n)
					return -ENOMEM;
				d->aranges = n;
				cap = ncap;
			}
			d->aranges[d->naranges++] =
			    (struct kdw_arange){a, a + l, cu, info_off, NULL};
		}
		off += 4 + len;
	}
	if (d->naranges)
		qsort(d->aranges, d->naranges, sizeof(*d->aranges), arange_cmp);
	return 0;
bad:
	free(d->aranges);
	d->aranges = NULL;
	d->naranges = 0;
	d->aranges_bad = true;
	return 0;
}

static void cover_units(struct kdw *d);
static int make_buckets(struct kdw *d);
static size_t arange_for(const struct kdw *d, uint64_t addr);

/* A reader of secs with nothing read yet, memory from arena (NULL: its
 * own); NULL (e set) when out of memory. */
static struct kdw *kdw_new(const struct kdw_sections *secs, struct arena *arena,
			   struct kiln_error *e)
{
	struct kdw *d = calloc(1, sizeof(*d));

	if (d) {
		d->s = *secs;
		d->own_arena = !arena;
		d->arena = arena ? arena : arena_new(256 * 1024);
		d->abbrevs = htab_new(64);
	}
	if (!d || !d->arena || !d->abbrevs) {
		kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
		kdw_close(d);
		return NULL;
	}
	return d;
}

/* The search structures over d's address ranges, once they are all read. */
static int index_aranges(struct kdw *d, struct kiln_error *e)
{
	d->arange_lows = malloc((d->naranges ? d->naranges : 1) * sizeof(*d->arange_lows));
	if (!d->arange_lows)
		return kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
	for (size_t i = 0; i < d->naranges; i++)
		d->arange_lows[i] = d->aranges[i].low;
	if (make_buckets(d) < 0)
		return kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
	return 0;
}

struct kdw *kdw_open(const struct kdw_sections *secs, struct arena *arena, struct kiln_error *e)
{
	struct kdw *d = kdw_new(secs, arena, e);

	if (!d)
		return NULL;
	if (read_units(d, e) < 0 || read_aranges(d) < 0)
		goto err;
	cover_units(d);
	if (index_aranges(d, e) < 0)
		goto err;
	return d;
err:
	kdw_close(d);
	return NULL;
}

struct kdw *kdw_open_stream(const struct kdw_sections *secs, struct arena *arena,
			    struct kiln_error *e)
{
	struct kdw *d = kdw_new(secs, arena, e);

	if (!d)
		return NULL;
	if (!(d->stream_units = htab_new(256))) {
		kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
		goto err;
	}
	if (read_aranges(d) < 0 || index_aranges(d, e) < 0)
		goto err;
	return d;
err:
	kdw_close(d);
	return NULL;
}

uint64_t kdw_stream_unit_offset(const struct kdw *d, uint64_t addr)
{
	size_t i = arange_for(d, addr);

	return i < d->naranges ? d->aranges[i].unit : UINT64_MAX;
}

struct kdw_cu *kdw_stream_unit(struct kdw *d, uint64_t off, size_t avail, struct kiln_error *e)
{
	struct kdw_cu cu, *kept;
	uint64_t v;
	int rc;

	if (htab_get(d->stream_units, &off, sizeof(off), &v))
		return (struct kdw_cu *)(uintptr_t)v;
	if (avail > d->s.size[KDW_INFO])
		avail = d->s.size[KDW_INFO];
	rc = unit_header(d, off, avail, &cu, e);
	if (rc <= 0)
		return NULL;
	if (!(kept = arena_alloc(d->arena, sizeof(*kept))) ||
	    htab_put(d->stream_units, &off, sizeof(off), (uint64_t)(uintptr_t)kept) < 0) {
		kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
		return NULL;
	}
	*kept = cu;
	return kept;
}

struct kdw_cu *kdw_unit_at(struct kdw *d, uint64_t off)
{
	struct kdw_cu *cu = cu_containing(d, off);

	return cu && cu->offset == off ? cu : NULL;
}

size_t kdw_naranges(const struct kdw *d)
{
	return d->naranges;
}

struct kdw *kdw_clone_units(const struct kdw *src, struct arena *arena, struct kiln_error *e)
{
	struct kdw *d = kdw_new(&src->s, arena, e);

	if (!d)
		return NULL;
	if (!(d->cus = arena_alloc(d->arena, (src->ncus ? src->ncus : 1) * sizeof(*d->cus)))) {
		kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
		kdw_close(d);
		return NULL;
	}
	/* The headers only: what src has read in a unit since is src's. */
	for (size_t i = 0; i < src->ncus; i++) {
		const struct kdw_cu *u = &src->cus[i];

		d->cus[i] = (struct kdw_cu){.offset = u->offset,
					    .die_offset = u->die_offset,
					    .end = u->end,
					    .abbrev_offset = u->abbrev_offset,
					    .version = u->version,
					    .unit_type = u->unit_type,
					    .addr_size = u->addr_size,
					    .supported = u->supported};
	}
	d->ncus = src->ncus;
	return d;
}

void kdw_close(struct kdw *d)
{
	if (!d)
		return;
	if (d->own_arena)
		arena_free(d->arena);
	htab_free(d->abbrevs);
	htab_free(d->stream_units);
	free(d->scratch.by_code);
	free(d->scratch.specs);
	free(d->tmp.by_code);
	free(d->tmp.specs);
	kdw_line_scratch_free(&d->line_scratch);
	free(d->aranges);
	free(d->arange_lows);
	free(d->buckets);
	free(d->origins);
	free(d->ranges);
	free(d);
}

struct arena *kdw_arena(struct kdw *d)
{
	return d->arena;
}

bool kdw_aranges_whole(const struct kdw *d)
{
	return !d->aranges_bad;
}

/* d->buckets for the sorted d->arange_lows (none when there are fewer than
 * 2 ranges, or more than UINT32_MAX). */
static int make_buckets(struct kdw *d)
{
	size_t n = d->naranges, nb;
	uint64_t base, span;
	unsigned shift = 0;

	if (n < 2 || n > UINT32_MAX)
		return 0;
	base = d->arange_lows[0];
	span = d->arange_lows[n - 1] - base;
	while ((span >> shift) >= 2 * (uint64_t)n)
		shift++;
	nb = (size_t)(span >> shift) + 1;
	d->buckets = malloc((nb + 1) * sizeof(*d->buckets));
	if (!d->buckets)
		return -ENOMEM;
	for (size_t b = 0, i = 0; b < nb; b++) {
		uint64_t at = base + ((uint64_t)b << shift);

		while (i + 1 < n && d->arange_lows[i + 1] <= at)
			i++;
		d->buckets[b] = (uint32_t)i;
	}
	d->buckets[nb] = (uint32_t)(n - 1);
	d->nbuckets = nb;
	d->bucket_shift = shift;
	return 0;
}

/* The index of the arange covering addr, or naranges. */
static size_t arange_for(const struct kdw *d, uint64_t addr)
{
	const uint64_t *lows = d->arange_lows;
	size_t lo = 0, n = d->naranges;

	/* Branch-free halving: the loads of successive probes do not wait
	 * on a mispredicted branch. lo ends at the last low <= addr. */
	if (n == 0 || lows[0] > addr)
		return d->naranges;
	if (d->buckets) {
		/* The last low <= addr is between the entries of addr's
		 * bucket and the next one's (the last range beyond both). */
		uint64_t b = (addr - lows[0]) >> d->bucket_shift;

		if (b >= d->nbuckets) {
			lo = d->naranges - 1;
			n = 1;
		} else {
			lo = d->buckets[b];
			n = d->buckets[b + 1] - lo + 1;
		}
	}
	while (n > 1) {
		size_t half = n / 2;

		lo = lows[lo + half] <= addr ? lo + half : lo;
		n -= half;
	}
	return addr < d->aranges[lo].high ? lo : d->naranges;
}

struct kdw_cu *kdw_cu_for_addr(struct kdw *d, uint64_t addr)
{
	size_t i = arange_for(d, addr);

	return i < d->naranges ? d->aranges[i].cu : NULL;
}

void **kdw_arange_user(struct kdw *d, uint64_t addr, struct kdw_cu **cu)
{
	size_t i = arange_for(d, addr);

	if (i == d->naranges) {
		*cu = NULL;
		return NULL;
	}
	*cu = d->aranges[i].cu;
	return &d->aranges[i].user;
}

/* --- abbreviations ---------------------------------------------------------- */

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

static int slot_of(unsigned name);
static bool is_function(uint32_t tag);

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
			slot = slot_of((unsigned)name);
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
static int abbrevs_for(struct kdw *d, struct kdw_cu *cu, const struct kdw_abbrevs **out,
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

/* --- attribute values -------------------------------------------------------- */

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

static int slot_of(unsigned name)
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

static int die_bad(struct kiln_error *e, uint64_t off, const char *what)
{
	return kiln_error_set(e, EINVAL, ".debug_info+0x%llx: %s", (unsigned long long)off, what);
}

enum die_mode {
	DIE_FULL, /* every attribute of a slot */
	DIE_WALK, /* full for functions and scopes, else only DW_AT_sibling */
	DIE_SKIP, /* only DW_AT_sibling */
};

static bool is_function(uint32_t tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

/* DIEs whose children may hold functions with code. In C a structure or
 * union holds members only (C++ may define member functions there), so a
 * C unit's are stepped over: in libc's units they were a quarter of the
 * DIEs read. */
static bool is_scope(const struct kdw_cu *cu, uint32_t tag)
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
		int slot = slot_of(name);
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
static int read_die(struct kdw *d, const struct kdw_cu *cu, const struct kdw_abbrevs *t,
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

static bool has(const struct die *die, enum slot s)
{
	return die->have & (1u << s);
}

static int unsupported(struct kiln_error *e, uint64_t off, unsigned form)
{
	return kiln_error_set(e, ENOTSUP, ".debug_info+0x%llx: form 0x%x left to libdw",
			      (unsigned long long)off, form);
}

/* dwarf_formudata for the forms a constant takes. */
static bool val_udata(const struct aval *v, uint64_t *out)
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

/* The unit DIE's attributes the others depend on (read once per unit). */
static int cu_base(struct kdw *d, struct kdw_cu *cu, struct kiln_error *e)
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
	rc = abbrevs_for(d, cu, &t, e);
	if (rc < 0)
		return rc;
	c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end, false};
	rc = read_die(d, cu, t, &c, &die, DIE_FULL, e);
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
		struct kdw_cu *to = cu_containing(d, ref);

		if (!to || ref < to->die_offset)
			return die_bad(e, from->offset, "reference to no DIE");
		rc = cu_base(d, to, e);
		if (rc < 0)
			return rc;
		*cu = to;
	}
	c = (struct kdw_cur){d->s.p[KDW_INFO] + ref, d->s.p[KDW_INFO] + (*cu)->end, false};
	rc = abbrevs_for(d, *cu, &t, e);
	if (rc < 0)
		return rc;
	rc = read_die(d, *cu, t, &c, out, DIE_FULL, e);
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
static int func_names(struct kdw *d, struct kdw_cu *cu, const struct die *first,
		      struct kdw_func *fn, struct kiln_error *e)
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
static int die_ranges(struct kdw *d, const struct kdw_cu *cu, const struct die *die,
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

/* --- the walk ---------------------------------------------------------------- */

struct walk {
	struct kdw *d;
	struct kdw_cu *cu;
	const struct kdw_abbrevs *t;
	const struct kdw_walk_ops *ops;
	struct kiln_error *e;
};

/* Steps over the DIE at the cursor when its code (one byte) names a
 * leaf_fixed abbreviation, walk_full ones only when skipping (what
 * read_die would do for it, without the call: most DIEs the walk meets
 * are such). False, cursor unmoved, for anything else. */
static inline bool skip_leaf(const struct kdw_abbrevs *t, struct kdw_cur *c, bool skipping)
{
	uint8_t code;
	int32_t step;

	if (c->p >= c->end || (code = *c->p) >= 0x80 || code >= t->ncodes)
		return false;
	/* (An undefined code's entry is zeroed: 0.) */
	step = t->by_code[code].leaf_step[skipping];
	if (step == 0 || (size_t)(c->end - c->p) < (size_t)step)
		return false;
	c->p += step;
	return true;
}

/* Jumps over the DIE at the cursor by its DW_AT_sibling when its code (one
 * byte) names a sib_jump abbreviation and the walk would not enter the DIE
 * (skipping, or neither walk_full nor a scope): what read_die and
 * skip_children would do, without them (in libc, 60k such DIEs). False,
 * cursor unmoved, for anything else, a sibling out of place included:
 * the slow path reports it. */
static inline bool skip_sibling(const struct walk *w, struct kdw_cur *c, bool skipping)
{
	const uint8_t *info = w->d->s.p[KDW_INFO];
	const struct kdw_abbrev *ab;
	uint64_t after, to;
	uint32_t v;
	uint8_t code;

	if (c->p >= c->end || (code = *c->p) >= 0x80 || code >= w->t->ncodes)
		return false;
	ab = &w->t->by_code[code];
	if (!ab->sib_jump || (size_t)(c->end - c->p) <= (size_t)ab->fixed ||
	    (!skipping && (ab->walk_full || is_scope(w->cu, ab->tag))))
		return false;
	memcpy(&v, c->p + ab->sib_jump, 4);
	after = (uint64_t)(c->p - info) + 1 + (uint64_t)ab->fixed;
	if (v >= w->cu->end - w->cu->offset)
		return false;
	to = w->cu->offset + v;
	if (to < after || to > w->cu->end)
		return false;
	c->p = info + to;
	return true;
}

/* Moves the cursor past the children of die (just read, has children). */
static int skip_children(struct walk *w, struct kdw_cur *c, const struct die *die)
{
	struct die tmp;
	size_t depth = 1;

	if (has(die, S_SIBLING)) {
		uint64_t to = 0;

		if (val_ref(w->cu, &die->v[S_SIBLING], die->offset, &to, w->e) == 0 &&
		    to >= (uint64_t)(c->p - w->d->s.p[KDW_INFO]) && to <= w->cu->end) {
			c->p = w->d->s.p[KDW_INFO] + to;
			return 0;
		}
		return die_bad(w->e, die->offset, "DW_AT_sibling out of its unit");
	}
	while (depth > 0) {
		if (skip_leaf(w->t, c, true) || skip_sibling(w, c, true))
			continue;

		int rc = read_die(w->d, w->cu, w->t, c, &tmp, DIE_SKIP, w->e);

		if (rc < 0)
			return rc;
		if (rc == 0)
			depth--;
		else if (tmp.ab->children) {
			if (has(&tmp, S_SIBLING)) {
				rc = skip_children(w, c, &tmp);
				if (rc < 0)
					return rc;
			} else {
				depth++;
			}
		}
	}
	return 0;
}

/* True when ops asks about every address, or one of the DIE's ranges just
 * read (d->ranges) holds an address it asks about. */
static bool wanted(const struct kdw_walk_ops *ops, const struct kdw *d)
{
	if (!ops->want)
		return true;
	for (size_t i = 0; i < d->nranges; i++) {
		size_t lo = kdw_lower_bound(ops->want, ops->nwant, d->ranges[i].low);

		if (lo < ops->nwant && ops->want[lo] < d->ranges[i].high)
			return true;
	}
	return false;
}

/* The children at the cursor, up to their null entry. */
static int walk_children(struct walk *w, struct kdw_cur *c, int32_t parent, int depth)
{
	struct die die;

	for (;;) {
		int rc;
		uint32_t tag;
		int32_t node = -1;
		bool descend = false;

		if (c->p >= c->end) /* libdw tolerates a unit without its last nulls */
			return 0;
		if (skip_leaf(w->t, c, false) || skip_sibling(w, c, false))
			continue;
		rc = read_die(w->d, w->cu, w->t, c, &die, DIE_WALK, w->e);
		if (rc <= 0)
			return rc;
		tag = die.ab->tag;
		if (is_function(tag)) {
			rc = die_ranges(w->d, w->cu, &die, w->e);
			if (rc < 0)
				return rc;
			if (w->d->nranges > 0 && wanted(w->ops, w->d)) {
				struct kdw_func fn = {.inlined = tag == DW_TAG_inlined_subroutine};
				uint64_t v;

				rc = func_names(w->d, w->cu, &die, &fn, w->e);
				if (rc < 0)
					return rc;
				if (has(&die, S_CALL_FILE) && val_udata(&die.v[S_CALL_FILE], &v)) {
					fn.has_call_file = true;
					fn.call_file = v;
				}
				if (has(&die, S_CALL_LINE) && val_udata(&die.v[S_CALL_LINE], &v)) {
					fn.has_call_line = true;
					fn.call_line = v;
				}
				node = w->ops->func(w->ops->ctx, &fn, parent);
				if (node < 0)
					return -ENOMEM;
				for (size_t i = 0; i < w->d->nranges; i++)
					if (w->ops->range(w->ops->ctx, w->d->ranges[i].low,
							  w->d->ranges[i].high, node, depth) < 0)
						return -ENOMEM;
				descend = true;
			}
		} else if (is_scope(w->cu, tag)) {
			node = parent;
			descend = true;
		}
		if (!die.ab->children)
			continue;
		if (descend && depth + 1 <= MAX_DIE_DEPTH)
			rc = walk_children(w, c, node, depth + 1);
		else
			rc = skip_children(w, c, &die);
		if (rc < 0)
			return rc;
	}
}

int kdw_walk_cu(struct kdw *d, struct kdw_cu *cu, const struct kdw_walk_ops *ops,
		struct kiln_error *e)
{
	struct walk w = {d, cu, NULL, ops, e};
	struct kdw_cur c;
	struct die die;
	int rc = cu_base(d, cu, e);

	if (rc < 0)
		return rc;
	d->walking = cu;
	d->origins_gen++;
	d->norigins = 0;
	rc = abbrevs_for(d, cu, &w.t, e);
	if (rc < 0)
		goto out;
	c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end, false};
	rc = read_die(d, cu, w.t, &c, &die, DIE_SKIP, e);
	if (rc > 0 && die.ab->children)
		rc = walk_children(&w, &c, -1, 0);
out:
	d->walking = NULL;
	return rc < 0 ? rc : 0;
}

size_t kdw_ncus(const struct kdw *d)
{
	return d->ncus;
}

size_t kdw_cu_ordinal(const struct kdw *d, const struct kdw_cu *cu)
{
	return (size_t)(cu - d->cus);
}

struct kdw_cu *kdw_cu_at(struct kdw *d, size_t i)
{
	return &d->cus[i];
}

/* What reading cu's line program needs: 0, or an error (e set; no
 * DW_AT_stmt_list: -ENOENT), which cu keeps as kdw_cu_lines reports it. */
static int line_unit(struct kdw *d, struct kdw_cu *cu, struct kdw_line_unit *u,
		     struct kiln_error *e)
{
	int rc = cu_base(d, cu, e);

	if (rc < 0) {
		cu->lines_read = true;
		cu->lines_err = -rc;
		return rc;
	}
	if (!cu->has_stmt_list) {
		cu->lines_read = true;
		cu->lines_err = ENOENT;
		return kiln_error_set(e, ENOENT, ".debug_info+0x%llx: no DW_AT_stmt_list",
				      (unsigned long long)cu->offset);
	}
	*u = (struct kdw_line_unit){&d->s, cu->stmt_list, cu->addr_size, cu->comp_dir,
				    cu->str_offsets_base};
	return 0;
}

int kdw_cu_lines_match(struct kdw *d, struct kdw_cu *cu, const uint64_t *want, size_t nwant,
		       struct kdw_row *rows, bool *found, struct kdw_lines **names,
		       struct kiln_error *e)
{
	struct kdw_line_unit u;
	struct kdw_lines got, *l;
	bool complete;
	int rc;

	if (cu->lines_read) {
		if (!cu->lines)
			return kiln_error_set(e, cu->lines_err, ".debug_info+0x%llx: no line table",
					      (unsigned long long)cu->offset);
		for (size_t i = 0; i < nwant; i++)
			found[i] = kdw_lines_find(cu->lines, want[i], &rows[i]);
		*names = cu->lines;
		return 0;
	}
	rc = line_unit(d, cu, &u, e);
	if (rc < 0)
		return rc;
	rc = kdw_lines_match(&u, d->arena, &d->line_scratch, cu->line_names, want, nwant, rows,
			     found, &got, &complete, e);
	if (rc < 0) {
		cu->lines_read = true;
		cu->lines_err = -rc;
		return rc;
	}
	/* Names read before: nothing new to keep (a server runs batches over
	 * the same units again and again). */
	if (!complete && cu->line_names) {
		*names = cu->line_names;
		return 0;
	}
	l = arena_alloc(d->arena, sizeof(*l));
	if (!l)
		return kiln_error_set(e, ENOMEM, "DWARF reader: out of memory");
	*l = got;
	if (complete) {
		cu->lines_read = true;
		cu->lines = l;
	} else {
		cu->line_names = l;
	}
	*names = l;
	return 0;
}

struct kdw_lines *kdw_cu_lines(struct kdw *d, struct kdw_cu *cu, struct kiln_error *e)
{
	struct kdw_lines *l;
	struct kdw_line_unit u;
	int rc;

	if (cu->lines_read) {
		if (!cu->lines)
			kiln_error_set(e, cu->lines_err, ".debug_info+0x%llx: no line table",
				       (unsigned long long)cu->offset);
		return cu->lines;
	}
	if (line_unit(d, cu, &u, e) < 0)
		return NULL;
	cu->lines_read = true;
	cu->lines_err = EINVAL;
	l = arena_alloc(d->arena, sizeof(*l));
	if (!l) {
		cu->lines_err = ENOMEM;
		return NULL;
	}
	rc = kdw_lines_read(&u, d->arena, &d->line_scratch, l, e);
	if (rc < 0) {
		cu->lines_err = -rc;
		return NULL;
	}
	cu->lines = l;
	return l;
}

/* Units .debug_aranges does not name (clang writes no .debug_aranges unless
 * asked with -gdwarf-aranges; a broken table is dropped whole) get their
 * address ranges from their unit DIE: low_pc/high_pc or DW_AT_ranges.
 * Without this such binaries had names from the symbol table only (libdw's
 * dwarf_addrdie goes by .debug_aranges too). A unit the reader cannot read
 * is left out, as before. */
static void cover_units(struct kdw *d)
{
	bool *named = calloc(d->ncus ? d->ncus : 1, sizeof(*named));
	size_t added = 0;

	if (!named)
		return;
	for (size_t i = 0; i < d->naranges; i++)
		named[d->aranges[i].cu - d->cus] = true;
	for (size_t i = 0; i < d->ncus; i++) {
		struct kdw_cu *cu = &d->cus[i];
		struct kiln_error e = {0};
		struct kdw_cur c;
		struct die die;

		if (named[i] || !cu->supported || cu_base(d, cu, &e) < 0)
			continue;
		c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end,
				     false};
		const struct kdw_abbrevs *t;

		if (abbrevs_for(d, cu, &t, &e) < 0 ||
		    read_die(d, cu, t, &c, &die, DIE_FULL, &e) <= 0 ||
		    die_ranges(d, cu, &die, &e) < 0)
			continue;
		for (size_t k = 0; k < d->nranges; k++) {
			struct kdw_arange *n;

			if (d->ranges[k].high <= d->ranges[k].low)
				continue;
			n = realloc(d->aranges, (d->naranges + 1) * sizeof(*n));
			if (!n)
				goto out;
			d->aranges = n;
			d->aranges[d->naranges++] = (struct kdw_arange){
			    d->ranges[k].low, d->ranges[k].high, cu, cu->offset, NULL};
			added++;
		}
	}
	if (added)
		qsort(d->aranges, d->naranges, sizeof(*d->aranges), arange_cmp);
out:
	free(named);
}
