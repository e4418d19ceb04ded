/*
 * http1_frame.c — request framing on an HTTP/1.1 connection (RFC 9112
 * sections 6 and 7): a head, then Content-Length bytes or a chunked body,
 * then the next head.
 *
 * Why so strict: the relay and libmicrohttpd must agree on where each
 * request ends, or a client could hide a request from one of them
 * (request smuggling). So anything the two might read differently is
 * refused: Content-Length together with Transfer-Encoding, differing
 * Content-Lengths, a coding other than chunked (501), chunk lines without
 * their CRLF. An HTTP/1.1 request must carry exactly one Host (RFC 9112
 * section 3.2 says to answer 400 otherwise).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/http1_frame.h"
#include "server/http1_head.h"

/* A chunk-size line with extensions, at most. */
#define CHUNK_LINE_MAX 4096

void http1_framer_init(struct http1_framer *f, size_t max_head)
{
	memset(f, 0, sizeof(*f));
	f->max_head = max_head;
}

__attribute__((format(printf, 3, 4))) static enum http1_frame_action
refuse(struct http1_framer *f, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof(f->why), fmt, ap);
	va_end(ap);
	f->state = HTTP1_REFUSED;
	f->status = status;
	return HTTP1_REFUSE;
}

/* What a head says about the framing of its request. */
struct head_fields {
	bool http10;
	bool has_length, chunked, close, keep_alive;
	uint64_t length;
	unsigned hosts;
	const char *bad; /* why the head is refused, NULL if it is not */
	int bad_status;
	char coding[40]; /* BAD 501: the coding */
};

static bool ows(uint8_t c)
{
	return c == ' ' || c == '\t';
}

/* Calls each comma-separated token of v[0,n) (trimmed) with fn. */
static void each_token(const uint8_t *v, size_t n, struct head_fields *h,
		       void (*fn)(struct head_fields *, const uint8_t *, size_t))
{
	size_t i = 0;
	while (i <= n) {
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		size_t a = i, z = j;
		while (a < z && ows(v[a]))
			a++;
		while (z > a && ows(v[z - 1]))
			z--;
		if (z > a)
			fn(h, v + a, z - a);
		i = j + 1;
	}
}

static bool token_is(const uint8_t *t, size_t n, const char *word)
{
	return n == strlen(word) && strncasecmp((const char *)t, word, n) == 0;
}

static void connection_token(struct head_fields *h, const uint8_t *t, size_t n)
{
	if (token_is(t, n, "close"))
		h->close = true;
	else if (token_is(t, n, "keep-alive"))
		h->keep_alive = true;
}

static void coding_token(struct head_fields *h, const uint8_t *t, size_t n)
{
	if (h->bad)
		return;
	if (h->chunked) { /* chunked must be the last coding, and only once */
		h->bad = "Transfer-Encoding: chunked must be the last coding, once";
		h->bad_status = 400;
		return;
	}
	if (token_is(t, n, "chunked")) {
		h->chunked = true;
		return;
	}
	size_t k = n < sizeof(h->coding) - 1 ? n : sizeof(h->coding) - 1;
	memcpy(h->coding, t, k);
	h->coding[k] = '\0';
	h->bad = "an unsupported Transfer-Encoding";
	h->bad_status = 501;
}

static void length_value(struct head_fields *h, const uint8_t *v, size_t n)
{
	uint64_t x = 0;
	if (n == 0 || n > 19) {
		h->bad = "malformed Content-Length: expected up to 19 decimal digits";
		h->bad_status = 400;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9') {
			h->bad = "malformed Content-Length: expected up to 19 decimal digits";
			h->bad_status = 400;
			return;
		}
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (h->has_length && x != h->length) {
		h->bad = "two different Content-Length values";
		h->bad_status = 400;
		return;
	}
	h->has_length = true;
	h->length = x;
}

/* Reads the framing fields of a head that http1_head_check accepted. */
static void read_head_fields(const uint8_t *b, size_t len, struct head_fields *h)
{
	size_t p = 0;
	while (p < len && (b[p] == '\r' || b[p] == '\n'))
		p++;
	const uint8_t *nl = memchr(b + p, '\n', len - p);
	size_t end = (size_t)(nl - b);
	size_t rl = end > p && b[end - 1] == '\r' ? end - 1 : end;
	/* The request line ends in "HTTP/1.D" (checked by http1_head_check). */
	h->http10 = rl >= 1 && b[rl - 1] == '0';
	for (p = end + 1; p < len;) {
		nl = memchr(b + p, '\n', len - p);
		end = (size_t)(nl - b);
		size_t e = end > p && b[end - 1] == '\r' ? end - 1 : end;
		if (e == p)
			break; /* the empty line */
		const uint8_t *colon = memchr(b + p, ':', e - p);
		size_t nlen = (size_t)(colon - (b + p));
		size_t v = (size_t)(colon - b) + 1;
		while (v < e && ows(b[v]))
			v++;
		size_t z = e;
		while (z > v && ows(b[z - 1]))
			z--;
		const uint8_t *name = b + p;
		if (token_is(name, nlen, "content-length")) {
			if (!h->bad)
				length_value(h, b + v, z - v);
		} else if (token_is(name, nlen, "transfer-encoding")) {
			each_token(b + v, z - v, h, coding_token);
		} else if (token_is(name, nlen, "connection")) {
			each_token(b + v, z - v, h, connection_token);
		} else if (token_is(name, nlen, "host")) {
			h->hosts++;
		}
		p = end + 1;
	}
	if (h->bad)
		return;
	if (h->chunked && h->has_length) {
		h->bad = "both Content-Length and Transfer-Encoding: send one";
		h->bad_status = 400;
	} else if (h->chunked && h->http10) {
		h->bad = "Transfer-Encoding in an HTTP/1.0 request";
		h->bad_status = 400;
	} else if (h->hosts > 1) {
		h->bad = "more than one Host header";
		h->bad_status = 400;
	} else if (h->hosts == 0 && !h->http10) {
		h->bad = "an HTTP/1.1 request without a Host header";
		h->bad_status = 400;
	}
}

static enum http1_frame_action at_head(struct http1_framer *f, const uint8_t *b, size_t len,
				       size_t *n)
{
	size_t head_len = 0;
	char why[200];
	enum http1_head_verdict v =
	    http1_head_check(b, len, f->max_head, &head_len, why, sizeof(why));
	if (v == HTTP1_HEAD_MORE)
		return HTTP1_NEED_MORE;
	if (v != HTTP1_HEAD_OK)
		return refuse(f, (int)v, "%s", why);
	struct head_fields h = {0};
	read_head_fields(b, head_len, &h);
	if (h.bad_status == 501)
		return refuse(f, 501,
			      "Transfer-Encoding %s is not supported: send chunked or "
			      "Content-Length",
			      h.coding);
	if (h.bad)
		return refuse(f, h.bad_status, "%s", h.bad);
	f->requests++;
	*n = head_len;
	if (h.chunked) {
		f->state = HTTP1_CHUNK_SIZE;
	} else if (h.has_length && h.length > 0) {
		f->state = HTTP1_IN_BODY;
		f->remaining = h.length;
	} else {
		f->state = HTTP1_AT_HEAD;
	}
	f->last = h.close || (h.http10 && !h.keep_alive);
	f->trailer_bytes = 0;
	if (f->state == HTTP1_AT_HEAD && f->last)
		f->state = HTTP1_AFTER_LAST;
	return HTTP1_FORWARD;
}

/* The request (its body included) is complete: the next head, or nothing. */
static void request_done(struct http1_framer *f)
{
	f->state = f->last ? HTTP1_AFTER_LAST : HTTP1_AT_HEAD;
	f->trailer_bytes = 0;
}

static int hex_digit(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static enum http1_frame_action chunk_size(struct http1_framer *f, const uint8_t *b, size_t len,
					  size_t *n)
{
	size_t lim = len < CHUNK_LINE_MAX ? len : CHUNK_LINE_MAX;
	const uint8_t *nl = memchr(b, '\n', lim);
	if (!nl) {
		if (len >= CHUNK_LINE_MAX)
			return refuse(
			    f, 400,
			    "malformed chunked body: a chunk-size line longer than %d bytes",
			    CHUNK_LINE_MAX);
		if (hex_digit(b[0]) < 0)
			return refuse(f, 400, "malformed chunked body: %s",
				      "expected a hexadecimal chunk size");
		return HTTP1_NEED_MORE;
	}
	size_t end = (size_t)(nl - b);
	if (end == 0 || b[end - 1] != '\r')
		return refuse(f, 400, "malformed chunked body: %s",
			      "a chunk-size line without CRLF");
	size_t i = 0;
	uint64_t size = 0;
	for (int d; i < end - 1 && (d = hex_digit(b[i])) >= 0; i++) {
		if (i >= 16)
			return refuse(f, 400, "malformed chunked body: %s",
				      "a chunk size over 16 hexadecimal digits");
		size = size << 4 | (uint64_t)d;
	}
	if (i == 0)
		return refuse(f, 400, "malformed chunked body: %s",
			      "expected a hexadecimal chunk size");
	size_t j = i;
	while (j < end - 1 && ows(b[j]))
		j++;
	if (j < end - 1 && b[j] != ';')
		return refuse(f, 400, "malformed chunked body: %s",
			      "bad byte after the chunk size");
	for (; j < end - 1; j++)
		if ((b[j] < 0x20 && b[j] != '\t') || b[j] == 0x7f)
			return refuse(f, 400, "malformed chunked body: %s",
				      "control byte in a chunk extension");
	*n = end + 1;
	if (size == 0) {
		f->state = HTTP1_TRAILERS;
		f->trailer_bytes = 0;
	} else {
		f->state = HTTP1_CHUNK_DATA;
		f->remaining = size;
	}
	return HTTP1_FORWARD;
}

static enum http1_frame_action trailers(struct http1_framer *f, const uint8_t *b, size_t len,
					size_t *n)
{
	size_t room =
	    f->max_head - (f->trailer_bytes < f->max_head ? f->trailer_bytes : f->max_head);
	size_t lim = len < room ? len : room;
	const uint8_t *nl = memchr(b, '\n', lim);
	if (!nl) {
		if (len >= room)
			return refuse(
			    f, 431,
			    "request trailers larger than --max-request-header-size=%zu bytes",
			    f->max_head);
		return HTTP1_NEED_MORE;
	}
	size_t end = (size_t)(nl - b);
	if (end == 0 || b[end - 1] != '\r')
		return refuse(f, 400, "malformed chunked body: %s", "a trailer line without CRLF");
	if (end == 1) { /* the empty line: the request is complete */
		*n = 2;
		request_done(f);
		return HTTP1_FORWARD;
	}
	/* A field line: name ':' value, as in the head. */
	size_t i = 0;
	while (i < end - 1 && b[i] != ':' && b[i] > 0x20 && b[i] < 0x7f)
		i++;
	if (i == 0 || i == end - 1 || b[i] != ':')
		return refuse(f, 400, "malformed chunked body: %s",
			      "a trailer line without a name and ':'");
	for (i++; i < end - 1; i++)
		if ((b[i] < 0x20 && b[i] != '\t') || b[i] == 0x7f)
			return refuse(f, 400, "malformed chunked body: %s",
				      "control byte in a trailer value");
	f->trailer_bytes += end + 1;
	*n = end + 1;
	return HTTP1_FORWARD;
}

enum http1_frame_action http1_frame_step(struct http1_framer *f, const uint8_t *b, size_t len,
					 size_t *n)
{
	*n = 0;
	if (f->state == HTTP1_REFUSED)
		return HTTP1_REFUSE;
	if (len == 0)
		return HTTP1_NEED_MORE;
	switch (f->state) {
	case HTTP1_AT_HEAD:
		return at_head(f, b, len, n);
	case HTTP1_IN_BODY:
	case HTTP1_CHUNK_DATA:
		*n = len < f->remaining ? len : (size_t)f->remaining;
		f->remaining -= *n;
		if (f->remaining == 0) {
			if (f->state == HTTP1_CHUNK_DATA)
				f->state = HTTP1_CHUNK_END;
			else
				request_done(f);
		}
		return HTTP1_FORWARD;
	case HTTP1_CHUNK_END:
		if (b[0] != '\r')
			return refuse(f, 400, "malformed chunked body: %s",
				      "chunk data longer than its size (no CRLF after it)");
		if (len < 2)
			return HTTP1_NEED_MORE;
		if (b[1] != '\n')
			return refuse(f, 400, "malformed chunked body: %s",
				      "chunk data longer than its size (no CRLF after it)");
		*n = 2;
		f->state = HTTP1_CHUNK_SIZE;
		return HTTP1_FORWARD;
	case HTTP1_CHUNK_SIZE:
		return chunk_size(f, b, len, n);
	case HTTP1_TRAILERS:
		return trailers(f, b, len, n);
	case HTTP1_AFTER_LAST:
		*n = len;
		return HTTP1_DROP;
	case HTTP1_REFUSED:
		break;
	}
	return HTTP1_REFUSE;
}
