/*
 * bench_query_regress.c — the data of `make bench-query`'s regression
 * report run: a store holding PROCS processes' CPU profiles over HOURS
 * hours, one profile per process every INTERVAL seconds.
 *
 *   bench_query_regress DIR PROCS HOURS INTERVAL_S END_MS
 *
 * Each process runs the same service: a pool of 300 functions in 400
 * stacks, sampled with random weights. In the second half of the range
 * (the deploy), one function, "app::codec::encode_slow", takes about five
 * points more of every process's CPU: the regression the report must rank
 * first. Profiles are built once per variant and written with each
 * process's labels and time, so filling the store costs the store's ingest,
 * not profile building. Deterministic (fixed seed). Prints the number of
 * profiles written and the write rate.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "pprof/pprof.h"
#include "store/store.h"

#define N_FUNCS	   300
#define N_STACKS   400
#define N_VARIANTS 16
#define DEPTH_MAX  12

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* One profile: 60 of the stacks with random weights, plus (after the
 * deploy) the slow encoder's stack with about 5 % of the samples. */
static struct pprof_profile *variant(const uint64_t (*stacks)[DEPTH_MAX], const size_t *depths,
				     bool regressed)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct buf out;
	uint64_t loc[N_FUNCS + 1];
	int64_t total = 0;

	buf_init(&out);
	if (!b)
		return NULL;
	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x8000000,
					.filename = "/usr/bin/app",
					.build_id = "b1d",
					.has_functions = true};
	uint64_t map = pprof_builder_mapping(b, &md);
	for (size_t f = 0; f <= N_FUNCS; f++) {
		char name[64];
		struct pprof_line_desc line = {0};
		if (f == N_FUNCS)
			snprintf(name, sizeof(name), "app::codec::encode_slow");
		else
			snprintf(name, sizeof(name), "app::mod%zu::work_%zu", f % 23, f);
		line.function_id = pprof_builder_function(b, name, name, "src/app.cc", 1);
		line.line = (int64_t)f + 1;
		loc[f] = pprof_builder_location(b, map, 0x400000 + f * 64, &line, 1);
	}
	for (size_t k = 0; k < 60; k++) {
		size_t s = rng() % N_STACKS;
		uint64_t ids[DEPTH_MAX];
		for (size_t d = 0; d < depths[s]; d++)
			ids[d] = loc[stacks[s][d]];
		int64_t v[2] = {(int64_t)(1 + rng() % 9), 0};
		v[1] = v[0] * 10000000;
		total += v[0];
		pprof_builder_add_sample(b, ids, depths[s], v, NULL, 0);
	}
	if (regressed) {
		uint64_t ids[3] = {loc[N_FUNCS], loc[1], loc[0]};
		int64_t v[2] = {total / 19 + (int64_t)(rng() % 3), 0};
		v[1] = v[0] * 10000000;
		pprof_builder_add_sample(b, ids, 3, v, NULL, 0);
	}
	if (pprof_builder_encode(b, false, &out) == 0)
		pprof_decode(out.data, out.len, NULL, &p, &err);
	buf_free(&out);
	pprof_builder_free(b);
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: bench_query_regress DIR PROCS HOURS INTERVAL_S END_MS\n");
		return 2;
	}
	const char *dir = argv[1];
	long procs = atol(argv[2]), hours = atol(argv[3]), interval = atol(argv[4]);
	int64_t end_ms = atoll(argv[5]);
	static uint64_t stacks[N_STACKS][DEPTH_MAX];
	size_t depths[N_STACKS];
	struct pprof_profile *before[N_VARIANTS] = {0}, *after[N_VARIANTS] = {0};
	struct store *s = NULL;
	struct kiln_error err = {0};
	int rc = 1;

	if (procs < 1 || hours < 1 || interval < 1)
		return 2;
	for (size_t i = 0; i < N_STACKS; i++) {
		depths[i] = 2 + rng() % (DEPTH_MAX - 2);
		stacks[i][depths[i] - 1] = 0; /* main at the root */
		for (size_t d = 0; d + 1 < depths[i]; d++)
			stacks[i][d] = 1 + rng() % (N_FUNCS - 1);
	}
	for (int v = 0; v < N_VARIANTS; v++) {
		before[v] = variant(stacks, depths, false);
		after[v] = variant(stacks, depths, true);
		if (!before[v] || !after[v]) {
			fprintf(stderr, "bench_query_regress: building profiles failed\n");
			goto out;
		}
	}
	struct store_options o = {.path = dir};
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "bench_query_regress: %s\n", err.msg);
		goto out;
	}
	int64_t start_ms = end_ms - hours * 3600000, mid = start_ms + hours * 1800000;
	size_t written = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int64_t t = start_ms; t < end_ms; t += interval * 1000) {
		for (long p = 0; p < procs; p++) {
			char pid[24], comm[32];
			snprintf(pid, sizeof(pid), "%ld", 1000 + p);
			snprintf(comm, sizeof(comm), "app%ld", p % 20);
			struct label labels[] = {{"__name__", "bench_regress"},
						 {"comm", comm},
						 {"job", "regress"},
						 {"pid", pid}};
			const struct pprof_profile *prof =
			    (t < mid ? before : after)[(size_t)(rng() % N_VARIANTS)];
			/* Spread the processes over the interval, as agents are. */
			int64_t at = t + (p * interval * 1000) / procs;
			if (store_write_profile(s, labels, 4, prof, at, true, &err)) {
				fprintf(stderr, "bench_query_regress: write: %s\n", err.msg);
				goto out;
			}
			written++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("profiles %zu\nwrite_s %.1f\n", written, secs);
	rc = 0;
out:
	store_close(s);
	for (int v = 0; v < N_VARIANTS; v++) {
		pprof_profile_free(before[v]);
		pprof_profile_free(after[v]);
	}
	return rc;
}
