/*
 * qexec.h — query execution shared by the gRPC QueryService and the HTTP
 * JSON API: parse the selector(s), check the profile type exists, merge
 * the matching samples from the store, and build the flame graph tree.
 *
 * Single is a merge over [t, t]; diff merges two selections (A = base,
 * B = comparison; diff values are B - A).
 */
#ifndef KILN_SERVER_QEXEC_H
#define KILN_SERVER_QEXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "pprof/pprof.h"
#include "query/query.h"
#include "server/server.h"

enum qexec_mode { QEXEC_SINGLE, QEXEC_MERGE, QEXEC_DIFF };

struct qexec_side {
	const char *query;
	int64_t start_ms; /* single: start == end == the profile's time */
	int64_t end_ms;
};

struct qexec_request {
	enum qexec_mode mode;
	struct qexec_side a; /* single/merge: the selection; diff: the base */
	struct qexec_side b; /* diff only: the comparison */
	const char *filter;  /* function-name substring; NULL = none */
	const char *const *hide_binaries;
	size_t n_hide_binaries;
	/* pprof's frame filters and the sandwich view (query.h's
	 * query_tree_options); NULL = off. A bad pattern fails the run with
	 * -EINVAL. */
	const char *focus, *ignore, *hide, *prune_from;
	const char *sandwich;
	enum query_sandwich_side sandwich_side;
	/* Flame graph reports of single and merge: the label whose values
	 * become the first frame level ("comm=nginx"); NULL = none. */
	const char *group_by;
	/* Diff: how A is scaled against B (query.h); see qexec_diff_scale. */
	enum query_diff_scale diff_scale;
	double base_factor;
	double trim_fraction;
	/* Fold the store's stacks straight into res->tree (flame graph and top
	 * reports): no pprof profiles are built, res->a/b stay NULL and
	 * qexec_build_tree only finishes the tree. */
	bool tree;
	/* The PPROF report of a single or merge: the store writes the merge
	 * straight out as gzipped pprof into res->pprof (no profile is built;
	 * res->a stays NULL), which qexec_pprof hands over. */
	bool pprof;
};

struct qexec_result {
	struct pprof_profile *a;	/* merged A (or the only one); NULL when empty */
	struct pprof_profile *b;	/* merged B (diff); NULL when empty */
	struct query_profile_type type; /* of A */
	struct query_tree *tree;	/* after qexec_build_tree (or qexec_run with tree) */
	long error_position;		/* parse errors: byte offset in the failing query */
	char error_side;		/* 'a' or 'b' for diff parse errors, else 0 */
	struct buf pprof;		/* with request.pprof: the gzipped merge (empty: none) */
	int64_t pprof_total;		/* its sum of values */
	bool pprof_streamed;		/* res->pprof was filled (it may be handed over since) */
};

/* Runs the selection(s). -EINVAL (bad query: error_position set), -ENOENT
 * (unknown profile type), or a store error. Release with
 * qexec_result_release even on failure. */
int qexec_run(struct server *s, const struct qexec_request *r, struct qexec_result *out,
	      struct kiln_error *err);
int qexec_build_tree(const struct qexec_request *r, struct qexec_result *res,
		     struct kiln_error *err);
/* The gzipped pprof: the merge, or for a diff B merged with A scaled by -1.
 * Takes over res->pprof when the merge was written straight out. */
int qexec_pprof(const struct qexec_request *r, struct qexec_result *res, struct buf *out,
		struct kiln_error *err);
/* Sum of the default sample values of p (0 for NULL). */
int64_t qexec_profile_total(const struct pprof_profile *p);
/* The total of the PPROF report: of the merge (or of B for a diff). */
int64_t qexec_pprof_total(const struct qexec_request *r, const struct qexec_result *res);
void qexec_result_release(struct qexec_result *res);

/* The regression report of a diff request (query.h): each side's range
 * cut into `buckets` windows, each merged with r's selection and filters.
 * Release *out with query_regress_free. */
int qexec_regress(struct server *s, const struct qexec_request *r, size_t buckets,
		  const struct query_regress_options *o, struct query_regress **out,
		  struct kiln_error *err);

/* Sets r->diff_scale/base_factor from a name: "absolute", "total",
 * "duration" (B's range length over A's), or NULL/"" for the default:
 * duration when both sides are merges of ranges of unequal length,
 * absolute otherwise. -EINVAL for another name. */
int qexec_diff_scale(struct qexec_request *r, const char *name);

/* Checks that a parsed profile type has data; -ENOENT lists known types. */
int qexec_check_type(struct server *s, const char *profile_type, struct kiln_error *err);

#endif
