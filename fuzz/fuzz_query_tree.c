/*
 * fuzz_query_tree.c — libFuzzer target for the report side of src/query:
 * any input that decodes as a valid pprof profile is folded into a plain
 * tree (every sample type), a filtered/hidden/trimmed tree and a diff tree
 * against itself, and every report is written. Checks the invariants that
 * must hold for any profile: the root's cum equals the filtered total, a
 * self-diff is zero everywhere, and the folded output ends with a newline.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/pprof.h"
#include "query/query.h"

static void reports(const struct query_tree *t)
{
	struct query_top *top = NULL;
	struct query_node root;
	struct buf b;

	buf_init(&b);
	query_tree_node(t, 0, &root);
	if (root.cum != query_tree_filtered(t))
		abort();
	if (query_tree_write_json(t, &b))
		abort();
	buf_reset(&b);
	if (query_tree_write_folded(t, &b) || (b.len && b.data[b.len - 1] != '\n'))
		abort();
	if (query_top_build(t, &top, NULL) == 0) {
		buf_reset(&b);
		if (query_top_write_json(top, 0, &b) || query_top_write_text(top, 10, &b))
			abort();
		query_top_free(top);
	}
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_decode_opts opts = {.max_inflated_bytes = 1 << 24};
	const char *hide[] = {"", "app"};
	struct pprof_profile *p = NULL;
	struct query_tree *t;
	size_t n_types;

	if (pprof_decode(data, size, &opts, &p, NULL))
		return 0;
	n_types = pprof_profile_msg(p)->n_sample_type;
	for (size_t i = 0; i < n_types && i < 4; i++) {
		if (query_tree_build(p, (int)i, NULL, &t, NULL) == 0) {
			reports(t);
			query_tree_free(t);
		}
	}
	if (n_types) {
		struct query_tree_options o = {.filter = "a",
					       .hide_binaries = hide,
					       .n_hide_binaries = 2,
					       .trim_fraction = 0.01,
					       .max_nodes = 100000};

		if (query_tree_build(p, -1, &o, &t, NULL) == 0) {
			reports(t);
			query_tree_free(t);
		}
		if (query_tree_build_diff(p, -1, p, -1, NULL, &t, NULL) == 0) {
			for (size_t i = 0; i < query_tree_node_count(t); i++) {
				struct query_node n;

				query_tree_node(t, i, &n);
				if (n.diff != 0)
					abort();
			}
			reports(t);
			query_tree_free(t);
		}
	}
	pprof_profile_free(p);
	return 0;
}
