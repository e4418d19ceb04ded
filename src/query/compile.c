/*
 * compile.c — turning parsed matchers into the store's compiled form.
 *
 * Kept apart from parse.c so that programs which only parse (the fuzzer)
 * do not pull the store in.
 */
#include "query/query_internal.h"

int query_selector_compile(struct query_selector *sel, struct kiln_error *err)
{
	for (size_t i = 0; i < sel->n_matchers; i++) {
		struct store_matcher *m = &sel->matchers[i];
		int rc;

		if (m->compiled)
			continue;
		rc = store_matcher_compile(m, err);
		if (rc) {
			kiln_error_prefix(err, "matcher %s: ", m->name);
			return rc;
		}
	}
	return 0;
}

int query_parse_compiled(const char *text, unsigned flags, struct query_selector *out,
			 struct kiln_error *err)
{
	int rc = query_parse(text, flags, out, err);

	if (rc)
		return rc;
	rc = query_selector_compile(out, err);
	if (rc) {
		query_selector_release(out);
		return rc;
	}
	return 0;
}
