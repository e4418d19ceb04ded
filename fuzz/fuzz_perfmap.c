/*
 * fuzz_perfmap.c — libFuzzer target for the agent's perf-map parser
 * (src/agent/perfmap.c), whose input a profiled process writes.
 *
 * The bytes are fed as a file that grows: cut in two at a point the first
 * byte chooses, the unconsumed rest of the first part fed again with the
 * second (as the reader does), into a table with a small shared budget.
 * Nothing may crash; the table must stay within its budget; every name a
 * lookup returns must be one a line could hold (non-empty, no control
 * characters, bounded); and a line accepted by perfmap_parse_line must be
 * found at its start address.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap_budget budget = {.limit = 64 << 10};
	struct perfmap_feed_stats st = {0};
	struct perfmap *pm;
	struct perfmap_line l;
	const char *why, *text = (const char *)data;
	size_t cut, used;
	char *grown;

	if (size == 0)
		return 0;
	/* One line alone: accepted means well formed. */
	if (perfmap_parse_line(text, size, &l, &why)) {
		if (l.size == 0 || l.start + l.size < l.start || l.name_len == 0 || l.name < text ||
		    l.name + l.name_len > text + size)
			abort();
	}
	pm = perfmap_new(&budget);
	if (!pm)
		return 0;
	cut = data[0] % size;
	used = perfmap_feed(pm, text, cut, &st);
	if (used > cut)
		abort();
	/* The rest of the first part again, followed by the second. */
	grown = malloc(size - used);
	if (!grown) {
		perfmap_free(pm);
		return 0;
	}
	memcpy(grown, text + used, size - used);
	if (perfmap_feed(pm, grown, size - used, &st) > size - used)
		abort();
	if (budget.used != perfmap_bytes(pm) || budget.used > budget.limit)
		abort();
	for (size_t i = 0; i + 8 <= size; i += 8) {
		uint64_t addr;
		const char *name;

		memcpy(&addr, data + i, sizeof(addr));
		name = perfmap_lookup(pm, addr);
		if (name && (!name[0] || strlen(name) > PERFMAP_LINE_MAX))
			abort();
		for (const char *c = name; c && *c; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				abort();
	}
	free(grown);
	perfmap_free(pm);
	if (budget.used != 0)
		abort();
	return 0;
}
