/*
 * json.c — OTLP/JSON in and out (otlp.h).
 *
 * protobuf-c has no JSON support, so the request is walked with jansson and
 * written back as protobuf wire bytes, guided by the generated message
 * descriptors: one generic walker instead of a hand-written reader per
 * message, and the protobuf decoder (with its checks) stays the only way
 * into the conversion. Repeated scalars are written unpacked, which every
 * protobuf decoder accepts.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbwire.h"
#include "otlp/otlp.h"

/* The JSON path of the value being read, for error messages. */
struct json_path {
	char text[256];
	size_t len;
	int depth; /* messages open; bounded as the protobuf side is */
};

/* 64 objects hold at most 30 nested attribute values (an AnyValue level is
 * two objects, the first sits 4 deep), under convert.c's limit of 32: what
 * this reader accepts, the protobuf side accepts too. */
#define JSON_MAX_DEPTH 64

static size_t path_push(struct json_path *p, const char *fmt, const char *s, size_t idx)
{
	size_t old = p->len;
	int n = s ? snprintf(p->text + p->len, sizeof(p->text) - p->len, fmt, p->len ? "." : "", s)
		  : snprintf(p->text + p->len, sizeof(p->text) - p->len, fmt, idx);

	if (n > 0)
		p->len =
		    p->len + (size_t)n < sizeof(p->text) ? p->len + (size_t)n : sizeof(p->text) - 1;
	return old;
}

static void path_pop(struct json_path *p, size_t old)
{
	p->len = old;
	p->text[old] = 0;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	default:
		return "null";
	}
}

static int bad(struct kiln_error *err, const struct json_path *p, const char *want, const json_t *v)
{
	return kiln_error_set(err, EINVAL, "%s: expected %s, got %s", p->len ? p->text : "(top)",
			      want, json_kind(v));
}

/* --- wire output ----------------------------------------------------------- */

/* --- scalars --------------------------------------------------------------- */

/* A JSON integer or a string of one (proto3 JSON writes 64-bit integers as
 * strings). */
static bool read_integer(const json_t *v, bool is_signed, int64_t *s, uint64_t *u)
{
	if (json_is_integer(v)) {
		*s = json_integer_value(v);
		*u = (uint64_t)*s;
		return is_signed || *s >= 0;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d != floor(d) || !(fabs(d) < 9007199254740992.0))
			return false; /* integral and exact in a double only */
		*s = (int64_t)d;
		*u = (uint64_t)*s;
		return is_signed || d >= 0;
	}
	if (!json_is_string(v))
		return false;
	const char *t = json_string_value(v);
	char *end;
	if (!*t || (!is_signed && *t == '-'))
		return false;
	errno = 0;
	if (is_signed) {
		*s = strtoll(t, &end, 10);
		*u = (uint64_t)*s;
	} else {
		*u = strtoull(t, &end, 10);
		*s = (int64_t)*u;
	}
	return errno == 0 && *end == 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int base64_digit(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Decodes hex (OTLP's ids) or base64 (every other bytes field) into out;
 * false on a bad digit. */
static bool read_bytes(const char *t, bool hex, struct buf *out)
{
	size_t n = strlen(t);

	if (hex) {
		if (n % 2)
			return false;
		for (size_t i = 0; i < n; i += 2) {
			int hi = hex_digit(t[i]), lo = hex_digit(t[i + 1]);
			if (hi < 0 || lo < 0)
				return false;
			uint8_t b = (uint8_t)(hi << 4 | lo);
			if (buf_append(out, &b, 1))
				return false;
		}
		return true;
	}
	while (n && t[n - 1] == '=')
		n--;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int d = base64_digit(t[i]);
		if (d < 0)
			return false;
		acc = (acc << 6) | (uint32_t)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			uint8_t b = (uint8_t)(acc >> bits);
			if (buf_append(out, &b, 1))
				return false;
		}
	}
	return true;
}

static bool is_hex_id(const char *field)
{
	return strcmp(field, "trace_id") == 0 || strcmp(field, "span_id") == 0 ||
	       strcmp(field, "profile_id") == 0;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *obj, struct buf *out,
			  struct json_path *path, struct kiln_error *err);

/* One value of field f (an element when f is repeated). */
static int encode_value(const ProtobufCFieldDescriptor *f, const json_t *v, struct buf *out,
			struct json_path *path, struct kiln_error *err)
{
	int64_t s = 0;
	uint64_t u = 0;
	int rc = 0;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (!read_integer(v, true, &s, &u) || s < INT32_MIN || s > INT32_MAX)
			return bad(err, path, "a 32-bit integer", v);
		if (f->type == PROTOBUF_C_TYPE_SFIXED32)
			rc = pbwire_put_tag(out, f->id, 5) || pbwire_put_fixed(out, (uint32_t)s, 4);
		else if (f->type == PROTOBUF_C_TYPE_SINT32)
			rc = pbwire_put_tag(out, f->id, 0) ||
			     pbwire_put_varint(out, ((uint32_t)s << 1) ^ (uint32_t)(s >> 31));
		else
			rc = pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, (uint64_t)s);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!read_integer(v, false, &s, &u) || u > UINT32_MAX)
			return bad(err, path, "an unsigned 32-bit integer", v);
		rc = f->type == PROTOBUF_C_TYPE_FIXED32
			 ? pbwire_put_tag(out, f->id, 5) || pbwire_put_fixed(out, u, 4)
			 : pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		if (!read_integer(v, true, &s, &u))
			return bad(err, path, "a 64-bit integer (a number or a decimal string)", v);
		if (f->type == PROTOBUF_C_TYPE_SFIXED64)
			rc = pbwire_put_tag(out, f->id, 1) || pbwire_put_fixed(out, (uint64_t)s, 8);
		else if (f->type == PROTOBUF_C_TYPE_SINT64)
			rc = pbwire_put_tag(out, f->id, 0) ||
			     pbwire_put_varint(out, ((uint64_t)s << 1) ^ (uint64_t)(s >> 63));
		else
			rc = pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, (uint64_t)s);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!read_integer(v, false, &s, &u))
			return bad(err, path,
				   "an unsigned 64-bit integer (a number or a decimal string)", v);
		rc = f->type == PROTOBUF_C_TYPE_FIXED64
			 ? pbwire_put_tag(out, f->id, 1) || pbwire_put_fixed(out, u, 8)
			 : pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, u);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(v))
			return bad(err, path, "true or false", v);
		rc = pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, json_is_true(v));
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = f->descriptor;
		if (json_is_string(v)) {
			const ProtobufCEnumValue *ev =
			    protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
			if (!ev)
				return kiln_error_set(err, EINVAL, "%s: \"%.80s\" is not a %s",
						      path->text, json_string_value(v), ed->name);
			s = ev->value;
		} else if (!read_integer(v, true, &s, &u) || s < INT32_MIN || s > INT32_MAX) {
			return bad(err, path, "an enum name or number", v);
		}
		rc = pbwire_put_tag(out, f->id, 0) || pbwire_put_varint(out, (uint64_t)s);
		break;
	}
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
			return bad(err, path, "a number", v);
		if (f->type == PROTOBUF_C_TYPE_FLOAT) {
			float fl = (float)d;
			uint32_t bits;
			memcpy(&bits, &fl, 4);
			rc = pbwire_put_tag(out, f->id, 5) || pbwire_put_fixed(out, bits, 4);
		} else {
			uint64_t bits;
			memcpy(&bits, &d, 8);
			rc = pbwire_put_tag(out, f->id, 1) || pbwire_put_fixed(out, bits, 8);
		}
		break;
	}
	case PROTOBUF_C_TYPE_STRING:
		if (!json_is_string(v))
			return bad(err, path, "a string", v);
		rc = pbwire_put_bytes(out, f->id, json_string_value(v), json_string_length(v));
		break;
	case PROTOBUF_C_TYPE_BYTES: {
		struct buf raw = {0};
		bool hex = is_hex_id(f->name);
		if (!json_is_string(v))
			return bad(err, path, hex ? "a hex string" : "a base64 string", v);
		if (!read_bytes(json_string_value(v), hex, &raw)) {
			buf_free(&raw);
			return kiln_error_set(err, EINVAL, "%s: not %s", path->text,
					      hex ? "hex (OTLP/JSON writes ids in hex)" : "base64");
		}
		rc = pbwire_put_bytes(out, f->id, raw.data, raw.len);
		buf_free(&raw);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		struct buf sub = {0};
		path->depth++;
		rc = encode_message(f->descriptor, v, &sub, path, err);
		path->depth--;
		if (rc == 0 && pbwire_put_bytes(out, f->id, sub.data, sub.len))
			rc = -ENOMEM;
		buf_free(&sub);
		return rc;
	}
	default:
		return kiln_error_set(err, EINVAL, "%s: unsupported field type", path->text);
	}
	return rc ? kiln_error_set(err, ENOMEM, "out of memory") : 0;
}

/* Does JSON key k name field f: its proto name or its lowerCamelCase form? */
static bool key_names_field(const char *k, const char *name)
{
	if (strcmp(k, name) == 0)
		return true;
	for (const char *p = name;; p++, k++) {
		if (*p == '_' && p[1]) {
			p++;
			char up = (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
			if (*k != up)
				return false;
			continue;
		}
		if (*k != *p)
			return false;
		if (!*p)
			return true;
	}
}

static int encode_message(const ProtobufCMessageDescriptor *d, const json_t *obj, struct buf *out,
			  struct json_path *path, struct kiln_error *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return bad(err, path, "an object", obj);
	if (path->depth >= JSON_MAX_DEPTH)
		return kiln_error_set(err, EINVAL, "%s: nested more than %d objects deep",
				      path->text, JSON_MAX_DEPTH);
	json_object_foreach((json_t *)obj, key, v)
	{
		const ProtobufCFieldDescriptor *f = NULL;
		for (unsigned i = 0; i < d->n_fields && !f; i++)
			if (key_names_field(key, d->fields[i].name))
				f = &d->fields[i];
		if (!f || json_is_null(v))
			continue; /* OTLP/JSON: unknown fields are ignored */
		size_t mark = path_push(path, "%s%s", key, 0);
		int rc = 0;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t i;
			json_t *e;
			if (!json_is_array(v)) {
				rc = bad(err, path, "an array", v);
			} else {
				json_array_foreach(v, i, e)
				{
					size_t m2 = path_push(path, "[%zu]", NULL, i);
					rc = encode_value(f, e, out, path, err);
					path_pop(path, m2);
					if (rc)
						break;
				}
			}
		} else {
			rc = encode_value(f, v, out, path, err);
		}
		path_pop(path, mark);
		if (rc)
			return rc;
	}
	return 0;
}

int otlp_json_to_protobuf(const char *json, size_t len, struct buf *out, struct kiln_error *err)
{
	json_error_t jerr;
	struct json_path path = {0};
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	if (!root)
		return kiln_error_set(err, EINVAL, "JSON body: %s at line %d column %d (byte %d)",
				      jerr.text, jerr.line, jerr.column, jerr.position);
	rc = encode_message(
	    &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
	    root, out, &path, err);
	json_decref(root);
	return rc;
}

int otlp_response_json(int64_t rejected, const char *error_message, struct buf *out)
{
	json_t *root = json_object(), *ps = NULL;
	char num[32];
	char *text = NULL;
	int rc = -ENOMEM;

	if (!root)
		return -ENOMEM;
	if (rejected > 0 || (error_message && *error_message)) {
		ps = json_object();
		snprintf(num, sizeof(num), "%" PRId64, rejected);
		if (!ps || json_object_set_new(root, "partialSuccess", ps) ||
		    json_object_set_new(ps, "rejectedProfiles", json_string(num)) ||
		    json_object_set_new(ps, "errorMessage",
					json_string(error_message ? error_message : "")))
			goto out;
	}
	text = json_dumps(root, JSON_COMPACT);
	if (text && buf_append_str(out, text) == 0)
		rc = 0;
out:
	free(text);
	json_decref(root);
	return rc;
}
