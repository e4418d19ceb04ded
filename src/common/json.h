/*
 * json.h — writing JSON into a struct buf.
 *
 * Two layers. The appenders (json_append_*) write one value each: strings
 * quoted and escaped (control characters as \uXXXX, invalid UTF-8 replaced
 * by U+FFFD so that the output is always valid JSON), integers without
 * printf, doubles in the shortest form that reads back exactly (non-finite
 * values become null, which JSON can express).
 *
 * The writer (struct json_writer) adds structure: it remembers, per nesting
 * level, whether a comma is due, so callers write keys and values in order
 * and never count commas. Errors are sticky: after an allocation failure
 * every call does nothing and json_writer_error returns -ENOMEM, so a caller
 * checks once at the end. The writer does not own the buffer.
 *
 *	struct json_writer w;
 *	json_writer_init(&w, &out);
 *	json_begin_object(&w);
 *	json_key(&w, "names");
 *	json_begin_array(&w);
 *	json_string(&w, "comm");
 *	json_end_array(&w);
 *	json_end_object(&w);
 *	rc = json_writer_error(&w);	-> {"names":["comm"]}
 */
#ifndef KILN_COMMON_JSON_H
#define KILN_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* ---- appenders: 0 or -ENOMEM -------------------------------------------- */

/* "s", escaped. NULL is written as "". */
int json_append_string(struct buf *b, const char *s);
int json_append_string_n(struct buf *b, const char *s, size_t n);
int json_append_int(struct buf *b, int64_t v);
int json_append_uint(struct buf *b, uint64_t v);
int json_append_double(struct buf *b, double v);
int json_append_bool(struct buf *b, bool v);

/* Writes the decimal digits of v to dst (room for 21 bytes) and returns
 * their count; no NUL. For hot loops that format into reserved space. */
size_t json_format_int(char *dst, int64_t v);

/* ---- writer ------------------------------------------------------------- */

#define JSON_MAX_DEPTH 64

struct json_writer {
	struct buf *out;
	int err;		    /* first failure (negative errno), sticky */
	int depth;		    /* open containers */
	bool first[JSON_MAX_DEPTH]; /* no comma before the next element */
	bool after_key;		    /* a key was written; its value follows */
};

void json_writer_init(struct json_writer *w, struct buf *out);
/* 0, or the first failure: -ENOMEM, or -EINVAL for unbalanced or too deep
 * nesting. */
int json_writer_error(const struct json_writer *w);

void json_begin_object(struct json_writer *w);
void json_end_object(struct json_writer *w);
void json_begin_array(struct json_writer *w);
void json_end_array(struct json_writer *w);
/* An object key; the next value call writes its value. */
void json_key(struct json_writer *w, const char *key);
void json_string(struct json_writer *w, const char *s);
void json_string_n(struct json_writer *w, const char *s, size_t n);
void json_int(struct json_writer *w, int64_t v);
void json_uint(struct json_writer *w, uint64_t v);
void json_double(struct json_writer *w, double v);
void json_bool(struct json_writer *w, bool v);
void json_null(struct json_writer *w);
/* Already-serialized JSON (a value), e.g. from another writer. */
void json_raw(struct json_writer *w, const char *json, size_t n);

#endif
