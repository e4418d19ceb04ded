/*
 * test_ingest.c — unit tests for the server's request decoders: gRPC message
 * framing, grpc-timeout, and WriteRaw's decode/validate (ingest_prepare),
 * with requests built by protobuf-c and profiles by the pprof builder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/gzip.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "server/ingest.h"
#include "server/internal.h"

/* ---- framing -------------------------------------------------------------- */

static void frame(struct buf *b, uint8_t flag, const void *msg, size_t len)
{
	uint8_t p[5] = {flag, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			(uint8_t)len};
	buf_reset(b);
	buf_append(b, p, 5);
	buf_append(b, msg, len);
}

static void test_frame_plain_and_gzip(void **state)
{
	struct buf b = {0}, z = {0};
	struct grpc_frame f;
	struct kiln_error err = {0};
	(void)state;

	frame(&b, 0, "hello", 5);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, false, 100, &f, &err), 0);
	assert_int_equal(f.len, 5);
	assert_memory_equal(f.msg, "hello", 5);
	assert_null(f.owned);

	assert_int_equal(gzip_deflate("hello", 5, 6, &z), 0);
	frame(&b, 1, z.data, z.len);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, true, 100, &f, &err), 0);
	assert_int_equal(f.len, 5);
	assert_memory_equal(f.msg, "hello", 5);
	free(f.owned);
	/* Compressed without grpc-encoding: gzip. */
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, false, 100, &f, &err), -ENOSYS);
	buf_free(&b);
	buf_free(&z);
}

static void test_frame_malformed(void **state)
{
	struct buf b = {0};
	struct grpc_frame f;
	struct kiln_error err = {0};
	(void)state;

	assert_int_equal(grpc_frame_unwrap((const uint8_t *)"\0\0", 2, false, 100, &f, &err),
			 -EBADMSG);
	assert_non_null(strstr(err.msg, "5-byte prefix"));
	frame(&b, 0, "abc", 3);
	b.data[4] = 9; /* prefix claims 9 bytes, 3 follow */
	kiln_error_clear(&err);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, false, 100, &f, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "prefix says 9"));
	frame(&b, 2, "abc", 3);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, false, 100, &f, &err), -EBADMSG);
	frame(&b, 0, "abcdef", 6);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, false, 5, &f, &err), -EFBIG);
	buf_free(&b);
}

static void test_frame_gzip_bomb(void **state)
{
	struct buf b = {0}, z = {0};
	struct grpc_frame f;
	struct kiln_error err = {0};
	size_t big = 8 << 20;
	char *zeros = calloc(1, big);
	(void)state;

	assert_int_equal(gzip_deflate(zeros, big, 9, &z), 0);
	frame(&b, 1, z.data, z.len);
	assert_int_equal(grpc_frame_unwrap(b.data, b.len, true, 1 << 20, &f, &err), -EFBIG);
	free(zeros);
	buf_free(&b);
	buf_free(&z);
}

static void test_timeout_parse(void **state)
{
	(void)state;
	assert_int_equal(grpc_timeout_parse("100m", 4), 100000000LL);
	assert_int_equal(grpc_timeout_parse("5S", 2), 5000000000LL);
	assert_int_equal(grpc_timeout_parse("1H", 2), 3600000000000LL);
	/* Eight digits of hours overflow int64 nanoseconds: capped, never negative. */
	assert_int_equal(grpc_timeout_parse("99999999H", 9), INT64_MAX / 4);
	assert_int_equal(grpc_timeout_parse("7n", 2), 7);
	assert_int_equal(grpc_timeout_parse("99999999u", 9), 99999999000LL);
	assert_int_equal(grpc_timeout_parse("m", 1), -1);
	assert_int_equal(grpc_timeout_parse("123456789S", 10), -1); /* 9 digits */
	assert_int_equal(grpc_timeout_parse("1x", 2), -1);
	assert_int_equal(grpc_timeout_parse("-1S", 3), -1);
}

/* ---- WriteRaw --------------------------------------------------------------- */

/* The server's clock in these tests: a second after the profiles' time. */
#define TEST_NOW_MS 1700000001123LL

/* A small CPU-like profile at time_ns: 2 sample types, 3 samples. */
static void make_profile_at(struct buf *out, bool gzip, int64_t time_ns)
{
	struct pprof_builder *b = pprof_builder_new();
	assert_non_null(b);
	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	pprof_builder_set_time(b, time_ns, 10000000000LL);
	uint64_t fa = pprof_builder_function(b, "main", "main", "main.c", 1);
	uint64_t fb = pprof_builder_function(b, "work", "work", "main.c", 10);
	struct pprof_line_desc la = {.function_id = fa, .line = 3};
	struct pprof_line_desc lb = {.function_id = fb, .line = 12};
	uint64_t a = pprof_builder_location(b, 0, 0x1000, &la, 1);
	uint64_t c = pprof_builder_location(b, 0, 0x2000, &lb, 1);
	uint64_t stack1[] = {c, a}, stack2[] = {a};
	int64_t v1[] = {3, 30000000}, v2[] = {1, 10000000};
	assert_int_equal(pprof_builder_add_sample(b, stack1, 2, v1, NULL, 0), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack2, 1, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack1, 2, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder_encode(b, gzip, out), 0);
	pprof_builder_free(b);
}

static void make_profile(struct buf *out, bool gzip)
{
	make_profile_at(out, gzip, 1700000000123000000LL);
}

/* Serializes a WriteRawRequest with one series (labels as "k=v" strings). */
static void make_request(struct buf *out, const char *const *labels, size_t n_labels,
			 const struct buf *profile)
{
	Parca__Profilestore__V1alpha1__Label l[128];
	Parca__Profilestore__V1alpha1__Label *lp[128];
	char names[128][64];
	Parca__Profilestore__V1alpha1__LabelSet ls = PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
	Parca__Profilestore__V1alpha1__RawSample rs =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_SAMPLE__INIT;
	Parca__Profilestore__V1alpha1__RawSample *rsp = &rs;
	Parca__Profilestore__V1alpha1__RawProfileSeries se =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries *sep = &se;
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;

	for (size_t i = 0; i < n_labels; i++) {
		parca__profilestore__v1alpha1__label__init(&l[i]);
		const char *eq = strchr(labels[i], '=');
		snprintf(names[i], sizeof(names[i]), "%.*s", (int)(eq - labels[i]), labels[i]);
		l[i].name = names[i];
		l[i].value = (char *)eq + 1;
		lp[i] = &l[i];
	}
	ls.n_labels = n_labels;
	ls.labels = lp;
	rs.raw_profile.data = profile->data;
	rs.raw_profile.len = profile->len;
	se.labels = &ls;
	se.n_samples = 1;
	se.samples = &rsp;
	req.n_series = 1;
	req.series = &sep;
	size_t n = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
	buf_reset(out);
	buf_reserve(out, n);
	out->len = parca__profilestore__v1alpha1__write_raw_request__pack(&req, out->data);
}

/* Through a borrowed decoder, as rpc_write_raw does, so that every bad
 * input below also fails cleanly with decode memory being reused. */
static int prepare(const struct buf *req, struct ingest_batch *b, struct kiln_error *err)
{
	struct arena *a = arena_new(0);
	struct ingest_decoders *ds = ingest_decoders_new(1);
	struct ingest_limits lim = {
	    .max_inflate = 1 << 20, .now_ms = TEST_NOW_MS, .decoder = ingest_decoder_take(ds)};
	assert_non_null(lim.decoder);
	int rc = ingest_prepare(req->data, req->len, &lim, a, b, err);
	if (rc == 0) {
		assert_int_equal(b->n_series, 1);
		assert_string_equal(b->series[0].labels[0].name, "__name__");
		ingest_batch_release(b);
	}
	ingest_batch_release(b); /* again: a no-op */
	ingest_decoder_give(ds, lim.decoder);
	ingest_decoders_free(ds);
	arena_free(a);
	return rc;
}

/* Requests decoded one after another through the shared decoders (the
 * server's ingest threads) give the same batches as without; more requests
 * in flight than decoders kept works, the extra decoders are dropped. */
static void test_writeraw_decoders_reused(void **state)
{
	struct buf prof_gz = {0}, prof_raw = {0}, req_gz = {0}, req_raw = {0}, want = {0},
		   got = {0};
	struct ingest_decoders *ds = ingest_decoders_new(1);
	const char *labels[] = {"__name__=parca_agent", "node=n1"};
	(void)state;

	assert_non_null(ds);
	make_profile(&prof_gz, true);
	make_profile(&prof_raw, false);
	make_request(&req_gz, labels, 2, &prof_gz);
	make_request(&req_raw, labels, 2, &prof_raw);
	for (int i = 0; i < 6; i++) {
		const struct buf *req = i % 3 == 1 ? &req_raw : &req_gz;
		struct kiln_error err = {0};
		struct arena *a = arena_new(0), *a2 = arena_new(0);
		struct ingest_batch b, plain, other;
		struct ingest_limits lim = {.now_ms = TEST_NOW_MS,
					    .decoder = ingest_decoder_take(ds)};
		struct ingest_limits lim2 = {.now_ms = TEST_NOW_MS,
					     .decoder = ingest_decoder_take(ds)};
		struct ingest_limits none = {.now_ms = TEST_NOW_MS};

		assert_non_null(lim.decoder);
		assert_non_null(lim2.decoder);
		assert_ptr_not_equal(lim.decoder, lim2.decoder);
		assert_int_equal(ingest_prepare(req->data, req->len, &lim, a, &b, &err), 0);
		assert_int_equal(ingest_prepare(req->data, req->len, &lim2, a2, &other, &err), 0);
		assert_int_equal(ingest_prepare(req->data, req->len, &none, a, &plain, &err), 0);
		assert_int_equal(b.n_profiles, 1);
		assert_int_equal(b.total_samples, plain.total_samples);
		assert_int_equal(b.profiles[0].timestamp_ms, plain.profiles[0].timestamp_ms);
		buf_reset(&want);
		buf_reset(&got);
		assert_int_equal(
		    pprof_encode(pprof_profile_msg(plain.profiles[0].profile), false, &want), 0);
		assert_int_equal(
		    pprof_encode(pprof_profile_msg(b.profiles[0].profile), false, &got), 0);
		assert_int_equal(got.len, want.len);
		assert_memory_equal(got.data, want.data, want.len);
		buf_reset(&got);
		assert_int_equal(
		    pprof_encode(pprof_profile_msg(other.profiles[0].profile), false, &got), 0);
		assert_memory_equal(got.data, want.data, want.len);
		ingest_batch_release(&plain);
		ingest_batch_release(&other);
		ingest_batch_release(&b);
		ingest_decoder_give(ds, lim2.decoder); /* kept */
		ingest_decoder_give(ds, lim.decoder);  /* one too many: freed */
		arena_free(a);
		arena_free(a2);
	}
	ingest_decoder_give(ds, NULL);
	ingest_decoders_free(ds);
	ingest_decoders_free(NULL);
	buf_free(&prof_gz);
	buf_free(&prof_raw);
	buf_free(&req_gz);
	buf_free(&req_raw);
	buf_free(&want);
	buf_free(&got);
}

static void test_writeraw_valid(void **state)
{
	struct buf prof = {0}, req = {0};
	struct kiln_error err = {0};
	struct arena *a = arena_new(0);
	struct ingest_batch b;
	struct ingest_limits lim = {.now_ms = TEST_NOW_MS};
	const char *labels[] = {"job=api", "__name__=parca_agent", "node=n1"};
	(void)state;

	make_profile(&prof, true);
	make_request(&req, labels, 3, &prof);
	assert_int_equal(ingest_prepare(req.data, req.len, &lim, a, &b, &err), 0);
	assert_int_equal(b.n_profiles, 1);
	assert_int_equal(b.series[0].n_labels, 3);
	assert_string_equal(b.series[0].labels[0].value, "parca_agent");
	assert_int_equal(b.profiles[0].timestamp_ms, 1700000000123LL);
	assert_true(b.profiles[0].delta);     /* period type cpu */
	assert_int_equal(b.total_samples, 4); /* 2 distinct stacks x 2 sample types */
	assert_int_equal(b.total_bytes, prof.len);
	ingest_batch_release(&b);
	arena_free(a);
	buf_free(&prof);
	buf_free(&req);
}

static void expect_invalid(const char *const *labels, size_t n, const struct buf *prof,
			   const char *needle)
{
	struct buf req = {0};
	struct ingest_batch b;
	struct kiln_error err = {0};
	make_request(&req, labels, n, prof);
	assert_int_equal(prepare(&req, &b, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
	buf_free(&req);
}

static void test_writeraw_label_errors(void **state)
{
	struct buf prof = {0};
	(void)state;
	make_profile(&prof, false);

	const char *no_name[] = {"job=x"};
	expect_invalid(no_name, 1, &prof, "missing __name__");
	const char *bad_name[] = {"__name__=a", "bad-name=x"};
	expect_invalid(bad_name, 2, &prof, "invalid label name \"bad-name\"");
	const char *digit[] = {"__name__=a", "1x=x"};
	expect_invalid(digit, 2, &prof, "invalid label name \"1x\"");
	const char *reserved[] = {"__name__=a", "__x=y"};
	expect_invalid(reserved, 2, &prof, "reserved");
	const char *dup[] = {"__name__=a", "k=1", "k=2"};
	expect_invalid(dup, 3, &prof, "duplicate label name \"k\"");
	const char *bad_metric[] = {"__name__=not-a-metric"};
	expect_invalid(bad_metric, 1, &prof, "invalid __name__");
	const char *bad_utf8[] = {"__name__=a", "k=\xff\xfe"};
	expect_invalid(bad_utf8, 2, &prof, "UTF-8");

	static char storage[100][16];
	const char *many[100];
	many[0] = "__name__=a";
	for (int i = 1; i < 100; i++) {
		snprintf(storage[i], sizeof(storage[i]), "l%d=v", i);
		many[i] = storage[i];
	}
	expect_invalid(many, 100, &prof, "labels");
	buf_free(&prof);
}

/* Issue 24: a NUL inside a label value (or name) used to cut it short, so
 * that "a\0b", "a\0c" and "a" became one series. Refused, naming it. */
static void test_writeraw_label_nul(void **state)
{
	struct buf prof = {0}, req = {0};
	struct ingest_batch b;
	struct kiln_error err = {0};
	const char *value[] = {"__name__=a", "k=aXb"};
	const char *name[] = {"__name__=a", "kXy=v"};
	(void)state;

	make_profile(&prof, false);
	/* protobuf-c packs C strings: set the NUL in the packed bytes. */
	make_request(&req, value, 2, &prof);
	uint8_t *x = memmem(req.data, req.len, "aXb", 3);
	assert_non_null(x);
	x[1] = 0;
	assert_int_equal(prepare(&req, &b, &err), -EINVAL);
	assert_non_null(
	    strstr(err.msg, "series[0]: label value \"k\" holds a NUL byte at offset 1"));

	make_request(&req, name, 2, &prof);
	x = memmem(req.data, req.len, "kXy", 3);
	assert_non_null(x);
	x[1] = 0;
	kiln_error_clear(&err);
	assert_int_equal(prepare(&req, &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "label name \"k\" holds a NUL byte"));

	/* Without the NUL the same request passes. */
	make_request(&req, value, 2, &prof);
	kiln_error_clear(&err);
	assert_int_equal(prepare(&req, &b, &err), 0);
	buf_free(&prof);
	buf_free(&req);
}

/* Issue 24: profile times outside [2000-01-01, now + skew] are refused. */
static void test_writeraw_time_window(void **state)
{
	static const struct {
		int64_t time_ns, skew_ms;
		int rc;
		const char *needle;
	} cases[] = {
	    {946684799000000000LL, 0, -EINVAL, "before 2000-01-01"},
	    {946684800000000000LL, 0, 0, NULL},
	    {(TEST_NOW_MS + 3600 * 1000) * 1000000, 0, 0, NULL},
	    {(TEST_NOW_MS + 3600 * 1000 + 1) * 1000000, 0, -EINVAL, "too far in the future"},
	    {(TEST_NOW_MS + 120 * 1000) * 1000000, 60 * 1000, -EINVAL, "60 s past"},
	    {(TEST_NOW_MS + 30 * 1000) * 1000000, 60 * 1000, 0, NULL},
	    {INT64_MAX, 0, -EINVAL, "too far in the future"},
	};
	const char *labels[] = {"__name__=a"};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf prof = {0}, req = {0};
		struct kiln_error err = {0};
		struct ingest_batch b;
		struct arena *a = arena_new(0);
		struct ingest_limits lim = {.now_ms = TEST_NOW_MS,
					    .max_future_skew_ms = cases[i].skew_ms};

		make_profile_at(&prof, false, cases[i].time_ns);
		make_request(&req, labels, 1, &prof);
		int rc = ingest_prepare(req.data, req.len, &lim, a, &b, &err);
		if (rc != cases[i].rc)
			fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err.msg);
		if (rc == 0)
			ingest_batch_release(&b);
		else if (!strstr(err.msg, cases[i].needle))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].needle);
		arena_free(a);
		buf_free(&prof);
		buf_free(&req);
	}
}

static void test_writeraw_bad_profiles(void **state)
{
	struct buf garbage = {0}, bomb = {0}, req = {0};
	struct ingest_batch b;
	struct kiln_error err = {0};
	const char *labels[] = {"__name__=a"};
	(void)state;

	buf_append(&garbage, "\x0a\xff\xff\xffgarbage", 11);
	make_request(&req, labels, 1, &garbage);
	int rc = prepare(&req, &b, &err);
	assert_true(rc == -EINVAL || rc == -EBADMSG);
	assert_non_null(strstr(err.msg, "series[0].samples[0]"));

	size_t big = 4 << 20;
	char *zeros = calloc(1, big);
	assert_int_equal(gzip_deflate(zeros, big, 9, &bomb), 0);
	make_request(&req, labels, 1, &bomb);
	kiln_error_clear(&err);
	assert_int_equal(prepare(&req, &b, &err), -EFBIG); /* limit 1 MiB */

	/* Not a WriteRawRequest at all. */
	struct arena *a = arena_new(0);
	struct ingest_limits lim = {0};
	kiln_error_clear(&err);
	assert_int_equal(ingest_prepare((const uint8_t *)"\xff\xff\xff", 3, &lim, a, &b, &err),
			 -EINVAL);
	arena_free(a);
	free(zeros);
	buf_free(&garbage);
	buf_free(&bomb);
	buf_free(&req);
}

static void expect_limit(const struct buf *req, const struct ingest_limits *lim0,
			 const char *needle)
{
	struct arena *a = arena_new(0);
	struct ingest_batch b;
	struct kiln_error err = {0};
	struct ingest_limits lim = *lim0;
	lim.now_ms = TEST_NOW_MS;
	assert_int_equal(ingest_prepare(req->data, req->len, &lim, a, &b, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
	arena_free(a);
}

/* Each per-request limit refuses, naming its flag; under the defaults the
 * same request passes, and decode_at_commit keeps no decoded profile. */
static void test_writeraw_request_limits(void **state)
{
	struct buf prof = {0}, req = {0}, two = {0};
	const char *labels[] = {"__name__=parca_agent", "job=abcd"};
	(void)state;

	make_profile(&prof, true);
	make_request(&req, labels, 2, &prof);
	/* Two serialized requests back to back are one with both series. */
	buf_append(&two, req.data, req.len);
	buf_append(&two, req.data, req.len);
	expect_limit(&two, &(struct ingest_limits){.max_series = 1},
		     "--ingest-max-series-per-request");
	expect_limit(&req, &(struct ingest_limits){.max_label_bytes = 3},
		     "--ingest-max-label-size");
	expect_limit(&req, &(struct ingest_limits){.max_sample_types = 1},
		     "--ingest-max-sample-types");
	expect_limit(&req, &(struct ingest_limits){.max_stack_depth = 1},
		     "--ingest-max-stack-depth");

	struct arena *a = arena_new(0);
	struct ingest_batch b;
	struct kiln_error err = {0};
	struct ingest_limits lim = {.now_ms = TEST_NOW_MS, .decode_at_commit = true};
	assert_int_equal(ingest_prepare(two.data, two.len, &lim, a, &b, &err), 0);
	assert_int_equal(b.n_profiles, 2);
	assert_null(b.profiles[0].profile);
	assert_non_null(b.profiles[0].raw);
	assert_int_equal(b.profiles[0].raw_bytes, prof.len);
	assert_int_equal(b.total_samples, 8);
	ingest_batch_release(&b);
	arena_free(a);
	buf_free(&prof);
	buf_free(&req);
	buf_free(&two);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_frame_plain_and_gzip),
	    cmocka_unit_test(test_frame_malformed),
	    cmocka_unit_test(test_frame_gzip_bomb),
	    cmocka_unit_test(test_timeout_parse),
	    cmocka_unit_test(test_writeraw_valid),
	    cmocka_unit_test(test_writeraw_decoders_reused),
	    cmocka_unit_test(test_writeraw_label_errors),
	    cmocka_unit_test(test_writeraw_bad_profiles),
	    cmocka_unit_test(test_writeraw_label_nul),
	    cmocka_unit_test(test_writeraw_time_window),
	    cmocka_unit_test(test_writeraw_request_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
