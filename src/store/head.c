/*
 * head.c — the in-memory head: rows acknowledged since the last cut, kept
 * per series as arrays (timestamps and totals per profile, stack ids and
 * values per row) so that a cut, a merge or a range query is a linear scan.
 * The head is protected by store.head_lock; a frozen head (being written to
 * blocks) is immutable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/satadd.h"
#include "store/internal.h"

void series_rows_free(struct series_rows *r)
{
	if (!r)
		return;
	free(r->ts);
	free(r->total);
	free(r->off);
	free(r->n);
	free(r->stacks);
	free(r->values);
	memset(r, 0, sizeof(*r));
}

void series_rows_reset(struct series_rows *r)
{
	r->np = 0;
	r->nr = 0;
}

static int grow(void **p, size_t cap, size_t elem)
{
	void *q = realloc(*p, cap * elem);

	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

int series_rows_add_profile(struct series_rows *r, int64_t ts, const uint32_t *stacks,
			    const int64_t *values, size_t n)
{
	int64_t total = 0;

	if (r->np == r->cap_p) {
		size_t c = r->cap_p ? r->cap_p * 2 : 16;

		if (grow((void **)&r->ts, c, sizeof(int64_t)) ||
		    grow((void **)&r->total, c, sizeof(int64_t)) ||
		    grow((void **)&r->off, c, sizeof(uint32_t)) ||
		    grow((void **)&r->n, c, sizeof(uint32_t)))
			return -ENOMEM;
		r->cap_p = c;
	}
	if (r->nr + n > r->cap_r) {
		size_t c = r->cap_r ? r->cap_r : 256;

		while (c < r->nr + n)
			c *= 2;
		uint32_t *s = realloc(r->stacks, c * sizeof(*s));
		if (!s)
			return -ENOMEM;
		r->stacks = s;
		int64_t *v = realloc(r->values, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->values = v;
		r->cap_r = c;
	}
	if (n) { /* an empty profile (e.g. an idle scrape) may pass NULL arrays */
		memcpy(r->stacks + r->nr, stacks, n * sizeof(*stacks));
		memcpy(r->values + r->nr, values, n * sizeof(*values));
	}
	for (size_t i = 0; i < n; i++)
		sat_acc_i64(&total, values[i]);
	r->ts[r->np] = ts;
	r->total[r->np] = total;
	r->off[r->np] = (uint32_t)r->nr;
	r->n[r->np] = (uint32_t)n;
	r->np++;
	r->nr += n;
	return 0;
}

struct head *head_new(void)
{
	struct head *h = calloc(1, sizeof(*h));

	if (h) {
		h->min_ts = INT64_MAX;
		h->max_ts = INT64_MIN;
	}
	return h;
}

void head_free(struct head *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->cap_series; i++) {
		series_rows_free(h->series[i]);
		free(h->series[i]);
	}
	free(h->series);
	free(h);
}

struct series_rows *head_series(struct head *h, uint32_t id, bool create)
{
	if (id >= h->cap_series) {
		size_t cap = h->cap_series ? h->cap_series : 64;

		if (!create)
			return NULL;
		while (cap <= id)
			cap *= 2;
		struct series_rows **s = realloc(h->series, cap * sizeof(*s));
		if (!s)
			return NULL;
		memset(s + h->cap_series, 0, (cap - h->cap_series) * sizeof(*s));
		h->series = s;
		h->cap_series = cap;
	}
	if (!h->series[id] && create)
		h->series[id] = calloc(1, sizeof(struct series_rows));
	return h->series[id];
}
