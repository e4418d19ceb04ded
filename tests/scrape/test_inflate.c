/*
 * test_inflate.c — the scheduler's kept-state gunzip: round trip, several
 * members, reuse across calls, the size limit (a gzip bomb is refused, not
 * inflated), corrupt data and trailing garbage.
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
#include "scrape/scrape_internal.h"

static void gz(const char *s, size_t len, struct buf *out)
{
	assert_int_equal(gzip_deflate(s, len, 6, out), 0);
}

static void test_round_trip_and_reuse(void **state)
{
	(void)state;
	struct scrape_inflater z = {0};
	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	gz("hello, ", 7, &a);
	gz("world", 5, &a); /* two members */
	assert_int_equal(scrape_inflate(&z, a.data, a.len, 1 << 20, NULL), 0);
	assert_int_equal(z.out.len, 12);
	assert_memory_equal(z.out.data, "hello, world", 12);
	scrape_inflater_trim(&z);
	gz("again", 5, &b);
	assert_int_equal(scrape_inflate(&z, b.data, b.len, 1 << 20, NULL), 0);
	assert_int_equal(z.out.len, 5);
	assert_memory_equal(z.out.data, "again", 5);
	buf_free(&a);
	buf_free(&b);
	scrape_inflater_release(&z);
}

static void test_limit_and_bad_input(void **state)
{
	(void)state;
	struct scrape_inflater z = {0};
	struct kiln_error err = {0};
	size_t n = 4 << 20;
	char *zeros = calloc(1, n);
	struct buf a;
	buf_init(&a);
	assert_non_null(zeros);
	gz(zeros, n, &a); /* 4 MiB of zeros: a few KiB compressed */
	assert_int_equal(scrape_inflate(&z, a.data, a.len, 1 << 20, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "exceeds the limit of 1048576 bytes"));
	assert_int_equal(scrape_inflate(&z, a.data, a.len, 8 << 20, NULL), 0);
	assert_int_equal(z.out.len, n);
	/* Corrupt: a flipped byte in the deflate data. */
	a.data[a.len / 2] ^= 0xff;
	assert_int_equal(scrape_inflate(&z, a.data, a.len, 8 << 20, &err), -EBADMSG);
	buf_reset(&a);
	gz("x", 1, &a);
	assert_int_equal(buf_append(&a, "junk", 4), 0);
	kiln_error_clear(&err);
	assert_int_equal(scrape_inflate(&z, a.data, a.len, 8 << 20, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "4 trailing bytes after the stream"));
	free(zeros);
	buf_free(&a);
	scrape_inflater_release(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_and_reuse),
	    cmocka_unit_test(test_limit_and_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
