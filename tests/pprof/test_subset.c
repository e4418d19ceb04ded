/*
 * test_subset.c — pprof_profile_subset: chosen samples with new values,
 * only the objects they use, renumbered, and a valid profile that survives
 * an encode/decode round trip; pprof_profile_project: types kept in place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "pprof/pprof.h"

/* Three samples over a mapping: main.a <- main.root, main.b <- main.root
 * (with labels), main.c (a location with an inlined frame). */
static struct pprof_profile *make(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_objects", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_space", "bytes"), 0);
	assert_int_equal(pprof_builder_set_period(b, "space", "bytes", 524288), 0);
	assert_int_equal(pprof_builder_set_default_sample_type(b, "alloc_space"), 0);
	pprof_builder_set_time(b, 1000, 5);
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x500000,
					.filename = "/bin/app",
					.build_id = "abc",
					.has_functions = true};
	uint64_t map = pprof_builder_mapping(b, &md);
	uint64_t fa = pprof_builder_function(b, "main.a", "", "a.go", 1);
	uint64_t fb = pprof_builder_function(b, "main.b", "", "b.go", 2);
	uint64_t fc = pprof_builder_function(b, "main.c", "", "c.go", 3);
	uint64_t fi = pprof_builder_function(b, "main.inl", "", "c.go", 4);
	uint64_t fr = pprof_builder_function(b, "main.root", "", "r.go", 5);
	struct pprof_line_desc la = {fa, 10, 0}, lb = {fb, 20, 0}, lr = {fr, 50, 0};
	struct pprof_line_desc lc[2] = {{fi, 41, 0}, {fc, 30, 0}};
	uint64_t a = pprof_builder_location(b, map, 0x401000, &la, 1);
	uint64_t bb = pprof_builder_location(b, map, 0x402000, &lb, 1);
	uint64_t c = pprof_builder_location(b, map, 0x403000, lc, 2);
	uint64_t r = pprof_builder_location(b, map, 0x404000, &lr, 1);
	uint64_t s0[2] = {a, r}, s1[2] = {bb, r}, s2[1] = {c};
	int64_t v0[2] = {1, 100}, v1[2] = {2, 200}, v2[2] = {3, 300};
	struct pprof_label_desc lab = {.key = "span", .str = "checkout"};
	assert_int_equal(pprof_builder_add_sample(b, s0, 2, v0, NULL, 0), 0);
	assert_int_equal(pprof_builder_add_sample(b, s1, 2, v1, &lab, 1), 0);
	assert_int_equal(pprof_builder_add_sample(b, s2, 1, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, NULL), 0);
	pprof_builder_free(b);
	return p;
}

static const char *fn_name(const struct pprof_profile *p, uint64_t loc, size_t line)
{
	const pprof_location_msg *l = pprof_location(p, loc);
	assert_non_null(l);
	assert_true(line < l->n_line);
	const pprof_function_msg *f = pprof_function(p, l->line[line]->function_id);
	assert_non_null(f);
	return pprof_string(p, f->name);
}

static void check(const struct pprof_profile *d)
{
	const pprof_msg *m = pprof_profile_msg(d);
	assert_int_equal(m->n_sample_type, 1);
	assert_string_equal(pprof_string(d, m->sample_type[0]->type), "alloc_space");
	assert_string_equal(pprof_string(d, m->default_sample_type), "alloc_space");
	assert_string_equal(pprof_string(d, m->period_type->type), "space");
	assert_int_equal(m->period, 524288);
	assert_int_equal(m->time_nanos, 2000);
	assert_int_equal(m->duration_nanos, 7);
	assert_int_equal(m->n_sample, 2);
	/* Sample 0 is the source's sample 2 (inlined frames kept in order). */
	assert_int_equal(m->sample[0]->n_location_id, 1);
	assert_string_equal(fn_name(d, m->sample[0]->location_id[0], 0), "main.inl");
	assert_string_equal(fn_name(d, m->sample[0]->location_id[0], 1), "main.c");
	assert_int_equal(m->sample[0]->value[0], 30);
	/* Sample 1 is the source's sample 1, with its label. */
	assert_int_equal(m->sample[1]->n_location_id, 2);
	assert_string_equal(fn_name(d, m->sample[1]->location_id[0], 0), "main.b");
	assert_string_equal(fn_name(d, m->sample[1]->location_id[1], 0), "main.root");
	assert_int_equal(m->sample[1]->value[0], -5);
	assert_int_equal(m->sample[1]->n_label, 1);
	assert_string_equal(pprof_string(d, m->sample[1]->label[0]->key), "span");
	assert_string_equal(pprof_string(d, m->sample[1]->label[0]->str), "checkout");
	/* Only what those samples use: main.a and its location are gone. */
	assert_int_equal(m->n_location, 3);
	assert_int_equal(m->n_function, 4);
	assert_int_equal(m->n_mapping, 1);
	const pprof_location_msg *l = pprof_location(d, m->sample[1]->location_id[0]);
	assert_int_equal(l->address, 0x402000);
	const pprof_mapping_msg *mp = pprof_mapping(d, l->mapping_id);
	assert_non_null(mp);
	assert_string_equal(pprof_string(d, mp->filename), "/bin/app");
	assert_string_equal(pprof_string(d, mp->build_id), "abc");
	for (size_t i = 0; i < m->n_string_table; i++) {
		assert_string_not_equal(m->string_table[i], "main.a");
		assert_string_not_equal(m->string_table[i], "a.go");
		assert_string_not_equal(m->string_table[i], "alloc_objects");
	}
}

static void test_subset(void **state)
{
	(void)state;
	struct pprof_profile *p = make(), *d = NULL, *back = NULL;
	size_t types[1] = {1}, samples[2] = {2, 1};
	int64_t values[2] = {30, -5};
	struct kiln_error err = {0};
	assert_int_equal(pprof_profile_subset(p, types, 1, samples, values, 2, 2000, 7, &d, &err),
			 0);
	pprof_profile_free(p); /* the subset owns everything it refers to */
	assert_int_equal(pprof_validate(pprof_profile_msg(d), &err), 0); /* not checked inside */
	check(d);
	struct buf b;
	buf_init(&b);
	assert_int_equal(pprof_encode(pprof_profile_msg(d), true, &b), 0);
	assert_int_equal(pprof_decode(b.data, b.len, NULL, &back, &err), 0);
	check(back);
	buf_free(&b);
	pprof_profile_free(back);
	pprof_profile_free(d);
}

static void test_empty_and_bad_index(void **state)
{
	(void)state;
	struct pprof_profile *p = make(), *d = NULL;
	size_t types[2] = {0, 1}, bad_type[1] = {2}, bad_sample[1] = {3};
	int64_t v[2] = {0, 0};
	assert_int_equal(pprof_profile_subset(p, types, 2, NULL, NULL, 0, 1, 0, &d, NULL), 0);
	assert_int_equal(pprof_profile_msg(d)->n_sample, 0);
	assert_int_equal(pprof_profile_msg(d)->n_location, 0);
	assert_int_equal(pprof_profile_msg(d)->n_sample_type, 2);
	pprof_profile_free(d);
	assert_int_equal(pprof_profile_subset(p, bad_type, 1, NULL, NULL, 0, 1, 0, &d, NULL),
			 -EINVAL);
	assert_null(d);
	assert_int_equal(pprof_profile_subset(p, types, 2, bad_sample, v, 1, 1, 0, &d, NULL),
			 -EINVAL);
	assert_null(d);
	pprof_profile_free(p);
}

/* In place: one type kept, zero samples dropped, the rest untouched. */
static void test_project(void **state)
{
	(void)state;
	struct pprof_profile *p = make(), *back = NULL;
	size_t keep[1] = {1}, bad[2] = {1, 0};
	assert_int_equal(pprof_profile_project(p, bad, 2), -EINVAL);
	assert_int_equal(pprof_profile_project(p, keep, 1), 0);
	const pprof_msg *m = pprof_profile_msg(p);
	assert_int_equal(m->n_sample_type, 1);
	assert_string_equal(pprof_string(p, m->sample_type[0]->type), "alloc_space");
	assert_string_equal(pprof_string(p, m->default_sample_type), "alloc_space");
	assert_int_equal(m->n_sample, 3);
	assert_int_equal(m->sample[1]->value[0], 200);
	assert_int_equal(m->sample[1]->n_value, 1);
	struct buf b;
	buf_init(&b);
	assert_int_equal(pprof_encode(m, false, &b), 0);
	assert_int_equal(pprof_decode(b.data, b.len, NULL, &back, NULL), 0);
	assert_int_equal(pprof_profile_msg(back)->sample[2]->value[0], 300);
	buf_free(&b);
	pprof_profile_free(back);
	pprof_profile_free(p);
}

static void test_project_drops_zero(void **state)
{
	(void)state;
	struct pprof_profile *p = make(), *z = NULL;
	size_t all[2] = {0, 1}, one[1] = {0}, s[2] = {0, 2};
	int64_t v[4] = {0, 7, 4, 0};
	assert_int_equal(pprof_profile_subset(p, all, 2, s, v, 2, 1, 0, &z, NULL), 0);
	pprof_profile_free(p);
	assert_int_equal(pprof_profile_project(z, one, 1), 0); /* default type dropped */
	const pprof_msg *m = pprof_profile_msg(z);
	assert_int_equal(m->n_sample, 1);
	assert_int_equal(m->sample[0]->value[0], 4);
	assert_int_equal(m->default_sample_type, 0);
	pprof_profile_free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_subset),
	    cmocka_unit_test(test_project),
	    cmocka_unit_test(test_project_drops_zero),
	    cmocka_unit_test(test_empty_and_bad_index),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
