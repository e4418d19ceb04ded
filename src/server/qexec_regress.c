/*
 * qexec_regress.c — the regression report's windows: each side's range is
 * cut into `buckets` equal windows, each merged into a flame graph tree of
 * its own (qexec_run, so the selection, the frame filters and the store
 * path are the ones every other report uses), and handed to the report
 * (query/regress.c). A window is the statistical unit: more buckets give
 * the test more windows, each with fewer samples.
 */
#include <errno.h>

#include "server/qexec.h"

int qexec_regress(struct server *s, const struct qexec_request *r, size_t buckets,
		  const struct query_regress_options *o, struct query_regress **out,
		  struct kiln_error *err)
{
	struct query_regress *rep = query_regress_new(buckets, buckets);
	const struct qexec_side *sides[2] = {&r->a, &r->b};
	int rc = 0;

	*out = NULL;
	if (!rep)
		return kiln_error_set(err, ENOMEM, "regression: out of memory");
	for (int side = 0; rc == 0 && side < 2; side++) {
		int64_t start = sides[side]->start_ms, end = sides[side]->end_ms;
		int64_t span = end - start + 1;
		if (span < (int64_t)buckets) {
			rc = kiln_error_set(err, EINVAL,
					    "%c: the range is shorter than %zu buckets of 1 ms",
					    side ? 'b' : 'a', buckets);
			break;
		}
		for (size_t w = 0; rc == 0 && w < buckets; w++) {
			struct qexec_request one = *r;
			struct qexec_result res = {0};
			one.mode = QEXEC_MERGE;
			one.a = *sides[side];
			one.a.start_ms =
			    start + (int64_t)((__int128)span * (int64_t)w / (int64_t)buckets);
			one.a.end_ms =
			    start +
			    (int64_t)((__int128)span * (int64_t)(w + 1) / (int64_t)buckets) - 1;
			one.tree = true;
			one.pprof = false;
			rc = qexec_run(s, &one, &res, err);
			if (rc == 0)
				rc = qexec_build_tree(&one, &res, err);
			if (rc == 0)
				rc = query_regress_add_window(rep, side, w, res.tree, err);
			else if (rc == -EINVAL || rc == -ENOENT)
				kiln_error_prefix(err, side ? "b: " : "a: ");
			qexec_result_release(&res);
		}
	}
	if (rc == 0)
		rc = query_regress_finish(rep, o, err);
	if (rc) {
		query_regress_free(rep);
		return rc;
	}
	*out = rep;
	return 0;
}
