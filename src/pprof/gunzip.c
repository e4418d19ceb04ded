/*
 * gunzip.c — whole-buffer gzip inflation for pprof decoding, via libdeflate.
 *
 * A profile arrives as one buffer, so there is no need for zlib's streaming:
 * libdeflate inflates a whole member at about three times zlib's speed,
 * which matters when decoding is the server's hot path. The output size is
 * guessed from the gzip trailer (ISIZE, exact for the usual single member)
 * and doubled on a short guess. Both the guess and the doubling are capped
 * by what the input can possibly hold (deflate expands at most ~1032:1) and
 * by max_out, so corrupt or hostile input never makes us allocate more than
 * a constant times its own size. Concatenated members are allowed, as
 * gzip(1) does.
 */
#include "pprof/internal.h"

#include "common/gzip.h"

#include <errno.h>
#include <libdeflate.h>

/* Deflate's best case is a 258-byte match per 2 bits (~1032:1); a member of
 * len bytes cannot inflate to more than this, however it is corrupted. */
#define DEFLATE_MAX_RATIO 1032

static size_t inflate_bound(size_t len, size_t max_out)
{
	size_t bound =
	    len > SIZE_MAX / DEFLATE_MAX_RATIO - 1 ? SIZE_MAX : len * DEFLATE_MAX_RATIO + 1;

	return bound > max_out ? max_out : bound;
}

static size_t guess_size(const uint8_t *data, size_t len, size_t bound)
{
	size_t isize = 0, guess;

	if (len >= 18)
		isize = (size_t)data[len - 4] | (size_t)data[len - 3] << 8 |
			(size_t)data[len - 2] << 16 | (size_t)data[len - 1] << 24;
	/* Trust ISIZE only when plausible: a corrupt or truncated trailer must
	 * not make us reserve a gigabyte for a few bytes of input. Deflate
	 * cannot exceed about 1032:1; pprof data compresses 3-10x. */
	if (isize >= len && isize / 64 <= len)
		guess = isize;
	else
		guess = len * 8;
	if (guess < 4096)
		guess = 4096;
	return guess > bound ? bound : guess;
}

int pprof_gunzip(struct libdeflate_decompressor *inflater, const void *data, size_t len,
		 size_t max_out, struct buf *out, struct kiln_error *err)
{
	struct libdeflate_decompressor *d = inflater ? inflater : libdeflate_alloc_decompressor();
	const uint8_t *in = data;
	size_t start = out->len, off = 0;
	int rc = 0;

	if (!d)
		return kiln_error_set(err, ENOMEM, "gzip: out of memory");
	while (off < len) {
		size_t bound = inflate_bound(len - off, max_out - (out->len - start));
		size_t avail = guess_size(in + off, len - off, bound);
		size_t used_in = 0, got = 0;
		enum libdeflate_result r;

		if (off && !gzip_is_gzip(in + off, len - off)) {
			rc = kiln_error_set(
			    err, EBADMSG, "gzip: %zu trailing bytes after the stream at offset %zu",
			    len - off, off);
			break;
		}
		for (;;) {
			rc = buf_reserve(out, avail + 1);
			if (rc) {
				kiln_error_set(err, ENOMEM, "gzip: out of memory for %zu bytes",
					       avail);
				goto out;
			}
			r = libdeflate_gzip_decompress_ex(
			    d, in + off, len - off, out->data + out->len, avail, &used_in, &got);
			if (r != LIBDEFLATE_INSUFFICIENT_SPACE)
				break;
			if (avail >= bound) {
				if (out->len - start + avail >= max_out)
					rc = kiln_error_set(err, EFBIG,
							    "gzip: inflated size exceeds the limit "
							    "of %zu bytes",
							    max_out);
				else
					rc = kiln_error_set(err, EBADMSG,
							    "gzip: corrupt data in the member at "
							    "offset %zu: inflates past %zu bytes",
							    off, avail);
				goto out;
			}
			avail = avail > bound / 2 ? bound : avail * 2;
		}
		if (r != LIBDEFLATE_SUCCESS) {
			rc = kiln_error_set(err, EBADMSG,
					    "gzip: corrupt or truncated data in the member at "
					    "offset %zu",
					    off);
			break;
		}
		out->len += got;
		off += used_in;
	}
out:
	if (d != inflater)
		libdeflate_free_decompressor(d);
	if (rc)
		out->len = start;
	return rc;
}
