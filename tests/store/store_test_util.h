/*
 * store_test_util.h — helpers shared by the store tests: temporary
 * directories and real pprof profiles made with the pprof builder.
 */
#ifndef KILN_TESTS_STORE_UTIL_H
#define KILN_TESTS_STORE_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof/pprof.h"
#include "store/store.h"

#define CPU_TYPE "process_cpu:samples:count:cpu:nanoseconds:delta"
#define NS_TYPE	 "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"

static inline int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static inline void rm_rf(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline char *make_tmpdir(void)
{
	char *d = strdup("/tmp/kiln-store-test-XXXXXX");

	return mkdtemp(d) ? d : NULL;
}

/* A profile with n_stacks distinct stacks of depth 3..12 over a shared set
 * of functions; sample k has values (base + k, (base + k) * 1e7). When raw
 * is set, locations carry no lines (only addresses in a mapping with a
 * build id), as an agent sends them. */
static inline struct pprof_profile *make_profile_ex(int n_stacks, int64_t base, int variant,
						    bool raw)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x800000,
					.filename = "/usr/bin/app",
					.build_id = "abcdef0123456789",
					.has_functions = !raw};
	char name[64];

	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	uint64_t map = pprof_builder_mapping(b, &md);
	for (int k = 0; k < n_stacks; k++) {
		uint64_t locs[16];
		int depth = 3 + (k + variant) % 10;

		for (int d = 0; d < depth; d++) {
			int fn = (k * 7 + d * 13 + variant) % 50;
			struct pprof_line_desc line;

			snprintf(name, sizeof(name), "fn_%d", fn);
			line.function_id = pprof_builder_function(b, name, name, "app.c", fn);
			line.line = 10 + d;
			line.column = 0;
			locs[d] = pprof_builder_location(b, map, 0x401000 + (uint64_t)fn * 64 + d,
							 &line, raw ? 0 : 1);
		}
		/* make every stack distinct */
		locs[0] =
		    pprof_builder_location(b, map, 0x500000 + (uint64_t)k * 16 + variant, NULL, 0);
		int64_t v[2] = {base + k, (base + k) * 10000000};
		pprof_builder_add_sample(b, locs, (size_t)depth, v, NULL, 0);
	}
	pprof_builder_to_profile(b, &p, NULL);
	pprof_builder_free(b);
	return p;
}

static inline struct pprof_profile *make_profile(int n_stacks, int64_t base, int variant)
{
	return make_profile_ex(n_stacks, base, variant, false);
}

static inline int64_t profile_total(const struct pprof_profile *p, size_t type)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t t = 0;

	for (size_t i = 0; i < m->n_sample; i++)
		t += m->sample[i]->value[type];
	return t;
}

/* Merges sel into a fresh profile; returns it (NULL on failure). */
static inline struct pprof_profile *merge_to_profile(struct store *s,
						     const struct store_selector *sel)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};

	if (store_merge(s, sel, b, &err) == 0)
		pprof_builder_to_profile(b, &p, &err);
	else
		fprintf(stderr, "merge: %s\n", err.msg);
	pprof_builder_free(b);
	return p;
}

#endif
