/*
 * gunzip.c — bounded gzip inflation with ISA-L's igzip (see gzip.h).
 *
 * Why igzip: inflating is the first cost of every pushed profile, and on
 * profiles the size an agent pushes igzip is the fastest of the three
 * inflaters Kiln links (ahead of zlib and libdeflate); it also streams, so
 * the output grows with what was inflated instead of being guessed and
 * redone.
 */
#include "common/gzip.h"

#include <errno.h>
#include <stdbool.h>
#include <isa-l/igzip_lib.h>
#include <stdlib.h>

/* The igzip state: big (two 32 KiB history windows and the Huffman
 * tables), hence kept by callers that inflate often. */
struct gzip_inflater {
	struct inflate_state st;
};

struct gzip_inflater *gzip_inflater_new(void)
{
	return malloc(sizeof(struct gzip_inflater));
}

void gzip_inflater_free(struct gzip_inflater *z)
{
	free(z);
}

/* Output room to start a member with: its ISIZE (the trailer's length mod
 * 2^32, exact for the usual single member) when plausible, else 4x. A
 * corrupt trailer must not make us reserve a gigabyte for a few bytes of
 * input: pprof and protobuf data inflate 3-10x. */
static size_t first_guess(const uint8_t *in, size_t len)
{
	size_t isize = 0;

	if (len >= 18)
		isize = (size_t)in[len - 4] | (size_t)in[len - 3] << 8 | (size_t)in[len - 2] << 16 |
			(size_t)in[len - 1] << 24;
	if (isize < len || isize / 64 > len)
		isize = len < SIZE_MAX / 4 ? len * 4 : len;
	return isize < 4096 ? 4096 : isize;
}

/* Inflates the member at in[*off] onto out, at most limit bytes past start
 * in all; advances *off past it. */
static int inflate_member(struct inflate_state *st, const uint8_t *in, size_t len, size_t *off,
			  size_t start, size_t limit, struct buf *out, struct kiln_error *err)
{
	size_t member = *off, want = first_guess(in + *off, len - *off);

	isal_inflate_init(st);
	st->crc_flag = ISAL_GZIP; /* parse the header, check CRC-32 and ISIZE */
	for (;;) {
		/* One byte more than allowed, to tell "exactly the limit" from
		 * "past it". */
		size_t room = limit - (out->len - start) + 1, avail, in_avail;
		bool progress;
		int r;

		if (want > room)
			want = room;
		if (buf_reserve(out, want))
			return kiln_error_set(err, ENOMEM, "gzip: out of memory for %zu bytes",
					      out->len - start + want);
		avail = out->cap - out->len - 1;
		avail = avail > room ? room : avail;
		avail = avail > UINT32_MAX ? UINT32_MAX : avail;
		in_avail = len - *off > UINT32_MAX ? UINT32_MAX : len - *off;
		st->next_in = (uint8_t *)in + *off;
		st->avail_in = (uint32_t)in_avail;
		st->next_out = out->data + out->len;
		st->avail_out = (uint32_t)avail;
		r = isal_inflate(st);
		progress = in_avail != st->avail_in || avail != st->avail_out;
		*off += in_avail - st->avail_in;
		out->len += avail - st->avail_out;
		if (out->len - start > limit)
			return kiln_error_set(err, EFBIG,
					      "gzip: inflated size exceeds the limit of %zu bytes",
					      limit);
		if (r != ISAL_DECOMP_OK)
			return kiln_error_set(err, EBADMSG,
					      "gzip: %s in the member at offset %zu, near input "
					      "offset %zu",
					      r == ISAL_INCORRECT_CHECKSUM ? "checksum mismatch"
									   : "corrupt data",
					      member, *off);
		if (st->block_state == ISAL_BLOCK_FINISH)
			return 0;
		if (st->avail_out == 0) {
			/* Out of room: double what this member has had. */
			want = avail * 2 < avail ? avail : avail * 2;
			continue;
		}
		if (*off == len)
			return kiln_error_set(err, EBADMSG,
					      "gzip: stream truncated: the member at offset %zu "
					      "ends after %zu input bytes",
					      member, len);
		/* Input left, room left, not finished: only a feed capped at
		 * 4 GiB may stop there. Anything else would spin. */
		if (!progress)
			return kiln_error_set(err, EBADMSG,
					      "gzip: corrupt data in the member at offset %zu, "
					      "near input offset %zu",
					      member, *off);
	}
}

int gzip_inflate_with(struct gzip_inflater *z, const void *data, size_t len, size_t max_out,
		      struct buf *out, struct kiln_error *err)
{
	struct gzip_inflater *own = NULL;
	const uint8_t *in = data;
	size_t start = out->len, off = 0, limit = max_out ? max_out : SIZE_MAX / 2;
	int rc = 0;

	if (!z && !(z = own = gzip_inflater_new()))
		return kiln_error_set(err, ENOMEM, "gzip: out of memory");
	while (off < len && rc == 0) {
		if (!gzip_is_gzip(in + off, len - off))
			rc = off ? kiln_error_set(err, EBADMSG,
						  "gzip: %zu trailing bytes after the stream at "
						  "offset %zu",
						  len - off, off)
				 : kiln_error_set(
				       err, EBADMSG,
				       "gzip: not gzip data (no 1f 8b magic at offset 0)");
		else
			rc = inflate_member(&z->st, in, len, &off, start, limit, out, err);
	}
	if (rc == 0 && (rc = buf_reserve(out, 0)))
		rc = kiln_error_set(err, ENOMEM, "gzip: out of memory");
	gzip_inflater_free(own);
	if (rc)
		out->len = start;
	return rc;
}

int gzip_inflate(const void *data, size_t len, size_t max_out, struct buf *out,
		 struct kiln_error *err)
{
	return gzip_inflate_with(NULL, data, len, max_out, out, err);
}
