/*
 * pbjson.c — proto3 JSON for protobuf-c messages (pbjson.h): protobuf to
 * JSON, the helpers both directions share, and the methods' types
 * (pbjson_in.c reads JSON).
 *
 * The message is unpacked by protobuf-c and its struct walked through
 * the descriptor (field offsets, quantifiers, oneof cases), written with the
 * project's JSON writer. Map fields are protobuf-c's repeated *Entry
 * messages with a key and a value.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1alpha/reflection.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "parca/debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "parca/query/v1alpha1/query.pb-c.h"
#include "parca/scrape/v1alpha1/scrape.pb-c.h"
#include "server/pbjson.h"
#include "server/webrpc.h"

#define PBJSON_MAX_DEPTH 64

bool pbjson_is_wkt(const ProtobufCMessageDescriptor *d, const char *name)
{
	return strcmp(d->short_name, name) == 0 && d->package_name &&
	       strcmp(d->package_name, "google.protobuf") == 0;
}

bool pbjson_is_map_entry(const ProtobufCFieldDescriptor *f)
{
	if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
		return false;
	const ProtobufCMessageDescriptor *d = f->descriptor;
	size_t n = strlen(d->short_name);
	return n > 5 && strcmp(d->short_name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

/* lower_snake -> lowerCamel, as protoc derives json_name. */
void pbjson_field_name(const char *name, char *out, size_t cap)
{
	size_t o = 0;
	bool up = false;
	for (const char *p = name; *p && o + 1 < cap; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		out[o++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
		up = false;
	}
	out[o] = '\0';
}

/* ---- protobuf -> JSON --------------------------------------------------------------- */

static void write_message(struct json_writer *w, const ProtobufCMessage *m, int depth);

static void write_timestamp(struct json_writer *w, const ProtobufCMessage *m)
{
	const Google__Protobuf__Timestamp *t = (const void *)m;
	char out[64], frac[16] = "";
	struct tm tm;
	time_t secs = (time_t)t->seconds;
	if (!gmtime_r(&secs, &tm)) {
		json_string(w, "");
		return;
	}
	if (t->nanos > 0 && t->nanos < 1000000000) {
		if (t->nanos % 1000000 == 0)
			snprintf(frac, sizeof(frac), ".%03d", t->nanos / 1000000);
		else if (t->nanos % 1000 == 0)
			snprintf(frac, sizeof(frac), ".%06d", t->nanos / 1000);
		else
			snprintf(frac, sizeof(frac), ".%09d", t->nanos);
	}
	snprintf(out, sizeof(out), "%04d-%02d-%02dT%02d:%02d:%02d%sZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
	json_string(w, out);
}

static void write_duration(struct json_writer *w, const ProtobufCMessage *m)
{
	const Google__Protobuf__Duration *d = (const void *)m;
	char out[64];
	int64_t s = d->seconds;
	int32_t n = d->nanos;
	const char *sign = (s < 0 || n < 0) ? "-" : "";
	uint64_t as = (uint64_t)(s < 0 ? -s : s);
	int32_t an = n < 0 ? -n : n;
	if (an == 0)
		snprintf(out, sizeof(out), "%s%" PRIu64 "s", sign, as);
	else if (an % 1000000 == 0)
		snprintf(out, sizeof(out), "%s%" PRIu64 ".%03ds", sign, as, an / 1000000);
	else if (an % 1000 == 0)
		snprintf(out, sizeof(out), "%s%" PRIu64 ".%06ds", sign, as, an / 1000);
	else
		snprintf(out, sizeof(out), "%s%" PRIu64 ".%09ds", sign, as, an);
	json_string(w, out);
}

static void write_float(struct json_writer *w, double v)
{
	if (isnan(v))
		json_string(w, "NaN");
	else if (isinf(v))
		json_string(w, v > 0 ? "Infinity" : "-Infinity");
	else
		json_double(w, v);
}

/* One value of field f stored at p (an element, for repeated fields). */
static void write_value(struct json_writer *w, const ProtobufCFieldDescriptor *f, const void *p,
			int depth)
{
	char num[32];
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		json_int(w, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		json_uint(w, *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		snprintf(num, sizeof(num), "%" PRId64, *(const int64_t *)p);
		json_string(w, num);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		snprintf(num, sizeof(num), "%" PRIu64, *(const uint64_t *)p);
		json_string(w, num);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		write_float(w, *(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		write_float(w, *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		json_bool(w, *(const protobuf_c_boolean *)p);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		if (ev)
			json_string(w, ev->name);
		else
			json_int(w, v);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		json_string(w, s ? s : "");
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		struct buf enc = {0};
		if (webrpc_base64_encode(b->data, b->len, &enc) == 0)
			json_string_n(w, (const char *)enc.data, enc.len);
		else
			w->err = -ENOMEM;
		buf_free(&enc);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
		if (!m)
			json_null(w);
		else
			write_message(w, m, depth + 1);
		break;
	}
	}
}

/* Whether a field without presence (proto3) holds its default. */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return *(const uint32_t *)p == 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p == 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)p == 0 && !signbit(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p == 0 && !signbit(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return !*(const protobuf_c_boolean *)p;
	case PROTOBUF_C_TYPE_ENUM:
		return *(const int *)p == 0;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p == NULL;
	}
	return true;
}

static size_t elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static void write_map(struct json_writer *w, const ProtobufCFieldDescriptor *f, void *const *arr,
		      size_t n, int depth)
{
	const ProtobufCMessageDescriptor *ed = f->descriptor;
	json_begin_object(w);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = arr[i];
		const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
		struct buf key = {0};
		if (kf->type == PROTOBUF_C_TYPE_STRING) {
			const char *k = *(char *const *)(e + kf->offset);
			buf_append_str(&key, k ? k : "");
		} else {
			/* Integer and bool keys are quoted decimal/true/false. */
			struct json_writer kw;
			json_writer_init(&kw, &key);
			write_value(&kw, kf, e + kf->offset, depth);
			if (key.len && key.data[0] == '"') { /* 64-bit: already a string */
				memmove(key.data, key.data + 1, key.len - 2);
				key.len -= 2;
			}
		}
		buf_terminate(&key);
		json_key(w, key.data ? (const char *)key.data : "");
		buf_free(&key);
		write_value(w, vf, e + vf->offset, depth);
	}
	json_end_object(w);
}

static void write_message(struct json_writer *w, const ProtobufCMessage *m, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const uint8_t *base = (const uint8_t *)m;
	char name[128];

	if (depth > PBJSON_MAX_DEPTH) {
		w->err = -EINVAL;
		return;
	}
	if (pbjson_is_wkt(d, "Timestamp"))
		return write_timestamp(w, m);
	if (pbjson_is_wkt(d, "Duration"))
		return write_duration(w, m);
	json_begin_object(w);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = base + f->offset;
		pbjson_field_name(f->name, name, sizeof(name));
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			const uint8_t *arr = *(const uint8_t *const *)p;
			if (!n)
				continue;
			json_key(w, name);
			if (pbjson_is_map_entry(f)) {
				write_map(w, f, (void *const *)arr, n, depth);
				continue;
			}
			json_begin_array(w);
			for (size_t k = 0; k < n; k++)
				write_value(w, f, arr + k * elem_size(f->type), depth);
			json_end_array(w);
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
			   f->type != PROTOBUF_C_TYPE_MESSAGE &&
			   f->type != PROTOBUF_C_TYPE_STRING) {
			if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
				continue;
		} else if (is_default(f, p)) {
			continue;
		}
		json_key(w, name);
		write_value(w, f, p, depth);
	}
	json_end_object(w);
}

int pbjson_from_proto(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
		      struct buf *out, struct kiln_error *err)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
	if (!m)
		return kiln_error_set(err, EBADMSG, "the response is not a %s", d->name);
	struct json_writer w;
	json_writer_init(&w, out);
	write_message(&w, m, 0);
	protobuf_c_message_free_unpacked(m, NULL);
	int rc = json_writer_error(&w);
	if (rc)
		return kiln_error_set(err, -rc, "cannot write the response as JSON");
	return 0;
}

/* ---- the methods' types ----------------------------------------------------------------- */

#define Q(x) &parca__query__v1alpha1__##x##__descriptor
#define D(x) &parca__debuginfo__v1alpha1__##x##__descriptor

static const struct {
	const char *path;
	const ProtobufCMessageDescriptor *req, *resp;
} method_types[] = {
    {"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw",
     &parca__profilestore__v1alpha1__write_raw_request__descriptor,
     &parca__profilestore__v1alpha1__write_raw_response__descriptor},
    {"/parca.query.v1alpha1.QueryService/ProfileTypes", Q(profile_types_request),
     Q(profile_types_response)},
    {"/parca.query.v1alpha1.QueryService/Labels", Q(labels_request), Q(labels_response)},
    {"/parca.query.v1alpha1.QueryService/Values", Q(values_request), Q(values_response)},
    {"/parca.query.v1alpha1.QueryService/QueryRange", Q(query_range_request),
     Q(query_range_response)},
    {"/parca.query.v1alpha1.QueryService/Query", Q(query_request), Q(query_response)},
    {"/parca.query.v1alpha1.QueryService/Series", Q(series_request), Q(series_response)},
    {"/parca.query.v1alpha1.QueryService/ShareProfile", Q(share_profile_request),
     Q(share_profile_response)},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/ShouldInitiateUpload",
     D(should_initiate_upload_request), D(should_initiate_upload_response)},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/InitiateUpload", D(initiate_upload_request),
     D(initiate_upload_response)},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/Upload", D(upload_request), D(upload_response)},
    {"/parca.debuginfo.v1alpha1.DebuginfoService/MarkUploadFinished",
     D(mark_upload_finished_request), D(mark_upload_finished_response)},
    {"/parca.scrape.v1alpha1.ScrapeService/Targets",
     &parca__scrape__v1alpha1__targets_request__descriptor,
     &parca__scrape__v1alpha1__targets_response__descriptor},
    {"/grpc.health.v1.Health/Check", &grpc__health__v1__health_check_request__descriptor,
     &grpc__health__v1__health_check_response__descriptor},
    {"/grpc.health.v1.Health/Watch", &grpc__health__v1__health_check_request__descriptor,
     &grpc__health__v1__health_check_response__descriptor},
    {"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
     &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
     &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__descriptor},
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
     &grpc__reflection__v1alpha__server_reflection_request__descriptor,
     &grpc__reflection__v1alpha__server_reflection_response__descriptor},
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
     &grpc__reflection__v1alpha__server_reflection_request__descriptor,
     &grpc__reflection__v1alpha__server_reflection_response__descriptor},
};

int pbjson_method_types(const char *path, const ProtobufCMessageDescriptor **req,
			const ProtobufCMessageDescriptor **resp)
{
	for (size_t i = 0; i < sizeof(method_types) / sizeof(method_types[0]); i++) {
		if (strcmp(method_types[i].path, path) == 0) {
			*req = method_types[i].req;
			*resp = method_types[i].resp;
			return 0;
		}
	}
	return -ENOENT;
}
