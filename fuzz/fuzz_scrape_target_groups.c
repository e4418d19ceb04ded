/*
 * fuzz_scrape_target_groups.c — libFuzzer target for the file_sd / http_sd
 * target group parser (a JSON or YAML list of {targets, labels}): the
 * bytes come from files and HTTP servers the operator points at, which may
 * be truncated mid-write or simply wrong.
 *
 * Any input either parses into groups whose targets are host:port strings,
 * or fails with a message naming the source; nothing crashes or leaks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scrape/scrape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct static_config *g = NULL;
	struct kiln_error err = {0};
	size_t n = 0;

	if (scrape_target_groups_parse((const char *)data, size, "sd.json", &g, &n, &err) != 0) {
		if (!strstr(err.msg, "sd.json") && !strstr(err.msg, "out of memory"))
			abort(); /* every error names the source */
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t t = 0; t < g[i].n_targets; t++)
			if (!g[i].targets[t][0] || strchr(g[i].targets[t], '/'))
				abort(); /* the parser lets through what a target cannot be */
		scrape_static_config_release(&g[i]);
	}
	free(g);
	return 0;
}
