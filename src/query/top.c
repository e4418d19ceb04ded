/*
 * top.c — the top table: flat and cumulative value per function.
 *
 * Built from a finished tree in one pre-order pass. A function's flat value
 * is the sum of its nodes' self values; its cum value is the sum of cum over
 * its nodes that have no ancestor of the same function, so recursion is
 * counted once (as pprof does). The pass keeps the current root-to-node
 * path and, per frame, how often it occurs on that path.
 */
#include "common/satadd.h"
#include "query/query_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct top_acc {
	int64_t flat, cum, base_flat, base_cum;
	bool seen;
};

static int cmp_rows(const void *a, const void *b, void *ctx)
{
	const struct query_top_row *x = a, *y = b;
	const struct query_tree *t = ctx;
	int c;

	if (x->flat != y->flat)
		return x->flat > y->flat ? -1 : 1;
	if (x->cum != y->cum)
		return x->cum > y->cum ? -1 : 1;
	c = strcmp(t->strs[x->name], t->strs[y->name]);
	if (c)
		return c;
	return strcmp(t->strs[x->binary], t->strs[y->binary]);
}

int query_top_build(const struct query_tree *t, struct query_top **out, struct kiln_error *err)
{
	struct top_acc *acc = NULL;
	uint32_t *on_path = NULL, *path = NULL;
	size_t depth = 0, n_rows = 0;
	struct query_top *top = NULL;
	int rc = -ENOMEM;

	*out = NULL;
	if (!t->finished)
		return kiln_error_set(err, EINVAL, "top: tree not finished");
	acc = calloc(t->n_frames + 1, sizeof(*acc));
	on_path = calloc(t->n_frames + 1, sizeof(*on_path));
	path = malloc((t->height + 2) * sizeof(*path));
	top = calloc(1, sizeof(*top));
	if (!acc || !on_path || !path || !top)
		goto out;

	for (size_t i = 1; i < t->n_nodes; i++) {
		const struct qnode *n = &t->nodes[i];
		struct top_acc *a = &acc[n->frame];

		/* path[d] holds the frame at depth d + 1 of the current node */
		while (depth >= n->depth) {
			on_path[path[depth - 1]]--;
			depth--;
		}
		sat_acc_i64(&a->flat, n->self);
		sat_acc_i64(&a->base_flat, n->base_self);
		if (!on_path[n->frame]) {
			sat_acc_i64(&a->cum, n->cum);
			sat_acc_i64(&a->base_cum, n->base_cum);
		}
		if (!a->seen) {
			a->seen = true;
			n_rows++;
		}
		on_path[n->frame]++;
		path[depth++] = n->frame;
	}

	top->tree = t;
	top->rows = calloc(n_rows + 1, sizeof(*top->rows));
	if (!top->rows)
		goto out;
	for (size_t f = 0; f < t->n_frames; f++) {
		struct query_top_row *r;

		if (!acc[f].seen)
			continue;
		r = &top->rows[top->n_rows++];
		r->name = t->frames[f].name;
		r->binary = t->frames[f].binary;
		r->file = t->frames[f].file;
		r->line = t->frames[f].line;
		r->flat = acc[f].flat;
		r->cum = acc[f].cum;
		if (t->diff) {
			r->diff_flat = acc[f].flat - acc[f].base_flat;
			r->diff_cum = acc[f].cum - acc[f].base_cum;
		}
	}
	qsort_r(top->rows, top->n_rows, sizeof(*top->rows), cmp_rows, (void *)t);
	*out = top;
	top = NULL;
	rc = 0;
out:
	if (rc)
		kiln_error_set(err, ENOMEM, "top: out of memory");
	query_top_free(top);
	free(acc);
	free(on_path);
	free(path);
	return rc;
}

void query_top_free(struct query_top *top)
{
	if (!top)
		return;
	free(top->rows);
	free(top);
}

int query_top_write_json(const struct query_top *top, size_t limit, struct buf *out)
{
	const struct query_tree *t = top->tree;
	struct json_writer w;
	size_t n = limit && limit < top->n_rows ? limit : top->n_rows;

	json_writer_init(&w, out);
	json_begin_object(&w);
	json_key(&w, "unit");
	json_string(&w, t->strs[t->unit]);
	json_key(&w, "total");
	json_int(&w, t->total);
	json_key(&w, "filtered");
	json_int(&w, t->filtered);
	json_key(&w, "rows");
	json_begin_array(&w);
	for (size_t i = 0; i < n; i++) {
		const struct query_top_row *r = &top->rows[i];

		json_begin_object(&w);
		json_key(&w, "name");
		json_string(&w, t->strs[r->name]);
		json_key(&w, "binary");
		json_string(&w, t->strs[r->binary]);
		json_key(&w, "file");
		json_string(&w, t->strs[r->file]);
		json_key(&w, "line");
		json_int(&w, r->line);
		json_key(&w, "flat");
		json_int(&w, r->flat);
		json_key(&w, "cum");
		json_int(&w, r->cum);
		if (t->diff) {
			json_key(&w, "diff_flat");
			json_int(&w, r->diff_flat);
			json_key(&w, "diff_cum");
			json_int(&w, r->diff_cum);
		}
		json_end_object(&w);
	}
	json_end_array(&w);
	json_end_object(&w);
	return json_writer_error(&w);
}

/* ---- text ------------------------------------------------------------------ */

/* Formats v in the unit's natural scale the way pprof does: "1.50s",
 * "120ms", "3.20MB", plain numbers for counts. */
void query_format_value(char *dst, size_t size, int64_t v, const char *unit)
{
	static const struct {
		const char *unit;
		const char *names[5];
		double steps[5];
	} scales[] = {
	    {"nanoseconds", {"ns", "us", "ms", "s", NULL}, {1, 1e3, 1e6, 1e9, 0}},
	    {"microseconds", {"us", "ms", "s", NULL, NULL}, {1, 1e3, 1e6, 0, 0}},
	    {"milliseconds", {"ms", "s", NULL, NULL, NULL}, {1, 1e3, 0, 0, 0}},
	    {"seconds", {"s", NULL, NULL, NULL, NULL}, {1, 0, 0, 0, 0}},
	    {"bytes",
	     {"B", "kB", "MB", "GB", "TB"},
	     {1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0}},
	};
	double a = v < 0 ? -(double)v : (double)v;

	for (size_t s = 0; s < sizeof(scales) / sizeof(scales[0]); s++) {
		size_t k = 0;
		double x;
		char num[32];
		size_t len;

		if (strcmp(unit, scales[s].unit))
			continue;
		while (k + 1 < 5 && scales[s].names[k + 1] && a >= scales[s].steps[k + 1])
			k++;
		x = (double)v / scales[s].steps[k];
		if (k == 0) {
			snprintf(dst, size, "%" PRId64 "%s", v, scales[s].names[0]);
			return;
		}
		/* two decimals, ".00" dropped, as pprof prints: 1.50s, 2s */
		snprintf(num, sizeof(num), "%.2f", x);
		len = strlen(num);
		if (len > 3 && !strcmp(num + len - 3, ".00"))
			num[len - 3] = '\0';
		snprintf(dst, size, "%s%s", num, scales[s].names[k]);
		return;
	}
	snprintf(dst, size, "%" PRId64, v);
}

void query_format_percent(char *dst, size_t size, int64_t v, int64_t total)
{
	double p = total ? 100.0 * (double)v / (double)total : 0;

	if (p == 100.0)
		snprintf(dst, size, "100%%");
	else
		snprintf(dst, size, "%.2f%%", p);
}

int query_top_write_text(const struct query_top *top, size_t limit, struct buf *out)
{
	const struct query_tree *t = top->tree;
	const char *unit = t->strs[t->unit];
	size_t n = limit && limit < top->n_rows ? limit : top->n_rows;
	char a[48], b[48], c[48], d[48], e[48], f[48], g[48];
	int64_t shown = 0, sum = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		shown += top->rows[i].flat;
	query_format_value(a, sizeof(a), shown, unit);
	query_format_percent(b, sizeof(b), shown, t->filtered);
	query_format_value(c, sizeof(c), t->filtered, unit);
	rc = buf_printf(out, "Showing nodes accounting for %s, %s of %s total\n", a, b, c);
	if (!rc && n < top->n_rows)
		rc = buf_printf(out, "Showing top %zu nodes out of %zu\n", n, top->n_rows);
	if (!rc)
		rc = buf_printf(out, "%10s %6s %6s %10s %6s%s\n", "flat", "flat%", "sum%", "cum",
				"cum%", t->diff ? "  diff_flat   diff_cum" : "");
	for (size_t i = 0; !rc && i < n; i++) {
		const struct query_top_row *r = &top->rows[i];
		const char *bin = t->strs[r->binary];
		const char *slash = strrchr(bin, '/');

		sum += r->flat;
		query_format_value(a, sizeof(a), r->flat, unit);
		query_format_percent(b, sizeof(b), r->flat, t->filtered);
		query_format_percent(c, sizeof(c), sum, t->filtered);
		query_format_value(d, sizeof(d), r->cum, unit);
		query_format_percent(e, sizeof(e), r->cum, t->filtered);
		rc = buf_printf(out, "%10s %6s %6s %10s %6s", a, b, c, d, e);
		if (!rc && t->diff) {
			query_format_value(f, sizeof(f), r->diff_flat, unit);
			query_format_value(g, sizeof(g), r->diff_cum, unit);
			rc = buf_printf(out, " %10s %10s", f, g);
		}
		if (!rc)
			rc = buf_printf(out, "  %s", t->strs[r->name]);
		if (!rc && bin[0])
			rc = buf_printf(out, " [%s]", slash ? slash + 1 : bin);
		if (!rc)
			rc = buf_append(out, "\n", 1);
	}
	return rc;
}
