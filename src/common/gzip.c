/*
 * gzip.c — the gzip magic test and deflation with zlib (see gzip.h);
 * inflation is in gunzip.c, apart so that a binary that only compresses
 * (kiln-agent, linked statically) does not pull in ISA-L.
 */
#include "common/gzip.h"

#include <errno.h>
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
