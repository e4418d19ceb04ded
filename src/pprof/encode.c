/*
 * encode.c — a message to bytes (protobuf, optionally gzip).
 *
 * Serializes straight into the output buffer (protobuf-c packs into flat
 * memory once the size is known), then deflates at level 1 when asked: the
 * profiles Kiln writes are read far less often than they are written, and
 * level 1 is within a few percent of the default's size on pprof data.
 * libdeflate does it in one call on the whole buffer (gzip_deflate_fast),
 * faster than zlib's level 1 for a few percent more bytes.
 */
#include "pprof/internal.h"
#include "common/gzip.h"

#include <errno.h>
#include <stdlib.h>

int pprof_encode(const pprof_msg *m, bool gzip, struct buf *out)
{
	size_t size = protobuf_c_message_get_packed_size(&m->base);
	struct buf tmp = {0};
	struct buf *dst = gzip ? &tmp : out;
	int rc;

	rc = buf_reserve(dst, size + 1);
	if (rc)
		return rc;
	dst->len += protobuf_c_message_pack(&m->base, dst->data + dst->len);
	if (!gzip)
		return 0;
	rc = gzip_deflate_fast(tmp.data, tmp.len, out);
	buf_free(&tmp);
	return rc;
}
