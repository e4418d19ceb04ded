/* fdio.c — see fdio.h. */
#include "common/fdio.h"

#include <errno.h>
#include <stdint.h>
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
