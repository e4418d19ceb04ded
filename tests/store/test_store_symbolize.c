/*
 * test_store_symbolize.c — the background symbolization pass with a
 * resolve_batch() hook: one call per object, however many processes'
 * mappings its locations come from, giving the answers resolve() gives (a
 * store with resolve() alone is the reference); per-address and whole-batch
 * transient failures leave locations pending for a later pass; max bounds
 * how many are resolved per call; a merge resolves its pending locations
 * in batches too. The hook here is a fake: the real
 * symbolizer behind it is tested in tests/symbols and the integration
 * tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "common/buf.h"
#include "store_test_util.h"

#define LIBC_ID	  "11c011c011c011c0"
#define APP_ID	  "a0a0a0a0a0a0a0a0"
#define LIBZ_ID	  "2222333344445555"
#define N_OFFSETS 40

struct fake {
	int resolve_calls, batch_calls;
	size_t max_items;	 /* the largest batch */
	int libc_batch_mappings; /* distinct mappings in the last libc batch */
	bool fail;		 /* every call fails transiently */
	int pending_offset_mod;	 /* offsets % 7 == this fail per address; -1: none */
	bool mixed_objects;	 /* a batch held two objects */
};

/* The fake symbolizer: the answer depends on the object and the offset
 * into it, not on where a process mapped it. name: room for the strings. */
static int fake_answer(struct fake *f, const struct store_mapping_info *m, uint64_t address,
		       struct store_line_out *lines, size_t *n, char name[2][64])
{
	uint64_t off = address - m->memory_start + m->file_offset;

	*n = 0;
	if (f->fail)
		return -EIO;
	if ((int)(off % 7) == f->pending_offset_mod)
		return -EAGAIN;
	switch (off % 3) {
	case 0: /* no symbols here: remembered */
		return 0;
	case 1:
		snprintf(name[0], 64, "%s_fn_%llx", m->build_id, (unsigned long long)off);
		lines[0] = (struct store_line_out){name[0], NULL, "lib.c", (int64_t)off};
		*n = 1;
		return 0;
	default: /* an inlined callee, then its caller */
		snprintf(name[0], 64, "%s_inl_%llx", m->build_id, (unsigned long long)off);
		snprintf(name[1], 64, "%s_outer_%llx", m->build_id, (unsigned long long)off);
		lines[0] = (struct store_line_out){name[0], "_Z3inlv", "inl.h", 3};
		lines[1] = (struct store_line_out){name[1], name[1], NULL, (int64_t)off};
		*n = 2;
		return 0;
	}
}

static int fake_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			struct store_line_out *lines, size_t max, size_t *n)
{
	struct fake *f = ctx;
	static __thread char name[2][64];

	f->resolve_calls++;
	assert_true(max >= 2);
	return fake_answer(f, m, address, lines, n, name);
}

/* Answers in reverse order, every name from one buffer that the next
 * answer overwrites: the store must copy them in emit. */
static int fake_resolve_batch(void *ctx, const struct store_symbolize_item *items, size_t n,
			      store_symbolize_emit_fn emit, void *ectx)
{
	struct fake *f = ctx;
	const struct store_mapping_info *first[8];
	size_t n_first = 0;

	f->batch_calls++;
	if (n > f->max_items)
		f->max_items = n;
	if (f->fail)
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		const struct store_mapping_info *m = items[i].mapping;
		bool seen = false;

		if (strcmp(m->build_id, items[0].mapping->build_id) != 0 ||
		    strcmp(m->filename, items[0].mapping->filename) != 0)
			f->mixed_objects = true;
		for (size_t k = 0; k < n_first; k++)
			seen |= first[k]->memory_start == m->memory_start;
		if (!seen && n_first < 8)
			first[n_first++] = m;
	}
	if (strcmp(items[0].mapping->build_id, LIBC_ID) == 0)
		f->libc_batch_mappings = (int)n_first;
	for (size_t i = n; i-- > 0;) {
		struct store_line_out lines[2];
		char name[2][64];
		size_t nl;
		int rc = fake_answer(f, items[i].mapping, items[i].address, lines, &nl, name);

		emit(ectx, i, rc, lines, nl);
		memset(name, 'X', sizeof(name));
	}
	return 0;
}

/* A raw profile (no lines) with one single-frame stack per offset of
 * each mapping. */
static struct pprof_profile *raw_profile(const struct pprof_mapping_desc *maps, size_t n_maps)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;

	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	for (size_t i = 0; i < n_maps; i++) {
		uint64_t map = pprof_builder_mapping(b, &maps[i]);

		for (uint64_t k = 0; k < N_OFFSETS; k++) {
			uint64_t loc = pprof_builder_location(
			    b, map, maps[i].memory_start + 0x1000 + k * 2 + i % 2, NULL, 0);
			int64_t v[2] = {1, 10000000};

			pprof_builder_add_sample(b, &loc, 1, v, NULL, 0);
		}
	}
	pprof_builder_to_profile(b, &p, NULL);
	pprof_builder_free(b);
	return p;
}

/* Two processes: both map libc (at different addresses), the first the app
 * too, the second libz. */
static void write_processes(struct store *s)
{
	const struct pprof_mapping_desc one[] = {
	    {.memory_start = 0x400000,
	     .memory_limit = 0x800000,
	     .filename = "/usr/bin/app",
	     .build_id = APP_ID},
	    {.memory_start = 0x7f0000000000,
	     .memory_limit = 0x7f0000200000,
	     .file_offset = 0x1000,
	     .filename = "/lib/libc.so.6",
	     .build_id = LIBC_ID},
	};
	const struct pprof_mapping_desc two[] = {
	    {.memory_start = 0x7f3300000000,
	     .memory_limit = 0x7f3300100000,
	     .filename = "/lib/libz.so.1",
	     .build_id = LIBZ_ID},
	    {.memory_start = 0x7fab00000000,
	     .memory_limit = 0x7fab00200000,
	     .file_offset = 0x1000,
	     .filename = "/lib/libc.so.6",
	     .build_id = LIBC_ID},
	};
	struct pprof_profile *p[2] = {raw_profile(one, 2), raw_profile(two, 2)};

	for (int i = 0; i < 2; i++) {
		struct label l[2] = {{"__name__", "process_cpu"}, {"pid", i ? "2" : "1"}};
		struct kiln_error err = {0};

		assert_non_null(p[i]);
		assert_int_equal(store_write_profile(s, l, 2, p[i], 1000 + i, true, &err), 0);
		pprof_profile_free(p[i]);
	}
}

struct opened {
	char *dir;
	struct store *s;
};

static struct opened open_store(struct fake *f, bool batch)
{
	struct store_symbolizer sym = {.ctx = f, .resolve = fake_resolve};
	struct store_options opts = {0};
	struct kiln_error err = {0};
	struct opened o = {make_tmpdir(), NULL};

	if (batch)
		sym.resolve_batch = fake_resolve_batch;
	opts.path = o.dir;
	opts.symbolizer = &sym;
	assert_int_equal(store_open(&opts, &o.s, &err), 0);
	write_processes(o.s);
	return o;
}

static void close_store(struct opened *o)
{
	store_close(o->s);
	rm_rf(o->dir);
	free(o->dir);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every location of the merge as "mapping start+address: frames", sorted,
 * one per line. What the merge shows of a pending location is asked of
 * resolve() (f->fail set keeps it unanswered). */
static char *describe(struct store *s)
{
	struct store_selector sel = {CPU_TYPE, NULL, 0, 0, 10000};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	const pprof_msg *m;
	char **lines;
	struct buf out = {0};

	assert_non_null(p);
	m = pprof_profile_msg(p);
	lines = calloc(m->n_location, sizeof(*lines));
	for (size_t i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		struct buf b = {0};
		uint64_t start = 0;

		for (size_t k = 0; k < m->n_mapping; k++)
			if (m->mapping[k]->id == l->mapping_id)
				start = m->mapping[k]->memory_start;
		buf_printf(&b, "%llx+%llx:", (unsigned long long)start,
			   (unsigned long long)(l->address - start));
		for (size_t k = 0; k < l->n_line; k++) {
			const pprof_function_msg *fn = pprof_function(p, l->line[k]->function_id);

			buf_printf(&b, " %s/%s/%s:%lld", pprof_string(p, fn->name),
				   pprof_string(p, fn->system_name), pprof_string(p, fn->filename),
				   (long long)l->line[k]->line);
		}
		buf_append(&b, "", 1);
		lines[i] = (char *)b.data;
	}
	qsort(lines, m->n_location, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < m->n_location; i++) {
		buf_printf(&out, "%s\n", lines[i]);
		free(lines[i]);
	}
	buf_append(&out, "", 1);
	free(lines);
	pprof_profile_free(p);
	return (char *)out.data;
}

static size_t pending(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.symbolize_pending;
}

/* One batch per object, the same answers as resolve() one at a time. */
static void test_batch_same_answers(void **state)
{
	struct fake fr = {.pending_offset_mod = 5}, fb = fr;
	struct opened ref = open_store(&fr, false), bat = open_store(&fb, true);
	int n_ref = store_symbolize_pending(ref.s, 0, NULL);
	int n_bat = store_symbolize_pending(bat.s, 0, NULL);
	char *a, *b;

	(void)state;
	assert_true(n_ref > 0);
	assert_int_equal(n_bat, n_ref);
	assert_int_equal(fr.resolve_calls, 4 * N_OFFSETS);
	assert_int_equal(fb.resolve_calls, 0);
	assert_int_equal(fb.batch_calls, 3); /* app, libc (two processes), libz */
	assert_int_equal(fb.libc_batch_mappings, 2);
	assert_int_equal(fb.max_items, 2 * N_OFFSETS);
	assert_false(fb.mixed_objects);
	/* The per-address failures (offset % 7 == 5) stay pending: the merge
	 * asks resolve() for them again, in both stores alike. */
	fr.fail = fb.fail = true;
	a = describe(ref.s);
	b = describe(bat.s);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, LIBC_ID "_inl_"));
	assert_non_null(strstr(a, "_Z3inlv"));
	assert_int_equal(fr.resolve_calls, fb.resolve_calls + 4 * N_OFFSETS);
	free(a);
	free(b);
	/* Once resolvable, the background pass does not ask again (tried
	 * once per queueing); a query does, and both agree. */
	fr.fail = fb.fail = false;
	fr.pending_offset_mod = fb.pending_offset_mod = -1;
	assert_int_equal(store_symbolize_pending(bat.s, 0, NULL), 0);
	a = describe(ref.s);
	b = describe(bat.s);
	assert_string_equal(a, b);
	assert_non_null(strstr(a, LIBZ_ID "_fn_"));
	free(a);
	free(b);
	close_store(&ref);
	close_store(&bat);
}

/* A whole batch failing transiently leaves its locations pending; queued
 * again (store_resymbolize, as when debuginfo arrives), a later pass
 * answers them, as resolve() would. */
static void test_batch_transient(void **state)
{
	struct fake fr = {.pending_offset_mod = -1}, fb = {.pending_offset_mod = -1, .fail = true};
	struct opened ref = open_store(&fr, false), bat = open_store(&fb, true);
	int n_ref = store_symbolize_pending(ref.s, 0, NULL);
	char *a, *b;

	(void)state;
	assert_int_equal(n_ref, 4 * N_OFFSETS);
	assert_int_equal(pending(bat.s), 4 * N_OFFSETS);
	assert_int_equal(store_symbolize_pending(bat.s, 0, NULL), 0);
	assert_int_equal(fb.batch_calls, 3);
	/* Nothing was recorded: a query (resolve() failing too) shows no
	 * frames. */
	b = describe(bat.s);
	assert_non_null(b);
	for (const char *p = b; (p = strchr(p, ':')); p++)
		assert_true(p[1] == '\n');
	free(b);
	fb.fail = false;
	assert_int_equal(store_resymbolize(bat.s, LIBC_ID), 2 * N_OFFSETS);
	assert_int_equal(store_resymbolize(bat.s, APP_ID), N_OFFSETS);
	assert_int_equal(store_resymbolize(bat.s, LIBZ_ID), N_OFFSETS);
	assert_int_equal(store_symbolize_pending(bat.s, 0, NULL), 4 * N_OFFSETS);
	assert_int_equal(pending(bat.s), 0);
	fb.resolve_calls = 0;
	a = describe(ref.s);
	b = describe(bat.s);
	assert_string_equal(a, b);
	assert_int_equal(fb.resolve_calls, 0); /* all answered by the pass */
	free(a);
	free(b);
	close_store(&ref);
	close_store(&bat);
}

/* A merge before the background pass: its pending locations are resolved
 * first in one batch per object (not one resolve() each), with the answers
 * resolve() gives, and recorded. */
static void test_merge_batches_pending(void **state)
{
	struct fake fr = {.pending_offset_mod = -1}, fb = fr;
	struct opened ref = open_store(&fr, false), bat = open_store(&fb, true);
	char *a, *b;

	(void)state;
	assert_int_equal(pending(bat.s), 4 * N_OFFSETS);
	a = describe(ref.s);
	b = describe(bat.s);
	assert_string_equal(a, b);
	assert_int_equal(fr.resolve_calls, 4 * N_OFFSETS);
	assert_int_equal(fb.resolve_calls, 0);
	assert_int_equal(fb.batch_calls, 3); /* app, libc (two processes), libz */
	assert_int_equal(fb.libc_batch_mappings, 2);
	assert_false(fb.mixed_objects);
	assert_int_equal(pending(bat.s), 0);
	/* Recorded: the pass has nothing left, a second merge asks nothing. */
	assert_int_equal(store_symbolize_pending(bat.s, 0, NULL), 0);
	free(b);
	b = describe(bat.s);
	assert_string_equal(a, b);
	assert_int_equal(fb.batch_calls, 3);
	free(a);
	free(b);
	close_store(&ref);
	close_store(&bat);
}

/* max bounds the locations resolved per call, and the batches with it. */
static void test_batch_max(void **state)
{
	struct fake fb = {.pending_offset_mod = -1};
	struct opened bat = open_store(&fb, true);
	int total = 0, calls = 0, n;

	(void)state;
	while ((n = store_symbolize_pending(bat.s, 7, NULL)) > 0) {
		assert_true(n <= 7);
		total += n;
		calls++;
		assert_true(pending(bat.s) == (size_t)(4 * N_OFFSETS - total));
	}
	assert_int_equal(n, 0);
	assert_int_equal(total, 4 * N_OFFSETS);
	assert_int_equal(calls, (4 * N_OFFSETS + 6) / 7);
	assert_true(fb.max_items <= 7);
	assert_false(fb.mixed_objects);
	close_store(&bat);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batch_same_answers),
	    cmocka_unit_test(test_batch_transient),
	    cmocka_unit_test(test_batch_max),
	    cmocka_unit_test(test_merge_batches_pending),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
