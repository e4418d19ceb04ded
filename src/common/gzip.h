/*
 * gzip.h — gzip compression with limits.
 *
 * Inflation is bounded: a "gzip bomb" that would expand past max_out bytes is
 * refused with -EFBIG instead of exhausting memory. Both functions append to
 * the output buffer.
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
/* Inflates a gzip stream (concatenated members allowed). -EBADMSG with a
 * message naming the byte offset on corrupt input, -EFBIG past max_out. */
int gzip_inflate(const void *data, size_t len, size_t max_out, struct buf *out,
		 struct kiln_error *err);
/* Deflates data as one gzip member; level 1..9 (-1 for zlib's default). */
int gzip_deflate(const void *data, size_t len, int level, struct buf *out);

#endif
