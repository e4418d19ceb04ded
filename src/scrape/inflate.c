/*
 * inflate.c — gunzip for the scheduler thread with state kept across
 * scrapes: one libdeflate decompressor and one output buffer, instead of a
 * decompressor and a fresh buffer (faulted in page by page) per response.
 * The inflated bytes are then decoded as plain protobuf.
 */
#include <errno.h>
#include <libdeflate.h>

#include "common/gzip.h"
#include "scrape/scrape_internal.h"

/* Kept between scrapes only up to this size; a bigger one is released. */
#define KEEP_CAP ((size_t)8 << 20)

void scrape_inflater_release(struct scrape_inflater *z)
{
	if (z->d)
		libdeflate_free_decompressor(z->d);
	z->d = NULL;
	buf_free(&z->out);
}

void scrape_inflater_trim(struct scrape_inflater *z)
{
	if (z->out.cap > KEEP_CAP)
		buf_free(&z->out);
	buf_reset(&z->out);
}

int scrape_inflate(struct scrape_inflater *z, const void *data, size_t len, size_t max_out,
		   struct kiln_error *err)
{
	const uint8_t *in = data;
	size_t off = 0;

	buf_reset(&z->out);
	if (!z->d && !(z->d = libdeflate_alloc_decompressor()))
		return kiln_error_set(err, ENOMEM, "gzip: out of memory");
	while (off < len) {
		if (off && !gzip_is_gzip(in + off, len - off))
			return kiln_error_set(
			    err, EBADMSG, "gzip: %zu trailing bytes after the stream at offset %zu",
			    len - off, off);
		size_t room = max_out - z->out.len;
		/* Start from the member's ISIZE when plausible, else 8x. */
		size_t isize = 0, avail;
		if (len - off >= 18)
			isize = (size_t)in[len - 4] | (size_t)in[len - 3] << 8 |
				(size_t)in[len - 2] << 16 | (size_t)in[len - 1] << 24;
		avail = isize >= len - off && isize / 64 <= len - off ? isize : (len - off) * 8;
		if (avail < 4096)
			avail = 4096;
		for (;;) {
			size_t used = 0, got = 0;
			if (avail > room)
				avail = room;
			if (buf_reserve(&z->out, avail + 1) < 0)
				return kiln_error_set(err, ENOMEM,
						      "gzip: out of memory for %zu bytes", avail);
			enum libdeflate_result r = libdeflate_gzip_decompress_ex(
			    z->d, in + off, len - off, z->out.data + z->out.len, avail, &used,
			    &got);
			if (r == LIBDEFLATE_SUCCESS) {
				z->out.len += got;
				off += used;
				break;
			}
			if (r != LIBDEFLATE_INSUFFICIENT_SPACE)
				return kiln_error_set(
				    err, EBADMSG,
				    "gzip: corrupt or truncated data in the member "
				    "at offset %zu",
				    off);
			if (avail >= room)
				return kiln_error_set(
				    err, EFBIG,
				    "gzip: inflated size exceeds the limit of %zu "
				    "bytes",
				    max_out);
			avail = avail > room / 2 ? room : avail * 2;
		}
	}
	return 0;
}
