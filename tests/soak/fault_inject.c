/*
 * fault_inject.c — the --wrap targets behind fault_inject.h. Each wrapper
 * asks should_fail(op) and either fails the call as the real function would
 * (errno and the function's failure value) or forwards to __real_NAME.
 * Nothing here allocates: the malloc wrappers must not recurse.
 */
#include "fault_inject.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __real_ftruncate(int fd, off_t len);
int __real_rename(const char *from, const char *to);
int __real_open(const char *path, int flags, ...);
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static const char *const op_names[FAULT_N_OPS] = {
    [FAULT_WRITE] = "write",	     [FAULT_PWRITE] = "pwrite",	      [FAULT_FSYNC] = "fsync",
    [FAULT_FDATASYNC] = "fdatasync", [FAULT_FTRUNCATE] = "ftruncate", [FAULT_RENAME] = "rename",
    [FAULT_OPEN] = "open",	     [FAULT_MALLOC] = "malloc",	      [FAULT_CALLOC] = "calloc",
    [FAULT_REALLOC] = "realloc",
};

/* The process-wide plan (a test harness singleton). */
static atomic_bool armed;
static atomic_int plan_op = -1;
static atomic_uint_fast64_t plan_nth;
static atomic_int plan_errno;
static atomic_bool plan_persistent;
static atomic_uint_fast64_t counts[FAULT_N_OPS];
static atomic_uint_fast64_t injected;
static atomic_bool print_backtrace;

const char *fault_op_name(enum fault_op op)
{
	return (unsigned)op < FAULT_N_OPS ? op_names[op] : NULL;
}

int fault_op_by_name(const char *name)
{
	for (int i = 0; i < FAULT_N_OPS; i++)
		if (!strcmp(op_names[i], name))
			return i;
	return -1;
}

int fault_op_default_errno(enum fault_op op)
{
	return op == FAULT_MALLOC || op == FAULT_CALLOC || op == FAULT_REALLOC ? ENOMEM : EIO;
}

void fault_arm(enum fault_op op, uint64_t nth, int err, bool persistent)
{
	atomic_store(&armed, false);
	for (int i = 0; i < FAULT_N_OPS; i++)
		atomic_store(&counts[i], 0);
	atomic_store(&injected, 0);
	atomic_store(&plan_op, (int)op);
	atomic_store(&plan_nth, nth);
	atomic_store(&plan_errno, err);
	atomic_store(&plan_persistent, persistent);
	atomic_store(&print_backtrace, getenv("SOAK_FAULT_BACKTRACE") != NULL);
	atomic_store(&armed, true);
}

void fault_disarm(void)
{
	atomic_store(&armed, false);
}

uint64_t fault_count(enum fault_op op)
{
	return (unsigned)op < FAULT_N_OPS ? atomic_load(&counts[op]) : 0;
}

uint64_t fault_injected(void)
{
	return atomic_load(&injected);
}

/* Counts the call; true when it must fail (errno is then set). */
static bool should_fail(enum fault_op op)
{
	if (!atomic_load_explicit(&armed, memory_order_relaxed))
		return false;
	uint64_t n = atomic_fetch_add(&counts[op], 1) + 1;
	uint64_t nth = atomic_load(&plan_nth);

	if (atomic_load(&plan_op) != (int)op || nth == 0)
		return false;
	if (n != nth && !(atomic_load(&plan_persistent) && n > nth))
		return false;
	atomic_fetch_add(&injected, 1);
	if (atomic_load(&print_backtrace)) {
		/* Where the failed call came from, for a reproducer's report
		 * (backtrace() itself does not go through the wrappers). */
		void *frames[24];
		int depth = backtrace(frames, 24);

		dprintf(2, "fault_inject: failing %s call %" PRIu64 ":\n", op_names[op], n);
		backtrace_symbols_fd(frames, depth, 2);
	}
	errno = atomic_load(&plan_errno);
	return true;
}

ssize_t fault_real_write(int fd, const void *buf, size_t n)
{
	return __real_write(fd, buf, n);
}

ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	return should_fail(FAULT_WRITE) ? -1 : __real_write(fd, buf, n);
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return should_fail(FAULT_PWRITE) ? -1 : __real_pwrite(fd, buf, n, off);
}

int __wrap_fsync(int fd);
int __wrap_fsync(int fd)
{
	return should_fail(FAULT_FSYNC) ? -1 : __real_fsync(fd);
}

int __wrap_fdatasync(int fd);
int __wrap_fdatasync(int fd)
{
	return should_fail(FAULT_FDATASYNC) ? -1 : __real_fdatasync(fd);
}

int __wrap_ftruncate(int fd, off_t len);
int __wrap_ftruncate(int fd, off_t len)
{
	return should_fail(FAULT_FTRUNCATE) ? -1 : __real_ftruncate(fd, len);
}

int __wrap_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to)
{
	return should_fail(FAULT_RENAME) ? -1 : __real_rename(from, to);
}

int __wrap_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	return should_fail(FAULT_OPEN) ? -1 : __real_open(path, flags, mode);
}

void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
	return should_fail(FAULT_MALLOC) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
	return should_fail(FAULT_CALLOC) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	return should_fail(FAULT_REALLOC) ? NULL : __real_realloc(p, n);
}
