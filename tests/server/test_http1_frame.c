/*
 * test_http1_frame.c — request framing on a kept-alive HTTP/1.1 connection
 * (http1_frame.c): a stream of requests is cut where each one ends whatever
 * way the bytes arrive (whole, or one byte at a time), and each kind of
 * garbage on a later request — a bad head, a bad chunk, framings two
 * parsers could read differently, a missing Host — is refused with its
 * status and a reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "server/http1_frame.h"

struct outcome {
	size_t forwarded, dropped;
	uint64_t requests;
	int status; /* 0 when not refused */
	char why[200];
};

/* Feeds s to a framer `step` bytes at a time (0: all at once), the way the
 * relay does: held bytes stay until the framer forwards or drops them. */
static struct outcome run(const char *s, size_t len, size_t step)
{
	struct http1_framer f;
	struct outcome o = {0};
	size_t held = 0, pos = 0; /* held bytes start at pos */

	http1_framer_init(&f, 1024);
	for (;;) {
		size_t n = 0;
		enum http1_frame_action a =
		    http1_frame_step(&f, (const uint8_t *)s + pos, held, &n);
		if (a == HTTP1_REFUSE) {
			o.status = f.status;
			snprintf(o.why, sizeof(o.why), "%s", f.why);
			break;
		}
		if (a == HTTP1_FORWARD || a == HTTP1_DROP) {
			assert_true(n > 0 && n <= held);
			if (a == HTTP1_FORWARD)
				o.forwarded += n;
			else
				o.dropped += n;
			pos += n;
			held -= n;
			continue;
		}
		if (pos + held == len)
			break;
		size_t more = step ? step : len - pos - held;
		if (more > len - pos - held)
			more = len - pos - held;
		held += more;
	}
	o.requests = f.requests;
	return o;
}

static void test_requests_in_a_row(void **state)
{
	static const char stream[] =
	    "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
	    "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
	    "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "3;name=v\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n"
	    "GET /d HTTP/1.0\r\n\r\n"
	    "anything after an HTTP/1.0 request without keep-alive is dropped";
	size_t len = sizeof(stream) - 1;
	size_t last = strstr(stream, "anything") - stream;

	for (size_t step = 0; step <= 3; step++) {
		struct outcome o = run(stream, len, step);
		assert_int_equal(o.status, 0);
		assert_int_equal(o.requests, 4);
		assert_int_equal(o.forwarded, last);
		assert_int_equal(o.dropped, len - last);
	}
	/* "Connection: close" ends the connection too. */
	static const char closing[] =
	    "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n"
	    "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct outcome o = run(closing, sizeof(closing) - 1, 0);
	assert_int_equal(o.requests, 1);
	assert_int_equal(o.dropped, strlen("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
}

/* A valid first request, then `second`: refused with status, why naming
 * `about`, after the first request went through. */
static void refused_after_one(const char *second, int status, const char *about)
{
	char stream[4096];
	int n = snprintf(stream, sizeof(stream), "GET / HTTP/1.1\r\nHost: x\r\n\r\n%s", second);
	for (size_t step = 0; step <= 1; step++) {
		struct outcome o = run(stream, (size_t)n, step);
		if (o.status != status || !strstr(o.why, about))
			fail_msg("%s: status %d (%s), expected %d naming %s", second, o.status,
				 o.why, status, about);
		assert_true(o.requests >= 1);
	}
}

static void test_garbage_on_a_later_request(void **state)
{
	refused_after_one("garbage\r\n\r\n", 400, "request line");
	refused_after_one("\x16\x03\x01\x02\x00\x01", 400, "request line");
	refused_after_one("GET / HTTP/1.1\r\nno colon\r\n\r\n", 400, "header");
	refused_after_one("GET / HTTP/1.1\r\n\r\n", 400, "Host");
	refused_after_one("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
	refused_after_one("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400,
			  "Content-Length");
	refused_after_one(
	    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400,
	    "Content-Length");
	refused_after_one(
	    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
	    "Content-Length");
	refused_after_one("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
			  "Transfer-Encoding: chunked\r\n\r\n",
			  400, "both");
	refused_after_one("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
			  "gzip");
	refused_after_one("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
			  400, "last");
	refused_after_one("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0");
	const char *chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
	char buf[512];
	static const struct {
		const char *body, *about;
	} bad_chunks[] = {
	    {"zz\r\n", "chunk size"},
	    {"3\nabc\r\n", "CRLF"},
	    {"3x\r\nabc\r\n", "after the chunk size"},
	    {"3\r\nabcd\r\n", "longer than its size"},
	    {"11111111111111111\r\n", "16 hexadecimal"},
	    {"0\r\nno colon\r\n\r\n", "trailer"},
	};
	for (size_t i = 0; i < sizeof(bad_chunks) / sizeof(bad_chunks[0]); i++) {
		snprintf(buf, sizeof(buf), "%s%s", chunked, bad_chunks[i].body);
		refused_after_one(buf, 400, bad_chunks[i].about);
	}
}

static void test_size_limits(void **state)
{
	char buf[4096];
	/* A request line or a header past the framer's 1024 bytes. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', 2000);
	refused_after_one(buf, 414, "--max-request-header-size");
	int n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: x\r\nX: ");
	memset(buf + n, 'b', 2000);
	refused_after_one(buf, 431, "--max-request-header-size");
	/* Trailers count against the same limit. */
	n = snprintf(buf, sizeof(buf),
		     "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n");
	for (int i = 0; i < 60; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "X-%02d: aaaaaaaaaaaaaaaaaaaaaa\r\n", i);
	refused_after_one(buf, 431, "trailers");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests_in_a_row),
	    cmocka_unit_test(test_garbage_on_a_later_request),
	    cmocka_unit_test(test_size_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
