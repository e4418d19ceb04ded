/*
 * tree_store.c — folding the store's merge straight into the flame graph
 * tree (see query.h), the path of every flame graph and top query.
 *
 * The store hands over each distinct location once and each distinct stack
 * once (store_merge_visit). A location becomes its frames (caller first,
 * hidden binaries dropped) exactly as tree.c does for a pprof location;
 * frame lists are cached by metastore location id, tree string ids by
 * metastore function and mapping id, so a stack costs one array lookup per
 * location plus the children lookups of qfold_add. Compared with building
 * a pprof profile and folding that, no sample table, no key copies and no
 * deep copy are made: the memory touched per query is the tree's own.
 */
#include "common/satadd.h"
#include "query/query_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fn_ids {
	uint32_t name, file; /* QNONE = not yet */
};
struct map_ids {
	uint32_t binary, build_id; /* QNONE = not yet */
};

struct store_add {
	struct query_tree *t;
	bool base;
	bool matched;
	struct qlocs locs; /* by metastore location id */
	struct fn_ids *fn;
	size_t cap_fn;
	struct map_ids *map;
	size_t cap_map;
	struct qfold fold;
};

static uint32_t intern(struct query_tree *t, const char *s)
{
	return s && *s ? query_tree_intern(t, s, strlen(s)) : 0;
}

/* Makes index id valid in an array of pairs of QNONE-initialized ids. */
static int id_room(void **arr, size_t *cap, uint32_t id, size_t elem)
{
	size_t old = *cap;

	if (id < old)
		return 0;
	if (query_grow(arr, cap, (size_t)id + 1, elem))
		return -ENOMEM;
	memset((char *)*arr + old * elem, 0xff, (*cap - old) * elem);
	return 0;
}

static int on_begin(void *ctx, const struct store_merge_info *info)
{
	struct store_add *a = ctx;
	struct query_tree *t = a->t;

	a->matched = true;
	if (!t->have_unit) {
		t->unit = intern(t, info->sample_unit);
		t->sample_type = intern(t, info->sample_type);
		if (t->unit == QNONE || t->sample_type == QNONE)
			return -ENOMEM;
		t->have_unit = true;
	}
	/* Most stacks end in a node of their own, and callers add some more:
	 * sized for that, the tree is rarely copied as it grows. */
	if (query_tree_reserve(t, info->n_stacks + info->n_stacks / 4))
		return -ENOMEM;
	return qlocs_init(&a->locs, info->n_locations + 1);
}

static int on_location(void *ctx, const struct store_location_view *l)
{
	struct store_add *a = ctx;
	struct query_tree *t = a->t;
	uint32_t binary = 0, build_id = 0;
	size_t start = a->locs.n_frames;
	bool symbolized = false;
	int rc;

	if (l->id >= a->locs.n)
		return -EINVAL; /* the store promised ids below n_locations */
	if (l->mapping) {
		uint32_t mid = l->mapping->id;

		if (id_room((void **)&a->map, &a->cap_map, mid, sizeof(*a->map)))
			return -ENOMEM;
		if (a->map[mid].binary == QNONE) {
			a->map[mid].binary = intern(t, l->mapping->filename);
			a->map[mid].build_id = intern(t, l->mapping->build_id);
			if (a->map[mid].binary == QNONE || a->map[mid].build_id == QNONE) {
				a->map[mid].binary = QNONE;
				return -ENOMEM;
			}
		}
		binary = a->map[mid].binary;
		build_id = a->map[mid].build_id;
	}
	/* lines[0] is the innermost inlined function: walk outermost first */
	for (size_t k = l->n_lines; k-- > 0;) {
		const struct store_line_view *lv = &l->lines[k];
		struct fn_ids ids = {QNONE, QNONE};

		if (lv->function_id) {
			if (id_room((void **)&a->fn, &a->cap_fn, lv->function_id, sizeof(*a->fn)))
				return -ENOMEM;
			ids = a->fn[lv->function_id];
		}
		if (ids.name == QNONE) {
			ids.name = intern(t, lv->name);
			if (ids.name == 0)
				ids.name = intern(t, lv->system_name);
			ids.file = intern(t, lv->filename);
			if (ids.name == QNONE || ids.file == QNONE)
				return -ENOMEM;
			if (lv->function_id)
				a->fn[lv->function_id] = ids;
		}
		if (ids.name == 0)
			continue;
		rc = qlocs_push(t, &a->locs,
				query_tree_frame(t, ids.name, binary, ids.file,
						 lv->start_line ? lv->start_line : lv->line,
						 build_id));
		if (rc)
			return rc;
		symbolized = true;
	}
	if (!symbolized) {
		const struct store_mapping_view *m = l->mapping;

		rc = qlocs_push(t, &a->locs,
				query_tree_address_frame(t, binary, build_id, m != NULL, l->address,
							 m ? m->memory_start : 0,
							 m ? m->file_offset : 0));
		if (rc)
			return rc;
	}
	qlocs_done(&a->locs, l->id, start);
	return 0;
}

static int on_stack(void *ctx, const uint32_t *locs, size_t n, int64_t v)
{
	struct store_add *a = ctx;
	struct query_tree *t = a->t;
	size_t depth = 0;

	if (qfold_begin(t, &a->fold, &depth))
		return -ENOMEM;
	if (a->base)
		sat_acc_i64(&t->base_total, v);
	else
		sat_acc_i64(&t->total, v);
	/* locs[0] is the leaf: collect root first */
	for (size_t k = n; k-- > 0;) {
		uint32_t id = locs[k];

		if (id >= a->locs.n || a->locs.off[id] == QNONE)
			return -EINVAL; /* the store describes a location before its stacks */
		if (qfold_push_location(t, &a->fold, &a->locs, id, &depth))
			return -ENOMEM;
	}
	if (t->rules && !qrules_apply(t, a->fold.stack, &depth))
		return 0;
	if (a->base)
		sat_acc_i64(&t->base_filtered, v);
	else
		sat_acc_i64(&t->filtered, v);
	return qfold_add(t, &a->fold, depth, v, a->base);
}

int query_tree_add_store(struct query_tree *t, struct store *s, const struct store_selector *sel,
			 enum query_side side, bool *matched, struct kiln_error *err)
{
	struct store_add a = {.t = t, .base = side == QUERY_SIDE_BASE};
	struct store_merge_visitor v = {
	    .ctx = &a,
	    .begin = on_begin,
	    .location = on_location,
	    .stack = on_stack,
	};
	int rc;

	if (matched)
		*matched = false;
	rc = query_tree_check_add(t, side, err);
	if (rc)
		return rc;
	rc = store_merge_visit(s, sel, &v, err);
	if (rc == -E2BIG)
		kiln_error_set(err, E2BIG, "flame graph: more than %zu nodes", t->max_nodes);
	if (matched)
		*matched = a.matched;
	qlocs_release(&a.locs);
	free(a.fn);
	free(a.map);
	qfold_release(&a.fold);
	return rc;
}
