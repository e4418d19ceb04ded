/*
 * fdio.h — whole reads and writes on a file descriptor.
 *
 * write(2) and read(2) may move fewer bytes than asked (signals, pipes,
 * sockets, a full disk part-way): these loop until all n bytes moved.
 * Both return 0, or a negative errno; fd_read_all returns -EPIPE when the
 * other end closes (end of file) before n bytes arrived.
 */
#ifndef KILN_COMMON_FDIO_H
#define KILN_COMMON_FDIO_H

#include <stddef.h>

int fd_write_all(int fd, const void *p, size_t n);
int fd_read_all(int fd, void *p, size_t n);

#endif
