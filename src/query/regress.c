/*
 * regress.c — the deploy-regression report: which functions take a larger
 * share of the profile on side B than on side A, and how sure that is.
 *
 * Each side is a series of windows (time buckets of its range, each a
 * merged flame graph tree). For every function and window the unit is its
 * share of the window: total share (its cum, a stack counted once however
 * often the function recurses in it) and self share (its flat). Shares
 * rather than values, so that sides of unequal length or load compare.
 *
 * The test is the Mann-Whitney U test on the per-window total shares of A
 * against B, two-sided, normal approximation with tie and continuity
 * corrections. Why this test: windows of a real host are not normal (a GC
 * or a burst makes outlier windows), and a rank test does not let one
 * outlier window decide; it needs no assumption on the variance of either
 * side. With few windows it cannot reach significance at all (5 against 5
 * gives a smallest p of 0.008), so a side with fewer than min_windows
 * non-empty windows is "not enough data", not "unchanged".
 *
 * Every function is a comparison of its own, so the p-values are adjusted
 * with Benjamini-Hochberg (the false discovery rate, q) across all
 * functions tested: among the functions flagged, at most alpha are
 * expected to be false. A function is a regression when q <= alpha and its
 * mean total share grew by at least threshold percentage points; an
 * improvement likewise when it shrank. The effect size is Cliff's delta,
 * P(B > A) - P(B < A) over pairs of windows, in [-1, 1].
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/htab.h"
#include "common/json.h"
#include "query/query_internal.h"

/* One function's shares, n_a + n_b windows (A's first). */
struct regress_fn {
	char *name, *binary;
	double *total, *self;
};

struct query_regress {
	size_t n_windows[2];
	bool *window_used[2]; /* the window had samples */
	struct htab *index;   /* "name\0binary" -> index in fns */
	struct regress_fn *fns;
	size_t n_fns, cap_fns;
	struct query_regress_row *rows;
	size_t n_rows;
	char unit[32];
};

struct query_regress *query_regress_new(size_t n_a, size_t n_b)
{
	struct query_regress *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->n_windows[0] = n_a;
	r->n_windows[1] = n_b;
	r->window_used[0] = calloc(n_a ? n_a : 1, sizeof(bool));
	r->window_used[1] = calloc(n_b ? n_b : 1, sizeof(bool));
	r->index = htab_new(256);
	if (!r->window_used[0] || !r->window_used[1] || !r->index) {
		query_regress_free(r);
		return NULL;
	}
	return r;
}

void query_regress_free(struct query_regress *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_fns; i++) {
		free(r->fns[i].name);
		free(r->fns[i].binary);
		free(r->fns[i].total);
		free(r->fns[i].self);
	}
	free(r->fns);
	free(r->rows);
	free(r->window_used[0]);
	free(r->window_used[1]);
	htab_free(r->index);
	free(r);
}

static struct regress_fn *function_of(struct query_regress *r, const char *name, const char *binary)
{
	size_t nl = strlen(name), bl = strlen(binary), n = r->n_windows[0] + r->n_windows[1];
	char key[1024];
	uint64_t id = r->n_fns;
	struct regress_fn *f;

	/* Longer keys are cut: two functions alike in their first KiB share a
	 * row, which is what a reader would take them for anyway. */
	if (nl > sizeof(key) / 2)
		nl = sizeof(key) / 2;
	if (bl > sizeof(key) / 2 - 2)
		bl = sizeof(key) / 2 - 2;
	memcpy(key, name, nl);
	key[nl] = '\0';
	memcpy(key + nl + 1, binary, bl);
	int found = htab_intern(r->index, key, nl + 1 + bl, &id);
	if (found < 0)
		return NULL;
	if (found)
		return &r->fns[id];
	if (query_grow((void **)&r->fns, &r->cap_fns, r->n_fns + 1, sizeof(*r->fns)))
		return NULL;
	f = &r->fns[r->n_fns];
	memset(f, 0, sizeof(*f));
	f->name = strdup(name);
	f->binary = strdup(binary);
	f->total = calloc(n ? n : 1, sizeof(double));
	f->self = calloc(n ? n : 1, sizeof(double));
	r->n_fns++; /* even when out of memory, so that free releases it */
	if (!f->name || !f->binary || !f->total || !f->self)
		return NULL;
	return f;
}

int query_regress_add_window(struct query_regress *r, int side, size_t window,
			     const struct query_tree *t, struct kiln_error *err)
{
	struct query_top *top = NULL;
	int64_t total = query_tree_filtered(t);
	size_t col = (side ? r->n_windows[0] : 0) + window;
	int rc;

	if ((side != 0 && side != 1) || window >= r->n_windows[side])
		return kiln_error_set(err, EINVAL, "regression: no window %zu on side %d", window,
				      side);
	if (!r->unit[0])
		snprintf(r->unit, sizeof(r->unit), "%s", query_tree_unit(t));
	if (total <= 0)
		return 0;
	rc = query_top_build(t, &top, err);
	if (rc)
		return rc;
	r->window_used[side][window] = true;
	for (size_t i = 0; i < top->n_rows; i++) {
		const struct query_top_row *row = &top->rows[i];
		struct regress_fn *f = function_of(r, query_tree_string(t, row->name),
						   query_tree_string(t, row->binary));
		if (!f) {
			rc = kiln_error_set(err, ENOMEM, "regression: out of memory");
			break;
		}
		f->total[col] = (double)row->cum / (double)total;
		f->self[col] = (double)row->flat / (double)total;
	}
	query_top_free(top);
	return rc;
}

/* ---- statistics ------------------------------------------------------------ */

struct ranked {
	double v;
	int side;
};

static int cmp_ranked(const void *a, const void *b)
{
	double x = ((const struct ranked *)a)->v, y = ((const struct ranked *)b)->v;
	return (x > y) - (x < y);
}

void query_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *p,
			double *cliff)
{
	size_t n = na + nb;
	struct ranked *all = malloc((n ? n : 1) * sizeof(*all));
	double rank_sum_b = 0, tie_term = 0;

	*p = 1;
	*cliff = 0;
	if (!all || !na || !nb) {
		free(all);
		return;
	}
	for (size_t i = 0; i < na; i++)
		all[i] = (struct ranked){a[i], 0};
	for (size_t i = 0; i < nb; i++)
		all[na + i] = (struct ranked){b[i], 1};
	qsort(all, n, sizeof(*all), cmp_ranked);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && all[j].v == all[i].v)
			j++;
		double rank = (double)(i + 1 + j) / 2, t = (double)(j - i);
		for (size_t k = i; k < j; k++)
			if (all[k].side)
				rank_sum_b += rank;
		tie_term += t * t * t - t;
		i = j;
	}
	free(all);

	double u_b = rank_sum_b - (double)nb * (double)(nb + 1) / 2;
	double pairs = (double)na * (double)nb;
	double mean = pairs / 2;
	double var = pairs / 12 * ((double)(n + 1) - tie_term / ((double)n * (double)(n - 1)));
	*cliff = 2 * u_b / pairs - 1;
	if (var <= 0)
		return; /* every window equal: no evidence either way */
	double z = (fabs(u_b - mean) - 0.5) / sqrt(var);
	*p = z <= 0 ? 1 : erfc(z / sqrt(2));
}

static int cmp_p(const void *a, const void *b, void *ctx)
{
	const double *p = ctx;
	double x = p[*(const size_t *)a], y = p[*(const size_t *)b];
	return (x > y) - (x < y);
}

int query_benjamini_hochberg(const double *p, size_t n, double *q)
{
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	double running = 1;

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_p, (void *)p);
	/* q_(i) = min over j >= i of p_(j) * n / j, from the largest p down. */
	for (size_t k = n; k-- > 0;) {
		double v = p[order[k]] * (double)n / (double)(k + 1);
		running = v < running ? v : running;
		q[order[k]] = running;
	}
	free(order);
	return 0;
}

/* ---- the report ------------------------------------------------------------- */

static double mean_of(const double *v, const bool *used, size_t n, size_t *count)
{
	double sum = 0;
	*count = 0;
	for (size_t i = 0; i < n; i++)
		if (used[i])
			sum += v[i], (*count)++;
	return *count ? sum / (double)*count : 0;
}

/* Copies the values of the used windows to out; returns how many. */
static size_t used_values(const double *v, const bool *used, size_t n, double *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (used[i])
			out[k++] = v[i];
	return k;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct query_regress_row *x = a, *y = b;
	/* Regressions first, then improvements, unchanged, not enough data;
	 * within each, the largest growth of total share first. */
	if (x->verdict != y->verdict)
		return (int)x->verdict - (int)y->verdict;
	if (x->delta_total_pp != y->delta_total_pp)
		return x->delta_total_pp < y->delta_total_pp ? 1 : -1;
	return strcmp(x->name, y->name);
}

int query_regress_finish(struct query_regress *r, const struct query_regress_options *opts,
			 struct kiln_error *err)
{
	struct query_regress_options o = opts ? *opts : (struct query_regress_options){0};
	size_t na_all = r->n_windows[0], nb_all = r->n_windows[1];
	double *a = malloc((na_all ? na_all : 1) * sizeof(double));
	double *b = malloc((nb_all ? nb_all : 1) * sizeof(double));
	double *p = malloc((r->n_fns ? r->n_fns : 1) * sizeof(double));
	double *q = malloc((r->n_fns ? r->n_fns : 1) * sizeof(double));
	int rc = 0;

	o.alpha = o.alpha > 0 ? o.alpha : 0.05;
	o.min_windows = o.min_windows ? o.min_windows : 5;
	free(r->rows);
	r->rows = calloc(r->n_fns ? r->n_fns : 1, sizeof(*r->rows));
	if (!a || !b || !p || !q || !r->rows) {
		rc = kiln_error_set(err, ENOMEM, "regression: out of memory");
		goto out;
	}
	r->n_rows = r->n_fns;
	bool enough = query_regress_windows(r, 0) >= o.min_windows &&
		      query_regress_windows(r, 1) >= o.min_windows;
	for (size_t i = 0; i < r->n_fns; i++) {
		struct regress_fn *f = &r->fns[i];
		struct query_regress_row *row = &r->rows[i];
		size_t na = used_values(f->total, r->window_used[0], na_all, a);
		size_t nb = used_values(f->total + na_all, r->window_used[1], nb_all, b);

		row->name = f->name;
		row->binary = f->binary;
		row->a_windows = na;
		row->b_windows = nb;
		row->a_total = mean_of(f->total, r->window_used[0], na_all, &na);
		row->b_total = mean_of(f->total + na_all, r->window_used[1], nb_all, &nb);
		row->a_self = mean_of(f->self, r->window_used[0], na_all, &na);
		row->b_self = mean_of(f->self + na_all, r->window_used[1], nb_all, &nb);
		row->delta_total_pp = 100 * (row->b_total - row->a_total);
		row->delta_self_pp = 100 * (row->b_self - row->a_self);
		query_mann_whitney(a, na, b, nb, &p[i], &row->effect);
		row->p = p[i];
	}
	rc = query_benjamini_hochberg(p, r->n_fns, q);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "regression: out of memory");
		goto out;
	}
	for (size_t i = 0; i < r->n_fns; i++) {
		struct query_regress_row *row = &r->rows[i];
		row->q = q[i];
		if (!enough)
			row->verdict = QUERY_REGRESS_NOT_ENOUGH_DATA;
		else if (row->q <= o.alpha && row->delta_total_pp >= o.threshold_pp)
			row->verdict = QUERY_REGRESS_REGRESSION;
		else if (row->q <= o.alpha && row->delta_total_pp <= -o.threshold_pp)
			row->verdict = QUERY_REGRESS_IMPROVEMENT;
		else
			row->verdict = QUERY_REGRESS_UNCHANGED;
	}
	qsort(r->rows, r->n_rows, sizeof(*r->rows), cmp_rows);
out:
	free(a);
	free(b);
	free(p);
	free(q);
	return rc;
}

const struct query_regress_row *query_regress_rows(const struct query_regress *r, size_t *n)
{
	*n = r->n_rows;
	return r->rows;
}

size_t query_regress_windows(const struct query_regress *r, int side)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_windows[side ? 1 : 0]; i++)
		n += r->window_used[side ? 1 : 0][i];
	return n;
}

const char *query_regress_verdict_name(enum query_regress_verdict v)
{
	static const char *const names[] = {"regression", "improvement", "unchanged",
					    "not_enough_data"};
	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "unknown";
}

int query_regress_write_json(const struct query_regress *r, const struct query_regress_options *o,
			     size_t limit, struct buf *out)
{
	struct json_writer w;
	size_t n = limit && limit < r->n_rows ? limit : r->n_rows;

	json_writer_init(&w, out);
	json_begin_object(&w);
	json_key(&w, "test");
	json_string(&w, "mann-whitney-u on per-window total shares, benjamini-hochberg");
	json_key(&w, "alpha");
	json_double(&w, o && o->alpha > 0 ? o->alpha : 0.05);
	json_key(&w, "threshold_pp");
	json_double(&w, o ? o->threshold_pp : 0);
	json_key(&w, "unit");
	json_string(&w, r->unit);
	json_key(&w, "a_windows");
	json_int(&w, (int64_t)query_regress_windows(r, 0));
	json_key(&w, "b_windows");
	json_int(&w, (int64_t)query_regress_windows(r, 1));
	json_key(&w, "rows");
	json_begin_array(&w);
	for (size_t i = 0; i < n; i++) {
		const struct query_regress_row *row = &r->rows[i];
		json_begin_object(&w);
		json_key(&w, "name");
		json_string(&w, row->name);
		json_key(&w, "binary");
		json_string(&w, row->binary);
		json_key(&w, "verdict");
		json_string(&w, query_regress_verdict_name(row->verdict));
		json_key(&w, "a_total_share");
		json_double(&w, row->a_total);
		json_key(&w, "b_total_share");
		json_double(&w, row->b_total);
		json_key(&w, "a_self_share");
		json_double(&w, row->a_self);
		json_key(&w, "b_self_share");
		json_double(&w, row->b_self);
		json_key(&w, "delta_total_pp");
		json_double(&w, row->delta_total_pp);
		json_key(&w, "delta_self_pp");
		json_double(&w, row->delta_self_pp);
		json_key(&w, "p");
		json_double(&w, row->p);
		json_key(&w, "q");
		json_double(&w, row->q);
		json_key(&w, "effect");
		json_double(&w, row->effect);
		json_end_object(&w);
	}
	json_end_array(&w);
	json_end_object(&w);
	return json_writer_error(&w);
}
