/*
 * range_group.c — "sum by" for the metrics graph: the series of a range
 * query summed per value of some labels (PromQL's `sum by (comm) (...)`),
 * the largest `limit` groups kept and the rest summed into one "other"
 * series, so that 400 processes draw as 10 lines and a legend that fits.
 *
 * Points are gathered per group as they come (one series at a time from
 * the store), then sorted and summed per timestamp once at the end; a
 * group's rank is its total over the range. With no labels to sum by, the
 * groups are the series themselves and only the limit applies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/htab.h"
#include "common/json.h"
#include "common/satadd.h"
#include "query/query_internal.h"

struct group {
	struct store_label *labels; /* owned names and values */
	size_t n_labels;
	struct store_point *points;
	size_t n_points, cap_points;
	int64_t total;
};

struct query_range_group {
	char **by;
	size_t n_by;
	int64_t step;
	struct htab *index; /* group key -> index in groups */
	struct group *groups;
	size_t n_groups, cap_groups;
	struct buf key;
};

void query_range_group_free(struct query_range_group *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n_by; i++)
		free(g->by[i]);
	free(g->by);
	for (size_t i = 0; i < g->n_groups; i++) {
		for (size_t j = 0; j < g->groups[i].n_labels; j++) {
			free((char *)g->groups[i].labels[j].name);
			free((char *)g->groups[i].labels[j].value);
		}
		free(g->groups[i].labels);
		free(g->groups[i].points);
	}
	free(g->groups);
	htab_free(g->index);
	buf_free(&g->key);
	free(g);
}

struct query_range_group *query_range_group_new(const char *const *by, size_t n_by, int64_t step)
{
	struct query_range_group *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->step = step;
	g->index = htab_new(64);
	g->by = calloc(n_by ? n_by : 1, sizeof(*g->by));
	if (!g->index || !g->by)
		goto fail;
	for (; g->n_by < n_by; g->n_by++)
		if (!(g->by[g->n_by] = strdup(by[g->n_by])))
			goto fail;
	return g;
fail:
	query_range_group_free(g);
	return NULL;
}

static const char *label_value(const struct store_label *labels, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(labels[i].name, name) == 0)
			return labels[i].value;
	return NULL;
}

/* The group's labels: the by-labels the series has, or all of them. */
static int group_labels(struct query_range_group *g, const struct store_label *labels, size_t n,
			struct group *grp)
{
	size_t cap = g->n_by ? g->n_by : n;
	grp->labels = calloc(cap ? cap : 1, sizeof(*grp->labels));
	if (!grp->labels)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++) {
		const char *name = g->n_by ? g->by[i] : labels[i].name;
		const char *value = g->n_by ? label_value(labels, n, name) : labels[i].value;
		if (!value)
			continue;
		struct store_label *l = &grp->labels[grp->n_labels];
		l->name = strdup(name);
		l->value = strdup(value);
		grp->n_labels++; /* counted before the check, so that free releases it */
		if (!l->name || !l->value)
			return -ENOMEM;
	}
	return 0;
}

int query_range_group_add(struct query_range_group *g, const struct store_label *labels,
			  size_t n_labels, const struct store_point *points, size_t n_points)
{
	size_t keys = g->n_by ? g->n_by : n_labels;
	uint64_t id = g->n_groups;
	int rc = 0;

	/* Key: each value (or name=value without by-labels), NUL-separated; an
	 * absent label is a lone 0x01 so that it differs from "". */
	buf_reset(&g->key);
	for (size_t i = 0; !rc && i < keys; i++) {
		const char *v = g->n_by ? label_value(labels, n_labels, g->by[i]) : labels[i].value;
		if (!g->n_by)
			rc = buf_append(&g->key, labels[i].name, strlen(labels[i].name) + 1);
		if (!rc)
			rc = v ? buf_append(&g->key, v, strlen(v) + 1)
			       : buf_append(&g->key, "\1", 2);
	}
	if (rc)
		return -ENOMEM;
	int found = htab_intern(g->index, g->key.data, g->key.len, &id);
	if (found < 0)
		return -ENOMEM;
	if (!found) {
		if (query_grow((void **)&g->groups, &g->cap_groups, g->n_groups + 1,
			       sizeof(*g->groups)))
			return -ENOMEM;
		memset(&g->groups[g->n_groups], 0, sizeof(*g->groups));
		g->n_groups++;
		if (group_labels(g, labels, n_labels, &g->groups[id]))
			return -ENOMEM;
	}
	struct group *grp = &g->groups[id];
	if (query_grow((void **)&grp->points, &grp->cap_points, grp->n_points + n_points,
		       sizeof(*grp->points)))
		return -ENOMEM;
	for (size_t i = 0; i < n_points; i++) {
		struct store_point p = points[i];
		if (g->step > 0)
			p.timestamp_ms -= ((p.timestamp_ms % g->step) + g->step) % g->step;
		grp->points[grp->n_points++] = p;
		sat_acc_i64(&grp->total, p.value);
	}
	return 0;
}

static int cmp_point(const void *a, const void *b)
{
	int64_t x = ((const struct store_point *)a)->timestamp_ms;
	int64_t y = ((const struct store_point *)b)->timestamp_ms;
	return (x > y) - (x < y);
}

/* Sorts and sums a group's points per timestamp in place. */
static void fold_points(struct group *grp)
{
	size_t n = 0;
	if (!grp->n_points)
		return;
	qsort(grp->points, grp->n_points, sizeof(*grp->points), cmp_point);
	for (size_t i = 0; i < grp->n_points; i++) {
		if (n && grp->points[n - 1].timestamp_ms == grp->points[i].timestamp_ms)
			sat_acc_i64(&grp->points[n - 1].value, grp->points[i].value);
		else
			grp->points[n++] = grp->points[i];
	}
	grp->n_points = n;
}

static int cmp_total(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return (x->total < y->total) - (x->total > y->total);
}

static void write_group(void *ctx, const struct store_label *labels, size_t n_labels,
			const char *other, const struct store_point *points, size_t n_points)
{
	struct json_writer *w = ctx;
	json_begin_object(w);
	json_key(w, "labels");
	json_begin_object(w);
	for (size_t i = 0; i < n_labels; i++) {
		json_key(w, labels[i].name);
		json_string(w, labels[i].value);
	}
	if (other) {
		json_key(w, "__other__");
		json_string(w, other);
	}
	json_end_object(w);
	json_key(w, "points");
	json_begin_array(w);
	for (size_t i = 0; i < n_points; i++) {
		json_begin_array(w);
		json_int(w, points[i].timestamp_ms);
		json_int(w, points[i].value);
		json_end_array(w);
	}
	json_end_array(w);
	json_end_object(w);
}

int query_range_group_write_json(struct query_range_group *g, size_t limit, struct json_writer *w)
{
	/* The writer's own errors surface when the caller closes it. */
	return query_range_group_visit(g, limit, write_group, w);
}

int query_range_group_visit(struct query_range_group *g, size_t limit, query_range_group_fn fn,
			    void *ctx)
{
	size_t keep = limit && limit < g->n_groups ? limit : g->n_groups;
	struct group other = {0};

	if (g->n_groups)
		qsort(g->groups, g->n_groups, sizeof(*g->groups), cmp_total);
	for (size_t i = 0; i < keep; i++) {
		fold_points(&g->groups[i]);
		fn(ctx, g->groups[i].labels, g->groups[i].n_labels, NULL, g->groups[i].points,
		   g->groups[i].n_points);
	}
	if (keep == g->n_groups)
		return 0;
	/* The rest, summed into one series. */
	for (size_t i = keep; i < g->n_groups; i++) {
		const struct group *grp = &g->groups[i];
		if (query_grow((void **)&other.points, &other.cap_points,
			       other.n_points + grp->n_points, sizeof(*other.points))) {
			free(other.points);
			return -ENOMEM;
		}
		if (grp->n_points)
			memcpy(other.points + other.n_points, grp->points,
			       grp->n_points * sizeof(*grp->points));
		other.n_points += grp->n_points;
	}
	fold_points(&other);
	char text[64];
	snprintf(text, sizeof(text), "%zu more", g->n_groups - keep);
	fn(ctx, NULL, 0, text, other.points, other.n_points);
	free(other.points);
	return 0;
}
