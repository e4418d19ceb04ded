/*
 * test_helpers.c — the shared helpers that each have one home in
 * src/common: LEB128 varints (varint.h), array growth (grow.h) and the
 * gzip writers (gzip.h: whole with zlib or libdeflate, and streamed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/gzip.h"
#include "common/varint.h"

static void test_varint_known_bytes_and_roundtrip(void **state)
{
	static const struct {
		uint64_t v;
		uint8_t b[VARINT_MAX];
		size_t n;
	} cases[] = {
	    {0, {0x00}, 1},
	    {1, {0x01}, 1},
	    {127, {0x7f}, 1},
	    {128, {0x80, 0x01}, 2},
	    {300, {0xac, 0x02}, 2},
	    {16384, {0x80, 0x80, 0x01}, 3},
	    {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
	};
	struct buf out = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[VARINT_MAX];
		const uint8_t *p = b;
		uint64_t v = 0;
		size_t n = varint_encode(b, cases[i].v);

		assert_int_equal(n, cases[i].n);
		assert_memory_equal(b, cases[i].b, n);
		assert_true(varint_decode(&p, b + n, &v));
		assert_true(p == b + n);
		assert_true(v == cases[i].v);
		buf_reset(&out);
		assert_int_equal(varint_append(&out, cases[i].v), 0);
		assert_int_equal(out.len, n);
		assert_memory_equal(out.data, cases[i].b, n);
	}
	buf_free(&out);
	for (int64_t s = -300; s <= 300; s++)
		assert_true(zigzag_decode(zigzag_encode(s)) == s);
	assert_true(zigzag_encode(0) == 0 && zigzag_encode(-1) == 1 && zigzag_encode(1) == 2);
	assert_true(zigzag_decode(zigzag_encode(INT64_MIN)) == INT64_MIN);
	assert_true(zigzag_decode(zigzag_encode(INT64_MAX)) == INT64_MAX);
}

static void test_varint_rejects_truncated_and_overlong(void **state)
{
	const uint8_t trunc[] = {0x80, 0x80};
	uint8_t overlong[11];
	const uint8_t *p;
	uint64_t v;

	(void)state;
	p = trunc;
	assert_false(varint_decode(&p, trunc, &v)); /* empty */
	assert_false(varint_decode(&p, trunc + 1, &v));
	p = trunc;
	assert_false(varint_decode(&p, trunc + 2, &v));
	memset(overlong, 0x80, sizeof(overlong));
	p = overlong;
	assert_false(varint_decode(&p, overlong + sizeof(overlong), &v));
	/* Ten bytes are accepted; bits past 63 are dropped as protobuf does. */
	overlong[9] = 0x7f;
	p = overlong;
	assert_true(varint_decode(&p, overlong + sizeof(overlong), &v));
	assert_true(p == overlong + 10);
	assert_true(v == (uint64_t)1 << 63);
}

static void test_grow_doubles_and_keeps_state_on_failure(void **state)
{
	uint32_t *a = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(GROW_ARRAY(a, cap, 1, 16), 0);
	assert_int_equal(cap, 16);
	assert_non_null(a);
	for (uint32_t i = 0; i < 16; i++)
		a[i] = i;
	assert_int_equal(GROW_ARRAY(a, cap, 16, 16), 0); /* room already */
	assert_int_equal(cap, 16);
	assert_int_equal(GROW_ARRAY(a, cap, 17, 16), 0);
	assert_int_equal(cap, 32);
	assert_int_equal(GROW_ARRAY(a, cap, 100, 16), 0);
	assert_int_equal(cap, 128);
	for (uint32_t i = 0; i < 16; i++)
		assert_int_equal(a[i], i);
	/* A size that overflows: refused, array and capacity as they were. */
	uint32_t *before = a;
	assert_int_equal(GROW_ARRAY(a, cap, SIZE_MAX / 2, 16), -ENOMEM);
	assert_true(a == before);
	assert_int_equal(cap, 128);
	free(a);
}

/* Inflates z whole into out (reset first). */
static void inflate_all(const struct buf *z, struct buf *out)
{
	struct kiln_error err = {0};

	buf_reset(out);
	assert_int_equal(gzip_inflate(z->data, z->len, 0, out, &err), 0);
}

static void test_gzip_writers_inflate_back(void **state)
{
	size_t n = 3 << 20;
	uint8_t *data = malloc(n);
	struct buf whole = {0}, fast = {0}, streamed = {0}, back = {0};
	struct gzip_stream *z = gzip_stream_new(1);

	(void)state;
	assert_non_null(data);
	assert_non_null(z);
	for (size_t i = 0; i < n; i++)
		data[i] = (uint8_t)("kiln profile "[i % 13] ^ ((i >> 12) & 3));
	assert_int_equal(gzip_deflate(data, n, 6, &whole), 0);
	assert_int_equal(gzip_deflate_fast(data, n, &fast), 0);
	/* Streamed in uneven pieces, one of them empty. */
	for (size_t off = 0, step = 1; off < n; off += step, step = step * 3 + 1) {
		size_t len = off + step > n ? n - off : step;
		assert_int_equal(gzip_stream_write(z, data + off, len, &streamed), 0);
		assert_int_equal(gzip_stream_write(z, NULL, 0, &streamed), 0);
	}
	assert_int_equal(gzip_stream_finish(z, &streamed), 0);
	assert_true(gzip_is_gzip(whole.data, whole.len));
	assert_true(gzip_is_gzip(fast.data, fast.len));
	assert_true(gzip_is_gzip(streamed.data, streamed.len));
	inflate_all(&whole, &back);
	assert_int_equal(back.len, n);
	assert_memory_equal(back.data, data, n);
	inflate_all(&fast, &back);
	assert_int_equal(back.len, n);
	assert_memory_equal(back.data, data, n);
	inflate_all(&streamed, &back);
	assert_int_equal(back.len, n);
	assert_memory_equal(back.data, data, n);
	/* The same input gives the same bytes: what makes a streamed merge's
	 * gzip equal the builder path's. */
	buf_reset(&back);
	assert_int_equal(gzip_deflate_fast(data, n, &back), 0);
	assert_int_equal(back.len, fast.len);
	assert_memory_equal(back.data, fast.data, fast.len);
	gzip_stream_free(z);
	gzip_stream_free(NULL);
	buf_free(&whole);
	buf_free(&fast);
	buf_free(&streamed);
	buf_free(&back);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_varint_known_bytes_and_roundtrip),
	    cmocka_unit_test(test_varint_rejects_truncated_and_overlong),
	    cmocka_unit_test(test_grow_doubles_and_keeps_state_on_failure),
	    cmocka_unit_test(test_gzip_writers_inflate_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
