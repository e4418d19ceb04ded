/*
 * fuzz_auth_tokens.c — the tokens file parser (server/auth.c): any bytes
 * either load as a non-empty token set with valid roles and line numbers, or
 * are refused with a message that starts with the file name; matching the
 * same bytes as a presented token never crashes.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct auth_tokens *t = NULL;
	struct kiln_error err = {0};
	int rc = auth_tokens_parse((const char *)data, size, "f", &t, &err);

	if (rc == 0) {
		if (!t || t->n == 0)
			abort();
		for (size_t i = 0; i < t->n; i++)
			if (t->v[i].role < AUTH_READ || t->v[i].role > AUTH_ADMIN ||
			    t->v[i].line < 1)
				abort();
	} else if (t || err.msg[0] == '\0' || strncmp(err.msg, "f", 1) != 0) {
		if (rc != -ENOMEM)
			abort();
	}
	/* A presented token of these bytes never crashes the matcher. */
	(void)auth_tokens_match(t, (const char *)data, size);
	auth_tokens_free(t);
	return 0;
}
