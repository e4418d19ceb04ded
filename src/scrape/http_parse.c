/*
 * http_parse.c — an incremental, strict parser of one HTTP/1.1 response
 * (RFC 9112) for the scrape client (http.c): status line and headers, then
 * a body delimited by Content-Length, chunked transfer coding or the end of
 * the connection. Bytes may arrive split anywhere; the body is appended to
 * the caller's buffer, never past its limit. Interim 1xx responses are
 * skipped. What is refused, with the byte offset in the response: a status
 * line that is not "HTTP/1.x NNN", header lines without a name or colon,
 * obsolete line folding, conflicting or malformed Content-Length, transfer
 * codings other than chunked, content codings other than gzip, chunk sizes
 * that are not hex or overflow, heads or trailers over HTTP_HEAD_MAX.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "scrape/scrape_internal.h"

enum {
	ST_HEAD,       /* collecting the status line and headers */
	ST_BODY_LEN,   /* Content-Length body: r->remaining left */
	ST_BODY_CLOSE, /* body until the connection closes */
	ST_CHUNK_SIZE, /* collecting a chunk-size line */
	ST_CHUNK_DATA, /* r->remaining bytes of the chunk left */
	ST_CHUNK_END,  /* the CRLF after a chunk's data */
	ST_TRAILER,    /* trailer lines until an empty one */
	ST_DONE,
};

#define CHUNK_LINE_MAX 1024 /* size and extensions */

void http_response_init(struct http_response *r)
{
	struct buf keep = r->line;
	memset(r, 0, sizeof(*r));
	r->line = keep;
	buf_reset(&r->line);
	r->state = ST_HEAD;
}

void http_response_release(struct http_response *r)
{
	buf_free(&r->line);
}

bool http_response_done(const struct http_response *r)
{
	return r->state == ST_DONE;
}

static int bad(struct kiln_error *err, size_t at, const char *what)
{
	return kiln_error_set(err, EBADMSG, "bad HTTP response: %s at byte %zu", what, at);
}

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Whether the comma-separated list v (length n) consists of tokens that
 * all equal one of the accepted names; *last gets the final token. */
static bool token_list(const char *v, size_t n, const char *tok, bool *has, const char **last,
		       size_t *last_len)
{
	size_t i = 0;
	*has = false;
	*last = NULL;
	*last_len = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
			i++;
		if (i == s)
			continue;
		*last = v + s;
		*last_len = i - s;
		if (strlen(tok) == i - s && strncasecmp(v + s, tok, i - s) == 0)
			*has = true;
		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (i < n && v[i] != ',')
			return false; /* "a b": not a list */
	}
	return true;
}

static bool eq_ci(const char *a, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

/* One header field (name[0..nl), value[0..vl), trimmed). at = offset of
 * the line in the response, for messages. */
static int header(struct http_response *r, const char *name, size_t nl, const char *v, size_t vl,
		  size_t at, struct kiln_error *err)
{
	bool has;
	const char *last;
	size_t ll;

	if (eq_ci(name, nl, "content-length")) {
		uint64_t n = 0;
		if (vl == 0)
			return bad(err, at, "empty Content-Length");
		for (size_t i = 0; i < vl; i++) {
			if (v[i] < '0' || v[i] > '9' || n > (UINT64_MAX >> 4))
				return bad(err, at, "malformed Content-Length");
			n = n * 10 + (uint64_t)(v[i] - '0');
		}
		if (r->has_length && r->length != n)
			return bad(err, at, "conflicting Content-Length headers");
		r->has_length = true;
		r->length = n;
	} else if (eq_ci(name, nl, "transfer-encoding")) {
		if (!token_list(v, vl, "chunked", &has, &last, &ll) || !last)
			return bad(err, at, "malformed Transfer-Encoding");
		/* Only "chunked", once and last: other transfer codings are
		 * not asked for (no TE header is sent). */
		if (!eq_ci(last, ll, "chunked") || last != v + strspn(v, " \t,") || r->chunked)
			return bad(err, at, "unsupported Transfer-Encoding");
		r->chunked = true;
	} else if (eq_ci(name, nl, "content-encoding")) {
		if (!token_list(v, vl, "gzip", &has, &last, &ll))
			return bad(err, at, "malformed Content-Encoding");
		if (!last || eq_ci(last, ll, "identity"))
			return 0;
		if ((!eq_ci(last, ll, "gzip") && !eq_ci(last, ll, "x-gzip")) ||
		    last != v + strspn(v, " \t,") || r->gzip)
			return kiln_error_set(err, EBADMSG,
					      "bad HTTP response: unsupported Content-Encoding "
					      "\"%.*s\" at byte %zu",
					      (int)(vl < 40 ? vl : 40), v, at);
		r->gzip = true;
	} else if (eq_ci(name, nl, "connection")) {
		if (!token_list(v, vl, "close", &has, &last, &ll))
			return bad(err, at, "malformed Connection");
		if (has)
			r->close = true;
		if (token_list(v, vl, "keep-alive", &has, &last, &ll) && has)
			r->keep_alive_10 = true;
	}
	return 0;
}

/* Parses the collected head (status line and headers, up to and
 * including the empty line) in r->line. */
static int parse_head(struct http_response *r, struct kiln_error *err)
{
	const char *s = (const char *)r->line.data, *end = s + r->line.len;
	size_t base = r->offset - r->line.len;
	const char *eol = memchr(s, '\n', (size_t)(end - s));
	size_t n = (size_t)(eol - s);

	if (n && s[n - 1] == '\r')
		n--;
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
	    s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9' ||
	    (n > 12 && s[12] != ' '))
		return bad(err, base, "malformed status line");
	r->minor = s[7] - '0';
	r->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	r->has_length = r->chunked = r->gzip = r->close = r->keep_alive_10 = false;
	r->length = 0;
	for (const char *p = eol + 1; p < end;) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		size_t at = base + (size_t)(p - s), ln = (size_t)(e - p);
		if (ln && p[ln - 1] == '\r')
			ln--;
		if (ln == 0)
			break; /* the empty line */
		if (*p == ' ' || *p == '\t')
			return bad(err, at, "obsolete header line folding");
		size_t nl = 0;
		while (nl < ln && is_tchar((unsigned char)p[nl]))
			nl++;
		if (nl == 0 || nl == ln || p[nl] != ':')
			return bad(err, at, "malformed header line");
		const char *v = p + nl + 1;
		size_t vl = ln - nl - 1;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		for (size_t i = 0; i < vl; i++)
			if ((unsigned char)v[i] < 0x20 && v[i] != '\t')
				return bad(err, at, "control character in a header value");
		int rc = header(r, p, nl, v, vl, at, err);
		if (rc < 0)
			return rc;
		p = e + 1;
	}
	return 0;
}

/* After the head: where the body starts, or the next head for a 1xx. */
static int after_head(struct http_response *r, size_t max_body, struct kiln_error *err)
{
	buf_reset(&r->line);
	r->line_start = 0;
	if (r->status == 101)
		return bad(err, r->offset, "unexpected 101 Switching Protocols");
	if (r->status < 200) {
		r->state = ST_HEAD; /* interim: the final response follows */
		return 0;
	}
	r->keep_alive = !r->close && (r->minor == 1 || r->keep_alive_10);
	if (r->status == 204 || r->status == 304) {
		r->state = ST_DONE;
		return 0;
	}
	if (r->chunked) {
		/* Both: the length is to be ignored, and the connection not
		 * reused (RFC 9112 6.3). */
		if (r->has_length)
			r->keep_alive = false;
		r->state = ST_CHUNK_SIZE;
	} else if (r->has_length) {
		if (r->length > max_body)
			return kiln_error_set(err, EFBIG,
					      "body of %llu bytes (Content-Length) exceeds the "
					      "limit of %zu",
					      (unsigned long long)r->length, max_body);
		r->remaining = r->length;
		r->state = r->length ? ST_BODY_LEN : ST_DONE;
	} else {
		r->keep_alive = false;
		r->state = ST_BODY_CLOSE;
	}
	return 0;
}

static int body_append(struct buf *body, const uint8_t *p, size_t n, size_t max_body,
		       struct kiln_error *err)
{
	if (n > max_body - body->len)
		return kiln_error_set(err, EFBIG, "body exceeds the limit of %zu bytes", max_body);
	if (buf_append(body, p, n) < 0)
		return kiln_error_set(err, ENOMEM, "out of memory for a %zu-byte body",
				      body->len + n);
	return 0;
}

/* Takes the next bytes of a body of known length (a Content-Length body or
 * one chunk: r->remaining left) out of p[0..n); when they are all there,
 * moves on to state next. Returns the bytes taken, or a negative errno
 * (err filled) when the body would exceed max_body. */
static ssize_t take_counted(struct http_response *r, const uint8_t *p, size_t n, struct buf *body,
			    size_t max_body, int next, struct kiln_error *err)
{
	size_t k = n < r->remaining ? n : (size_t)r->remaining;
	int rc = body_append(body, p, k, max_body, err);
	if (rc < 0)
		return rc;
	r->offset += k;
	r->remaining -= k;
	if (!r->remaining)
		r->state = next;
	return (ssize_t)k;
}

/* Appends bytes up to and including the next '\n' to r->line (at most
 * max bytes in it); returns how many were taken, *eol when the line is
 * complete, or -1 when it would exceed max. */
static ssize_t take_line(struct http_response *r, const uint8_t *p, size_t n, size_t max, bool *eol)
{
	const uint8_t *e = memchr(p, '\n', n);
	size_t k = e ? (size_t)(e - p) + 1 : n;
	*eol = e != NULL;
	if (r->line.len + k > max)
		return -1;
	if (buf_append(&r->line, p, k) < 0)
		return -2;
	return (ssize_t)k;
}

/* Whether r->line (complete) is an empty line. */
static bool line_empty(const struct http_response *r)
{
	return r->line.len == 1 || (r->line.len == 2 && r->line.data[0] == '\r');
}

int http_response_feed(struct http_response *r, const uint8_t *p, size_t n, size_t *used,
		       struct buf *body, size_t max_body, struct kiln_error *err)
{
	size_t i = 0;
	int rc = 0;
	bool eol;

	while (i < n && r->state != ST_DONE && rc == 0) {
		size_t left = n - i;
		ssize_t k;
		switch (r->state) {
		case ST_HEAD:
			k = take_line(r, p + i, left, HTTP_HEAD_MAX, &eol);
			if (k == -1)
				return kiln_error_set(err, EBADMSG,
						      "bad HTTP response: headers exceed %d bytes",
						      HTTP_HEAD_MAX);
			if (k < 0)
				return kiln_error_set(err, ENOMEM, "out of memory for headers");
			i += (size_t)k;
			r->offset += (size_t)k;
			if (!eol)
				break;
			{
				size_t ll = r->line.len - r->line_start;
				const uint8_t *l = r->line.data + r->line_start;
				bool empty = ll == 1 || (ll == 2 && l[0] == '\r');
				if (empty && r->line_start == 0) {
					/* A stray empty line before the status
					 * line is tolerated (RFC 9112 2.2). */
					buf_reset(&r->line);
					break;
				}
				if (!empty) {
					r->line_start = r->line.len;
					break;
				}
			}
			if ((rc = parse_head(r, err)) == 0)
				rc = after_head(r, max_body, err);
			break;
		case ST_BODY_LEN:
			k = take_counted(r, p + i, left, body, max_body, ST_DONE, err);
			if (k < 0)
				rc = (int)k;
			else
				i += (size_t)k;
			break;
		case ST_BODY_CLOSE:
			if ((rc = body_append(body, p + i, left, max_body, err)) < 0)
				break;
			i = n;
			r->offset += left;
			break;
		case ST_CHUNK_SIZE:
			k = take_line(r, p + i, left, CHUNK_LINE_MAX, &eol);
			if (k < 0)
				return bad(err, r->offset, "chunk-size line too long");
			i += (size_t)k;
			r->offset += (size_t)k;
			if (!eol)
				break;
			{
				uint64_t sz = 0;
				size_t d = 0;
				for (; d < r->line.len; d++) {
					int c = r->line.data[d], v;
					if (c >= '0' && c <= '9')
						v = c - '0';
					else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
						v = (c | 0x20) - 'a' + 10;
					else
						break;
					if (sz >> 60)
						return bad(err, r->offset - r->line.len,
							   "chunk size overflows");
					sz = sz << 4 | (uint64_t)v;
				}
				int c = d < r->line.len ? r->line.data[d] : 0;
				if (d == 0 ||
				    (c != ';' && c != '\r' && c != '\n' && c != ' ' && c != '\t'))
					return bad(err, r->offset - r->line.len,
						   "malformed chunk size");
				buf_reset(&r->line);
				if (sz > max_body - body->len)
					return kiln_error_set(err, EFBIG,
							      "body exceeds the limit of %zu bytes",
							      max_body);
				r->remaining = sz;
				r->state = sz ? ST_CHUNK_DATA : ST_TRAILER;
			}
			break;
		case ST_CHUNK_DATA:
			k = take_counted(r, p + i, left, body, max_body, ST_CHUNK_END, err);
			if (k < 0)
				rc = (int)k;
			else
				i += (size_t)k;
			break;
		case ST_CHUNK_END:
			k = take_line(r, p + i, left, 2, &eol);
			/* What is there must start "\r\n" or be "\n". */
			if (k < 0 || (r->line.data[0] != '\r' && r->line.data[0] != '\n') ||
			    (r->line.len == 2 &&
			     (r->line.data[0] != '\r' || r->line.data[1] != '\n')))
				return bad(err, r->offset, "missing CRLF after chunk data");
			i += (size_t)k;
			r->offset += (size_t)k;
			if (eol) {
				buf_reset(&r->line);
				r->state = ST_CHUNK_SIZE;
			}
			break;
		case ST_TRAILER:
			/* Trailer fields are read and ignored; the limit is per
			 * line (r->line is reset after each). */
			k = take_line(r, p + i, left, HTTP_HEAD_MAX, &eol);
			if (k < 0)
				return bad(err, r->offset, "trailer line too long");
			i += (size_t)k;
			r->offset += (size_t)k;
			if (!eol)
				break;
			if (line_empty(r))
				r->state = ST_DONE;
			buf_reset(&r->line);
			break;
		}
	}
	*used = i;
	if (rc < 0)
		return rc;
	return r->state == ST_DONE ? 1 : 0;
}

int http_response_eof(struct http_response *r, const struct buf *body, struct kiln_error *err)
{
	switch (r->state) {
	case ST_DONE:
		return 1;
	case ST_BODY_CLOSE:
		r->state = ST_DONE;
		return 1;
	case ST_HEAD:
		if (r->offset == 0)
			return kiln_error_set(err, EPIPE,
					      "connection closed before any response byte");
		return kiln_error_set(err, EPIPE,
				      "bad HTTP response: connection closed in the headers at "
				      "byte %zu",
				      r->offset);
	case ST_BODY_LEN:
		return kiln_error_set(
		    err, EPIPE, "connection closed after %zu of %llu body bytes (Content-Length)",
		    body->len, (unsigned long long)r->length);
	default:
		return kiln_error_set(err, EPIPE,
				      "connection closed in a chunked body after %zu bytes "
				      "(at byte %zu)",
				      body->len, r->offset);
	}
}
