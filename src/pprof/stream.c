/*
 * stream.c — writing a Profile message field by field (see "streamed
 * encoding" in pprof.h), for a merge that never builds the profile.
 *
 * The field numbers are profile.proto's: Profile.sample_type 1, sample 2,
 * mapping 3, location 4, function 5, string_table 6, time_nanos 9,
 * duration_nanos 10, period_type 11, period 12; Sample.location_id 1
 * (packed), value 2 (packed); Location.id 1, mapping_id 2, address 3, line
 * 4; Line.function_id 1, line 2, column 3; Function.id 1, name 2, system_name 3,
 * filename 4, start_line 5; Mapping.id 1, memory_start 2, memory_limit 3,
 * file_offset 4, filename 5, build_id 6, has_functions 7, has_filenames 8,
 * has_line_numbers 9, has_inline_frames 10; ValueType.type 1, unit 2.
 * Scalars equal to 0 are left out and fields come in number order, as
 * protobuf-c packs them, so that the bytes equal pprof_encode's.
 *
 * The message goes out through a 64 KiB staging buffer. Gzipped, it is
 * held whole up to 4 MiB and compressed in one call (the bytes
 * pprof_encode gives for the same message); past that it is streamed
 * through zlib, so that a merge of everything never holds both the message
 * and its compressed form.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/gzip.h"
#include "common/varint.h"
#include "pprof/pprof.h"

enum { LEN = 2 }; /* the length-delimited wire type */

/* A varint field, left out when 0 as proto3 (and protobuf-c) does. */
static size_t put_field(uint8_t *p, unsigned field, uint64_t v)
{
	if (!v)
		return 0;
	size_t n = varint_encode(p, (uint64_t)field << 3);
	return n + varint_encode(p + n, v);
}

/* Appends field (length-delimited) holding body to b. */
static int put_message(struct buf *b, unsigned field, const uint8_t *body, size_t len)
{
	if (buf_reserve(b, len + 20))
		return -ENOMEM;
	b->len += varint_encode(b->data + b->len, (uint64_t)field << 3 | LEN);
	b->len += varint_encode(b->data + b->len, len);
	memcpy(b->data + b->len, body, len);
	b->len += len;
	return 0;
}

/* ---- sections --------------------------------------------------------------- */

int pprof_put_string(struct buf *sec, const char *s, size_t len)
{
	if (buf_reserve(sec, len + 20))
		return -ENOMEM;
	sec->len += varint_encode(sec->data + sec->len, 6 << 3 | LEN);
	sec->len += varint_encode(sec->data + sec->len, len);
	if (len)
		memcpy(sec->data + sec->len, s, len);
	sec->len += len;
	return 0;
}

int pprof_put_mapping(struct buf *sec, uint64_t id, uint64_t memory_start, uint64_t memory_limit,
		      uint64_t file_offset, int64_t filename, int64_t build_id, unsigned flags)
{
	uint8_t b[128];
	size_t n = put_field(b, 1, id);

	n += put_field(b + n, 2, memory_start);
	n += put_field(b + n, 3, memory_limit);
	n += put_field(b + n, 4, file_offset);
	n += put_field(b + n, 5, (uint64_t)filename);
	n += put_field(b + n, 6, (uint64_t)build_id);
	for (unsigned f = 0; f < 4; f++)
		n += put_field(b + n, 7 + f, (flags >> f) & 1);
	return put_message(sec, 3, b, n);
}

int pprof_put_function(struct buf *sec, uint64_t id, int64_t name, int64_t system_name,
		       int64_t filename, int64_t start_line)
{
	uint8_t b[64];
	size_t n = put_field(b, 1, id);

	n += put_field(b + n, 2, (uint64_t)name);
	n += put_field(b + n, 3, (uint64_t)system_name);
	n += put_field(b + n, 4, (uint64_t)filename);
	n += put_field(b + n, 5, (uint64_t)start_line);
	return put_message(sec, 5, b, n);
}

int pprof_put_location(struct buf *sec, struct buf *scratch, uint64_t id, uint64_t mapping_id,
		       uint64_t address, const uint64_t *lines, size_t n_lines)
{
	struct buf *b = scratch;

	buf_reset(b);
	if (buf_reserve(b, 3 * (1 + VARINT_MAX) + n_lines * (2 + 4 * VARINT_MAX)))
		return -ENOMEM;
	b->len += put_field(b->data + b->len, 1, id);
	b->len += put_field(b->data + b->len, 2, mapping_id);
	b->len += put_field(b->data + b->len, 3, address);
	for (size_t i = 0; i < n_lines; i++) {
		uint8_t l[3 * (1 + VARINT_MAX)];
		size_t n = put_field(l, 1, lines[3 * i]);

		n += put_field(l + n, 2, lines[3 * i + 1]);
		n += put_field(l + n, 3, lines[3 * i + 2]);
		b->data[b->len++] = 4 << 3 | LEN;
		b->len += varint_encode(b->data + b->len, n);
		memcpy(b->data + b->len, l, n);
		b->len += n;
	}
	return put_message(sec, 4, b->data, b->len);
}

/* ---- the message: staged, then deflated or appended -------------------------- */

/* Up to this size a gzipped message is kept whole and compressed in one
 * call; past it, it is streamed through zlib. */
#define WHOLE_MAX (4u << 20)

struct pprof_stream {
	struct buf *out;
	bool gzip;
	struct gzip_stream *z; /* started when the message outgrew WHOLE_MAX */
	struct buf whole;      /* gzip, not streaming: the message so far */
	struct buf body;       /* scratch: one encoded sample */
	uint8_t stage[64 * 1024];
	size_t n;
};

struct pprof_stream *pprof_stream_new(struct buf *out, bool gzip)
{
	struct pprof_stream *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->out = out;
	k->gzip = gzip;
	return k;
}

void pprof_stream_free(struct pprof_stream *k)
{
	if (!k)
		return;
	gzip_stream_free(k->z);
	buf_free(&k->whole);
	buf_free(&k->body);
	free(k);
}

static int stream_emit(struct pprof_stream *k, const uint8_t *p, size_t n)
{
	if (!k->gzip)
		return buf_append(k->out, p, n);
	if (!k->z && k->whole.len + n <= WHOLE_MAX)
		return buf_append(&k->whole, p, n);
	if (!k->z) {
		k->z = gzip_stream_new(1);
		if (!k->z)
			return -ENOMEM;
		int rc = gzip_stream_write(k->z, k->whole.data, k->whole.len, k->out);
		buf_free(&k->whole);
		if (rc)
			return rc;
	}
	return gzip_stream_write(k->z, p, n, k->out);
}

static int stream_flush(struct pprof_stream *k)
{
	int rc = k->n ? stream_emit(k, k->stage, k->n) : 0;

	k->n = 0;
	return rc;
}

int pprof_stream_bytes(struct pprof_stream *k, const void *data, size_t n)
{
	if (!n)
		return 0; /* data may be NULL (an empty section) */
	if (k->n + n <= sizeof(k->stage)) {
		memcpy(k->stage + k->n, data, n);
		k->n += n;
		return 0;
	}
	int rc = stream_flush(k);
	if (rc)
		return rc;
	if (n <= sizeof(k->stage))
		return pprof_stream_bytes(k, data, n);
	return stream_emit(k, data, n);
}

static int stream_value_type(struct pprof_stream *k, unsigned field, int64_t type, int64_t unit)
{
	uint8_t b[32], h[8];
	size_t n = put_field(b, 1, (uint64_t)type);
	n += put_field(b + n, 2, (uint64_t)unit);
	size_t nh = varint_encode(h, (uint64_t)field << 3 | LEN);
	nh += varint_encode(h + nh, n);
	return pprof_stream_bytes(k, h, nh) || pprof_stream_bytes(k, b, n) ? -ENOMEM : 0;
}

int pprof_stream_sample_type(struct pprof_stream *k, int64_t type, int64_t unit)
{
	return stream_value_type(k, 1, type, unit);
}

int pprof_stream_sample(struct pprof_stream *k, const uint64_t *ids, size_t n, int64_t value)
{
	struct buf *b = &k->body;
	size_t ids_len = 0;
	uint8_t tmp[VARINT_MAX];

	for (size_t i = 0; i < n; i++)
		ids_len += varint_encode(tmp, ids[i]);
	buf_reset(b);
	if (buf_reserve(b, ids_len + 40))
		return -ENOMEM;
	if (n) {
		b->data[b->len++] = 1 << 3 | LEN;
		b->len += varint_encode(b->data + b->len, ids_len);
		for (size_t i = 0; i < n; i++)
			b->len += varint_encode(b->data + b->len, ids[i]);
	}
	size_t vl = varint_encode(tmp, (uint64_t)value);
	b->data[b->len++] = 2 << 3 | LEN;
	b->len += varint_encode(b->data + b->len, vl);
	memcpy(b->data + b->len, tmp, vl);
	b->len += vl;
	uint8_t h[16];
	size_t nh = varint_encode(h, 2 << 3 | LEN);
	nh += varint_encode(h + nh, b->len);
	return pprof_stream_bytes(k, h, nh) || pprof_stream_bytes(k, b->data, b->len) ? -ENOMEM : 0;
}

int pprof_stream_time(struct pprof_stream *k, int64_t time_nanos, int64_t duration_nanos)
{
	uint8_t b[2 * (1 + VARINT_MAX)];
	size_t n = put_field(b, 9, (uint64_t)time_nanos);

	n += put_field(b + n, 10, (uint64_t)duration_nanos);
	return pprof_stream_bytes(k, b, n);
}

int pprof_stream_period(struct pprof_stream *k, int64_t type, int64_t unit, int64_t period)
{
	uint8_t b[1 + VARINT_MAX];
	int rc = stream_value_type(k, 11, type, unit);

	return rc ?: pprof_stream_bytes(k, b, put_field(b, 12, (uint64_t)period));
}

int pprof_stream_finish(struct pprof_stream *k)
{
	int rc = stream_flush(k);

	if (rc || !k->gzip)
		return rc;
	if (k->z)
		return gzip_stream_finish(k->z, k->out);
	return gzip_deflate_fast(k->whole.data, k->whole.len, k->out);
}
