/*
 * pbwire.h — reading protobuf's wire format field by field, for the few
 * places that look at a message without decoding it whole (the ingest
 * paths check a request's shape and bounds before protobuf-c allocates for
 * it). One home for the varint and field rules: varints of at most 10
 * bytes, wire types 0 (varint), 1 (64-bit), 2 (length-delimited, bounded
 * by the buffer) and 5 (32-bit); groups (3, 4) and anything else are bad
 * data.
 */
#ifndef KILN_COMMON_PBWIRE_H
#define KILN_COMMON_PBWIRE_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One field read off the wire: its number and, for a length-delimited
 * one, its bytes. */
struct pbwire_field {
	uint32_t number;
	bool has_bytes;
	const uint8_t *p;
	size_t len;
};

/* Reads a varint at *p (advanced); false when [*p, end) ends first or it
 * runs past 64 bits. */
bool pbwire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);

/* Reads the next field of [*p, end) (advanced past it); false at the end
 * or on bad data. */
bool pbwire_next(const uint8_t **p, const uint8_t *end, struct pbwire_field *f);

/* Writing, for the encoders that build messages by hand (the JSON readers,
 * the streaming ingest codec): each appends to out and returns 0 or
 * -ENOMEM. put_fixed writes the low n bytes of v, little-endian (n = 4 or
 * 8); put_bytes a length-delimited field. */
int pbwire_put_varint(struct buf *out, uint64_t v);
int pbwire_put_tag(struct buf *out, uint32_t field, int wire_type);
int pbwire_put_fixed(struct buf *out, uint64_t v, size_t n);
int pbwire_put_bytes(struct buf *out, uint32_t field, const void *data, size_t len);

#endif
