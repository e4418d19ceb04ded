/*
 * buf.h — a growable byte buffer.
 *
 * The buffer owns its memory; buf_free releases it. Appends grow the storage
 * geometrically and return -ENOMEM on allocation failure, leaving the
 * contents as they were. A zero-initialised struct buf is a valid empty
 * buffer.
 */
#ifndef KILN_COMMON_BUF_H
#define KILN_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void buf_init(struct buf *b);
void buf_free(struct buf *b);
/* Makes room for at least n more bytes. */
int buf_reserve(struct buf *b, size_t n);
int buf_append(struct buf *b, const void *data, size_t n);
int buf_append_str(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a NUL without counting it in len, so data can be used as a C string. */
int buf_terminate(struct buf *b);
void buf_reset(struct buf *b);
/* Hands the storage to the caller (who frees it with free()) and empties b. */
uint8_t *buf_steal(struct buf *b, size_t *len);

/* Reads a whole file into b. Refuses files larger than max_bytes (0 = no
 * limit) with -EFBIG. */
int buf_read_file(struct buf *b, const char *path, size_t max_bytes);
/* Writes b to path atomically (temporary file, fsync, rename), created
 * with mode 0644 (before the umask) / mode. */
int buf_write_file(const struct buf *b, const char *path);
int buf_write_file_mode(const struct buf *b, const char *path, unsigned mode);

#endif
