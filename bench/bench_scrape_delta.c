/*
 * bench_scrape_delta.c — what one scrape of a cumulative profile costs the
 * scrape manager's scheduler thread beyond fetching it, on one thread.
 *
 *   bench_scrape_delta PREV CUR [ROUNDS]
 *
 * PREV and CUR are two scrapes of the same target (e.g. two Go
 * /debug/pprof/allocs responses a few seconds apart, gzipped as served).
 * PREV becomes the baseline; then, ROUNDS times (default 1000), CUR goes
 * through what manager.c does with each cumulative scrape: decode (gunzip,
 * parse, validate; pprof_decode), the delta of the counter
 * types against the baseline (scrape_delta_next, with the next baseline),
 * the gauge ("inuse_*") types cut out, and everything freed. Prints the
 * mean thread CPU per scrape of each step, in µs: a per-unit figure that a
 * shared machine's load disturbs much less than bench-scrape's rates, and
 * one that `valgrind --tool=callgrind` can count in instructions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "pprof/pprof.h"
#include "scrape/scrape.h"

static double thread_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The manager's split of a cumulative profile's types: "inuse_*" are
 * gauges, the rest counters. */
static void split_types(const struct pprof_profile *p, size_t *cum, size_t *n_cum, size_t *gauge,
			size_t *n_gauge)
{
	const pprof_msg *m = pprof_profile_msg(p);

	*n_cum = *n_gauge = 0;
	for (size_t i = 0; i < m->n_sample_type && i < 64; i++) {
		if (strncmp(pprof_string(p, m->sample_type[i]->type), "inuse_", 6) == 0)
			gauge[(*n_gauge)++] = i;
		else
			cum[(*n_cum)++] = i;
	}
}

int main(int argc, char **argv)
{
	struct buf prev_raw = {0}, cur_raw = {0};
	struct kiln_error err = {0};
	struct pprof_profile *prev = NULL;
	struct scrape_baseline *base = NULL;
	size_t cum[64], gauge[64], n_cum, n_gauge, n_delta = 0, n_gauge_samples = 0;
	double t_decode = 0, t_delta = 0, t_gauge = 0;
	int rounds = argc > 3 ? atoi(argv[3]) : 1000, rc = 1;

	if (argc < 3 || rounds < 1) {
		fprintf(stderr, "usage: bench_scrape_delta PREV CUR [ROUNDS]\n");
		return 2;
	}
	if (buf_read_file(&prev_raw, argv[1], 0) < 0 || buf_read_file(&cur_raw, argv[2], 0) < 0) {
		fprintf(stderr, "bench_scrape_delta: cannot read %s or %s\n", argv[1], argv[2]);
		goto out;
	}
	if (pprof_decode(prev_raw.data, prev_raw.len, NULL, &prev, &err) < 0) {
		fprintf(stderr, "bench_scrape_delta: %s: %s\n", argv[1], err.msg);
		goto out;
	}
	split_types(prev, cum, &n_cum, gauge, &n_gauge);
	if (n_cum == 0 || scrape_baseline_new(prev, cum, n_cum, &base, &err) < 0) {
		fprintf(stderr, "bench_scrape_delta: %s: no baseline: %s\n", argv[1], err.msg);
		goto out;
	}
	for (int r = 0; r < rounds; r++) {
		struct pprof_profile *cur = NULL, *delta = NULL, *g = NULL;
		struct scrape_baseline *next = NULL;
		bool reset;
		double t0 = thread_us();
		if (pprof_decode(cur_raw.data, cur_raw.len, NULL, &cur, &err) < 0) {
			fprintf(stderr, "bench_scrape_delta: %s: %s\n", argv[2], err.msg);
			goto out;
		}
		double t1 = thread_us();
		if (scrape_delta_next(base, cur, cum, n_cum, &delta, &reset, &next, &err) < 0) {
			fprintf(stderr, "bench_scrape_delta: delta: %s\n", err.msg);
			pprof_profile_free(cur);
			goto out;
		}
		double t2 = thread_us();
		if (n_gauge &&
		    scrape_delta_next(NULL, cur, gauge, n_gauge, &g, &reset, NULL, &err) < 0) {
			fprintf(stderr, "bench_scrape_delta: gauge: %s\n", err.msg);
			pprof_profile_free(cur);
			pprof_profile_free(delta);
			scrape_baseline_free(next);
			goto out;
		}
		pprof_profile_free(cur);
		double t3 = thread_us();
		n_delta = pprof_sample_count(delta);
		n_gauge_samples = g ? pprof_sample_count(g) : 0;
		pprof_profile_free(delta);
		pprof_profile_free(g);
		scrape_baseline_free(next);
		t_decode += t1 - t0;
		t_delta += t2 - t1;
		t_gauge += t3 - t2;
	}
	printf("%s -> %s: %zu samples, %zu in the delta, %zu in the gauge\n", argv[1], argv[2],
	       pprof_sample_count(prev), n_delta, n_gauge_samples);
	printf("us per scrape (mean of %d): decode %.1f  delta %.1f  gauge %.1f  total %.1f\n",
	       rounds, t_decode / rounds, t_delta / rounds, t_gauge / rounds,
	       (t_decode + t_delta + t_gauge) / rounds);
	rc = 0;
out:
	scrape_baseline_free(base);
	pprof_profile_free(prev);
	buf_free(&prev_raw);
	buf_free(&cur_raw);
	return rc;
}
