/*
 * internal.h — the JFR reader's structures, shared by reader.c (chunks,
 * metadata, constant pools, values) and convert.c (events into pprof).
 */
#ifndef KILN_JFR_INTERNAL_H
#define KILN_JFR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/error.h"
#include "common/htab.h"
#include "jfr/jfr.h"

#define JFR_HEADER_BYTES 68
#define JFR_MAX_FIELDS	 64 /* per class; more is refused */
#define JFR_MAX_DEPTH	 16 /* nesting of values and of the metadata tree */

/* How a class's values are encoded: a primitive, or its fields. */
enum jfr_prim {
	JFR_COMPOUND = 0,
	JFR_BOOLEAN,
	JFR_BYTE,
	JFR_CHAR,
	JFR_SHORT,
	JFR_INT,
	JFR_LONG,
	JFR_FLOAT,
	JFR_DOUBLE,
	JFR_STRING,
};

struct jfr_field {
	const char *name;
	int64_t type_id;
	bool cp;    /* the value is a constant-pool key */
	bool array; /* dimension 1: a count, then the elements */
};

struct jfr_class {
	int64_t id;
	const char *name;
	enum jfr_prim prim;
	struct jfr_field *fields;
	size_t n_fields;
};

/* One chunk being read: its bytes, header and types. */
struct jfr_chunk {
	const uint8_t *p; /* the chunk, header included */
	size_t len;
	size_t offset; /* of the chunk in the recording, for messages */
	bool compressed;
	int64_t start_nanos, duration_nanos, start_ticks, ticks_per_second;
	struct arena *arena;	   /* metadata strings, classes, decoded strings */
	struct jfr_class *classes; /* sorted by id */
	size_t n_classes;
	struct htab *pool; /* (class id, key) -> offset of the entry's value */
	int64_t string_class;
	struct kiln_error *err;
};

/* A field's value as read: integers (and constant-pool keys) in i, the
 * byte offset where it starts in pos (strings, nested objects, arrays). */
struct jfr_value {
	int64_t i;
	size_t pos;
};

int jfr_chunk_open(struct jfr_chunk *c, const uint8_t *data, size_t len, size_t offset,
		   struct kiln_error *err);
void jfr_chunk_close(struct jfr_chunk *c);
const struct jfr_class *jfr_class_by_id(const struct jfr_chunk *c, int64_t id);
const struct jfr_class *jfr_class_by_name(const struct jfr_chunk *c, const char *name);
/* Index of field name in cls, or -1. */
int jfr_field_index(const struct jfr_class *cls, const char *name);
/* Reads an object of cls at *pos into vals[cls->n_fields] and moves *pos
 * past it. */
int jfr_read_object(struct jfr_chunk *c, const struct jfr_class *cls, size_t *pos,
		    struct jfr_value *vals);
/* The constant-pool entry (class id, key): its class and where it starts. */
int jfr_pool_get(struct jfr_chunk *c, int64_t class_id, int64_t key, size_t *pos);
/* Reads a string value at *pos (any encoding, constant-pool references
 * followed); *s is NUL-terminated, in the chunk's arena or "" . */
int jfr_read_string(struct jfr_chunk *c, size_t *pos, const char **s);
int jfr_read_int(struct jfr_chunk *c, size_t *pos, int64_t *out);
/* Calls fn for every event of the chunk other than metadata and
 * checkpoints, with its class and the offset of its first field. */
typedef int (*jfr_event_fn)(void *ctx, struct jfr_chunk *c, const struct jfr_class *cls,
			    size_t pos);
int jfr_chunk_events(struct jfr_chunk *c, jfr_event_fn fn, void *ctx);

#endif
