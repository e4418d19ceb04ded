/*
 * test_regress.c — the deploy-regression report (regress.c): the Mann-
 * Whitney U and Benjamini-Hochberg numbers against values worked out by
 * hand, then simulated windows of a workload (each window a multinomial
 * draw of samples over three functions): the same workload on both sides
 * is flagged in at most 5 of 100 trials at the default threshold, an
 * injected 5-point regression is found in at least 95, and a side with too
 * few windows says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

#include "fixtures.h"

static void test_mann_whitney(void **state)
{
	double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10}, p, cliff;

	(void)state;
	/* U = 25 of 25 pairs; mean 12.5, variance 25/12 * 11; z = 12/4.787. */
	query_mann_whitney(a, 5, b, 5, &p, &cliff);
	assert_true(fabs(p - 0.01219) < 2e-4);
	assert_true(fabs(cliff - 1) < 1e-12);
	query_mann_whitney(b, 5, a, 5, &p, &cliff);
	assert_true(fabs(p - 0.01219) < 2e-4);
	assert_true(fabs(cliff + 1) < 1e-12);
	/* All ties: no evidence. */
	double t[] = {1, 1, 1};
	query_mann_whitney(t, 3, t, 3, &p, &cliff);
	assert_true(p == 1 && cliff == 0);
	/* Interleaved: U = 12 of 25 pairs... nothing. */
	double c[] = {1, 3, 5, 7, 9}, d[] = {2, 4, 6, 8, 10};
	query_mann_whitney(c, 5, d, 5, &p, &cliff);
	assert_true(p > 0.5);
}

static void test_benjamini_hochberg(void **state)
{
	double p[] = {0.01, 0.04, 0.03, 0.005}, q[4];

	(void)state;
	assert_int_equal(query_benjamini_hochberg(p, 4, q), 0);
	assert_true(fabs(q[0] - 0.02) < 1e-12);
	assert_true(fabs(q[1] - 0.04) < 1e-12);
	assert_true(fabs(q[2] - 0.04) < 1e-12);
	assert_true(fabs(q[3] - 0.02) < 1e-12);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* One window: n samples drawn over main;f1, main;f2, main;f3. */
static struct query_tree *window_tree(const double *probs, int n)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_line_desc l[4] = {{0}};
	const char *names[4] = {"main", "f1", "f2", "f3"};
	uint64_t loc[4];
	int64_t counts[3] = {0};
	struct query_tree *t = NULL;

	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	for (int i = 0; i < 4; i++) {
		l[i].function_id = pprof_builder_function(b, names[i], names[i], NULL, 0);
		loc[i] = pprof_builder_location(b, 0, 0x1000 * (uint64_t)(i + 1), &l[i], 1);
	}
	for (int s = 0; s < n; s++) {
		double u = uniform();
		int k = u < probs[0] ? 0 : u < probs[0] + probs[1] ? 1 : 2;
		counts[k]++;
	}
	for (int k = 0; k < 3; k++) {
		uint64_t stack[2] = {loc[k + 1], loc[0]};
		if (counts[k])
			assert_int_equal(pprof_builder_add_sample(b, stack, 2, &counts[k], NULL, 0),
					 0);
	}
	struct pprof_profile *p = fixture_to_profile(b);
	assert_int_equal(query_tree_build(p, 0, NULL, &t, NULL), 0);
	pprof_profile_free(p);
	return t;
}

/* One trial: windows per side, the verdict of each f1..f3 (by name). */
static void trial(const double *pa, const double *pb, size_t windows,
		  const struct query_regress_options *o, enum query_regress_verdict *verdict)
{
	struct query_regress *r = query_regress_new(windows, windows);
	const struct query_regress_row *rows;
	size_t n;

	assert_non_null(r);
	for (int side = 0; side < 2; side++) {
		for (size_t w = 0; w < windows; w++) {
			struct query_tree *t = window_tree(side ? pb : pa, 400);
			assert_int_equal(query_regress_add_window(r, side, w, t, NULL), 0);
			query_tree_free(t);
		}
	}
	assert_int_equal(query_regress_finish(r, o, NULL), 0);
	rows = query_regress_rows(r, &n);
	assert_int_equal(n, 4); /* main and f1..f3 */
	for (size_t i = 0; i < n; i++)
		if (rows[i].name[0] == 'f')
			verdict[rows[i].name[1] - '1'] = rows[i].verdict;
	query_regress_free(r);
}

static void test_same_workload_is_quiet(void **state)
{
	const double probs[3] = {0.3, 0.5, 0.2};
	struct query_regress_options dflt = {.threshold_pp = 1};
	int flagged = 0;

	(void)state;
	for (int i = 0; i < 100; i++) {
		enum query_regress_verdict v[3];
		trial(probs, probs, 12, &dflt, v);
		flagged += v[0] <= QUERY_REGRESS_IMPROVEMENT || v[1] <= QUERY_REGRESS_IMPROVEMENT ||
			   v[2] <= QUERY_REGRESS_IMPROVEMENT;
	}
	printf("same workload: %d of 100 trials flagged something\n", flagged);
	assert_true(flagged <= 5);
}

static void test_injected_regression_found(void **state)
{
	const double before[3] = {0.3, 0.5, 0.2}, after[3] = {0.35, 0.45, 0.2};
	struct query_regress_options dflt = {.threshold_pp = 1};
	int found = 0, wrong = 0;

	(void)state;
	for (int i = 0; i < 100; i++) {
		enum query_regress_verdict v[3];
		trial(before, after, 12, &dflt, v);
		found += v[0] == QUERY_REGRESS_REGRESSION && v[1] == QUERY_REGRESS_IMPROVEMENT;
		wrong += v[2] == QUERY_REGRESS_REGRESSION || v[1] == QUERY_REGRESS_REGRESSION;
	}
	printf("injected +5 points: found in %d of 100 trials, a wrong function in %d\n", found,
	       wrong);
	assert_true(found >= 95);
	assert_true(wrong <= 5);
}

static void test_not_enough_data(void **state)
{
	const double before[3] = {0.1, 0.8, 0.1}, after[3] = {0.8, 0.1, 0.1};
	struct query_regress_options dflt = {.threshold_pp = 1};
	enum query_regress_verdict v[3];

	(void)state;
	/* A huge change, but three windows a side cannot show it. */
	trial(before, after, 3, &dflt, v);
	assert_int_equal(v[0], QUERY_REGRESS_NOT_ENOUGH_DATA);
	assert_int_equal(v[1], QUERY_REGRESS_NOT_ENOUGH_DATA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mann_whitney),
	    cmocka_unit_test(test_benjamini_hochberg),
	    cmocka_unit_test(test_same_workload_is_quiet),
	    cmocka_unit_test(test_injected_regression_found),
	    cmocka_unit_test(test_not_enough_data),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
