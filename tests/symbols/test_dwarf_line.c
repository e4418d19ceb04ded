/*
 * test_dwarf_line.c — the DWARF reader's line tables (src/symbols/
 * dwarf_line.c) against a plain model of what libdw's dwarf_getsrc_die
 * answers: every row kept, stably sorted by address with end_sequence rows
 * first among rows at one address, the last row marked end_sequence, a
 * lookup taking the last row at or below the address unless it ends a
 * sequence. The reader keeps only the rows a lookup can return and sorts
 * only when its sequences are out of order, so the programs here are made
 * to stress that: sequences in any address order, some overlapping, rows
 * at repeated and decreasing addresses, end_sequence rows at the address
 * of the row before, lines and files repeating. Every address over each
 * program's range is looked up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "symbols/dwarf_reader.h"

struct buf {
	uint8_t b[1 << 16];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t x = v & 0x7f;

		v >>= 7;
		u8(b, x | (v ? 0x80 : 0));
	} while (v);
}

static void sleb(struct buf *b, int64_t v)
{
	for (;;) {
		uint8_t x = v & 0x7f;

		v >>= 7;
		if ((v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40))) {
			u8(b, x);
			return;
		}
		u8(b, x | 0x80);
	}
}

struct mrow {
	uint64_t addr;
	int line;
	unsigned file, index;
	bool end;
};

static uint64_t rnd_state;

static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((rnd_state >> 33) % n);
}

/* libdw's order (stable: index breaks ties). */
static int mrow_cmp(const void *x, const void *y)
{
	const struct mrow *a = x, *b = y;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->end != b->end)
		return a->end ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

#define MAX_ROWS 2048

/* Writes a random DWARF 4 line program into out and its rows into rows. */
static size_t make_program(struct buf *out, struct mrow *rows, uint64_t *lo, uint64_t *hi)
{
	static const uint8_t std_lengths[12] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
	struct buf prog = {.n = 0};
	size_t n = 0, nseq = 1 + rnd(6);
	uint32_t len, hlen;
	uint16_t version = 4;

	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t q = 0; q < nseq && n < MAX_ROWS - 64; q++) {
		/* Sequences may overlap; one in eight after the first lies 4 GiB
		 * or more above, which makes the table wide (see kdw_lines). */
		uint64_t addr =
		    0x1000 + rnd(16) * 0x40 + (q && rnd(8) == 0 ? (uint64_t)(1 + rnd(3)) << 32 : 0);
		int line = 1;
		unsigned file = 1, nrows = 1 + rnd(40);

		u8(&prog, 0);
		uleb(&prog, 9);
		u8(&prog, DW_LNE_set_address);
		put(&prog, &addr, 8);
		for (unsigned r = 0; r < nrows; r++) {
			unsigned kind = rnd(10);

			if (kind < 5) { /* ascending */
				uint64_t d = rnd(8);

				u8(&prog, DW_LNS_advance_pc);
				uleb(&prog, d);
				addr += d;
			} else if (kind == 5 && addr > 0x1000 + 4) { /* back: unsorted */
				uint64_t a = addr - 1 - rnd(4);

				u8(&prog, 0);
				uleb(&prog, 9);
				u8(&prog, DW_LNE_set_address);
				put(&prog, &a, 8);
				addr = a;
			} /* else the same address again */
			if (rnd(3)) {
				/* Now and then a jump past what 32 packed bits hold. */
				int d = rnd(40) ? (int)rnd(5) - 2 : 1 << 24;

				u8(&prog, DW_LNS_advance_line);
				sleb(&prog, d);
				line += d;
			}
			if (rnd(4) == 0) {
				file = 1 + rnd(2);
				u8(&prog, DW_LNS_set_file);
				uleb(&prog, file);
			}
			u8(&prog, DW_LNS_copy);
			rows[n] = (struct mrow){addr, line, file, (unsigned)n, false};
			n++;
		}
		/* end_sequence past the last row, or at its address */
		uint64_t d = rnd(3) ? 1 + rnd(8) : 0;

		if (d) {
			u8(&prog, DW_LNS_advance_pc);
			uleb(&prog, d);
			addr += d;
		}
		u8(&prog, 0);
		uleb(&prog, 1);
		u8(&prog, DW_LNE_end_sequence);
		rows[n] = (struct mrow){addr, line, file, (unsigned)n, true};
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		if (rows[i].addr < *lo)
			*lo = rows[i].addr;
		if (rows[i].addr > *hi)
			*hi = rows[i].addr;
	}
	/* Header: no include directories, files a.c and b.c. */
	hlen = 1 + 1 + 1 + 1 + 1 + 1 + 12 + 1 + (4 + 3) * 2 + 1;
	len = 2 + 4 + hlen + (uint32_t)prog.n;
	out->n = 0;
	put(out, &len, 4);
	put(out, &version, 2);
	put(out, &hlen, 4);
	u8(out, 1);		      /* minimum_instruction_length */
	u8(out, 1);		      /* maximum_operations_per_instruction */
	u8(out, 1);		      /* default_is_stmt */
	u8(out, (uint8_t)(int8_t)-5); /* line_base */
	u8(out, 14);		      /* line_range */
	u8(out, 13);		      /* opcode_base */
	put(out, std_lengths, 12);
	u8(out, 0);				/* no include directories */
	put(out, "a.c\0\0\0\0b.c\0\0\0\0", 14); /* name, dir, mtime, length */
	u8(out, 0);
	put(out, prog.b, prog.n);
	return n;
}

#define MAX_QUERIES (1 << 18)

static void test_random_programs(void **state)
{
	static struct mrow rows[MAX_ROWS], sorted[MAX_ROWS];
	static struct buf line;
	static uint64_t queries[MAX_QUERIES];
	static struct kdw_row qrows[MAX_QUERIES];
	static bool qfound[MAX_QUERIES];
	size_t lookups = 0, found = 0, matched_whole = 0, matched_unordered = 0;

	(void)state;
	rnd_state = 42;
	for (int p = 0; p < 400; p++) {
		struct kdw_sections secs = {0};
		struct kdw_line_unit u = {&secs, 0, 8, "/src", 0};
		struct kdw_line_scratch sc = {0};
		struct kiln_error e = {0};
		struct kdw_lines l;
		struct arena *a = arena_new(0);
		uint64_t lo, hi;
		size_t n = make_program(&line, rows, &lo, &hi);

		assert_non_null(a);
		secs.p[KDW_LINE] = line.b;
		secs.size[KDW_LINE] = line.n;
		/* Every other program reuses one scratch, as the reader does. */
		assert_int_equal(kdw_lines_read(&u, a, p % 2 ? &sc : NULL, &l, &e), 0);
		memcpy(sorted, rows, n * sizeof(*rows));
		qsort(sorted, n, sizeof(*sorted), mrow_cmp);
		sorted[n - 1].end = true;
		assert_true(l.nrows <= n);
		/* Every address around the rows (the gap between sequences 4
		 * GiB apart is jumped over). */
		for (uint64_t q = lo - 2; q <= hi + 2;
		     q = q == lo + 0x10000 && hi > lo + 0x20000 ? hi - 0x10000 : q + 1) {
			const struct mrow *want = NULL;
			struct kdw_row got;
			bool ok = kdw_lines_find(&l, q, &got);

			for (size_t i = 0; i < n && sorted[i].addr <= q; i++)
				want = &sorted[i];
			if (want && want->end)
				want = NULL;
			lookups++;
			if (!want) {
				assert_false(ok);
				continue;
			}
			assert_true(ok);
			assert_int_equal(got.line, want->line);
			assert_int_equal(got.file, want->file);
			assert_true(got.addr <= q);
			found++;
		}
		/* A batch's answers (kdw_lines_match) are kdw_lines_find's, from
		 * the table's rows or without them; every other program with
		 * the names of the table read above. */
		size_t nq = 0;
		for (uint64_t q = lo - 2; q <= hi + 2 && nq < MAX_QUERIES;
		     q = q == lo + 0x10000 && hi > lo + 0x20000 ? hi - 0x10000 : q + 1)
			queries[nq++] = q;
		struct kdw_lines m;
		bool complete;
		assert_int_equal(kdw_lines_match(&u, a, &sc, p % 2 ? &l : NULL, queries, nq, qrows,
						 qfound, &m, &complete, &e),
				 0);
		matched_whole += complete;
		/* Rows out of order but each sequence in order: matched by
		 * sequence, without the table. */
		bool in_order = true;
		for (size_t i = 1; i < n; i++)
			in_order &= rows[i - 1].addr <= rows[i].addr;
		matched_unordered += !in_order && !complete;
		for (size_t i = 0; i < nq; i++) {
			struct kdw_row got;
			bool ok = kdw_lines_find(&l, queries[i], &got);

			assert_int_equal(qfound[i], ok);
			if (!ok)
				continue;
			assert_int_equal(qrows[i].line, got.line);
			assert_int_equal(qrows[i].file, got.file);
			assert_true(qrows[i].addr <= queries[i]);
			assert_string_equal(kdw_lines_file(&m, qrows[i].file, a),
					    kdw_lines_file(&l, got.file, a));
		}
		kdw_line_scratch_free(&sc);
		arena_free(a);
	}
	assert_true(found > lookups / 4);
	/* Every way was taken: the table (rows out of order within a
	 * sequence), rows in order, sequences out of order. */
	assert_true(matched_whole > 0 && matched_whole < 400);
	assert_true(matched_unordered > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_programs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
