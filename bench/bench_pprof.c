/*
 * bench_pprof.c — the C side of bench/bench-pprof.sh.
 *
 *   bench_pprof codec FILE [ROUNDS]    decode + re-encode FILE ROUNDS times
 *   bench_pprof merge OUT FILE...      decode and merge FILEs into OUT (gzip)
 *
 * Prints one line of figures per phase: the best of ROUNDS runs on one
 * thread, as thread CPU time (what the work costs one core; on a shared
 * machine wall time mostly measures the other jobs) and as wall time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gzip.h"
#include "pprof/pprof.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* A phase's best CPU and wall times over the rounds. */
struct phase {
	double cpu, wall, cpu0, wall0;
};

static void phase_start(struct phase *ph)
{
	ph->cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	ph->wall0 = now_s();
}

static void phase_stop(struct phase *ph)
{
	double c = clock_s(CLOCK_THREAD_CPUTIME_ID) - ph->cpu0, w = now_s() - ph->wall0;

	if (ph->cpu == 0 || c < ph->cpu)
		ph->cpu = c;
	if (ph->wall == 0 || w < ph->wall)
		ph->wall = w;
}

static void phase_print(const char *what, const struct phase *ph, double mb, const char *note)
{
	printf("%-34s %7.0f MB/s cpu %7.0f MB/s wall%s\n", what, mb / ph->cpu, mb / ph->wall, note);
}

static int bench_codec(const char *path, int rounds)
{
	struct buf file = {0}, raw = {0}, out = {0};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL;
	struct phase dec = {0}, enc = {0}, inf = {0}, gz = {0};
	int rc = buf_read_file(&file, path, 0);

	if (rc) {
		fprintf(stderr, "bench_pprof: %s: %s\n", path, strerror(-rc));
		return 1;
	}
	if (gzip_is_gzip(file.data, file.len) &&
	    gzip_inflate(file.data, file.len, 0, &raw, &err) < 0) {
		fprintf(stderr, "bench_pprof: %s: %s\n", path, err.msg);
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		phase_start(&inf);
		buf_reset(&raw);
		gzip_inflate(file.data, file.len, 0, &raw, &err);
		phase_stop(&inf);
		phase_start(&dec);
		rc = pprof_decode(raw.data, raw.len, NULL, &p, &err);
		phase_stop(&dec);
		if (rc) {
			fprintf(stderr, "bench_pprof: %s: %s\n", path, err.msg);
			return 1;
		}
		phase_start(&enc);
		buf_reset(&out);
		pprof_encode(pprof_profile_msg(p), false, &out);
		phase_stop(&enc);
		pprof_profile_free(p);
		p = NULL;
	}
	for (int i = 0; i < rounds; i++) {
		phase_start(&gz);
		rc = pprof_decode(file.data, file.len, NULL, &p, &err);
		phase_stop(&gz);
		pprof_profile_free(p);
		p = NULL;
	}
	double mb = (double)raw.len / 1e6;
	printf("profile: %s, %.1f MB uncompressed, %.1f MB gzip; best of %d\n", path, mb,
	       file.len / 1e6, rounds);
	phase_print("decode (raw protobuf + validate):", &dec, mb, "");
	phase_print("encode (raw protobuf):", &enc, mb, "");
	phase_print("gunzip alone (zlib):", &inf, mb, " (of uncompressed bytes)");
	phase_print("decode (gzip file, gunzip+decode):", &gz, mb, " (of uncompressed bytes)");
	buf_free(&file);
	buf_free(&raw);
	buf_free(&out);
	return 0;
}

static int bench_merge(const char *out_path, int n, char **paths)
{
	struct pprof_builder *b = pprof_builder_new();
	struct kiln_error err = {0};
	struct buf out = {0};
	double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	int rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		struct pprof_profile *p = NULL;

		rc = pprof_decode_file(paths[i], NULL, &p, &err);
		if (!rc)
			rc = pprof_builder_merge(b, p, &err);
		pprof_profile_free(p);
	}
	if (!rc)
		rc = pprof_builder_encode(b, true, &out);
	if (!rc)
		rc = buf_write_file(&out, out_path);
	if (rc) {
		fprintf(stderr, "bench_pprof: merge: %s\n", err.msg[0] ? err.msg : strerror(-rc));
		return 1;
	}
	printf("library merge of %d profiles (decode+merge+encode): %.0f ms cpu, %.0f ms wall "
	       "(%zu samples)\n",
	       n, (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3, (now_s() - t0) * 1e3,
	       pprof_builder_sample_count(b));
	pprof_builder_free(b);
	buf_free(&out);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "codec") == 0)
		return bench_codec(argv[2], argc > 3 ? atoi(argv[3]) : 5);
	if (argc >= 4 && strcmp(argv[1], "merge") == 0)
		return bench_merge(argv[2], argc - 3, argv + 3);
	fprintf(stderr, "usage: bench_pprof codec FILE [ROUNDS] | merge OUT FILE...\n");
	return 2;
}
