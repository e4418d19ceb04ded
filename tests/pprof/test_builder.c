/*
 * test_builder.c — unit tests for the pprof builder and merge: interning,
 * sample aggregation by stack and label set, to_profile, merging (totals,
 * header rules, mismatched sample types, scaling).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pprof/pprof.h"

static void test_interning_gives_dense_stable_ids(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc md = {.memory_start = 1, .memory_limit = 2, .filename = "a.so"};
	struct pprof_mapping_desc md2 = md;
	struct pprof_line_desc lines[2] = {{0}};
	uint64_t f1, f2, f3, m1, m2, l1, l2, l3;

	(void)state;
	assert_non_null(b);
	assert_int_equal(pprof_builder_string(b, ""), 0);
	assert_int_equal(pprof_builder_string(b, NULL), 0);
	assert_int_equal(pprof_builder_string(b, "x"), 1);
	assert_int_equal(pprof_builder_string(b, "y"), 2);
	assert_int_equal(pprof_builder_string(b, "x"), 1);
	f1 = pprof_builder_function(b, "f", "f", "f.c", 1);
	f2 = pprof_builder_function(b, "g", "g", "f.c", 1);
	f3 = pprof_builder_function(b, "f", "f", "f.c", 1);
	assert_int_equal(f1, 1);
	assert_int_equal(f2, 2);
	assert_int_equal(f3, 1);
	m1 = pprof_builder_mapping(b, &md);
	md2.has_functions = true;
	m2 = pprof_builder_mapping(b, &md2);
	assert_int_equal(m1, 1);
	assert_int_equal(m2, 2);
	assert_int_equal(pprof_builder_mapping(b, &md), 1);
	lines[0].function_id = f2;
	lines[0].line = 7;
	lines[1].function_id = f1;
	lines[1].line = 3;
	l1 = pprof_builder_location(b, m1, 0x10, lines, 2);
	l2 = pprof_builder_location(b, m1, 0x10, lines, 1);
	l3 = pprof_builder_location(b, m1, 0x10, lines, 2);
	assert_int_equal(l1, 1);
	assert_int_equal(l2, 2);
	assert_int_equal(l3, 1);
	/* Unknown references are refused. */
	assert_int_equal(pprof_builder_location(b, 99, 0x10, NULL, 0), 0);
	lines[0].function_id = 99;
	assert_int_equal(pprof_builder_location(b, 0, 0x10, lines, 1), 0);
	pprof_builder_free(b);
}

static uint64_t one_location(struct pprof_builder *b, const char *fn)
{
	struct pprof_line_desc line = {.function_id = pprof_builder_function(b, fn, fn, "x.c", 0)};

	return pprof_builder_location(b, 0, 0, &line, 1);
}

static void test_samples_aggregate_by_stack_and_labels(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_label_desc ab[] = {{.key = "a", .str = "1"}, {.key = "b", .num = 2}};
	struct pprof_label_desc ba[] = {{.key = "b", .num = 2}, {.key = "a", .str = "1"}};
	struct pprof_label_desc num_unit[] = {{.key = "b", .num = 2, .num_unit = "bytes"}};
	struct pprof_label_desc str2[] = {{.key = "b", .str = "2"}};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	uint64_t stack[2], bad = 42;
	int64_t v[] = {5};
	const pprof_msg *m;

	(void)state;
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	stack[0] = one_location(b, "leaf");
	stack[1] = one_location(b, "root");
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, v, ab, 2), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, v, ba, 2), 0); /* same set */
	assert_int_equal(pprof_builder_sample_count(b), 1);
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, v, num_unit, 1), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, v, str2, 1), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, v, NULL, 0), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack, 1, v, NULL, 0), 0);
	assert_int_equal(pprof_builder_sample_count(b), 5);
	assert_int_equal(pprof_builder_add_sample(b, &bad, 1, v, NULL, 0), -EINVAL);
	/* Sample types cannot change once samples exist. */
	assert_int_equal(pprof_builder_add_sample_type(b, "x", "y"), -EINVAL);

	assert_int_equal(pprof_builder_to_profile(b, &p, &err), 0);
	pprof_builder_free(b); /* the profile is a deep copy */
	m = pprof_profile_msg(p);
	assert_int_equal(m->n_sample, 5);
	assert_int_equal(m->sample[0]->value[0], 10);
	assert_int_equal(m->sample[0]->n_label, 2);
	/* Labels keep the order of first use. */
	assert_string_equal(pprof_string(p, m->sample[0]->label[0]->key), "a");
	assert_string_equal(pprof_string(p, m->sample[0]->label[0]->str), "1");
	assert_int_equal(m->sample[0]->label[1]->num, 2);
	assert_int_equal(m->sample[0]->label[1]->str, 0);
	assert_string_equal(pprof_string(p, m->sample[1]->label[0]->num_unit), "bytes");
	assert_string_equal(pprof_string(p, m->sample[2]->label[0]->str), "2");
	assert_int_equal(m->sample[3]->n_label, 0);
	assert_int_equal(m->sample[4]->n_location_id, 1);
	pprof_profile_free(p);
}

/* A one-type profile with a sample of value v on stack root->fn. */
static struct pprof_profile *small_profile(const char *type, const char *fn, int64_t v,
					   int64_t time, int64_t duration, int64_t period)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_label_desc lab = {.key = "worker", .str = fn};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	uint64_t stack[2];

	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, type, "nanoseconds"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", period), 0);
	assert_int_equal(pprof_builder_add_comment(b, "c"), 0);
	pprof_builder_set_time(b, time, duration);
	/* Pad the string table differently per profile so indices differ. */
	pprof_builder_string(b, fn);
	stack[0] = one_location(b, fn);
	stack[1] = one_location(b, "root");
	assert_int_equal(pprof_builder_add_sample(b, stack, 2, (int64_t[]){1, v}, &lab, 1), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack + 1, 1, (int64_t[]){1, v}, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, &err), 0);
	pprof_builder_free(b);
	return p;
}

static int64_t total(const struct pprof_profile *p, size_t type)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t t = 0;

	for (size_t i = 0; i < m->n_sample; i++)
		t += m->sample[i]->value[type];
	return t;
}

static void test_merge_totals_and_header(void **state)
{
	struct pprof_profile *a = small_profile("cpu", "alpha", 100, 2000, 1000, 10);
	struct pprof_profile *b2 = small_profile("cpu", "beta", 7, 1000, 500, 20);
	struct pprof_profile *c = small_profile("cpu", "alpha", 1, 5000, 1000, 10);
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *out = NULL, *back = NULL;
	struct kiln_error err = {0};
	struct buf enc = {0};
	const pprof_msg *m;

	(void)state;
	assert_int_equal(pprof_builder_merge(b, a, &err), 0);
	assert_int_equal(pprof_builder_merge(b, b2, &err), 0);
	assert_int_equal(pprof_builder_merge(b, c, &err), 0);
	assert_int_equal(pprof_builder_to_profile(b, &out, &err), 0);
	m = pprof_profile_msg(out);
	/* alpha's two samples merged, beta separate, root-only ones merged. */
	assert_int_equal(m->n_sample, 3);
	assert_int_equal(total(out, 1), 2 * (100 + 7 + 1));
	assert_int_equal(total(out, 0), 6);
	assert_int_equal(m->time_nanos, 1000);
	assert_int_equal(m->duration_nanos, 5000);
	assert_int_equal(m->period, 20);
	assert_int_equal(m->n_comment, 1);
	assert_int_equal(m->n_function, 3);
	assert_int_equal(m->n_location, 3);
	/* Encoding and decoding the merge keeps everything. */
	assert_int_equal(pprof_builder_encode(b, true, &enc), 0);
	assert_int_equal(pprof_decode(enc.data, enc.len, NULL, &back, &err), 0);
	assert_int_equal(total(back, 1), total(out, 1));
	assert_int_equal(pprof_sample_count(back), 3);
	pprof_profile_free(a);
	pprof_profile_free(b2);
	pprof_profile_free(c);
	pprof_profile_free(out);
	pprof_profile_free(back);
	pprof_builder_free(b);
	buf_free(&enc);
}

static void test_merge_mismatched_types(void **state)
{
	struct pprof_profile *a = small_profile("cpu", "alpha", 100, 0, 0, 10);
	struct pprof_profile *w = small_profile("wall", "alpha", 100, 0, 0, 10);
	struct pprof_builder *b = pprof_builder_new();
	struct kiln_error err = {0};

	(void)state;
	assert_int_equal(pprof_builder_merge(b, a, &err), 0);
	assert_int_equal(pprof_builder_merge(b, w, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "samples/count cpu/nanoseconds"));
	assert_non_null(strstr(err.msg, "samples/count wall/nanoseconds"));
	/* The failed merge left the builder as it was. */
	assert_int_equal(pprof_builder_sample_count(b), 2);
	pprof_profile_free(a);
	pprof_profile_free(w);
	pprof_builder_free(b);
}

static void test_merge_scaled(void **state)
{
	struct pprof_profile *a = small_profile("cpu", "alpha", 100, 0, 0, 10);
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *out = NULL;
	struct kiln_error err = {0};

	(void)state;
	assert_int_equal(pprof_builder_merge_scaled(b, a, 0.5, &err), 0);
	assert_int_equal(pprof_builder_merge_scaled(b, a, 0.25, &err), 0);
	assert_int_equal(pprof_builder_to_profile(b, &out, &err), 0);
	assert_int_equal(total(out, 1), 50 + 50 + 25 + 25);
	pprof_profile_free(a);
	pprof_profile_free(out);
	pprof_builder_free(b);
}

static void test_builder_reuse_after_encode(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct buf one = {0}, two = {0};
	uint64_t loc;
	int64_t v = 3;

	(void)state;
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_set_default_sample_type(b, "samples"), 0);
	loc = one_location(b, "f");
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	assert_int_equal(pprof_builder_encode(b, false, &one), 0);
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	assert_int_equal(pprof_builder_encode(b, false, &two), 0);
	assert_int_equal(pprof_decode(two.data, two.len, NULL, &p, &err), 0);
	assert_int_equal(total(p, 0), 6);
	assert_int_equal(pprof_sample_type_index(p, NULL, &err), 0);
	pprof_profile_free(p);
	pprof_builder_free(b);
	buf_free(&one);
	buf_free(&two);
}

/* Fills b with n functions, locations and samples, and encodes it. */
static void fill_and_encode(struct pprof_builder *b, unsigned n, struct buf *out)
{
	for (unsigned i = 0; i < n; i++) {
		char fn[32];
		uint64_t loc;
		int64_t v = i + 1;

		snprintf(fn, sizeof(fn), "func_%u", i);
		loc = one_location(b, fn);
		assert_true(loc != 0);
		assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	}
	assert_int_equal(pprof_builder_encode(b, true, out), 0);
}

/* Sizing is memory only: small or outgrown, the profile is the same. */
static void test_sized_builder_same_bytes(void **state)
{
	const size_t hints[] = {0, 16, 100, 5000};

	(void)state;
	for (size_t h = 0; h < sizeof(hints) / sizeof(hints[0]); h++) {
		struct pprof_builder *a = pprof_builder_new(),
				     *b = pprof_builder_new_sized(hints[h]);
		struct buf x = {0}, y = {0};

		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(pprof_builder_add_sample_type(a, "samples", "count"), 0);
		assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
		fill_and_encode(a, 3000, &x);
		fill_and_encode(b, 3000, &y);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.data, y.data, x.len);
		pprof_builder_free(a);
		pprof_builder_free(b);
		buf_free(&x);
		buf_free(&y);
	}
}

/* A reset builder gives the bytes of a new one, whatever it held before
 * (a large profile, whose tables shrink back, or a small one), and with
 * the header fields of the previous profile gone. */
static void test_reset_builder_same_bytes(void **state)
{
	const unsigned sizes[] = {3000, 5, 0, 40, 3000};
	struct pprof_builder *r = pprof_builder_new_sized(16);

	(void)state;
	assert_non_null(r);
	pprof_builder_set_time(r, 123, 456);
	assert_int_equal(pprof_builder_set_period(r, "cpu", "nanoseconds", 10), 0);
	assert_int_equal(pprof_builder_add_comment(r, "old"), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct pprof_builder *a = pprof_builder_new_sized(16);
		struct buf x = {0}, y = {0};

		assert_non_null(a);
		assert_int_equal(pprof_builder_reset(r, 16), 0);
		assert_int_equal(pprof_builder_add_sample_type(a, "samples", "count"), 0);
		assert_int_equal(pprof_builder_add_sample_type(r, "samples", "count"), 0);
		fill_and_encode(a, sizes[i], &x);
		fill_and_encode(r, sizes[i], &y);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.data, y.data, x.len);
		pprof_builder_free(a);
		buf_free(&x);
		buf_free(&y);
	}
	pprof_builder_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_interning_gives_dense_stable_ids),
	    cmocka_unit_test(test_samples_aggregate_by_stack_and_labels),
	    cmocka_unit_test(test_merge_totals_and_header),
	    cmocka_unit_test(test_merge_mismatched_types),
	    cmocka_unit_test(test_merge_scaled),
	    cmocka_unit_test(test_builder_reuse_after_encode),
	    cmocka_unit_test(test_sized_builder_same_bytes),
	    cmocka_unit_test(test_reset_builder_same_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
