/*
 * fuzz_mmap_record.c — libFuzzer target for the agent's perf record parser
 * (src/agent/mmapwatch.c, mmap_record_parse).
 *
 * Any bytes must parse to an event, be ignored, or be refused; an event
 * describes what the record holds: a code mapping with start < limit and
 * a file name that ends inside the record, an exec, or a fork of a new
 * process.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mmap_event e;
	int rc = mmap_record_parse(data, size, &e);

	if (rc != 1 && rc != 0 && rc != -EINVAL)
		abort();
	if (rc != 1 || e.exec)
		return 0;
	if (e.parent) { /* a new process, never its own parent */
		if (e.pid == e.parent)
			abort();
		return 0;
	}
	if (!e.m.path || e.m.start >= e.m.limit || !e.m.exec)
		abort();
	if ((const uint8_t *)e.m.path < data || (const uint8_t *)e.m.path >= data + size)
		abort();
	if (!memchr(e.m.path, '\0', (size_t)(data + size - (const uint8_t *)e.m.path)))
		abort();
	return 0;
}
