/*
 * test_store_rows.c — the row path (store_intern_series/_stacks,
 * store_write_rows): the same profile written as rows and as a pprof reads
 * back the same; a batch is stored once however often it is sent, also
 * after a crash (the marks come back with the WAL); bad ids are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/wait.h>

#include "store_test_util.h"

static const struct store_label LABELS[] = {{"__name__", "process_cpu"}, {"job", "rows"}};

/* Writes p through the row path as batch `batch` of writer 7. */
static int write_as_rows(struct store *s, const struct pprof_profile *p, uint64_t batch, int64_t ts)
{
	const pprof_msg *m = pprof_profile_msg(p);
	struct kiln_error err = {0};
	uint32_t *stacks = calloc(m->n_sample + 1, sizeof(*stacks));
	int64_t *values[2] = {calloc(m->n_sample + 1, sizeof(int64_t)),
			      calloc(m->n_sample + 1, sizeof(int64_t))};
	struct store_rows g[2];
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
		g[t] = (struct store_rows){(uint32_t)id, ts, stacks, values[t], m->n_sample};
	}
	rc = store_write_rows(s, 7, batch, g, 2, &err);
	free(stacks);
	free(values[0]);
	free(values[1]);
	return rc;
}

static int64_t total_of(struct store *s, const char *type)
{
	struct store_matcher mt = {STORE_MATCH_EQ, "job", "rows", NULL};
	struct store_selector sel = {type, &mt, 1, 0, INT64_MAX};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	int64_t t = p ? profile_total(p, 0) : -1;

	pprof_profile_free(p);
	return t;
}

static void open_store(const char *dir, struct store **s)
{
	struct store_options opts = {.path = dir};
	struct kiln_error err = {0};

	assert_int_equal(store_open(&opts, s, &err), 0);
}

static void test_rows_equal_profile(void **state)
{
	char *d1 = make_tmpdir(), *d2 = make_tmpdir();
	struct pprof_profile *p = make_profile_ex(100, 3, 0, true);
	struct kiln_error err = {0};
	struct store *a, *b;

	(void)state;
	open_store(d1, &a);
	open_store(d2, &b);
	assert_int_equal(store_write_profile(a, LABELS, 2, p, 1000, true, &err), 0);
	assert_int_equal(write_as_rows(b, p, 1, 1000), 0);
	assert_int_equal(total_of(a, CPU_TYPE), profile_total(p, 0));
	assert_int_equal(total_of(b, CPU_TYPE), profile_total(p, 0));
	assert_int_equal(total_of(b, NS_TYPE), total_of(a, NS_TYPE));
	store_close(a);
	store_close(b);
	pprof_profile_free(p);
	rm_rf(d1);
	rm_rf(d2);
	free(d1);
	free(d2);
}

static void test_batch_stored_once(void **state)
{
	char *d = make_tmpdir();
	struct pprof_profile *p = make_profile_ex(50, 1, 1, true);
	struct store *s;

	(void)state;
	open_store(d, &s);
	assert_int_equal(write_as_rows(s, p, 3, 1000), 0);
	assert_int_equal(write_as_rows(s, p, 3, 1000), 1);
	assert_int_equal(write_as_rows(s, p, 2, 1000), 1); /* below the mark */
	assert_true(store_rows_seen(s, 7, 3));
	assert_false(store_rows_seen(s, 7, 4));
	assert_false(store_rows_seen(s, 8, 1));
	assert_int_equal(total_of(s, CPU_TYPE), profile_total(p, 0));
	assert_int_equal(write_as_rows(s, p, 4, 2000), 0);
	assert_int_equal(total_of(s, CPU_TYPE), 2 * profile_total(p, 0));
	store_close(s);
	pprof_profile_free(p);
	rm_rf(d);
	free(d);
}

/* A writer killed without closing (its WAL fsynced, no cut): the reopened
 * store has the rows once and remembers the batch. */
static void test_marks_survive_crash(void **state)
{
	char *d = make_tmpdir();
	struct pprof_profile *p = make_profile_ex(40, 2, 2, true);
	struct store *s;
	int st;

	(void)state;
	pid_t pid = fork();
	if (pid == 0) {
		open_store(d, &s);
		_exit(write_as_rows(s, p, 9, 1000) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	open_store(d, &s);
	assert_true(store_rows_seen(s, 7, 9));
	assert_int_equal(write_as_rows(s, p, 9, 1000), 1);
	assert_int_equal(total_of(s, CPU_TYPE), profile_total(p, 0));
	store_close(s);
	pprof_profile_free(p);
	rm_rf(d);
	free(d);
}

static void test_bad_ids_refused(void **state)
{
	char *d = make_tmpdir();
	struct kiln_error err = {0};
	struct store *s;
	uint32_t stack = 1u << 30;
	int64_t v = 1;

	(void)state;
	open_store(d, &s);
	struct store_rows g = {12345, 1000, &stack, &v, 1};
	assert_int_equal(store_write_rows(s, 1, 1, &g, 1, &err), -EINVAL);
	struct store_series_type type = {"samples", "count", "cpu", "nanoseconds", 1, true};
	int64_t id = store_intern_series(s, LABELS, 2, &type, &err);
	assert_true(id >= 0);
	g.series = (uint32_t)id;
	kiln_error_clear(&err);
	assert_int_equal(store_write_rows(s, 1, 1, &g, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no stack"));
	assert_false(store_rows_seen(s, 1, 1));
	struct store_label bad[] = {{"job", "x"}}; /* no __name__ */
	assert_int_equal(store_intern_series(s, bad, 1, &type, &err), -EINVAL);
	store_close(s);
	rm_rf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows_equal_profile),
	    cmocka_unit_test(test_batch_stored_once),
	    cmocka_unit_test(test_marks_survive_crash),
	    cmocka_unit_test(test_bad_ids_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
