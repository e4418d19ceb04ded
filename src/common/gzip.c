/*
 * gzip.c — the gzip magic test and deflation, whole (zlib or libdeflate)
 * or streamed (zlib) (see gzip.h); inflation is in gunzip.c, apart so that
 * a binary that only compresses (kiln-agent, linked statically) does not
 * pull in ISA-L.
 */
#include "common/gzip.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <zlib.h>

bool gzip_is_gzip(const void *data, size_t len)
{
	const uint8_t *p = data;

	return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

int gzip_deflate(const void *data, size_t len, int level, struct buf *out)
{
	z_stream zs = {0};
	size_t start = out->len;
	int zrc, rc = 0;

	if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)len;
	rc = buf_reserve(out, deflateBound(&zs, (uLong)len));
	if (rc)
		goto out;
	zs.next_out = out->data + out->len;
	zs.avail_out = (uInt)(out->cap - out->len - 1);
	zrc = deflate(&zs, Z_FINISH);
	if (zrc != Z_STREAM_END) {
		rc = -EIO;
		goto out;
	}
	out->len += zs.total_out;
out:
	deflateEnd(&zs);
	if (rc)
		out->len = start;
	return rc;
}

int gzip_deflate_fast(const void *data, size_t len, struct buf *out)
{
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
	size_t bound, got;
	int rc = -ENOMEM;

	if (!c)
		return -ENOMEM;
	bound = libdeflate_gzip_compress_bound(c, len);
	if (buf_reserve(out, bound + 1))
		goto out;
	got = libdeflate_gzip_compress(c, data, len, out->data + out->len, bound);
	if (!got) {
		rc = -EIO;
		goto out;
	}
	out->len += got;
	rc = 0;
out:
	libdeflate_free_compressor(c);
	return rc;
}

struct gzip_stream {
	z_stream z;
};

struct gzip_stream *gzip_stream_new(int level)
{
	struct gzip_stream *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	if (deflateInit2(&z->z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(z);
		return NULL;
	}
	return z;
}

void gzip_stream_free(struct gzip_stream *z)
{
	if (!z)
		return;
	deflateEnd(&z->z);
	free(z);
}

/* Feeds data to zlib with flush, appending what it writes to out in
 * pieces of at most 1 GiB (avail_out is 32-bit). */
static int stream_deflate(struct gzip_stream *z, const void *data, size_t len, int flush,
			  struct buf *out)
{
	int zr;

	z->z.next_in = (Bytef *)data;
	z->z.avail_in = (uInt)len;
	do {
		if (buf_reserve(out, 64 * 1024))
			return -ENOMEM;
		size_t room = out->cap - out->len - 1;
		z->z.next_out = out->data + out->len;
		z->z.avail_out = (uInt)(room > (1u << 30) ? (1u << 30) : room);
		uInt before = z->z.avail_out;
		zr = deflate(&z->z, flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		out->len += before - z->z.avail_out;
	} while (z->z.avail_in || z->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	return 0;
}

int gzip_stream_write(struct gzip_stream *z, const void *data, size_t len, struct buf *out)
{
	return stream_deflate(z, data, len, Z_NO_FLUSH, out);
}

int gzip_stream_finish(struct gzip_stream *z, struct buf *out)
{
	return stream_deflate(z, NULL, 0, Z_FINISH, out);
}
