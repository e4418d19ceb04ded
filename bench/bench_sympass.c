/*
 * bench_sympass.c — the store's share of a background symbolization pass
 * (store_symbolize_pending), with the per-location hook (resolve) or the
 * batch hook (resolve_batch), both answering from a trivial fake so that
 * what is measured is the store: queue, grouping by object, copies,
 * interning and recording under meta.mu. The real symbolizer behind the
 * server's hook is `make bench-symbols`.
 *
 * Fleet: 200 processes each map the same 5 objects (at different
 * addresses), 100 sampled addresses per mapping: 100,000 pending
 * locations, 5 objects.
 *
 *   bench_sympass resolve|batch    prints resolved, hook calls, ms
 *
 * Instruction counts of the pass alone:
 *   valgrind --tool=callgrind --toggle-collect=store_symbolize_pending \
 *       build/bench/bench_sympass batch
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_test_util.h"

#define N_PROCESSES 200
#define N_OBJECTS   5
#define N_ADDRESSES 100

static long hook_calls;

/* Two frames per address: an inlined callee named after the offset. */
static void answer(const struct store_mapping_info *m, uint64_t address, struct store_line_out *l,
		   size_t *n, char *name, size_t size)
{
	uint64_t off = address - m->memory_start;

	snprintf(name, size, "fn_%llx", (unsigned long long)(off / 16));
	l[0] = (struct store_line_out){name, NULL, "x.c", (int64_t)off};
	l[1] = (struct store_line_out){"outer", NULL, "y.c", 7};
	*n = 2;
}

static int fake_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			struct store_line_out *lines, size_t max, size_t *n)
{
	static char name[64];

	hook_calls++;
	answer(m, address, lines, n, name, sizeof(name));
	return 0;
}

static int fake_resolve_batch(void *ctx, const struct store_symbolize_item *items, size_t n,
			      store_symbolize_emit_fn emit, void *ectx)
{
	hook_calls++;
	for (size_t i = 0; i < n; i++) {
		struct store_line_out l[2];
		char name[64];
		size_t nl;

		answer(items[i].mapping, items[i].address, l, &nl, name, sizeof(name));
		emit(ectx, i, 0, l, nl);
	}
	return 0;
}

static int write_fleet(struct store *s, struct kiln_error *err)
{
	for (int p = 0; p < N_PROCESSES; p++) {
		struct pprof_builder *b = pprof_builder_new();
		struct pprof_profile *pr = NULL;
		char pid[16];
		int rc;

		pprof_builder_add_sample_type(b, "samples", "count");
		pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
		pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
		for (int o = 0; o < N_OBJECTS; o++) {
			char file[32], id[32];
			struct pprof_mapping_desc md = {.filename = file, .build_id = id};

			snprintf(file, sizeof(file), "/lib/obj%d.so", o);
			snprintf(id, sizeof(id), "%016x", 0xabc000 + o);
			md.memory_start = 0x7f0000000000ull + (uint64_t)p * 0x100000000ull +
					  (uint64_t)o * 0x10000000ull;
			md.memory_limit = md.memory_start + 0x1000000;
			uint64_t map = pprof_builder_mapping(b, &md);
			for (int a = 0; a < N_ADDRESSES; a++) {
				uint64_t loc = pprof_builder_location(
				    b, map, md.memory_start + 0x1000 + (uint64_t)a * 16, NULL, 0);
				int64_t v[2] = {1, 10000000};

				pprof_builder_add_sample(b, &loc, 1, v, NULL, 0);
			}
		}
		pprof_builder_to_profile(b, &pr, NULL);
		pprof_builder_free(b);
		snprintf(pid, sizeof(pid), "%d", p);
		struct label l[2] = {{"__name__", "process_cpu"}, {"pid", pid}};
		rc = pr ? store_write_profile(s, l, 2, pr, 1000, true, err) : -ENOMEM;
		pprof_profile_free(pr);
		if (rc)
			return rc;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bool batch = argc > 1 && strcmp(argv[1], "batch") == 0;
	struct store_symbolizer sym = {.resolve = fake_resolve};
	char *dir = make_tmpdir();
	struct store_options opts = {.path = dir, .symbolizer = &sym};
	struct kiln_error err = {0};
	struct store *s = NULL;
	struct timespec t0, t1;
	int n;

	if (argc != 2 || (!batch && strcmp(argv[1], "resolve") != 0)) {
		fprintf(stderr, "usage: bench_sympass resolve|batch\n");
		return 2;
	}
	if (batch)
		sym.resolve_batch = fake_resolve_batch;
	if (!dir || store_open(&opts, &s, &err) || write_fleet(s, &err)) {
		fprintf(stderr, "bench_sympass: %s\n", err.msg);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	n = store_symbolize_pending(s, 0, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %d resolved, %ld hook calls, %.1f ms\n", argv[1], n, hook_calls,
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	store_close(s);
	rm_rf(dir);
	free(dir);
	return n < 0;
}
