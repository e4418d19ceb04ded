/*
 * query.h — the query language and the reports built from profiles.
 *
 * Four parts, each usable alone:
 *
 * 1. Profile types. Parca's names: NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:
 *    PERIOD_UNIT with ":delta" appended for delta profiles, e.g.
 *    "parca_agent:samples:count:cpu:nanoseconds:delta".
 *
 * 2. The query language: a profile type followed by Prometheus-style label
 *    matchers:
 *        TYPE                       every series of that type
 *        TYPE{}                     the same
 *        TYPE{comm="nginx", node=~"web-.*", pid!="1", cmd!~"kworker.*",}
 *    Label names follow Prometheus' rules ([a-zA-Z_][a-zA-Z0-9_]*); values
 *    are Prometheus/Go string literals ("..." and '...' with escapes \a \b
 *    \f \n \r \t \v \\ \' \" \xHH \OOO \uHHHH \UHHHHHHHH, or raw `...`);
 *    whitespace is allowed between tokens; a trailing comma is allowed.
 *    Regexes (=~, !~) are PCRE2 syntax, fully anchored, checked for syntax
 *    here; matching is done by the store with a match limit, so no pattern
 *    can hang a query. A malformed query fails with a position.
 *
 * 3. The flame graph tree (struct query_tree): one or more profiles folded
 *    into a call tree. A node is a frame keyed by (function name, binary)
 *    under its parent, the way Parca groups by default; it keeps the file and
 *    start line of the function it was first seen with. Inlined frames are
 *    expanded caller-first (pprof's location line[0] is the innermost
 *    function, so a location's lines are walked last to first). Frames with
 *    no function are named "[BINARY] +0xOFFSET" (OFFSET = address -
 *    memory_start + file_offset, BINARY the mapping file's basename) or
 *    "0xADDR" when there is no mapping file. A diff tree holds a base (A)
 *    and a comparison (B): cum/self are B's values and diff = B_cum - A_cum,
 *    so stacks only in A appear with cum 0 and a negative diff.
 *
 * 4. Reports from a tree: the columnar flame graph JSON and the top table
 *    JSON of docs/API.md (`/api/v1/query`), a `go tool pprof -top`
 *    style text table, and folded stacks. An accessor API lets the server
 *    convert the tree to Parca's protobuf Flamegraph without knowing the
 *    internals.
 *
 * Ownership: every x_new or x_build result is freed by its x_free (NULL-safe);
 * every struct filled by a parse is released by its *_release. Strings
 * returned by accessors live as long as the tree. Nothing here is
 * thread-safe per object; distinct objects may be used from distinct
 * threads. Errors: 0 or a negative errno, detail in struct kiln_error.
 */
#ifndef KILN_QUERY_H
#define KILN_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/json.h"
#include "pprof/pprof.h"
#include "store/store.h"

/* ---- profile types (profile_type.c) -------------------------------------- */

struct query_profile_type {
	/* Each points into `storage` (owned); never NULL after a successful
	 * parse. */
	const char *name;
	const char *sample_type;
	const char *sample_unit;
	const char *period_type;
	const char *period_unit;
	bool delta;
	char *storage;
};

/* Parses "NAME:ST:SU:PT:PU" or "NAME:ST:SU:PT:PU:delta": five non-empty
 * parts, an optional sixth that must be "delta", no whitespace, braces,
 * quotes or control characters. -EINVAL with a message naming the part.
 * Release *out with query_profile_type_release. */
int query_profile_type_parse(const char *s, struct query_profile_type *out, struct kiln_error *err);
void query_profile_type_release(struct query_profile_type *t);
/* Appends the canonical string (the inverse of parse). */
int query_profile_type_format(const struct query_profile_type *t, struct buf *out);
/* Builds the canonical string from parts; the parts must be valid (no ':').
 * -EINVAL otherwise. */
int query_profile_type_format_parts(const char *name, const char *sample_type,
				    const char *sample_unit, const char *period_type,
				    const char *period_unit, bool delta, struct buf *out);
/* Writes the /api/v1/profile-types element for type string `key`:
 * {"key":..,"name":..,"sample_type":..,"sample_unit":..,"period_type":..,
 *  "period_unit":..,"delta":bool}. -EINVAL if key does not parse. */
int query_profile_type_write_json(const char *key, struct json_writer *w, struct kiln_error *err);

/* ---- query language (parse.c, compile.c) --------------------------------- */

enum query_parse_flags {
	/* Accept a query without a profile type ("{comm="x"}" or ""), for the
	 * labels/values routes; profile_type is then NULL. */
	QUERY_PARSE_TYPE_OPTIONAL = 1u << 0,
};

struct query_selector {
	char *profile_type;		/* owned, canonical; NULL only with TYPE_OPTIONAL */
	struct store_matcher *matchers; /* owned array; name/value owned (malloc) */
	size_t n_matchers;
	/* On a parse failure: the 0-based byte offset in the query text where
	 * the problem is (the JSON "position"); -1 otherwise. */
	long error_position;
};

/* Parses text into out. The matchers are NOT compiled (compiled == NULL);
 * call query_selector_compile before handing them to the store. On failure
 * returns -EINVAL, sets out->error_position, leaves nothing to release (a
 * release is still harmless), and err->msg reads
 *	1:COL: what went wrong
 *	  QUERY-EXCERPT
 *	  ^
 * with COL = error_position + 1 (a 1-based column, as Prometheus reports)
 * and the caret under the offending byte; e.g. for
 * 'parca_agent:samples:count:cpu:nanoseconds:delta{comm}':
 *	1:53: expected '=', '!=', '=~' or '!~' after label name "comm"
 * Queries longer than QUERY_MAX_LEN bytes or with more than
 * QUERY_MAX_MATCHERS matchers are refused (-EINVAL, position at the limit). */
#define QUERY_MAX_LEN	   16384
#define QUERY_MAX_MATCHERS 64
int query_parse(const char *text, unsigned flags, struct query_selector *out,
		struct kiln_error *err);
/* Compiles every matcher with store_matcher_compile (regexes get their
 * match-limited pcre2 form). On failure the ones compiled so far stay
 * compiled; query_selector_release frees them. */
int query_selector_compile(struct query_selector *sel, struct kiln_error *err);
/* query_parse + query_selector_compile. */
int query_parse_compiled(const char *text, unsigned flags, struct query_selector *out,
			 struct kiln_error *err);
/* Frees matchers (store_matcher_release for compiled ones) and the type;
 * leaves *sel empty. NULL-safe. */
void query_selector_release(struct query_selector *sel);
/* Fills a store selector that borrows sel's type and matchers. */
void query_selector_to_store(const struct query_selector *sel, int64_t start_ms, int64_t end_ms,
			     struct store_selector *out);
/* Appends the canonical query text (type, then matchers with values
 * re-quoted); parse(format(x)) == x. */
int query_selector_format(const struct query_selector *sel, struct buf *out);

/* ---- flame graph tree (tree.c) ------------------------------------------- */

enum query_side {
	QUERY_SIDE_SINGLE = 0, /* a plain (non-diff) tree */
	QUERY_SIDE_BASE,       /* diff: A */
	QUERY_SIDE_COMPARE,    /* diff: B */
};

/* How a diff compares A with B (query_tree_options.diff_scale): as they
 * are, or with A's values scaled first, so that ranges of unequal length or
 * load do not paint everything red. */
enum query_diff_scale {
	QUERY_DIFF_ABSOLUTE = 0,
	QUERY_DIFF_BY_TOTAL,  /* A scaled by B's total / A's total */
	QUERY_DIFF_BY_FACTOR, /* A scaled by base_factor (e.g. B's duration / A's) */
};

/* Which half of a sandwich view a tree is (query_tree_options.sandwich). */
enum query_sandwich_side {
	QUERY_SANDWICH_CALLEES = 0, /* the function first, what it calls below */
	QUERY_SANDWICH_CALLERS,	    /* the function first, its callers below */
};

struct query_tree_options {
	bool diff; /* profiles are added as BASE or COMPARE, not SINGLE */
	/* Keep only stacks with a frame whose function name contains this
	 * (after hide_binaries); NULL or "" = keep all. */
	const char *filter;
	/* pprof's frame filters, as PCRE2 patterns matched (unanchored)
	 * against function names; NULL or "" = off (frame_filter.c):
	 * focus keeps samples with a matching frame, ignore drops them, hide
	 * removes matching frames from stacks, prune_from drops the frames
	 * below (callees of) the matching frame nearest the leaf. */
	const char *focus, *ignore, *hide, *prune_from;
	/* A sandwich view of the function with exactly this name (NULL or ""
	 * = off): only samples reaching it, seen from it (sandwich_side). */
	const char *sandwich;
	enum query_sandwich_side sandwich_side;
	/* Diff trees: base values (base_cum, base_self, base totals and so
	 * diff) are A's times the scale, applied by query_tree_finish. */
	enum query_diff_scale diff_scale;
	double base_factor; /* QUERY_DIFF_BY_FACTOR; must be > 0 */
	/* Drop frames whose binary (mapping file, full path or basename)
	 * equals one of these; the sample's value stays with the rest of its
	 * stack. */
	const char *const *hide_binaries;
	size_t n_hide_binaries;
	/* Refuse (-E2BIG) to grow beyond this many nodes; 0 = 5,000,000. */
	size_t max_nodes;
	/* query_tree_finish drops subtrees whose |cum| and |A cum| are both
	 * below trim_fraction * total (their value still counts in their
	 * ancestors' cum); 0 = keep everything. */
	double trim_fraction;
};

struct query_tree;

/* Returns NULL on out-of-memory or a bad pattern; opts may be NULL
 * (single, keep all). */
struct query_tree *query_tree_new(const struct query_tree_options *opts);
/* The same with an error that says which pattern is bad and where:
 * 0, -EINVAL or -ENOMEM. */
int query_tree_create(const struct query_tree_options *opts, struct query_tree **out,
		      struct kiln_error *err);
void query_tree_free(struct query_tree *t);

/* Adds every sample of p, value index sample_index (-1 = p's default sample
 * type), on the given side (SINGLE for a plain tree, BASE/COMPARE for a
 * diff). The unit is taken from the first profile added. Returns 0, -EINVAL
 * (bad index or side), -E2BIG (max_nodes), -ENOMEM. */
int query_tree_add(struct query_tree *t, const struct pprof_profile *p, int sample_index,
		   enum query_side side, struct kiln_error *err);
/* Adds the store's merge of sel (store_merge_visit: every distinct stack in
 * range, summed) on the given side, folding stacks straight into the tree
 * without building a pprof profile first (tree_store.c). *matched says
 * whether anything matched. Same results and errors as query_tree_add on
 * the profile store_merge would build. */
int query_tree_add_store(struct query_tree *t, struct store *s, const struct store_selector *sel,
			 enum query_side side, bool *matched, struct kiln_error *err);
/* Stacks added from now on start with a frame named text ("comm=nginx"):
 * a flame graph grouped by a label, one first-level frame per value (as
 * Parca's group_by). NULL: no group frame. 0 or -ENOMEM. */
int query_tree_set_group(struct query_tree *t, const char *text);
/* Sorts siblings (by name, then binary), lays the nodes out in depth-first
 * pre-order, applies trim_fraction. Must be called once, after the last
 * add and before any accessor or writer. */
int query_tree_finish(struct query_tree *t, struct kiln_error *err);

/* Conveniences: new + add + finish. */
int query_tree_build(const struct pprof_profile *p, int sample_index,
		     const struct query_tree_options *opts, struct query_tree **out,
		     struct kiln_error *err);
int query_tree_build_diff(const struct pprof_profile *a, int a_index, const struct pprof_profile *b,
			  int b_index, const struct query_tree_options *opts,
			  struct query_tree **out, struct kiln_error *err);

/* Accessors (valid after finish). Node 0 is the root ("total"); nodes are
 * numbered in depth-first pre-order, so a node's subtree is the range
 * [i, i + subtree_size). */
struct query_node {
	uint32_t name;	      /* string ids, see query_tree_string */
	uint32_t binary;      /* mapping file, full path; 0 ("") when none */
	uint32_t file;	      /* source file; 0 when unknown */
	uint32_t build_id;    /* mapping build id; 0 when unknown */
	int64_t line;	      /* function start line; 0 when unknown */
	uint32_t depth;	      /* root 0 */
	int64_t parent;	      /* -1 for the root */
	int64_t first_child;  /* -1 when none */
	int64_t next_sibling; /* -1 when none */
	size_t subtree_size;  /* nodes in the subtree, itself included */
	int64_t cum;	      /* SINGLE or COMPARE values */
	int64_t self;
	int64_t diff;	  /* cum - base_cum; 0 unless diff */
	int64_t base_cum; /* A's values; 0 unless diff */
	int64_t base_self;
};
size_t query_tree_node_count(const struct query_tree *t);
/* Fills *out for node i (< node_count). */
void query_tree_node(const struct query_tree *t, size_t i, struct query_node *out);
/* The deduplicated string table: id 0 is "", ids < string_count. */
size_t query_tree_string_count(const struct query_tree *t);
const char *query_tree_string(const struct query_tree *t, uint32_t id);
bool query_tree_is_diff(const struct query_tree *t);
/* Sum of all sample values added (B's for a diff), before filter/hide. */
int64_t query_tree_total(const struct query_tree *t);
/* Sum of the values kept by the filter (== total without a filter). */
int64_t query_tree_filtered(const struct query_tree *t);
int64_t query_tree_base_total(const struct query_tree *t);
int64_t query_tree_base_filtered(const struct query_tree *t);
/* Largest node depth. */
uint32_t query_tree_height(const struct query_tree *t);
/* The factor A's values were scaled by in a diff (1 when absolute). */
double query_tree_base_scale(const struct query_tree *t);
/* Sample unit ("nanoseconds", "count", "bytes"...); "" before any add. */
const char *query_tree_unit(const struct query_tree *t);
/* Sample type name ("cpu", "samples"...); "" before any add. */
const char *query_tree_sample_type(const struct query_tree *t);

/* ---- flame graph JSON (json.c) -------------------------------------------- */

/* Appends the columnar flame graph of docs/API.md ("flamegraph"):
 * {"unit":..,"total":..,"filtered":..,"height":..,"strings":[..],
 *  "nodes":{"name":[..],"binary":[..],"file":[..],"line":[..],"depth":[..],
 *           "parent":[..],"cum":[..],"self":[..](,"diff":[..])}}
 * Linear in the node count; only strings that nodes use are written. */
int query_tree_write_json(const struct query_tree *t, struct buf *out);

/* ---- top table (top.c) ---------------------------------------------------- */

struct query_top_row {
	uint32_t name; /* string ids of the tree */
	uint32_t binary;
	uint32_t file;
	int64_t line;
	int64_t flat;	   /* self value of the function */
	int64_t cum;	   /* value of stacks containing it (recursion counted once) */
	int64_t diff_flat; /* flat - A flat; 0 unless diff */
	int64_t diff_cum;
};

struct query_top {
	const struct query_tree *tree; /* borrowed: must outlive the top */
	struct query_top_row *rows;    /* owned; sorted by flat desc, then cum desc, name */
	size_t n_rows;
};

/* One row per distinct (function name, binary) in the tree. Release *out
 * with query_top_free. */
int query_top_build(const struct query_tree *t, struct query_top **out, struct kiln_error *err);
void query_top_free(struct query_top *top);
/* {"unit":..,"total":..,"filtered":..,"rows":[{"name":..,"binary":..,
 *  "file":..,"line":n,"flat":v,"cum":v(,"diff_flat":v,"diff_cum":v)}]}
 * limit: at most this many rows (0 = all). */
int query_top_write_json(const struct query_top *top, size_t limit, struct buf *out);
/* A `go tool pprof -top` style table:
 *	Showing nodes accounting for 1.20s, 100% of 1.20s total
 *	      flat  flat%   sum%        cum   cum%
 *	     0.80s 66.67% 66.67%      1.20s   100%  main.work
 * values scaled by unit (ns -> s/ms/us, bytes -> kB/MB/GB), diff columns
 * appended in diff mode. limit: at most this many rows (0 = all). */
int query_top_write_text(const struct query_top *top, size_t limit, struct buf *out);

/* ---- folded stacks (folded.c) --------------------------------------------- */

/* Appends one line per node with a non-zero self value:
 *	caller;...;leaf VALUE
 * (outermost function first, the root "total" omitted), in tree order. In
 * a diff tree each line carries both values, "stack A_VALUE B_VALUE", the
 * input format of flamegraph.pl's difffolded. Semicolons and newlines in
 * names are replaced by ':' and ' ' so that lines stay parseable. Samples
 * left with no frame at all (empty stack, every frame hidden) are reported
 * as the single frame "[unknown]". */
int query_tree_write_folded(const struct query_tree *t, struct buf *out);

/* ---- flame graph for the terminal (flame_text.c) -------------------------- */

enum query_flame_colour {
	QUERY_FLAME_COLOUR_NONE = 0, /* plain text */
	QUERY_FLAME_COLOUR_PACKAGE,  /* a warm colour per package or binary */
	QUERY_FLAME_COLOUR_DIFF,     /* red grew, green shrank (diff trees; else PACKAGE) */
};

struct query_flame_text_options {
	unsigned width;	    /* columns; 0 = 120 */
	unsigned max_depth; /* rows below the root; 0 = all */
	double min_share;   /* leave out frames under this fraction of the root */
	enum query_flame_colour colour;
};

/* Appends an icicle graph: a header line, then one row per depth, each
 * frame a box "|name 12.50%" as wide as its share of the root (the share
 * only where it fits; cut names end in ".."). Frames narrower than one
 * column are left out with their subtrees. Colours are xterm 256-colour
 * SGR sequences; names are sanitized (no control bytes reach the
 * terminal). opts may be NULL. 0 or -ENOMEM. */
int query_tree_write_flame_text(const struct query_tree *t,
				const struct query_flame_text_options *opts, struct buf *out);

/* ---- deploy-regression report (regress.c) ---------------------------------- */

/* Which functions take a larger share on side B (after) than on side A
 * (before): each side is a series of windows (one tree each); per function
 * and window, its total share (cum / window total) and self share. Mann-
 * Whitney U on the total shares, Benjamini-Hochberg across functions; see
 * regress.c for why. */
enum query_regress_verdict {
	QUERY_REGRESS_REGRESSION = 0, /* q <= alpha, total share grew >= threshold */
	QUERY_REGRESS_IMPROVEMENT,    /* q <= alpha, shrank by >= threshold */
	QUERY_REGRESS_UNCHANGED,
	QUERY_REGRESS_NOT_ENOUGH_DATA, /* a side has < min_windows non-empty windows */
};

struct query_regress_options {
	double alpha;	     /* false discovery rate; 0 = 0.05 */
	double threshold_pp; /* smallest change of total share, percentage points */
	size_t min_windows;  /* per side; 0 = 5 */
};

struct query_regress_row {
	const char *name, *binary; /* owned by the report */
	enum query_regress_verdict verdict;
	size_t a_windows, b_windows;
	double a_total, b_total; /* mean shares over the windows, 0..1 */
	double a_self, b_self;
	double delta_total_pp, delta_self_pp; /* B - A, percentage points */
	double p, q;			      /* raw and FDR-adjusted */
	double effect;			      /* Cliff's delta, -1..1 (> 0: B larger) */
};

struct query_regress;
/* n_a and n_b windows. NULL on out-of-memory. */
struct query_regress *query_regress_new(size_t n_a, size_t n_b);
void query_regress_free(struct query_regress *r);
/* Adds window `window` of side 0 (A) or 1 (B): a finished tree. A tree
 * with no samples leaves the window empty (it does not count). */
int query_regress_add_window(struct query_regress *r, int side, size_t window,
			     const struct query_tree *t, struct kiln_error *err);
/* Tests every function and sorts the rows: regressions first (largest
 * growth first), then improvements, unchanged, not enough data. */
int query_regress_finish(struct query_regress *r, const struct query_regress_options *o,
			 struct kiln_error *err);
const struct query_regress_row *query_regress_rows(const struct query_regress *r, size_t *n);
/* Non-empty windows of side 0 or 1. */
size_t query_regress_windows(const struct query_regress *r, int side);
const char *query_regress_verdict_name(enum query_regress_verdict v);
/* {"test":..,"alpha":..,"threshold_pp":..,"unit":..,"a_windows":n,
 *  "b_windows":n,"rows":[{"name","binary","verdict","a_total_share",
 *  "b_total_share","a_self_share","b_self_share","delta_total_pp",
 *  "delta_self_pp","p","q","effect"}]}; limit: rows (0 = all). */
int query_regress_write_json(const struct query_regress *r, const struct query_regress_options *o,
			     size_t limit, struct buf *out);
/* The statistics, exposed for tests: the two-sided Mann-Whitney U test of
 * b against a (p-value, and Cliff's delta P(b > a) - P(b < a)), and
 * Benjamini-Hochberg adjusted q-values of n p-values (0 or -ENOMEM). */
void query_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *p,
			double *cliff);
int query_benjamini_hochberg(const double *p, size_t n, double *q);

/* ---- sum by, for the metrics graph (range_group.c) --------------------------- */

/* Series of a range query summed per value of labels `by` (none: each
 * series is its own group), points bucketed by step ms (0: as they are).
 * Feed it store_query_range's series, then write once: the `limit` largest
 * groups by total (0: all) as {"labels":{..},"points":[[t,v],..]} objects,
 * then, if any are left, their sum with the label "__other__": "N more". */
struct query_range_group;
struct query_range_group *query_range_group_new(const char *const *by, size_t n_by, int64_t step);
void query_range_group_free(struct query_range_group *g);
int query_range_group_add(struct query_range_group *g, const struct store_label *labels,
			  size_t n_labels, const struct store_point *points, size_t n_points);
int query_range_group_write_json(struct query_range_group *g, size_t limit, struct json_writer *w);
/* The same groups in the same order, handed to fn instead: other is NULL,
 * or for the summed rest its "N more" text (labels then empty). Points are
 * time-sorted, one per timestamp. 0 or -ENOMEM. */
typedef void (*query_range_group_fn)(void *ctx, const struct store_label *labels, size_t n_labels,
				     const char *other, const struct store_point *points,
				     size_t n_points);
int query_range_group_visit(struct query_range_group *g, size_t limit, query_range_group_fn fn,
			    void *ctx);

#endif
