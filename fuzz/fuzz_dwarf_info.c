/*
 * fuzz_dwarf_info.c — the symbolizer's DWARF reader (dwarf_info.c and, through
 * the units' line tables, dwarf_line.c) on arbitrary section bytes.
 *
 * Input: a byte with flags, then for each of the reader's sections (in
 * enum kdw_sec order) a 24-bit little-endian length, then the sections'
 * bytes one after the other (a short input leaves the last ones short or
 * empty). Every unit is walked (whole, and asking about two addresses),
 * its line table read and searched, and
 * addresses are looked up; then the same with a stream reader
 * (kdw_open_stream), its units asked for with part of .debug_info there,
 * then all of it. Nothing may crash, read out of bounds (or, for the
 * stream reader, past the bytes said to be there) or leak, and every
 * failure must say what is wrong.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "symbols/dwarf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
	size_t funcs, ranges;
	uint64_t lo;
};

static int32_t on_func(void *ctx, const struct kdw_func *fn, int32_t parent)
{
	struct sink *s = ctx;

	/* The strings must be readable to their end. */
	if (fn->name)
		s->ranges += strlen(fn->name) & 1;
	if (fn->linkage_name)
		s->ranges += strlen(fn->linkage_name) & 1;
	return (int32_t)s->funcs++;
}

static int on_range(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	struct sink *s = ctx;

	s->ranges++;
	s->lo = low;
	return 0;
}

static void check_error(int rc, const struct kiln_error *e)
{
	if (rc < 0 && rc != -12 /* ENOMEM */ && !e->msg[0])
		abort(); /* every failure must say why */
}

/* A stream reader on secs: the units .debug_aranges names for a few
 * addresses, asked for with the first part of .debug_info there (how much:
 * from the flags byte; a unit once handed out stays), then with all of it,
 * and walked. */
static void stream_units(const struct kdw_sections *secs, uint8_t flags)
{
	struct kiln_error e = {0};
	struct kdw *d = kdw_open_stream(secs, NULL, &e);
	size_t part = secs->size[KDW_INFO] * (flags % 8) / 8;

	if (!d) {
		check_error(-1, &e);
		return;
	}
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t a = 0; a < 32; a++) {
			uint64_t off = kdw_stream_unit_offset(d, a * 0x40 + (a & 1) * 0x1000);
			struct sink s = {0};
			struct kdw_walk_ops ops = {.ctx = &s, .func = on_func, .range = on_range};
			struct kdw_cu *cu;

			if (off == UINT64_MAX)
				continue;
			memset(&e, 0, sizeof(e));
			cu = kdw_stream_unit(d, off, pass ? secs->size[KDW_INFO] : part, &e);
			if (pass == 0 && cu && cu->end > part)
				abort(); /* handed out before all of it is there */
			if (!cu) {
				if (pass == 1 || e.code)
					check_error(-1, &e);
				continue;
			}
			if (pass == 0 || !cu->supported)
				continue;
			memset(&e, 0, sizeof(e));
			check_error(kdw_walk_cu(d, cu, &ops, &e), &e);
		}
	kdw_close(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kdw_sections secs = {0};
	struct kiln_error e = {0};
	size_t hdr = 1 + 3 * KDW_NSECS, off = hdr;
	struct kdw *d;
	uint8_t *copy;

	if (size < hdr)
		return 0;
	/* One copy, so that reads past a section's end are caught by ASan. */
	copy = malloc(size - hdr + 1);
	if (!copy)
		return 0;
	memcpy(copy, data + hdr, size - hdr);
	for (int i = 0; i < KDW_NSECS; i++) {
		size_t len =
		    data[1 + 3 * i] | (size_t)data[2 + 3 * i] << 8 | (size_t)data[3 + 3 * i] << 16;

		if (len > size - off)
			len = size - off;
		secs.p[i] = copy + (off - hdr);
		secs.size[i] = len;
		off += len;
	}
	stream_units(&secs, data[0]);
	d = kdw_open(&secs, NULL, &e);
	if (!d) {
		check_error(-1, &e);
		free(copy);
		return 0;
	}
	for (uint64_t a = 0; a < 64; a++) {
		uint64_t addr = a < 32 ? a * 0x40 : (a - 32) * 0x1001 + 0x1000;
		struct kdw_cu *cu = kdw_cu_for_addr(d, addr);
		struct sink s = {0};
		struct kdw_walk_ops ops = {.ctx = &s, .func = on_func, .range = on_range};
		struct kdw_lines *l;
		struct kdw_row row;
		int rc;

		if (!cu)
			continue;
		memset(&e, 0, sizeof(e));
		rc = kdw_walk_cu(d, cu, &ops, &e);
		check_error(rc, &e);
		/* Again asking about two addresses only (a batch's walk). */
		uint64_t want[2] = {addr < s.lo ? addr : s.lo, addr < s.lo ? s.lo : addr};
		struct sink s2 = {0};
		struct kdw_walk_ops ops2 = {
		    .ctx = &s2, .func = on_func, .range = on_range, .want = want, .nwant = 2};

		memset(&e, 0, sizeof(e));
		rc = kdw_walk_cu(d, cu, &ops2, &e);
		check_error(rc, &e);
		memset(&e, 0, sizeof(e));
		l = kdw_cu_lines(d, cu, &e);
		if (!l) {
			check_error(-1, &e);
			continue;
		}
		for (int k = 0; k < 3; k++) {
			uint64_t q = k == 0	? addr
				     : k == 1	? s.lo
				     : l->nrows ? kdw_lines_addr(l, l->nrows - 1)
						: 0;

			if (kdw_lines_find(l, q, &row)) {
				const char *f = kdw_lines_file(l, row.file, kdw_arena(d));

				if (f && strlen(f) == (size_t)-1)
					abort();
			}
		}
	}
	kdw_close(d);
	free(copy);
	return 0;
}
