/*
 * test_peer_go.c — Kiln's flame graph tree, folded stacks and top table
 * against real peers: profiles written by Go's runtime/pprof (a small
 * program, tests/query/peers/profgen, built with the Go toolchain in the
 * test) and read independently by `go tool pprof -raw`, whose output
 * tests/query/pprof_raw_folded.py turns into the expected folded stacks and
 * per-function flat/cum values. Every sample type of a CPU and a heap
 * profile is compared exactly.
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
#include <unistd.h>

#include "pprof/pprof.h"
#include "query/query.h"

#include "json_check.h"

struct peer_env {
	char dir[64];
	char root[512];
};

static int run(const char *cmd)
{
	int rc = system(cmd);

	if (rc != 0)
		print_error("command failed (status %d): %s\n", rc, cmd);
	return rc;
}

static int setup(void **state)
{
	struct peer_env *env = calloc(1, sizeof(*env));
	const char *root = getenv("KILN_ROOT");
	char cmd[2048];

	assert_non_null(env);
	snprintf(env->root, sizeof(env->root), "%s", root ? root : ".");
	snprintf(env->dir, sizeof(env->dir), "/tmp/kiln-query-peer-XXXXXX");
	assert_non_null(mkdtemp(env->dir));
	/* the Go build cache must be writable; HOME may not be set under CI */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && { [ -n \"$HOME\" ] || export GOCACHE=%s/gocache; } && "
		 "go build -o %s/profgen "
		 "tests/query/peers/profgen/main.go && %s/profgen %s",
		 env->root, env->dir, env->dir, env->dir, env->dir);
	if (run(cmd))
		return -1;
	*state = env;
	return 0;
}

static int teardown(void **state)
{
	struct peer_env *env = *state;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", env->dir);
	(void)!system(cmd);
	free(env);
	return 0;
}

static void write_file(const char *path, const struct buf *b)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
	assert_int_equal(fclose(f), 0);
}

/* Compares Kiln's folded stacks and top table for one sample type of one
 * profile with go tool pprof's reading. */
static void compare_with_go(const struct peer_env *env, const char *profile, int idx)
{
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct query_tree *t;
	struct query_top *top;
	char path[256], mine[256], cmd[4096];
	struct buf out;

	snprintf(path, sizeof(path), "%s/%s", env->dir, profile);
	if (pprof_decode_file(path, NULL, &p, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(query_tree_build(p, idx, NULL, &t, &err), 0);
	buf_init(&out);

	assert_int_equal(query_tree_write_folded(t, &out), 0);
	snprintf(mine, sizeof(mine), "%s/folded.%s.%d", env->dir, profile, idx);
	write_file(mine, &out);
	snprintf(cmd, sizeof(cmd),
		 "go tool pprof -raw %s 2>/dev/null | python3 %s/tests/query/pprof_raw_folded.py "
		 "folded %d | LC_ALL=C sort > %s.want && LC_ALL=C sort %s > %s.got && "
		 "[ -s %s.want ] && diff -u %s.want %s.got",
		 path, env->root, idx, mine, mine, mine, mine, mine, mine);
	if (run(cmd))
		fail_msg("%s sample type %d: folded stacks differ from go tool pprof", profile,
			 idx);

	/* the total */
	snprintf(cmd, sizeof(cmd),
		 "test \"$(go tool pprof -raw %s 2>/dev/null | python3 "
		 "%s/tests/query/pprof_raw_folded.py total %d)\" = %lld",
		 path, env->root, idx, (long long)query_tree_total(t));
	if (run(cmd))
		fail_msg("%s sample type %d: total %lld differs from go tool pprof", profile, idx,
			 (long long)query_tree_total(t));

	/* top: NAME FLAT CUM per function */
	assert_int_equal(query_top_build(t, &top, &err), 0);
	buf_reset(&out);
	for (size_t i = 0; i < top->n_rows; i++)
		assert_int_equal(
		    buf_printf(&out, "%s %lld %lld\n", query_tree_string(t, top->rows[i].name),
			       (long long)top->rows[i].flat, (long long)top->rows[i].cum),
		    0);
	snprintf(mine, sizeof(mine), "%s/top.%s.%d", env->dir, profile, idx);
	write_file(mine, &out);
	snprintf(cmd, sizeof(cmd),
		 "go tool pprof -raw %s 2>/dev/null | python3 %s/tests/query/pprof_raw_folded.py "
		 "top %d | LC_ALL=C sort > %s.want && LC_ALL=C sort %s > %s.got && "
		 "diff -u %s.want %s.got",
		 path, env->root, idx, mine, mine, mine, mine, mine);
	if (run(cmd))
		fail_msg("%s sample type %d: top table differs from go tool pprof", profile, idx);

	/* and the JSON of a real profile parses and is consistent */
	buf_reset(&out);
	assert_int_equal(query_tree_write_json(t, &out), 0);
	json_check(&out, "n = doc['nodes']\n"
			 "N = len(n['name'])\n"
			 "kids = [0] * N\n"
			 "for i in range(1, N):\n"
			 "    kids[n['parent'][i]] += n['cum'][i]\n"
			 "assert all(n['cum'][i] == n['self'][i] + kids[i] for i in range(N))\n"
			 "assert n['cum'][0] == doc['total']\n");
	query_top_free(top);
	buf_free(&out);
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_go_cpu_profile(void **state)
{
	compare_with_go(*state, "cpu.pb.gz", 0);
	compare_with_go(*state, "cpu.pb.gz", 1);
}

static void test_go_heap_profile(void **state)
{
	for (int i = 0; i < 4; i++)
		compare_with_go(*state, "heap.pb.gz", i);
}

/* A profile with unsymbolized frames: Kiln builds it, go tool pprof reads
 * the encoded file, both name the frames the same way. */
static void test_unsymbolized_against_go(void **state)
{
	struct peer_env *env = *state;
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc m = {.memory_start = 0x400000,
				       .memory_limit = 0x500000,
				       .file_offset = 0x2000,
				       .filename = "/usr/lib/libfoo.so"};
	struct pprof_line_desc l = {0};
	uint64_t map, lraw, lraw2, lnomap, lsym, stack[3];
	int64_t v = 7;
	struct buf out;
	char path[256];

	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	map = pprof_builder_mapping(b, &m);
	l.function_id = pprof_builder_function(b, "main", "main", "main.c", 1);
	lsym = pprof_builder_location(b, map, 0x400100, &l, 1);
	lraw = pprof_builder_location(b, map, 0x401234, NULL, 0);
	lraw2 = pprof_builder_location(b, map, 0x402000, NULL, 0);
	lnomap = pprof_builder_location(b, 0, 0xfeed, NULL, 0);
	stack[0] = lraw;
	stack[1] = lraw2;
	stack[2] = lsym;
	assert_int_equal(pprof_builder_add_sample(b, stack, 3, &v, NULL, 0), 0);
	stack[0] = lnomap;
	v = 3;
	assert_int_equal(pprof_builder_add_sample(b, stack, 3, &v, NULL, 0), 0);
	buf_init(&out);
	assert_int_equal(pprof_builder_encode(b, true, &out), 0);
	snprintf(path, sizeof(path), "%s/unsym.pb.gz", env->dir);
	write_file(path, &out);
	buf_free(&out);
	pprof_builder_free(b);
	compare_with_go(env, "unsym.pb.gz", 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_go_cpu_profile),
	    cmocka_unit_test(test_go_heap_profile),
	    cmocka_unit_test(test_unsymbolized_against_go),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
