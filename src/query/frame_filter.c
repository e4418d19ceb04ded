/*
 * frame_filter.c — the stack rules of a flame graph tree: pprof's frame
 * filters (-focus, -ignore, -hide, -prune_from) and the two halves of a
 * sandwich view.
 *
 * Every rule is decided per distinct frame, once, when the tree first
 * meets the frame (query_tree_frame): a pattern match costs one PCRE2 run
 * per function, not per sample. Per sample, qrules_apply then only scans
 * the stack's flag bytes, in the order pprof applies them:
 *   1. focus and ignore: keep a sample only if some frame matches focus,
 *      and none matches ignore (hide already took its frames out, as it
 *      does in pprof);
 *   2. prune_from: cut the frames below (callees of) the matching frame
 *      nearest the leaf, which stays;
 *   3. sandwich: callees keep the stack from the function's outermost
 *      call down, so recursion counts once; callers keep the stack from
 *      the root to its innermost call and turn it over, the function
 *      first and its callers after it. A sample that never reaches the
 *      function is left out of both.
 * Patterns are PCRE2, unanchored, matched against function names (and the
 * address text of frames without one), as pprof matches its regexps.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "query/query_internal.h"

/* A pattern longer than this is refused: the patterns come from query
 * strings, and a bounded match keeps a hostile one from costing seconds
 * per frame. */
#define MAX_PATTERN_BYTES 1024
#define MATCH_LIMIT	  100000

enum { RULE_FOCUS, RULE_IGNORE, RULE_HIDE, RULE_PRUNE, N_PATTERN_RULES };

struct qrules {
	pcre2_code *code[N_PATTERN_RULES];
	pcre2_match_data *match;
	pcre2_match_context *limits;
	char *filter; /* the older substring focus ("filter") */
	char *sandwich;
	enum query_sandwich_side sandwich_side;
};

static const char *const rule_flag[N_PATTERN_RULES] = {"focus", "ignore", "hide", "prune_from"};

static int compile(struct qrules *r, int rule, const char *pattern, struct kiln_error *err)
{
	PCRE2_SIZE erroff = 0;
	PCRE2_UCHAR msg[160];
	int errcode = 0;

	if (strlen(pattern) > MAX_PATTERN_BYTES)
		return kiln_error_set(err, EINVAL, "%s: pattern longer than %d bytes",
				      rule_flag[rule], MAX_PATTERN_BYTES);
	r->code[rule] = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_DOTALL,
				      &errcode, &erroff, NULL);
	if (r->code[rule])
		return 0;
	if (pcre2_get_error_message(errcode, msg, sizeof(msg)) < 0)
		snprintf((char *)msg, sizeof(msg), "error %d", errcode);
	return kiln_error_set(err, EINVAL, "%s: invalid regular expression at byte %zu: %s",
			      rule_flag[rule], (size_t)erroff, (const char *)msg);
}

void qrules_free(struct qrules *r)
{
	if (!r)
		return;
	for (int i = 0; i < N_PATTERN_RULES; i++)
		pcre2_code_free(r->code[i]);
	pcre2_match_data_free(r->match);
	pcre2_match_context_free(r->limits);
	free(r->filter);
	free(r->sandwich);
	free(r);
}

int qrules_new(const struct query_tree_options *o, struct qrules **out, struct kiln_error *err)
{
	const char *patterns[N_PATTERN_RULES] = {o->focus, o->ignore, o->hide, o->prune_from};
	struct qrules *r;
	bool any = (o->filter && o->filter[0]) || (o->sandwich && o->sandwich[0]);
	int rc;

	*out = NULL;
	for (int i = 0; i < N_PATTERN_RULES; i++)
		any = any || (patterns[i] && patterns[i][0]);
	if (!any)
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (int i = 0; i < N_PATTERN_RULES; i++)
		if (patterns[i] && patterns[i][0] && (rc = compile(r, i, patterns[i], err)))
			goto fail;
	rc = kiln_error_set(err, ENOMEM, "out of memory");
	if (!(r->match = pcre2_match_data_create(1, NULL)) ||
	    !(r->limits = pcre2_match_context_create(NULL)))
		goto fail;
	pcre2_set_match_limit(r->limits, MATCH_LIMIT);
	if (o->filter && o->filter[0] && !(r->filter = strdup(o->filter)))
		goto fail;
	if (o->sandwich && o->sandwich[0] && !(r->sandwich = strdup(o->sandwich)))
		goto fail;
	r->sandwich_side = o->sandwich_side;
	*out = r;
	return 0;
fail:
	qrules_free(r);
	return rc;
}

static bool matches(const struct qrules *r, int rule, const char *name)
{
	/* A match that hits the limit counts as no match: the frame stays as
	 * it is rather than the query failing halfway. */
	return r->code[rule] && pcre2_match(r->code[rule], (PCRE2_SPTR)name, strlen(name), 0, 0,
					    r->match, r->limits) >= 0;
}

uint8_t qrules_frame_flags(const struct qrules *r, const char *name)
{
	uint8_t f = 0;

	if (!r)
		return 0;
	if (r->filter && strstr(name, r->filter))
		f |= QFRAME_FILTER;
	if (matches(r, RULE_FOCUS, name))
		f |= QFRAME_FOCUS;
	if (matches(r, RULE_IGNORE, name))
		f |= QFRAME_IGNORE;
	if (matches(r, RULE_HIDE, name))
		f |= QFRAME_HIDE;
	if (matches(r, RULE_PRUNE, name))
		f |= QFRAME_PRUNE;
	if (r->sandwich && strcmp(name, r->sandwich) == 0)
		f |= QFRAME_SANDWICH;
	return f;
}

bool qrules_apply(const struct query_tree *t, uint32_t *stack, size_t *depth)
{
	const struct qrules *r = t->rules;
	bool need_filter = r->filter != NULL, need_focus = r->code[RULE_FOCUS] != NULL;
	size_t n = *depth, prune_at = SIZE_MAX, first = SIZE_MAX, last = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		uint8_t f = t->frames[stack[i]].flags;
		if (f & QFRAME_IGNORE)
			return false;
		if (f & QFRAME_FILTER)
			need_filter = false;
		if (f & QFRAME_FOCUS)
			need_focus = false;
		if (f & QFRAME_PRUNE)
			prune_at = i;
	}
	if (need_filter || need_focus)
		return false;
	if (prune_at != SIZE_MAX)
		n = prune_at + 1;
	if (!r->sandwich) {
		*depth = n;
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		if (t->frames[stack[i]].flags & QFRAME_SANDWICH) {
			first = first == SIZE_MAX ? i : first;
			last = i;
		}
	}
	if (first == SIZE_MAX)
		return false;
	if (r->sandwich_side == QUERY_SANDWICH_CALLEES) {
		memmove(stack, stack + first, (n - first) * sizeof(*stack));
		*depth = n - first;
		return true;
	}
	for (size_t i = 0, j = last; i < j; i++, j--) {
		uint32_t tmp = stack[i];
		stack[i] = stack[j];
		stack[j] = tmp;
	}
	*depth = last + 1;
	return true;
}
