/*
 * convert.c — OTLP profiles to pprof profiles and series labels (otlp.h).
 *
 * The dictionary is checked once (check_dictionary); each profile is then
 * built with its own pprof builder, so that a rejected profile leaves
 * nothing behind. Dictionary rows are turned into builder ids on first use
 * per profile (the id caches in struct conv), as a profile uses a small part
 * of a large dictionary.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbwire.h"
#include "common/utf8.h"
#include "otlp/internal.h"

#define FRAME_TYPE_KEY "profile.frame.type"

/* --- nesting and NUL bytes, on the wire ------------------------------------
 *
 * AnyValue nests (arrays and maps of AnyValues), and protobuf-c unpacks it
 * by recursion without a limit: a 4 MB request of nested arrays would
 * overflow the stack. The attribute values are walked on the wire first
 * and more than OTLP_MAX_NESTING levels are refused, as are NUL bytes in
 * the strings that become labels or names. Malformed wire data is left to
 * the decoder.
 */
#define OTLP_MAX_NESTING 32

/* The message kinds on the way to an AnyValue. */
enum wire_kind {
	W_REQUEST,
	W_RESOURCE_PROFILES,
	W_RESOURCE,
	W_SCOPE_PROFILES,
	W_SCOPE,
	W_DICTIONARY,
	W_KEY_VALUE_AND_UNIT,
	W_KEY_VALUE,
	W_ANY_VALUE,
	W_ARRAY_OR_KVLIST_OF_ANY,
	W_KVLIST,
	W_NONE,
};

/* The kind of field number n inside a message of kind k (W_NONE: not on
 * the way to an AnyValue). */
static enum wire_kind wire_child(enum wire_kind k, uint32_t n)
{
	switch (k) {
	case W_REQUEST:
		return n == 1 ? W_RESOURCE_PROFILES : n == 2 ? W_DICTIONARY : W_NONE;
	case W_RESOURCE_PROFILES:
		return n == 1 ? W_RESOURCE : n == 2 ? W_SCOPE_PROFILES : W_NONE;
	case W_RESOURCE:
		return n == 1 ? W_KEY_VALUE : W_NONE;
	case W_SCOPE_PROFILES:
		return n == 1 ? W_SCOPE : W_NONE;
	case W_SCOPE:
		return n == 3 ? W_KEY_VALUE : W_NONE;
	case W_DICTIONARY:
		return n == 6 ? W_KEY_VALUE_AND_UNIT : W_NONE;
	case W_KEY_VALUE_AND_UNIT:
	case W_KEY_VALUE:
		return n == 2 ? W_ANY_VALUE : W_NONE;
	case W_ANY_VALUE:
		return n == 5 ? W_ARRAY_OR_KVLIST_OF_ANY : n == 6 ? W_KVLIST : W_NONE;
	case W_ARRAY_OR_KVLIST_OF_ANY:
		return n == 1 ? W_ANY_VALUE : W_NONE;
	case W_KVLIST:
		return n == 1 ? W_KEY_VALUE : W_NONE;
	default:
		return W_NONE;
	}
}

static int check_nesting(const uint8_t *p, size_t len, enum wire_kind k, int depth,
			 struct kiln_error *err)
{
	const uint8_t *end = p + len;
	struct pbwire_field f;

	if (depth > OTLP_MAX_NESTING)
		return kiln_error_set(
		    err, EINVAL,
		    "ExportProfilesServiceRequest: attribute values nest more than "
		    "%d levels deep",
		    OTLP_MAX_NESTING);
	size_t n_strings = 0;

	while (pbwire_next(&p, end, &f)) {
		enum wire_kind c = f.has_bytes ? wire_child(k, f.number) : W_NONE;
		const char *what = !f.has_bytes				? NULL
				   : k == W_DICTIONARY && f.number == 5 ? "dictionary.string_table"
				   : k == W_KEY_VALUE && f.number == 1	? "an attribute key"
				   : k == W_ANY_VALUE && f.number == 1	? "an attribute value"
				   : k == W_SCOPE && f.number == 1	? "a scope name"
									: NULL;
		/* protobuf-c hands strings over NUL-terminated: "a\0b" would
		 * silently become "a" (and two labels one). */
		if (what && memchr(f.p, 0, f.len)) {
			if (k == W_DICTIONARY)
				return kiln_error_set(
				    err, EINVAL,
				    "dictionary.string_table[%zu] holds a NUL byte "
				    "(strings must not contain NUL)",
				    n_strings);
			return kiln_error_set(err, EINVAL,
					      "ExportProfilesServiceRequest: %s holds a NUL byte "
					      "(strings must not contain NUL)",
					      what);
		}
		if (k == W_DICTIONARY && f.number == 5)
			n_strings++;
		if (c == W_NONE)
			continue;
		int rc = check_nesting(f.p, f.len, c, depth + (c == W_ANY_VALUE), err);
		if (rc)
			return rc;
	}
	return 0;
}

int otlp_request_unpack(const uint8_t *data, size_t len, struct arena *a, otlp_request **out,
			struct kiln_error *err)
{
	ProtobufCAllocator alloc;
	int rc;

	*out = NULL;
	rc = check_nesting(data, len, W_REQUEST, 0, err);
	if (rc)
		return rc;
	arena_protobuf_allocator(a, &alloc);
	*out =
	    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		&alloc, len, data);
	if (!*out)
		return kiln_error_set(err, EINVAL,
				      "ExportProfilesServiceRequest: not a valid protobuf message "
				      "(%zu bytes): truncated or corrupt",
				      len);
	return 0;
}

/* --- the dictionary -------------------------------------------------------- */

static const char *table_string(const struct dict_view *v, int32_t i)
{
	/* Row 0 is "" by definition, even when a sender leaves the table empty. */
	if (i <= 0 || (size_t)i >= v->n_string)
		return "";
	return v->d->string_table[i];
}

/* 0 if index i is a row of a table with n rows; else -EINVAL naming what
 * holds the index (where, field) and the table. zero_ok: index 0 means
 * "unset" (strings, mappings, links) and is valid even in an empty table. */
static int check_index(int64_t i, size_t n, bool zero_ok, const char *table, struct kiln_error *err,
		       const char *where_fmt, ...) __attribute__((format(printf, 6, 7)));

static int check_index(int64_t i, size_t n, bool zero_ok, const char *table, struct kiln_error *err,
		       const char *where_fmt, ...)
{
	char where[256];
	va_list ap;

	if ((i == 0 && zero_ok) || (i >= 0 && (uint64_t)i < n))
		return 0;
	va_start(ap, where_fmt);
	vsnprintf(where, sizeof(where), where_fmt, ap);
	va_end(ap);
	return kiln_error_set(err, EINVAL, "%s %" PRId64 " is out of range (%s has %zu rows)",
			      where, i, table, n);
}

#define CHECK_STR(i, ...) check_index((i), v->n_string, true, "string_table", err, __VA_ARGS__)
#define CHECK_ATTR(i, ...)                                                                         \
	check_index((i), v->n_attribute, false, "attribute_table", err, __VA_ARGS__)

static int check_attrs(const struct dict_view *v, const int32_t *idx, size_t n, const char *what,
		       size_t row, struct kiln_error *err)
{
	for (size_t k = 0; k < n; k++)
		if (CHECK_ATTR(idx[k], "dictionary.%s[%zu].attribute_indices[%zu]", what, row, k))
			return -EINVAL;
	return 0;
}

/* Every index held by a dictionary row, bounds-checked. */
int otlp_check_dictionary(const struct dict_view *v, struct kiln_error *err)
{
	const otlp_dict *d = v->d;

	if (!d)
		return 0;
	for (size_t i = 0; i < v->n_mapping; i++) {
		const otlp_mapping *m = d->mapping_table[i];
		if (CHECK_STR(m->filename_strindex,
			      "dictionary.mapping_table[%zu].filename_strindex", i) ||
		    check_attrs(v, m->attribute_indices, m->n_attribute_indices, "mapping_table", i,
				err))
			return -EINVAL;
	}
	for (size_t i = 0; i < v->n_function; i++) {
		const otlp_function *f = d->function_table[i];
		if (CHECK_STR(f->name_strindex, "dictionary.function_table[%zu].name_strindex",
			      i) ||
		    CHECK_STR(f->system_name_strindex,
			      "dictionary.function_table[%zu].system_name_strindex", i) ||
		    CHECK_STR(f->filename_strindex,
			      "dictionary.function_table[%zu].filename_strindex", i))
			return -EINVAL;
	}
	for (size_t i = 0; i < v->n_location; i++) {
		const otlp_location *l = d->location_table[i];
		if (check_index(l->mapping_index, v->n_mapping, true, "mapping_table", err,
				"dictionary.location_table[%zu].mapping_index", i) ||
		    check_attrs(v, l->attribute_indices, l->n_attribute_indices, "location_table",
				i, err))
			return -EINVAL;
		for (size_t k = 0; k < l->n_lines; k++)
			if (check_index(l->lines[k]->function_index, v->n_function, false,
					"function_table", err,
					"dictionary.location_table[%zu].lines[%zu].function_index",
					i, k))
				return -EINVAL;
	}
	for (size_t i = 0; i < v->n_attribute; i++) {
		const otlp_attribute *at = d->attribute_table[i];
		if (CHECK_STR(at->key_strindex, "dictionary.attribute_table[%zu].key_strindex",
			      i) ||
		    CHECK_STR(at->unit_strindex, "dictionary.attribute_table[%zu].unit_strindex",
			      i))
			return -EINVAL;
	}
	for (size_t i = 0; i < v->n_stack; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Stack *s = d->stack_table[i];
		for (size_t k = 0; k < s->n_location_indices; k++)
			if (check_index(s->location_indices[k], v->n_location, false,
					"location_table", err,
					"dictionary.stack_table[%zu].location_indices[%zu]", i, k))
				return -EINVAL;
	}
	return 0;
}

/* --- attribute values ------------------------------------------------------ */

static char *hex_string(struct arena *a, const uint8_t *data, size_t len)
{
	char *s = arena_alloc(a, len * 2 + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < len; i++)
		snprintf(s + 2 * i, 3, "%02x", data[i]);
	s[len * 2] = 0;
	return s;
}

/* An attribute value as label text, in a; "" for none, arrays and maps
 * (they have no single text), NULL on out-of-memory. */
static const char *any_value_text(const otlp_any_value *v, struct arena *a)
{
	char tmp[64];

	if (!v)
		return "";
	switch (v->value_case) {
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
		return v->string_value ? v->string_value : "";
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
		return v->bool_value ? "true" : "false";
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
		snprintf(tmp, sizeof(tmp), "%" PRId64, v->int_value);
		return arena_strdup(a, tmp);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
		snprintf(tmp, sizeof(tmp), "%.17g", v->double_value);
		return arena_strdup(a, tmp);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
		return hex_string(a, v->bytes_value.data, v->bytes_value.len);
	default:
		return "";
	}
}

/* Prometheus label name for an attribute key: every character outside
 * [a-zA-Z0-9_] becomes '_', a leading digit gets a '_' before it. NULL for
 * a key that cannot be one ("", or "__" reserved after sanitizing). */
static char *label_name(const char *key, struct arena *a, bool *oom)
{
	size_t n = strlen(key);
	char *s;

	*oom = false;
	if (n == 0)
		return NULL;
	s = arena_alloc(a, n + 2);
	if (!s) {
		*oom = true;
		return NULL;
	}
	size_t o = 0;
	if (key[0] >= '0' && key[0] <= '9')
		s[o++] = '_';
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_';
		s[o++] = ok ? c : '_';
	}
	s[o] = 0;
	if (strncmp(s, "__", 2) == 0)
		return NULL;
	return s;
}

/* --- one profile ----------------------------------------------------------- */

static const char *attr_key(const struct conv *c, int32_t ai)
{
	return table_string(c->v, c->v->d->attribute_table[ai]->key_strindex);
}

/* The value of the attribute key among attrs (dictionary indices), or NULL. */
static const otlp_any_value *find_attr(const struct conv *c, const int32_t *attrs, size_t n,
				       const char *key)
{
	for (size_t k = 0; k < n; k++)
		if (strcmp(attr_key(c, attrs[k]), key) == 0)
			return c->v->d->attribute_table[attrs[k]]->value;
	return NULL;
}

static int add_series_label(struct conv *c, const char *key, const otlp_any_value *val,
			    struct kiln_error *err)
{
	bool oom;
	char *name = label_name(key, c->a, &oom);
	const char *text;

	if (oom)
		return kiln_error_set(err, ENOMEM, "out of memory");
	if (!name)
		return 0; /* no usable name: not a label (documented) */
	text = any_value_text(val, c->a);
	if (!text)
		return kiln_error_set(err, ENOMEM, "out of memory");
	if (!*text)
		return 0; /* an empty value is an absent label, as in Prometheus */
	if (!utf8_valid_str(text))
		return kiln_error_set(err, EINVAL, "attribute %.100s: value is not valid UTF-8",
				      key);
	for (size_t i = 1; i < c->n_labels; i++)
		if (strcmp(c->labels[i].name, name) == 0) {
			c->labels[i].value = text; /* the narrower scope wins */
			return 0;
		}
	if (c->n_labels > c->max_labels)
		return kiln_error_set(err, EINVAL,
				      "more than %zu labels besides __name__ (attribute %.100s)",
				      c->max_labels, key);
	c->labels[c->n_labels].name = name;
	c->labels[c->n_labels].value = text;
	c->n_labels++;
	return 0;
}

static int add_key_values(struct conv *c, otlp_key_value *const *kv, size_t n,
			  struct kiln_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = add_series_label(c, kv[i]->key ? kv[i]->key : "", kv[i]->value, err);
		if (rc)
			return rc;
	}
	return 0;
}

static uint64_t function_id(struct conv *c, int32_t fi)
{
	if (c->function_ids[fi])
		return c->function_ids[fi];
	const otlp_function *f = c->v->d->function_table[fi];
	c->function_ids[fi] = pprof_builder_function(
	    c->b, table_string(c->v, f->name_strindex), table_string(c->v, f->system_name_strindex),
	    table_string(c->v, f->filename_strindex), f->start_line);
	return c->function_ids[fi];
}

static const char *build_id_of(const struct conv *c, const otlp_mapping *m)
{
	static const char *const keys[] = {"process.executable.build_id.gnu",
					   "process.executable.build_id.go",
					   "process.executable.build_id.htlhash"};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const otlp_any_value *v =
		    find_attr(c, m->attribute_indices, m->n_attribute_indices, keys[k]);
		if (v &&
		    v->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
		    v->string_value[0])
			return v->string_value;
	}
	return NULL;
}

static uint64_t mapping_id(struct conv *c, int32_t mi, bool has_functions)
{
	if (c->mapping_ids[mi])
		return c->mapping_ids[mi];
	const otlp_mapping *m = c->v->d->mapping_table[mi];
	struct pprof_mapping_desc md = {.memory_start = m->memory_start,
					.memory_limit = m->memory_limit,
					.file_offset = m->file_offset,
					.filename = table_string(c->v, m->filename_strindex),
					.build_id = build_id_of(c, m),
					.has_functions = has_functions};
	c->mapping_ids[mi] = pprof_builder_mapping(c->b, &md);
	return c->mapping_ids[mi];
}

/* The "[TYPE]" mapping that marks unmapped frames of a frame type. */
static uint64_t frame_type_mapping(struct conv *c, const char *type)
{
	char name[80];

	for (size_t i = 0; i < c->n_frame_maps; i++)
		if (strcmp(c->frame_maps[i].type, type) == 0)
			return c->frame_maps[i].id;
	snprintf(name, sizeof(name), "[%.64s]", type);
	struct pprof_mapping_desc md = {.filename = name, .has_functions = true};
	uint64_t id = pprof_builder_mapping(c->b, &md);
	if (id && c->n_frame_maps < sizeof(c->frame_maps) / sizeof(c->frame_maps[0])) {
		c->frame_maps[c->n_frame_maps].type = type;
		c->frame_maps[c->n_frame_maps].id = id;
		c->n_frame_maps++;
	}
	return id;
}

/* Builder id of location row li; 0 on out-of-memory. */
uint64_t otlp_location_id(struct conv *c, int32_t li)
{
	struct pprof_line_desc lines_small[8], *lines = lines_small;
	uint64_t map = 0, id = 0;

	if (c->location_ids[li])
		return c->location_ids[li];
	const otlp_location *l = c->v->d->location_table[li];
	if (l->n_lines > 8) {
		lines = arena_calloc(c->a, l->n_lines, sizeof(*lines));
		if (!lines)
			return 0;
	}
	for (size_t k = 0; k < l->n_lines; k++) {
		lines[k].function_id = function_id(c, l->lines[k]->function_index);
		if (!lines[k].function_id)
			return 0;
		lines[k].line = l->lines[k]->line;
		lines[k].column = l->lines[k]->column;
	}
	if (l->mapping_index > 0) {
		map = mapping_id(c, l->mapping_index, l->n_lines > 0);
	} else {
		const otlp_any_value *ft =
		    find_attr(c, l->attribute_indices, l->n_attribute_indices, FRAME_TYPE_KEY);
		if (ft &&
		    ft->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
		    ft->string_value[0] && strcmp(ft->string_value, "native") != 0)
			map = frame_type_mapping(c, ft->string_value);
	}
	if (l->mapping_index > 0 && !map)
		return 0;
	id = pprof_builder_location(c->b, map, l->address, lines, l->n_lines);
	c->location_ids[li] = id;
	return id;
}

/* A sample's attributes and link as pprof labels (otlp_sample_check has
 * checked their indices and values). */
static int sample_labels(struct conv *c, const otlp_sample *s, struct pprof_label_desc **out,
			 size_t *n_out, struct kiln_error *err)
{
	const struct dict_view *v = c->v;
	size_t n = 0;
	struct pprof_label_desc *l = NULL;

	l = arena_calloc(c->a, s->n_attribute_indices + 2, sizeof(*l));
	if (!l)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t k = 0; k < s->n_attribute_indices; k++) {
		const otlp_attribute *at = v->d->attribute_table[s->attribute_indices[k]];
		const char *key = table_string(v, at->key_strindex);

		if (!*key)
			continue;
		if (at->value && at->value->value_case ==
				     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE) {
			const char *unit = table_string(v, at->unit_strindex);

			l[n++] = (struct pprof_label_desc){.key = key,
							   .num = at->value->int_value,
							   .num_unit = *unit ? unit : NULL};
			continue;
		}
		const char *text = any_value_text(at->value, c->a);
		if (!text)
			return kiln_error_set(err, ENOMEM, "out of memory");
		l[n++] = (struct pprof_label_desc){.key = key, .str = text};
	}
	if (s->link_index > 0) {
		const Opentelemetry__Proto__Profiles__V1development__Link *lk =
		    v->d->link_table[s->link_index];

		if (lk->trace_id.len) {
			l[n].key = "trace_id";
			l[n].str = hex_string(c->a, lk->trace_id.data, lk->trace_id.len);
			if (!l[n++].str)
				return kiln_error_set(err, ENOMEM, "out of memory");
		}
		if (lk->span_id.len) {
			l[n].key = "span_id";
			l[n].str = hex_string(c->a, lk->span_id.data, lk->span_id.len);
			if (!l[n++].str)
				return kiln_error_set(err, ENOMEM, "out of memory");
		}
	}
	*out = l;
	*n_out = n;
	return 0;
}

int otlp_sample_check(const struct conv *c, const otlp_sample *s, const char *where, int64_t *value,
		      struct kiln_error *err)
{
	const struct dict_view *v = c->v;
	int64_t sum = 0;

	if (check_index(s->stack_index, v->n_stack, false, "stack_table", err, "%s.stack_index",
			where))
		return -EINVAL;
	if (s->n_values == 0 && s->n_timestamps_unix_nano == 0)
		return kiln_error_set(err, EINVAL, "%s: has neither values nor timestamps", where);
	if (s->n_values && s->n_timestamps_unix_nano && s->n_values != s->n_timestamps_unix_nano)
		return kiln_error_set(err, EINVAL,
				      "%s: %zu values but %zu timestamps (they must pair up)",
				      where, s->n_values, s->n_timestamps_unix_nano);
	for (size_t k = 0; k < s->n_values; k++) {
		if (__builtin_add_overflow(sum, s->values[k], &sum))
			return kiln_error_set(err, EINVAL, "%s: the sum of its values overflows",
					      where);
	}
	if (s->n_values == 0)
		sum = (int64_t)s->n_timestamps_unix_nano;
	if (check_index(s->link_index, v->n_link, true, "link_table", err, "%s.link_index", where))
		return -EINVAL;
	for (size_t k = 0; k < s->n_attribute_indices; k++) {
		if (CHECK_ATTR(s->attribute_indices[k], "%s.attribute_indices[%zu]", where, k))
			return -EINVAL;
		const otlp_attribute *at = v->d->attribute_table[s->attribute_indices[k]];
		const char *key = table_string(v, at->key_strindex);

		/* Only a string value can be bad text (the others are
		 * printed); its label is dropped with an empty key. */
		if (*key && at->value &&
		    at->value->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
		    at->value->string_value && !utf8_valid_str(at->value->string_value))
			return kiln_error_set(err, EINVAL,
					      "%s: attribute %.100s: value is not valid UTF-8",
					      where, key);
	}
	*value = sum;
	return 0;
}

static int add_sample(struct conv *c, const otlp_sample *s, const char *where,
		      struct kiln_error *err)
{
	const struct dict_view *v = c->v;
	struct pprof_label_desc *labels = NULL;
	size_t n_labels = 0;
	int64_t value = 0;
	uint64_t *locs;
	int rc;

	if ((rc = otlp_sample_check(c, s, where, &value, err)) ||
	    (rc = sample_labels(c, s, &labels, &n_labels, err)))
		return rc;
	const Opentelemetry__Proto__Profiles__V1development__Stack *st =
	    v->d->stack_table[s->stack_index];
	locs = arena_calloc(c->a, st->n_location_indices + 1, sizeof(*locs));
	if (!locs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t k = 0; k < st->n_location_indices; k++) {
		locs[k] = otlp_location_id(c, st->location_indices[k]);
		if (!locs[k])
			return kiln_error_set(err, ENOMEM, "out of memory");
	}
	rc = pprof_builder_add_sample(c->b, locs, st->n_location_indices, &value, labels, n_labels);
	if (rc)
		return kiln_error_set(err, -rc, "%s: cannot add the sample", where);
	return 0;
}

/* The metric name for the scope: its name sanitized to
 * [a-zA-Z_:][a-zA-Z0-9_:]*, "unknown" when it has none. */
static const char *series_name(const otlp_scope_profiles *sp, struct arena *a)
{
	const char *n = sp->scope && sp->scope->name ? sp->scope->name : "";
	char *s;

	if (!*n)
		return "unknown";
	s = arena_alloc(a, strlen(n) + 2);
	if (!s)
		return NULL;
	size_t o = 0;
	if (n[0] >= '0' && n[0] <= '9')
		s[o++] = '_';
	for (const char *p = n; *p; p++) {
		char ch = *p;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '_' || ch == ':';
		s[o++] = ok ? ch : '_';
	}
	s[o] = 0;
	return s;
}

int otlp_profile_header(struct conv *c, const otlp_resource_profiles *rp,
			const otlp_scope_profiles *sp, const otlp_profile_msg *p,
			struct otlp_header *h, struct kiln_error *err)
{
	const struct dict_view *v = c->v;
	const char *name;
	int rc;

	memset(h, 0, sizeof(*h));
	/* Labels: resource, then scope, then profile attributes. */
	c->labels = arena_calloc(c->a, c->max_labels + 2, sizeof(*c->labels));
	name = series_name(sp, c->a);
	if (!c->labels || !name)
		return kiln_error_set(err, ENOMEM, "out of memory");
	c->labels[0] = (struct label){"__name__", name};
	c->n_labels = 1;
	if (rp->resource &&
	    (rc = add_key_values(c, rp->resource->attributes, rp->resource->n_attributes, err)))
		return rc;
	if (sp->scope &&
	    (rc = add_key_values(c, sp->scope->attributes, sp->scope->n_attributes, err)))
		return rc;
	for (size_t k = 0; k < p->n_attribute_indices; k++) {
		if (CHECK_ATTR(p->attribute_indices[k], "attribute_indices[%zu]", k))
			return -EINVAL;
		const otlp_attribute *at = v->d->attribute_table[p->attribute_indices[k]];
		if ((rc = add_series_label(c, table_string(v, at->key_strindex), at->value, err)))
			return rc;
	}

	/* Type, period, time. */
	if (!p->sample_type)
		return kiln_error_set(err, EINVAL, "sample_type is missing");
	if (CHECK_STR(p->sample_type->type_strindex, "sample_type.type_strindex") ||
	    CHECK_STR(p->sample_type->unit_strindex, "sample_type.unit_strindex"))
		return -EINVAL;
	h->sample_type = table_string(v, p->sample_type->type_strindex);
	h->sample_unit = table_string(v, p->sample_type->unit_strindex);
	if (!*h->sample_type)
		return kiln_error_set(err, EINVAL, "sample_type has no type name");
	h->period_type = h->period_unit = "";
	if (p->period_type) {
		if (CHECK_STR(p->period_type->type_strindex, "period_type.type_strindex") ||
		    CHECK_STR(p->period_type->unit_strindex, "period_type.unit_strindex"))
			return -EINVAL;
		h->has_period = true;
		h->period_type = table_string(v, p->period_type->type_strindex);
		h->period_unit = table_string(v, p->period_type->unit_strindex);
		h->period = p->period;
	}
	if (p->time_unix_nano > (uint64_t)INT64_MAX || p->duration_nano > (uint64_t)INT64_MAX)
		return kiln_error_set(err, EINVAL, "time_unix_nano or duration_nano is past 2262");
	h->time_nanos = (int64_t)p->time_unix_nano;
	h->duration_nanos = (int64_t)p->duration_nano;
	h->timestamp_ms =
	    p->time_unix_nano ? (int64_t)(p->time_unix_nano / 1000000) : c->lim->now_ms;
	if (h->timestamp_ms < c->lim->min_time_ms ||
	    h->timestamp_ms - c->lim->now_ms > c->lim->max_future_skew_ms)
		return kiln_error_set(
		    err, EINVAL,
		    "time_unix_nano %" PRIu64 " is %s (accepted: %lld ms to "
		    "%lld s past the server's clock)",
		    p->time_unix_nano,
		    h->timestamp_ms < c->lim->min_time_ms ? "too old" : "too far in the future",
		    (long long)c->lim->min_time_ms, (long long)(c->lim->max_future_skew_ms / 1000));
	h->delta = strcmp(h->period_type, "cpu") == 0;
	return 0;
}

/* Converts one profile into out; -EINVAL (the profile is rejected) or
 * -ENOMEM. */
static int convert_profile(struct conv *c, const otlp_resource_profiles *rp,
			   const otlp_scope_profiles *sp, const otlp_profile_msg *p,
			   struct otlp_profile *out, struct kiln_error *err)
{
	struct otlp_header h;
	char where[64];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = otlp_profile_header(c, rp, sp, p, &h, err)))
		return rc;
	if (pprof_builder_add_sample_type(c->b, h.sample_type, h.sample_unit) ||
	    (h.has_period &&
	     pprof_builder_set_period(c->b, h.period_type, h.period_unit, h.period)))
		return kiln_error_set(err, ENOMEM, "out of memory");
	pprof_builder_set_time(c->b, h.time_nanos, h.duration_nanos);
	out->timestamp_ms = h.timestamp_ms;
	out->delta = h.delta;

	for (size_t k = 0; k < p->n_samples; k++) {
		snprintf(where, sizeof(where), "samples[%zu]", k);
		if ((rc = add_sample(c, p->samples[k], where, err)))
			return rc;
	}
	rc = pprof_builder_to_profile(c->b, &out->profile, err);
	if (rc)
		return rc;
	out->labels = c->labels;
	out->n_labels = c->n_labels;
	out->samples = p->n_samples;
	return 0;
}

void otlp_note_rejection(char *msg, size_t size, const char *where, const char *why)
{
	size_t used = strlen(msg);

	if (used + 8 >= size)
		return; /* full: the count still says how many */
	snprintf(msg + used, size - used, "%s%s: %s", used ? "; " : "", where, why);
}

void otlp_dict_view_init(struct dict_view *v, const otlp_request *req)
{
	static const otlp_dict empty_dict =
	    OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;

	memset(v, 0, sizeof(*v));
	v->d = req->dictionary ? req->dictionary : &empty_dict;
	v->n_string = v->d->n_string_table;
	v->n_function = v->d->n_function_table;
	v->n_location = v->d->n_location_table;
	v->n_mapping = v->d->n_mapping_table;
	v->n_link = v->d->n_link_table;
	v->n_attribute = v->d->n_attribute_table;
	v->n_stack = v->d->n_stack_table;
}

int otlp_convert(const otlp_request *req, const struct otlp_limits *lim, struct arena *a,
		 struct otlp_result *out, struct kiln_error *err)
{
	struct dict_view v;
	struct conv c = {.v = &v, .lim = lim, .a = a};
	size_t n_profiles = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	otlp_dict_view_init(&v, req);
	c.max_labels = lim->max_labels ? lim->max_labels : OTLP_MAX_LABELS;
	rc = otlp_check_dictionary(&v, err);
	if (rc)
		return rc;

	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++)
			n_profiles += req->resource_profiles[i]->scope_profiles[j]->n_profiles;
	out->profiles = calloc(n_profiles + 1, sizeof(*out->profiles));
	c.location_ids = calloc(v.n_location + 1, sizeof(uint64_t));
	c.function_ids = calloc(v.n_function + 1, sizeof(uint64_t));
	c.mapping_ids = calloc(v.n_mapping + 1, sizeof(uint64_t));
	c.b = pprof_builder_new_sized(256);
	if (!out->profiles || !c.location_ids || !c.function_ids || !c.mapping_ids || !c.b) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < req->n_resource_profiles; i++) {
		const otlp_resource_profiles *rp = req->resource_profiles[i];
		for (size_t j = 0; j < rp->n_scope_profiles; j++) {
			const otlp_scope_profiles *sp = rp->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++) {
				const otlp_profile_msg *p = sp->profiles[k];
				struct kiln_error perr = {0};
				char where[128];

				out->n_seen++;
				snprintf(where, sizeof(where),
					 "resource_profiles[%zu].scope_profiles[%zu].profiles[%zu]",
					 i, j, k);
				if ((rc = pprof_builder_reset(c.b, 256))) {
					rc = kiln_error_set(err, ENOMEM, "out of memory");
					goto out;
				}
				c.n_frame_maps = 0;
				memset(c.location_ids, 0, v.n_location * sizeof(uint64_t));
				memset(c.function_ids, 0, v.n_function * sizeof(uint64_t));
				memset(c.mapping_ids, 0, v.n_mapping * sizeof(uint64_t));
				struct otlp_profile *op = &out->profiles[out->n_profiles];
				rc = convert_profile(&c, rp, sp, p, op, &perr);
				if (rc == -ENOMEM) {
					pprof_profile_free(op->profile);
					op->profile = NULL;
					*err = perr;
					goto out;
				}
				if (rc) {
					pprof_profile_free(op->profile);
					op->profile = NULL;
					out->n_rejected++;
					out->samples_rejected += p->n_samples;
					otlp_note_rejection(out->error_message,
							    sizeof(out->error_message), where,
							    perr.msg);
					rc = 0;
					continue;
				}
				out->samples_accepted += op->samples;
				out->n_profiles++;
			}
		}
	}
out:
	pprof_builder_free(c.b);
	free(c.location_ids);
	free(c.function_ids);
	free(c.mapping_ids);
	if (rc)
		otlp_result_release(out);
	return rc;
}

void otlp_result_release(struct otlp_result *r)
{
	for (size_t i = 0; i < r->n_profiles; i++)
		pprof_profile_free(r->profiles[i].profile);
	free(r->profiles);
	r->profiles = NULL;
	r->n_profiles = 0;
}
