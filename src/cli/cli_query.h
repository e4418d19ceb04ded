/*
 * cli_query.h — what `kilnctl query` shares with its grouped form
 * (cmd_query_group.c): the profiles of a query split by a label's values.
 */
#ifndef KILN_CLI_QUERY_H
#define KILN_CLI_QUERY_H

#include <stddef.h>

#include "cli/cli.h"
#include "pprof/pprof.h"
#include "query/query.h"

/* One profile per value of the label (and one for the series without it),
 * each named by its group frame "LABEL=value" / "LABEL=(none)"; groups
 * without samples are left out. Owned; release with
 * cli_query_groups_release. */
struct cli_query_groups {
	char **text;
	struct pprof_profile **profile;
	size_t n;
};

/* Fetches the groups of query by label `by` from the server at base
 * ("http://HOST:PORT"), range being the URL's time parameters
 * ("&mode=merge&start=..&end=.."). 0, or -EIO / -ENOMEM after printing
 * why. */
int cli_query_fetch_groups(const struct cli_server_opts *srv, const char *base, const char *query,
			   const char *by, const char *range, struct cli_query_groups *out);
/* The grouped tree (finished) of g with options o. */
int cli_query_group_tree(const struct cli_query_groups *g, const struct query_tree_options *o,
			 struct query_tree **out, struct kiln_error *err);
void cli_query_groups_release(struct cli_query_groups *g);

#endif
