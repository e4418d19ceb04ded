/* fdio.c — see fdio.h. */
#include "common/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* fd_open_regular with extra open(2) flags (O_NOFOLLOW). */
static int open_regular(const char *path, int extra, struct kiln_error *e)
{
	struct stat st;
	int fd, flags, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | extra);
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

int fd_open_regular(const char *path, struct kiln_error *e)
{
	return open_regular(path, 0, e);
}

int fd_open_nofollow(const char *path, struct kiln_error *e)
{
	return open_regular(path, O_NOFOLLOW, e);
}

int fd_open_under(const char *dir_real, const char *path, char *resolved, struct kiln_error *e)
{
	char real[PATH_MAX];
	size_t n = strlen(dir_real);

	/* realpath(3) only lstat(2)s and readlink(2)s: it opens nothing. */
	if (!realpath(path, real))
		return kiln_error_set(e, errno, "%s: %s", path, strerror(errno));
	if (n == 0 || dir_real[0] != '/' || strncmp(real, dir_real, n) != 0 ||
	    (real[n] != '/' && !(n == 1 && real[1])) || strstr(real, "/../"))
		return kiln_error_set(e, EPERM, "%s: leads to %s, outside %s", path, real,
				      dir_real);
	if (resolved)
		snprintf(resolved, PATH_MAX, "%s", real);
	return open_regular(real, O_NOFOLLOW, e);
}
