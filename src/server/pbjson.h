/*
 * pbjson.h — Protobuf's canonical JSON mapping (proto3) for any message
 * protobuf-c generated, driven by its descriptors: what Connect's
 * application/json bodies carry (webrpc.h).
 *
 * Out (protobuf bytes -> JSON): fields under their lowerCamelCase names,
 * fields at their default left out, 64-bit integers as strings, enums by
 * name (by number when the value has none), bytes in base64, non-finite
 * floats as "NaN"/"Infinity"/"-Infinity", google.protobuf.Timestamp as an
 * RFC 3339 UTC string and Duration as "1.5s". The same as what protobuf's
 * own JSON printers write with default options.
 *
 * In (JSON -> protobuf bytes): either field name (lowerCamelCase or as in
 * the .proto), 64-bit integers as numbers or strings, enums by name or
 * number, bytes in standard or URL-safe base64, null = default. An unknown
 * field, a value of the wrong kind or out of range is -EINVAL with the
 * JSON path ("merge.start: expected an RFC 3339 timestamp string").
 */
#ifndef KILN_SERVER_PBJSON_H
#define KILN_SERVER_PBJSON_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

/* Decodes msg (protobuf bytes of d) and appends its JSON to out. -EBADMSG
 * when msg is not a d, -ENOMEM. */
int pbjson_from_proto(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
		      struct buf *out, struct kiln_error *err);

/* Parses json as a d and appends its protobuf encoding to out. -EINVAL
 * (err says what and where), -ENOMEM. */
int pbjson_to_proto(const ProtobufCMessageDescriptor *d, const char *json, size_t len,
		    struct buf *out, struct kiln_error *err);

/* The request and response types of a method of server_grpc_methods[], or
 * -ENOENT. */
int pbjson_method_types(const char *path, const ProtobufCMessageDescriptor **req,
			const ProtobufCMessageDescriptor **resp);

/* Shared by pbjson.c and pbjson_in.c: whether d is google.protobuf.NAME;
 * whether f is a map (a repeated *Entry with key and value); the
 * lowerCamelCase JSON name of a .proto field name. */
bool pbjson_is_wkt(const ProtobufCMessageDescriptor *d, const char *name);
bool pbjson_is_map_entry(const ProtobufCFieldDescriptor *f);
void pbjson_field_name(const char *name, char *out, size_t cap);

#endif
