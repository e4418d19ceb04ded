/*
 * pbwire.c — protobuf wire format, field by field (see pbwire.h).
 */
#include <errno.h>
#include "common/pbwire.h"
#include "common/varint.h"

bool pbwire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	return varint_decode(p, end, v);
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

int pbwire_put_varint(struct buf *out, uint64_t v)
{
	return varint_append(out, v);
}

int pbwire_put_tag(struct buf *out, uint32_t field, int wire_type)
{
	return pbwire_put_varint(out, (uint64_t)field << 3 | (uint64_t)wire_type);
}

int pbwire_put_fixed(struct buf *out, uint64_t v, size_t n)
{
	uint8_t b[8];

	for (size_t i = 0; i < n && i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return buf_append(out, b, n < 8 ? n : 8);
}

int pbwire_put_bytes(struct buf *out, uint32_t field, const void *data, size_t len)
{
	if (pbwire_put_tag(out, field, 2) || pbwire_put_varint(out, len) ||
	    buf_append(out, data, len))
		return -ENOMEM;
	return 0;
}
