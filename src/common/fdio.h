/*
 * fdio.h — whole reads and writes on a file descriptor, and opening a
 * file that must be a regular one (anywhere, or under a given directory).
 *
 * write(2) and read(2) may move fewer bytes than asked (signals, pipes,
 * sockets, a full disk part-way): these loop until all n bytes moved.
 * Both return 0, or a negative errno; fd_read_all returns -EPIPE when the
 * other end closes (end of file) before n bytes arrived.
 *
 * Paths that come from profiles (a mapping's file name, pushed by an agent
 * or read from a pprof file) may name a FIFO or a device: opening a FIFO
 * for reading blocks until a writer comes, and reading a device may never
 * end. fd_open_regular opens such paths without ever blocking and refuses
 * anything but a regular file.
 */
#ifndef KILN_COMMON_FDIO_H
#define KILN_COMMON_FDIO_H

#include <stddef.h>

#include "common/error.h"

int fd_write_all(int fd, const void *p, size_t n);
int fd_read_all(int fd, void *p, size_t n);

/* Opens path read-only (close-on-exec; symbolic links followed) and checks
 * with fstat that it is a regular file: O_NONBLOCK keeps the open itself
 * from waiting on a FIFO (and is cleared again once the file is known to
 * be regular), O_NOCTTY keeps a terminal from becoming ours. Returns the
 * descriptor (the caller closes it), or -EINVAL when path is not a
 * regular file (nothing was read from it) or the negative errno of
 * open/fstat, with "PATH: PROBLEM" in e. */
int fd_open_regular(const char *path, struct kiln_error *e);

/* fd_open_regular, but a symbolic link as path's last component is refused
 * (O_NOFOLLOW: -ELOOP), not followed. */
int fd_open_nofollow(const char *path, struct kiln_error *e);

/* fd_open_regular for a file that must lie under the directory dir_real
 * (an absolute path without symbolic links or "..", as realpath(3) gives
 * it): path is resolved with realpath(3), refused unless the result is
 * dir_real + "/" + something, and that result is opened with O_NOFOLLOW
 * (a link swapped in since is refused, not followed) and O_NONBLOCK, and
 * checked to be a regular file. So a symbolic link inside the directory
 * may point elsewhere inside it, never outside. If resolved is not NULL,
 * the resolved path is copied there (PATH_MAX bytes). Returns the
 * descriptor (the caller closes it), -EPERM when path leads outside
 * dir_real, or as fd_open_regular, with "PATH: PROBLEM" in e. */
int fd_open_under(const char *dir_real, const char *path, char *resolved, struct kiln_error *e);

#endif
