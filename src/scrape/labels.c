/*
 * labels.c — small owned label sets for targets (a handful of labels each,
 * so linear search beats anything cleverer).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scrape/scrape.h"

const char *scrape_labels_get(const struct scrape_labels *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

int scrape_labels_set(struct scrape_labels *l, const char *name, const char *value)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].name, name) != 0)
			continue;
		if (!value || !*value) {
			free((char *)l->v[i].name);
			free((char *)l->v[i].value);
			l->v[i] = l->v[--l->n];
			return 0;
		}
		char *v = strdup(value);
		if (!v)
			return -ENOMEM;
		free((char *)l->v[i].value);
		l->v[i].value = v;
		return 0;
	}
	if (!value || !*value)
		return 0;
	struct label *nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	char *n = strdup(name), *v = strdup(value);
	if (!n || !v) {
		free(n);
		free(v);
		return -ENOMEM;
	}
	l->v[l->n].name = n;
	l->v[l->n].value = v;
	l->n++;
	return 0;
}

void scrape_labels_sort(struct scrape_labels *l)
{
	if (l->n > 1)
		labels_sort(l->v, l->n);
}

int scrape_labels_copy(struct scrape_labels *dst, const struct scrape_labels *src)
{
	dst->v = NULL;
	dst->n = 0;
	for (size_t i = 0; i < src->n; i++) {
		if (scrape_labels_set(dst, src->v[i].name, src->v[i].value) < 0) {
			scrape_labels_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

void scrape_labels_free(struct scrape_labels *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->v[i].name);
		free((char *)l->v[i].value);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int scrape_labels_format(const struct scrape_labels *l, struct buf *out)
{
	struct scrape_labels s = *l;
	size_t idx[256];
	size_t n = l->n < 256 ? l->n : 256;
	int rc = buf_append_str(out, "{");

	/* Format in name order without reordering the caller's set. */
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(s.v[idx[j - 1]].name, s.v[idx[j]].name) > 0;
		     j--) {
			size_t t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = buf_printf(out, "%s%s=\"%s\"", i ? ", " : "", s.v[idx[i]].name,
				s.v[idx[i]].value);
	if (rc == 0)
		rc = buf_append_str(out, "}");
	return rc;
}
