/*
 * labels.c — label names and order (contract: labels.h).
 */
#include "common/labels.h"

#include <stdlib.h>
#include <string.h>

static bool name_valid(const char *s, bool colon)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			  (colon && c == ':') || (p != s && c >= '0' && c <= '9');
		if (!ok)
			return false;
	}
	return true;
}

bool label_name_valid(const char *s)
{
	return name_valid(s, false);
}

bool metric_name_valid(const char *s)
{
	return name_valid(s, true);
}

int label_cmp(const void *a, const void *b)
{
	return strcmp(((const struct label *)a)->name, ((const struct label *)b)->name);
}

void labels_sort(struct label *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), label_cmp);
}
