/*
 * test_delta.c — deltas between cumulative scrapes: per-stack differences
 * matched by frames (not ids), zero stacks dropped, counter resets, sample
 * type projection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "scrape/scrape.h"

struct stack_value {
	const char *leaf, *caller;
	int64_t count, bytes;
};

/* A two-type profile (alloc_objects, alloc_space). `shuffle` interns the
 * functions in another order so that ids differ from the other scrape. */
static struct pprof_profile *make(const struct stack_value *sv, size_t n, int64_t time_ns,
				  bool shuffle)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_objects", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_space", "bytes"), 0);
	assert_int_equal(pprof_builder_set_period(b, "space", "bytes", 524288), 0);
	pprof_builder_set_time(b, time_ns, 0);
	if (shuffle)
		pprof_builder_function(b, "zzz.unused", "", "x.go", 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t f1 = pprof_builder_function(b, sv[i].leaf, "", "a.go", 0);
		uint64_t f2 = pprof_builder_function(b, sv[i].caller, "", "a.go", 0);
		struct pprof_line_desc l1 = {.function_id = f1, .line = 10};
		struct pprof_line_desc l2 = {.function_id = f2, .line = 20};
		/* Addresses derive from the names: the same code in both scrapes. */
		uint64_t a1 = 0x1000 + 16 * (uint64_t)strlen(sv[i].leaf) + (uint8_t)sv[i].leaf[5];
		uint64_t a2 =
		    0x2000 + 16 * (uint64_t)strlen(sv[i].caller) + (uint8_t)sv[i].caller[5];
		uint64_t loc[2] = {pprof_builder_location(b, 0, a1, &l1, 1),
				   pprof_builder_location(b, 0, a2, &l2, 1)};
		int64_t v[2] = {sv[i].count, sv[i].bytes};
		assert_int_equal(pprof_builder_add_sample(b, loc, 2, v, NULL, 0), 0);
	}
	assert_int_equal(pprof_builder_to_profile(b, &p, NULL), 0);
	pprof_builder_free(b);
	return p;
}

/* Sum of type t over samples whose leaf function is `leaf`. */
static int64_t value_of(const struct pprof_profile *p, const char *leaf, size_t t)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t sum = 0;
	for (size_t i = 0; i < m->n_sample; i++) {
		const pprof_location_msg *l = pprof_location(p, m->sample[i]->location_id[0]);
		const pprof_function_msg *f = pprof_function(p, l->line[0]->function_id);
		if (strcmp(pprof_string(p, f->name), leaf) == 0)
			sum += m->sample[i]->value[t];
	}
	return sum;
}

static void test_delta_subtracts_per_stack(void **state)
{
	const struct stack_value a[] = {{"main.small", "main.loop", 100, 102400},
					{"main.large", "main.loop", 10, 655360},
					{"main.idle", "main.main", 5, 500}};
	const struct stack_value b[] = {{"main.large", "main.loop", 12, 786432},
					{"main.small", "main.loop", 250, 256000},
					{"main.idle", "main.main", 5, 500},
					{"main.new", "main.main", 1, 64}};
	struct pprof_profile *prev = make(a, 3, 1000000000, false);
	struct pprof_profile *cur = make(b, 4, 3000000000, true);
	struct pprof_profile *d;
	size_t idx[2] = {0, 1};
	bool reset;
	(void)state;

	assert_int_equal(scrape_delta(prev, cur, idx, 2, &d, &reset, NULL), 0);
	assert_false(reset);
	const pprof_msg *m = pprof_profile_msg(d);
	assert_int_equal(m->n_sample, 3); /* main.idle did not change: dropped */
	assert_int_equal(value_of(d, "main.small", 0), 150);
	assert_int_equal(value_of(d, "main.small", 1), 153600);
	assert_int_equal(value_of(d, "main.large", 0), 2);
	assert_int_equal(value_of(d, "main.large", 1), 131072);
	assert_int_equal(value_of(d, "main.new", 0), 1);
	assert_int_equal(value_of(d, "main.idle", 0), 0);
	assert_int_equal(m->time_nanos, 3000000000);
	assert_int_equal(m->duration_nanos, 2000000000);
	assert_int_equal(m->period, 524288);
	pprof_profile_free(d);
	pprof_profile_free(prev);
	pprof_profile_free(cur);
}

/* Labels are part of a stack's identity, however many a sample has (more
 * than four take another path in delta.c): same stack and labels are
 * matched across scrapes, one label value apart is another sample. */
static struct pprof_profile *make_labeled(int64_t v_first, int64_t v_second, int64_t time_ns)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_objects", "count"), 0);
	pprof_builder_set_time(b, time_ns, 0);
	uint64_t f = pprof_builder_function(b, "main.work", "", "a.go", 0);
	struct pprof_line_desc l = {.function_id = f, .line = 7};
	uint64_t loc = pprof_builder_location(b, 0, 0x1234, &l, 1);
	struct pprof_label_desc labels[6] = {{.key = "a", .str = "1"},	  {.key = "b", .str = "2"},
					     {.key = "c", .str = "3"},	  {.key = "d", .str = "4"},
					     {.key = "bytes", .num = 64}, {.key = "e", .str = "x"}};
	int64_t v = v_first;
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, labels, 6), 0);
	labels[5].str = "y";
	v = v_second;
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, labels, 6), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, NULL), 0);
	pprof_builder_free(b);
	return p;
}

static void test_labels_are_part_of_the_stack(void **state)
{
	struct pprof_profile *prev = make_labeled(10, 3, 1000000000);
	struct pprof_profile *cur = make_labeled(15, 3, 2000000000);
	struct pprof_profile *d;
	size_t idx[1] = {0};
	bool reset;
	(void)state;

	assert_int_equal(scrape_delta(prev, cur, idx, 1, &d, &reset, NULL), 0);
	assert_false(reset);
	const pprof_msg *m = pprof_profile_msg(d);
	assert_int_equal(m->n_sample, 1);
	assert_int_equal(m->sample[0]->value[0], 5);
	assert_int_equal(m->sample[0]->n_label, 6);
	assert_string_equal(pprof_string(d, m->sample[0]->label[5]->str), "x");
	assert_int_equal(pprof_validate(m, NULL), 0);
	pprof_profile_free(d);
	pprof_profile_free(prev);
	pprof_profile_free(cur);
}

static void test_counter_reset_takes_new_scrape(void **state)
{
	const struct stack_value a[] = {{"main.small", "main.loop", 100, 102400},
					{"main.large", "main.loop", 10, 655360}};
	/* The process restarted: main.small went down. */
	const struct stack_value b[] = {{"main.small", "main.loop", 7, 7168},
					{"main.large", "main.loop", 11, 720896}};
	struct pprof_profile *prev = make(a, 2, 1, false);
	struct pprof_profile *cur = make(b, 2, 2, false);
	struct pprof_profile *d;
	size_t idx[2] = {0, 1};
	bool reset;
	(void)state;

	assert_int_equal(scrape_delta(prev, cur, idx, 2, &d, &reset, NULL), 0);
	assert_true(reset);
	assert_int_equal(value_of(d, "main.small", 0), 7);
	assert_int_equal(value_of(d, "main.large", 0), 11);
	pprof_profile_free(d);
	pprof_profile_free(prev);
	pprof_profile_free(cur);
}

/* A stack of prev that is missing from cur went from N to 0: counters went
 * backwards, the same as a decrease. */
static void test_vanished_stack_is_a_reset(void **state)
{
	const struct stack_value a[] = {{"main.small", "main.loop", 100, 102400},
					{"main.gone1", "main.loop", 3, 300}};
	const struct stack_value b[] = {{"main.small", "main.loop", 120, 122880}};
	struct pprof_profile *prev = make(a, 2, 1, false);
	struct pprof_profile *cur = make(b, 1, 2, true);
	struct pprof_profile *d;
	size_t idx[2] = {0, 1};
	bool reset;
	(void)state;

	assert_int_equal(scrape_delta(prev, cur, idx, 2, &d, &reset, NULL), 0);
	assert_true(reset);
	assert_int_equal(pprof_profile_msg(d)->n_sample, 1);
	assert_int_equal(value_of(d, "main.small", 0), 120);
	pprof_profile_free(d);
	pprof_profile_free(prev);
	pprof_profile_free(cur);
}

static void test_projection_without_prev(void **state)
{
	const struct stack_value a[] = {{"main.small", "main.loop", 100, 102400},
					{"main.zero", "main.loop", 0, 0}};
	struct pprof_profile *cur = make(a, 2, 1, false);
	struct pprof_profile *d;
	size_t idx[1] = {1};
	bool reset;
	(void)state;

	assert_int_equal(scrape_delta(NULL, cur, idx, 1, &d, &reset, NULL), 0);
	const pprof_msg *m = pprof_profile_msg(d);
	assert_int_equal(m->n_sample_type, 1);
	assert_string_equal(pprof_string(d, m->sample_type[0]->type), "alloc_space");
	assert_int_equal(m->n_sample, 1);
	assert_int_equal(value_of(d, "main.small", 0), 102400);
	pprof_profile_free(d);
	pprof_profile_free(cur);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_delta_subtracts_per_stack),
	    cmocka_unit_test(test_counter_reset_takes_new_scrape),
	    cmocka_unit_test(test_vanished_stack_is_a_reset),
	    cmocka_unit_test(test_projection_without_prev),
	    cmocka_unit_test(test_labels_are_part_of_the_stack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
