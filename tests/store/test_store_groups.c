/*
 * test_store_groups.c — store_write_groups (rows_commit.c): rows keyed by
 * metastore ids written without a writer mark read back as the same
 * profile written whole; groups of one series at one time add up; each
 * time is its own record and survives a restart; bad ids write nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "store_test_util.h"

static const struct store_label LABELS[] = {{"__name__", "process_cpu"}, {"job", "groups"}};

static void open_store(const char *dir, struct store **s)
{
	struct store_options opts = {.path = dir};
	struct kiln_error err = {0};

	assert_int_equal(store_open(&opts, s, &err), 0);
}

static int64_t total_between(struct store *s, const char *type, int64_t from, int64_t to)
{
	struct store_matcher mt = {STORE_MATCH_EQ, "job", "groups", NULL};
	struct store_selector sel = {type, &mt, 1, from, to};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	int64_t t = p ? profile_total(p, 0) : -1;

	pprof_profile_free(p);
	return t;
}

/* Writes p at ts as groups: per sample type, its samples split in two
 * groups of the same series (which must add up). */
static int write_as_groups(struct store *s, const struct pprof_profile *p, int64_t ts)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct kiln_error err = {0};
	uint32_t *stacks = calloc(m->n_sample + 1, sizeof(*stacks));
	int64_t *values[2] = {calloc(m->n_sample + 1, sizeof(int64_t)),
			      calloc(m->n_sample + 1, sizeof(int64_t))};
	struct store_rows g[4];
	size_t half = m->n_sample / 2;
	int rc;

	assert_int_equal(store_intern_stacks(s, p, NULL, 0, stacks, &err), 0);
	for (size_t t = 0; t < 2; t++) {
		struct store_series_type type = {t ? "cpu" : "samples",
						 t ? "nanoseconds" : "count",
						 "cpu",
						 "nanoseconds",
						 10000000,
						 true};
		int64_t id = store_intern_series(s, LABELS, 2, &type, &err);

		assert_true(id >= 0);
		for (size_t i = 0; i < m->n_sample; i++)
			values[t][i] = m->sample[i]->value[t];
		g[2 * t] = (struct store_rows){(uint32_t)id, ts, stacks, values[t], half};
		g[2 * t + 1] = (struct store_rows){(uint32_t)id, ts, stacks + half,
						   values[t] + half, m->n_sample - half};
	}
	rc = store_write_groups(s, g, 4, &err);
	free(stacks);
	free(values[0]);
	free(values[1]);
	return rc;
}

static void test_groups_equal_profile(void **state)
{
	char *d1 = make_tmpdir(), *d2 = make_tmpdir();
	struct pprof_profile *p = make_profile_ex(100, 3, 0, true);
	struct kiln_error err = {0};
	struct store *a, *b;

	(void)state;
	open_store(d1, &a);
	open_store(d2, &b);
	assert_int_equal(store_write_profile(a, LABELS, 2, p, 1000, true, &err), 0);
	assert_int_equal(write_as_groups(b, p, 1000), 0);
	assert_int_equal(total_between(a, CPU_TYPE, 0, INT64_MAX), profile_total(p, 0));
	assert_int_equal(total_between(b, CPU_TYPE, 0, INT64_MAX), profile_total(p, 0));
	assert_int_equal(total_between(b, NS_TYPE, 0, INT64_MAX),
			 total_between(a, NS_TYPE, 0, INT64_MAX));
	store_close(a);
	store_close(b);
	pprof_profile_free(p);
	rm_rf(d1);
	rm_rf(d2);
	free(d1);
	free(d2);
}

/* Two times in one call: two records, each found at its time, both back
 * after a restart (WAL replay). No mark: the same groups again add up. */
static void test_times_and_replay(void **state)
{
	char *d = make_tmpdir();
	struct pprof_profile *p = make_profile_ex(60, 1, 1, true);
	struct store *s;
	int64_t one = profile_total(p, 0);

	(void)state;
	open_store(d, &s);
	assert_int_equal(write_as_groups(s, p, 1000), 0);
	assert_int_equal(write_as_groups(s, p, 5000), 0);
	assert_int_equal(total_between(s, CPU_TYPE, 0, 2000), one);
	assert_int_equal(total_between(s, CPU_TYPE, 0, INT64_MAX), 2 * one);
	assert_int_equal(write_as_groups(s, p, 5000), 0);
	assert_int_equal(total_between(s, CPU_TYPE, 4000, INT64_MAX), 2 * one);
	store_close(s);
	open_store(d, &s);
	assert_int_equal(total_between(s, CPU_TYPE, 0, INT64_MAX), 3 * one);
	store_close(s);
	pprof_profile_free(p);
	rm_rf(d);
	free(d);
}

static void test_bad_ids_write_nothing(void **state)
{
	char *d = make_tmpdir();
	struct kiln_error err = {0};
	struct store *s;
	uint32_t stack = 1u << 30;
	int64_t v = 1;

	(void)state;
	open_store(d, &s);
	struct store_rows g = {12345, 1000, &stack, &v, 1};
	assert_int_equal(store_write_groups(s, &g, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no series"));
	struct store_series_type type = {"samples", "count", "cpu", "nanoseconds", 1, true};
	int64_t id = store_intern_series(s, LABELS, 2, &type, &err);
	assert_true(id >= 0);
	g.series = (uint32_t)id;
	kiln_error_clear(&err);
	assert_int_equal(store_write_groups(s, &g, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no stack"));
	assert_true(total_between(s, CPU_TYPE, 0, INT64_MAX) <= 0); /* no rows */
	assert_int_equal(store_write_groups(s, NULL, 0, &err), 0);
	store_close(s);
	rm_rf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_groups_equal_profile),
	    cmocka_unit_test(test_times_and_replay),
	    cmocka_unit_test(test_bad_ids_write_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
