/*
 * http_api.c — the HTTP/JSON API (docs/API.md): the QueryService
 * operations for the web UI, curl and kilnctl.
 *
 * Times are milliseconds since the epoch. Unset ranges mean "all time" for
 * profile-types/labels/values, and the last hour for merges. Errors are
 * {"error":..., "position":N} with the byte offset of a query parse error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/grow.h"
#include "common/clock.h"
#include "common/json.h"
#include "server/handlers.h"
#include "server/internal.h"
#include "server/qexec.h"
#include "store/store.h"

/* Parses integer argument `name`; *present says whether it was given. */
static int arg_int(const struct http_request *req, struct http_response *resp, const char *name,
		   int64_t dflt, int64_t *out)
{
	const char *v = http_arg(req, name);
	if (!v || !*v) {
		*out = dflt;
		return 0;
	}
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || *end) {
		http_error(resp, 400, -1, "parameter %s=\"%.64s\": expected an integer (ms)", name,
			   v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static void fail(struct http_response *resp, int rc, const struct kiln_error *err, long pos)
{
	http_error(resp, http_status_from_errno(rc), pos, "%s",
		   err->msg[0] ? err->msg : "request failed");
}

static void json_done(struct http_response *resp, struct json_writer *w)
{
	if (json_writer_error(w)) {
		http_error(resp, 500, -1, "out of memory writing the response");
		return;
	}
	buf_append_str(&resp->body, "\n");
	resp->content_type = "application/json";
}

/* ---- profile types ------------------------------------------------------------ */

struct types_json {
	struct json_writer *w;
	int rc;
};

static void write_type(void *ctx, const char *key)
{
	struct types_json *tj = ctx;
	if (query_profile_type_write_json(key, tj->w, NULL) != 0)
		tj->rc = -EINVAL;
}

void http_profile_types(const struct http_request *req, struct http_response *resp)
{
	struct kiln_error err = {0};
	struct json_writer w;
	int64_t start, end;

	if (arg_int(req, resp, "start", INT64_MIN, &start) ||
	    arg_int(req, resp, "end", INT64_MAX, &end))
		return;
	json_writer_init(&w, &resp->body);
	json_begin_object(&w);
	json_key(&w, "types");
	json_begin_array(&w);
	struct types_json tj = {.w = &w};
	int rc = store_profile_types(server_store(req->srv), start, end, write_type, &tj, &err);
	if (rc)
		return fail(resp, rc, &err, -1);
	json_end_array(&w);
	json_end_object(&w);
	json_done(resp, &w);
}

/* ---- labels / values ------------------------------------------------------------ */

#define MAX_MATCH_ARGS 32

struct strings_list {
	char **items;
	size_t n, cap;
	int rc;
};

static void add_string(void *ctx, const char *s)
{
	struct strings_list *sl = ctx;
	if (sl->rc)
		return;
	if (GROW_ARRAY(sl->items, sl->cap, sl->n + 1, 32)) {
		sl->rc = -ENOMEM;
		return;
	}
	if (!(sl->items[sl->n] = strdup(s)))
		sl->rc = -ENOMEM;
	else
		sl->n++;
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Label names or values of the series matching ANY `query` argument (repeat
 * it for a union, like the gRPC API's match[]; none = every series), sorted
 * and deduplicated. */
static void list_strings(const struct http_request *req, struct http_response *resp,
			 const char *label, const char *key)
{
	struct kiln_error err = {0};
	struct strings_list sl = {0};
	struct json_writer w;
	const char *qs[MAX_MATCH_ARGS];
	int64_t start, end;
	int rc = 0;

	if (arg_int(req, resp, "start", INT64_MIN, &start) ||
	    arg_int(req, resp, "end", INT64_MAX, &end))
		return;
	size_t nq = http_arg_all(req, "query", qs, MAX_MATCH_ARGS);
	if (nq > MAX_MATCH_ARGS)
		return http_error(resp, 400, -1, "at most %d query arguments", MAX_MATCH_ARGS);
	if (nq == 0)
		qs[nq++] = "";
	for (size_t i = 0; rc == 0 && sl.rc == 0 && i < nq; i++) {
		struct query_selector sel = {0};
		rc = query_parse_compiled(qs[i], QUERY_PARSE_TYPE_OPTIONAL, &sel, &err);
		if (rc) {
			if (nq > 1)
				kiln_error_prefix(&err, "query #%zu: ", i + 1);
			fail(resp, rc, &err, nq > 1 ? -1 : sel.error_position);
			query_selector_release(&sel);
			goto out;
		}
		struct store_selector ss;
		query_selector_to_store(&sel, start, end, &ss);
		rc = label ? store_label_values(server_store(req->srv), &ss, label, add_string, &sl,
						&err)
			   : store_label_names(server_store(req->srv), &ss, add_string, &sl, &err);
		query_selector_release(&sel);
	}
	if (rc || sl.rc) {
		fail(resp, rc ? rc : sl.rc, &err, -1);
		goto out;
	}
	if (sl.n > 1)
		qsort(sl.items, sl.n, sizeof(*sl.items), cmp_cstr);
	json_writer_init(&w, &resp->body);
	json_begin_object(&w);
	json_key(&w, key);
	json_begin_array(&w);
	for (size_t i = 0; i < sl.n; i++)
		if (i == 0 || strcmp(sl.items[i], sl.items[i - 1]) != 0)
			json_string(&w, sl.items[i]);
	json_end_array(&w);
	json_end_object(&w);
	json_done(resp, &w);
out:
	for (size_t i = 0; i < sl.n; i++)
		free(sl.items[i]);
	free(sl.items);
}

void http_labels(const struct http_request *req, struct http_response *resp)
{
	list_strings(req, resp, NULL, "names");
}

void http_values(const struct http_request *req, struct http_response *resp)
{
	const char *label = http_arg(req, "label");
	if (!label || !*label)
		return http_error(resp, 400, -1, "parameter label is required");
	list_strings(req, resp, label, "values");
}

/* ---- query_range ------------------------------------------------------------------ */

struct range_json {
	struct json_writer *w;
	int64_t step;
	struct query_range_group *group; /* sum_by or limit: series go here first */
	int rc;
};

static void write_series(void *ctx, const struct label *labels, size_t n_labels,
			 const struct store_point *points, size_t n_points)
{
	struct range_json *rj = ctx;
	struct json_writer *w = rj->w;
	json_begin_object(w);
	json_key(w, "labels");
	json_begin_object(w);
	for (size_t i = 0; i < n_labels; i++) {
		json_key(w, labels[i].name);
		json_string(w, labels[i].value);
	}
	json_end_object(w);
	json_key(w, "points");
	json_begin_array(w);
	for (size_t i = 0; i < n_points;) {
		int64_t t = points[i].timestamp_ms, v = 0;
		if (rj->step > 0)
			t -= ((t % rj->step) + rj->step) % rj->step;
		/* Points are time-sorted: a bucket is a run. */
		do {
			v += points[i].value;
			i++;
		} while (rj->step > 0 && i < n_points &&
			 points[i].timestamp_ms -
				 (((points[i].timestamp_ms % rj->step) + rj->step) % rj->step) ==
			     t);
		json_begin_array(w);
		json_int(w, t);
		json_int(w, v);
		json_end_array(w);
	}
	json_end_array(w);
	json_end_object(w);
}

#define MAX_SUM_BY 8

static void group_series(void *ctx, const struct store_label *labels, size_t n_labels,
			 const struct store_point *points, size_t n_points)
{
	struct range_json *rj = ctx;
	if (!rj->rc)
		rj->rc = query_range_group_add(rj->group, labels, n_labels, points, n_points);
}

void http_query_range(const struct http_request *req, struct http_response *resp)
{
	struct query_range_group *group = NULL;
	struct kiln_error err = {0};
	struct query_selector sel = {0};
	struct query_profile_type pt = {0};
	struct json_writer w;
	int64_t now = realtime_ms(), start, end, step;
	int rc;

	if (arg_int(req, resp, "end", now, &end) ||
	    arg_int(req, resp, "start", end - 3600000, &start) ||
	    arg_int(req, resp, "step", 0, &step))
		return;
	if (http_arg(req, "step") && *http_arg(req, "step") && step <= 0)
		return http_error(resp, 400, -1,
				  "parameter step=%lld: must be a positive number of ms (or left "
				  "out)",
				  (long long)step);
	const char *q = http_arg(req, "query");
	if (!q || !*q)
		return http_error(resp, 400, -1, "parameter query is required");
	/* sum_by=a,b and limit=N: PromQL's topk(N, sum by (a, b) (...)), with
	 * the rest as one "other" series. */
	const char *sum_by = http_arg(req, "sum_by");
	int64_t limit;
	if (arg_int(req, resp, "limit", 0, &limit))
		return;
	if (limit < 0 || limit > 10000)
		return http_error(resp, 400, -1, "parameter limit=%lld: expected 0 to 10000",
				  (long long)limit);
	if ((sum_by && *sum_by) || limit) {
		char by_copy[512];
		const char *by[MAX_SUM_BY];
		size_t n_by = 0;
		snprintf(by_copy, sizeof(by_copy), "%s", sum_by ? sum_by : "");
		char *save = NULL;
		for (char *tok = strtok_r(by_copy, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if (n_by == MAX_SUM_BY)
				return http_error(resp, 400, -1, "sum_by: at most %d labels",
						  MAX_SUM_BY);
			by[n_by++] = tok;
		}
		if (!(group = query_range_group_new(by, n_by, step)))
			return http_error(resp, 500, -1, "out of memory");
	}
	rc = query_parse_compiled(q, 0, &sel, &err);
	if (rc) {
		fail(resp, rc, &err, sel.error_position);
		goto out;
	}
	rc = qexec_check_type(req->srv, sel.profile_type, &err);
	if (rc == 0)
		rc = query_profile_type_parse(sel.profile_type, &pt, &err);
	if (rc) {
		fail(resp, rc, &err, -1);
		goto out;
	}
	struct store_selector ss;
	query_selector_to_store(&sel, start, end, &ss);
	json_writer_init(&w, &resp->body);
	json_begin_object(&w);
	json_key(&w, "series");
	json_begin_array(&w);
	struct range_json rj = {.w = &w, .step = step, .group = group};
	rc = store_query_range(server_store(req->srv), &ss, group ? group_series : write_series,
			       &rj, &err);
	if (rc == 0 && group)
		rc = rj.rc ? rj.rc : query_range_group_write_json(group, (size_t)limit, &w);
	if (rc) {
		fail(resp, rc, &err, -1);
		goto out;
	}
	json_end_array(&w);
	json_key(&w, "unit");
	json_string(&w, pt.sample_unit);
	json_end_object(&w);
	json_done(resp, &w);
out:
	query_range_group_free(group);
	query_profile_type_release(&pt);
	query_selector_release(&sel);
}

/* ---- query ------------------------------------------------------------------------- */

/* Reads one selection's parameters (prefix "" or "a_"/"b_"). */
static int read_side(const struct http_request *req, struct http_response *resp, const char *prefix,
		     const char *mode, struct qexec_side *side)
{
	char key[32];
	int64_t now = realtime_ms();

	snprintf(key, sizeof(key), "%squery", prefix);
	side->query = http_arg(req, key);
	if (!side->query || !*side->query) {
		http_error(resp, 400, -1, "parameter %s is required", key);
		return -EINVAL;
	}
	if (strcmp(mode, "single") == 0) {
		snprintf(key, sizeof(key), "%stime", prefix);
		if (!http_arg(req, key)) {
			http_error(resp, 400, -1, "parameter %s is required in single mode", key);
			return -EINVAL;
		}
		if (arg_int(req, resp, key, 0, &side->start_ms))
			return -EINVAL;
		side->end_ms = side->start_ms;
		return 0;
	}
	if (strcmp(mode, "merge") != 0) {
		http_error(resp, 400, -1, "mode \"%.32s\": expected single, merge or diff", mode);
		return -EINVAL;
	}
	snprintf(key, sizeof(key), "%send", prefix);
	if (arg_int(req, resp, key, now, &side->end_ms))
		return -EINVAL;
	snprintf(key, sizeof(key), "%sstart", prefix);
	return arg_int(req, resp, key, side->end_ms - 3600000, &side->start_ms);
}

#define MAX_HIDDEN 32

/* A number parameter within [lo, hi]; dflt when absent. */
static int arg_double(const struct http_request *req, struct http_response *resp, const char *name,
		      double dflt, double lo, double hi, double *out)
{
	const char *v = http_arg(req, name);
	char *end;

	*out = dflt;
	if (!v || !*v)
		return 0;
	errno = 0;
	*out = strtod(v, &end);
	if (errno || *end || !(*out >= lo && *out <= hi)) {
		http_error(resp, 400, -1, "parameter %s=\"%.64s\": expected a number from %g to %g",
			   name, v, lo, hi);
		return -EINVAL;
	}
	return 0;
}

/* report=regression (diff mode only): the deploy-regression report. */
static void http_regression(const struct http_request *req, struct http_response *resp,
			    const struct qexec_request *qr)
{
	struct query_regress_options o = {0};
	struct query_regress *rep = NULL;
	struct kiln_error err = {0};
	double buckets, limit;
	int rc;

	if (qr->mode != QEXEC_DIFF)
		return http_error(resp, 400, -1,
				  "report regression compares two sides: use mode=diff with a_ "
				  "and b_ parameters");
	if (arg_double(req, resp, "buckets", 12, 2, 200, &buckets) ||
	    arg_double(req, resp, "alpha", 0.05, 1e-6, 0.5, &o.alpha) ||
	    arg_double(req, resp, "threshold", 1, 0, 100, &o.threshold_pp) ||
	    arg_double(req, resp, "limit", 0, 0, 1e6, &limit))
		return;
	rc = qexec_regress(req->srv, qr, (size_t)buckets, &o, &rep, &err);
	if (rc == 0)
		rc = query_regress_write_json(rep, &o, (size_t)limit, &resp->body);
	if (rc)
		fail(resp, rc, &err, -1);
	else
		resp->content_type = "application/json";
	query_regress_free(rep);
}

void http_query(const struct http_request *req, struct http_response *resp)
{
	struct kiln_error err = {0};
	struct qexec_request qr = {0};
	struct qexec_result res = {0};
	const char *hidden[MAX_HIDDEN];
	char hide_copy[1024];
	int rc;

	const char *mode = http_arg(req, "mode");
	const char *report = http_arg(req, "report");
	mode = mode && *mode ? mode : "merge";
	report = report && *report ? report : "flamegraph";
	if (strcmp(mode, "diff") == 0) {
		const char *am = http_arg(req, "a_mode"), *bm = http_arg(req, "b_mode");
		qr.mode = QEXEC_DIFF;
		if (read_side(req, resp, "a_", am && *am ? am : "merge", &qr.a) ||
		    read_side(req, resp, "b_", bm && *bm ? bm : "merge", &qr.b))
			return;
	} else {
		qr.mode = strcmp(mode, "single") == 0 ? QEXEC_SINGLE : QEXEC_MERGE;
		if (read_side(req, resp, "", mode, &qr.a))
			return;
	}
	if (qr.mode == QEXEC_DIFF && qexec_diff_scale(&qr, http_arg(req, "diff_normalize")))
		return http_error(resp, 400, -1,
				  "diff_normalize \"%.32s\": expected absolute, total or duration",
				  http_arg(req, "diff_normalize"));
	const char *filter = http_arg(req, "filter");
	qr.filter = filter && *filter ? filter : NULL;
	const char *hide = http_arg(req, "hide_binaries");
	if (hide && *hide) {
		snprintf(hide_copy, sizeof(hide_copy), "%s", hide);
		char *save = NULL;
		for (char *tok = strtok_r(hide_copy, ",", &save);
		     tok && qr.n_hide_binaries < MAX_HIDDEN; tok = strtok_r(NULL, ",", &save))
			hidden[qr.n_hide_binaries++] = tok;
		qr.hide_binaries = hidden;
	}
	static const char *const rule_args[] = {"focus", "ignore", "hide", "prune_from",
						"sandwich"};
	const char **rules[] = {&qr.focus, &qr.ignore, &qr.hide, &qr.prune_from, &qr.sandwich};
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const char *v = http_arg(req, rule_args[i]);
		*rules[i] = v && *v ? v : NULL;
	}
	const char *side = http_arg(req, "sandwich_side");
	if (side && *side && strcmp(side, "callees") && strcmp(side, "callers"))
		return http_error(resp, 400, -1,
				  "sandwich_side \"%.32s\": expected callers or callees", side);
	qr.sandwich_side =
	    side && strcmp(side, "callers") == 0 ? QUERY_SANDWICH_CALLERS : QUERY_SANDWICH_CALLEES;

	if (strcmp(report, "regression") == 0)
		return http_regression(req, resp, &qr);
	bool tree_report = strcmp(report, "flamegraph") == 0 || strcmp(report, "top") == 0 ||
			   strcmp(report, "folded") == 0;
	if (!tree_report && strcmp(report, "pprof") != 0)
		return http_error(resp, 400, -1,
				  "report \"%.32s\": expected flamegraph, top, pprof, folded or "
				  "regression",
				  report);
	const char *group_by = http_arg(req, "group_by");
	qr.group_by = group_by && *group_by ? group_by : NULL;
	if (!tree_report && qr.group_by)
		return http_error(resp, 400, -1,
				  "group_by applies to the flamegraph, top and folded reports");
	if (!tree_report && (qr.focus || qr.ignore || qr.hide || qr.prune_from || qr.sandwich))
		return http_error(resp, 400, -1,
				  "focus, ignore, hide, prune_from and sandwich apply to the "
				  "flamegraph, top and folded reports, not to pprof (use go tool "
				  "pprof's own -focus... on the pprof)");
	qr.tree = tree_report;
	qr.pprof = !tree_report;
	int64_t t0 = mono_ns(), cpu0 = thread_cpu_ns();
	rc = qexec_run(req->srv, &qr, &res, &err);
	if (rc) {
		fail(resp, rc, &err, res.error_position);
		goto out;
	}
	int64_t t1 = mono_ns();
	if (!tree_report) {
		rc = qexec_pprof(&qr, &res, &resp->body, &err);
		if (rc) {
			fail(resp, rc, &err, -1);
			goto out;
		}
		resp->content_type = "application/octet-stream";
		snprintf(resp->disposition, sizeof(resp->disposition),
			 "attachment; filename=profile.pb.gz");
		goto out;
	}
	rc = qexec_build_tree(&qr, &res, &err);
	if (rc) {
		fail(resp, rc, &err, -1);
		goto out;
	}
	int64_t t2 = mono_ns();
	if (strcmp(report, "flamegraph") == 0) {
		rc = query_tree_write_json(res.tree, &resp->body);
		resp->content_type = "application/json";
	} else if (strcmp(report, "folded") == 0) {
		rc = query_tree_write_folded(res.tree, &resp->body);
		resp->content_type = "text/plain; charset=utf-8";
	} else {
		struct query_top *top = NULL;
		rc = query_top_build(res.tree, &top, &err);
		if (rc == 0)
			rc = query_top_write_json(top, 0, &resp->body);
		query_top_free(top);
		resp->content_type = "application/json";
	}
	if (rc) {
		fail(resp, rc, &err, -1);
		goto out;
	}
	/* The phases of the answer, for the browser's devtools and bench-ui. */
	snprintf(resp->timing, sizeof(resp->timing),
		 "merge;dur=%.1f, tree;dur=%.1f, encode;dur=%.1f, cpu;dur=%.1f",
		 (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, (double)(mono_ns() - t2) / 1e6,
		 (double)(thread_cpu_ns() - cpu0) / 1e6);
out:
	qexec_result_release(&res);
}
