/*
 * http1_head.c — the check of each HTTP/1.1 request header
 * (RFC 9112 section 3 and 5): request-line = method SP target SP version
 * CRLF, then field lines "name: value" CRLF, then an empty line. Bare LF
 * ends a line too (libmicrohttpd accepts it); leading empty lines before
 * the request line are skipped (RFC 9112 section 2.2). Obsolete line
 * folding is refused, as the RFC allows. Only syntax is checked here: what
 * the fields mean is libmicrohttpd's and the handlers' business.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "server/http1_head.h"

#define METHOD_MAX 32

/* RFC 9110 tchar. */
static bool is_tchar(uint8_t c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The end of the line starting at p (the index of its '\n'), or -1. */
static long line_end(const uint8_t *b, size_t p, size_t len)
{
	const uint8_t *nl = memchr(b + p, '\n', len - p);
	return nl ? (long)(nl - b) : -1;
}

/* The line [p, nl) without its CR. */
static size_t line_len(const uint8_t *b, size_t p, size_t nl)
{
	return nl > p && b[nl - 1] == '\r' ? nl - 1 - p : nl - p;
}

static enum http1_head_verdict bad(char *why, size_t cap, const char *fmt, size_t at)
{
	snprintf(why, cap, fmt, at);
	return HTTP1_HEAD_BAD;
}

/* Checks the request line b[p, p+n) (complete when full, else a prefix). */
static enum http1_head_verdict check_request_line(const uint8_t *b, size_t p, size_t n, bool full,
						  char *why, size_t cap)
{
	size_t i = 0;
	while (i < n && is_tchar(b[p + i]))
		i++;
	if (i > METHOD_MAX)
		return bad(why, cap,
			   "malformed request line: method longer than 32 bytes at "
			   "byte %zu",
			   p + i);
	if (i == n)
		return full ? bad(why, cap, "malformed request line: no request target at byte %zu",
				  p + i)
			    : HTTP1_HEAD_MORE;
	if (i == 0 || b[p + i] != ' ')
		return bad(why, cap,
			   "malformed request line: expected METHOD SP TARGET SP "
			   "HTTP/1.x, bad byte at %zu",
			   p + i);
	size_t t = ++i;
	while (i < n && b[p + i] > 0x20 && b[p + i] != 0x7f)
		i++;
	if (i == n)
		return full ? bad(why, cap, "malformed request line: no HTTP version at byte %zu",
				  p + i)
			    : HTTP1_HEAD_MORE;
	if (i == t || b[p + i] != ' ')
		return bad(why, cap,
			   "malformed request line: bad byte in the request target at "
			   "byte %zu",
			   p + i);
	i++;
	static const char ver[] = "HTTP/1.";
	size_t v = 0;
	while (v < sizeof(ver) - 1 && i + v < n) {
		if (b[p + i + v] != (uint8_t)ver[v])
			return bad(why, cap,
				   "malformed request line: expected HTTP/1.x at byte %zu", p + i);
		v++;
	}
	if (i + v == n && v < sizeof(ver) - 1)
		return full ? bad(why, cap, "malformed request line: truncated version at byte %zu",
				  p + i)
			    : HTTP1_HEAD_MORE;
	size_t d = i + v;
	if (d == n)
		return full ? bad(why, cap, "malformed request line: truncated version at byte %zu",
				  p + d)
			    : HTTP1_HEAD_MORE;
	/* A prefix may already hold the CR of the line's CRLF. */
	bool tail_ok = full ? d + 1 == n : d + 1 == n || (d + 2 == n && b[p + d + 1] == '\r');
	if (b[p + d] < '0' || b[p + d] > '9' || !tail_ok)
		return bad(why, cap, "malformed request line: expected HTTP/1.x at byte %zu",
			   p + i);
	return full ? HTTP1_HEAD_OK : HTTP1_HEAD_MORE;
}

/* Checks the field line b[p, p+n) (complete when full, else a prefix). */
static enum http1_head_verdict check_field_line(const uint8_t *b, size_t p, size_t n, bool full,
						char *why, size_t cap)
{
	if (!full && n && b[p + n - 1] == '\r')
		n--; /* the CR of the line's CRLF (or of the final empty line) */
	if (!full && n == 0)
		return HTTP1_HEAD_MORE;
	if (n && (b[p] == ' ' || b[p] == '\t'))
		return bad(why, cap, "malformed header: folded line (obsolete) at byte %zu", p);
	size_t i = 0;
	while (i < n && is_tchar(b[p + i]))
		i++;
	if (i == n)
		return full ? bad(why, cap, "malformed header: line without ':' at byte %zu", p)
			    : HTTP1_HEAD_MORE;
	if (i == 0 || b[p + i] != ':')
		return bad(why, cap, "malformed header: bad byte in a field name at byte %zu",
			   p + i);
	for (i++; i < n; i++) {
		uint8_t c = b[p + i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return bad(why, cap,
				   "malformed header: control byte in a field value at "
				   "byte %zu",
				   p + i);
	}
	return full ? HTTP1_HEAD_OK : HTTP1_HEAD_MORE;
}

enum http1_head_verdict http1_head_check(const uint8_t *b, size_t len, size_t max, size_t *head_len,
					 char *why, size_t whycap)
{
	size_t p = 0;
	bool at_max = len >= max;
	if (at_max)
		len = max;
	*head_len = 0;
	why[0] = '\0';

	while (p < len && (b[p] == '\r' || b[p] == '\n'))
		p++; /* leading empty lines */
	long nl = line_end(b, p, len);
	if (nl < 0) {
		enum http1_head_verdict v = check_request_line(b, p, len - p, false, why, whycap);
		if (v != HTTP1_HEAD_MORE)
			return v;
		if (at_max) {
			snprintf(why, whycap,
				 "request line longer than --max-request-header-size=%zu bytes",
				 max);
			return HTTP1_HEAD_URI_TOO_LONG;
		}
		return HTTP1_HEAD_MORE;
	}
	enum http1_head_verdict v =
	    check_request_line(b, p, line_len(b, p, (size_t)nl), true, why, whycap);
	if (v != HTTP1_HEAD_OK)
		return v;
	if (nl > (long)p && b[nl - 1] != '\r' && memchr(b + p, '\r', (size_t)nl - p))
		return bad(why, whycap, "malformed request line: bare CR at byte %zu", p);
	p = (size_t)nl + 1;
	for (;;) {
		nl = line_end(b, p, len);
		if (nl < 0) {
			v = check_field_line(b, p, len - p, false, why, whycap);
			if (v != HTTP1_HEAD_MORE)
				return v;
			if (at_max) {
				snprintf(why, whycap,
					 "request header larger than --max-request-header-size=%zu "
					 "bytes",
					 max);
				return HTTP1_HEAD_TOO_LARGE;
			}
			return HTTP1_HEAD_MORE;
		}
		size_t n = line_len(b, p, (size_t)nl);
		if (n == 0) {
			*head_len = (size_t)nl + 1;
			return HTTP1_HEAD_OK;
		}
		v = check_field_line(b, p, n, true, why, whycap);
		if (v != HTTP1_HEAD_OK)
			return v;
		p = (size_t)nl + 1;
	}
}
