/*
 * bench_symbols.c — symbolizer throughput on real binaries.
 *
 *   bench_symbols [-w WARM_PASSES] [-t THREADS] [-l] [-p] [-v] [-1] BINARY ADDRFILE
 *
 * -l: DWARF through libdw only (not Kiln's reader: the comparison);
 * -p: print each address's frames, "0xADDR function file:line" per frame
 *     and an empty line after each address (to compare -l with the reader);
 * -v: debug logging (says which CUs the reader leaves to libdw);
 * -1: the cold pass address by address (symbolizer_resolve), not as one
 *     batch (symbolizer_resolve_batch, what the server does);
 * -t: the threads a batch may use (symbolizer_config.batch_threads; the
 *     default, 0, is 2).
 *
 * ADDRFILE holds one hex ELF virtual address per line. Prints one line:
 *   n=N cold_s=S cold_per_s=R cold_cpu_s=S cold_per_cpu_s=R warm_per_s=R
 *   resolved=N frames=N maxrss_kb=K
 * Cold: a fresh symbolizer resolving every address once (includes opening
 * the file, reading its symbol table and DWARF), in wall time and in CPU
 * time (user + system of this process: what a loaded machine does not
 * inflate). Warm: further passes over the same addresses, answered from the
 * per-file result cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "symbols/symbols.h"

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* What the cold pass learned: counts, and each answer when printing. */
struct tally {
	size_t resolved, frames;
	struct symbols_location *locs; /* [n] with -p, else NULL */
};

static void tally_emit(void *ctx, size_t i, const struct symbols_location *loc)
{
	struct tally *t = ctx;

	t->resolved += loc->nframes > 0;
	t->frames += loc->nframes;
	if (t->locs)
		t->locs[i] = *loc;
}

static void print_location(uint64_t addr, const struct symbols_location *loc)
{
	for (size_t k = 0; k < loc->nframes; k++) {
		const struct symbols_frame *fr = &loc->frames[k];

		printf("%#llx %s [%s] %s:%lld decl %lld\n", (unsigned long long)addr,
		       fr->function ? fr->function : "??", fr->system_name ? fr->system_name : "??",
		       fr->file ? fr->file : "??", (long long)fr->line, (long long)fr->start_line);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	int passes = 10, opt;
	bool print = false, single = false;
	struct tally t = {0};
	struct symbolizer_config cfg = {0};
	uint64_t *addrs = NULL;
	size_t n = 0, cap = 0;
	char line[64];
	FILE *f;

	while ((opt = getopt(argc, argv, "w:t:lpv1")) != -1) {
		if (opt == 'w')
			passes = atoi(optarg);
		else if (opt == 't')
			cfg.batch_threads = (unsigned)atoi(optarg);
		else if (opt == 'l')
			cfg.libdw_only = true;
		else if (opt == 'p')
			print = true;
		else if (opt == 'v')
			log_set_level(LOG_DEBUG);
		else if (opt == '1')
			single = true;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: bench_symbols [-w PASSES] [-t THREADS] [-l] [-p] [-v] [-1] "
				"BINARY ADDRFILE\n");
		return 2;
	}
	f = fopen(argv[optind + 1], "r");
	if (!f) {
		perror(argv[optind + 1]);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			addrs = realloc(addrs, cap * sizeof(*addrs));
			if (!addrs)
				return 1;
		}
		addrs[n++] = strtoull(line, NULL, 16);
	}
	fclose(f);

	struct symbols_object obj = {NULL, argv[optind]};
	struct symbolizer *s = symbolizer_new(&cfg);
	struct symbols_location loc;
	if (print && !(t.locs = calloc(n ? n : 1, sizeof(*t.locs))))
		return 1;
	double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	if (single) {
		for (size_t i = 0; i < n; i++) {
			if (symbolizer_resolve(s, &obj, addrs[i], &loc, NULL) < 0)
				goto cannot;
			tally_emit(&t, i, &loc);
		}
	} else if (symbolizer_resolve_batch(s, &obj, addrs, n, tally_emit, &t, NULL) < 0) {
		goto cannot;
	}
	double cold = now() - t0, cold_cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	for (size_t i = 0; print && i < n; i++)
		print_location(addrs[i], &t.locs[i]);
	t0 = now();
	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < n; i++)
			symbolizer_resolve(s, &obj, addrs[i], &loc, NULL);
	double warm = now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("n=%zu cold_s=%.3f cold_per_s=%.0f cold_cpu_s=%.4f cold_per_cpu_s=%.0f "
	       "warm_per_s=%.0f resolved=%zu frames=%zu maxrss_kb=%ld\n",
	       n, cold, n / cold, cold_cpu, n / cold_cpu, passes * n / warm, t.resolved, t.frames,
	       ru.ru_maxrss);
	symbolizer_free(s);
	free(t.locs);
	free(addrs);
	return 0;
cannot:
	fprintf(stderr, "bench_symbols: cannot open %s\n", argv[optind]);
	return 1;
}
