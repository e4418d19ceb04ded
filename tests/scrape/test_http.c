/*
 * test_http.c — the scrape client's HTTP/1.1 response parser
 * (http_parse.c) and URL parsing (http.c): bodies by Content-Length,
 * chunked and connection close, split at every byte; interim responses;
 * keep-alive rules; garbage, truncation and oversize bodies refused with
 * what and where; which URLs the client takes (the rest go to libcurl).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "scrape/scrape_internal.h"

struct res {
	int rc;
	size_t used;
	int status;
	bool keep_alive, gzip;
	struct buf body;
	struct kiln_error err;
};

/* Parses s (length n) fed in pieces of step bytes; then, when more was
 * wanted and eof is set, the connection's end. */
static void run(const char *s, size_t n, size_t step, size_t max, bool eof, struct res *o)
{
	struct http_response r = {0};
	size_t off = 0;

	memset(o, 0, sizeof(*o));
	http_response_init(&r);
	while (off < n) {
		size_t k = n - off < step ? n - off : step, used = 0;
		o->rc = http_response_feed(&r, (const uint8_t *)s + off, k, &used, &o->body, max,
					   &o->err);
		off += used;
		if (o->rc != 0)
			break;
		assert_int_equal(used, k);
	}
	if (o->rc == 0 && eof)
		o->rc = http_response_eof(&r, &o->body, &o->err);
	o->used = off;
	o->status = r.status;
	o->keep_alive = r.keep_alive;
	o->gzip = r.gzip;
	http_response_release(&r);
}

/* Every split gives the same outcome as the whole. */
static void run_all_steps(const char *s, size_t max, bool eof, struct res *whole)
{
	size_t n = strlen(s);
	run(s, n, n ? n : 1, max, eof, whole);
	for (size_t step = 1; step < n; step++) {
		struct res o;
		run(s, n, step, max, eof, &o);
		assert_int_equal(o.rc, whole->rc);
		if (o.rc < 0) { /* where it stopped depends on the pieces */
			buf_free(&o.body);
			continue;
		}
		assert_int_equal(o.used, whole->used);
		assert_int_equal(o.body.len, whole->body.len);
		if (o.body.len)
			assert_memory_equal(o.body.data, whole->body.data, o.body.len);
		buf_free(&o.body);
	}
}

static void test_content_length(void **state)
{
	(void)state;
	struct res o;
	const char *s = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			"Content-Length: 5\r\nX-Empty:\r\n\r\nhelloEXTRA";
	run_all_steps(s, 1 << 20, false, &o);
	assert_int_equal(o.rc, 1);
	assert_int_equal(o.status, 200);
	assert_true(o.keep_alive);
	assert_int_equal(o.body.len, 5);
	assert_memory_equal(o.body.data, "hello", 5);
	assert_int_equal(o.used, strlen(s) - 5); /* "EXTRA" is not this response's */
	buf_free(&o.body);

	/* Bare LF line ends, HTTP/1.0 with and without keep-alive. */
	run_all_steps("HTTP/1.0 200 OK\nContent-Length: 2\n\nhi", 100, false, &o);
	assert_int_equal(o.rc, 1);
	assert_false(o.keep_alive);
	buf_free(&o.body);
	run_all_steps("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 100,
		      false, &o);
	assert_int_equal(o.rc, 1);
	assert_true(o.keep_alive);
	assert_int_equal(o.body.len, 0);
	run_all_steps(
	    "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 3\r\n\r\nno\n", 100,
	    false, &o);
	assert_int_equal(o.rc, 1);
	assert_int_equal(o.status, 404);
	assert_false(o.keep_alive);
	buf_free(&o.body);
	/* Equal duplicates are fine; a status line without a reason too. */
	run_all_steps("HTTP/1.1 200\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\nx", 100, false,
		      &o);
	assert_int_equal(o.rc, 1);
	buf_free(&o.body);
}

static void test_chunked_and_close(void **state)
{
	(void)state;
	struct res o;
	run_all_steps(
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n"
	    "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n",
	    1 << 20, false, &o);
	assert_int_equal(o.rc, 1);
	assert_true(o.keep_alive);
	assert_true(o.gzip);
	assert_int_equal(o.body.len, 31);
	assert_memory_equal(o.body.data, "helloabcdefghijklmnopqrstuvwxyz", 31);
	buf_free(&o.body);
	/* Chunked wins over a Content-Length, and the connection is not reused. */
	run_all_steps("HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n"
		      "2\r\nab\r\n0\r\n\r\n",
		      100, false, &o);
	assert_int_equal(o.rc, 1);
	assert_false(o.keep_alive);
	assert_int_equal(o.body.len, 2);
	buf_free(&o.body);
	/* No length: the body ends with the connection. */
	run_all_steps("HTTP/1.1 200 OK\r\n\r\nuntil close", 100, true, &o);
	assert_int_equal(o.rc, 1);
	assert_false(o.keep_alive);
	assert_int_equal(o.body.len, 11);
	buf_free(&o.body);
	/* Interim responses are skipped; 204 has no body. */
	run_all_steps("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n"
		      "HTTP/1.1 204 No Content\r\n\r\n",
		      100, false, &o);
	assert_int_equal(o.rc, 1);
	assert_int_equal(o.status, 204);
	assert_int_equal(o.body.len, 0);
}

static void expect_bad(const char *s, int code, const char *msg)
{
	struct res o;
	run_all_steps(s, 1 << 10, true, &o);
	assert_int_equal(o.rc, -code);
	if (!strstr(o.err.msg, msg))
		fail_msg("\"%s\": got \"%s\", want \"%s\"", s, o.err.msg, msg);
	buf_free(&o.body);
}

static void test_garbage(void **state)
{
	(void)state;
	expect_bad("garbage\r\n\r\n", EBADMSG, "malformed status line at byte 0");
	expect_bad("\x89PNG\r\n\x1a\n\r\n", EBADMSG, "malformed status line");
	expect_bad("HTTP/2 200 OK\r\n\r\n", EBADMSG, "malformed status line");
	expect_bad("HTTP/1.1 20 OK\r\n\r\n", EBADMSG, "malformed status line");
	expect_bad("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", EBADMSG,
		   "malformed header line at byte 17");
	expect_bad("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", EBADMSG, "malformed header line");
	expect_bad("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", EBADMSG,
		   "obsolete header line folding at byte 23");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", EBADMSG,
		   "conflicting Content-Length");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", EBADMSG,
		   "malformed Content-Length");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", EBADMSG,
		   "malformed Content-Length");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", EBADMSG,
		   "unsupported Transfer-Encoding");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n", EBADMSG,
		   "unsupported Content-Encoding \"br\"");
	expect_bad("HTTP/1.1 200 OK\r\nX: a\x01z\r\n\r\n", EBADMSG, "control character");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", EBADMSG,
		   "malformed chunk size at byte 47");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n",
		   EBADMSG, "chunk size overflows");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc", EBADMSG,
		   "missing CRLF after chunk data");
	expect_bad("HTTP/1.1 101 Switching Protocols\r\n\r\n", EBADMSG, "unexpected 101");
}

static void test_truncated(void **state)
{
	(void)state;
	expect_bad("", EPIPE, "connection closed before any response byte");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Le", EPIPE,
		   "connection closed in the headers at byte 27");
	expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", EPIPE,
		   "connection closed after 3 of 10 body bytes");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", EPIPE,
		   "connection closed in a chunked body after 2 bytes");
	expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", EPIPE,
		   "connection closed in a chunked body");
}

static void test_oversize(void **state)
{
	(void)state;
	/* Refused from the length alone, before any body byte. */
	expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n", EFBIG,
		   "body of 1025 bytes (Content-Length) exceeds the limit of 1024");
	struct buf b;
	buf_init(&b);
	assert_int_equal(
	    buf_append_str(&b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), 0);
	for (int i = 0; i < 40; i++)
		assert_int_equal(buf_append_str(&b, "20\r\n0123456789abcdef0123456789abcdef\r\n"),
				 0);
	assert_int_equal(buf_terminate(&b), 0);
	expect_bad((char *)b.data, EFBIG, "body exceeds the limit of 1024 bytes");
	buf_reset(&b);
	assert_int_equal(buf_append_str(&b, "HTTP/1.1 200 OK\r\n\r\n"), 0);
	for (int i = 0; i < 70; i++)
		assert_int_equal(buf_append_str(&b, "0123456789abcdef"), 0);
	assert_int_equal(buf_terminate(&b), 0);
	expect_bad((char *)b.data, EFBIG, "body exceeds the limit of 1024 bytes");
	/* Headers past HTTP_HEAD_MAX. */
	buf_reset(&b);
	assert_int_equal(buf_append_str(&b, "HTTP/1.1 200 OK\r\n"), 0);
	while (b.len <= HTTP_HEAD_MAX)
		assert_int_equal(buf_append_str(&b, "X-Filler: 0123456789abcdef0123456789\r\n"), 0);
	assert_int_equal(buf_terminate(&b), 0);
	struct res o;
	run((char *)b.data, b.len, 4096, 1024, true, &o);
	assert_int_equal(o.rc, -EBADMSG);
	assert_non_null(strstr(o.err.msg, "headers exceed 65536 bytes"));
	buf_free(&b);
}

static void test_target_parse(void **state)
{
	(void)state;
	struct http_target t;
	assert_int_equal(http_target_parse("http://127.0.0.1:6060/debug/pprof/allocs", &t), 0);
	assert_string_equal(t.request,
			    "GET /debug/pprof/allocs HTTP/1.1\r\nHost: 127.0.0.1:6060\r\n"
			    "User-Agent: kiln-scrape/1\r\nAccept: */*\r\n"
			    "Accept-Encoding: gzip\r\n\r\n");
	assert_int_equal(t.request_len, strlen(t.request));
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)&t.addr;
	assert_int_equal(s4->sin_family, AF_INET);
	assert_int_equal(ntohs(s4->sin_port), 6060);
	http_target_release(&t);
	assert_int_equal(http_target_parse("http://[::1]:80?seconds=10", &t), 0);
	assert_non_null(strstr(t.request, "GET /?seconds=10 HTTP/1.1\r\nHost: [::1]:80\r\n"));
	assert_int_equal(((const struct sockaddr_in6 *)&t.addr)->sin6_family, AF_INET6);
	http_target_release(&t);
	/* Left to libcurl. */
	const char *other[] = {
	    "https://127.0.0.1:443/x",	  "http://localhost:80/x",   "http://127.0.0.1/x",
	    "http://u:p@127.0.0.1:80/x",  "http://127.0.0.1:80/x#f", "http://127.0.0.1:80/a b",
	    "http://127.0.0.1:0/x",	  "http://127.0.0.1:70000/", "http://[::1/x",
	    "http://[fe80::1%eth0]:80/x", "http://127.1:80/",	     "",
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
		if (http_target_parse(other[i], &t) != -EINVAL)
			fail_msg("%s taken", other[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_content_length), cmocka_unit_test(test_chunked_and_close),
	    cmocka_unit_test(test_garbage),	   cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_oversize),	   cmocka_unit_test(test_target_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
