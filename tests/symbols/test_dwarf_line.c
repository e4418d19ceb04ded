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
 * program's range is looked up. Rows found ahead (kdw_lines_run_ahead,
 * every program of a section against one set of addresses) are checked
 * against the same tables, on such programs and on glibc's .debug_line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Writes a random DWARF 4 line program into out and its rows into rows;
 * with ascending, each sequence's rows ascend (the sequences need not). */
static size_t make_program(struct buf *out, struct mrow *rows, uint64_t *lo, uint64_t *hi,
			   bool ascending)
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
			} else if (kind == 5 && addr > 0x1000 + 4 && !ascending) { /* back */
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
		/* end_sequence past the last row, or at its address (in a
		 * program made to ascend, now and then) */
		uint64_t d = rnd(ascending ? 16 : 3) ? 1 + rnd(8) : 0;

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
		size_t n = make_program(&line, rows, &lo, &hi, false);

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

/* The addresses looked up around a program's rows: all of them from lo - 2
 * to hi + 2 (jumping the gap between sequences 4 GiB apart). */
static size_t program_queries(uint64_t lo, uint64_t hi, uint64_t *q, size_t max)
{
	size_t n = 0;

	for (uint64_t a = lo - 2; a <= hi + 2 && n < max;
	     a = a == lo + 0x10000 && hi > lo + 0x20000 ? hi - 0x10000 : a + 1)
		q[n++] = a;
	return n;
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

#define AHEAD_UNITS 6

/* Rows found ahead (kdw_lines_run_ahead over a section of several
 * programs, against the addresses of all of them: most of a program's are
 * in no sequence of the others, or in one of theirs) are what each
 * program's table answers, for the programs run ahead; programs it leaves
 * to kdw_lines_match say so, as do addresses it was not asked about. */
static void test_lines_ahead(void **state)
{
	static struct mrow rows[MAX_ROWS];
	static struct buf one;
	static uint8_t section[AHEAD_UNITS * sizeof(one.b)];
	static uint64_t all[AHEAD_UNITS * MAX_QUERIES], mine[MAX_QUERIES];
	static struct kdw_row got[MAX_QUERIES];
	static bool found[MAX_QUERIES];
	size_t ahead = 0, left = 0, hits = 0;

	(void)state;
	rnd_state = 7;
	for (int round = 0; round < 60; round++) {
		struct kdw_sections secs = {0};
		struct arena *a = arena_new(0);
		struct kiln_error e = {0};
		struct kdw_lines l[AHEAD_UNITS];
		uint64_t off[AHEAD_UNITS], lo[AHEAD_UNITS], hi[AHEAD_UNITS];
		size_t nunits = 1 + rnd(AHEAD_UNITS), size = 0, nall = 0, k = 0;
		struct kdw_lines_ahead *ah;

		assert_non_null(a);
		for (size_t u = 0; u < nunits; u++) {
			make_program(&one, rows, &lo[u], &hi[u], rnd(4) != 0);
			off[u] = size;
			memcpy(section + size, one.b, one.n);
			size += one.n;
		}
		secs.p[KDW_LINE] = section;
		secs.size[KDW_LINE] = size;
		for (size_t u = 0; u < nunits; u++) {
			struct kdw_line_unit lu = {&secs, off[u], 8, "/src", 0};

			assert_int_equal(kdw_lines_read(&lu, a, NULL, &l[u], &e), 0);
			nall += program_queries(lo[u], hi[u], all + nall, MAX_QUERIES);
		}
		qsort(all, nall, sizeof(*all), u64_cmp);
		for (size_t i = 0; i < nall; i++)
			if (k == 0 || all[k - 1] != all[i])
				all[k++] = all[i];
		nall = k;
		ah = kdw_lines_run_ahead(&secs, 8, all, nall, a, NULL);
		assert_non_null(ah);
		for (size_t u = 0; u < nunits; u++) {
			struct kdw_line_unit lu = {&secs, off[u], 8, "/src", 0};
			struct kdw_line_unit wrong_size = {&secs, off[u], 4, "/src", 0};
			size_t nq = program_queries(lo[u], hi[u], mine, MAX_QUERIES);
			uint64_t outside[2] = {mine[0], all[nall - 1] + 1};

			assert_false(kdw_lines_ahead_find(ah, &wrong_size, mine, nq, got, found));
			if (!kdw_lines_ahead_find(ah, &lu, mine, nq, got, found)) {
				left++;
				continue;
			}
			ahead++;
			/* An address not asked about: not answered. */
			assert_false(kdw_lines_ahead_find(ah, &lu, outside, 2, got, found));
			assert_true(kdw_lines_ahead_find(ah, &lu, mine, nq, got, found));
			for (size_t i = 0; i < nq; i++) {
				struct kdw_row want;
				bool ok = kdw_lines_find(&l[u], mine[i], &want);

				assert_int_equal(found[i], ok);
				if (!ok)
					continue;
				hits++;
				assert_int_equal(got[i].line, want.line);
				assert_int_equal(got[i].file, want.file);
				assert_true(got[i].addr <= mine[i]);
			}
		}
		/* Stopped before the first program: none is run ahead. */
		atomic_bool stop = true;
		struct kdw_lines_ahead *none = kdw_lines_run_ahead(&secs, 8, all, nall, a, &stop);
		struct kdw_line_unit first = {&secs, 0, 8, "/src", 0};
		assert_false(none && kdw_lines_ahead_find(none, &first, all, 1, got, found));
		arena_free(a);
	}
	/* Both kinds were met, and the rows found are many. */
	assert_true(ahead > left && left > 0);
	assert_true(hits > 10000);
}

/* glibc's .debug_line (libc6-dbg's debug file, inflated by libelf) run
 * ahead against addresses at and just past a sample of every program's
 * rows: each program run ahead answers as its table does, and most of
 * them are. */
static void test_lines_ahead_libc(void **state)
{
	char path[512], id[128] = "";
	FILE *p = popen("readelf -n \"$(ldd /bin/true | awk '/libc.so/ {print $3}')\" | "
			"awk '/Build ID/ {print $3}'",
			"r");
	struct kdw_sections secs = {0};
	struct arena *a = arena_new(0);
	uint64_t *addrs = NULL, off;
	size_t n = 0, cap = 0, ahead = 0, units = 0, checked = 0;
	struct kdw_row *got = NULL;
	bool *found = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;
	int fd;

	(void)state;
	assert_non_null(p);
	assert_non_null(fgets(id, sizeof(id), p));
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	if (access(path, R_OK) != 0)
		fail_msg("%s missing: install libc6-dbg (scripts/packages.txt)", path);
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		const char *name;
		int which;

		assert_non_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (strcmp(name, ".debug_line") == 0)
			which = KDW_LINE;
		else if (strcmp(name, ".debug_line_str") == 0)
			which = KDW_LINE_STR;
		else if (strcmp(name, ".debug_str") == 0)
			which = KDW_STR;
		else
			continue;
		if (sh.sh_flags & SHF_COMPRESSED)
			assert_int_equal(elf_compress(scn, 0, 0), 1);
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		secs.p[which] = d->d_buf;
		secs.size[which] = d->d_size;
	}
	assert_true(secs.size[KDW_LINE] > 100000);
	/* The addresses: every 5th row's, one past it and two past it. */
	for (off = 0; off < secs.size[KDW_LINE];) {
		struct kdw_line_unit u = {&secs, off, 8, "/", 0};
		struct kiln_error e = {0};
		struct kdw_lines l;
		uint32_t len;

		memcpy(&len, secs.p[KDW_LINE] + off, 4);
		if (kdw_lines_read(&u, a, NULL, &l, &e) == 0)
			for (size_t i = 0; i < l.nrows; i += 5)
				for (uint64_t d = 0; d < 3; d++) {
					if (n == cap) {
						cap = cap ? cap * 2 : 65536;
						addrs = realloc(addrs, cap * sizeof(*addrs));
						assert_non_null(addrs);
					}
					addrs[n++] = kdw_lines_addr(&l, i) + d;
				}
		off += 4 + (uint64_t)len;
	}
	qsort(addrs, n, sizeof(*addrs), u64_cmp);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (k == 0 || addrs[k - 1] != addrs[i])
			addrs[k++] = addrs[i];
	n = k;
	struct kdw_lines_ahead *ah = kdw_lines_run_ahead(&secs, 8, addrs, n, a, NULL);
	assert_non_null(ah);
	got = malloc(n * sizeof(*got));
	found = malloc(n * sizeof(*found));
	assert_non_null(got);
	assert_non_null(found);
	/* Per program: the addresses between its lowest and highest row (at
	 * most 4000 of them, spread), against its table. */
	for (off = 0; off < secs.size[KDW_LINE]; units++) {
		struct kdw_line_unit u = {&secs, off, 8, "/", 0};
		struct kiln_error e = {0};
		struct kdw_lines l;
		uint32_t len;
		size_t lo, hi, nq = 0, step;

		memcpy(&len, secs.p[KDW_LINE] + off, 4);
		off += 4 + (uint64_t)len;
		if (kdw_lines_read(&u, a, NULL, &l, &e) < 0 || l.nrows == 0)
			continue;
		lo = kdw_lower_bound(addrs, n, kdw_lines_addr(&l, 0));
		hi = kdw_lower_bound(addrs, n, kdw_lines_addr(&l, l.nrows - 1) + 3);
		step = (hi - lo) / 4000 + 1;
		uint64_t *q = malloc(((hi - lo) / step + 1) * sizeof(*q));
		assert_non_null(q);
		for (size_t i = lo; i < hi; i += step)
			q[nq++] = addrs[i];
		if (nq && kdw_lines_ahead_find(ah, &u, q, nq, got, found)) {
			ahead++;
			for (size_t i = 0; i < nq; i++) {
				struct kdw_row want;
				bool ok = kdw_lines_find(&l, q[i], &want);

				assert_int_equal(found[i], ok);
				if (ok) {
					assert_int_equal(got[i].line, want.line);
					assert_int_equal(got[i].file, want.file);
				}
				checked++;
			}
		}
		free(q);
	}
	assert_true(ahead > units / 2);
	assert_true(checked > 100000);
	free(got);
	free(found);
	free(addrs);
	elf_end(elf);
	close(fd);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_programs),
	    cmocka_unit_test(test_lines_ahead),
	    cmocka_unit_test(test_lines_ahead_libc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
