/*
 * fixtures.h — profiles for the query tests, built with the pprof builder.
 *
 * fixture_profile() is small enough to reason about by hand. Sample types
 * "samples/count" (index 0) and "cpu/nanoseconds" (index 1); stacks, leaf
 * first, with the cpu value:
 *	S1 memcpy(libc) <- work+inl <- main           10
 *	S2 0x403abc(app, unsymbolized) <- work+inl <- main  20
 *	S3 work+inl <- main                           30
 *	S4 rec <- rec <- rec <- main                  40
 *	S5 0xdead (no mapping, unsymbolized)          50
 * "work+inl": one location whose line[0] is inl (inlined) and line[1] is
 * work, so the caller-first order is work then inl. The app mapping starts
 * at 0x400000 with file offset 0x1000, so S2's frame is "[app] +0x4abc".
 *
 * fixture_store_open()/fixture_store_remove(): an embedded store in a fresh
 * directory under /tmp, for the tests that ingest the fixtures.
 */
#ifndef KILN_TEST_QUERY_FIXTURES_H
#define KILN_TEST_QUERY_FIXTURES_H

#include "pprof/pprof.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>

struct fixture_ids {
	uint64_t map_app, map_libc;
	uint64_t f_main, f_work, f_inl, f_memcpy, f_rec, f_other;
	uint64_t l_main, l_work, l_memcpy, l_raw, l_noaddr, l_rec, l_other;
};

static inline void fixture_setup(struct pprof_builder *b, struct fixture_ids *id)
{
	struct pprof_mapping_desc app = {.memory_start = 0x400000,
					 .memory_limit = 0x500000,
					 .file_offset = 0x1000,
					 .filename = "/usr/bin/app",
					 .build_id = "b1d",
					 .has_functions = true};
	struct pprof_mapping_desc libc = {.memory_start = 0x7f0000000000,
					  .memory_limit = 0x7f0000100000,
					  .filename = "/lib/libc.so.6",
					  .has_functions = true};
	struct pprof_line_desc lm = {0}, lw[2] = {{0}}, lc = {0}, lr = {0}, lo = {0};

	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", 10), 0);
	id->map_app = pprof_builder_mapping(b, &app);
	id->map_libc = pprof_builder_mapping(b, &libc);
	id->f_main = pprof_builder_function(b, "main", "main", "main.c", 3);
	id->f_work = pprof_builder_function(b, "work", "work", "work.c", 10);
	id->f_inl = pprof_builder_function(b, "inl", "inl", "work.c", 20);
	id->f_memcpy = pprof_builder_function(b, "memcpy", "memcpy", NULL, 0);
	id->f_rec = pprof_builder_function(b, "rec", "rec", "rec.c", 7);
	id->f_other = pprof_builder_function(b, "other", "other", "other.c", 1);
	lm.function_id = id->f_main;
	lm.line = 5;
	lw[0].function_id = id->f_inl;
	lw[0].line = 21;
	lw[1].function_id = id->f_work;
	lw[1].line = 12;
	lc.function_id = id->f_memcpy;
	lr.function_id = id->f_rec;
	lr.line = 8;
	lo.function_id = id->f_other;
	lo.line = 2;
	id->l_main = pprof_builder_location(b, id->map_app, 0x401000, &lm, 1);
	id->l_work = pprof_builder_location(b, id->map_app, 0x402000, lw, 2);
	id->l_memcpy = pprof_builder_location(b, id->map_libc, 0x7f0000000100, &lc, 1);
	id->l_raw = pprof_builder_location(b, id->map_app, 0x403abc, NULL, 0);
	id->l_noaddr = pprof_builder_location(b, 0, 0xdead, NULL, 0);
	id->l_rec = pprof_builder_location(b, id->map_app, 0x404000, &lr, 1);
	id->l_other = pprof_builder_location(b, id->map_app, 0x405000, &lo, 1);
}

static inline void fixture_add(struct pprof_builder *b, const uint64_t *stack, size_t n,
			       int64_t cpu)
{
	int64_t v[2] = {cpu / 10, cpu};

	assert_int_equal(pprof_builder_add_sample(b, stack, n, v, NULL, 0), 0);
}

static inline struct pprof_profile *fixture_to_profile(struct pprof_builder *b)
{
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};

	if (pprof_builder_to_profile(b, &p, &err))
		fail_msg("pprof_builder_to_profile: %s", err.msg);
	pprof_builder_free(b);
	return p;
}

/* The five samples above. */
static inline struct pprof_profile *fixture_profile(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct fixture_ids id;

	assert_non_null(b);
	fixture_setup(b, &id);
	{
		uint64_t s1[] = {id.l_memcpy, id.l_work, id.l_main};
		uint64_t s2[] = {id.l_raw, id.l_work, id.l_main};
		uint64_t s3[] = {id.l_work, id.l_main};
		uint64_t s4[] = {id.l_rec, id.l_rec, id.l_rec, id.l_main};
		uint64_t s5[] = {id.l_noaddr};

		fixture_add(b, s1, 3, 10);
		fixture_add(b, s2, 3, 20);
		fixture_add(b, s3, 2, 30);
		fixture_add(b, s4, 4, 40);
		fixture_add(b, s5, 1, 50);
	}
	return fixture_to_profile(b);
}

/* A base for diffs: S3 with 30 again, and "other <- main" with 7. */
static inline struct pprof_profile *fixture_base_profile(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct fixture_ids id;

	assert_non_null(b);
	fixture_setup(b, &id);
	{
		uint64_t s3[] = {id.l_work, id.l_main};
		uint64_t s6[] = {id.l_other, id.l_main};

		fixture_add(b, s3, 2, 30);
		fixture_add(b, s6, 2, 7);
	}
	return fixture_to_profile(b);
}

/* Opens a store in a new directory /tmp/PREFIX-XXXXXX, whose name is left in
 * dir (at least 64 bytes). NULL, with the reason on stderr, on failure. */
static inline struct store *fixture_store_open(const char *prefix, char *dir, size_t dir_size)
{
	struct store_options o = {0};
	struct kiln_error err = {0};
	struct store *s = NULL;

	snprintf(dir, dir_size, "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return NULL;
	}
	o.path = dir;
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "store_open: %s\n", err.msg);
		return NULL;
	}
	return s;
}

/* Closes the store and deletes its directory. */
static inline void fixture_store_remove(struct store *s, const char *dir)
{
	char cmd[128];

	store_close(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
}

#endif
