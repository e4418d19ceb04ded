/*
 * fuzz_dwarf_line.c — .debug_line programs (dwarf_line.c) from arbitrary
 * bytes.
 *
 * Input: a flags byte (bit 0: 8-byte addresses, else 4; bit 1: a comp_dir),
 * a 16-bit little-endian length of the .debug_line bytes, those bytes, and
 * the rest as .debug_line_str and .debug_str (v5 entries point there). The
 * program is read and searched at a spread of addresses, and every file
 * name is built; nothing may crash or read out of bounds, and a rejected
 * table must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "symbols/dwarf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kdw_sections secs = {0};
	struct kiln_error e = {0};
	struct kdw_lines l;
	struct arena *a;
	size_t len;
	uint8_t *line, *strs;
	int rc;

	if (size < 3)
		return 0;
	len = data[1] | (size_t)data[2] << 8;
	if (len > size - 3)
		len = size - 3;
	/* Separate copies, so that reads past a section's end are caught. */
	line = malloc(len + 1);
	strs = malloc(size - 3 - len + 1);
	a = arena_new(0);
	if (!line || !strs || !a)
		goto out;
	memcpy(line, data + 3, len);
	memcpy(strs, data + 3 + len, size - 3 - len);
	secs.p[KDW_LINE] = line;
	secs.size[KDW_LINE] = len;
	secs.p[KDW_LINE_STR] = secs.p[KDW_STR] = strs;
	secs.size[KDW_LINE_STR] = secs.size[KDW_STR] = size - 3 - len;
	struct kdw_line_unit u = {&secs, 0, data[0] & 1 ? 8 : 4, data[0] & 2 ? "/comp/dir" : NULL,
				  0};

	rc = kdw_lines_read(&u, a, NULL, &l, &e);
	if (rc < 0) {
		if (rc != -12 /* ENOMEM */ && !e.msg[0])
			abort(); /* every failure must say why */
		goto out;
	}
	for (size_t i = 0; i < l.nfiles; i++)
		if (!kdw_lines_file(&l, i, a) && l.files[i].name)
			abort();
	for (size_t i = 0; i < l.nrows; i++) {
		struct kdw_row row;
		uint64_t at = kdw_lines_addr(&l, i);
		uint64_t qs[] = {at, at - 1, at + 1,
				 i + 1 < l.nrows ? at + (kdw_lines_addr(&l, i + 1) - at) / 2
						 : UINT64_MAX};

		if (i && at < kdw_lines_addr(&l, i - 1))
			abort(); /* rows are sorted */
		for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
			bool found = kdw_lines_find(&l, qs[k], &row);
			size_t last = SIZE_MAX; /* a linear scan: the searches' reference */
			struct kdw_row_info want;

			for (size_t r = 0; r < l.nrows && kdw_lines_addr(&l, r) <= qs[k]; r++)
				last = r;
			want =
			    last != SIZE_MAX ? kdw_lines_info(&l, last) : (struct kdw_row_info){0};
			if (found != (last != SIZE_MAX && !(want.file & 0x80000000u)))
				abort();
			if (found &&
			    (row.addr != kdw_lines_addr(&l, last) || row.line != want.line ||
			     row.file != (want.file & 0x7fffffffu)))
				abort(); /* the last row at or below the address */
		}
	}
	/* A batch (kdw_lines_match) over the rows' addresses and between
	 * them answers as kdw_lines_find does. */
	{
		enum { NQ = 64 };
		uint64_t qs[NQ];
		struct kdw_row rows[NQ], row;
		bool found[NQ], complete;
		struct kdw_lines m;
		size_t nq = 0;

		for (size_t i = 0; i < l.nrows && nq + 2 <= NQ; i++) {
			qs[nq++] = kdw_lines_addr(&l, i);
			qs[nq++] = kdw_lines_addr(&l, i) + 1;
		}
		for (size_t i = 1; i < nq; i++) /* ascending, as a batch asks */
			for (size_t j = i; j > 0 && qs[j - 1] > qs[j]; j--) {
				uint64_t t = qs[j];

				qs[j] = qs[j - 1];
				qs[j - 1] = t;
			}
		memset(&e, 0, sizeof(e));
		rc = kdw_lines_match(&u, a, NULL, data[0] & 4 ? &l : NULL, qs, nq, rows, found, &m,
				     &complete, &e);
		if (rc < 0 && rc != -12)
			abort(); /* the same program read once already */
		for (size_t k = 0; rc == 0 && k < nq; k++)
			if (found[k] != kdw_lines_find(&l, qs[k], &row) ||
			    (found[k] && (rows[k].line != row.line || rows[k].file != row.file)))
				abort();
	}
out:
	arena_free(a);
	free(line);
	free(strs);
	return 0;
}
