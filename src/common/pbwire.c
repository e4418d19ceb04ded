/*
 * pbwire.c — protobuf wire format, field by field (see pbwire.h).
 */
#include "common/pbwire.h"

bool pbwire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

bool pbwire_next(const uint8_t **p, const uint8_t *end, struct pbwire_field *f)
{
	uint64_t key, v;

	if (*p >= end || !pbwire_varint(p, end, &key))
		return false;
	f->number = (uint32_t)(key >> 3);
	f->has_bytes = false;
	switch (key & 7) {
	case 0:
		return pbwire_varint(p, end, &v);
	case 1:
		if (end - *p < 8)
			return false;
		*p += 8;
		return true;
	case 2:
		if (!pbwire_varint(p, end, &v) || v > (uint64_t)(end - *p))
			return false;
		f->has_bytes = true;
		f->p = *p;
		f->len = (size_t)v;
		*p += v;
		return true;
	case 5:
		if (end - *p < 4)
			return false;
		*p += 4;
		return true;
	default:
		return false;
	}
}
