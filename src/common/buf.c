/*
 * buf.c — growable byte buffer (see buf.h).
 */
#include "common/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_free(struct buf *b)
{
	if (!b)
		return;
	free(b->data);
	buf_init(b);
}

int buf_reserve(struct buf *b, size_t n)
{
	size_t want, cap;
	uint8_t *p;

	if (n > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	want = b->len + n + 1; /* +1 keeps room for buf_terminate */
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap = cap > SIZE_MAX / 2 ? want : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	rc = buf_reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int buf_terminate(struct buf *b)
{
	int rc = buf_reserve(b, 0);

	if (rc)
		return rc;
	b->data[b->len] = '\0';
	return 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
}

uint8_t *buf_steal(struct buf *b, size_t *len)
{
	uint8_t *p = b->data;

	if (len)
		*len = b->len;
	buf_init(b);
	return p;
}

int buf_read_file(struct buf *b, const char *path, size_t max_bytes)
{
	uint8_t chunk[65536];
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		if (max_bytes && b->len + (size_t)n > max_bytes) {
			rc = -EFBIG;
			break;
		}
		rc = buf_append(b, chunk, (size_t)n);
		if (rc)
			break;
	}
	close(fd);
	return rc;
}

int buf_write_file(const struct buf *b, const char *path)
{
	return buf_write_file_mode(b, path, 0644);
}

int buf_write_file_mode(const struct buf *b, const char *path, unsigned mode)
{
	char tmp[4096];
	size_t off = 0;
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return -errno;
	while (off < b->len) {
		ssize_t n = write(fd, b->data + off, b->len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto fail;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0) {
		rc = -errno;
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = -errno;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}
