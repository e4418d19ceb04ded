/*
 * query_internal.h — what the files of src/query share and nobody else may
 * use: the tree's layout, a u64 -> u32 hash map, parser helpers.
 *
 * The tree has two lives. While profiles are added, nodes sit in `build`
 * in creation order, linked parent -> first_child -> next_sibling and found
 * through `children` (a map from (parent, frame) to node). query_tree_finish
 * then lays the kept nodes out in depth-first pre-order in `nodes`, which is
 * all that the accessors and writers read.
 */
#ifndef KILN_QUERY_INTERNAL_H
#define KILN_QUERY_INTERNAL_H

#include "query/query.h"

#include "common/arena.h"
#include "common/htab.h"

#define QNONE UINT32_MAX

/* ---- u64 -> u32 open-addressing map (tree.c) ------------------------------ */

struct qmap_slot {
	uint64_t key; /* key + 1, 0 = empty slot */
	uint32_t val;
};

/* Key and value share a slot so that a lookup touches one cache line. */
struct qmap {
	struct qmap_slot *slots;
	size_t cap; /* power of two */
	size_t count;
};

int qmap_init(struct qmap *m, size_t hint);
void qmap_release(struct qmap *m);
/* Value for key, or QNONE. */
uint32_t qmap_get(const struct qmap *m, uint64_t key);
/* Inserts key -> val (key must be absent). 0 or -ENOMEM. */
int qmap_put(struct qmap *m, uint64_t key, uint32_t val);
/* Room for n more keys without a rehash. 0 or -ENOMEM. */
int qmap_reserve(struct qmap *m, size_t n);

/* ---- the tree -------------------------------------------------------------- */

/* What a node stands for: a function in a binary. */
struct qframe {
	uint32_t name; /* string ids */
	uint32_t binary;
	uint32_t file;
	uint32_t build_id;
	int64_t line;
	uint8_t flags; /* QFRAME_*: what the tree's rules say of it */
	bool hidden;
};

/* qframe.flags (frame_filter.c) */
enum {
	QFRAME_FILTER = 1 << 0, /* name contains the substring filter */
	QFRAME_FOCUS = 1 << 1,
	QFRAME_IGNORE = 1 << 2,
	QFRAME_HIDE = 1 << 3,
	QFRAME_PRUNE = 1 << 4,
	QFRAME_SANDWICH = 1 << 5,
};

/* The compiled rules of a tree; NULL when it has none. */
struct qrules;
int qrules_new(const struct query_tree_options *o, struct qrules **out, struct kiln_error *err);
void qrules_free(struct qrules *r);
/* QFRAME_* bits for a frame of this name (0 with no rules). */
uint8_t qrules_frame_flags(const struct qrules *r, const char *name);

struct qbuild_node {
	uint32_t frame; /* QNONE for the root */
	uint32_t parent;
	uint32_t first_child;
	uint32_t next_sibling;
	int64_t cum, self, base_cum, base_self;
};

/* A node after finish, in pre-order. */
struct qnode {
	uint32_t frame; /* QNONE for the root */
	uint32_t depth;
	int64_t parent; /* pre-order index; -1 for the root */
	size_t subtree_size;
	int64_t cum, self, base_cum, base_self;
};

struct query_tree {
	/* options (strings copied) */
	bool diff;
	struct qrules *rules; /* NULL: every stack kept as it is */
	uint32_t group_frame; /* QNONE, or the frame every added stack starts with */
	enum query_diff_scale diff_scale;
	double base_factor, base_scale; /* base_scale: applied by finish */
	char **hide;
	size_t n_hide;
	size_t max_nodes;
	double trim_fraction;

	/* strings: id -> text (in arena); text -> id via str_index */
	struct arena *arena;
	struct htab *str_index;
	const char **strs;
	size_t n_strs, cap_strs;
	uint32_t str_total; /* id of "total" */

	/* frames: (name, binary) -> frame id */
	struct qframe *frames;
	size_t n_frames, cap_frames;
	struct qmap frame_index;

	/* building */
	struct qbuild_node *build;
	size_t n_build, cap_build;
	struct qmap children; /* (parent << 32 | frame) -> build node */

	/* finished */
	bool finished;
	struct qnode *nodes;
	size_t n_nodes;
	uint32_t height;

	int64_t total, filtered, base_total, base_filtered;
	uint32_t unit;	      /* string id */
	uint32_t sample_type; /* string id */
	bool have_unit;
};

/* A value in its unit's natural scale as pprof prints it ("1.50s",
 * "120ms", "3.20MB", plain counts), and v as a share of total ("12.50%"). */
void query_format_value(char *dst, size_t size, int64_t v, const char *unit);
void query_format_percent(char *dst, size_t size, int64_t v, int64_t total);

/* Makes *arr (of *cap elements of elem bytes) hold at least need, doubling.
 * 0 or -ENOMEM. */
int query_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* The frame for (name, binary), created with file/line/build id on first
 * sight. Returns QNONE on out-of-memory. */
uint32_t query_tree_frame(struct query_tree *t, uint32_t name, uint32_t binary, uint32_t file,
			  int64_t line, uint32_t build_id);
/* The frame of an unsymbolized address: "[binary] +0xOFFSET" when mapped to
 * a named binary, else "0xADDRESS". QNONE on out-of-memory. */
uint32_t query_tree_address_frame(struct query_tree *t, uint32_t binary, uint32_t build_id,
				  bool mapped, uint64_t address, uint64_t memory_start,
				  uint64_t file_offset);

/* May a profile be added to t on side? 0, or -EINVAL with err set. */
int query_tree_check_add(const struct query_tree *t, enum query_side side, struct kiln_error *err);

/* Room for n more nodes (capped at max_nodes) in the build array and the
 * children index: one allocation instead of doublings. 0 or -ENOMEM. */
int query_tree_reserve(struct query_tree *t, size_t n);

/* Folding stacks into the tree. The caller fills stack[0..depth) with frame
 * ids, root first (grow it with query_grow on stack/cap_stack); qfold_add
 * walks it down from the root, reusing the previous stack's nodes for the
 * shared prefix (stacks often come in order), one children lookup per
 * frame after it, and adds v to the leaf's self (base_self when base). */
struct qfold {
	uint32_t *stack;
	size_t cap_stack;
	uint32_t *prev_stack, *prev_nodes;
	size_t prev_depth, cap_prev_stack, cap_prev_nodes;
};
int qfold_add(struct query_tree *t, struct qfold *f, size_t depth, int64_t v, bool base);
void qfold_release(struct qfold *f);

/* A source's locations (by dense index) resolved once into frame lists
 * (caller first, hidden binaries dropped), concatenated in frames. To
 * resolve idx: start = n_frames, qlocs_push each frame, qlocs_done. */
struct qlocs {
	uint32_t *off; /* idx -> offset in frames; QNONE = not resolved yet */
	uint32_t *len;
	size_t n;
	uint32_t *frames;
	size_t n_frames, cap_frames;
};
int qlocs_init(struct qlocs *l, size_t n);
/* Appends frame f unless its binary is hidden; -ENOMEM when f is QNONE. */
int qlocs_push(const struct query_tree *t, struct qlocs *l, uint32_t f);
void qlocs_done(struct qlocs *l, uint32_t idx, size_t start);
void qlocs_release(struct qlocs *l);
/* Starts a stack: the group frame when there is one (*depth 0 or 1).
 * 0 or -ENOMEM. */
int qfold_begin(const struct query_tree *t, struct qfold *f, size_t *depth);
/* Appends location idx's frames to f->stack at *depth. 0 or -ENOMEM. */
int qfold_push_location(const struct query_tree *t, struct qfold *f, const struct qlocs *l,
			uint32_t idx, size_t *depth);
/* Applies the tree's rules to a whole stack (root first) in place: false
 * when the sample is left out, else true with *depth possibly shorter and
 * the stack possibly reordered (sandwich callers). Only with t->rules. */
bool qrules_apply(const struct query_tree *t, uint32_t *stack, size_t *depth);

/* Interns s (len bytes) in t's string table. Returns the id or QNONE on
 * out-of-memory. */
uint32_t query_tree_intern(struct query_tree *t, const char *s, size_t len);

/* ---- parser helpers ------------------------------------------------------------ */

/* May c appear in a profile type part? */
bool query_type_char_ok(unsigned char c);
/* Parses s[0..len) as a profile type; on failure *bad_offset is the offset
 * of the offending byte or part. */
int query_profile_type_parse_at(const char *s, size_t len, struct query_profile_type *out,
				size_t *bad_offset, struct kiln_error *err);

#endif
