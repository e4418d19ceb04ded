/*
 * rpc_query_fields.c — Parca's group_by, filter, sandwich_by_function and
 * sum_by onto kiln's query features (see rpc_query_fields.h).
 *
 * Parca's filter semantics (its query API's FilterProfileData): stack
 * filters are ANDed; a positive string condition (equal, contains,
 * starts_with) keeps a stack when any frame's function name satisfies it,
 * a negative one (not_*) only when every frame does. Frame filters keep
 * the frames that satisfy all of them. Comparisons fold ASCII case.
 * In pprof's terms, which kiln's frame filters implement, a positive stack
 * condition is a focus, a negative one an ignore (several ignores are one
 * alternation), and a frame filter hides the frames that fail it. Two
 * positive stack conditions would need two different frames, which one
 * focus pattern cannot say, so that is refused rather than approximated.
 * kiln applies hide before focus and ignore (pprof's order) while Parca
 * applies its stack filters first, so a request mixing both kinds is
 * refused too instead of answering differently.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/internal.h"
#include "server/rpc_query_fields.h"
#include "store/store.h"

typedef Parca__Query__V1alpha1__QueryRequest query_req;
typedef Parca__Query__V1alpha1__StringCondition string_cond;
typedef Parca__Query__V1alpha1__FilterCriteria criteria;

/* frame_filter.c refuses longer patterns; saying so here names the field. */
#define MAX_PATTERN 1024

/* A pattern under construction: alternatives joined with '|'. */
struct pattern {
	char text[MAX_PATTERN + 1];
	size_t len;
	size_t n_alts;
	bool too_long;
};

static int failf(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void put(struct pattern *p, const char *s, size_t n)
{
	if (p->too_long || p->len + n > MAX_PATTERN) {
		p->too_long = true;
		return;
	}
	memcpy(p->text + p->len, s, n);
	p->len += n;
	p->text[p->len] = 0;
}

/* s as a PCRE2 literal: metacharacters escaped one by one (no \Q..\E,
 * which a literal "\E" would end). */
static void put_literal(struct pattern *p, const char *s)
{
	for (; *s; s++) {
		if (strchr("\\^$.|?*+()[]{}#", *s))
			put(p, "\\", 1);
		put(p, s, 1);
	}
}

/* The kind of a string condition: which positive test it negates or is. */
enum cond_kind { COND_EQUAL, COND_CONTAINS, COND_STARTS };

static int cond_parts(const string_cond *c, enum cond_kind *kind, bool *negated, const char **text)
{
	switch (c->condition_case) {
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_EQUAL:
		*kind = COND_EQUAL, *negated = false, *text = c->equal;
		return 0;
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_EQUAL:
		*kind = COND_EQUAL, *negated = true, *text = c->not_equal;
		return 0;
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_CONTAINS:
		*kind = COND_CONTAINS, *negated = false, *text = c->contains;
		return 0;
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_CONTAINS:
		*kind = COND_CONTAINS, *negated = true, *text = c->not_contains;
		return 0;
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_STARTS_WITH:
		*kind = COND_STARTS, *negated = false, *text = c->starts_with;
		return 0;
	case PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_STARTS_WITH:
		*kind = COND_STARTS, *negated = true, *text = c->not_starts_with;
		return 0;
	default:
		return -EINVAL;
	}
}

/* Appends one alternative matching the names that satisfy the positive
 * test (or, with invert, the names that fail it). */
static void put_condition(struct pattern *p, enum cond_kind kind, const char *text, bool invert)
{
	if (p->n_alts++)
		put(p, "|", 1);
	put(p, "(?i:", 4);
	if (kind != COND_CONTAINS || invert)
		put(p, "^", 1);
	if (invert)
		put(p, kind == COND_CONTAINS ? "(?!.*" : "(?!", kind == COND_CONTAINS ? 5 : 3);
	put_literal(p, text);
	if (kind == COND_EQUAL)
		put(p, "\\z", 2);
	if (invert)
		put(p, ")", 1);
	put(p, ")", 1);
}

/* The function_name condition of c; every other criterion is refused by
 * name, as kiln's frame filters see function names only. */
static int function_condition(const criteria *c, const char *where, const string_cond **out,
			      char *why, size_t len)
{
	static const char *const names[] = {"system_name", "binary", "filename", "address",
					    "line_number"};
	const void *set[] = {c->system_name, c->binary, c->filename, c->address, c->line_number};

	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		if (set[i])
			return failf(why, len,
				     "%s.criteria.%s: not supported by kiln, which filters on "
				     "function_name only",
				     where, names[i]);
	if (!c->function_name)
		return failf(why, len, "%s.criteria: no function_name condition", where);
	*out = c->function_name;
	return 0;
}

struct filter_patterns {
	struct pattern focus, ignore, hide;
	size_t n_focus, n_stack, n_frame;
};

static int add_stack_filter(const Parca__Query__V1alpha1__StackFilter *sf, const char *where,
			    struct filter_patterns *fp, char *why, size_t len)
{
	enum cond_kind kind;
	bool negated;
	const char *text;
	string_cond legacy = PARCA__QUERY__V1ALPHA1__STRING_CONDITION__INIT;
	const string_cond *c = NULL;

	if (sf->filter_case == PARCA__QUERY__V1ALPHA1__STACK_FILTER__FILTER_CRITERIA) {
		int rc = function_condition(sf->criteria, where, &c, why, len);
		if (rc)
			return rc;
	} else if (sf->filter_case ==
		   PARCA__QUERY__V1ALPHA1__STACK_FILTER__FILTER_FUNCTION_NAME_STACK_FILTER) {
		/* Parca's own conversion of this deprecated form: contains, or
		 * not_contains when exclude is set. */
		const Parca__Query__V1alpha1__FunctionNameStackFilter *f =
		    sf->function_name_stack_filter;
		if (!f->function_to_filter[0])
			return failf(why, len,
				     "%s.function_name_stack_filter: function_to_filter is empty",
				     where);
		legacy.condition_case =
		    f->exclude ? PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_NOT_CONTAINS
			       : PARCA__QUERY__V1ALPHA1__STRING_CONDITION__CONDITION_CONTAINS;
		legacy.contains = f->function_to_filter; /* the oneof's one string */
		c = &legacy;
	} else {
		return failf(why, len, "%s: neither criteria nor function_name_stack_filter",
			     where);
	}
	if (cond_parts(c, &kind, &negated, &text))
		return failf(why, len, "%s: the function_name condition has no comparison set",
			     where);
	if (!negated && fp->n_focus++)
		return failf(why, len,
			     "%s: a second stack filter that keeps stacks (equal, contains, "
			     "starts_with) would need two different frames to match; kiln takes "
			     "one per query",
			     where);
	put_condition(negated ? &fp->ignore : &fp->focus, kind, text, false);
	fp->n_stack++;
	return 0;
}

static int add_frame_filter(const Parca__Query__V1alpha1__FrameFilter *ff, const char *where,
			    struct filter_patterns *fp, char *why, size_t len)
{
	enum cond_kind kind;
	bool negated;
	const char *text;
	const string_cond *c = NULL;

	if (ff->filter_case == PARCA__QUERY__V1ALPHA1__FRAME_FILTER__FILTER_BINARY_FRAME_FILTER)
		return failf(why, len,
			     "%s.binary_frame_filter: deprecated by Parca and not supported by "
			     "kiln; use criteria.function_name",
			     where);
	if (ff->filter_case != PARCA__QUERY__V1ALPHA1__FRAME_FILTER__FILTER_CRITERIA)
		return failf(why, len, "%s: no criteria", where);
	int rc = function_condition(ff->criteria, where, &c, why, len);
	if (rc)
		return rc;
	if (cond_parts(c, &kind, &negated, &text))
		return failf(why, len, "%s: the function_name condition has no comparison set",
			     where);
	/* Hidden: the frames that fail the condition. */
	put_condition(&fp->hide, kind, text, !negated);
	fp->n_frame++;
	return 0;
}

static int apply_filters(struct arena *a, const query_req *r, struct qexec_request *qr, char *why,
			 size_t len)
{
	struct filter_patterns fp = {0};
	char where[48];

	for (size_t i = 0; i < r->n_filter; i++) {
		const Parca__Query__V1alpha1__Filter *f = r->filter[i];
		int rc;
		if (f->filter_case == PARCA__QUERY__V1ALPHA1__FILTER__FILTER_STACK_FILTER) {
			snprintf(where, sizeof(where), "filter[%zu].stack_filter", i);
			rc = add_stack_filter(f->stack_filter, where, &fp, why, len);
		} else if (f->filter_case == PARCA__QUERY__V1ALPHA1__FILTER__FILTER_FRAME_FILTER) {
			snprintf(where, sizeof(where), "filter[%zu].frame_filter", i);
			rc = add_frame_filter(f->frame_filter, where, &fp, why, len);
		} else {
			rc = failf(why, len, "filter[%zu]: neither stack_filter nor frame_filter",
				   i);
		}
		if (rc)
			return rc;
	}
	if (fp.n_stack && fp.n_frame)
		return failf(why, len,
			     "filter: stack filters and frame filters in one request are not "
			     "supported by kiln (it hides frames before it matches stacks, pprof's "
			     "order, where Parca matches stacks first); send them separately");
	if (fp.focus.too_long || fp.ignore.too_long || fp.hide.too_long)
		return failf(why, len, "filter: the conditions add up to more than %d bytes",
			     MAX_PATTERN);
	struct {
		struct pattern *p;
		const char **dst;
	} out[] = {{&fp.focus, &qr->focus}, {&fp.ignore, &qr->ignore}, {&fp.hide, &qr->hide}};
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
		if (!out[i].p->n_alts)
			continue;
		if (!(*out[i].dst = arena_strdup(a, out[i].p->text)))
			return -ENOMEM;
	}
	return 0;
}

static int apply_group_by(const query_req *r, struct qexec_request *qr, char *why, size_t len)
{
	static const char prefix[] = "labels.";

	for (size_t i = 0; r->group_by && i < r->group_by->n_fields; i++) {
		const char *f = r->group_by->fields[i];
		if (strcmp(f, "function_name") == 0)
			continue; /* kiln always merges frames by function */
		if (strncmp(f, prefix, sizeof(prefix) - 1) != 0 || !f[sizeof(prefix) - 1])
			return failf(
			    why, len,
			    "group_by field \"%.64s\": not supported by kiln (function_name "
			    "or labels.NAME)",
			    f);
		if (qr->group_by)
			return failf(why, len,
				     "group_by: kiln groups by one label; got %s.%.64s and %.64s",
				     "labels", qr->group_by, f);
		qr->group_by = f + sizeof(prefix) - 1;
	}
	return 0;
}

int rpc_query_fields_apply(struct arena *a, const query_req *r, struct qexec_request *qr, char *why,
			   size_t len)
{
	bool pprof =
	    r->report_type == PARCA__QUERY__V1ALPHA1__QUERY_REQUEST__REPORT_TYPE__REPORT_TYPE_PPROF;
	int rc;

	if (r->source_reference)
		return failf(why, len,
			     "source_reference: the source report is not implemented "
			     "by kiln");
	if (r->runtime_filter)
		return failf(why, len,
			     "runtime_filter: deprecated by Parca and not supported by kiln; use "
			     "filter");
	if ((rc = apply_group_by(r, qr, why, len)) || (rc = apply_filters(a, r, qr, why, len)))
		return rc;
	if (r->sandwich_by_function[0]) {
		qr->sandwich = r->sandwich_by_function;
		/* Parca's UI asks for the callers half with the stacks inverted. */
		qr->sandwich_side =
		    r->invert_call_stack ? QUERY_SANDWICH_CALLERS : QUERY_SANDWICH_CALLEES;
	} else if (r->invert_call_stack) {
		return failf(why, len,
			     "invert_call_stack: kiln inverts stacks only for the callers half of "
			     "a sandwich (with sandwich_by_function)");
	}
	if (pprof && qr->group_by)
		return failf(why, len,
			     "group_by labels.%.64s: the PPROF report cannot carry groups; ask for "
			     "a flame graph or TOP",
			     qr->group_by);
	if (pprof && (qr->focus || qr->ignore || qr->hide || qr->sandwich))
		return failf(why, len,
			     "filter and sandwich_by_function apply to the flame graph and TOP "
			     "reports, not to PPROF");
	return 0;
}

/* ---- QueryRange sum_by ----------------------------------------------------------- */

struct sum_ctx {
	struct arena *a;
	struct query_range_group *group;
	int64_t step_ms;
	Parca__Query__V1alpha1__ValueType *sample_type, *period_type;
	Parca__Query__V1alpha1__MetricsSeries **series;
	size_t n, cap;
	int rc;
};

static void gather(void *ctx, const struct label *labels, size_t n_labels,
		   const struct store_point *points, size_t n_points)
{
	struct sum_ctx *sc = ctx;
	if (!sc->rc)
		sc->rc = query_range_group_add(sc->group, labels, n_labels, points, n_points);
}

static void emit(void *ctx, const struct store_label *labels, size_t n_labels, const char *other,
		 const struct store_point *points, size_t n_points)
{
	struct sum_ctx *sc = ctx;
	struct arena *a = sc->a;
	(void)other; /* no limit here, so there is no "other" series */

	if (sc->rc)
		return;
	if (sc->n == sc->cap) {
		size_t ncap = sc->cap ? sc->cap * 2 : 16;
		void *p = arena_alloc(a, ncap * sizeof(*sc->series));
		if (!p)
			goto oom;
		if (sc->n)
			memcpy(p, sc->series, sc->n * sizeof(*sc->series));
		sc->series = p;
		sc->cap = ncap;
	}
	Parca__Query__V1alpha1__MetricsSeries *ms = arena_alloc(a, sizeof(*ms));
	Parca__Profilestore__V1alpha1__LabelSet *ls = arena_alloc(a, sizeof(*ls));
	if (!ms || !ls)
		goto oom;
	parca__query__v1alpha1__metrics_series__init(ms);
	parca__profilestore__v1alpha1__label_set__init(ls);
	ls->labels = arena_alloc(a, (n_labels + 1) * sizeof(*ls->labels));
	ms->samples = arena_alloc(a, (n_points + 1) * sizeof(*ms->samples));
	if (!ls->labels || !ms->samples)
		goto oom;
	for (size_t i = 0; i < n_labels; i++) {
		Parca__Profilestore__V1alpha1__Label *l = arena_alloc(a, sizeof(*l));
		if (!l)
			goto oom;
		parca__profilestore__v1alpha1__label__init(l);
		l->name = arena_strdup(a, labels[i].name);
		l->value = arena_strdup(a, labels[i].value);
		if (!l->name || !l->value)
			goto oom;
		ls->labels[ls->n_labels++] = l;
	}
	for (size_t i = 0; i < n_points; i++) {
		Parca__Query__V1alpha1__MetricsSample *s = arena_alloc(a, sizeof(*s));
		Google__Protobuf__Timestamp *t = arena_alloc(a, sizeof(*t));
		if (!s || !t)
			goto oom;
		parca__query__v1alpha1__metrics_sample__init(s);
		google__protobuf__timestamp__init(t);
		int64_t ms_t = points[i].timestamp_ms;
		t->seconds = ms_t >= 0 ? ms_t / 1000 : -((-ms_t + 999) / 1000);
		t->nanos = (int32_t)((ms_t - t->seconds * 1000) * 1000000);
		s->timestamp = t;
		s->value = points[i].value;
		if (sc->step_ms > 0)
			s->value_per_second = (double)s->value / ((double)sc->step_ms / 1000.0);
		ms->samples[ms->n_samples++] = s;
	}
	ms->labelset = ls;
	ms->sample_type = sc->sample_type;
	ms->period_type = sc->period_type;
	sc->series[sc->n++] = ms;
	return;
oom:
	sc->rc = -ENOMEM;
}

/* As the HTTP API's sum_by. */
#define MAX_SUM_BY 8

int rpc_query_range_sum_by(struct arena *a, struct server *s,
			   const Parca__Query__V1alpha1__QueryRangeRequest *r,
			   const struct store_selector *ss, int64_t step_ms,
			   Parca__Query__V1alpha1__ValueType *sample_type,
			   Parca__Query__V1alpha1__ValueType *period_type,
			   Parca__Query__V1alpha1__QueryRangeResponse *out, char *why, size_t len,
			   struct kiln_error *err)
{
	if (r->n_sum_by > MAX_SUM_BY)
		return failf(why, len, "sum_by: at most %d labels, got %zu", MAX_SUM_BY,
			     r->n_sum_by);
	for (size_t i = 0; i < r->n_sum_by; i++)
		if (!r->sum_by[i][0])
			return failf(why, len, "sum_by[%zu]: empty label name", i);
	struct sum_ctx sc = {
	    .a = a, .step_ms = step_ms, .sample_type = sample_type, .period_type = period_type};
	sc.group = query_range_group_new((const char *const *)r->sum_by, r->n_sum_by, step_ms);
	if (!sc.group)
		return -ENOMEM;
	int rc = store_query_range(server_store(s), ss, gather, &sc, err);
	if (rc == 0 && sc.rc == 0)
		rc = query_range_group_visit(sc.group, 0, emit, &sc);
	query_range_group_free(sc.group);
	if (rc)
		return rc;
	if (sc.rc)
		return sc.rc;
	out->n_series = sc.n;
	out->series = sc.series;
	return 0;
}
