/*
 * fuzz_duration.c — the duration grammar (common/duration.h), which every
 * flag and the scrape config go through: any string parses or is refused
 * with -EINVAL/-ERANGE, a refusal leaves the output alone, and the two
 * forms agree (a millisecond result is the nanosecond one / 1e6, when the
 * nanosecond one fits).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 256)
		return 0;
	unsigned flags = data[0] & 1 ? DURATION_BARE_SECONDS : 0;
	char *s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';

	int64_t ns = -1, ms = -1;
	int rn = duration_parse_ns(s, flags, &ns);
	int rm = duration_parse_ms(s, flags, &ms);
	if ((rn && rn != -EINVAL && rn != -ERANGE) || (rm && rm != -EINVAL && rm != -ERANGE))
		abort();
	if ((rn && ns != -1) || (rm && ms != -1))
		abort();
	if ((!rn && ns < 0) || (!rm && ms < 0))
		abort();
	if (!rn && !rm && ms != ns / 1000000)
		abort();
	if (!rn && rm == -ERANGE) /* fits in ns, so fits in ms */
		abort();
	free(s);
	return 0;
}
