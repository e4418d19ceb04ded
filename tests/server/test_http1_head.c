/*
 * test_http1_head.c — the HTTP/1.1 request header check: complete
 * headers pass with their length, prefixes wait for more, and each kind of
 * garbage or excess gets its status (400, 414, 431) with a reason that says
 * where.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/http1_head.h"

static enum http1_head_verdict check(const char *s, size_t max, size_t *head_len, char *why)
{
	return http1_head_check((const uint8_t *)s, strlen(s), max, head_len, why, 200);
}

static void test_complete_and_prefixes(void **state)
{
	const char *req = "GET /api?q=1 HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\nbody";
	size_t n = 0, full = strlen(req) - 4;
	char why[200];

	assert_int_equal(check(req, 4096, &n, why), HTTP1_HEAD_OK);
	assert_int_equal(n, full);
	/* Every strict prefix of the header is "more", never a refusal. */
	char buf[128];
	for (size_t i = 0; i < full; i++) {
		memcpy(buf, req, i);
		buf[i] = '\0';
		assert_int_equal(check(buf, 4096, &n, why), HTTP1_HEAD_MORE);
	}
	/* Bare LF and leading empty lines are accepted, like libmicrohttpd. */
	assert_int_equal(check("\r\nPOST / HTTP/1.0\nA: b\n\n", 4096, &n, why), HTTP1_HEAD_OK);
}

static void test_garbage(void **state)
{
	size_t n;
	char why[200];
	static const char *const bad[] = {
	    "garbage\r\n\r\n",
	    "\x16\x03\x01\x02\x00",
	    "GET  / HTTP/1.1\r\n\r\n",
	    "GET / HTTP/2.0\r\n\r\n",
	    "GET / HTTP/1.1 extra\r\n\r\n",
	    "GET /a\x01 HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1\r\nno colon\r\n\r\n",
	    "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
	    "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
	    "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
	    "AVERYLONGMETHODNAMETHATISNOTAMETHODATALL / HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(check(bad[i], 4096, &n, why), HTTP1_HEAD_BAD);
		assert_non_null(strstr(why, "byte"));
	}
}

static void test_limits(void **state)
{
	size_t n;
	char why[200];
	char line[300];

	memset(line, 'a', sizeof(line));
	memcpy(line, "GET /", 5);
	line[sizeof(line) - 1] = '\0';
	assert_int_equal(check(line, 64, &n, why), HTTP1_HEAD_URI_TOO_LONG);
	assert_non_null(strstr(why, "--max-request-header-size"));
	assert_int_equal(
	    check("GET / HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 40,
		  &n, why),
	    HTTP1_HEAD_TOO_LARGE);
	/* A header that ends exactly at the limit passes. */
	assert_int_equal(check("GET / HTTP/1.1\r\n\r\n", 18, &n, why), HTTP1_HEAD_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_complete_and_prefixes),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
