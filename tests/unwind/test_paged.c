/*
 * test_paged.c — the paged layout (src/unwind/paged.c) against the plain
 * table search: a table cut into segments, stored at scattered slots of a
 * pool, must give every pc the row unwind_table_find gives it.
 *
 * Tables: libc's real one, and synthetic ones with dense pages (a row per
 * byte), empty pages, rows exactly on page boundaries and a first row in
 * the middle of its page; cut with the smallest segments allowed, so that
 * they span many chunks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/unwind.h"

/* A fake pool: slots are chunk << UNWIND_CHUNK_SHIFT | index, each chunk a
 * separately allocated array, as in the kernel. */
struct pool {
	struct unwind_row *chunks[64];
	uint32_t next_chunk;
};

static const struct unwind_row *pool_slot(void *ctx, uint32_t slot)
{
	struct pool *p = ctx;
	uint32_t c = slot >> UNWIND_CHUNK_SHIFT;

	if (c >= 64 || !p->chunks[c])
		return NULL;
	return &p->chunks[c][slot & (UNWIND_CHUNK_ROWS - 1)];
}

/* Stores each segment (and the page index) in a chunk of its own, at an
 * odd offset, so that a slot mix-up shows. */
static uint32_t pool_put(struct pool *p, const void *rows, size_t n)
{
	uint32_t c = p->next_chunk++, off = 7 * c + 3;

	assert_true(c < 64);
	assert_true(off + n <= UNWIND_CHUNK_ROWS);
	p->chunks[c] = calloc(UNWIND_CHUNK_ROWS, sizeof(struct unwind_row));
	assert_non_null(p->chunks[c]);
	memcpy(&p->chunks[c][off], rows, n * sizeof(struct unwind_row));
	return c << UNWIND_CHUNK_SHIFT | off;
}

static void pool_free(struct pool *p)
{
	for (int i = 0; i < 64; i++)
		free(p->chunks[i]);
}

/* Lays t out with segments of max_rows, stores it, and compares every pc
 * in [from, to) (step) with the plain search. Returns the segment count. */
static size_t check_table(const struct unwind_table *t, uint32_t max_rows, uint32_t from,
			  uint32_t to, uint32_t step)
{
	struct unwind_layout l;
	struct pool pool = {0};
	struct unwind_page *pages;
	uint32_t *slots;
	size_t nsegs;

	assert_int_equal(unwind_layout_plan(t, max_rows, &l), 0);
	slots = calloc(l.nsegs, sizeof(*slots));
	pages = calloc(l.npages, sizeof(*pages));
	assert_non_null(slots);
	assert_non_null(pages);
	for (size_t s = 0; s < l.nsegs; s++) {
		assert_true(l.segs[s].nrows <= max_rows);
		slots[s] = pool_put(&pool, &t->rows[l.segs[s].row], l.segs[s].nrows);
	}
	unwind_layout_pages(t, &l, slots, pages);
	for (uint32_t p = 0; p < l.npages; p++) {
		assert_true(pages[p].n >= 1 && pages[p].n <= UNWIND_PAGE_ROWS_MAX);
		/* a page's rows never straddle two chunks */
		assert_int_equal(pages[p].first >> UNWIND_CHUNK_SHIFT,
				 (pages[p].first + pages[p].n - 1) >> UNWIND_CHUNK_SHIFT);
	}
	struct unwind_paged pt = {.pages = pool_put(&pool, pages, l.npages),
				  .page0 = l.page0,
				  .npages = l.npages,
				  .slot = pool_slot,
				  .ctx = &pool};
	for (uint64_t pc = from; pc < to; pc += step) {
		const struct unwind_row *want = unwind_table_find(t, (uint32_t)pc);
		int64_t got = unwind_paged_find(&pt, (uint32_t)pc);

		/* Past the last row's page the plain search still answers with
		 * the last row (a NONE row, in a real table); the paged one has
		 * no page there. */
		if ((pc >> UNWIND_PAGE_SHIFT) > (uint64_t)l.page0 + l.npages - 1) {
			assert_int_equal(got, -1);
			continue;
		}
		if (!want) {
			if (got != -1)
				fail_msg("pc %#llx: want none, got %#llx", (unsigned long long)pc,
					 (unsigned long long)got);
			continue;
		}
		if (got != (int64_t)want->rule)
			fail_msg("pc %#llx: want rule %#x, got %#llx", (unsigned long long)pc,
				 want->rule, (unsigned long long)got);
	}
	nsegs = l.nsegs;
	free(slots);
	free(pages);
	pool_free(&pool);
	unwind_layout_free(&l);
	return nsegs;
}

static void test_synthetic_tables(void **state)
{
	struct unwind_table t;
	uint32_t pc = 0x1801; /* mid-page first row */

	(void)state;
	unwind_table_init(&t);
	srand(20);
	while (t.n < 60000) {
		switch (rand() % 5) {
		case 0: /* a dense run: a row per byte */
			for (int i = 0; i < 300; i++)
				assert_int_equal(unwind_table_push(&t, pc++, (uint32_t)t.n), 0);
			break;
		case 1: /* a row right on a page boundary */
			pc = ((pc >> UNWIND_PAGE_SHIFT) + 1) << UNWIND_PAGE_SHIFT;
			assert_int_equal(unwind_table_push(&t, pc, (uint32_t)t.n), 0);
			pc++;
			break;
		case 2: /* empty pages */
			pc += (uint32_t)(rand() % 5) << UNWIND_PAGE_SHIFT;
			break;
		default:
			pc += 1 + (uint32_t)(rand() % 64);
			assert_int_equal(unwind_table_push(&t, pc, (uint32_t)t.n), 0);
			break;
		}
	}
	/* rules are all distinct, so finish keeps every row */
	unwind_table_finish(&t);
	assert_true(check_table(&t, UNWIND_PAGE_ROWS_MAX, 0, pc + 9000, 1) > 10);
	assert_int_equal(check_table(&t, UNWIND_CHUNK_ROWS, 0, pc + 9000, 3), 1);
	unwind_table_free(&t);
}

static void test_libc_table(void **state)
{
	struct unwind_table t;
	struct kiln_error err = {0};
	int fd = open("/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(unwind_table_build(fd, NULL, &t, &err), 0);
	close(fd);
	assert_true(t.n > 10000);
	assert_true(check_table(&t, UNWIND_PAGE_ROWS_MAX, 0, t.rows[t.n - 1].pc + 100, 1) > 3);
	unwind_table_free(&t);
}

static void test_plan_errors(void **state)
{
	struct unwind_table t;
	struct unwind_layout l;

	(void)state;
	unwind_table_init(&t);
	assert_int_equal(unwind_layout_plan(&t, UNWIND_CHUNK_ROWS, &l), -EINVAL);
	assert_int_equal(unwind_table_push(&t, 0x1000, 1), 0);
	assert_int_equal(unwind_table_push(&t, 0xf0000000u, 2), 0);
	unwind_table_finish(&t);
	/* 983,041 pages of index: more than a chunk */
	assert_int_equal(unwind_layout_plan(&t, UNWIND_CHUNK_ROWS, &l), -E2BIG);
	assert_int_equal(unwind_layout_plan(&t, 100, &l), -EINVAL);
	unwind_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_synthetic_tables),
	    cmocka_unit_test(test_libc_table),
	    cmocka_unit_test(test_plan_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
