/*
 * test_store_exec.c — a mapping's executable_info (WriteRaw's
 * RawSample.executable_info) is stored with the mapping, survives a restart
 * (metastore replay of the optional record tail), and reaches the
 * symbolization hook; mappings written without it (as before it existed)
 * replay with none. store_resymbolize: answers of one build ID are redone
 * when better debuginfo arrives, and the new answer is what a restart sees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "store_test_util.h"

struct seen {
	int calls;
	uint32_t elf_type[2];
	uint64_t load_offset[2], load_vaddr[2];
	int with, without;
};

/* Records what the hook was told about each mapping (by filename). */
static int record_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			  struct store_line_out *lines, size_t max, size_t *n)
{
	struct seen *s = ctx;
	int k = strcmp(m->filename, "/usr/bin/app") == 0 ? 0 : 1;

	s->calls++;
	s->elf_type[k] = m->exec.elf_type;
	s->load_offset[k] = m->exec.load_offset;
	s->load_vaddr[k] = m->exec.load_vaddr;
	if (m->exec.elf_type)
		s->with++;
	else
		s->without++;
	return -EAGAIN; /* not remembered: asked again after the restart */
}

static void write_exec(struct store *s, const struct pprof_profile *p,
		       const struct store_exec_info *exec, size_t n_exec, int64_t ts)
{
	struct label l[2] = {{"__name__", "parca_agent"}, {"comm", "app"}};
	struct kiln_error err = {0};
	int rc = store_write_profile_exec(s, l, 2, p, exec, n_exec, ts, true, &err);

	if (rc)
		fprintf(stderr, "write: %s\n", err.msg);
	assert_int_equal(rc, 0);
}

static void test_exec_info_persists(void **state)
{
	char *dir = make_tmpdir();
	struct seen seen = {0};
	struct store_symbolizer sym = {.ctx = &seen, .resolve = record_resolve};
	struct store_options opts = {.path = dir, .symbolizer = &sym};
	struct kiln_error err = {0};
	struct store *s = NULL;
	/* One profile whose mapping has executable_info (PIE: ET_DYN, its
	 * text segment at offset 0x1040 / vaddr 0x2040), one (another file)
	 * without. */
	struct pprof_profile *with = make_profile_ex(5, 1, 0, true);
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc md = {.memory_start = 0x7f0000000000,
					.memory_limit = 0x7f0000100000,
					.file_offset = 0x1000,
					.filename = "/usr/lib/libother.so",
					.build_id = "0011223344556677"};
	struct pprof_profile *without = NULL;
	struct store_exec_info ei = {3, 0x1040, 0x2040};

	(void)state;
	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	uint64_t map = pprof_builder_mapping(b, &md);
	uint64_t loc = pprof_builder_location(b, map, 0x7f0000001234, NULL, 0);
	int64_t v = 3;
	assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &without, NULL), 0);
	pprof_builder_free(b);

	assert_int_equal(store_open(&opts, &s, &err), 0);
	write_exec(s, with, &ei, 1, 1000);
	write_exec(s, without, NULL, 0, 1000);
	assert_true(store_symbolize_pending(s, 0, NULL) >= 0);
	assert_true(seen.with > 0 && seen.without > 0);
	assert_int_equal(seen.elf_type[0], 3);
	assert_int_equal(seen.load_offset[0], 0x1040);
	assert_int_equal(seen.load_vaddr[0], 0x2040);
	assert_int_equal(seen.elf_type[1], 0);
	store_close(s);

	/* After a restart, from the metastore log. */
	memset(&seen, 0, sizeof(seen));
	s = NULL;
	assert_int_equal(store_open(&opts, &s, &err), 0);
	assert_true(store_symbolize_pending(s, 0, NULL) >= 0);
	assert_true(seen.with > 0 && seen.without > 0);
	assert_int_equal(seen.elf_type[0], 3);
	assert_int_equal(seen.load_offset[0], 0x1040);
	assert_int_equal(seen.load_vaddr[0], 0x2040);
	assert_int_equal(seen.elf_type[1], 0);
	store_close(s);

	pprof_profile_free(with);
	pprof_profile_free(without);
	rm_rf(dir);
	free(dir);
}

static int version_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			   struct store_line_out *lines, size_t max, size_t *n)
{
	const char *version = ctx;
	static __thread char name[64];

	if (strcmp(m->build_id, "abcdef0123456789") != 0)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s_%llx", version, (unsigned long long)address);
	lines[0] = (struct store_line_out){name, name, "app.c", 1};
	*n = max ? 1 : 0;
	return 0;
}

/* Counts the functions of the merged profile whose name starts with prefix. */
static size_t names_with(struct store *s, const char *prefix)
{
	struct store_selector sel = {"parca_agent:samples:count:cpu:nanoseconds:delta", NULL, 0, 0,
				     10000};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	size_t n = 0;

	assert_non_null(p);
	const pprof_msg *m = pprof_profile_msg(p);
	for (size_t i = 0; i < m->n_function; i++)
		n += strncmp(pprof_string(p, m->function[i]->name), prefix, strlen(prefix)) == 0;
	pprof_profile_free(p);
	return n;
}

/* Opens a store in dir whose symbolizer answers with the text in version
 * ("old" for now) and writes one profile, symbolized with those answers;
 * returns how many functions got an "old_" name. */
static size_t open_symbolized(const char *dir, char *version, struct store_symbolizer *sym,
			      struct store_options *opts, struct store **s)
{
	struct kiln_error err = {0};
	struct pprof_profile *p = make_profile_ex(5, 1, 0, true);
	size_t old;

	*sym = (struct store_symbolizer){.ctx = version, .resolve = version_resolve};
	*opts = (struct store_options){.path = dir, .symbolizer = sym};
	*s = NULL;
	assert_int_equal(store_open(opts, s, &err), 0);
	write_exec(*s, p, NULL, 0, 1000);
	pprof_profile_free(p);
	assert_true(store_symbolize_pending(*s, 0, NULL) > 0);
	old = names_with(*s, "old_");
	assert_true(old > 0);
	return old;
}

static void test_resymbolize(void **state)
{
	char *dir = make_tmpdir();
	char version[8] = "old";
	struct store_symbolizer sym;
	struct store_options opts;
	struct kiln_error err = {0};
	struct store *s;
	size_t old = open_symbolized(dir, version, &sym, &opts, &s);

	(void)state;
	assert_int_equal(store_resymbolize(s, "0000"), 0); /* no such object */
	snprintf(version, sizeof(version), "new");
	/* Stored answers stay until redone. */
	assert_int_equal(names_with(s, "new_"), 0);
	assert_true(store_resymbolize(s, "ABCDEF0123456789") > 0); /* any case */
	assert_true(store_symbolize_pending(s, 0, NULL) > 0);
	assert_int_equal(names_with(s, "new_"), old);
	assert_int_equal(names_with(s, "old_"), 0);
	store_close(s);

	/* A restart replays the newer answer. */
	snprintf(version, sizeof(version), "bad");
	s = NULL;
	assert_int_equal(store_open(&opts, &s, &err), 0);
	assert_int_equal(names_with(s, "new_"), old);
	assert_int_equal(names_with(s, "bad_"), 0);
	store_close(s);
	rm_rf(dir);
	free(dir);
}

/* A server stopped after better debuginfo arrived but before the locations
 * were symbolized again finishes the work after the restart: the request is
 * a metastore record, written before the file is stored. */
static void test_resymbolize_survives_restart(void **state)
{
	char *dir = make_tmpdir();
	char version[8] = "old";
	struct store_symbolizer sym;
	struct store_options opts;
	struct kiln_error err = {0};
	struct store *s;
	size_t old = open_symbolized(dir, version, &sym, &opts, &s);

	(void)state;
	/* Noted before the file is stored; the server then stops before it
	 * even requeued the locations in memory. */
	assert_int_equal(store_resymbolize_note(s, "ABCDEF0123456789", &err), 0);
	store_close(s);

	snprintf(version, sizeof(version), "new");
	s = NULL;
	assert_int_equal(store_open(&opts, &s, &err), 0);
	assert_true(store_symbolize_pending(s, 0, NULL) > 0);
	assert_int_equal(names_with(s, "new_"), old);
	assert_int_equal(names_with(s, "old_"), 0);
	store_close(s);

	/* Done once: a second restart has nothing left to redo. */
	snprintf(version, sizeof(version), "bad");
	s = NULL;
	assert_int_equal(store_open(&opts, &s, &err), 0);
	assert_int_equal(store_symbolize_pending(s, 0, NULL), 0);
	assert_int_equal(names_with(s, "new_"), old);
	store_close(s);
	rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exec_info_persists),
	    cmocka_unit_test(test_resymbolize),
	    cmocka_unit_test(test_resymbolize_survives_restart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
