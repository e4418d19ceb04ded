/*
 * dwarf_info.c — opening Kiln's DWARF reader and its units (see
 * dwarf_reader.h): the top of the DIE layer (dwarf_die.h), above the walk,
 * the DIEs and the abbreviations, and the one file of it that calls the
 * line programs (dwarf_line.c: a unit's line table).
 *
 * Opening reads only the unit headers (a hop from length to length) and
 * .debug_aranges; units .debug_aranges does not name get ranges from
 * their unit DIE (cover_units). A CU is decoded when an address first
 * falls into it: its abbreviation table (dwarf_abbrev.c), its unit DIE
 * (dwarf_die.c: the bases strx/addrx/rnglistx need, comp_dir, stmt_list,
 * language), then its DIE tree once (dwarf_walk.c), and its line program
 * (kdw_cu_lines, kdw_cu_lines_match).
 *
 * Not read by the reader (the unit is "unsupported" or the walk returns
 * -ENOTSUP and libdw takes over for that CU): 64-bit DWARF, type /
 * skeleton / split units, DW_FORM_ref_sig8, dwz's DW_FORM_GNU_ref_alt /
 * GNU_strp_alt and supplementary-file forms, GNU split-DWARF index forms.
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "symbols/dwarf_die.h"

static void cover_units(struct kdw *d);

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
		cu = d->stream_units ? NULL : kdw_cu_containing(d, info_off);
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
	struct kdw_cu *cu = kdw_cu_containing(d, off);

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

/* What reading cu's line program needs: 0, or an error (e set; no
 * DW_AT_stmt_list: -ENOENT), which cu keeps as kdw_cu_lines reports it. */
static int line_unit(struct kdw *d, struct kdw_cu *cu, struct kdw_line_unit *u,
		     struct kiln_error *e)
{
	int rc = kdw_cu_base(d, cu, e);

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

		if (named[i] || !cu->supported || kdw_cu_base(d, cu, &e) < 0)
			continue;
		c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end,
				     false};
		const struct kdw_abbrevs *t;

		if (kdw_abbrevs_for(d, cu, &t, &e) < 0 ||
		    kdw_read_die(d, cu, t, &c, &die, DIE_FULL, &e) <= 0 ||
		    kdw_die_ranges(d, cu, &die, &e) < 0)
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
