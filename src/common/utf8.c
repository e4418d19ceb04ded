/*
 * utf8.c — see utf8.h.
 */
#include "common/utf8.h"

bool utf8_valid_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = *p < 0x80	  ? 0
			: (*p >> 5) == 6  ? 1
			: (*p >> 4) == 14 ? 2
			: (*p >> 3) == 30 ? 3
					  : -1;
		if (n < 0)
			return false;
		p++;
		for (int i = 0; i < n; i++, p++)
			if ((*p & 0xc0) != 0x80)
				return false;
	}
	return true;
}
