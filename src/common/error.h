/*
 * error.h — how Kiln reports failures.
 *
 * Every fallible function returns 0 (or a non-negative count) on success and a
 * negative errno on failure. The human-readable detail — what went wrong and
 * where, with the offending input — goes into a caller-supplied struct
 * kiln_error, so that the boundary (a CLI, an RPC handler) can print or send
 * it once. Passing NULL for the error is always allowed.
 */
#ifndef KILN_COMMON_ERROR_H
#define KILN_COMMON_ERROR_H

#include <stdarg.h>

struct kiln_error {
	int code;      /* negative errno of the first failure, 0 if none */
	char msg[512]; /* NUL-terminated, never longer than the buffer */
};

/* Records the failure in e (if not NULL) unless one is recorded already, so
 * that the innermost, most specific message wins. Returns -abs(code), so a
 * caller can write `return kiln_error_set(e, EINVAL, "...")`. */
int kiln_error_set(struct kiln_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the recorded message with context ("file.pb.gz: "), keeping the
 * code. Does nothing when e is NULL or holds no error. */
void kiln_error_prefix(struct kiln_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears e for reuse. */
void kiln_error_clear(struct kiln_error *e);

#endif
