/*
 * test_store.c — the embedded store through store.h: write/query round
 * trips with builder-made pprof profiles, labels and matchers, range
 * queries, merges, blocks, compaction, retention, WAL recovery, concurrency
 * and the symbolization hook.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "store_test_util.h"

struct fixture {
	char *dir;
	struct store *s;
	struct store_options opts;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct kiln_error err = {0};

	f->dir = make_tmpdir();
	f->opts.path = f->dir;
	f->opts.block_duration_ms = 10000;
	if (store_open(&f->opts, &f->s, &err)) {
		fprintf(stderr, "open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_close(f->s);
	rm_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void reopen(struct fixture *f)
{
	struct kiln_error err = {0};

	store_close(f->s);
	f->s = NULL;
	assert_int_equal(store_open(&f->opts, &f->s, &err), 0);
}

static void write_one(struct store *s, const char *comm, const char *node,
		      const struct pprof_profile *p, int64_t ts)
{
	struct label l[3] = {{"__name__", "process_cpu"}, {"comm", comm}, {"node", node}};
	struct kiln_error err = {0};
	int rc = store_write_profile(s, l, 3, p, ts, true, &err);

	if (rc)
		fprintf(stderr, "write: %s\n", err.msg);
	assert_int_equal(rc, 0);
}

static int64_t merged_total(struct store *s, const char *type, const struct store_matcher *m,
			    size_t n, int64_t lo, int64_t hi, size_t *n_samples)
{
	struct store_selector sel = {type, m, n, lo, hi};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	int64_t t = 0;

	if (!p) {
		if (n_samples)
			*n_samples = 0;
		return 0;
	}
	if (pprof_profile_msg(p)->n_sample_type)
		t = profile_total(p, 0);
	if (n_samples)
		*n_samples = pprof_profile_msg(p)->n_sample;
	pprof_profile_free(p);
	return t;
}

static void collect(void *ctx, const char *s)
{
	struct buf *b = ctx;

	buf_printf(b, "%s,", s);
}

static void test_roundtrip_merge(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(40, 1, 0), *b = make_profile(40, 5, 0);
	struct store_matcher m = {STORE_MATCH_EQ, "comm", "nginx", NULL};
	struct buf types = {0};
	size_t ns;

	write_one(f->s, "nginx", "a", a, 1000);
	write_one(f->s, "nginx", "a", b, 2000);
	write_one(f->s, "redis", "a", a, 3000);
	assert_int_equal(merged_total(f->s, CPU_TYPE, &m, 1, 0, 10000, &ns),
			 profile_total(a, 0) + profile_total(b, 0));
	assert_int_equal(ns, 40); /* same stacks in both: summed per stack */
	assert_int_equal(merged_total(f->s, NS_TYPE, &m, 1, 0, 10000, NULL),
			 profile_total(a, 1) + profile_total(b, 1));
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, 10000, NULL),
			 2 * profile_total(a, 0) + profile_total(b, 0));
	assert_int_equal(store_profile_types(f->s, 0, 10000, collect, &types, NULL), 0);
	buf_terminate(&types);
	assert_string_equal((char *)types.data, NS_TYPE "," CPU_TYPE ",");

	/* The merged profile resolves real frames. */
	struct store_selector sel = {CPU_TYPE, &m, 1, 0, 10000};
	struct pprof_profile *p = merge_to_profile(f->s, &sel);
	assert_non_null(p);
	const pprof_msg *msg = pprof_profile_msg(p);
	assert_int_equal(msg->n_sample_type, 1);
	assert_string_equal(pprof_string(p, msg->sample_type[0]->type), "samples");
	assert_int_equal(msg->period, 10000000);
	bool found = false;
	for (size_t i = 0; i < msg->n_function; i++)
		found |= strcmp(pprof_string(p, msg->function[i]->name), "fn_7") == 0;
	assert_true(found);
	pprof_profile_free(p);
	buf_free(&types);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

/* The ingest fast path keys stacks by content, not by pprof ids: the same
 * profile with renumbered ids (dense with gaps, sparse) lands on the same
 * stacks, and a location with many inlined lines round-trips. */
static struct pprof_profile *renumber(const struct pprof_profile *src)
{
	struct buf raw = {0}, out = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	pprof_msg *m;

	assert_int_equal(pprof_encode(pprof_profile_msg(src), false, &raw), 0);
	m = perftools__profiles__profile__unpack(NULL, raw.len, raw.data);
	assert_non_null(m);
	for (size_t i = 0; i < m->n_mapping; i++)
		m->mapping[i]->id += 1;
	for (size_t i = 0; i < m->n_function; i++)
		m->function[i]->id += 3; /* dense table with a gap */
	for (size_t i = 0; i < m->n_location; i++) {
		Perftools__Profiles__Location *l = m->location[i];

		l->id = l->id * 1000 + 7; /* sparse: a hash table */
		if (l->mapping_id)
			l->mapping_id += 1;
		for (size_t j = 0; j < l->n_line; j++)
			l->line[j]->function_id += 3;
	}
	for (size_t i = 0; i < m->n_sample; i++)
		for (size_t j = 0; j < m->sample[i]->n_location_id; j++)
			m->sample[i]->location_id[j] = m->sample[i]->location_id[j] * 1000 + 7;
	assert_int_equal(buf_reserve(&out, perftools__profiles__profile__get_packed_size(m)), 0);
	out.len = perftools__profiles__profile__pack(m, out.data);
	perftools__profiles__profile__free_unpacked(m, NULL);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &p, &err), 0);
	buf_free(&raw);
	buf_free(&out);
	return p;
}

static void test_ids_and_inline_lines(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(40, 1, 0), *r = renumber(a), *deep = NULL;
	struct store_matcher ma = {STORE_MATCH_EQ, "comm", "a", NULL};
	struct store_matcher mr = {STORE_MATCH_EQ, "comm", "r", NULL};
	struct store_matcher md = {STORE_MATCH_EQ, "comm", "deep", NULL};
	struct store_stats st0, st1;
	size_t ns;

	assert_true(pprof_profile_msg(r)->location[0]->id > 1000); /* ids kept by decode */
	write_one(f->s, "a", "n", a, 1000);
	store_get_stats(f->s, &st0);
	write_one(f->s, "r", "n", r, 1000);
	store_get_stats(f->s, &st1);
	assert_int_equal(st1.stacks, st0.stacks);
	assert_int_equal(st1.locations, st0.locations);
	assert_int_equal(merged_total(f->s, CPU_TYPE, &mr, 1, 0, 10000, &ns), profile_total(a, 0));
	assert_int_equal(ns, 40);
	assert_int_equal(merged_total(f->s, CPU_TYPE, &ma, 1, 0, 10000, &ns), profile_total(a, 0));
	assert_int_equal(ns, 40);

	/* 20 inlined frames in one location (more than the on-stack key). */
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc mdesc = {.memory_start = 0x400000,
					   .memory_limit = 0x800000,
					   .filename = "/usr/bin/app",
					   .has_functions = true};
	struct pprof_line_desc lines[20];
	char name[32];
	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	uint64_t map = pprof_builder_mapping(b, &mdesc);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "inl_%d", i);
		lines[i] = (struct pprof_line_desc){
		    pprof_builder_function(b, name, name, "inl.c", i), 100 + i, 0};
	}
	uint64_t locs[2] = {pprof_builder_location(b, map, 0x401234, lines, 20),
			    pprof_builder_location(b, map, 0x401000, lines, 1)};
	int64_t v[2] = {7, 70000000};
	assert_int_equal(pprof_builder_add_sample(b, locs, 2, v, NULL, 0), 0);
	lines[19].line = 999; /* differs only in the last inlined line */
	locs[0] = pprof_builder_location(b, map, 0x401234, lines, 20);
	v[0] = 5;
	assert_int_equal(pprof_builder_add_sample(b, locs, 2, v, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &deep, NULL), 0);
	pprof_builder_free(b);
	write_one(f->s, "deep", "n", deep, 1000);
	write_one(f->s, "deep", "n", deep, 2000);
	store_get_stats(f->s, &st1);
	assert_int_equal(st1.stacks, st0.stacks + 2);
	struct store_selector sel = {CPU_TYPE, &md, 1, 0, 10000};
	struct pprof_profile *p = merge_to_profile(f->s, &sel);
	assert_non_null(p);
	const pprof_msg *msg = pprof_profile_msg(p);
	assert_int_equal(msg->n_sample, 2);
	assert_int_equal(profile_total(p, 0), 24);
	size_t n20 = 0;
	for (size_t i = 0; i < msg->n_location; i++)
		n20 += msg->location[i]->n_line == 20;
	assert_int_equal(n20, 2);
	pprof_profile_free(p);
	pprof_profile_free(deep);
	pprof_profile_free(r);
	pprof_profile_free(a);
}

static void test_single_profile_and_range(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(10, 1, 1), *b = make_profile(10, 100, 2);

	write_one(f->s, "nginx", "a", a, 1000);
	write_one(f->s, "nginx", "a", b, 2000);
	write_one(f->s, "nginx", "a", a, 2000); /* same timestamp: summed */
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 2000, 2000, NULL),
			 profile_total(a, 0) + profile_total(b, 0));
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 1000, 1000, NULL),
			 profile_total(a, 0));
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 5000, 6000, NULL), 0);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

struct range_out {
	int calls;
	int64_t ts[8], v[8];
	size_t n;
	char labels[256];
};

static void range_cb(void *ctx, const struct label *l, size_t nl, const struct store_point *pts,
		     size_t n)
{
	struct range_out *o = ctx;

	o->calls++;
	o->n = n;
	for (size_t i = 0; i < n && i < 8; i++) {
		o->ts[i] = pts[i].timestamp_ms;
		o->v[i] = pts[i].value;
	}
	o->labels[0] = 0;
	for (size_t i = 0; i < nl; i++)
		snprintf(o->labels + strlen(o->labels), sizeof(o->labels) - strlen(o->labels),
			 "%s=%s;", l[i].name, l[i].value);
}

static void check_range(struct store *s, const struct pprof_profile *a,
			const struct pprof_profile *b)
{
	struct store_matcher m = {STORE_MATCH_EQ, "node", "a", NULL};
	struct store_selector sel = {CPU_TYPE, &m, 1, 0, 100000};
	struct range_out o = {0};

	assert_int_equal(store_query_range(s, &sel, range_cb, &o, NULL), 0);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.n, 3);
	assert_int_equal(o.ts[0], 1000);
	assert_int_equal(o.v[0], profile_total(a, 0));
	assert_int_equal(o.ts[1], 2000);
	assert_int_equal(o.v[1], profile_total(a, 0) + profile_total(b, 0));
	assert_int_equal(o.ts[2], 15000);
	assert_int_equal(o.v[2], profile_total(b, 0));
	assert_string_equal(o.labels, "comm=nginx;node=a;");
}

static void test_query_range_blocks_compaction_reopen(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(20, 3, 1), *b = make_profile(25, 7, 3);
	struct store_stats st;

	write_one(f->s, "nginx", "a", a, 1000);
	write_one(f->s, "nginx", "a", b, 2000);
	/* head -> a block for window 0 */
	assert_int_equal(store_flush(f->s, NULL), 0);
	store_get_stats(f->s, &st);
	assert_int_equal(st.blocks, 1);
	assert_int_equal(st.head_rows, 0);
	write_one(f->s, "nginx", "a", a, 2000);
	write_one(f->s, "nginx", "a", b, 15000); /* window 1 */
	check_range(f->s, a, b);
	/* second cut: one more block in window 0 (compacted) and one in 1 */
	assert_int_equal(store_flush(f->s, NULL), 0);
	store_get_stats(f->s, &st);
	assert_int_equal(st.blocks, 2);
	assert_true(st.compactions >= 1);
	check_range(f->s, a, b);
	/* a merge over part of a block reads rows; over all of it, rollups */
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, 100000, NULL),
			 2 * profile_total(a, 0) + 2 * profile_total(b, 0));
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 1500, 2500, NULL),
			 profile_total(a, 0) + profile_total(b, 0));
	reopen(f);
	check_range(f->s, a, b);
	assert_int_equal(merged_total(f->s, NS_TYPE, NULL, 0, 0, 100000, NULL),
			 2 * profile_total(a, 1) + 2 * profile_total(b, 1));
	store_get_stats(f->s, &st);
	assert_int_equal(st.blocks, 2);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void test_labels_and_matchers(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(5, 1, 0);
	struct buf out = {0};
	struct kiln_error err = {0};

	write_one(f->s, "nginx", "web-1", a, 1000);
	write_one(f->s, "nginx-worker", "web-2", a, 1000);
	write_one(f->s, "redis", "db-1", a, 1000);
	int64_t one = profile_total(a, 0);

	struct store_selector all = {NULL, NULL, 0, 0, 10000};
	assert_int_equal(store_label_names(f->s, &all, collect, &out, NULL), 0);
	buf_terminate(&out);
	assert_string_equal((char *)out.data, "comm,node,");
	buf_reset(&out);
	assert_int_equal(store_label_values(f->s, &all, "comm", collect, &out, NULL), 0);
	buf_terminate(&out);
	assert_string_equal((char *)out.data, "nginx,nginx-worker,redis,");
	buf_reset(&out);

	struct store_matcher m = {STORE_MATCH_REGEX, "comm", "ngin", NULL};
	assert_int_equal(store_matcher_compile(&m, NULL), 0);
	/* fully anchored: "ngin" matches neither */
	assert_int_equal(merged_total(f->s, CPU_TYPE, &m, 1, 0, 10000, NULL), 0);
	store_matcher_release(&m);
	m.value = "nginx.*";
	assert_int_equal(store_matcher_compile(&m, NULL), 0);
	assert_int_equal(merged_total(f->s, CPU_TYPE, &m, 1, 0, 10000, NULL), 2 * one);
	struct store_selector sel = {CPU_TYPE, &m, 1, 0, 10000};
	assert_int_equal(store_label_values(f->s, &sel, "node", collect, &out, NULL), 0);
	buf_terminate(&out);
	assert_string_equal((char *)out.data, "web-1,web-2,");
	store_matcher_release(&m);
	m.op = STORE_MATCH_NOT_REGEX;
	m.value = "web-.*";
	m.name = "node";
	assert_int_equal(store_matcher_compile(&m, NULL), 0);
	assert_int_equal(merged_total(f->s, CPU_TYPE, &m, 1, 0, 10000, NULL), one);
	store_matcher_release(&m);
	struct store_matcher ne[2] = {{STORE_MATCH_NEQ, "comm", "redis", NULL},
				      {STORE_MATCH_EQ, "node", "web-2", NULL}};
	assert_int_equal(merged_total(f->s, CPU_TYPE, ne, 2, 0, 10000, NULL), one);
	/* absent label matches as "" */
	struct store_matcher absent = {STORE_MATCH_EQ, "pod", "", NULL};
	assert_int_equal(merged_total(f->s, CPU_TYPE, &absent, 1, 0, 10000, NULL), 3 * one);

	/* A catastrophic pattern is bounded by the match limit. */
	char value[4096];
	memset(value, 'a', sizeof(value) - 2);
	value[sizeof(value) - 2] = 'c';
	value[sizeof(value) - 1] = 0;
	struct store_matcher bad = {STORE_MATCH_REGEX, "x", "(a+)+b", NULL};
	assert_int_equal(store_matcher_compile(&bad, NULL), 0);
	assert_false(store_matcher_matches(&bad, value));
	store_matcher_release(&bad);
	struct store_matcher invalid = {STORE_MATCH_REGEX, "x", "(", NULL};
	assert_int_equal(store_matcher_compile(&invalid, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid regex"));
	buf_free(&out);
	pprof_profile_free(a);
}

/* A profile of one stack with both values v. */
static struct pprof_profile *one_stack(int64_t v)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct pprof_line_desc line = {.line = 1};
	int64_t vals[2] = {v, v};

	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	line.function_id = pprof_builder_function(b, "hot", "hot", "hot.c", 1);
	uint64_t loc = pprof_builder_location(b, 0, 0x1000, &line, 1);
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, vals, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, NULL), 0);
	pprof_builder_free(b);
	return p;
}

static void range_last_value(void *ctx, const struct label *l, size_t nl,
			     const struct store_point *pts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*(int64_t *)ctx = pts[i].value;
}

/* Issue 24: sums saturate, never wrap (2 x INT64_MAX used to come back as
 * a small or negative number), in the head, in blocks and in range points. */
static void test_sums_saturate(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *max = one_stack(INT64_MAX), *min = one_stack(INT64_MIN);
	struct kiln_error err = {0};
	int64_t point = 0;

	write_one(f->s, "a", "n1", max, 1000);
	write_one(f->s, "b", "n1", max, 1000);
	write_one(f->s, "a", "n1", max, 2000);
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL), INT64_MAX);
	/* Two profiles of one series at one time: one point, their sum. */
	write_one(f->s, "a", "n1", max, 2000);
	struct store_matcher ma = {STORE_MATCH_EQ, (char *)"comm", (char *)"a", NULL};
	struct store_selector sa = {CPU_TYPE, &ma, 1, 2000, 2001};
	assert_int_equal(store_query_range(f->s, &sa, range_last_value, &point, &err), 0);
	assert_int_equal(point, INT64_MAX);
	/* And from blocks, after a restart. */
	reopen(f);
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL), INT64_MAX);
	write_one(f->s, "c", "n1", min, 3000);
	write_one(f->s, "c", "n1", min, 4000);
	struct store_matcher mc = {STORE_MATCH_EQ, (char *)"comm", (char *)"c", NULL};
	assert_int_equal(merged_total(f->s, CPU_TYPE, &mc, 1, 0, INT64_MAX, NULL), INT64_MIN);
	pprof_profile_free(max);
	pprof_profile_free(min);
}

static void test_bad_input(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(5, 1, 0);
	struct label nolabel[1] = {{"comm", "x"}};
	struct label badname[2] = {{"__name__", "x"}, {"1abc", "y"}};
	struct label many[70];
	char names[70][16];
	struct kiln_error err = {0};

	assert_int_equal(store_write_profile(f->s, nolabel, 1, a, 1, false, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "__name__"));
	kiln_error_clear(&err);
	assert_int_equal(store_write_profile(f->s, badname, 2, a, 1, false, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "1abc"));
	kiln_error_clear(&err);
	many[0] = (struct label){"__name__", "x"};
	for (int i = 1; i < 70; i++) {
		snprintf(names[i], sizeof(names[i]), "l%d", i);
		many[i] = (struct label){names[i], "v"};
	}
	assert_int_equal(store_write_profile(f->s, many, 70, a, 1, false, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "too many labels"));
	pprof_profile_free(a);
}

static void test_retention(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(5, 1, 0);
	int64_t now = (int64_t)time(NULL) * 1000;
	struct store_stats st;

	f->opts.retention_ms = 3600 * 1000;
	reopen(f);
	write_one(f->s, "nginx", "a", a, now - 10 * 3600 * 1000);
	write_one(f->s, "nginx", "a", a, now);
	write_one(f->s, "gone", "b", a, now - 10 * 3600 * 1000); /* a series with old data only */
	assert_int_equal(store_flush(f->s, NULL), 0);
	store_get_stats(f->s, &st);
	assert_int_equal(st.blocks, 1); /* the old block is gone */
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL),
			 profile_total(a, 0));
	/* The emptied series no longer shows in label values, before and after
	 * a restart (which finds its record but none of its rows). */
	struct store_selector all = {CPU_TYPE, NULL, 0, INT64_MIN, INT64_MAX};
	struct buf out = {0};
	for (int round = 0; round < 2; round++) {
		buf_reset(&out);
		assert_int_equal(store_label_values(f->s, &all, "comm", collect, &out, NULL), 0);
		buf_terminate(&out);
		assert_string_equal((char *)out.data, "nginx,");
		reopen(f);
	}
	buf_free(&out);
	pprof_profile_free(a);
}

static char *only_segment(const char *dir)
{
	char wal[4096], *out = NULL;
	struct dirent *e;
	DIR *d;

	snprintf(wal, sizeof(wal), "%s/wal", dir);
	d = opendir(wal);
	while ((e = readdir(d))) {
		struct stat st;
		char p[8192];

		snprintf(p, sizeof(p), "%s/%s", wal, e->d_name);
		if (e->d_name[0] != '.' && stat(p, &st) == 0 && st.st_size > 0) {
			free(out);
			out = strdup(p);
		}
	}
	closedir(d);
	return out;
}

static void test_wal_torn_tail(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile(8, 1, 0);
	struct range_out o = {0};
	struct store_selector sel = {CPU_TYPE, NULL, 0, 0, 100000};
	struct stat st;
	pid_t pid;
	int status;

	store_close(f->s);
	f->s = NULL;
	pid = fork();
	if (pid == 0) {
		struct store *s;

		if (store_open(&f->opts, &s, NULL))
			_exit(1);
		for (int i = 1; i <= 5; i++)
			write_one(s, "nginx", "a", a, i * 1000);
		_exit(0); /* a crash: no store_close */
	}
	waitpid(pid, &status, 0);
	assert_int_equal(WEXITSTATUS(status), 0);
	char *seg = only_segment(f->dir);
	assert_non_null(seg);
	assert_int_equal(stat(seg, &st), 0);
	assert_int_equal(truncate(seg, st.st_size - 3), 0); /* tear the last record */
	reopen(f);
	assert_int_equal(store_query_range(f->s, &sel, range_cb, &o, NULL), 0);
	assert_int_equal(o.n, 4);
	assert_int_equal(o.ts[3], 4000);
	assert_int_equal(o.v[3], profile_total(a, 0));
	free(seg);

	/* A corrupt byte in the middle of the last record: truncated too. */
	store_close(f->s);
	f->s = NULL;
	pid = fork();
	if (pid == 0) {
		struct store *s;

		if (store_open(&f->opts, &s, NULL))
			_exit(1);
		write_one(s, "nginx", "a", a, 50000);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	seg = only_segment(f->dir);
	assert_int_equal(stat(seg, &st), 0);
	FILE *fp = fopen(seg, "r+");
	fseek(fp, st.st_size - 5, SEEK_SET);
	fputc(0x55, fp);
	fclose(fp);
	reopen(f);
	memset(&o, 0, sizeof(o));
	assert_int_equal(store_query_range(f->s, &sel, range_cb, &o, NULL), 0);
	assert_int_equal(o.n, 4);
	free(seg);
	pprof_profile_free(a);
}

struct conc {
	struct store *s;
	int id;
	_Atomic int *writers_left;
	int64_t total;
	int failures;
};

static void *writer_main(void *arg)
{
	struct conc *c = arg;
	char node[16];

	snprintf(node, sizeof(node), "n%d", c->id);
	for (int i = 0; i < 40; i++) {
		struct pprof_profile *p = make_profile(30, i + 1, c->id + i);
		struct label l[2] = {{"__name__", "process_cpu"}, {"node", node}};

		if (store_write_profile(c->s, l, 2, p, 1000 + i * 700, true, NULL))
			c->failures++;
		else
			c->total += profile_total(p, 0);
		pprof_profile_free(p);
	}
	atomic_fetch_sub(c->writers_left, 1);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct conc *c = arg;
	int64_t last = 0;

	while (atomic_load(c->writers_left) > 0) {
		int64_t t = merged_total(c->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL);

		if (t < last) /* acknowledged data never disappears */
			c->failures++;
		last = t;
	}
	return NULL;
}

static void test_concurrent_writers_readers(void **state)
{
	struct fixture *f = *state;
	pthread_t th[6];
	struct conc c[6];
	_Atomic int left = 4;
	int64_t total = 0;

	f->opts.head_max_rows = 2000; /* cuts while writing */
	reopen(f);
	for (int i = 0; i < 6; i++) {
		c[i] = (struct conc){f->s, i, &left, 0, 0};
		pthread_create(&th[i], NULL, i < 4 ? writer_main : reader_main, &c[i]);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].failures, 0);
		total += c[i].total;
	}
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL), total);
	reopen(f);
	assert_int_equal(merged_total(f->s, CPU_TYPE, NULL, 0, 0, INT64_MAX, NULL), total);
}

struct symctx {
	int calls;
	bool forbid;
};

static int fake_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			struct store_line_out *lines, size_t max, size_t *n)
{
	struct symctx *c = ctx;
	static __thread char name[64];

	c->calls++;
	if (c->forbid || strcmp(m->build_id, "abcdef0123456789") != 0)
		return -EINVAL;
	if (address >= 0x500000) { /* "no symbols here": remembered */
		*n = 0;
		return 0;
	}
	snprintf(name, sizeof(name), "sym_%llx", (unsigned long long)address);
	lines[0] = (struct store_line_out){name, name, "app.c", 42};
	*n = max ? 1 : 0;
	return 0;
}

static void test_symbolizer(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile_ex(10, 1, 0, true);
	struct symctx sc = {0};
	struct store_symbolizer sym = {.ctx = &sc, .resolve = fake_resolve};
	struct store_selector sel = {CPU_TYPE, NULL, 0, 0, 10000};

	f->opts.symbolizer = &sym;
	reopen(f);
	write_one(f->s, "nginx", "a", a, 1000);
	assert_int_equal(sc.calls, 0); /* ingestion never symbolizes */
	struct pprof_profile *p = merge_to_profile(f->s, &sel);
	assert_non_null(p);
	int calls = sc.calls;
	assert_true(calls > 0);
	const pprof_msg *m = pprof_profile_msg(p);
	size_t with_lines = 0, without = 0;
	for (size_t i = 0; i < m->n_location; i++) {
		if (m->location[i]->n_line) {
			with_lines++;
			const pprof_function_msg *fn =
			    pprof_function(p, m->location[i]->line[0]->function_id);
			assert_true(strncmp(pprof_string(p, fn->name), "sym_", 4) == 0);
		} else {
			without++;
		}
	}
	assert_true(with_lines > 0);
	assert_int_equal(without, 10); /* the 0x5xxxxx leaves */
	pprof_profile_free(p);
	/* Once per location, results (also negative) persist across restarts. */
	p = merge_to_profile(f->s, &sel);
	pprof_profile_free(p);
	assert_int_equal(sc.calls, calls);
	sc.forbid = true;
	reopen(f);
	p = merge_to_profile(f->s, &sel);
	m = pprof_profile_msg(p);
	size_t again = 0;
	for (size_t i = 0; i < m->n_location; i++)
		again += m->location[i]->n_line != 0;
	assert_int_equal(again, with_lines);
	assert_int_equal(sc.calls, calls);
	pprof_profile_free(p);

	/* Background symbolization of a new raw profile. */
	sc.forbid = false;
	struct pprof_profile *b = make_profile_ex(10, 1, 5, true);
	write_one(f->s, "nginx", "a", b, 2000);
	assert_true(store_symbolize_pending(f->s, 0, NULL) > 0);
	calls = sc.calls;
	p = merge_to_profile(f->s, &sel);
	assert_int_equal(sc.calls, calls);
	pprof_profile_free(p);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void fake_unresolved(void *ctx, const struct store_mapping_info *m, uint64_t address,
			    char *name, size_t size)
{
	(void)ctx;
	snprintf(name, size, "[app] +0x%llx", (unsigned long long)(address - m->memory_start));
}

/* Transient failures (debuginfo not there yet) are not stored: queries show
 * the hook's name meanwhile and try again, so a later answer is used. */
static void test_symbolizer_transient(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *a = make_profile_ex(10, 1, 0, true);
	struct symctx sc = {.forbid = true};
	struct store_symbolizer sym = {
	    .ctx = &sc, .resolve = fake_resolve, .unresolved = fake_unresolved};
	struct store_selector sel = {CPU_TYPE, NULL, 0, 0, 10000};

	f->opts.symbolizer = &sym;
	reopen(f);
	write_one(f->s, "nginx", "a", a, 1000);
	assert_int_equal(store_symbolize_pending(f->s, 0, NULL), 0);
	for (int round = 0; round < 3; round++) {
		int calls = sc.calls;
		struct pprof_profile *p;
		const pprof_msg *m;
		size_t shown = 0, resolved = 0;

		if (round == 2)
			sc.forbid = false; /* the debuginfo arrived */
		p = merge_to_profile(f->s, &sel);
		assert_non_null(p);
		assert_true(sc.calls > calls); /* asked again */
		m = pprof_profile_msg(p);
		for (size_t i = 0; i < m->n_location; i++) {
			if (!m->location[i]->n_line)
				continue;
			const char *name = pprof_string(
			    p, pprof_function(p, m->location[i]->line[0]->function_id)->name);
			shown += strncmp(name, "[app] +0x", 9) == 0;
			resolved += strncmp(name, "sym_", 4) == 0;
		}
		if (round < 2) {
			assert_true(shown > 0);
			assert_int_equal(resolved, 0);
		} else {
			assert_true(resolved > 0);
		}
		pprof_profile_free(p);
	}
	pprof_profile_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_roundtrip_merge, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_single_profile_and_range, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ids_and_inline_lines, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_query_range_blocks_compaction_reopen, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_labels_and_matchers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sums_saturate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wal_torn_tail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_writers_readers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_symbolizer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_symbolizer_transient, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
