/*
 * test_merge_pprof.c — store_merge_pprof (the merge written straight out as
 * an encoded pprof) against the builder path it replaces for query output
 * (store_merge + pprof_builder_encode): the uncompressed bytes must be equal
 * for every selection, the gzip form must inflate to the same bytes and
 * decode as a valid profile, and the totals must match.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gzip.h"
#include "query/query.h"
#include "store/store.h"

#include "fixtures.h"

#define CPU_TYPE "kiln_test:cpu:nanoseconds:cpu:nanoseconds:delta"
#define GEN_TYPE "kiln_gen:samples:count:cpu:nanoseconds:delta"

struct env {
	char dir[64];
	struct store *s;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	if (!(e->s = fixture_store_open("kiln-merge-pprof", e->dir, sizeof(e->dir))))
		return -1;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	fixture_store_remove(e->s, e->dir);
	free(e);
	return 0;
}

static void ingest(struct env *e, const char *name, const char *comm, const struct pprof_profile *p,
		   int64_t ts)
{
	struct label l[] = {{"__name__", name}, {"comm", comm}};
	struct kiln_error err = {0};

	if (store_write_profile(e->s, l, 2, p, ts, true, &err))
		fail_msg("store_write_profile: %s", err.msg);
}

/* Both paths over one selection; returns the number of samples and, with
 * raw_len, the uncompressed size. */
static size_t compare_len(struct env *e, const char *query, int64_t lo, int64_t hi, size_t *raw_len)
{
	struct query_selector sel;
	struct store_selector ss;
	struct kiln_error err = {0};
	struct pprof_builder *b = pprof_builder_new();
	struct buf want = {0}, got = {0}, gz = {0}, inflated = {0};
	struct store_pprof_result res, res_gz;
	int64_t total = 0;

	assert_non_null(b);
	if (query_parse_compiled(query, 0, &sel, &err))
		fail_msg("%s: %s", query, err.msg);
	query_selector_to_store(&sel, lo, hi, &ss);
	if (store_merge(e->s, &ss, b, &err))
		fail_msg("store_merge: %s", err.msg);
	size_t n = pprof_builder_sample_count(b);
	if (n)
		assert_int_equal(pprof_builder_encode(b, false, &want), 0);
	if (store_merge_pprof(e->s, &ss, false, &got, &res, &err))
		fail_msg("store_merge_pprof: %s", err.msg);
	if (store_merge_pprof(e->s, &ss, true, &gz, &res_gz, &err))
		fail_msg("store_merge_pprof gzip: %s", err.msg);
	assert_int_equal(res.n_samples, n);
	assert_int_equal(res_gz.n_samples, n);
	assert_int_equal(got.len, want.len);
	if (n)
		assert_memory_equal(got.data, want.data, want.len);
	else
		assert_int_equal(gz.len, 0);
	if (n) {
		struct pprof_profile *p = NULL;

		assert_true(gzip_is_gzip(gz.data, gz.len));
		assert_int_equal(gzip_inflate(gz.data, gz.len, 1 << 30, &inflated, &err), 0);
		assert_int_equal(inflated.len, want.len);
		assert_memory_equal(inflated.data, want.data, want.len);
		if (want.len <= 4u << 20) { /* compressed whole, as pprof_encode does */
			struct buf want_gz = {0};

			assert_int_equal(pprof_builder_encode(b, true, &want_gz), 0);
			assert_int_equal(gz.len, want_gz.len);
			assert_memory_equal(gz.data, want_gz.data, gz.len);
			buf_free(&want_gz);
		}
		if (pprof_decode(gz.data, gz.len, NULL, &p, &err))
			fail_msg("pprof_decode: %s", err.msg);
		const pprof_msg *m = pprof_profile_msg(p);
		for (size_t i = 0; i < m->n_sample; i++)
			total += m->sample[i]->value[0];
		pprof_profile_free(p);
	}
	assert_int_equal(res.total, total);
	assert_int_equal(res_gz.total, total);
	if (raw_len)
		*raw_len = want.len;
	buf_free(&want);
	buf_free(&got);
	buf_free(&gz);
	buf_free(&inflated);
	pprof_builder_free(b);
	query_selector_release(&sel);
	return n;
}

static size_t compare(struct env *e, const char *query, int64_t lo, int64_t hi)
{
	return compare_len(e, query, lo, hi, NULL);
}

static void test_fixture_selections(void **state)
{
	struct env *e = *state;
	struct pprof_profile *full = fixture_profile(), *base = fixture_base_profile();
	struct kiln_error err = {0};

	ingest(e, "kiln_test", "nginx", full, 1000);
	ingest(e, "kiln_test", "nginx", base, 2000);
	ingest(e, "kiln_test", "redis", base, 1500);
	if (store_flush(e->s, &err)) /* blocks with rollups, then head rows again */
		fail_msg("store_flush: %s", err.msg);
	ingest(e, "kiln_test", "redis", full, 3000);
	ingest(e, "kiln_test", "nginx", full, 3500);

	assert_int_equal(compare(e, CPU_TYPE, 0, 10000), 6);
	assert_int_equal(compare(e, CPU_TYPE "{comm=\"redis\"}", 0, 10000), 6);
	assert_int_equal(compare(e, CPU_TYPE "{comm=\"nginx\"}", 1000, 1000), 5);
	assert_int_equal(compare(e, CPU_TYPE "{comm=\"redis\"}", 1400, 1600), 2);
	assert_int_equal(compare(e, CPU_TYPE "{comm=\"nginx\"}", 1900, 3600), 6);
	assert_int_equal(compare(e, "kiln_test:samples:count:cpu:nanoseconds:delta", 0, 10000),
			 5); /* "other" has 0 samples (7 / 10) */
	/* nothing matched: nothing written */
	assert_int_equal(compare(e, CPU_TYPE "{comm=\"none\"}", 0, 10000), 0);
	assert_int_equal(compare(e, CPU_TYPE, 5000, 6000), 0);
	pprof_profile_free(full);
	pprof_profile_free(base);
}

/* Deterministic pseudo-random profiles: many mappings, inline frames,
 * unsymbolized frames, deep stacks, negative values, and stacks whose
 * values cancel out across profiles (left out of both outputs). */
static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static struct pprof_profile *gen_profile(uint64_t seed, int sign)
{
	struct pprof_builder *b = pprof_builder_new();
	uint64_t x = 88172645463325252ull, maps[6], locs[300];
	char name[64], file[64];

	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", 1000), 0);
	for (int i = 0; i < 6; i++) {
		snprintf(file, sizeof(file), "/usr/lib/lib%d.so", i);
		snprintf(name, sizeof(name), "%02x%02x", i, i * 7);
		struct pprof_mapping_desc d = {.memory_start = 0x1000000ull * (i + 1),
					       .memory_limit = 0x1000000ull * (i + 2),
					       .file_offset = 0x1000ull * i,
					       .filename = file,
					       .build_id = i % 2 ? name : NULL,
					       .has_functions = i != 3,
					       .has_filenames = i % 2,
					       .has_line_numbers = i > 2,
					       .has_inline_frames = i == 4};
		maps[i] = pprof_builder_mapping(b, &d);
	}
	for (int i = 0; i < 300; i++) {
		struct pprof_line_desc l[3] = {{0}};
		size_t nl = (size_t)(rnd(&x) % 4); /* 0: unsymbolized */
		for (size_t k = 0; k < nl; k++) {
			snprintf(name, sizeof(name), "fn_%d_%zu", (int)(rnd(&x) % 150), k);
			snprintf(file, sizeof(file), "src/f%d.c", (int)(rnd(&x) % 20));
			l[k].function_id =
			    pprof_builder_function(b, name, k ? name : "sys", file, i % 5);
			l[k].line = (int64_t)(rnd(&x) % 400) - 3;
		}
		locs[i] = pprof_builder_location(b, i % 7 == 6 ? 0 : maps[i % 6],
						 0x1000000ull * (i % 6 + 1) + 16 * i, l, nl);
		assert_true(locs[i] != 0);
	}
	x ^= seed;
	for (int s = 0; s < 400; s++) {
		uint64_t stack[80];
		uint64_t y = 1234567 + (uint64_t)s * 7919; /* the stack's shape: fixed per s */
		size_t depth = 1 + rnd(&y) % 80;
		for (size_t k = 0; k < depth; k++)
			stack[k] = locs[rnd(&y) % 300];
		int64_t v = (int64_t)(rnd(&x) % 1000) - 100;
		if (s % 10 == 0)
			v = sign * (s + 1); /* cancels across the two profiles */
		if (v == 0)
			v = 1;
		assert_int_equal(pprof_builder_add_sample(b, stack, depth, &v, NULL, 0), 0);
	}
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	if (pprof_builder_to_profile(b, &p, &err))
		fail_msg("to_profile: %s", err.msg);
	pprof_builder_free(b);
	return p;
}

static void test_generated(void **state)
{
	struct env *e = *state;
	struct pprof_profile *p1 = gen_profile(1, 1), *p2 = gen_profile(2, -1);
	struct kiln_error err = {0};

	ingest(e, "kiln_gen", "a", p1, 10000);
	ingest(e, "kiln_gen", "a", p2, 20000);
	ingest(e, "kiln_gen", "b", p2, 15000);
	if (store_flush(e->s, &err))
		fail_msg("store_flush: %s", err.msg);
	ingest(e, "kiln_gen", "b", p1, 30000);

	size_t all = compare(e, GEN_TYPE, 0, 40000);
	assert_true(all > 300);
	size_t a = compare(e, GEN_TYPE "{comm=\"a\"}", 0, 40000);
	assert_true(a > 300 && a < 400); /* the cancelled stacks are left out */
	assert_int_equal(compare(e, GEN_TYPE "{comm=\"a\"}", 10000, 10000), 400);
	assert_true(compare(e, GEN_TYPE "{comm=\"b\"}", 12000, 40000) > 300);
	pprof_profile_free(p1);
	pprof_profile_free(p2);
}

/* A merge past 4 MiB uncompressed: streamed through zlib instead of being
 * compressed whole. */
static void test_large(void **state)
{
	struct env *e = *state;
	struct pprof_builder *b = pprof_builder_new();
	static uint64_t locs[24000];
	char name[200];
	uint64_t x = 42;

	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", 1000), 0);
	for (int i = 0; i < 24000; i++) {
		struct pprof_line_desc l = {0};

		snprintf(name, sizeof(name),
			 "some::rather::long::namespace::Class%d<std::vector<int>>::method_%d"
			 "(std::basic_string<char> const&, unsigned long) const",
			 i, i * 7);
		l.function_id = pprof_builder_function(b, name, name + 6, "src/some/file.cc", i);
		l.line = i;
		locs[i] = pprof_builder_location(b, 0, 0x400000 + 16 * (uint64_t)i, &l, 1);
	}
	for (int s = 0; s < 3000; s++) {
		uint64_t stack[32];
		int64_t v = 1 + s;

		for (size_t k = 0; k < 32; k++)
			stack[k] = locs[(s * 8 + k * 997 + rnd(&x) % 3) % 24000];
		assert_int_equal(pprof_builder_add_sample(b, stack, 32, &v, NULL, 0), 0);
	}
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	if (pprof_builder_to_profile(b, &p, &err))
		fail_msg("to_profile: %s", err.msg);
	pprof_builder_free(b);
	ingest(e, "kiln_gen", "big", p, 1000);

	size_t raw = 0;
	assert_int_equal(compare_len(e, GEN_TYPE, 0, 2000, &raw), 3000);
	if (raw <= 4u << 20)
		fail_msg("%zu bytes: not past 4 MiB", raw);
	pprof_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fixture_selections, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_generated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_large, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
