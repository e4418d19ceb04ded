/*
 * reader.c — one JFR chunk: its header, its metadata (the types), an index
 * of its constant pools, and values of any declared type.
 *
 * Layout (JDK 11+, format 2.x): a 68-byte big-endian header (magic
 * "FLR\0", major, minor, chunk size, offsets of the last checkpoint and of
 * the metadata event, start nanos, duration, start ticks, ticks per
 * second, feature flags whose bit 0 says integers are LEB128 varints),
 * then events: size, type id, fields. Type 0 is the metadata event (a
 * string table and an element tree: "class" elements with "field"
 * children), type 1 a checkpoint (constant pools: per class, key -> value).
 * Checkpoints may follow the events that refer to them, so every
 * checkpoint of the chunk is indexed before any event is read.
 *
 * Strings have an encoding byte: 0 null, 1 empty, 2 a java.lang.String
 * constant-pool key, 3 UTF-8, 4 chars (each a varint), 5 Latin-1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "jfr/internal.h"

static int bad(struct jfr_chunk *c, size_t pos, const char *what)
{
	return kiln_error_set(c->err, EINVAL, "jfr: %s at byte %zu", what, c->offset + pos);
}

static int rd_u8(struct jfr_chunk *c, size_t *pos, uint8_t *v)
{
	if (*pos >= c->len)
		return bad(c, *pos, "truncated value");
	*v = c->p[(*pos)++];
	return 0;
}

static int rd_be(struct jfr_chunk *c, size_t *pos, size_t n, uint64_t *v)
{
	if (*pos > c->len || n > c->len - *pos)
		return bad(c, *pos, "truncated value");
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v << 8 | c->p[(*pos)++];
	return 0;
}

/* LEB128 as JFR writes it: seven bits a byte, the ninth byte whole. */
static int rd_varint(struct jfr_chunk *c, size_t *pos, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < 9; i++) {
		uint8_t b = 0;
		if (rd_u8(c, pos, &b))
			return -EINVAL;
		if (i == 8) {
			*v |= (uint64_t)b << 56;
			break;
		}
		*v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			break;
	}
	return 0;
}

static int rd_long(struct jfr_chunk *c, size_t *pos, int64_t *out)
{
	uint64_t v;
	int rc = c->compressed ? rd_varint(c, pos, &v) : rd_be(c, pos, 8, &v);
	*out = (int64_t)v;
	return rc;
}

int jfr_read_int(struct jfr_chunk *c, size_t *pos, int64_t *out)
{
	uint64_t v;
	int rc = c->compressed ? rd_varint(c, pos, &v) : rd_be(c, pos, 4, &v);
	*out = (int32_t)(uint32_t)v;
	return rc;
}

/* A count of things still to come, each at least one byte. */
static int rd_count(struct jfr_chunk *c, size_t *pos, size_t *n)
{
	int64_t v;
	if (jfr_read_int(c, pos, &v))
		return -EINVAL;
	if (v < 0 || (uint64_t)v > c->len - *pos)
		return bad(c, *pos, "count larger than the chunk");
	*n = (size_t)v;
	return 0;
}

static void put_utf8(char *out, size_t *n, uint32_t ch)
{
	if (ch < 0x80) {
		out[(*n)++] = (char)ch;
	} else if (ch < 0x800) {
		out[(*n)++] = (char)(0xc0 | ch >> 6);
		out[(*n)++] = (char)(0x80 | (ch & 0x3f));
	} else {
		out[(*n)++] = (char)(0xe0 | ch >> 12);
		out[(*n)++] = (char)(0x80 | ((ch >> 6) & 0x3f));
		out[(*n)++] = (char)(0x80 | (ch & 0x3f));
	}
}

/* Reads (s != NULL) or skips a string. */
static int string_at(struct jfr_chunk *c, size_t *pos, const char **s, int depth)
{
	uint8_t kind = 0;
	size_t n;

	if (s)
		*s = "";
	if (rd_u8(c, pos, &kind))
		return -EINVAL;
	switch (kind) {
	case 0:
	case 1:
		return 0;
	case 2: {
		int64_t key;
		size_t at;
		if (rd_long(c, pos, &key))
			return -EINVAL;
		if (!s)
			return 0;
		if (depth > 2)
			return bad(c, *pos, "string reference to a reference");
		if (jfr_pool_get(c, c->string_class, key, &at))
			return -EINVAL;
		return string_at(c, &at, s, depth + 1);
	}
	case 3:
	case 5:
		if (rd_count(c, pos, &n))
			return -EINVAL;
		if (s && !(*s = arena_strndup(c->arena, (const char *)c->p + *pos, n)))
			return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
		*pos += n;
		return 0;
	case 4: {
		char *out = NULL;
		size_t len = 0;
		if (rd_count(c, pos, &n))
			return -EINVAL;
		if (s && !(out = arena_alloc(c->arena, n * 3 + 1)))
			return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
		for (size_t i = 0; i < n; i++) {
			uint64_t ch;
			if (rd_varint(c, pos, &ch))
				return -EINVAL;
			if (out)
				put_utf8(out, &len, ch > 0xffff ? '?' : (uint32_t)ch);
		}
		if (out) {
			out[len] = '\0';
			*s = out;
		}
		return 0;
	}
	default:
		return bad(c, *pos - 1, "unknown string encoding");
	}
}

int jfr_read_string(struct jfr_chunk *c, size_t *pos, const char **s)
{
	return string_at(c, pos, s, 0);
}

const struct jfr_class *jfr_class_by_id(const struct jfr_chunk *c, int64_t id)
{
	size_t lo = 0, hi = c->n_classes;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->classes[mid].id == id)
			return &c->classes[mid];
		if (c->classes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct jfr_class *jfr_class_by_name(const struct jfr_chunk *c, const char *name)
{
	for (size_t i = 0; i < c->n_classes; i++)
		if (strcmp(c->classes[i].name, name) == 0)
			return &c->classes[i];
	return NULL;
}

int jfr_field_index(const struct jfr_class *cls, const char *name)
{
	for (size_t i = 0; cls && i < cls->n_fields; i++)
		if (strcmp(cls->fields[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* ---- values ---------------------------------------------------------------- */

static int skip_object(struct jfr_chunk *c, const struct jfr_class *cls, size_t *pos, int depth);

static int skip_element(struct jfr_chunk *c, const struct jfr_field *f, size_t *pos, int depth)
{
	int64_t key;
	if (f->cp)
		return rd_long(c, pos, &key);
	return skip_object(c, jfr_class_by_id(c, f->type_id), pos, depth + 1);
}

static int skip_value(struct jfr_chunk *c, const struct jfr_field *f, size_t *pos, int depth)
{
	size_t n;
	if (!f->array)
		return skip_element(c, f, pos, depth);
	if (rd_count(c, pos, &n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (skip_element(c, f, pos, depth))
			return -EINVAL;
	return 0;
}

/* Reads a primitive; integers into *v. */
static int prim_at(struct jfr_chunk *c, enum jfr_prim p, size_t *pos, int64_t *v)
{
	uint8_t b = 0;
	uint64_t u;
	*v = 0;
	switch (p) {
	case JFR_BOOLEAN:
	case JFR_BYTE:
		if (rd_u8(c, pos, &b))
			return -EINVAL;
		*v = p == JFR_BYTE ? (int8_t)b : b;
		return 0;
	case JFR_CHAR:
	case JFR_SHORT:
		if (c->compressed ? rd_varint(c, pos, &u) : rd_be(c, pos, 2, &u))
			return -EINVAL;
		*v = p == JFR_SHORT ? (int16_t)(uint16_t)u : (int64_t)(uint16_t)u;
		return 0;
	case JFR_INT:
		return jfr_read_int(c, pos, v);
	case JFR_LONG:
		return rd_long(c, pos, v);
	case JFR_FLOAT:
		return rd_be(c, pos, 4, &u);
	case JFR_DOUBLE:
		return rd_be(c, pos, 8, &u);
	case JFR_STRING:
		return string_at(c, pos, NULL, 0);
	default:
		return bad(c, *pos, "not a primitive");
	}
}

static int skip_object(struct jfr_chunk *c, const struct jfr_class *cls, size_t *pos, int depth)
{
	int64_t v;
	if (!cls)
		return bad(c, *pos, "value of an undeclared type");
	if (depth > JFR_MAX_DEPTH)
		return bad(c, *pos, "values nested too deep");
	if (cls->prim != JFR_COMPOUND)
		return prim_at(c, cls->prim, pos, &v);
	for (size_t i = 0; i < cls->n_fields; i++)
		if (skip_value(c, &cls->fields[i], pos, depth))
			return -EINVAL;
	return 0;
}

int jfr_read_object(struct jfr_chunk *c, const struct jfr_class *cls, size_t *pos,
		    struct jfr_value *vals)
{
	if (!cls || cls->prim != JFR_COMPOUND)
		return bad(c, *pos, "an object of a primitive or undeclared type");
	for (size_t i = 0; i < cls->n_fields; i++) {
		const struct jfr_field *f = &cls->fields[i];
		const struct jfr_class *t =
		    f->cp || f->array ? NULL : jfr_class_by_id(c, f->type_id);
		vals[i].pos = *pos;
		vals[i].i = 0;
		int rc;
		if (f->cp && !f->array)
			rc = rd_long(c, pos, &vals[i].i);
		else if (t && t->prim != JFR_COMPOUND)
			rc = prim_at(c, t->prim, pos, &vals[i].i);
		else
			rc = skip_value(c, f, pos, 0);
		if (rc)
			return -EINVAL;
	}
	return 0;
}

int jfr_pool_get(struct jfr_chunk *c, int64_t class_id, int64_t key, size_t *pos)
{
	int64_t k[2] = {class_id, key};
	uint64_t at;
	if (!htab_get(c->pool, k, sizeof(k), &at))
		return kiln_error_set(
		    c->err, EINVAL,
		    "jfr: constant %lld of type %lld is in no constant pool of the "
		    "chunk at byte %zu",
		    (long long)key, (long long)class_id, c->offset);
	*pos = (size_t)at;
	return 0;
}

/* ---- metadata ------------------------------------------------------------- */

struct meta {
	const char **strings;
	size_t n_strings;
	struct jfr_class *classes;
	size_t n_classes, cap_classes;
	struct jfr_field fields[JFR_MAX_FIELDS];
	size_t n_fields;
};

static int meta_string(struct jfr_chunk *c, struct meta *m, size_t *pos, const char **s)
{
	int64_t idx;
	if (jfr_read_int(c, pos, &idx))
		return -EINVAL;
	if (idx < 0 || (size_t)idx >= m->n_strings)
		return bad(c, *pos, "metadata string index out of range");
	*s = m->strings[idx];
	return 0;
}

static const char *attr(const char *const *keys, const char *const *vals, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], key) == 0)
			return vals[i];
	return NULL;
}

static enum jfr_prim prim_of(const char *name)
{
	static const char *const names[] = {
	    "",	   "boolean", "byte",  "char",	 "short",
	    "int", "long",    "float", "double", "java.lang.String"};
	for (size_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return (enum jfr_prim)i;
	return JFR_COMPOUND;
}

/* One element and its children. A "class" element collects its "field"
 * children into m->fields, then becomes a class. */
static int meta_element(struct jfr_chunk *c, struct meta *m, size_t *pos, int depth, bool in_class)
{
	const char *name, *keys[32], *vals[32];
	size_t n_attrs, n_children;

	if (depth > JFR_MAX_DEPTH)
		return bad(c, *pos, "metadata nested too deep");
	if (meta_string(c, m, pos, &name) || rd_count(c, pos, &n_attrs))
		return -EINVAL;
	if (n_attrs > 32)
		return bad(c, *pos, "more than 32 attributes on a metadata element");
	for (size_t i = 0; i < n_attrs; i++)
		if (meta_string(c, m, pos, &keys[i]) || meta_string(c, m, pos, &vals[i]))
			return -EINVAL;
	bool is_class = strcmp(name, "class") == 0 && !in_class;
	if (is_class)
		m->n_fields = 0;
	if (in_class && strcmp(name, "field") == 0) {
		const char *fname = attr(keys, vals, n_attrs, "name");
		const char *type = attr(keys, vals, n_attrs, "class");
		const char *cp = attr(keys, vals, n_attrs, "constantPool");
		const char *dim = attr(keys, vals, n_attrs, "dimension");
		if (!fname || !type)
			return bad(c, *pos, "a field without a name or class");
		if (m->n_fields == JFR_MAX_FIELDS)
			return bad(c, *pos, "a class with more than 64 fields");
		struct jfr_field *f = &m->fields[m->n_fields++];
		f->name = fname;
		f->type_id = strtoll(type, NULL, 10);
		f->cp = cp && strcmp(cp, "true") == 0;
		f->array = dim && strcmp(dim, "1") == 0;
	}
	if (rd_count(c, pos, &n_children))
		return -EINVAL;
	for (size_t i = 0; i < n_children; i++)
		if (meta_element(c, m, pos, depth + 1, in_class || is_class))
			return -EINVAL;
	if (!is_class)
		return 0;
	const char *cname = attr(keys, vals, n_attrs, "name");
	const char *id = attr(keys, vals, n_attrs, "id");
	if (!cname || !id)
		return bad(c, *pos, "a class without a name or id");
	if (GROW_ARRAY(m->classes, m->cap_classes, m->n_classes + 1, 256))
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	struct jfr_class *k = &m->classes[m->n_classes++];
	k->id = strtoll(id, NULL, 10);
	k->name = cname;
	k->prim = prim_of(cname);
	k->n_fields = m->n_fields;
	k->fields = arena_alloc(c->arena, (m->n_fields ? m->n_fields : 1) * sizeof(*k->fields));
	if (!k->fields)
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	memcpy(k->fields, m->fields, m->n_fields * sizeof(*k->fields));
	return 0;
}

static int cmp_class(const void *a, const void *b)
{
	int64_t x = ((const struct jfr_class *)a)->id, y = ((const struct jfr_class *)b)->id;
	return (x > y) - (x < y);
}

/* Reads an event header: its end and type; *pos moves to its fields. */
static int event_header(struct jfr_chunk *c, size_t *pos, size_t *end, int64_t *type)
{
	size_t start = *pos;
	int64_t size;
	if (jfr_read_int(c, pos, &size) || rd_long(c, pos, type))
		return -EINVAL;
	if (size < 2 || (uint64_t)size > c->len - start)
		return bad(c, start, "event size outside the chunk");
	*end = start + (size_t)size;
	if (*pos > *end)
		return bad(c, start, "event shorter than its header");
	return 0;
}

static int read_metadata(struct jfr_chunk *c, size_t pos)
{
	struct meta m = {0};
	size_t end, n;
	int64_t type, ignored;
	int rc = -EINVAL;

	if (event_header(c, &pos, &end, &type))
		return -EINVAL;
	if (type != 0)
		return bad(c, pos, "the metadata offset points at no metadata event");
	/* start time, duration, metadata id */
	if (rd_long(c, &pos, &ignored) || rd_long(c, &pos, &ignored) ||
	    rd_long(c, &pos, &ignored) || rd_count(c, &pos, &n))
		return -EINVAL;
	m.strings = calloc(n ? n : 1, sizeof(*m.strings));
	if (!m.strings)
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	for (m.n_strings = 0; m.n_strings < n; m.n_strings++)
		if (string_at(c, &pos, &m.strings[m.n_strings], 3))
			goto out;
	if (meta_element(c, &m, &pos, 0, false))
		goto out;
	if (pos > end) {
		bad(c, pos, "metadata longer than its event");
		goto out;
	}
	qsort(m.classes, m.n_classes, sizeof(*m.classes), cmp_class);
	c->classes = m.classes;
	c->n_classes = m.n_classes;
	m.classes = NULL;
	const struct jfr_class *s = jfr_class_by_name(c, "java.lang.String");
	c->string_class = s ? s->id : -1;
	rc = 0;
out:
	free(m.strings);
	free(m.classes);
	return rc;
}

/* Indexes one checkpoint event's constant pools. */
static int index_checkpoint(struct jfr_chunk *c, size_t pos, size_t end)
{
	int64_t ignored;
	size_t n_pools;

	/* start time, duration, delta to the previous checkpoint, type mask */
	if (rd_long(c, &pos, &ignored) || rd_long(c, &pos, &ignored) ||
	    rd_long(c, &pos, &ignored) || jfr_read_int(c, &pos, &ignored) ||
	    rd_count(c, &pos, &n_pools))
		return -EINVAL;
	for (size_t i = 0; i < n_pools; i++) {
		int64_t class_id;
		size_t n;
		if (rd_long(c, &pos, &class_id) || rd_count(c, &pos, &n))
			return -EINVAL;
		const struct jfr_class *cls = jfr_class_by_id(c, class_id);
		if (!cls)
			return bad(c, pos, "a constant pool of an undeclared type");
		for (size_t j = 0; j < n; j++) {
			int64_t k[2] = {class_id, 0};
			if (rd_long(c, &pos, &k[1]))
				return -EINVAL;
			if (htab_put(c->pool, k, sizeof(k), pos))
				return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
			if (skip_object(c, cls, &pos, 0))
				return -EINVAL;
		}
	}
	if (pos > end)
		return bad(c, pos, "constant pools longer than their event");
	return 0;
}

int jfr_chunk_open(struct jfr_chunk *c, const uint8_t *data, size_t len, size_t offset,
		   struct kiln_error *err)
{
	uint64_t v[7];
	size_t pos = 8;

	memset(c, 0, sizeof(*c));
	c->p = data;
	c->len = len;
	c->offset = offset;
	c->err = err;
	if (len < JFR_HEADER_BYTES || memcmp(data, "FLR", 4) != 0)
		return bad(c, 0, "no JFR chunk (magic \"FLR\\0\")");
	if (data[4] != 0 || data[5] != 2)
		return kiln_error_set(err, EINVAL,
				      "jfr: chunk at byte %zu has format %u.%u; Kiln reads 2.x "
				      "(JDK 11 and later)",
				      offset, data[4] << 8 | data[5], data[6] << 8 | data[7]);
	for (int i = 0; i < 7; i++)
		rd_be(c, &pos, 8, &v[i]);
	uint64_t features = (uint64_t)data[64] << 24 | data[65] << 16 | data[66] << 8 | data[67];
	if (v[0] != len)
		return bad(c, 8, "chunk size differs from its header");
	if (v[1] >= len || v[2] >= len || v[2] < JFR_HEADER_BYTES)
		return bad(c, 16, "constant pool or metadata offset outside the chunk");
	c->compressed = features & 1;
	c->start_nanos = (int64_t)v[3];
	c->duration_nanos = (int64_t)v[4];
	c->start_ticks = (int64_t)v[5];
	c->ticks_per_second = (int64_t)v[6];
	if (c->ticks_per_second <= 0)
		return bad(c, 56, "ticks per second is 0");
	c->arena = arena_new(0);
	c->pool = htab_new(1024);
	if (!c->arena || !c->pool)
		return kiln_error_set(err, ENOMEM, "jfr: out of memory");
	if (read_metadata(c, (size_t)v[2]))
		return -EINVAL;
	for (pos = JFR_HEADER_BYTES; pos < len;) {
		size_t fields = pos, end;
		int64_t type;
		if (event_header(c, &fields, &end, &type))
			return -EINVAL;
		if (type == 1 && index_checkpoint(c, fields, end))
			return -EINVAL;
		pos = end;
	}
	return 0;
}

void jfr_chunk_close(struct jfr_chunk *c)
{
	arena_free(c->arena);
	htab_free(c->pool);
	free(c->classes);
	memset(c, 0, sizeof(*c));
}

int jfr_chunk_events(struct jfr_chunk *c, jfr_event_fn fn, void *ctx)
{
	for (size_t pos = JFR_HEADER_BYTES; pos < c->len;) {
		size_t fields = pos, end;
		int64_t type;
		int rc;
		if (event_header(c, &fields, &end, &type))
			return -EINVAL;
		const struct jfr_class *cls = type > 1 ? jfr_class_by_id(c, type) : NULL;
		if (cls && cls->prim == JFR_COMPOUND && (rc = fn(ctx, c, cls, fields)))
			return rc;
		pos = end;
	}
	return 0;
}
