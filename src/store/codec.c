/*
 * codec.c — the byte-level pieces every store file uses: LEB128 varints
 * (zigzag for signed values), little-endian fixed integers, the record
 * checksum and append-only chunked arrays.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/varint.h"
#include "store/internal.h"

int put_uvarint(struct buf *b, uint64_t v)
{
	return varint_append(b, v);
}

int put_svarint(struct buf *b, int64_t v)
{
	return varint_append(b, zigzag_encode(v));
}

int put_u32le(struct buf *b, uint32_t v)
{
	uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};

	return buf_append(b, t, 4);
}

int put_u64le(struct buf *b, uint64_t v)
{
	int rc = put_u32le(b, (uint32_t)v);

	return rc ? rc : put_u32le(b, (uint32_t)(v >> 32));
}

uint32_t get_u32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t get_u64le(const uint8_t *p)
{
	return (uint64_t)get_u32le(p) | (uint64_t)get_u32le(p + 4) << 32;
}

uint64_t rd_uvarint(struct rd *r)
{
	uint64_t v;

	if (r->bad)
		return 0;
	if (varint_decode(&r->p, r->end, &v))
		return v;
	r->bad = true;
	return 0;
}

int64_t rd_svarint(struct rd *r)
{
	return zigzag_decode(rd_uvarint(r));
}

uint64_t rd_below(struct rd *r, uint64_t limit)
{
	uint64_t v = rd_uvarint(r);

	if (v >= limit) {
		r->bad = true;
		return 0;
	}
	return v;
}

const uint8_t *rd_bytes(struct rd *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return p;
}

uint32_t store_checksum(const void *p, size_t n)
{
	return (uint32_t)XXH3_64bits(p, n);
}

int record_append(struct buf *out, const void *payload, size_t len)
{
	int rc;

	if (len > RECORD_MAX)
		return -EFBIG;
	rc = buf_reserve(out, RECORD_HEADER + len);
	if (rc)
		return rc;
	put_u32le(out, (uint32_t)len);
	put_u32le(out, store_checksum(payload, len));
	return buf_append(out, payload, len);
}

int chunked_init(struct chunked *c, size_t elem)
{
	c->elem = elem;
	atomic_store(&c->count, 0);
	c->dir = calloc(DIR_LEN, sizeof(*c->dir));
	return c->dir ? 0 : -ENOMEM;
}

void chunked_free(struct chunked *c)
{
	if (!c->dir)
		return;
	for (size_t i = 0; i < DIR_LEN && c->dir[i]; i++) {
		for (size_t j = 0; j < DIR_LEN && c->dir[i][j]; j++)
			free(c->dir[i][j]);
		free(c->dir[i]);
	}
	free(c->dir);
	c->dir = NULL;
}

void *chunked_slot(struct chunked *c)
{
	size_t i = atomic_load_explicit(&c->count, memory_order_relaxed);
	size_t ch = i >> CHUNK_SHIFT, d = ch >> DIR_SHIFT;

	if (d >= DIR_LEN)
		return NULL;
	if (!c->dir[d]) {
		c->dir[d] = calloc(DIR_LEN, sizeof(**c->dir));
		if (!c->dir[d])
			return NULL;
	}
	if (!c->dir[d][ch & (DIR_LEN - 1)]) {
		c->dir[d][ch & (DIR_LEN - 1)] = calloc(CHUNK_LEN, c->elem);
		if (!c->dir[d][ch & (DIR_LEN - 1)])
			return NULL;
	}
	return chunked_at(c, i);
}

void chunked_publish(struct chunked *c)
{
	atomic_fetch_add_explicit(&c->count, 1, memory_order_release);
}
