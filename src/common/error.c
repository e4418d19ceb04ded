/*
 * error.c — struct kiln_error helpers (see error.h for the convention).
 */
#include "common/error.h"

#include <stdio.h>
#include <errno.h>
#include <string.h>

int kiln_error_set(struct kiln_error *e, int code, const char *fmt, ...)
{
	int rc = code < 0 ? code : -code;
	va_list ap;

	if (rc == 0) /* a zero code would read as success */
		rc = -EINVAL;
	if (!e || e->code != 0)
		return rc;
	e->code = rc;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return rc;
}

void kiln_error_prefix(struct kiln_error *e, const char *fmt, ...)
{
	char prefix[256];
	char old[sizeof(e->msg)];
	va_list ap;

	if (!e || e->code == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	/* Truncation is acceptable: the message is for humans. */
	size_t n = strlen(prefix);
	if (n >= sizeof(e->msg))
		n = sizeof(e->msg) - 1;
	memcpy(e->msg, prefix, n);
	size_t rest = strnlen(old, sizeof(old));
	if (rest > sizeof(e->msg) - 1 - n)
		rest = sizeof(e->msg) - 1 - n;
	memcpy(e->msg + n, old, rest);
	e->msg[n + rest] = '\0';
}

void kiln_error_clear(struct kiln_error *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}
