/*
 * dwarf_walk.c — the function-DIE walk of Kiln's DWARF reader
 * (kdw_walk_cu): a unit's DIE tree once, reporting functions with code,
 * their ranges and nesting, the top of the DIE layer (dwarf_die.h). Only
 * function DIEs whose abbreviation has code ranges have their attributes
 * read; DIEs the walk does not look into are skipped whole: by
 * DW_AT_sibling when there is one, else attribute by attribute, in one
 * step when the abbreviation's attributes all have fixed sizes.
 *
 * It mirrors what the symbolizer's libdw index did (dwarf_child /
 * dwarf_siblingof) so answers stay the same. One difference, with the
 * same answers: a C unit's structures and unions are not entered (C puts
 * no functions there).
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "symbols/dwarf_die.h"

/* --- the walk ---------------------------------------------------------------- */

struct walk {
	struct kdw *d;
	struct kdw_cu *cu;
	const struct kdw_abbrevs *t;
	const struct kdw_walk_ops *ops;
	struct kiln_error *e;
};

/* Steps over the DIE at the cursor when its code (one byte) names a
 * leaf_fixed abbreviation, walk_full ones only when skipping (what
 * read_die would do for it, without the call: most DIEs the walk meets
 * are such). False, cursor unmoved, for anything else. */
static inline bool skip_leaf(const struct kdw_abbrevs *t, struct kdw_cur *c, bool skipping)
{
	uint8_t code;
	int32_t step;

	if (c->p >= c->end || (code = *c->p) >= 0x80 || code >= t->ncodes)
		return false;
	/* (An undefined code's entry is zeroed: 0.) */
	step = t->by_code[code].leaf_step[skipping];
	if (step == 0 || (size_t)(c->end - c->p) < (size_t)step)
		return false;
	c->p += step;
	return true;
}

/* Jumps over the DIE at the cursor by its DW_AT_sibling when its code (one
 * byte) names a sib_jump abbreviation and the walk would not enter the DIE
 * (skipping, or neither walk_full nor a scope): what read_die and
 * skip_children would do, without them (in libc, 60k such DIEs). False,
 * cursor unmoved, for anything else, a sibling out of place included:
 * the slow path reports it. */
static inline bool skip_sibling(const struct walk *w, struct kdw_cur *c, bool skipping)
{
	const uint8_t *info = w->d->s.p[KDW_INFO];
	const struct kdw_abbrev *ab;
	uint64_t after, to;
	uint32_t v;
	uint8_t code;

	if (c->p >= c->end || (code = *c->p) >= 0x80 || code >= w->t->ncodes)
		return false;
	ab = &w->t->by_code[code];
	if (!ab->sib_jump || (size_t)(c->end - c->p) <= (size_t)ab->fixed ||
	    (!skipping && (ab->walk_full || is_scope(w->cu, ab->tag))))
		return false;
	memcpy(&v, c->p + ab->sib_jump, 4);
	after = (uint64_t)(c->p - info) + 1 + (uint64_t)ab->fixed;
	if (v >= w->cu->end - w->cu->offset)
		return false;
	to = w->cu->offset + v;
	if (to < after || to > w->cu->end)
		return false;
	c->p = info + to;
	return true;
}

/* Moves the cursor past the children of die (just read, has children). */
static int skip_children(struct walk *w, struct kdw_cur *c, const struct die *die)
{
	struct die tmp;
	size_t depth = 1;

	if (has(die, S_SIBLING)) {
		uint64_t to = 0;

		if (val_ref(w->cu, &die->v[S_SIBLING], die->offset, &to, w->e) == 0 &&
		    to >= (uint64_t)(c->p - w->d->s.p[KDW_INFO]) && to <= w->cu->end) {
			c->p = w->d->s.p[KDW_INFO] + to;
			return 0;
		}
		return die_bad(w->e, die->offset, "DW_AT_sibling out of its unit");
	}
	while (depth > 0) {
		if (skip_leaf(w->t, c, true) || skip_sibling(w, c, true))
			continue;

		int rc = kdw_read_die(w->d, w->cu, w->t, c, &tmp, DIE_SKIP, w->e);

		if (rc < 0)
			return rc;
		if (rc == 0)
			depth--;
		else if (tmp.ab->children) {
			if (has(&tmp, S_SIBLING)) {
				rc = skip_children(w, c, &tmp);
				if (rc < 0)
					return rc;
			} else {
				depth++;
			}
		}
	}
	return 0;
}

/* True when ops asks about every address, or one of the DIE's ranges just
 * read (d->ranges) holds an address it asks about. */
static bool wanted(const struct kdw_walk_ops *ops, const struct kdw *d)
{
	if (!ops->want)
		return true;
	for (size_t i = 0; i < d->nranges; i++) {
		size_t lo = kdw_lower_bound(ops->want, ops->nwant, d->ranges[i].low);

		if (lo < ops->nwant && ops->want[lo] < d->ranges[i].high)
			return true;
	}
	return false;
}

/* The children at the cursor, up to their null entry. */
static int walk_children(struct walk *w, struct kdw_cur *c, int32_t parent, int depth)
{
	struct die die;

	for (;;) {
		int rc;
		uint32_t tag;
		int32_t node = -1;
		bool descend = false;

		if (c->p >= c->end) /* libdw tolerates a unit without its last nulls */
			return 0;
		if (skip_leaf(w->t, c, false) || skip_sibling(w, c, false))
			continue;
		rc = kdw_read_die(w->d, w->cu, w->t, c, &die, DIE_WALK, w->e);
		if (rc <= 0)
			return rc;
		tag = die.ab->tag;
		if (is_function(tag)) {
			rc = kdw_die_ranges(w->d, w->cu, &die, w->e);
			if (rc < 0)
				return rc;
			if (w->d->nranges > 0 && wanted(w->ops, w->d)) {
				struct kdw_func fn = {.inlined = tag == DW_TAG_inlined_subroutine};
				uint64_t v;

				rc = kdw_func_names(w->d, w->cu, &die, &fn, w->e);
				if (rc < 0)
					return rc;
				if (has(&die, S_CALL_FILE) && val_udata(&die.v[S_CALL_FILE], &v)) {
					fn.has_call_file = true;
					fn.call_file = v;
				}
				if (has(&die, S_CALL_LINE) && val_udata(&die.v[S_CALL_LINE], &v)) {
					fn.has_call_line = true;
					fn.call_line = v;
				}
				node = w->ops->func(w->ops->ctx, &fn, parent);
				if (node < 0)
					return -ENOMEM;
				for (size_t i = 0; i < w->d->nranges; i++)
					if (w->ops->range(w->ops->ctx, w->d->ranges[i].low,
							  w->d->ranges[i].high, node, depth) < 0)
						return -ENOMEM;
				descend = true;
			}
		} else if (is_scope(w->cu, tag)) {
			node = parent;
			descend = true;
		}
		if (!die.ab->children)
			continue;
		if (descend && depth + 1 <= MAX_DIE_DEPTH)
			rc = walk_children(w, c, node, depth + 1);
		else
			rc = skip_children(w, c, &die);
		if (rc < 0)
			return rc;
	}
}

int kdw_walk_cu(struct kdw *d, struct kdw_cu *cu, const struct kdw_walk_ops *ops,
		struct kiln_error *e)
{
	struct walk w = {d, cu, NULL, ops, e};
	struct kdw_cur c;
	struct die die;
	int rc = kdw_cu_base(d, cu, e);

	if (rc < 0)
		return rc;
	d->walking = cu;
	d->origins_gen++;
	d->norigins = 0;
	rc = kdw_abbrevs_for(d, cu, &w.t, e);
	if (rc < 0)
		goto out;
	c = (struct kdw_cur){d->s.p[KDW_INFO] + cu->die_offset, d->s.p[KDW_INFO] + cu->end, false};
	rc = kdw_read_die(d, cu, w.t, &c, &die, DIE_SKIP, e);
	if (rc > 0 && die.ab->children)
		rc = walk_children(&w, &c, -1, 0);
out:
	d->walking = NULL;
	return rc < 0 ? rc : 0;
}

size_t kdw_ncus(const struct kdw *d)
{
	return d->ncus;
}

size_t kdw_cu_ordinal(const struct kdw *d, const struct kdw_cu *cu)
{
	return (size_t)(cu - d->cus);
}

struct kdw_cu *kdw_cu_at(struct kdw *d, size_t i)
{
	return &d->cus[i];
}
