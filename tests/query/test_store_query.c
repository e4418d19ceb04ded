/*
 * test_store_query.c — the query path end to end inside one process:
 * profiles ingested into a real embedded store, selected by parsed and
 * compiled queries, merged by the store, folded into trees. Totals and
 * stacks must equal what was written, for equality, regex and negative
 * matchers, and for a diff of two selections.
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

#include "query/query.h"
#include "store/store.h"

#include "fixtures.h"

#define CPU_TYPE "kiln_test:cpu:nanoseconds:cpu:nanoseconds:delta"

struct env {
	char dir[64];
	struct store *s;
	struct pprof_profile *full, *base;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	if (!(e->s = fixture_store_open("kiln-query-store", e->dir, sizeof(e->dir))))
		return -1;
	e->full = fixture_profile();
	e->base = fixture_base_profile();
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	pprof_profile_free(e->full);
	pprof_profile_free(e->base);
	fixture_store_remove(e->s, e->dir);
	free(e);
	return 0;
}

static void ingest(struct env *e, const char *comm, const char *node, const struct pprof_profile *p,
		   int64_t ts)
{
	struct label l[] = {{"__name__", "kiln_test"}, {"comm", comm}, {"node", node}};
	struct kiln_error err = {0};

	if (store_write_profile(e->s, l, 3, p, ts, true, &err))
		fail_msg("store_write_profile: %s", err.msg);
}

/* Merges what query selects in [lo, hi]; NULL when nothing matched. */
static struct pprof_profile *select_merge(struct env *e, const char *query, int64_t lo, int64_t hi)
{
	struct query_selector sel;
	struct store_selector ss;
	struct kiln_error err = {0};
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;

	assert_non_null(b);
	if (query_parse_compiled(query, 0, &sel, &err))
		fail_msg("%s: %s", query, err.msg);
	query_selector_to_store(&sel, lo, hi, &ss);
	if (store_merge(e->s, &ss, b, &err))
		fail_msg("store_merge: %s", err.msg);
	if (pprof_builder_sample_count(b) && pprof_builder_to_profile(b, &p, &err))
		fail_msg("to_profile: %s", err.msg);
	pprof_builder_free(b);
	query_selector_release(&sel);
	return p;
}

static char *folded(const struct query_tree *t)
{
	struct buf b;

	buf_init(&b);
	assert_int_equal(query_tree_write_folded(t, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	return (char *)b.data;
}

static void test_select_merge_tree(void **state)
{
	static const struct {
		const char *query;
		int64_t total;
	} cases[] = {
	    {CPU_TYPE, 150 * 3 + 37},
	    {CPU_TYPE "{}", 150 * 3 + 37},
	    {CPU_TYPE "{comm=\"nginx\"}", 150 * 2},
	    {CPU_TYPE "{comm=\"nginx\", node=\"web-1\"}", 150},
	    {CPU_TYPE "{node=~\"web-.*\"}", 150 * 2 + 37},
	    {CPU_TYPE "{node=~\"web\"}", 0},
	    {CPU_TYPE "{node!~\"web-.*\"}", 150},
	    {CPU_TYPE "{comm!=\"nginx\"}", 150 + 37},
	    {CPU_TYPE "{comm=\"nginx\", comm=\"redis\"}", 0},
	    {CPU_TYPE "{missing=\"\"}", 150 * 3 + 37},
	};
	struct env *e = *state;

	ingest(e, "nginx", "web-1", e->full, 1000);
	ingest(e, "nginx", "web-2", e->full, 2000);
	ingest(e, "redis", "db-1", e->full, 3000);
	ingest(e, "redis", "web-3", e->base, 4000);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pprof_profile *p = select_merge(e, cases[i].query, 0, 10000);
		struct query_tree *t;

		if (!p) {
			if (cases[i].total)
				fail_msg("%s: nothing merged, want %lld", cases[i].query,
					 (long long)cases[i].total);
			continue;
		}
		assert_int_equal(query_tree_build(p, -1, NULL, &t, NULL), 0);
		if (query_tree_total(t) != cases[i].total)
			fail_msg("%s: total %lld, want %lld", cases[i].query,
				 (long long)query_tree_total(t), (long long)cases[i].total);
		assert_string_equal(query_tree_unit(t), "nanoseconds");
		query_tree_free(t);
		pprof_profile_free(p);
	}

	/* one profile in time: the same stacks as the fixture */
	{
		struct pprof_profile *p = select_merge(e, CPU_TYPE "{comm=\"nginx\"}", 1000, 1000);
		struct query_tree *t;
		char *got;

		assert_non_null(p);
		assert_int_equal(query_tree_build(p, -1, NULL, &t, NULL), 0);
		got = folded(t);
		assert_string_equal(got, "0xdead 50\n"
					 "main;rec;rec;rec 40\n"
					 "main;work;inl 30\n"
					 "main;work;inl;[app] +0x4abc 20\n"
					 "main;work;inl;memcpy 10\n");
		free(got);
		query_tree_free(t);
		pprof_profile_free(p);
	}

	/* a diff of two selections */
	{
		struct pprof_profile *a = select_merge(e, CPU_TYPE "{node=\"web-3\"}", 0, 10000);
		struct pprof_profile *b = select_merge(e, CPU_TYPE "{node=\"web-1\"}", 0, 10000);
		struct query_tree *t;
		struct query_node n;

		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(query_tree_build_diff(a, -1, b, -1, NULL, &t, NULL), 0);
		query_tree_node(t, 0, &n);
		assert_int_equal(n.cum, 150);
		assert_int_equal(n.base_cum, 37);
		assert_int_equal(n.diff, 113);
		query_tree_free(t);
		pprof_profile_free(a);
		pprof_profile_free(b);
	}
}

static char *json_of(struct query_tree *t)
{
	struct buf b;

	buf_init(&b);
	assert_int_equal(query_tree_write_json(t, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	return (char *)b.data;
}

/* The tree folded straight from the store (query_tree_add_store), as
 * qexec builds it for flame graph and top queries. */
static struct query_tree *store_tree(struct env *e, const struct query_tree_options *o,
				     const char *qa, const char *qb, bool *matched)
{
	struct query_tree *t = query_tree_new(o);
	struct kiln_error err = {0};
	const char *qs[2] = {qa, qb};
	bool any = false;

	assert_non_null(t);
	for (int i = 0; i < 2 && qs[i]; i++) {
		struct query_selector sel;
		struct store_selector ss;
		enum query_side side = !o->diff ? QUERY_SIDE_SINGLE
				       : i == 0 ? QUERY_SIDE_BASE
						: QUERY_SIDE_COMPARE;
		bool m;

		if (query_parse_compiled(qs[i], 0, &sel, &err))
			fail_msg("%s: %s", qs[i], err.msg);
		query_selector_to_store(&sel, 0, 10000, &ss);
		if (query_tree_add_store(t, e->s, &ss, side, &m, &err))
			fail_msg("query_tree_add_store: %s", err.msg);
		any = any || m;
		query_selector_release(&sel);
	}
	assert_int_equal(query_tree_finish(t, NULL), 0);
	*matched = any;
	return t;
}

/* The same tree through a pprof profile (store_merge + query_tree_add). */
static struct query_tree *profile_tree(struct env *e, const struct query_tree_options *o,
				       const char *qa, const char *qb)
{
	struct query_tree *t = query_tree_new(o);
	const char *qs[2] = {qa, qb};

	assert_non_null(t);
	for (int i = 0; i < 2 && qs[i]; i++) {
		struct pprof_profile *p = select_merge(e, qs[i], 0, 10000);
		enum query_side side = !o->diff ? QUERY_SIDE_SINGLE
				       : i == 0 ? QUERY_SIDE_BASE
						: QUERY_SIDE_COMPARE;

		if (p)
			assert_int_equal(query_tree_add(t, p, -1, side, NULL), 0);
		pprof_profile_free(p);
	}
	assert_int_equal(query_tree_finish(t, NULL), 0);
	return t;
}

static void test_store_tree_equals_profile_tree(void **state)
{
	static const char *hide[] = {"libc.so.6"};
	static const struct {
		struct query_tree_options o;
		const char *a, *b;
	} cases[] = {
	    {{0}, CPU_TYPE, NULL},
	    {{0}, CPU_TYPE "{comm=\"nginx\"}", NULL},
	    {{0}, CPU_TYPE "{comm=\"nobody\"}", NULL},
	    {{.filter = "inl"}, CPU_TYPE, NULL},
	    {{.filter = "nothing-matches"}, CPU_TYPE, NULL},
	    {{.hide_binaries = hide, .n_hide_binaries = 1}, CPU_TYPE, NULL},
	    {{.trim_fraction = 0.1}, CPU_TYPE, NULL},
	    {{.diff = true}, CPU_TYPE "{node=\"web-3\"}", CPU_TYPE "{node=\"web-1\"}"},
	    {{.diff = true}, CPU_TYPE "{node=\"none\"}", CPU_TYPE "{comm=\"redis\"}"},
	    {{.diff = true, .filter = "rec"}, CPU_TYPE "{comm=\"redis\"}", CPU_TYPE},
	};
	struct env *e = *state;

	ingest(e, "nginx", "web-1", e->full, 1000);
	ingest(e, "nginx", "web-2", e->full, 2000);
	ingest(e, "redis", "db-1", e->full, 3000);
	ingest(e, "redis", "web-3", e->base, 4000);
	for (int round = 0; round < 2; round++) {
		/* round 1 reads blocks (and their rollups) instead of the head */
		if (round == 1) {
			struct kiln_error err = {0};

			if (store_flush(e->s, &err))
				fail_msg("store_flush: %s", err.msg);
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			bool matched;
			struct query_tree *ts =
			    store_tree(e, &cases[i].o, cases[i].a, cases[i].b, &matched);
			struct query_tree *tp =
			    profile_tree(e, &cases[i].o, cases[i].a, cases[i].b);
			char *js = json_of(ts), *jp = json_of(tp);
			char *fs = folded(ts), *fp = folded(tp);

			if (strcmp(js, jp) || strcmp(fs, fp))
				fail_msg("case %zu (%s): store tree\n%s\n%s\nprofile tree\n%s\n%s",
					 i, cases[i].a, js, fs, jp, fp);
			assert_int_equal(matched, query_tree_total(tp) != 0 ||
						      query_tree_base_total(tp) != 0);
			free(js);
			free(jp);
			free(fs);
			free(fp);
			query_tree_free(ts);
			query_tree_free(tp);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_select_merge_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_tree_equals_profile_tree, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
