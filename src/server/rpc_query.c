/*
 * rpc_query.c — parca.query.v1alpha1.QueryService over gRPC.
 *
 * Requests are unpacked into an arena; responses are built from arena
 * allocated protobuf-c structs and packed into call->resp, so a handler
 * frees everything with one arena_free.
 *
 * Flame graphs are sent as Parca's nested FlamegraphNode tree with each
 * node's function (name, file, start line) and mapping (binary, build id)
 * inline in its meta, for both FLAMEGRAPH_UNSPECIFIED and
 * FLAMEGRAPH_TABLE; TOP as TopNodes with the same meta. Times default to
 * "all time" when a request leaves them unset.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "parca/query/v1alpha1/query.pb-c.h"
#include "server/handlers.h"
#include "server/internal.h"
#include "server/qexec.h"
#include "server/rpc_query_fields.h"
#include "store/store.h"

typedef Parca__Query__V1alpha1__QueryRequest query_req;
typedef Parca__Metastore__V1alpha1__Function pb_function;
typedef Parca__Metastore__V1alpha1__Mapping pb_mapping;

static int64_t ts_ms(const Google__Protobuf__Timestamp *t, int64_t dflt)
{
	if (!t)
		return dflt;
	return t->seconds * 1000 + t->nanos / 1000000;
}

static Google__Protobuf__Timestamp *make_ts(struct arena *a, int64_t ms)
{
	Google__Protobuf__Timestamp *t = arena_alloc(a, sizeof(*t));
	if (!t)
		return NULL;
	google__protobuf__timestamp__init(t);
	t->seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	t->nanos = (int32_t)((ms - t->seconds * 1000) * 1000000);
	return t;
}

/* Packs msg into the call's response. */
static void respond(struct grpc_call *c, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	if (buf_reserve(&c->resp, n)) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED,
			  "out of memory for a %zu-byte response", n);
		return;
	}
	c->resp.len = protobuf_c_message_pack(msg, c->resp.data);
}

static void fail_from(struct grpc_call *c, int rc, const struct kiln_error *err)
{
	grpc_fail(c, rc == -E2BIG ? GRPC_STATUS_RESOURCE_EXHAUSTED : grpc_code_from_errno(rc), "%s",
		  err->msg[0] ? err->msg : "query failed");
}

/* Every handler's start: a fresh arena (*a, freed by the caller even on
 * failure) and the request unpacked into it. NULL once the call has been
 * answered with an error. */
static void *unpack_request(struct grpc_call *c, const ProtobufCMessageDescriptor *d,
			    struct arena **a)
{
	ProtobufCAllocator alloc;
	void *r;

	*a = arena_new(0);
	if (!*a) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	arena_protobuf_allocator(*a, &alloc);
	r = protobuf_c_message_unpack(d, &alloc, c->req_len, c->req);
	if (!r)
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s: not a valid protobuf message",
			  d->short_name);
	return r;
}

/* Room for item n in an arena-allocated pointer array (*items, *cap
 * pointers; the old array stays in the arena). 0 or -ENOMEM. */
static int grow_ptrs(struct arena *a, void *items, size_t *cap, size_t n, size_t first)
{
	void ***arr = items;

	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : first;
	void **p = arena_alloc(a, ncap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (n)
		memcpy(p, *arr, n * sizeof(*p));
	*arr = p;
	*cap = ncap;
	return 0;
}

/* ---- ProfileTypes ------------------------------------------------------------ */

struct types_ctx {
	struct arena *a;
	Parca__Query__V1alpha1__ProfileType **items;
	size_t n, cap;
	int rc;
};

static void add_type(void *ctx, const char *key)
{
	struct types_ctx *tc = ctx;
	struct query_profile_type t = {0};
	if (tc->rc || query_profile_type_parse(key, &t, NULL) != 0)
		return;
	if (grow_ptrs(tc->a, &tc->items, &tc->cap, tc->n, 16)) {
		tc->rc = -ENOMEM;
		goto out;
	}
	Parca__Query__V1alpha1__ProfileType *pt = arena_alloc(tc->a, sizeof(*pt));
	if (!pt) {
		tc->rc = -ENOMEM;
		goto out;
	}
	parca__query__v1alpha1__profile_type__init(pt);
	pt->name = arena_strdup(tc->a, t.name);
	pt->sample_type = arena_strdup(tc->a, t.sample_type);
	pt->sample_unit = arena_strdup(tc->a, t.sample_unit);
	pt->period_type = arena_strdup(tc->a, t.period_type);
	pt->period_unit = arena_strdup(tc->a, t.period_unit);
	pt->delta = t.delta;
	tc->items[tc->n++] = pt;
out:
	query_profile_type_release(&t);
}

void rpc_profile_types(struct grpc_call *c)
{
	struct kiln_error err = {0};
	struct arena *a;
	if (!unpack_request(c, &parca__query__v1alpha1__profile_types_request__descriptor, &a)) {
		arena_free(a);
		return;
	}
	struct types_ctx tc = {.a = a};
	int rc =
	    store_profile_types(server_store(c->srv), INT64_MIN, INT64_MAX, add_type, &tc, &err);
	if (rc || tc.rc) {
		fail_from(c, rc ? rc : tc.rc, &err);
	} else {
		Parca__Query__V1alpha1__ProfileTypesResponse resp =
		    PARCA__QUERY__V1ALPHA1__PROFILE_TYPES_RESPONSE__INIT;
		resp.n_types = tc.n;
		resp.types = tc.items;
		respond(c, &resp.base);
	}
	arena_free(a);
}

/* ---- Labels / Values ------------------------------------------------------------ */

struct strings_ctx {
	struct arena *a;
	char **items;
	size_t n, cap;
	int rc;
};

static void add_string(void *ctx, const char *s)
{
	struct strings_ctx *sc = ctx;
	if (sc->rc)
		return;
	if (grow_ptrs(sc->a, &sc->items, &sc->cap, sc->n, 32)) {
		sc->rc = -ENOMEM;
		return;
	}
	sc->items[sc->n] = arena_strdup(sc->a, s);
	if (!sc->items[sc->n]) {
		sc->rc = -ENOMEM;
		return;
	}
	sc->n++;
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Label names or values of the series matching ANY of `match` (Prometheus'
 * match[] semantics, which Parca follows: each entry is a profile type and/or
 * matchers; the results are unioned), restricted to [start, end]. No entry
 * means every series. The union is sorted and deduplicated here because the
 * store sorts per call only. */
static int list_strings(struct server *s, char **match, size_t n_match, const char *label,
			int64_t start, int64_t end, struct strings_ctx *sc, struct kiln_error *err)
{
	size_t passes = n_match ? n_match : 1;
	int rc = 0;

	for (size_t i = 0; rc == 0 && sc->rc == 0 && i < passes; i++) {
		struct query_selector sel = {0};
		const char *q = n_match ? match[i] : "";
		rc = query_parse_compiled(q, QUERY_PARSE_TYPE_OPTIONAL, &sel, err);
		if (rc == 0) {
			struct store_selector ss;
			query_selector_to_store(&sel, start, end, &ss);
			rc = label ? store_label_values(server_store(s), &ss, label, add_string, sc,
							err)
				   : store_label_names(server_store(s), &ss, add_string, sc, err);
		} else if (n_match > 1) {
			kiln_error_prefix(err, "match[%zu]: ", i);
		}
		query_selector_release(&sel);
	}
	if (rc || sc->rc)
		return rc ? rc : sc->rc;
	if (n_match > 1 && sc->n > 1) {
		qsort(sc->items, sc->n, sizeof(*sc->items), cmp_cstr);
		size_t k = 1;
		for (size_t i = 1; i < sc->n; i++)
			if (strcmp(sc->items[i], sc->items[k - 1]) != 0)
				sc->items[k++] = sc->items[i];
		sc->n = k;
	}
	return 0;
}

/* Answers Labels (label == NULL) or Values (of label) with the sorted
 * distinct strings of the series matching match[] in [start, end]. */
static void answer_strings(struct grpc_call *c, struct arena *a, char **match, size_t n_match,
			   const char *label, const Google__Protobuf__Timestamp *start,
			   const Google__Protobuf__Timestamp *end)
{
	struct kiln_error err = {0};
	struct strings_ctx sc = {.a = a};
	int rc = list_strings(c->srv, match, n_match, label, ts_ms(start, INT64_MIN),
			      ts_ms(end, INT64_MAX), &sc, &err);

	if (rc)
		return fail_from(c, rc, &err);
	if (label) {
		Parca__Query__V1alpha1__ValuesResponse resp =
		    PARCA__QUERY__V1ALPHA1__VALUES_RESPONSE__INIT;
		resp.n_label_values = sc.n;
		resp.label_values = sc.items;
		respond(c, &resp.base);
	} else {
		Parca__Query__V1alpha1__LabelsResponse resp =
		    PARCA__QUERY__V1ALPHA1__LABELS_RESPONSE__INIT;
		resp.n_label_names = sc.n;
		resp.label_names = sc.items;
		respond(c, &resp.base);
	}
}

void rpc_labels(struct grpc_call *c)
{
	struct arena *a;
	Parca__Query__V1alpha1__LabelsRequest *r =
	    unpack_request(c, &parca__query__v1alpha1__labels_request__descriptor, &a);

	if (r)
		answer_strings(c, a, r->match, r->n_match, NULL, r->start, r->end);
	arena_free(a);
}

void rpc_values(struct grpc_call *c)
{
	struct arena *a;
	Parca__Query__V1alpha1__ValuesRequest *r =
	    unpack_request(c, &parca__query__v1alpha1__values_request__descriptor, &a);

	if (r && !r->label_name[0])
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "ValuesRequest: label_name is empty");
	else if (r)
		answer_strings(c, a, r->match, r->n_match, r->label_name, r->start, r->end);
	arena_free(a);
}

/* ---- QueryRange ------------------------------------------------------------------ */

struct range_ctx {
	struct arena *a;
	int64_t step_ms;
	Parca__Query__V1alpha1__ValueType *sample_type, *period_type;
	Parca__Query__V1alpha1__MetricsSeries **series;
	size_t n, cap;
	int rc;
};

static void add_series(void *ctx, const struct label *labels, size_t n_labels,
		       const struct store_point *points, size_t n_points)
{
	struct range_ctx *rc = ctx;
	struct arena *a = rc->a;
	if (rc->rc)
		return;
	if (grow_ptrs(a, &rc->series, &rc->cap, rc->n, 16))
		goto oom;
	Parca__Query__V1alpha1__MetricsSeries *ms = arena_alloc(a, sizeof(*ms));
	Parca__Profilestore__V1alpha1__LabelSet *ls = arena_alloc(a, sizeof(*ls));
	if (!ms || !ls)
		goto oom;
	parca__query__v1alpha1__metrics_series__init(ms);
	parca__profilestore__v1alpha1__label_set__init(ls);
	ls->labels = arena_calloc(a, n_labels + 1, sizeof(*ls->labels));
	if (!ls->labels)
		goto oom;
	for (size_t i = 0; i < n_labels; i++) {
		Parca__Profilestore__V1alpha1__Label *l = arena_alloc(a, sizeof(*l));
		if (!l)
			goto oom;
		parca__profilestore__v1alpha1__label__init(l);
		l->name = arena_strdup(a, labels[i].name);
		l->value = arena_strdup(a, labels[i].value);
		ls->labels[ls->n_labels++] = l;
	}
	ms->labelset = ls;
	ms->sample_type = rc->sample_type;
	ms->period_type = rc->period_type;
	ms->samples = arena_calloc(a, n_points + 1, sizeof(*ms->samples));
	if (!ms->samples)
		goto oom;
	for (size_t i = 0; i < n_points; i++) {
		int64_t t = points[i].timestamp_ms;
		if (rc->step_ms > 0)
			t -= ((t % rc->step_ms) + rc->step_ms) % rc->step_ms;
		if (ms->n_samples && ts_ms(ms->samples[ms->n_samples - 1]->timestamp, 0) == t) {
			ms->samples[ms->n_samples - 1]->value += points[i].value;
			continue;
		}
		Parca__Query__V1alpha1__MetricsSample *s = arena_alloc(a, sizeof(*s));
		if (!s)
			goto oom;
		parca__query__v1alpha1__metrics_sample__init(s);
		s->timestamp = make_ts(a, t);
		s->value = points[i].value;
		ms->samples[ms->n_samples++] = s;
	}
	if (rc->step_ms > 0)
		for (size_t i = 0; i < ms->n_samples; i++)
			ms->samples[i]->value_per_second =
			    (double)ms->samples[i]->value / ((double)rc->step_ms / 1000.0);
	rc->series[rc->n++] = ms;
	return;
oom:
	rc->rc = -ENOMEM;
}

static Parca__Query__V1alpha1__ValueType *value_type(struct arena *a, const char *t, const char *u)
{
	Parca__Query__V1alpha1__ValueType *v = arena_alloc(a, sizeof(*v));
	if (v) {
		parca__query__v1alpha1__value_type__init(v);
		v->type = arena_strdup(a, t);
		v->unit = arena_strdup(a, u);
	}
	return v;
}

void rpc_query_range(struct grpc_call *c)
{
	struct kiln_error err = {0};
	struct arena *a;
	struct query_selector sel = {0};
	struct query_profile_type pt = {0};
	int rc;
	Parca__Query__V1alpha1__QueryRangeRequest *r =
	    unpack_request(c, &parca__query__v1alpha1__query_range_request__descriptor, &a);

	if (!r)
		goto out;
	rc = query_parse_compiled(r->query, 0, &sel, &err);
	if (rc == 0)
		rc = qexec_check_type(c->srv, sel.profile_type, &err);
	if (rc == 0)
		rc = query_profile_type_parse(sel.profile_type, &pt, &err);
	if (rc) {
		fail_from(c, rc, &err);
		goto out;
	}
	struct range_ctx rctx = {.a = a};
	rctx.sample_type = value_type(a, pt.sample_type, pt.sample_unit);
	rctx.period_type = value_type(a, pt.period_type, pt.period_unit);
	if (r->step) {
		rctx.step_ms = r->step->seconds * 1000 + r->step->nanos / 1000000;
		if (rctx.step_ms <= 0) {
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT,
				  "step %llds %dns: must be at least 1ms (or left out)",
				  (long long)r->step->seconds, (int)r->step->nanos);
			goto out;
		}
	}
	/* limit (Grafana sends its panel's max data points): at most that many
	 * samples per series. Without a step that fits, the range is cut into
	 * steps of at least (end - start) / (limit - 1): a range of length R
	 * touches at most R / step + 1 aligned steps. */
	if (r->limit > 0 && r->start && r->end) {
		int64_t span = ts_ms(r->end, 0) - ts_ms(r->start, 0);
		int64_t parts = r->limit > 1 ? (int64_t)r->limit - 1 : 1;
		int64_t need =
		    span > 0 ? (span + parts - 1) / parts + (r->limit == 1 ? span : 0) : 0;
		if (need > rctx.step_ms)
			rctx.step_ms = need;
	}
	struct store_selector ss;
	query_selector_to_store(&sel, ts_ms(r->start, INT64_MIN), ts_ms(r->end, INT64_MAX), &ss);
	Parca__Query__V1alpha1__QueryRangeResponse resp =
	    PARCA__QUERY__V1ALPHA1__QUERY_RANGE_RESPONSE__INIT;
	if (r->n_sum_by) {
		char why[160];
		rc = rpc_query_range_sum_by(a, c->srv, r, &ss, rctx.step_ms, rctx.sample_type,
					    rctx.period_type, &resp, why, sizeof(why), &err);
		if (rc == -EINVAL && !err.msg[0])
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s", why);
		else if (rc)
			fail_from(c, rc, &err);
		else
			respond(c, &resp.base);
		goto out;
	}
	rc = store_query_range(server_store(c->srv), &ss, add_series, &rctx, &err);
	if (rc || rctx.rc) {
		fail_from(c, rc ? rc : rctx.rc, &err);
		goto out;
	}
	resp.n_series = rctx.n;
	resp.series = rctx.series;
	respond(c, &resp.base);
out:
	query_profile_type_release(&pt);
	query_selector_release(&sel);
	arena_free(a);
}

/* ---- Query ------------------------------------------------------------------------ */

/* Function and mapping meta for a tree node (names from the tree's strings). */
static int node_meta(struct arena *a, const struct query_tree *t, uint32_t name, uint32_t binary,
		     uint32_t file, uint32_t build_id, int64_t line, pb_function **fn,
		     pb_mapping **mp)
{
	*fn = arena_alloc(a, sizeof(**fn));
	*mp = NULL;
	if (!*fn)
		return -ENOMEM;
	parca__metastore__v1alpha1__function__init(*fn);
	(*fn)->name = (char *)query_tree_string(t, name);
	(*fn)->filename = (char *)query_tree_string(t, file);
	(*fn)->start_line = line;
	if (binary) {
		*mp = arena_alloc(a, sizeof(**mp));
		if (!*mp)
			return -ENOMEM;
		parca__metastore__v1alpha1__mapping__init(*mp);
		(*mp)->file = (char *)query_tree_string(t, binary);
		(*mp)->build_id = (char *)query_tree_string(t, build_id);
	}
	return 0;
}

static int build_flamegraph(struct arena *a, const struct query_tree *t,
			    Parca__Query__V1alpha1__Flamegraph **out)
{
	size_t n = query_tree_node_count(t);
	Parca__Query__V1alpha1__Flamegraph *fg = arena_alloc(a, sizeof(*fg));
	Parca__Query__V1alpha1__FlamegraphRootNode *root = arena_alloc(a, sizeof(*root));
	Parca__Query__V1alpha1__FlamegraphNode **nodes = arena_calloc(a, n + 1, sizeof(*nodes));
	if (!fg || !root || !nodes)
		return -ENOMEM;
	parca__query__v1alpha1__flamegraph__init(fg);
	parca__query__v1alpha1__flamegraph_root_node__init(root);
	fg->root = root;
	fg->unit = (char *)query_tree_unit(t);
	fg->height = (int32_t)query_tree_height(t);
	fg->total = query_tree_total(t);
	fg->untrimmed_total = fg->total;

	/* Pass 1: create nodes, count children. */
	size_t *nchild = arena_calloc(a, n + 1, sizeof(*nchild));
	if (!nchild)
		return -ENOMEM;
	struct query_node qn;
	for (size_t i = 0; i < n; i++) {
		query_tree_node(t, i, &qn);
		if (qn.parent >= 0)
			nchild[qn.parent]++;
		if (i == 0) {
			root->cumulative = qn.cum;
			root->diff = qn.diff;
			continue;
		}
		Parca__Query__V1alpha1__FlamegraphNode *fn = arena_alloc(a, sizeof(*fn));
		Parca__Query__V1alpha1__FlamegraphNodeMeta *meta = arena_alloc(a, sizeof(*meta));
		if (!fn || !meta)
			return -ENOMEM;
		parca__query__v1alpha1__flamegraph_node__init(fn);
		parca__query__v1alpha1__flamegraph_node_meta__init(meta);
		if (node_meta(a, t, qn.name, qn.binary, qn.file, qn.build_id, qn.line,
			      &meta->function, &meta->mapping))
			return -ENOMEM;
		fn->meta = meta;
		fn->cumulative = qn.cum;
		fn->diff = qn.diff;
		nodes[i] = fn;
	}
	/* Pass 2: children arrays in pre-order (= sorted sibling order). */
	for (size_t i = 0; i < n; i++) {
		if (!nchild[i])
			continue;
		void *arr = arena_calloc(a, nchild[i], sizeof(void *));
		if (!arr)
			return -ENOMEM;
		if (i == 0)
			root->children = arr;
		else
			nodes[i]->children = arr;
	}
	for (size_t i = 1; i < n; i++) {
		query_tree_node(t, i, &qn);
		if (qn.parent == 0)
			root->children[root->n_children++] = nodes[i];
		else {
			Parca__Query__V1alpha1__FlamegraphNode *p = nodes[qn.parent];
			p->children[p->n_children++] = nodes[i];
		}
	}
	*out = fg;
	return 0;
}

static int build_top(struct arena *a, const struct query_tree *t, Parca__Query__V1alpha1__Top **out,
		     struct kiln_error *err)
{
	struct query_top *top = NULL;
	int rc = query_top_build(t, &top, err);
	if (rc)
		return rc;
	Parca__Query__V1alpha1__Top *pt = arena_alloc(a, sizeof(*pt));
	if (!pt) {
		query_top_free(top);
		return -ENOMEM;
	}
	parca__query__v1alpha1__top__init(pt);
	pt->list = arena_calloc(a, top->n_rows + 1, sizeof(*pt->list));
	pt->unit = (char *)query_tree_unit(t);
	if (!pt->list)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < top->n_rows; i++) {
		const struct query_top_row *row = &top->rows[i];
		Parca__Query__V1alpha1__TopNode *tn = arena_alloc(a, sizeof(*tn));
		Parca__Query__V1alpha1__TopNodeMeta *meta = arena_alloc(a, sizeof(*meta));
		if (!tn || !meta) {
			rc = -ENOMEM;
			break;
		}
		parca__query__v1alpha1__top_node__init(tn);
		parca__query__v1alpha1__top_node_meta__init(meta);
		if (node_meta(a, t, row->name, row->binary, row->file, 0, row->line,
			      &meta->function, &meta->mapping)) {
			rc = -ENOMEM;
			break;
		}
		tn->meta = meta;
		tn->flat = row->flat;
		tn->cumulative = row->cum;
		tn->diff = row->diff_cum;
		pt->list[pt->n_list++] = tn;
	}
	pt->reported = (int32_t)pt->n_list;
	pt->total = (int32_t)top->n_rows;
	query_top_free(top);
	*out = pt;
	return rc;
}

static int side_from_merge(const Parca__Query__V1alpha1__MergeProfile *m, struct qexec_side *s)
{
	if (!m)
		return -EINVAL;
	s->query = m->query;
	s->start_ms = ts_ms(m->start, INT64_MIN);
	s->end_ms = ts_ms(m->end, INT64_MAX);
	return 0;
}

static int side_from_single(const Parca__Query__V1alpha1__SingleProfile *p, struct qexec_side *s)
{
	if (!p || !p->time)
		return -EINVAL;
	s->query = p->query;
	s->start_ms = s->end_ms = ts_ms(p->time, 0);
	return 0;
}

static int side_from_diff(const Parca__Query__V1alpha1__ProfileDiffSelection *d,
			  struct qexec_side *s)
{
	if (!d)
		return -EINVAL;
	if (d->options_case == PARCA__QUERY__V1ALPHA1__PROFILE_DIFF_SELECTION__OPTIONS_MERGE)
		return side_from_merge(d->merge, s);
	if (d->options_case == PARCA__QUERY__V1ALPHA1__PROFILE_DIFF_SELECTION__OPTIONS_SINGLE)
		return side_from_single(d->single, s);
	return -EINVAL;
}

/* The mode and selection(s) of r into qr: 0, or -EINVAL with why said. */
static int request_sides(const query_req *r, struct qexec_request *qr, char *why, size_t len)
{
	const char *bad = NULL;

	switch (r->mode) {
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_SINGLE_UNSPECIFIED:
		qr->mode = QEXEC_SINGLE;
		if (r->options_case != PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_SINGLE ||
		    side_from_single(r->single, &qr->a))
			bad = "mode SINGLE needs options.single with a time and a query";
		break;
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_MERGE:
		qr->mode = QEXEC_MERGE;
		if (r->options_case != PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_MERGE ||
		    side_from_merge(r->merge, &qr->a))
			bad = "mode MERGE needs options.merge";
		break;
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__MODE__MODE_DIFF:
		qr->mode = QEXEC_DIFF;
		if (r->options_case != PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__OPTIONS_DIFF ||
		    !r->diff || side_from_diff(r->diff->a, &qr->a) ||
		    side_from_diff(r->diff->b, &qr->b))
			bad = "mode DIFF needs options.diff with selections a and b, each merge or "
			      "single";
		break;
	default:
		snprintf(why, len, "unknown mode %d", (int)r->mode);
		return -EINVAL;
	}
	if (bad)
		snprintf(why, len, "%s", bad);
	return bad ? -EINVAL : 0;
}

void rpc_query(struct grpc_call *c)
{
	struct kiln_error err = {0};
	struct arena *a;
	struct qexec_request qr = {0};
	struct qexec_result res = {0};
	int rc;
	query_req *r = unpack_request(c, &parca__query__v1alpha1__query_request__descriptor, &a);

	if (!r)
		goto out;
	char why[128];
	if (request_sides(r, &qr, why, sizeof(why))) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s", why);
		goto out;
	}
	qr.filter = r->filter_query && r->filter_query[0] ? r->filter_query : NULL;
	if (r->node_trim_threshold > 0 && r->node_trim_threshold < 100)
		qr.trim_fraction = r->node_trim_threshold / 100.0;
	char field_why[256];
	rc = rpc_query_fields_apply(a, r, &qr, field_why, sizeof(field_why));
	if (rc) {
		if (rc == -EINVAL)
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s", field_why);
		else
			grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}

	qr.tree =
	    r->report_type != PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PPROF;
	qr.pprof = !qr.tree;
	rc = qexec_run(c->srv, &qr, &res, &err);
	if (rc) {
		fail_from(c, rc, &err);
		goto out;
	}
	Parca__Query__V1alpha1__QueryResponse resp = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__INIT;
	struct buf pprof = {0};
	switch (r->report_type) {
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PPROF:
		rc = qexec_pprof(&qr, &res, &pprof, &err);
		if (rc)
			break;
		resp.report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_PPROF;
		resp.pprof.data = pprof.data;
		resp.pprof.len = pprof.len;
		resp.total = qexec_pprof_total(&qr, &res);
		break;
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_TOP:
		rc = qexec_build_tree(&qr, &res, &err);
		if (rc == 0)
			rc = build_top(a, res.tree, &resp.top, &err);
		resp.report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_TOP;
		break;
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_UNSPECIFIED:
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_TABLE:
	/* Grafana's Parca data source asks for the Arrow record and reads the
	 * tree report just as well (its responseToDataFrames takes either). */
	case PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_FLAMEGRAPH_ARROW:
		rc = qexec_build_tree(&qr, &res, &err);
		if (rc == 0)
			rc = build_flamegraph(a, res.tree, &resp.flamegraph);
		resp.report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_FLAMEGRAPH;
		break;
	default:
		grpc_fail(c, GRPC_STATUS_UNIMPLEMENTED, "report type %d is not implemented by kiln",
			  (int)r->report_type);
		goto out;
	}
	if (rc == 0 && res.tree) {
		/* Parca's meaning: filtered is the value the filter removed. */
		resp.total = query_tree_total(res.tree);
		resp.filtered = resp.total - query_tree_filtered(res.tree);
	}
	if (rc)
		fail_from(c, rc == -ENOMEM ? -ENOMEM : rc, &err);
	else
		respond(c, &resp.base);
	buf_free(&pprof);
out:
	qexec_result_release(&res);
	arena_free(a);
}
