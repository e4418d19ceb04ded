/*
 * json.c — JSON appenders and the comma-tracking writer (see json.h).
 *
 * String escaping copies runs of bytes that need no escape in one memcpy:
 * flame graph string tables hold hundreds of thousands of symbol names and
 * almost none of them contain anything to escape.
 */
#include "common/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0
 * if it is invalid (overlong, surrogate, beyond U+10FFFF, truncated). */
static size_t utf8_sequence_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;

	if (c < 0xc2 || c > 0xf4)
		return 0;
	len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (len == 2)
		return 2;
	if (len == 3) {
		cp = ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
		if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		return 3;
	}
	cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
	     ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
	if (cp < 0x10000 || cp > 0x10ffff)
		return 0;
	return 4;
}

int json_append_string_n(struct buf *b, const char *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;
	int rc;

	/* Worst case is 6 output bytes per input byte; reserving the likely
	 * size up front keeps the common case to one growth at most. */
	rc = buf_reserve(b, n + 2);
	if (rc)
		return rc;
	b->data[b->len++] = '"';
	while (i < n) {
		unsigned char c = s[i];
		char esc[6];
		size_t esc_len = 0, seq;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			run++;
			continue;
		}
		if (c >= 0x80) {
			seq = utf8_sequence_len(s + i, n - i);
			if (seq) {
				i += seq;
				run += seq;
				continue;
			}
		}
		/* flush the run of plain bytes before the escape */
		if (run && (rc = buf_append(b, s + i - run, run)))
			return rc;
		run = 0;
		switch (c) {
		case '"':
			memcpy(esc, "\\\"", 2);
			esc_len = 2;
			break;
		case '\\':
			memcpy(esc, "\\\\", 2);
			esc_len = 2;
			break;
		case '\n':
			memcpy(esc, "\\n", 2);
			esc_len = 2;
			break;
		case '\t':
			memcpy(esc, "\\t", 2);
			esc_len = 2;
			break;
		case '\r':
			memcpy(esc, "\\r", 2);
			esc_len = 2;
			break;
		default:
			if (c >= 0x80) {
				memcpy(esc, "\\ufffd", 6);
			} else {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
			}
			esc_len = 6;
		}
		if ((rc = buf_append(b, esc, esc_len)))
			return rc;
		i++;
	}
	if (run && (rc = buf_append(b, s + i - run, run)))
		return rc;
	return buf_append(b, "\"", 1);
}

int json_append_string(struct buf *b, const char *s)
{
	if (!s)
		s = "";
	return json_append_string_n(b, s, strlen(s));
}

size_t json_format_int(char *dst, int64_t v)
{
	char tmp[24];
	size_t n = 0, len = 0;
	uint64_t u;

	if (v < 0) {
		dst[len++] = '-';
		u = (uint64_t)0 - (uint64_t)v;
	} else {
		u = (uint64_t)v;
	}
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (n)
		dst[len++] = tmp[--n];
	return len;
}

int json_append_int(struct buf *b, int64_t v)
{
	char tmp[24];

	return buf_append(b, tmp, json_format_int(tmp, v));
}

int json_append_uint(struct buf *b, uint64_t v)
{
	char tmp[24];
	size_t n = sizeof(tmp);

	do {
		tmp[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return buf_append(b, tmp + n, sizeof(tmp) - n);
}

int json_append_double(struct buf *b, double v)
{
	char tmp[32];
	int n;

	if (!isfinite(v))
		return buf_append(b, "null", 4);
	/* Shortest of the two precisions that reads back to the same double. */
	n = snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		n = snprintf(tmp, sizeof(tmp), "%.17g", v);
	return buf_append(b, tmp, (size_t)n);
}

int json_append_bool(struct buf *b, bool v)
{
	return v ? buf_append(b, "true", 4) : buf_append(b, "false", 5);
}

/* ---- writer ------------------------------------------------------------- */

void json_writer_init(struct json_writer *w, struct buf *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->first[0] = true;
}

int json_writer_error(const struct json_writer *w)
{
	if (w->err)
		return w->err;
	return w->depth == 0 && !w->after_key ? 0 : -EINVAL;
}

static void note(struct json_writer *w, int rc)
{
	if (rc && !w->err)
		w->err = rc;
}

/* Writes the comma that separates this value from the previous one. */
static bool before_value(struct json_writer *w)
{
	if (w->err)
		return false;
	if (w->after_key) {
		w->after_key = false;
		return true;
	}
	if (!w->first[w->depth])
		note(w, buf_append(w->out, ",", 1));
	w->first[w->depth] = false;
	return !w->err;
}

static void open_container(struct json_writer *w, char c)
{
	if (!before_value(w))
		return;
	if (w->depth + 1 >= JSON_MAX_DEPTH) {
		w->err = -EINVAL;
		return;
	}
	note(w, buf_append(w->out, &c, 1));
	w->first[++w->depth] = true;
}

static void close_container(struct json_writer *w, char c)
{
	if (w->err)
		return;
	if (w->depth == 0 || w->after_key) {
		w->err = -EINVAL;
		return;
	}
	w->depth--;
	note(w, buf_append(w->out, &c, 1));
}

void json_begin_object(struct json_writer *w)
{
	open_container(w, '{');
}

void json_end_object(struct json_writer *w)
{
	close_container(w, '}');
}

void json_begin_array(struct json_writer *w)
{
	open_container(w, '[');
}

void json_end_array(struct json_writer *w)
{
	close_container(w, ']');
}

void json_key(struct json_writer *w, const char *key)
{
	if (!before_value(w))
		return;
	note(w, json_append_string(w->out, key));
	note(w, buf_append(w->out, ":", 1));
	w->after_key = true;
}

void json_string(struct json_writer *w, const char *s)
{
	if (before_value(w))
		note(w, json_append_string(w->out, s));
}

void json_string_n(struct json_writer *w, const char *s, size_t n)
{
	if (before_value(w))
		note(w, json_append_string_n(w->out, s, n));
}

void json_int(struct json_writer *w, int64_t v)
{
	if (before_value(w))
		note(w, json_append_int(w->out, v));
}

void json_uint(struct json_writer *w, uint64_t v)
{
	if (before_value(w))
		note(w, json_append_uint(w->out, v));
}

void json_double(struct json_writer *w, double v)
{
	if (before_value(w))
		note(w, json_append_double(w->out, v));
}

void json_bool(struct json_writer *w, bool v)
{
	if (before_value(w))
		note(w, json_append_bool(w->out, v));
}

void json_null(struct json_writer *w)
{
	if (before_value(w))
		note(w, buf_append(w->out, "null", 4));
}

void json_raw(struct json_writer *w, const char *json, size_t n)
{
	if (before_value(w))
		note(w, buf_append(w->out, json, n));
}
