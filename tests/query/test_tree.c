/*
 * test_tree.c — the flame graph tree and its reports: totals, inline
 * expansion order, unsymbolized frame names, diff values, filter, hidden
 * binaries, trimming, node limits, the columnar JSON (checked by Python's
 * json module), top tables and folded stacks. The fixture is described in
 * fixtures.h; every expected value below follows from it by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

#include "fixtures.h"
#include "json_check.h"

static char *folded_of(const struct query_tree *t)
{
	struct buf b;

	buf_init(&b);
	assert_int_equal(query_tree_write_folded(t, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	return (char *)b.data ? (char *)b.data : strdup("");
}

static void assert_folded(const struct query_tree *t, const char *want)
{
	char *got = folded_of(t);

	if (strcmp(got, want))
		fail_msg("folded:\n%s\nwant:\n%s", got, want);
	free(got);
}

/* Index of the node reached from the root by names (NULL-terminated), or
 * -1. */
static long find_node(const struct query_tree *t, const char *const *path)
{
	struct query_node n;
	long i = 0;

	for (; *path; path++) {
		long c;

		query_tree_node(t, (size_t)i, &n);
		for (c = n.first_child; c >= 0;) {
			struct query_node k;

			query_tree_node(t, (size_t)c, &k);
			if (!strcmp(query_tree_string(t, k.name), *path))
				break;
			c = k.next_sibling;
		}
		if (c < 0)
			return -1;
		i = c;
	}
	return i;
}

static struct query_node node_at(const struct query_tree *t, const char *const *path)
{
	struct query_node n;
	long i = find_node(t, path);

	if (i < 0)
		fail_msg("no node %s...", path[0]);
	query_tree_node(t, (size_t)i, &n);
	return n;
}

#define PATH(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_tree_totals_and_shape(void **state)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree *t;
	struct query_node n, root;
	int64_t self_sum = 0;

	(void)state;
	assert_int_equal(query_tree_build(p, 1, NULL, &t, NULL), 0);
	assert_int_equal(query_tree_total(t), 150);
	assert_int_equal(query_tree_filtered(t), 150);
	assert_string_equal(query_tree_unit(t), "nanoseconds");
	assert_string_equal(query_tree_sample_type(t), "cpu");
	assert_false(query_tree_is_diff(t));
	/* root, 0xdead, main, rec x3, work, inl, [app], memcpy */
	assert_int_equal(query_tree_node_count(t), 10);
	assert_int_equal(query_tree_height(t), 4);
	query_tree_node(t, 0, &root);
	assert_string_equal(query_tree_string(t, root.name), "total");
	assert_int_equal(root.parent, -1);
	assert_int_equal(root.cum, 150);
	assert_int_equal(root.subtree_size, 10);

	/* every node: cum = self + children's cum; self sums to the total */
	for (size_t i = 0; i < query_tree_node_count(t); i++) {
		int64_t kids = 0;

		query_tree_node(t, i, &n);
		self_sum += n.self;
		for (int64_t c = n.first_child; c >= 0;) {
			struct query_node k;

			query_tree_node(t, (size_t)c, &k);
			assert_int_equal(k.parent, (int64_t)i);
			assert_int_equal(k.depth, n.depth + 1);
			kids += k.cum;
			c = k.next_sibling;
		}
		assert_int_equal(n.cum, n.self + kids);
	}
	assert_int_equal(self_sum, 150);

	n = node_at(t, PATH("main"));
	assert_int_equal(n.cum, 100);
	assert_int_equal(n.self, 0);
	assert_string_equal(query_tree_string(t, n.binary), "/usr/bin/app");
	assert_string_equal(query_tree_string(t, n.file), "main.c");
	assert_string_equal(query_tree_string(t, n.build_id), "b1d");
	assert_int_equal(n.line, 3);
	n = node_at(t, PATH("main", "rec", "rec", "rec"));
	assert_int_equal(n.self, 40);
	assert_int_equal(n.first_child, -1);
	assert_int_equal(node_at(t, PATH("0xdead")).self, 50);
	assert_int_equal(node_at(t, PATH("0xdead")).binary, 0);
	query_tree_free(t);

	/* the other sample type */
	assert_int_equal(query_tree_build(p, 0, NULL, &t, NULL), 0);
	assert_int_equal(query_tree_total(t), 15);
	assert_string_equal(query_tree_unit(t), "count");
	query_tree_free(t);
	/* default = last sample type */
	assert_int_equal(query_tree_build(p, -1, NULL, &t, NULL), 0);
	assert_int_equal(query_tree_total(t), 150);
	query_tree_free(t);
	pprof_profile_free(p);
}

/* line[0] is the innermost function: inl hangs below work; unsymbolized
 * frames are named from their mapping. */
static void test_tree_inline_order_and_unsymbolized(void **state)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree *t;
	struct query_node n;

	(void)state;
	assert_int_equal(query_tree_build(p, 1, NULL, &t, NULL), 0);
	n = node_at(t, PATH("main", "work", "inl"));
	assert_int_equal(n.cum, 60);
	assert_int_equal(n.self, 30);
	assert_int_equal(n.line, 20);
	assert_string_equal(query_tree_string(t, n.file), "work.c");
	assert_int_equal(find_node(t, PATH("main", "inl")), -1);
	n = node_at(t, PATH("main", "work", "inl", "[app] +0x4abc"));
	assert_int_equal(n.self, 20);
	assert_string_equal(query_tree_string(t, n.binary), "/usr/bin/app");
	n = node_at(t, PATH("main", "work", "inl", "memcpy"));
	assert_string_equal(query_tree_string(t, n.binary), "/lib/libc.so.6");
	assert_int_equal(n.file, 0);
	/* siblings sorted by name: '[' sorts before 'm' */
	assert_folded(t, "0xdead 50\n"
			 "main;rec;rec;rec 40\n"
			 "main;work;inl 30\n"
			 "main;work;inl;[app] +0x4abc 20\n"
			 "main;work;inl;memcpy 10\n");
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_tree_diff(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_tree *t;
	struct query_node n;

	(void)state;
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, NULL, &t, NULL), 0);
	assert_true(query_tree_is_diff(t));
	assert_int_equal(query_tree_total(t), 150);
	assert_int_equal(query_tree_base_total(t), 37);
	n = node_at(t, PATH("main"));
	assert_int_equal(n.cum, 100);
	assert_int_equal(n.base_cum, 37);
	assert_int_equal(n.diff, 63);
	n = node_at(t, PATH("main", "work", "inl"));
	assert_int_equal(n.diff, 30);
	assert_int_equal(n.base_self, 30);
	n = node_at(t, PATH("main", "other"));
	assert_int_equal(n.cum, 0);
	assert_int_equal(n.diff, -7);
	n = node_at(t, PATH("0xdead"));
	assert_int_equal(n.diff, 50);
	query_tree_node(t, 0, &n);
	assert_int_equal(n.diff, 150 - 37);
	/* folded diff lines: "stack A B" */
	assert_folded(t, "0xdead 0 50\n"
			 "main;other 7 0\n"
			 "main;rec;rec;rec 0 40\n"
			 "main;work;inl 30 30\n"
			 "main;work;inl;[app] +0x4abc 0 20\n"
			 "main;work;inl;memcpy 0 10\n");

	/* sides must match the tree kind */
	{
		struct query_tree_options o = {.diff = true};
		struct query_tree *d = query_tree_new(&o);
		struct kiln_error err = {0};

		assert_int_equal(query_tree_add(d, a, 1, QUERY_SIDE_SINGLE, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "BASE or COMPARE"));
		assert_int_equal(query_tree_add(d, a, 5, QUERY_SIDE_BASE, NULL), -EINVAL);
		query_tree_free(d);
	}
	query_tree_free(t);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

/* Several profiles added to one tree sum up, whatever order their samples
 * come in (the shared-prefix shortcut must not depend on it). */
/* Normalized diffs: A in B's terms before anything is summed. */
static void test_tree_diff_scaled(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_tree_options o = {.diff_scale = QUERY_DIFF_BY_FACTOR, .base_factor = 2};
	struct query_tree *t;
	struct query_node n;

	(void)state;
	/* B's range twice A's: A counts double. */
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, &o, &t, NULL), 0);
	assert_true(query_tree_base_scale(t) == 2);
	assert_int_equal(query_tree_base_total(t), 74);
	n = node_at(t, PATH("main", "work", "inl"));
	assert_int_equal(n.base_self, 60);
	assert_int_equal(n.diff, 0);
	n = node_at(t, PATH("main"));
	assert_int_equal(n.base_cum, 74);
	assert_int_equal(n.diff, 100 - 74);
	query_tree_free(t);
	/* By total: A's 37 become B's 150; the root changes by nothing. */
	o.diff_scale = QUERY_DIFF_BY_TOTAL;
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, &o, &t, NULL), 0);
	assert_true(fabs(query_tree_base_scale(t) - 150.0 / 37) < 1e-12);
	query_tree_node(t, 0, &n);
	assert_true(n.diff >= -1 && n.diff <= 1);
	n = node_at(t, PATH("main", "other"));
	assert_int_equal(n.base_cum, 28); /* 7 * 150 / 37 = 28.4 */
	query_tree_free(t);
	/* Absolute is the default, and a single tree ignores the option. */
	o.diff_scale = QUERY_DIFF_BY_FACTOR;
	assert_int_equal(query_tree_build(b, 1, &o, &t, NULL), 0);
	assert_true(query_tree_base_scale(t) == 1);
	query_tree_free(t);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void test_tree_adds_sum(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_tree *t = query_tree_new(NULL);
	char *got;

	(void)state;
	assert_non_null(t);
	assert_int_equal(query_tree_add(t, b, 1, QUERY_SIDE_SINGLE, NULL), 0);
	assert_int_equal(query_tree_add(t, a, 1, QUERY_SIDE_SINGLE, NULL), 0);
	assert_int_equal(query_tree_add(t, b, 1, QUERY_SIDE_SINGLE, NULL), 0);
	assert_int_equal(query_tree_finish(t, NULL), 0);
	assert_int_equal(query_tree_add(t, b, 1, QUERY_SIDE_SINGLE, NULL), -EINVAL);
	assert_int_equal(query_tree_total(t), 337);
	got = folded_of(t);
	assert_string_equal(got, "0xdead 100\n"
				 "main;other 7\n"
				 "main;rec;rec;rec 80\n"
				 "main;work;inl 90\n"
				 "main;work;inl;[app] +0x4abc 40\n"
				 "main;work;inl;memcpy 20\n");
	free(got);
	query_tree_free(t);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void test_tree_filter(void **state)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree_options o = {.filter = "memc"};
	struct query_tree *t;

	(void)state;
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_total(t), 150);
	assert_int_equal(query_tree_filtered(t), 10);
	assert_folded(t, "main;work;inl;memcpy 10\n");
	query_tree_free(t);

	/* a function in the middle of stacks keeps the whole stacks */
	o.filter = "work";
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_filtered(t), 60);
	assert_int_equal(node_at(t, PATH("main")).cum, 60);
	query_tree_free(t);

	/* matches an unsymbolized name too; nothing matches -> empty tree */
	o.filter = "dead";
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_filtered(t), 50);
	query_tree_free(t);
	o.filter = "nope";
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_filtered(t), 0);
	assert_int_equal(query_tree_node_count(t), 1);
	assert_folded(t, "");
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_tree_hide_binaries(void **state)
{
	struct pprof_profile *p = fixture_profile();
	const char *libc[] = {"libc.so.6"};
	const char *app[] = {"/usr/bin/app"};
	struct query_tree_options o = {.hide_binaries = libc, .n_hide_binaries = 1};
	struct query_tree *t;

	(void)state;
	/* by basename: memcpy's value stays with inl */
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_total(t), 150);
	assert_int_equal(query_tree_filtered(t), 150);
	assert_int_equal(find_node(t, PATH("main", "work", "inl", "memcpy")), -1);
	assert_int_equal(node_at(t, PATH("main", "work", "inl")).self, 40);
	query_tree_free(t);

	/* by full path; samples left without frames sit on the root */
	o.hide_binaries = app;
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_folded(t, "0xdead 50\n"
			 "memcpy 10\n"
			 "[unknown] 90\n");
	/* hidden frames do not satisfy the filter */
	query_tree_free(t);
	o.filter = "main";
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_filtered(t), 0);
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_tree_trim_and_limit(void **state)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree_options o = {.trim_fraction = 0.25};
	struct query_tree *t;
	struct kiln_error err = {0};

	(void)state;
	/* threshold 37.5: keeps 0xdead (50), main (100), rec chain (40), work (60), inl (60) */
	assert_int_equal(query_tree_build(p, 1, &o, &t, NULL), 0);
	assert_int_equal(query_tree_node_count(t), 8);
	assert_int_equal(find_node(t, PATH("main", "work", "inl", "memcpy")), -1);
	assert_int_equal(node_at(t, PATH("main", "work", "inl")).cum, 60);
	query_tree_free(t);

	o.trim_fraction = 0;
	o.max_nodes = 4;
	assert_int_equal(query_tree_build(p, 1, &o, &t, &err), -E2BIG);
	assert_null(t);
	assert_non_null(strstr(err.msg, "more than 4 nodes"));
	pprof_profile_free(p);
}

static void test_tree_json(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_tree *t;
	struct buf out;
	/* structural checks shared by both documents */
	static const char *const common_checks =
	    "n = doc['nodes']\n"
	    "cols = ['name','binary','file','line','depth','parent','cum','self']\n"
	    "N = len(n['name'])\n"
	    "assert all(len(n[c]) == N for c in cols), 'ragged columns'\n"
	    "S = doc['strings']\n"
	    "assert S[0] == '' and len(set(S)) == len(S), 'strings not deduplicated'\n"
	    "assert S[n['name'][0]] == 'total' and n['parent'][0] == -1 and n['depth'][0] == 0\n"
	    "assert doc['height'] == max(n['depth'])\n"
	    "kids = [0] * N\n"
	    "for i in range(1, N):\n"
	    "    p = n['parent'][i]\n"
	    "    assert 0 <= p < i and n['depth'][i] == n['depth'][p] + 1, 'not pre-order'\n"
	    "    kids[p] += n['cum'][i]\n"
	    "for i in range(N):\n"
	    "    assert n['cum'][i] == n['self'][i] + kids[i]\n"
	    "names = {}\n"
	    "for i in range(N):\n"
	    "    path = []\n"
	    "    j = i\n"
	    "    while j > 0:\n"
	    "        path.append(S[n['name'][j]])\n"
	    "        j = n['parent'][j]\n"
	    "    names[';'.join(reversed(path))] = i\n";

	(void)state;
	buf_init(&out);
	assert_int_equal(query_tree_build(b, 1, NULL, &t, NULL), 0);
	assert_int_equal(query_tree_write_json(t, &out), 0);
	{
		char script[4096];

		snprintf(script, sizeof(script),
			 "%s"
			 "assert doc['unit'] == 'nanoseconds' and doc['total'] == 150\n"
			 "assert doc['filtered'] == 150 and 'diff' not in n\n"
			 "i = names['main;work;inl;[app] +0x4abc']\n"
			 "assert n['self'][i] == 20 and S[n['binary'][i]] == '/usr/bin/app'\n"
			 "i = names['main;work;inl']\n"
			 "assert S[n['file'][i]] == 'work.c' and n['line'][i] == 20\n"
			 "assert n['cum'][names['main']] == 100\n",
			 common_checks);
		json_check(&out, script);
	}
	query_tree_free(t);

	buf_reset(&out);
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, NULL, &t, NULL), 0);
	assert_int_equal(query_tree_write_json(t, &out), 0);
	{
		char script[4096];

		snprintf(script, sizeof(script),
			 "%s"
			 "assert len(n['diff']) == N\n"
			 "assert n['diff'][names['main']] == 63\n"
			 "assert n['diff'][names['main;other']] == -7\n"
			 "assert n['cum'][names['main;other']] == 0\n"
			 "assert n['diff'][0] == 113\n",
			 common_checks);
		json_check(&out, script);
	}
	query_tree_free(t);
	buf_free(&out);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

/* Names that need escaping reach the JSON intact; folded lines stay one
 * line each. */
static void test_tree_awkward_names(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc m = {
	    .memory_start = 0x1000, .memory_limit = 0x2000, .filename = "/opt/we\"ird/bin"};
	struct pprof_line_desc l = {0};
	struct pprof_profile *p;
	struct query_tree *t;
	struct buf out;
	uint64_t map, loc;
	int64_t v = 5;

	(void)state;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	map = pprof_builder_mapping(b, &m);
	l.function_id =
	    pprof_builder_function(b, "std::map<a;b>::f\n\"x\"\\\x01\xff", NULL, NULL, 0);
	loc = pprof_builder_location(b, map, 0x1100, &l, 1);
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	p = fixture_to_profile(b);
	assert_int_equal(query_tree_build(p, 0, NULL, &t, NULL), 0);
	buf_init(&out);
	assert_int_equal(query_tree_write_json(t, &out), 0);
	json_check(&out, "S = doc['strings']\n"
			 "assert 'std::map<a;b>::f\\n\"x\"\\\\\\x01\\ufffd' in S, S\n"
			 "assert '/opt/we\"ird/bin' in S\n");
	assert_folded(t, "std::map<a:b>::f \"x\"\\\x01\xff 5\n");
	query_tree_free(t);
	buf_free(&out);
	pprof_profile_free(p);
}

static void test_top(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_tree *t;
	struct query_top *top;
	struct buf out;
	int64_t flat = 0;

	(void)state;
	assert_int_equal(query_tree_build(b, 1, NULL, &t, NULL), 0);
	assert_int_equal(query_top_build(t, &top, NULL), 0);
	assert_int_equal(top->n_rows, 7);
	/* by flat desc: 0xdead 50, rec 40, inl 30, [app] 20, memcpy 10, then
	 * main (cum 100) and work (cum 60) with flat 0 */
	assert_string_equal(query_tree_string(t, top->rows[0].name), "0xdead");
	assert_string_equal(query_tree_string(t, top->rows[1].name), "rec");
	assert_int_equal(top->rows[1].flat, 40);
	assert_int_equal(top->rows[1].cum, 40); /* recursion counted once */
	assert_string_equal(query_tree_string(t, top->rows[2].name), "inl");
	assert_int_equal(top->rows[2].cum, 60);
	assert_string_equal(query_tree_string(t, top->rows[5].name), "main");
	assert_int_equal(top->rows[5].cum, 100);
	assert_string_equal(query_tree_string(t, top->rows[6].name), "work");
	for (size_t i = 0; i < top->n_rows; i++)
		flat += top->rows[i].flat;
	assert_int_equal(flat, 150);

	buf_init(&out);
	assert_int_equal(query_top_write_json(top, 0, &out), 0);
	json_check(&out,
		   "assert doc['unit'] == 'nanoseconds' and doc['total'] == 150\n"
		   "r = doc['rows']\n"
		   "assert len(r) == 7 and r[0]['name'] == '0xdead' and r[0]['flat'] == 50\n"
		   "assert r[1] == {'name': 'rec', 'binary': '/usr/bin/app', 'file': 'rec.c', "
		   "'line': 7, 'flat': 40, 'cum': 40}, r[1]\n");
	buf_reset(&out);
	assert_int_equal(query_top_write_text(top, 3, &out), 0);
	assert_int_equal(buf_terminate(&out), 0);
	assert_non_null(strstr((char *)out.data,
			       "Showing nodes accounting for 120ns, 80.00% of 150ns total\n"
			       "Showing top 3 nodes out of 7\n"));
	assert_non_null(
	    strstr((char *)out.data, "      40ns 26.67% 60.00%       40ns 26.67%  rec [app]\n"));
	query_top_free(top);
	query_tree_free(t);

	/* diff columns */
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, NULL, &t, NULL), 0);
	assert_int_equal(query_top_build(t, &top, NULL), 0);
	buf_reset(&out);
	assert_int_equal(query_top_write_json(top, 0, &out), 0);
	json_check(&out, "r = {x['name']: x for x in doc['rows']}\n"
			 "assert r['other']['flat'] == 0 and r['other']['diff_flat'] == -7\n"
			 "assert r['main']['diff_cum'] == 63 and r['inl']['diff_flat'] == 0\n"
			 "assert r['rec']['diff_flat'] == 40\n");
	query_top_free(top);
	query_tree_free(t);
	buf_free(&out);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void test_top_units(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_line_desc l = {0};
	struct pprof_profile *p;
	struct query_tree *t;
	struct query_top *top;
	struct buf out;
	uint64_t loc;
	int64_t v = 1500000000;

	(void)state;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "alloc_space", "bytes"), 0);
	l.function_id = pprof_builder_function(b, "alloc", NULL, NULL, 0);
	loc = pprof_builder_location(b, 0, 0x10, &l, 1);
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	p = fixture_to_profile(b);
	assert_int_equal(query_tree_build(p, 0, NULL, &t, NULL), 0);
	assert_int_equal(query_top_build(t, &top, NULL), 0);
	buf_init(&out);
	assert_int_equal(query_top_write_text(top, 0, &out), 0);
	assert_int_equal(buf_terminate(&out), 0);
	if (!strstr((char *)out.data, "    1.40GB   100%   100%     1.40GB   100%  alloc\n"))
		fail_msg("%s", (char *)out.data);
	buf_free(&out);
	query_top_free(top);
	query_tree_free(t);
	pprof_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_totals_and_shape),
	    cmocka_unit_test(test_tree_inline_order_and_unsymbolized),
	    cmocka_unit_test(test_tree_diff),
	    cmocka_unit_test(test_tree_diff_scaled),
	    cmocka_unit_test(test_tree_adds_sum),
	    cmocka_unit_test(test_tree_filter),
	    cmocka_unit_test(test_tree_hide_binaries),
	    cmocka_unit_test(test_tree_trim_and_limit),
	    cmocka_unit_test(test_tree_json),
	    cmocka_unit_test(test_tree_awkward_names),
	    cmocka_unit_test(test_top),
	    cmocka_unit_test(test_top_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
