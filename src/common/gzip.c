/*
 * gzip.c — zlib-backed gzip with bounded inflation (see gzip.h).
 */
#include "common/gzip.h"

#include <errno.h>
#include <zlib.h>

bool gzip_is_gzip(const void *data, size_t len)
{
	const uint8_t *p = data;

	return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

int gzip_inflate(const void *data, size_t len, size_t max_out, struct buf *out,
		 struct kiln_error *err)
{
	z_stream zs = {0};
	size_t start = out->len;
	int zrc, rc = 0;

	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return kiln_error_set(err, ENOMEM, "gzip: cannot initialise zlib");
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
	for (;;) {
		size_t room;

		rc = buf_reserve(out, 256 * 1024);
		if (rc) {
			kiln_error_set(err, ENOMEM, "gzip: out of memory after %zu bytes",
				       out->len - start);
			break;
		}
		room = out->cap - out->len - 1;
		zs.next_out = out->data + out->len;
		zs.avail_out = (uInt)(room > UINT32_MAX ? UINT32_MAX : room);
		zrc = inflate(&zs, Z_NO_FLUSH);
		out->len += room - zs.avail_out;
		if (max_out && out->len - start > max_out) {
			rc = kiln_error_set(err, EFBIG,
					    "gzip: inflated size exceeds the limit of %zu bytes",
					    max_out);
			break;
		}
		if (zrc == Z_STREAM_END) {
			/* Another member may follow (gzip allows concatenation). */
			size_t consumed = len - zs.avail_in;
			if (zs.avail_in == 0)
				break;
			if (!gzip_is_gzip((const uint8_t *)data + consumed, zs.avail_in)) {
				rc = kiln_error_set(err, EBADMSG,
						    "gzip: %u trailing bytes after the stream at "
						    "offset %zu",
						    zs.avail_in, consumed);
				break;
			}
			inflateReset(&zs);
			continue;
		}
		if (zrc == Z_BUF_ERROR && zs.avail_in == 0) {
			rc = kiln_error_set(err, EBADMSG,
					    "gzip: stream truncated after %zu input bytes", len);
			break;
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			rc = kiln_error_set(err, EBADMSG, "gzip: corrupt data near offset %zu: %s",
					    len - zs.avail_in, zs.msg ? zs.msg : "inflate failed");
			break;
		}
	}
	inflateEnd(&zs);
	if (rc)
		out->len = start;
	return rc;
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
