/*
 * fuzz_scrape_config.c — libFuzzer target for the pull-mode config parser.
 *
 * Any input must either parse or fail with a message naming the place
 * ("fuzz.yaml:LINE:COLUMN: ..." or at least the file name); what parses must
 * survive a round trip: dump, parse the dump, dump again, same text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrape/scrape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scrape_config *c = NULL, *c2 = NULL;
	struct kiln_error err = {0};
	struct buf d1, d2;

	if (scrape_config_parse((const char *)data, size, "fuzz.yaml", &c, &err) != 0) {
		if (!strstr(err.msg, "fuzz.yaml") && !strstr(err.msg, "out of memory"))
			abort(); /* every error names the file */
		return 0;
	}
	buf_init(&d1);
	buf_init(&d2);
	if (scrape_config_dump(c, &d1) || buf_terminate(&d1))
		abort();
	if (scrape_config_parse((const char *)d1.data, d1.len, "dump.yaml", &c2, &err) != 0) {
		/* the dump of a valid config must load */
		fprintf(stderr, "dump does not load: %s\n%s\n", err.msg, (const char *)d1.data);
		abort();
	}
	if (scrape_config_dump(c2, &d2) || buf_terminate(&d2))
		abort();
	if (d1.len != d2.len || memcmp(d1.data, d2.data, d1.len) != 0)
		abort();
	scrape_config_free(c);
	scrape_config_free(c2);
	buf_free(&d1);
	buf_free(&d2);
	return 0;
}
