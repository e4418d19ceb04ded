/*
 * varint.h — LEB128 varints, the one home of their encoding for every
 * format Kiln writes or reads with them (protobuf's wire format, the
 * store's WAL, blocks and metastore, the streaming ingest codec).
 *
 * A varint holds seven bits a byte, least significant group first, the
 * high bit set on every byte but the last; a uint64_t takes at most
 * VARINT_MAX (10) bytes. Decoding accepts at most ten bytes and drops the
 * bits a tenth byte carries past bit 63, as protobuf does. Signed values
 * are zigzag-mapped first (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...), so that a
 * small magnitude is a short varint whatever its sign.
 *
 * JFR's variant (its ninth byte whole) is not this format and stays in
 * src/jfr/reader.c; DWARF's LEB128 (with sign extension) stays in the
 * DWARF readers.
 */
#ifndef KILN_COMMON_VARINT_H
#define KILN_COMMON_VARINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define VARINT_MAX 10

/* Writes v at p (room for VARINT_MAX bytes); returns the bytes written. */
static inline size_t varint_encode(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Appends v to out; 0 or -ENOMEM. */
static inline int varint_append(struct buf *out, uint64_t v)
{
	uint8_t b[VARINT_MAX];

	return buf_append(out, b, varint_encode(b, v));
}

/* Reads a varint at *p into *v and advances *p past it; false (*p and *v
 * unspecified) when [*p, end) ends first or it runs past ten bytes. */
static inline bool varint_decode(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t x = 0;

	/* One- and two-byte varints (ids, small lengths, field keys) are
	 * the common case in every format that uses them. */
	if (q < end && *q < 0x80) {
		*v = *q;
		*p = q + 1;
		return true;
	}
	if (end - q >= 2 && q[1] < 0x80) {
		*v = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
		*p = q + 2;
		return true;
	}
	for (unsigned shift = 0; shift < 7 * VARINT_MAX; shift += 7) {
		if (q >= end)
			return false;
		x |= (uint64_t)(*q & 0x7f) << shift;
		if (*q++ < 0x80) {
			*v = x;
			*p = q;
			return true;
		}
	}
	return false;
}

static inline uint64_t zigzag_encode(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zigzag_decode(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
