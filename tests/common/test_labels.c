/*
 * test_labels.c — the shared label vocabulary (common/labels.h): which
 * names Prometheus's rules accept, and the order label sets are kept in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/labels.h"

static void test_label_names(void **state)
{
	const char *good[] = {"a", "_", "job", "__name__", "_x1", "Abc_09", "z9"};
	const char *bad[] = {"", "1a", "a-b", "a.b", "a:b", ":a", "é", "a b", "a\n"};
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_true(label_name_valid(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(label_name_valid(bad[i]));
	assert_false(label_name_valid(NULL));
}

static void test_metric_names(void **state)
{
	/* A metric name also takes ':' anywhere, even first. */
	const char *good[] = {"process_cpu", "a:b", ":a", "memory:alloc_space:bytes", "_"};
	const char *bad[] = {"", "1a", "a-b", "a.b", "a b"};
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_true(metric_name_valid(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(metric_name_valid(bad[i]));
	assert_false(metric_name_valid(NULL));
}

static void test_sort_by_name(void **state)
{
	struct label v[] = {{"job", "a"}, {"__name__", "cpu"}, {"instance", "b"}, {"Zone", "c"}};
	labels_sort(v, 4);
	/* strcmp order: uppercase before '_' before lowercase. */
	assert_string_equal(v[0].name, "Zone");
	assert_string_equal(v[1].name, "__name__");
	assert_string_equal(v[2].name, "instance");
	assert_string_equal(v[3].name, "job");
	assert_string_equal(v[3].value, "a"); /* values travel with their names */
	labels_sort(v, 0);		      /* nothing to do, no crash */
	assert_true(label_cmp(&v[0], &v[1]) < 0);
	assert_int_equal(label_cmp(&v[2], &v[2]), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_label_names),
	    cmocka_unit_test(test_metric_names),
	    cmocka_unit_test(test_sort_by_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
