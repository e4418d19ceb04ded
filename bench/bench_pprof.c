/*
 * bench_pprof.c — the C side of bench/bench-pprof.sh.
 *
 *   bench_pprof codec FILE [ROUNDS]    decode + re-encode FILE ROUNDS times
 *   bench_pprof merge OUT FILE...      decode and merge FILEs into OUT (gzip)
 *
 * Prints one line of figures per phase: the best of ROUNDS wall-clock runs on
 * one thread (the machine is shared; the best run is the least disturbed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gzip.h"
#include "pprof/pprof.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int bench_codec(const char *path, int rounds)
{
	struct buf file = {0}, raw = {0}, out = {0};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL;
	double t0, t, t_decode = 1e9, t_encode = 1e9, t_inflate = 1e9, t_gz = 1e9;
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
		t0 = now_s();
		buf_reset(&raw);
		gzip_inflate(file.data, file.len, 0, &raw, &err);
		t = now_s() - t0;
		t_inflate = t < t_inflate ? t : t_inflate;
		t0 = now_s();
		rc = pprof_decode(raw.data, raw.len, NULL, &p, &err);
		t = now_s() - t0;
		t_decode = t < t_decode ? t : t_decode;
		if (rc) {
			fprintf(stderr, "bench_pprof: %s: %s\n", path, err.msg);
			return 1;
		}
		t0 = now_s();
		buf_reset(&out);
		pprof_encode(pprof_profile_msg(p), false, &out);
		t = now_s() - t0;
		t_encode = t < t_encode ? t : t_encode;
		pprof_profile_free(p);
		p = NULL;
	}
	for (int i = 0; i < rounds; i++) {
		t0 = now_s();
		rc = pprof_decode(file.data, file.len, NULL, &p, &err);
		t = now_s() - t0;
		t_gz = t < t_gz ? t : t_gz;
		pprof_profile_free(p);
		p = NULL;
	}
	double mb = (double)raw.len / 1e6;
	printf("profile: %s, %.1f MB uncompressed, %.1f MB gzip\n", path, mb, file.len / 1e6);
	printf("decode (raw protobuf + validate):  %7.0f MB/s\n", mb / t_decode);
	printf("encode (raw protobuf):             %7.0f MB/s\n", mb / t_encode);
	printf("gunzip alone:                      %7.0f MB/s (of uncompressed bytes)\n",
	       mb / t_inflate);
	printf("decode (gzip file, gunzip+decode): %7.0f MB/s (of uncompressed bytes)\n",
	       mb / t_gz);
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
	double t0 = now_s();
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
	printf("kiln merge of %d profiles: %.0f ms (%zu samples)\n", n, (now_s() - t0) * 1e3,
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
