/*
 * fuzz_offcpu_kallsyms.c — libFuzzer target for the agent's kallsyms line
 * matcher (src/agent/offcpu_ksym.c, offcpu_kallsyms_match).
 *
 * Any bytes must match, not match, or be refused: a match names
 * finish_task_switch or finish_task_switch.SUFFIX, NUL-terminated inside
 * the buffer it was given, and copied from the line itself; a buffer too
 * small for the name is an error, never an overflow.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

static void check(const uint8_t *data, size_t size, size_t namesz)
{
	char name[64];
	int rc;

	memset(name, 'X', sizeof(name));
	rc = offcpu_kallsyms_match((const char *)data, size, name, namesz);
	if (rc != 1 && rc != 0 && rc != -EINVAL && rc != -ENAMETOOLONG)
		abort();
	if (rc != 1)
		return;
	if (!memchr(name, '\0', namesz))
		abort();
	for (size_t i = strlen(name) + 1; i < sizeof(name); i++)
		if (i >= namesz && name[i] != 'X') /* wrote past namesz */
			abort();
	if (strncmp(name, "finish_task_switch", 18) != 0 || (name[18] && name[18] != '.'))
		abort();
	if (!memmem(data, size, name, strlen(name)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check(data, size, 64);
	check(data, size, 20);
	return 0;
}
