/*
 * cors.c — which origin a response names in Access-Control-Allow-Origin
 * (cors.h).
 */
#include <string.h>

#include "server/cors.h"

const char *cors_allow_origin(const char *allowed, const char *origin)
{
	if (!allowed || !*allowed)
		return NULL;
	if (strcmp(allowed, "*") == 0)
		return "*";
	if (!origin)
		return NULL;
	size_t olen = strlen(origin);
	for (const char *p = allowed; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		while (len && *p == ' ')
			p++, len--;
		while (len && p[len - 1] == ' ')
			len--;
		if (len == olen && memcmp(p, origin, len) == 0)
			return origin;
		if (len == 1 && *p == '*')
			return "*";
		if (!end)
			break;
		p = end + 1;
	}
	return NULL;
}
