/*
 * fault_inject.h — failing the Nth call of a libc function made by Kiln's own
 * objects, as SQLite's fault tests do. The soak driver is linked with
 * -Wl,--wrap=NAME for each function below, so every call to NAME from
 * libkiln.a (and from the driver) lands in __wrap_NAME here, which counts it
 * and either fails it (errno set, -1 or NULL returned) or calls __real_NAME.
 * libc's and the shared libraries' own internal calls are not redirected.
 *
 * One process-wide fault plan (this is a test harness: a marked singleton).
 * Counting and the decision are lock-free atomics, so the store's background
 * thread and a writer may race for the Nth call; which of them gets it does
 * not matter to the invariants being checked.
 */
#ifndef KILN_TESTS_SOAK_FAULT_INJECT_H
#define KILN_TESTS_SOAK_FAULT_INJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum fault_op {
	FAULT_WRITE,
	FAULT_PWRITE,
	FAULT_FSYNC,
	FAULT_FDATASYNC,
	FAULT_FTRUNCATE,
	FAULT_RENAME,
	FAULT_OPEN,
	FAULT_MALLOC,
	FAULT_CALLOC,
	FAULT_REALLOC,
	FAULT_N_OPS,
};

/* "write", "pwrite", ...; NULL for an out-of-range op. */
const char *fault_op_name(enum fault_op op);
/* The op named name, or -1. */
int fault_op_by_name(const char *name);
/* The errno a failed op reports by default: ENOMEM for the allocators,
 * EIO for the rest. */
int fault_op_default_errno(enum fault_op op);

/* Arms the plan: from now on, calls to op are counted from 1 and the nth
 * fails with err (and, when persistent, every later one too). nth 0 counts
 * without failing. Counters of every op are reset. */
void fault_arm(enum fault_op op, uint64_t nth, int err, bool persistent);
/* Stops failing and counting; the counts stay readable. */
void fault_disarm(void);
/* Calls of op since fault_arm. */
uint64_t fault_count(enum fault_op op);
/* How many calls were failed since fault_arm. */
uint64_t fault_injected(void);

/* The unwrapped write(2), for the driver's own bookkeeping files. */
ssize_t fault_real_write(int fd, const void *buf, size_t n);

#endif
