/*
 * pbjson_in.c — JSON to protobuf for protobuf-c messages (pbjson.h).
 *
 * The JSON is parsed by jansson and written as protobuf wire bytes field by
 * field, guided by the descriptors, so that the handler's own unpacking
 * (and its checks) stays the one way into a handler. Repeated scalars are
 * written unpacked, which every protobuf decoder accepts.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/varint.h"
#include "common/pbwire.h"
#include "google/protobuf/duration.pb-c.h"
#include "server/pbjson.h"
#include "server/webrpc.h"

#define PBJSON_MAX_DEPTH 64

struct jpath {
	char text[256];
	size_t len;
};

static size_t jpath_push(struct jpath *p, const char *key, long index)
{
	size_t old = p->len;
	int n = key ? snprintf(p->text + p->len, sizeof(p->text) - p->len, "%s%s",
			       p->len ? "." : "", key)
		    : snprintf(p->text + p->len, sizeof(p->text) - p->len, "[%ld]", index);
	if (n > 0)
		p->len =
		    p->len + (size_t)n < sizeof(p->text) ? p->len + (size_t)n : sizeof(p->text) - 1;
	return old;
}

static void jpath_pop(struct jpath *p, size_t old)
{
	p->len = old;
	p->text[old] = '\0';
}

static int bad(struct kiln_error *err, const struct jpath *p, const char *want)
{
	return kiln_error_set(err, EINVAL, "JSON body: %s: expected %s", p->len ? p->text : "(top)",
			      want);
}

/* An integer from a JSON number or a decimal string. */
static bool read_int(const json_t *v, bool is_signed, int64_t *s, uint64_t *u)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (!is_signed && i < 0)
			return false;
		*s = i;
		*u = (uint64_t)i;
		return true;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d != floor(d) || fabs(d) > 9007199254740992.0 || (!is_signed && d < 0))
			return false;
		*s = (int64_t)d;
		*u = (uint64_t)(is_signed ? (uint64_t)*s : (uint64_t)d);
		return true;
	}
	if (!json_is_string(v))
		return false;
	const char *t = json_string_value(v);
	char *end;
	errno = 0;
	if (is_signed) {
		*s = strtoll(t, &end, 10);
		*u = (uint64_t)*s;
	} else {
		if (*t == '-')
			return false;
		*u = strtoull(t, &end, 10);
		*s = (int64_t)*u;
	}
	return *t && !*end && errno == 0;
}

static bool read_b64(const char *t, struct buf *out)
{
	size_t n = strlen(t);
	char *std = malloc(n + 4);
	if (!std)
		return false;
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		std[o++] = t[i] == '-' ? '+' : t[i] == '_' ? '/' : t[i];
	while (o % 4)
		std[o++] = '=';
	struct kiln_error e = {0};
	bool ok = webrpc_base64_decode((const uint8_t *)std, o, out, &e) == 0;
	free(std);
	return ok;
}

/* RFC 3339: 2024-01-02T03:04:05[.fraction](Z|+hh:mm|-hh:mm). */
static bool parse_timestamp(const char *t, int64_t *secs, int32_t *nanos)
{
	struct tm tm = {0};
	int n = 0;
	if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
	    tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return false;
	const char *p = t + 19;
	int32_t ns = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				ns = ns * 10 + (*p - '0');
		if (digits == 0 || digits > 9)
			return false;
		for (; digits < 9; digits++)
			ns *= 10;
	}
	int64_t off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, k = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &k) != 2 || k != 5)
			return false;
		off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return false;
	}
	if (*p)
		return false;
	*secs = (int64_t)timegm(&tm) - off;
	*nanos = ns;
	return true;
}

/* "1.5s", "-0.001s". */
static bool parse_duration(const char *t, int64_t *secs, int32_t *nanos)
{
	bool neg = *t == '-';
	const char *p = t + neg;
	int64_t s = 0;
	int32_t ns = 0;
	int digits = 0;
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (s > 315576000000LL)
			return false;
		s = s * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				ns = ns * 10 + (*p - '0');
		if (digits == 0 || digits > 9)
			return false;
		for (; digits < 9; digits++)
			ns *= 10;
	}
	if (strcmp(p, "s") != 0)
		return false;
	*secs = neg ? -s : s;
	*nanos = neg ? -ns : ns;
	return true;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *obj, struct buf *out,
			  struct jpath *path, int depth, struct kiln_error *err);

static int encode_wkt(const ProtobufCMessageDescriptor *d, const json_t *v, struct buf *out,
		      const struct jpath *path, struct kiln_error *err)
{
	int64_t s;
	int32_t ns;
	bool ts = pbjson_is_wkt(d, "Timestamp");
	if (!json_is_string(v))
		return bad(err, path,
			   ts ? "an RFC 3339 timestamp string" : "a duration like \"1.5s\"");
	bool ok = ts ? parse_timestamp(json_string_value(v), &s, &ns)
		     : parse_duration(json_string_value(v), &s, &ns);
	if (!ok)
		return bad(err, path,
			   ts ? "an RFC 3339 timestamp string" : "a duration like \"1.5s\"");
	if ((s && (pbwire_put_tag(out, 1, 0) || pbwire_put_varint(out, (uint64_t)s))) ||
	    (ns && (pbwire_put_tag(out, 2, 0) || pbwire_put_varint(out, (uint64_t)(int64_t)ns))))
		return -ENOMEM;
	return 0;
}

static int encode_value(const ProtobufCFieldDescriptor *f, const json_t *v, struct buf *out,
			struct jpath *path, int depth, struct kiln_error *err)
{
	int64_t s = 0;
	uint64_t u = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!read_int(v, true, &s, &u) || s < INT32_MIN || s > INT32_MAX)
			return bad(err, path, "a 32-bit integer");
		if (f->type == PROTOBUF_C_TYPE_SFIXED32)
			return pbwire_put_tag(out, f->id, 5) ||
				       pbwire_put_fixed(out, (uint32_t)s, 4)
				   ? -ENOMEM
				   : 0;
		if (f->type == PROTOBUF_C_TYPE_SINT32)
			u = (uint32_t)((int32_t)s << 1) ^ (uint32_t)((int32_t)s >> 31);
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u) ? -ENOMEM : 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!read_int(v, false, &s, &u) || u > UINT32_MAX)
			return bad(err, path, "an unsigned 32-bit integer");
		if (f->type == PROTOBUF_C_TYPE_FIXED32)
			return pbwire_put_tag(out, f->id, 5) || pbwire_put_fixed(out, u, 4)
				   ? -ENOMEM
				   : 0;
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u) ? -ENOMEM : 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!read_int(v, true, &s, &u))
			return bad(err, path, "a 64-bit integer (number or string)");
		if (f->type == PROTOBUF_C_TYPE_SFIXED64)
			return pbwire_put_tag(out, f->id, 1) ||
				       pbwire_put_fixed(out, (uint64_t)s, 8)
				   ? -ENOMEM
				   : 0;
		if (f->type == PROTOBUF_C_TYPE_SINT64)
			u = zigzag_encode(s);
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u) ? -ENOMEM : 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!read_int(v, false, &s, &u))
			return bad(err, path, "an unsigned 64-bit integer (number or string)");
		if (f->type == PROTOBUF_C_TYPE_FIXED64)
			return pbwire_put_tag(out, f->id, 1) || pbwire_put_fixed(out, u, 8)
				   ? -ENOMEM
				   : 0;
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u) ? -ENOMEM : 0;
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE: {
		double d;
		if (json_is_number(v))
			d = json_number_value(v);
		else if (json_is_string(v) && strcmp(json_string_value(v), "NaN") == 0)
			d = NAN;
		else if (json_is_string(v) && strcmp(json_string_value(v), "Infinity") == 0)
			d = INFINITY;
		else if (json_is_string(v) && strcmp(json_string_value(v), "-Infinity") == 0)
			d = -INFINITY;
		else
			return bad(err, path, "a number");
		if (f->type == PROTOBUF_C_TYPE_FLOAT) {
			float fl = (float)d;
			uint32_t bits;
			memcpy(&bits, &fl, 4);
			return pbwire_put_tag(out, f->id, 5) || pbwire_put_fixed(out, bits, 4)
				   ? -ENOMEM
				   : 0;
		}
		uint64_t bits;
		memcpy(&bits, &d, 8);
		return pbwire_put_tag(out, f->id, 1) || pbwire_put_fixed(out, bits, 8) ? -ENOMEM
										       : 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return bad(err, path, "true or false");
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, json_is_true(v))
			   ? -ENOMEM
			   : 0;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		if (json_is_string(v)) {
			const ProtobufCEnumValue *ev =
			    protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
			if (!ev)
				return bad(err, path, "a value name of the enum");
			s = ev->value;
		} else if (!read_int(v, true, &s, &u) || s < INT32_MIN || s > INT32_MAX) {
			return bad(err, path, "an enum value name or number");
		}
		return pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, (uint64_t)s)
			   ? -ENOMEM
			   : 0;
	}
	case PROTOBUF_C_TYPE_STRING:
		if (!json_is_string(v))
			return bad(err, path, "a string");
		return pbwire_put_bytes(out, f->id, json_string_value(v), json_string_length(v));
	case PROTOBUF_C_TYPE_BYTES: {
		struct buf b = {0};
		if (!json_is_string(v) || !read_b64(json_string_value(v), &b)) {
			buf_free(&b);
			return bad(err, path, "a base64 string");
		}
		int rc = pbwire_put_bytes(out, f->id, b.data, b.len);
		buf_free(&b);
		return rc;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessageDescriptor *md = f->descriptor;
		struct buf sub = {0};
		int rc = pbjson_is_wkt(md, "Timestamp") || pbjson_is_wkt(md, "Duration")
			     ? encode_wkt(md, v, &sub, path, err)
			     : encode_message(md, v, &sub, path, depth + 1, err);
		if (rc == 0)
			rc = pbwire_put_bytes(out, f->id, sub.data, sub.len);
		buf_free(&sub);
		return rc;
	}
	}
	return bad(err, path, "a supported type");
}

static int encode_map(const ProtobufCFieldDescriptor *f, const json_t *obj, struct buf *out,
		      struct jpath *path, int depth, struct kiln_error *err)
{
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return bad(err, path, "an object (a map)");
	json_object_foreach((json_t *)obj, k, v)
	{
		struct buf entry = {0};
		size_t old = jpath_push(path, k, 0);
		json_t *key = ed->fields[0].type == PROTOBUF_C_TYPE_STRING ? json_string(k)
			      : ed->fields[0].type == PROTOBUF_C_TYPE_BOOL
				  ? json_boolean(strcmp(k, "true") == 0)
				  : json_string(k);
		int rc =
		    key ? encode_value(&ed->fields[0], key, &entry, path, depth, err) : -ENOMEM;
		json_decref(key);
		if (rc == 0 && !json_is_null(v))
			rc = encode_value(&ed->fields[1], v, &entry, path, depth, err);
		if (rc == 0)
			rc = pbwire_put_bytes(out, f->id, entry.data, entry.len);
		buf_free(&entry);
		jpath_pop(path, old);
		if (rc)
			return rc;
	}
	return 0;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
						  const char *key)
{
	char name[128];
	for (unsigned i = 0; i < d->n_fields; i++) {
		pbjson_field_name(d->fields[i].name, name, sizeof(name));
		if (strcmp(key, name) == 0 || strcmp(key, d->fields[i].name) == 0)
			return &d->fields[i];
	}
	return NULL;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *obj, struct buf *out,
			  struct jpath *path, int depth, struct kiln_error *err)
{
	const char *k;
	json_t *v;
	if (depth > PBJSON_MAX_DEPTH)
		return kiln_error_set(err, EINVAL, "JSON body: %s: nested more than %d deep",
				      path->text, PBJSON_MAX_DEPTH);
	if (!json_is_object(obj))
		return bad(err, path, "an object");
	json_object_foreach((json_t *)obj, k, v)
	{
		const ProtobufCFieldDescriptor *f = find_field(d, k);
		size_t old = jpath_push(path, k, 0);
		int rc = 0;
		if (!f)
			rc = kiln_error_set(err, EINVAL, "JSON body: %s: %s has no such field",
					    path->text, d->name);
		else if (json_is_null(v))
			rc = 0;
		else if (pbjson_is_map_entry(f))
			rc = encode_map(f, v, out, path, depth, err);
		else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			if (!json_is_array(v)) {
				rc = bad(err, path, "an array");
			} else {
				for (size_t i = 0; rc == 0 && i < json_array_size(v); i++) {
					size_t o2 = jpath_push(path, NULL, (long)i);
					rc = encode_value(f, json_array_get(v, i), out, path, depth,
							  err);
					jpath_pop(path, o2);
				}
			}
		} else {
			rc = encode_value(f, v, out, path, depth, err);
		}
		jpath_pop(path, old);
		if (rc)
			return rc == -ENOMEM ? kiln_error_set(err, ENOMEM, "out of memory") : rc;
	}
	return 0;
}

int pbjson_to_proto(const ProtobufCMessageDescriptor *d, const char *json, size_t len,
		    struct buf *out, struct kiln_error *err)
{
	json_error_t je;
	struct jpath path = {0};
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return kiln_error_set(err, EINVAL, "JSON body: %s at line %d column %d", je.text,
				      je.line, je.column);
	int rc = encode_message(d, root, out, &path, 0, err);
	json_decref(root);
	return rc;
}
