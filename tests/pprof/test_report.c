/*
 * test_report.c — unit tests for pprof_folded and pprof_top: frame order
 * with inlining, unsymbolized frames, zero-value stacks, aggregation across
 * labels, recursion counted once in cum, inline labels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "pprof/pprof.h"

/*
 * Stacks (leaf first; location "work" has work inlined into main's call
 * site: lines [inl, work]):
 *   A: raw(0xbeef) <- work[inl,work] <- main    values {1, 10} label x=1
 *   B: raw(0xbeef) <- work[inl,work] <- main    values {2, 20} label x=2
 *   C: rec <- rec <- main                       values {1, 5}
 *   D: main                                     values {3, 0}
 */
static struct pprof_profile *report_profile(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	uint64_t fmain = pprof_builder_function(b, "main", NULL, "m.c", 1);
	uint64_t fwork = pprof_builder_function(b, "work", NULL, "m.c", 5);
	uint64_t finl = pprof_builder_function(b, "inl", NULL, "m.c", 9);
	uint64_t frec = pprof_builder_function(b, "rec", NULL, "m.c", 12);
	struct pprof_line_desc lmain = {fmain, 2, 0}, lrec = {frec, 13, 0};
	struct pprof_line_desc lwork[] = {{finl, 10, 0}, {fwork, 6, 0}};
	uint64_t main_loc = pprof_builder_location(b, 0, 0x10, &lmain, 1);
	uint64_t work_loc = pprof_builder_location(b, 0, 0x20, lwork, 2);
	uint64_t rec_loc = pprof_builder_location(b, 0, 0x30, &lrec, 1);
	uint64_t raw_loc = pprof_builder_location(b, 0, 0xbeef, NULL, 0);
	struct pprof_label_desc x1 = {.key = "x", .str = "1"}, x2 = {.key = "x", .str = "2"};

	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pprof_builder_add_sample(b, (uint64_t[]){raw_loc, work_loc, main_loc}, 3,
						  (int64_t[]){1, 10}, &x1, 1),
			 0);
	assert_int_equal(pprof_builder_add_sample(b, (uint64_t[]){raw_loc, work_loc, main_loc}, 3,
						  (int64_t[]){2, 20}, &x2, 1),
			 0);
	assert_int_equal(pprof_builder_add_sample(b, (uint64_t[]){rec_loc, rec_loc, main_loc}, 3,
						  (int64_t[]){1, 5}, NULL, 0),
			 0);
	assert_int_equal(
	    pprof_builder_add_sample(b, (uint64_t[]){main_loc}, 1, (int64_t[]){3, 0}, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, &err), 0);
	pprof_builder_free(b);
	return p;
}

static void test_folded_order_inline_and_zero(void **state)
{
	struct pprof_profile *p = report_profile();
	struct buf out = {0};

	(void)state;
	assert_int_equal(pprof_folded(p, 1, &out), 0);
	assert_int_equal(buf_terminate(&out), 0);
	/* Sorted; labels do not split stacks; D (cpu 0) is left out. */
	assert_string_equal((char *)out.data, "main;rec;rec 5\n"
					      "main;work;inl;0xbeef 30\n");
	buf_reset(&out);
	assert_int_equal(pprof_folded(p, 0, &out), 0);
	assert_int_equal(buf_terminate(&out), 0);
	assert_string_equal((char *)out.data, "main 3\n"
					      "main;rec;rec 1\n"
					      "main;work;inl;0xbeef 3\n");
	buf_free(&out);
	pprof_profile_free(p);
}

static const struct pprof_top_entry *find(const struct pprof_top *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->entries[i].name, name) == 0)
			return &t->entries[i];
	return NULL;
}

static void test_top_flat_cum(void **state)
{
	struct pprof_profile *p = report_profile();
	struct pprof_top t;
	const struct pprof_top_entry *e;

	(void)state;
	assert_int_equal(pprof_top(p, 1, &t), 0);
	assert_int_equal(t.total, 35);
	assert_int_equal(t.n, 5); /* main, work, inl, rec, 0xbeef */
	assert_string_equal(t.entries[0].name, "0xbeef");
	assert_int_equal(t.entries[0].flat, 30);
	assert_string_equal(t.entries[1].name, "rec");
	e = find(&t, "rec");
	assert_int_equal(e->flat, 5);
	assert_int_equal(e->cum, 5); /* recursion counts once */
	assert_true(e->called_outline && !e->called_inline);
	e = find(&t, "main");
	assert_int_equal(e->flat, 0);
	assert_int_equal(e->cum, 35);
	assert_false(e->called_inline || e->called_outline); /* root */
	e = find(&t, "inl");
	assert_int_equal(e->cum, 30);
	assert_true(e->called_inline && !e->called_outline);
	e = find(&t, "work");
	assert_true(e->called_outline && !e->called_inline);
	pprof_top_free(&t);
	/* With samples/count, D gives main a flat value. */
	assert_int_equal(pprof_top(p, 0, &t), 0);
	assert_int_equal(t.total, 7);
	/* main and 0xbeef tie on flat (3); main's larger cum puts it first. */
	assert_string_equal(t.entries[0].name, "main");
	assert_int_equal(t.entries[0].flat, 3);
	assert_string_equal(t.entries[1].name, "0xbeef");
	assert_int_equal(t.entries[1].flat, 3);
	pprof_top_free(&t);
	pprof_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_folded_order_inline_and_zero),
	    cmocka_unit_test(test_top_flat_cum),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
