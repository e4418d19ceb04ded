/*
 * fuzz_scrape_http.c — libFuzzer target for the scrape client's HTTP/1.1
 * response parser (src/scrape/http_parse.c) and its URL parser (http.c).
 *
 * The input is one response as the target would send it. It is parsed in
 * one piece and again in pieces of varying size (cut where the input's
 * first byte says); both must agree on the outcome, the body and the bytes
 * taken, and the body never exceeds the limit. Then the end of the
 * connection is signalled. The input is also tried as a URL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scrape/scrape_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int rc, eof_rc, status;
	size_t used;
	struct buf body;
};

static void parse(const uint8_t *data, size_t size, size_t step, size_t max, struct outcome *o)
{
	struct http_response r = {0};
	struct kiln_error err = {0};
	size_t off = 0;

	http_response_init(&r);
	buf_init(&o->body);
	o->rc = 0;
	o->used = 0;
	while (off < size) {
		size_t n = size - off < step ? size - off : step, used = 0;
		o->rc = http_response_feed(&r, data + off, n, &used, &o->body, max, &err);
		if (used > n || o->body.len > max)
			abort();
		off += used;
		if (o->rc != 0)
			break;
		if (used != n)
			abort(); /* "more needed" takes everything */
	}
	o->used = off;
	o->status = r.status;
	o->eof_rc = o->rc == 0 ? http_response_eof(&r, &o->body, &err) : 0;
	if (o->eof_rc == 1 && !http_response_done(&r))
		abort();
	http_response_release(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome a, b;
	size_t step = size ? (size_t)data[0] % 17 + 1 : 1, max = size ? data[size - 1] * 16u : 0;

	parse(data, size, size ? size : 1, max, &a);
	parse(data, size, step, max, &b);
	if (a.rc != b.rc || a.eof_rc != b.eof_rc)
		abort();
	/* Where a refused response stopped depends on the pieces. */
	if (a.rc >= 0 && a.eof_rc >= 0 &&
	    (a.used != b.used || a.body.len != b.body.len ||
	     (a.body.len && memcmp(a.body.data, b.body.data, a.body.len) != 0) ||
	     a.status != b.status))
		abort();
	buf_free(&a.body);
	buf_free(&b.body);

	char *url = malloc(size + 1);
	struct http_target t;
	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = 0;
	if (http_target_parse(url, &t) == 0) {
		if (!t.request || t.request_len != strlen(t.request) ||
		    memcmp(t.request, "GET /", 5) != 0)
			abort();
		http_target_release(&t);
	}
	free(url);
	return 0;
}
