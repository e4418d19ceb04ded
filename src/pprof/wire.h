/*
 * wire.h — protobuf wire-format reading for the pprof decoder (internal).
 *
 * A reader is a [p, end) window. Every function checks bounds and returns
 * false on malformed input (truncated varint or field, varint longer than 10
 * bytes, unsupported wire type), so a caller can never read past end.
 */
#ifndef KILN_PPROF_WIRE_H
#define KILN_PPROF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/varint.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

struct wire {
	const uint8_t *p, *end;
};

static inline bool wire_varint(struct wire *w, uint64_t *out)
{
	return varint_decode(&w->p, w->end, out);
}

/* Reads a field key; false at a malformed key. */
static inline bool wire_key(struct wire *w, uint32_t *field, uint32_t *type)
{
	uint64_t k;

	if (!wire_varint(w, &k) || (k >> 3) == 0 || (k >> 3) > 0x1fffffff)
		return false;
	*field = (uint32_t)(k >> 3);
	*type = (uint32_t)(k & 7);
	return true;
}

/* Reads a length-delimited payload into sub. */
static inline bool wire_bytes(struct wire *w, struct wire *sub)
{
	uint64_t n;

	if (!wire_varint(w, &n) || n > (uint64_t)(w->end - w->p))
		return false;
	sub->p = w->p;
	sub->end = w->p + n;
	w->p += n;
	return true;
}

/* Skips a field of this wire type (groups are not supported: pprof has none). */
static inline bool wire_skip(struct wire *w, uint32_t type)
{
	struct wire sub;
	uint64_t v;

	switch (type) {
	case WIRE_VARINT:
		return wire_varint(w, &v);
	case WIRE_I64:
		if (w->end - w->p < 8)
			return false;
		w->p += 8;
		return true;
	case WIRE_LEN:
		return wire_bytes(w, &sub);
	case WIRE_I32:
		if (w->end - w->p < 4)
			return false;
		w->p += 4;
		return true;
	default:
		return false;
	}
}

/* Number of varints in a packed payload (bytes without the continuation
 * bit); the parse that follows checks that they are well-formed. */
static inline size_t wire_count_varints(const struct wire *w)
{
	const uint8_t *p = w->p;
	size_t n = 0;

	/* Eight bytes at a time: the clear top bits, each moved to the low
	 * bit of its byte, are summed into the top byte by the multiply (at
	 * most 8: no carry). A popcount is a libgcc call without -mpopcnt. */
	for (; w->end - p >= 8; p += 8) {
		uint64_t x;

		memcpy(&x, p, 8);
		n += (size_t)((((~x & 0x8080808080808080ull) >> 7) * 0x0101010101010101ull) >> 56);
	}
	for (; p < w->end; p++)
		n += *p < 0x80;
	return n;
}

/* Decodes every varint of a packed payload into out, which has room for
 * wire_count_varints(w) values (each varint ends in exactly one byte with a
 * clear top bit, so the count bounds what is decoded). Returns the number
 * decoded, or -1 on a malformed varint. */
static inline long wire_packed_varints(struct wire w, uint64_t *out)
{
	const uint8_t *p = w.p, *end = w.end;
	uint64_t *o = out;

	while (p < end) {
		if (p[0] < 0x80) {
			*o++ = p[0];
			p += 1;
		} else if (end - p >= 2 && p[1] < 0x80) {
			*o++ = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
			p += 2;
		} else if (end - p >= 3 && p[2] < 0x80) {
			*o++ = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 |
			       (uint64_t)p[2] << 14;
			p += 3;
		} else {
			struct wire rest = {p, end};

			if (!wire_varint(&rest, o++))
				return -1;
			p = rest.p;
		}
	}
	return (long)(o - out);
}

#endif
