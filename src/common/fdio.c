/* fdio.c — see fdio.h. */
#include "common/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fd_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO; /* cannot happen for n > 0; never spin */
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int fd_read_all(int fd, void *p, size_t n)
{
	uint8_t *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EPIPE;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int fd_open_regular(const char *path, struct kiln_error *e)
{
	struct stat st;
	int fd, flags, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return kiln_error_set(e, errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = kiln_error_set(e, errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = kiln_error_set(e, EINVAL, "%s: not a regular file", path);
		goto fail;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		rc = kiln_error_set(e, errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}
