/*
 * query.c — reads: profile types, label names and values, range queries and
 * merges (symbolize.c answers a location a merge needs first).
 *
 * A read takes head_lock (read) only to scan the head and the frozen heads
 * and to take a reference on each block; blocks are then read without any
 * lock. The head and the block list are changed together under the write
 * lock, so a read sees every row exactly once.
 *
 * Merge: values are first summed per stack id in a dense array indexed by
 * stack id (blocks whose time range lies inside the query contribute their
 * precomputed per-stack rollup instead of their rows), then each distinct
 * location is described once and each distinct stack handed over once to a
 * visitor (store_merge_visit): the flame graph folds them into its tree; the
 * pprof builder visitor (store_merge) keeps per-query caches from metastore
 * ids to builder ids. merge_pprof.c shares the summing (merge_aggregate) and
 * writes the merge straight out as encoded pprof (the PPROF report).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/satadd.h"
#include "common/log.h"
#include "store/ch.h"
#include "store/internal.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts strs, calls cb once per distinct string. */
static void emit_sorted(const char **strs, size_t n, void (*cb)(void *, const char *), void *ctx)
{
	if (n)
		qsort(strs, n, sizeof(*strs), cmp_str);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(strs[i], strs[i - 1]) != 0)
			cb(ctx, strs[i]);
}

int store_profile_types(struct store *s, int64_t start_ms, int64_t end_ms,
			void (*cb)(void *ctx, const char *profile_type), void *ctx,
			struct kiln_error *err)
{
	struct store_selector sel = {.start_ms = start_ms, .end_ms = end_ms};
	uint32_t *ids;
	size_t n;
	int rc = s->ch ? ch_sync_series(s, start_ms, end_ms, err) : 0;

	rc = rc ?: series_select(&s->sx, &sel, &ids, &n, err);

	if (rc)
		return rc;
	const char **strs = calloc(n + 1, sizeof(*strs));
	if (!strs) {
		free(ids);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		strs[i] = series_at(&s->sx, ids[i])->type;
	emit_sorted(strs, n, cb, ctx);
	free(strs);
	free(ids);
	return 0;
}

static int collect_labels(struct store *s, const struct store_selector *sel, const char *name,
			  void (*cb)(void *ctx, const char *), void *ctx, struct kiln_error *err)
{
	uint32_t *ids;
	size_t n, k = 0, cap = 0;
	const char **strs = NULL;
	int rc = s->ch ? ch_sync_series(s, sel->start_ms, sel->end_ms, err) : 0;

	rc = rc ?: series_select(&s->sx, sel, &ids, &n, err);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		const struct series *se = series_at(&s->sx, ids[i]);

		cap += se->n_labels + 1;
	}
	strs = calloc(cap + 1, sizeof(*strs));
	if (!strs) {
		free(ids);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct series *se = series_at(&s->sx, ids[i]);

		if (name && strcmp(name, "__name__") == 0) {
			strs[k++] = se->name;
			continue;
		}
		for (size_t j = 0; j < se->n_labels; j++) {
			if (!name)
				strs[k++] = se->labels[j].name;
			else if (strcmp(se->labels[j].name, name) == 0)
				strs[k++] = se->labels[j].value;
		}
	}
	emit_sorted(strs, k, cb, ctx);
	free(strs);
	free(ids);
	return 0;
}

int store_label_names(struct store *s, const struct store_selector *sel,
		      void (*cb)(void *ctx, const char *name), void *ctx, struct kiln_error *err)
{
	return collect_labels(s, sel, NULL, cb, ctx, err);
}

int store_label_values(struct store *s, const struct store_selector *sel, const char *name,
		       void (*cb)(void *ctx, const char *value), void *ctx, struct kiln_error *err)
{
	if (!name)
		return kiln_error_set(err, EINVAL, "label values: no label name");
	return collect_labels(s, sel, name, cb, ctx, err);
}

/* ---- snapshots ---------------------------------------------------------- */

struct snapshot {
	struct block **blocks;
	size_t n_blocks;
	uint32_t n_stacks;
};

/* Calls visit(ctx, head) for the active and the frozen heads under the read
 * lock and takes a reference on every block overlapping [lo, hi]. */
static int snapshot_take(struct store *s, int64_t lo, int64_t hi,
			 void (*visit)(void *ctx, const struct head *h), void *ctx,
			 struct snapshot *snap)
{
	memset(snap, 0, sizeof(*snap));
	pthread_rwlock_rdlock(&s->head_lock);
	snap->n_stacks = (uint32_t)chunked_count(&s->meta.stacks);
	visit(ctx, s->head);
	for (const struct head *h = s->frozen; h; h = h->next)
		visit(ctx, h);
	snap->blocks = calloc(s->n_blocks + 1, sizeof(*snap->blocks));
	for (size_t i = 0; snap->blocks && i < s->n_blocks; i++) {
		struct block *b = s->blocks[i];

		if (b->max_ts < lo || b->min_ts > hi)
			continue;
		block_ref(b);
		snap->blocks[snap->n_blocks++] = b;
	}
	pthread_rwlock_unlock(&s->head_lock);
	return snap->blocks ? 0 : -ENOMEM;
}

static void snapshot_release(struct snapshot *snap)
{
	for (size_t i = 0; i < snap->n_blocks; i++)
		block_unref(snap->blocks[i]);
	free(snap->blocks);
}

/* ---- query_range ---------------------------------------------------------- */

struct point_list {
	struct store_point *p;
	size_t n, cap;
};

static int points_add(struct point_list *l, int64_t ts, int64_t v)
{
	if (GROW_ARRAY(l->p, l->cap, l->n + 1, 64))
		return -ENOMEM;
	l->p[l->n++] = (struct store_point){ts, v};
	return 0;
}

static int cmp_point(const void *a, const void *b)
{
	const struct store_point *x = a, *y = b;

	return x->timestamp_ms < y->timestamp_ms ? -1 : x->timestamp_ms > y->timestamp_ms;
}

struct range_ctx {
	const struct store_selector *sel;
	const uint32_t *ids;
	size_t n_ids;
	struct point_list *pts; /* one per selected series */
	int rc;
};

static void range_visit(void *ctx, const struct head *h)
{
	struct range_ctx *c = ctx;

	for (size_t i = 0; i < c->n_ids && !c->rc; i++) {
		const struct series_rows *r =
		    c->ids[i] < h->cap_series ? h->series[c->ids[i]] : NULL;

		for (size_t p = 0; r && p < r->np && !c->rc; p++)
			if (r->ts[p] >= c->sel->start_ms && r->ts[p] <= c->sel->end_ms)
				c->rc = points_add(&c->pts[i], r->ts[p], r->total[p]);
	}
}

int store_query_range(struct store *s, const struct store_selector *sel,
		      void (*cb)(void *ctx, const struct label *labels, size_t n_labels,
				 const struct store_point *points, size_t n_points),
		      void *ctx, struct kiln_error *err)
{
	struct range_ctx c = {.sel = sel};
	struct snapshot snap;
	uint32_t *ids;
	size_t n;
	int rc;

	if (s->ch)
		return ch_query_range(s, sel, cb, ctx, err);
	rc = series_select(&s->sx, sel, &ids, &n, err);

	if (rc)
		return rc;
	c.ids = ids;
	c.n_ids = n;
	c.pts = calloc(n + 1, sizeof(*c.pts));
	if (!c.pts) {
		free(ids);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	rc = snapshot_take(s, sel->start_ms, sel->end_ms, range_visit, &c, &snap);
	rc = rc ?: c.rc;
	if (rc)
		kiln_error_set(err, -rc, "out of memory");
	for (size_t b = 0; b < snap.n_blocks && !rc; b++) {
		for (size_t i = 0; i < n && !rc; i++) {
			const struct block_series *bs = block_find(snap.blocks[b], ids[i]);
			int64_t *ts, *tot;

			if (!bs || bs->max_ts < sel->start_ms || bs->min_ts > sel->end_ms)
				continue;
			rc = block_read_summary(snap.blocks[b], bs, &ts, &tot, err);
			for (size_t p = 0; !rc && p < bs->n_profiles; p++)
				if (ts[p] >= sel->start_ms && ts[p] <= sel->end_ms)
					rc = points_add(&c.pts[i], ts[p], tot[p]);
			if (!rc) {
				free(ts);
				free(tot);
			}
		}
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct point_list *l = &c.pts[i];
		size_t k = 0;

		if (!l->n)
			continue;
		qsort(l->p, l->n, sizeof(*l->p), cmp_point);
		for (size_t j = 0; j < l->n; j++) {
			if (k && l->p[k - 1].timestamp_ms == l->p[j].timestamp_ms)
				sat_acc_i64(&l->p[k - 1].value, l->p[j].value);
			else
				l->p[k++] = l->p[j];
		}
		const struct series *se = series_at(&s->sx, ids[i]);
		cb(ctx, se->labels, se->n_labels, l->p, k);
	}
	for (size_t i = 0; i < n; i++)
		free(c.pts[i].p);
	free(c.pts);
	free(ids);
	snapshot_release(&snap);
	return rc;
}

/* ---- merge ----------------------------------------------------------------- */

static inline void agg_add(struct merge_agg *a, uint32_t st, int64_t v)
{
	if (st >= a->n_stacks)
		return; /* cannot happen for blocks we wrote; never trust them */
	if (!a->seen[st]) {
		if (GROW_ARRAY(a->touched, a->cap_touched, a->n_touched + 1, 1024)) {
			a->rc = -ENOMEM;
			return;
		}
		a->seen[st] = 1;
		a->touched[a->n_touched++] = st;
	}
	sat_acc_i64(&a->sum[st], v);
}

static void agg_rows(struct merge_agg *a, const struct series_rows *r, int64_t lo, int64_t hi)
{
	for (size_t p = 0; p < r->np; p++) {
		if (r->ts[p] < lo || r->ts[p] > hi)
			continue;
		if (r->ts[p] < a->min_ts)
			a->min_ts = r->ts[p];
		if (r->ts[p] > a->max_ts)
			a->max_ts = r->ts[p];
		for (uint32_t j = 0; j < r->n[p]; j++)
			agg_add(a, r->stacks[r->off[p] + j], r->values[r->off[p] + j]);
	}
}

struct merge_ctx {
	struct store *s;
	struct merge_agg *agg;
	const struct store_selector *sel;
	const uint32_t *ids;
	size_t n_ids;
};

static void merge_visit(void *ctx, const struct head *h)
{
	struct merge_ctx *c = ctx;

	if (!c->agg->sum) {
		/* First visit, under the head lock: every stack id in the head
		 * or in a published block is below this count. */
		c->agg->n_stacks = (uint32_t)chunked_count(&c->s->meta.stacks);
		c->agg->sum = calloc(c->agg->n_stacks + 1, sizeof(*c->agg->sum));
		c->agg->seen = calloc(c->agg->n_stacks + 1, 1);
		if (!c->agg->sum || !c->agg->seen) {
			c->agg->rc = -ENOMEM;
			return;
		}
	}
	for (size_t i = 0; i < c->n_ids; i++) {
		const struct series_rows *r =
		    c->ids[i] < h->cap_series ? h->series[c->ids[i]] : NULL;

		if (r)
			agg_rows(c->agg, r, c->sel->start_ms, c->sel->end_ms);
	}
}

void merge_describe_location(struct describer *d, uint32_t id, struct store_location_view *v)
{
	struct meta *m = &d->s->meta;
	struct meta_location *l = chunked_at(&m->locations, id);

	if (atomic_load(&l->sym) == SYM_PENDING)
		symbolize_location(d->s, id); /* failures leave it unsymbolized */
	const struct meta_lines *ls = atomic_load(&l->lines);

	v->id = id;
	v->address = l->address;
	v->mapping = NULL;
	v->lines = d->lines;
	v->n_lines = 0;
	if (l->mapping && l->mapping < chunked_count(&m->mappings)) {
		const struct meta_mapping *mp = chunked_at(&m->mappings, l->mapping);

		d->map = (struct store_mapping_view){
		    .id = l->mapping,
		    .memory_start = mp->start,
		    .memory_limit = mp->limit,
		    .file_offset = mp->offset,
		    .filename = meta_str(m, mp->filename),
		    .build_id = meta_str(m, mp->build_id),
		    .flags = mp->flags & 15,
		};
		v->mapping = &d->map;
	}
	if (atomic_load(&l->sym) == SYM_PENDING && ls->n == 0 && d->s->symbolizer.unresolved) {
		/* Not resolvable yet (no debuginfo so far): show it by name. */
		struct store_mapping_info info;

		d->name[0] = '\0';
		symbolize_mapping_info(m, l->mapping, &info);
		d->s->symbolizer.unresolved(d->s->symbolizer.ctx, &info, l->address, d->name,
					    sizeof(d->name));
		if (d->name[0]) {
			d->lines[0] = (struct store_line_view){
			    .name = d->name, .system_name = d->name, .filename = ""};
			v->n_lines = 1;
			return;
		}
	}
	size_t n = ls->n < 256 ? ls->n : 256;
	size_t n_func = chunked_count(&m->functions);
	for (size_t i = 0; i < n; i++) {
		uint32_t fid = ls->l[i].function;
		const struct meta_function *f =
		    fid && fid < n_func ? chunked_at(&m->functions, fid) : NULL;

		d->lines[i] = (struct store_line_view){
		    .function_id = f ? fid : 0,
		    .name = f ? meta_str(m, f->name) : "",
		    .system_name = f ? meta_str(m, f->system_name) : "",
		    .filename = f ? meta_str(m, f->filename) : "",
		    .start_line = f ? f->start_line : 0,
		    .line = ls->l[i].line,
		};
	}
	v->n_lines = n;
}

void merge_agg_free(struct merge_agg *a)
{
	free(a->sum);
	free(a->seen);
	free(a->touched);
	memset(a, 0, sizeof(*a));
}

int merge_aggregate(struct store *s, const struct store_selector *sel, struct merge_agg *a,
		    uint32_t *first_series, struct kiln_error *err)
{
	struct merge_ctx c = {.s = s, .agg = a, .sel = sel};
	struct series_rows tmp = {0};
	struct snapshot snap = {0};
	uint32_t *ids = NULL;
	size_t n;
	int rc;

	if (s->ch)
		return ch_merge_aggregate(s, sel, a, first_series, err);
	memset(a, 0, sizeof(*a));
	a->min_ts = INT64_MAX;
	a->max_ts = INT64_MIN;
	if (!sel->profile_type)
		return kiln_error_set(err, EINVAL, "merge: no profile type");
	rc = series_select(&s->sx, sel, &ids, &n, err);
	if (rc)
		return rc;
	if (!n)
		goto out;
	*first_series = ids[0];
	c.ids = ids;
	c.n_ids = n;
	rc = snapshot_take(s, sel->start_ms, sel->end_ms, merge_visit, &c, &snap);
	if (rc || a->rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t b = 0; b < snap.n_blocks && !rc; b++) {
		const struct block *bl = snap.blocks[b];

		for (size_t i = 0; i < n && !rc; i++) {
			const struct block_series *bs = block_find(bl, ids[i]);

			if (!bs || bs->max_ts < sel->start_ms || bs->min_ts > sel->end_ms)
				continue;
			if (bs->min_ts >= sel->start_ms && bs->max_ts <= sel->end_ms) {
				uint32_t *st;
				int64_t *sums;
				size_t nd;

				rc = block_read_rollup(bl, bs, a->n_stacks, &st, &sums, &nd, err);
				if (rc)
					break;
				for (size_t k = 0; k < nd; k++)
					agg_add(a, st[k], sums[k]);
				if (bs->min_ts < a->min_ts)
					a->min_ts = bs->min_ts;
				if (bs->max_ts > a->max_ts)
					a->max_ts = bs->max_ts;
				free(st);
				free(sums);
			} else {
				series_rows_reset(&tmp);
				rc = block_read_rows(bl, bs, a->n_stacks, &tmp, err);
				if (!rc)
					agg_rows(a, &tmp, sel->start_ms, sel->end_ms);
			}
		}
	}
	if (!rc && a->rc)
		rc = kiln_error_set(err, ENOMEM, "out of memory");
out:
	snapshot_release(&snap);
	series_rows_free(&tmp);
	free(ids);
	if (rc)
		merge_agg_free(a);
	return rc;
}

int store_merge_visit(struct store *s, const struct store_selector *sel,
		      const struct store_merge_visitor *v, struct kiln_error *err)
{
	struct merge_agg a;
	struct describer *d = NULL;
	uint8_t *loc_seen = NULL;
	uint32_t first = 0;
	size_t n_loc;
	int rc;

	rc = merge_aggregate(s, sel, &a, &first, err);
	if (rc || !a.n_touched)
		goto out;

	/* Describe each distinct location once, then hand over each stack. */
	const struct series *se = series_at(&s->sx, first);
	n_loc = chunked_count(&s->meta.locations);
	struct store_merge_info info = {
	    .sample_type = se->sample_type,
	    .sample_unit = se->sample_unit,
	    .period_type = se->period_type,
	    .period_unit = se->period_unit,
	    .period = se->period,
	    .min_ts_ms = a.min_ts,
	    .max_ts_ms = a.max_ts,
	    .n_stacks = a.n_touched,
	    .n_locations = n_loc,
	};
	d = malloc(sizeof(*d));
	loc_seen = calloc(n_loc + 1, 1);
	if (!d || !loc_seen) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	d->s = s;
	symbolize_merge_locations(s, &a);
	rc = v->begin ? v->begin(v->ctx, &info) : 0;
	for (size_t t = 0; t < a.n_touched && !rc; t++) {
		uint32_t st = a.touched[t];
		const struct meta_stack *stk = chunked_at(&s->meta.stacks, st);

		if (a.sum[st] == 0)
			continue;
		for (uint32_t j = 0; j < stk->n && !rc; j++) {
			uint32_t id = stk->locs[j];
			struct store_location_view lv;

			if (id == 0 || id >= n_loc) {
				rc = kiln_error_set(err, EIO,
						    "merge: stack %u names location %u of %zu", st,
						    id, n_loc);
				goto out;
			}
			if (loc_seen[id])
				continue;
			loc_seen[id] = 1;
			merge_describe_location(d, id, &lv);
			rc = v->location ? v->location(v->ctx, &lv) : 0;
		}
		if (!rc && v->stack)
			rc = v->stack(v->ctx, stk->locs, stk->n, a.sum[st]);
	}
	if (rc)
		rc = kiln_error_set(err, -rc, "merge: %s", strerror(-rc));
out:
	merge_agg_free(&a);
	free(loc_seen);
	free(d);
	return rc;
}

/* ---- merging into a pprof builder ------------------------------------------ */

/* metastore id -> builder id caches (0 = not yet) */
struct to_builder {
	struct pprof_builder *b;
	uint64_t *loc, *func, *map;
	size_t n_loc, n_func, n_map;
	uint64_t *stack;
	size_t cap_stack;
	struct pprof_line_desc lines[256];
};

/* Makes room for index id in a zeroed cache array. */
static int cache_room(uint64_t **arr, size_t *n, uint32_t id)
{
	if (id < *n)
		return 0;
	size_t cap = *n ? *n : 64;
	while (cap <= id)
		cap *= 2;
	uint64_t *p = realloc(*arr, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + *n, 0, (cap - *n) * sizeof(*p));
	*arr = p;
	*n = cap;
	return 0;
}

static int builder_begin(void *ctx, const struct store_merge_info *info)
{
	struct to_builder *tb = ctx;

	if (pprof_builder_add_sample_type(tb->b, info->sample_type, info->sample_unit) ||
	    pprof_builder_set_period(tb->b, info->period_type, info->period_unit, info->period) ||
	    pprof_builder_reserve_samples(tb->b, info->n_stacks))
		return -ENOMEM;
	pprof_builder_set_time(tb->b, info->min_ts_ms * 1000000,
			       (info->max_ts_ms - info->min_ts_ms) * 1000000);
	return cache_room(&tb->loc, &tb->n_loc, (uint32_t)info->n_locations);
}

static int builder_location(void *ctx, const struct store_location_view *l)
{
	struct to_builder *tb = ctx;
	uint64_t map = 0;

	if (l->mapping) {
		const struct store_mapping_view *mv = l->mapping;

		if (cache_room(&tb->map, &tb->n_map, mv->id))
			return -ENOMEM;
		if (!tb->map[mv->id]) {
			struct pprof_mapping_desc d = {
			    .memory_start = mv->memory_start,
			    .memory_limit = mv->memory_limit,
			    .file_offset = mv->file_offset,
			    .filename = mv->filename,
			    .build_id = mv->build_id,
			    .has_functions = mv->flags & 1,
			    .has_filenames = mv->flags & 2,
			    .has_line_numbers = mv->flags & 4,
			    .has_inline_frames = mv->flags & 8,
			};
			tb->map[mv->id] = pprof_builder_mapping(tb->b, &d);
		}
		map = tb->map[mv->id];
	}
	for (size_t i = 0; i < l->n_lines; i++) {
		const struct store_line_view *lv = &l->lines[i];
		uint64_t f = 0;

		if (lv->function_id && cache_room(&tb->func, &tb->n_func, lv->function_id))
			return -ENOMEM;
		if (lv->function_id)
			f = tb->func[lv->function_id];
		if (!f) {
			f = pprof_builder_function(tb->b, lv->name, lv->system_name, lv->filename,
						   lv->start_line);
			if (lv->function_id)
				tb->func[lv->function_id] = f;
		}
		tb->lines[i] = (struct pprof_line_desc){.function_id = f, .line = lv->line};
	}
	if (cache_room(&tb->loc, &tb->n_loc, l->id))
		return -ENOMEM;
	tb->loc[l->id] = pprof_builder_location(tb->b, map, l->address, tb->lines, l->n_lines);
	return tb->loc[l->id] ? 0 : -ENOMEM;
}

static int builder_stack(void *ctx, const uint32_t *locs, size_t n, int64_t value)
{
	struct to_builder *tb = ctx;

	if (n > tb->cap_stack) {
		uint64_t *x = realloc(tb->stack, n * sizeof(*x));
		if (!x)
			return -ENOMEM;
		tb->stack = x;
		tb->cap_stack = n;
	}
	for (size_t j = 0; j < n; j++)
		tb->stack[j] = tb->loc[locs[j]];
	return pprof_builder_add_sample(tb->b, tb->stack, n, &value, NULL, 0);
}

int store_merge(struct store *s, const struct store_selector *sel, struct pprof_builder *out,
		struct kiln_error *err)
{
	struct to_builder tb = {.b = out};
	struct store_merge_visitor v = {
	    .ctx = &tb,
	    .begin = builder_begin,
	    .location = builder_location,
	    .stack = builder_stack,
	};
	int rc = store_merge_visit(s, sel, &v, err);

	free(tb.loc);
	free(tb.func);
	free(tb.map);
	free(tb.stack);
	return rc;
}
