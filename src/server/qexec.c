/*
 * qexec.c — query execution shared by gRPC and HTTP (see qexec.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "server/qexec.h"
#include "store/store.h"

struct type_check {
	const char *want;
	bool found;
	struct buf known;
	size_t n;
};

static void collect_type(void *ctx, const char *t)
{
	struct type_check *tc = ctx;
	if (strcmp(t, tc->want) == 0)
		tc->found = true;
	if (tc->n < 8)
		buf_printf(&tc->known, "%s%s", tc->n ? ", " : "", t);
	tc->n++;
}

int qexec_check_type(struct server *s, const char *profile_type, struct kiln_error *err)
{
	struct type_check tc = {.want = profile_type};
	int rc = store_profile_types(server_store(s), INT64_MIN, INT64_MAX, collect_type, &tc, err);
	if (rc == 0 && !tc.found) {
		buf_terminate(&tc.known);
		rc = kiln_error_set(err, ENOENT, "unknown profile type \"%s\"; known types: %s%s",
				    profile_type, tc.n ? (const char *)tc.known.data : "(none yet)",
				    tc.n > 8 ? ", ..." : "");
	}
	buf_free(&tc.known);
	return rc;
}

#define MAX_GROUPS 1000

struct group_values {
	char **v;
	size_t n;
	int rc;
};

static void collect_value(void *ctx, const char *value)
{
	struct group_values *g = ctx;
	if (g->rc || g->n == MAX_GROUPS) {
		g->rc = g->rc ? g->rc : -E2BIG;
		return;
	}
	if (!(g->v[g->n] = strdup(value)))
		g->rc = -ENOMEM;
	else
		g->n++;
}

/* Folds ss into tree once per value of label `by` (and once for series
 * without it), each under a first frame "by=value". */
static int add_grouped(struct server *s, const struct store_selector *ss, const char *by,
		       struct query_tree *tree, enum query_side side, struct kiln_error *err)
{
	struct group_values g = {.v = calloc(MAX_GROUPS, sizeof(char *))};
	struct store_matcher *m = calloc(ss->n_matchers + 1, sizeof(*m));
	struct store_selector gs = *ss;
	struct buf text = {0};
	int rc = -ENOMEM;

	if (!g.v || !m)
		goto out;
	rc = store_label_values(server_store(s), ss, by, collect_value, &g, err);
	if (rc == 0 && g.rc == -E2BIG)
		rc = kiln_error_set(err, E2BIG,
				    "group_by %s: more than %d values in range; add matchers", by,
				    MAX_GROUPS);
	else if (rc == 0)
		rc = g.rc;
	if (rc)
		goto out;
	memcpy(m, ss->matchers, ss->n_matchers * sizeof(*m));
	m[ss->n_matchers].op = STORE_MATCH_EQ;
	m[ss->n_matchers].name = (char *)by;
	gs.matchers = m;
	gs.n_matchers = ss->n_matchers + 1;
	/* i == n: the series without the label ("=" to "" matches them). */
	for (size_t i = 0; rc == 0 && i <= g.n; i++) {
		m[ss->n_matchers].value = i < g.n ? g.v[i] : "";
		buf_reset(&text);
		rc = buf_printf(&text, "%s=%s", by, i < g.n ? g.v[i] : "(none)");
		if (rc == 0)
			rc = buf_terminate(&text);
		if (rc == 0)
			rc = query_tree_set_group(tree, (const char *)text.data);
		if (rc == 0)
			rc = query_tree_add_store(tree, server_store(s), &gs, side, NULL, err);
	}
	if (rc == -ENOMEM)
		kiln_error_set(err, ENOMEM, "group_by: out of memory");
	query_tree_set_group(tree, NULL);
out:
	for (size_t i = 0; g.v && i < g.n; i++)
		free(g.v[i]);
	free(g.v);
	free(m);
	buf_free(&text);
	return rc;
}

/* Parses, checks and merges one selection: into *out (which stays NULL when
 * nothing matched), or with tree set folded into tree on that side (one
 * first-level frame per value of group_by, when set). */
static int select_merge(struct server *s, const struct qexec_side *side, struct query_tree *tree,
			enum query_side tree_side, const char *group_by, struct pprof_profile **out,
			struct query_profile_type *type, long *pos, struct qexec_result *stream,
			struct kiln_error *err)
{
	struct query_selector sel = {0};
	struct pprof_builder *b = NULL;
	int rc;

	*out = NULL;
	rc = query_parse_compiled(side->query ? side->query : "", 0, &sel, err);
	if (rc) {
		*pos = sel.error_position;
		goto out;
	}
	rc = qexec_check_type(s, sel.profile_type, err);
	if (rc)
		goto out;
	if (type && !type->storage) {
		rc = query_profile_type_parse(sel.profile_type, type, err);
		if (rc)
			goto out;
	}
	struct store_selector ss;
	query_selector_to_store(&sel, side->start_ms, side->end_ms, &ss);
	if (tree && group_by) {
		rc = add_grouped(s, &ss, group_by, tree, tree_side, err);
		goto out;
	}
	if (tree) {
		rc = query_tree_add_store(tree, server_store(s), &ss, tree_side, NULL, err);
		goto out;
	}
	if (stream) {
		struct store_pprof_result pr;

		rc = store_merge_pprof(server_store(s), &ss, true, &stream->pprof, &pr, err);
		stream->pprof_total = pr.total;
		stream->pprof_streamed = pr.n_samples > 0;
		goto out;
	}
	b = pprof_builder_new();
	if (!b) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = store_merge(server_store(s), &ss, b, err);
	if (rc == 0 && pprof_builder_sample_count(b) > 0)
		rc = pprof_builder_to_profile(b, out, err);
out:
	pprof_builder_free(b);
	query_selector_release(&sel);
	return rc;
}

static int new_tree(const struct qexec_request *r, struct query_tree **out, struct kiln_error *err)
{
	struct query_tree_options o = {
	    .diff = r->mode == QEXEC_DIFF,
	    .filter = r->filter,
	    .hide_binaries = r->hide_binaries,
	    .n_hide_binaries = r->n_hide_binaries,
	    .trim_fraction = r->trim_fraction,
	    .focus = r->focus,
	    .ignore = r->ignore,
	    .hide = r->hide,
	    .prune_from = r->prune_from,
	    .sandwich = r->sandwich,
	    .sandwich_side = r->sandwich_side,
	    .diff_scale = r->diff_scale,
	    .base_factor = r->base_factor,
	};

	return query_tree_create(&o, out, err);
}

int qexec_run(struct server *s, const struct qexec_request *r, struct qexec_result *out,
	      struct kiln_error *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->error_position = -1;
	if (r->a.start_ms > r->a.end_ms || (r->mode == QEXEC_DIFF && r->b.start_ms > r->b.end_ms))
		return kiln_error_set(err, EINVAL, "time range: start is after end");
	if (r->tree && (rc = new_tree(r, &out->tree, err)))
		return rc;
	rc = select_merge(s, &r->a, out->tree,
			  r->mode == QEXEC_DIFF ? QUERY_SIDE_BASE : QUERY_SIDE_SINGLE, r->group_by,
			  &out->a, &out->type, &out->error_position,
			  r->pprof && r->mode != QEXEC_DIFF ? out : NULL, err);
	if (rc) {
		if (r->mode == QEXEC_DIFF) {
			out->error_side = 'a';
			kiln_error_prefix(err, "a: ");
		}
		return rc;
	}
	if (r->mode == QEXEC_DIFF) {
		rc = select_merge(s, &r->b, out->tree, QUERY_SIDE_COMPARE, r->group_by, &out->b,
				  NULL, &out->error_position, NULL, err);
		if (rc) {
			out->error_side = 'b';
			kiln_error_prefix(err, "b: ");
		}
	}
	return rc;
}

int qexec_build_tree(const struct qexec_request *r, struct qexec_result *res,
		     struct kiln_error *err)
{
	int rc = 0;

	if (res->tree) /* folded by qexec_run */
		return query_tree_finish(res->tree, err);
	if ((rc = new_tree(r, &res->tree, err)))
		return rc;
	if (r->mode == QEXEC_DIFF) {
		if (res->a)
			rc = query_tree_add(res->tree, res->a, -1, QUERY_SIDE_BASE, err);
		if (rc == 0 && res->b)
			rc = query_tree_add(res->tree, res->b, -1, QUERY_SIDE_COMPARE, err);
	} else if (res->a) {
		rc = query_tree_add(res->tree, res->a, -1, QUERY_SIDE_SINGLE, err);
	}
	if (rc == 0)
		rc = query_tree_finish(res->tree, err);
	return rc;
}

int64_t qexec_profile_total(const struct pprof_profile *p)
{
	if (!p)
		return 0;
	int idx = pprof_sample_type_index(p, NULL, NULL);
	if (idx < 0)
		return 0;
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t total = 0;
	for (size_t i = 0; i < m->n_sample; i++)
		if ((size_t)idx < m->sample[i]->n_value)
			total += m->sample[i]->value[idx];
	return total;
}

int64_t qexec_pprof_total(const struct qexec_request *r, const struct qexec_result *res)
{
	if (r->mode != QEXEC_DIFF && res->pprof_streamed)
		return res->pprof_total;
	return qexec_profile_total(r->mode == QEXEC_DIFF ? res->b : res->a);
}

int qexec_pprof(const struct qexec_request *r, struct qexec_result *res, struct buf *out,
		struct kiln_error *err)
{
	const struct query_profile_type *t = &res->type;
	int rc = 0;

	if (r->mode != QEXEC_DIFF && res->pprof.len) {
		if (out->len)
			return buf_append(out, res->pprof.data, res->pprof.len);
		buf_free(out);
		*out = res->pprof; /* handed over: no second copy */
		memset(&res->pprof, 0, sizeof(res->pprof));
		return 0;
	}
	if (r->mode != QEXEC_DIFF && res->a)
		return pprof_encode(pprof_profile_msg(res->a), true, out);

	struct pprof_builder *b = pprof_builder_new();
	if (!b)
		return kiln_error_set(err, ENOMEM, "out of memory");
	if (res->a && r->mode == QEXEC_DIFF)
		rc = pprof_builder_merge_scaled(b, res->a, -1.0, err);
	if (rc == 0 && res->b)
		rc = pprof_builder_merge(b, res->b, err);
	if (rc == 0 && pprof_builder_sample_count(b) == 0 && t->storage) {
		/* Nothing matched: an empty profile that still says what it is. */
		pprof_builder_add_sample_type(b, t->sample_type, t->sample_unit);
		pprof_builder_set_period(b, t->period_type, t->period_unit, 0);
	}
	if (rc == 0)
		rc = pprof_builder_encode(b, true, out);
	pprof_builder_free(b);
	return rc;
}

void qexec_result_release(struct qexec_result *res)
{
	pprof_profile_free(res->a);
	pprof_profile_free(res->b);
	query_profile_type_release(&res->type);
	query_tree_free(res->tree);
	buf_free(&res->pprof);
	memset(res, 0, sizeof(*res));
}

int qexec_diff_scale(struct qexec_request *r, const char *name)
{
	int64_t a_len = r->a.end_ms - r->a.start_ms + 1, b_len = r->b.end_ms - r->b.start_ms + 1;
	bool ranges = r->a.end_ms > r->a.start_ms && r->b.end_ms > r->b.start_ms;

	r->diff_scale = QUERY_DIFF_ABSOLUTE;
	r->base_factor = 1;
	if (!name || !*name)
		name = ranges && a_len != b_len ? "duration" : "absolute";
	if (strcmp(name, "total") == 0) {
		r->diff_scale = QUERY_DIFF_BY_TOTAL;
	} else if (strcmp(name, "duration") == 0) {
		/* Single profiles have no length of their own here: as they are. */
		if (ranges) {
			r->diff_scale = QUERY_DIFF_BY_FACTOR;
			r->base_factor = (double)b_len / (double)a_len;
		}
	} else if (strcmp(name, "absolute") != 0) {
		return -EINVAL;
	}
	return 0;
}
