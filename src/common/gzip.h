/*
 * gzip.h — gzip compression with limits.
 *
 * Inflation is bounded: a "gzip bomb" that would expand past max_out bytes is
 * refused with -EFBIG instead of exhausting memory, and the output buffer
 * grows with what was really inflated, never ahead of it by more than twice.
 * Inflating and deflating append to the output buffer. Every gunzip in Kiln
 * (WriteRaw profiles, scraped responses, gRPC message compression) goes
 * through gzip_inflate_with: one implementation, one set of error messages.
 */
#ifndef KILN_COMMON_GZIP_H
#define KILN_COMMON_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

/* True if data starts with the gzip magic (1f 8b). */
bool gzip_is_gzip(const void *data, size_t len);
/* Inflates a gzip stream (concatenated members allowed; each member's CRC-32
 * and length are checked) and appends it to out, leaving at least one spare
 * byte past out->len (room for a terminator). max_out: at most this many
 * bytes appended (0: no limit). Returns 0, -EBADMSG with a message naming
 * the byte offset on corrupt, truncated or trailing input, -EFBIG past
 * max_out, -ENOMEM; on error out->len is what it was. */
int gzip_inflate(const void *data, size_t len, size_t max_out, struct buf *out,
		 struct kiln_error *err);

/* Inflater state kept across calls (ISA-L's igzip, about 90 KB), for a
 * thread that inflates stream after stream: gzip_inflate allocates and
 * frees one per call. Not thread-safe: one thread at a time. */
struct gzip_inflater;
struct gzip_inflater *gzip_inflater_new(void);
void gzip_inflater_free(struct gzip_inflater *z); /* NULL-safe */
/* gzip_inflate with z's state; z NULL: a temporary one. */
int gzip_inflate_with(struct gzip_inflater *z, const void *data, size_t len, size_t max_out,
		      struct buf *out, struct kiln_error *err);
/* Deflating: every gzip Kiln writes goes through one of these, each
 * appending one gzip member to out and returning 0, -ENOMEM or -EIO (the
 * whole-buffer ones leave out as it was on error).
 *
 * gzip_deflate: zlib at level 1..9 (-1 for zlib's default).
 * gzip_deflate_fast: libdeflate at level 1 in one call on the whole
 * buffer, for encoded profiles: faster than zlib's level 1 for a few
 * percent more bytes, and the same bytes for the same input whichever path
 * (pprof_encode, a streamed merge) produced it.
 * gzip_stream: zlib at level for input that arrives in pieces and is too
 * large to hold whole; the state is about 256 KiB. */
int gzip_deflate(const void *data, size_t len, int level, struct buf *out);
int gzip_deflate_fast(const void *data, size_t len, struct buf *out);

struct gzip_stream;
/* NULL when out of memory; free with gzip_stream_free (NULL-safe). */
struct gzip_stream *gzip_stream_new(int level);
void gzip_stream_free(struct gzip_stream *z);
/* Appends the deflated form of data (what zlib has ready of it) to out. */
int gzip_stream_write(struct gzip_stream *z, const void *data, size_t len, struct buf *out);
/* Ends the member: the rest of the data and the gzip trailer. */
int gzip_stream_finish(struct gzip_stream *z, struct buf *out);

#endif
