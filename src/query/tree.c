/*
 * tree.c — folding pprof profiles into the flame graph tree (see query.h).
 *
 * Adding a profile costs one pass over its locations and one over its
 * samples. Each location is turned once into its frames (caller first,
 * hidden binaries dropped) and cached, so a sample's stack is a
 * concatenation of cached frame lists; walking it down the tree is one hash
 * lookup per frame in `children`, keyed by (parent node, frame). Strings are
 * interned once per pprof string index, frames once per (name, binary).
 *
 * query_tree_finish sorts siblings by the rank of their frame (frames are
 * ranked once by name then binary, so sibling sorts compare integers) and
 * writes the nodes out in depth-first pre-order, which is the order of the
 * JSON columns and what the accessors expose.
 */
#include "common/grow.h"
#include "common/satadd.h"
#include "query/query_internal.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_NODES 5000000

/* ---- qmap ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	/* splitmix64 finalizer: keys are small structured integers */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

int qmap_init(struct qmap *m, size_t hint)
{
	size_t cap = 16;

	while (cap < hint * 2)
		cap *= 2;
	m->slots = calloc(cap, sizeof(*m->slots));
	m->cap = m->slots ? cap : 0;
	m->count = 0;
	return m->slots ? 0 : -ENOMEM;
}

void qmap_release(struct qmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

uint32_t qmap_get(const struct qmap *m, uint64_t key)
{
	size_t mask = m->cap - 1, i;

	if (!m->cap)
		return QNONE;
	for (i = mix64(key) & mask; m->slots[i].key; i = (i + 1) & mask)
		if (m->slots[i].key == key + 1)
			return m->slots[i].val;
	return QNONE;
}

static void qmap_insert_slot(struct qmap_slot *slots, size_t cap, uint64_t stored, uint32_t val)
{
	size_t mask = cap - 1, i;

	for (i = mix64(stored - 1) & mask; slots[i].key; i = (i + 1) & mask)
		;
	slots[i].key = stored;
	slots[i].val = val;
}

/* Moves every entry into a table of cap slots. */
static int qmap_rehash(struct qmap *m, size_t cap)
{
	struct qmap_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	mem_populate(slots, cap * sizeof(*slots));
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			qmap_insert_slot(slots, cap, m->slots[i].key, m->slots[i].val);
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

int qmap_reserve(struct qmap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 16;

	while ((m->count + n) * 2 > cap)
		cap *= 2;
	return cap == m->cap ? 0 : qmap_rehash(m, cap);
}

int qmap_put(struct qmap *m, uint64_t key, uint32_t val)
{
	if ((m->count + 1) * 2 > m->cap && qmap_rehash(m, m->cap ? m->cap * 2 : 16))
		return -ENOMEM;
	qmap_insert_slot(m->slots, m->cap, key + 1, val);
	m->count++;
	return 0;
}

/* ---- growth helper ------------------------------------------------------- */

int query_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t old = *cap;

	if (need <= old)
		return 0;
	if (grow_array(arr, cap, need, elem, 64))
		return -ENOMEM;
	/* the new part in one call rather than a page fault per 4 KiB */
	mem_populate((char *)*arr + old * elem, (*cap - old) * elem);
	return 0;
}

/* ---- strings and frames --------------------------------------------------- */

uint32_t query_tree_intern(struct query_tree *t, const char *s, size_t len)
{
	uint64_t id;
	char *copy;

	if (htab_get(t->str_index, s, len, &id))
		return (uint32_t)id;
	/* make room before indexing, so a failure leaves no dangling id */
	if (t->n_strs >= QNONE - 1 ||
	    query_grow((void **)&t->strs, &t->cap_strs, t->n_strs + 1, sizeof(*t->strs)))
		return QNONE;
	copy = arena_strndup(t->arena, s, len);
	if (!copy || htab_put(t->str_index, s, len, t->n_strs))
		return QNONE;
	t->strs[t->n_strs] = copy;
	return (uint32_t)t->n_strs++;
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static bool binary_hidden(const struct query_tree *t, const char *binary)
{
	if (!binary[0])
		return false;
	for (size_t i = 0; i < t->n_hide; i++)
		if (!strcmp(t->hide[i], binary) || !strcmp(t->hide[i], basename_of(binary)))
			return true;
	return false;
}

uint32_t query_tree_frame(struct query_tree *t, uint32_t name, uint32_t binary, uint32_t file,
			  int64_t line, uint32_t build_id)
{
	uint64_t key = (uint64_t)name << 32 | binary;
	uint32_t f = qmap_get(&t->frame_index, key);
	struct qframe *fr;

	if (f != QNONE) {
		fr = &t->frames[f];
		/* a later sighting may know more (symbolized by another profile);
		 * the smallest line names the frame, so that the answer does not
		 * depend on the order in which a store hands stacks over */
		if (!fr->file && file)
			fr->file = file;
		if (line && (!fr->line || line < fr->line))
			fr->line = line;
		return f;
	}
	if (query_grow((void **)&t->frames, &t->cap_frames, t->n_frames + 1, sizeof(*t->frames)))
		return QNONE;
	f = (uint32_t)t->n_frames;
	if (qmap_put(&t->frame_index, key, f))
		return QNONE;
	fr = &t->frames[t->n_frames++];
	fr->name = name;
	fr->binary = binary;
	fr->file = file;
	fr->line = line;
	fr->build_id = build_id;
	fr->flags = qrules_frame_flags(t->rules, t->strs[name]);
	fr->hidden = binary_hidden(t, t->strs[binary]) || (fr->flags & QFRAME_HIDE);
	return f;
}

uint32_t query_tree_address_frame(struct query_tree *t, uint32_t binary, uint32_t build_id,
				  bool mapped, uint64_t address, uint64_t memory_start,
				  uint64_t file_offset)
{
	char text[64 + 256];
	int n;

	if (mapped && binary)
		n = snprintf(text, sizeof(text), "[%.256s] +0x%" PRIx64,
			     basename_of(t->strs[binary]), address - memory_start + file_offset);
	else
		n = snprintf(text, sizeof(text), "0x%" PRIx64, address);
	if (n < 0 || (size_t)n >= sizeof(text))
		n = (int)strlen(text);
	uint32_t name = query_tree_intern(t, text, (size_t)n);
	if (name == QNONE)
		return QNONE;
	return query_tree_frame(t, name, binary, 0, 0, build_id);
}

/* ---- lifetime ------------------------------------------------------------- */

struct query_tree *query_tree_new(const struct query_tree_options *opts)
{
	struct query_tree *t = NULL;

	query_tree_create(opts, &t, NULL);
	return t;
}

int query_tree_create(const struct query_tree_options *opts, struct query_tree **out,
		      struct kiln_error *err)
{
	struct query_tree *t = calloc(1, sizeof(*t));
	struct qbuild_node *root;
	int rc;

	*out = NULL;
	if (!t)
		return kiln_error_set(err, ENOMEM, "flame graph: out of memory");
	t->arena = arena_new(0);
	t->str_index = htab_new(1024);
	if (!t->arena || !t->str_index)
		goto fail;
	if (qmap_init(&t->frame_index, 1024) || qmap_init(&t->children, 4096))
		goto fail;
	if (opts) {
		t->diff = opts->diff;
		t->max_nodes = opts->max_nodes;
		t->trim_fraction = opts->trim_fraction;
		t->diff_scale = opts->diff_scale;
		t->base_factor = opts->base_factor;
		if ((rc = qrules_new(opts, &t->rules, err))) {
			query_tree_free(t);
			return rc;
		}
		if (opts->n_hide_binaries) {
			t->hide = calloc(opts->n_hide_binaries, sizeof(*t->hide));
			if (!t->hide)
				goto fail;
			for (size_t i = 0; i < opts->n_hide_binaries; i++) {
				t->hide[i] = strdup(opts->hide_binaries[i]);
				if (!t->hide[i])
					goto fail;
				t->n_hide++;
			}
		}
	}
	if (!t->max_nodes)
		t->max_nodes = DEFAULT_MAX_NODES;
	/* string 0 is "", then "total" for the root */
	if (query_tree_intern(t, "", 0) != 0 ||
	    (t->str_total = query_tree_intern(t, "total", 5)) == QNONE)
		goto fail;
	t->unit = 0;
	t->sample_type = 0;
	if (query_grow((void **)&t->build, &t->cap_build, 1, sizeof(*t->build)))
		goto fail;
	root = &t->build[t->n_build++];
	memset(root, 0, sizeof(*root));
	root->frame = QNONE;
	root->parent = QNONE;
	root->first_child = QNONE;
	root->next_sibling = QNONE;
	t->group_frame = QNONE;
	*out = t;
	return 0;
fail:
	query_tree_free(t);
	return kiln_error_set(err, ENOMEM, "flame graph: out of memory");
}

void query_tree_free(struct query_tree *t)
{
	if (!t)
		return;
	qrules_free(t->rules);
	for (size_t i = 0; i < t->n_hide; i++)
		free(t->hide[i]);
	free(t->hide);
	arena_free(t->arena);
	htab_free(t->str_index);
	free(t->strs);
	free(t->frames);
	qmap_release(&t->frame_index);
	free(t->build);
	qmap_release(&t->children);
	free(t->nodes);
	free(t);
}

/* ---- adding a profile ----------------------------------------------------- */

/* Per-profile caches, freed at the end of query_tree_add. */
struct add_ctx {
	struct query_tree *t;
	const struct pprof_profile *p;
	const pprof_msg *m;
	uint32_t *str_map;     /* pprof string index -> tree string id (QNONE = not yet) */
	struct qmap loc_index; /* location id -> index in m->location */
	struct qlocs locs;     /* by index in m->location */
	struct qfold fold;
	bool dense_ids; /* location id == index + 1 for every location */
};

static uint32_t pstr(struct add_ctx *c, int64_t idx)
{
	const char *s;

	if (idx <= 0 || (size_t)idx >= c->m->n_string_table)
		return 0;
	if (c->str_map[idx] != QNONE)
		return c->str_map[idx];
	s = c->m->string_table[idx];
	c->str_map[idx] = query_tree_intern(c->t, s, strlen(s));
	return c->str_map[idx];
}

/* Resolves location index li into frames (caller first). */
static int resolve_location(struct add_ctx *c, size_t li)
{
	const pprof_location_msg *loc = c->m->location[li];
	const pprof_mapping_msg *map =
	    loc->mapping_id ? pprof_mapping(c->p, loc->mapping_id) : NULL;
	uint32_t binary = map ? pstr(c, map->filename) : 0;
	uint32_t build_id = map ? pstr(c, map->build_id) : 0;
	size_t start = c->locs.n_frames;
	bool symbolized = false;
	int rc;

	if (binary == QNONE || build_id == QNONE)
		return -ENOMEM;
	/* line[0] is the innermost inlined function: walk outermost first */
	for (size_t k = loc->n_line; k-- > 0;) {
		const pprof_function_msg *fn = loc->line[k]->function_id
						   ? pprof_function(c->p, loc->line[k]->function_id)
						   : NULL;
		uint32_t name, file;
		int64_t line;

		if (!fn)
			continue;
		name = pstr(c, fn->name);
		if (name == 0)
			name = pstr(c, fn->system_name);
		if (name == 0)
			continue;
		file = pstr(c, fn->filename);
		if (name == QNONE || file == QNONE)
			return -ENOMEM;
		line = fn->start_line ? fn->start_line : loc->line[k]->line;
		rc = qlocs_push(c->t, &c->locs,
				query_tree_frame(c->t, name, binary, file, line, build_id));
		if (rc)
			return rc;
		symbolized = true;
	}
	if (!symbolized) {
		rc = qlocs_push(c->t, &c->locs,
				query_tree_address_frame(c->t, binary, build_id, map != NULL,
							 loc->address, map ? map->memory_start : 0,
							 map ? map->file_offset : 0));
		if (rc)
			return rc;
	}
	qlocs_done(&c->locs, li, start);
	return 0;
}

/* Child of parent for frame f, created when absent. QNONE on failure
 * (*rc says why). */
static uint32_t child_of(struct query_tree *t, uint32_t parent, uint32_t f, int *rc)
{
	uint64_t key = (uint64_t)parent << 32 | f;
	uint32_t n = qmap_get(&t->children, key);
	struct qbuild_node *node;

	if (n != QNONE)
		return n;
	if (t->n_build >= t->max_nodes) {
		*rc = -E2BIG;
		return QNONE;
	}
	if (query_grow((void **)&t->build, &t->cap_build, t->n_build + 1, sizeof(*t->build)) ||
	    qmap_put(&t->children, key, (uint32_t)t->n_build)) {
		*rc = -ENOMEM;
		return QNONE;
	}
	n = (uint32_t)t->n_build++;
	node = &t->build[n];
	memset(node, 0, sizeof(*node));
	node->frame = f;
	node->parent = parent;
	node->first_child = QNONE;
	node->next_sibling = t->build[parent].first_child;
	t->build[parent].first_child = n;
	return n;
}

int query_tree_reserve(struct query_tree *t, size_t n)
{
	if (n > t->max_nodes)
		n = t->max_nodes;
	if (query_grow((void **)&t->build, &t->cap_build, t->n_build + n, sizeof(*t->build)))
		return -ENOMEM;
	return qmap_reserve(&t->children, n);
}

int qlocs_init(struct qlocs *l, size_t n)
{
	memset(l, 0, sizeof(*l));
	l->off = malloc((n ? n : 1) * sizeof(*l->off));
	l->len = malloc((n ? n : 1) * sizeof(*l->len));
	if (!l->off || !l->len)
		return -ENOMEM;
	memset(l->off, 0xff, n * sizeof(*l->off));
	l->n = n;
	return 0;
}

int qlocs_push(const struct query_tree *t, struct qlocs *l, uint32_t f)
{
	if (f == QNONE)
		return -ENOMEM;
	if (t->frames[f].hidden)
		return 0;
	if (query_grow((void **)&l->frames, &l->cap_frames, l->n_frames + 1, sizeof(*l->frames)))
		return -ENOMEM;
	l->frames[l->n_frames++] = f;
	return 0;
}

void qlocs_done(struct qlocs *l, uint32_t idx, size_t start)
{
	l->off[idx] = (uint32_t)start;
	l->len[idx] = (uint32_t)(l->n_frames - start);
}

void qlocs_release(struct qlocs *l)
{
	free(l->off);
	free(l->len);
	free(l->frames);
	memset(l, 0, sizeof(*l));
}

int qfold_begin(const struct query_tree *t, struct qfold *f, size_t *depth)
{
	*depth = 0;
	if (t->group_frame == QNONE)
		return 0;
	if (query_grow((void **)&f->stack, &f->cap_stack, 1, sizeof(*f->stack)))
		return -ENOMEM;
	f->stack[(*depth)++] = t->group_frame;
	return 0;
}

int query_tree_set_group(struct query_tree *t, const char *text)
{
	if (!text) {
		t->group_frame = QNONE;
		return 0;
	}
	uint32_t name = query_tree_intern(t, text, strlen(text));
	t->group_frame = name == QNONE ? QNONE : query_tree_frame(t, name, 0, 0, 0, 0);
	return t->group_frame == QNONE ? -ENOMEM : 0;
}

int qfold_push_location(const struct query_tree *t, struct qfold *f, const struct qlocs *l,
			uint32_t idx, size_t *depth)
{
	uint32_t off = l->off[idx], len = l->len[idx];

	if (query_grow((void **)&f->stack, &f->cap_stack, *depth + len, sizeof(*f->stack)))
		return -ENOMEM;
	for (uint32_t j = 0; j < len; j++) {
		f->stack[(*depth)++] = l->frames[off + j];
	}
	return 0;
}

int qfold_add(struct query_tree *t, struct qfold *f, size_t depth, int64_t v, bool base)
{
	uint32_t node = 0, *p;
	size_t common = 0, cap;
	int rc = 0;

	if (query_grow((void **)&f->prev_nodes, &f->cap_prev_nodes, depth + 1,
		       sizeof(*f->prev_nodes)))
		return -ENOMEM;
	while (common < depth && common < f->prev_depth &&
	       f->stack[common] == f->prev_stack[common])
		common++;
	for (size_t d = 0; d < depth; d++) {
		if (d < common) {
			node = f->prev_nodes[d];
		} else {
			node = child_of(t, node, f->stack[d], &rc);
			if (node == QNONE)
				return rc;
			f->prev_nodes[d] = node;
		}
	}
	/* this stack's frames become the previous ones */
	p = f->prev_stack;
	cap = f->cap_prev_stack;
	f->prev_stack = f->stack;
	f->cap_prev_stack = f->cap_stack;
	f->stack = p;
	f->cap_stack = cap;
	f->prev_depth = depth;
	if (base)
		sat_acc_i64(&t->build[node].base_self, v);
	else
		sat_acc_i64(&t->build[node].self, v);
	return 0;
}

void qfold_release(struct qfold *f)
{
	free(f->stack);
	free(f->prev_stack);
	free(f->prev_nodes);
	memset(f, 0, sizeof(*f));
}

static int add_samples(struct add_ctx *c, int idx, bool base)
{
	struct query_tree *t = c->t;

	for (size_t si = 0; si < c->m->n_sample; si++) {
		const pprof_sample_msg *s = c->m->sample[si];
		int64_t v = s->value[idx];
		size_t depth = 0;
		int rc = qfold_begin(t, &c->fold, &depth);

		if (rc)
			return rc;
		if (v == 0)
			continue;
		if (base)
			sat_acc_i64(&t->base_total, v);
		else
			sat_acc_i64(&t->total, v);
		/* location_id[0] is the leaf: collect root first */
		for (size_t k = s->n_location_id; k-- > 0;) {
			uint64_t id = s->location_id[k];
			uint32_t li = c->dense_ids && id - 1 < c->m->n_location
					  ? (uint32_t)(id - 1)
					  : qmap_get(&c->loc_index, id);

			if (li == QNONE)
				continue; /* validated profiles never get here */
			if (c->locs.off[li] == QNONE && (rc = resolve_location(c, li)))
				return rc;
			if (qfold_push_location(t, &c->fold, &c->locs, li, &depth))
				return -ENOMEM;
		}
		if (t->rules && !qrules_apply(t, c->fold.stack, &depth))
			continue;
		if (base)
			sat_acc_i64(&t->base_filtered, v);
		else
			sat_acc_i64(&t->filtered, v);
		rc = qfold_add(t, &c->fold, depth, v, base);
		if (rc)
			return rc;
	}
	return 0;
}

int query_tree_check_add(const struct query_tree *t, enum query_side side, struct kiln_error *err)
{
	if (t->finished)
		return kiln_error_set(err, EINVAL, "flame graph: profile added after finish");
	if (t->diff ? side == QUERY_SIDE_SINGLE : side != QUERY_SIDE_SINGLE)
		return kiln_error_set(err, EINVAL, "flame graph: a %s tree takes %s profiles",
				      t->diff ? "diff" : "plain",
				      t->diff ? "BASE or COMPARE" : "SINGLE");
	return 0;
}

int query_tree_add(struct query_tree *t, const struct pprof_profile *p, int sample_index,
		   enum query_side side, struct kiln_error *err)
{
	struct add_ctx c = {.t = t, .p = p, .m = pprof_profile_msg(p)};
	int rc;

	rc = query_tree_check_add(t, side, err);
	if (rc)
		return rc;
	if (sample_index < 0) {
		sample_index = pprof_sample_type_index(p, NULL, err);
		if (sample_index < 0)
			return sample_index;
	}
	if ((size_t)sample_index >= c.m->n_sample_type)
		return kiln_error_set(
		    err, EINVAL, "flame graph: sample type index %d out of range (profile has %zu)",
		    sample_index, c.m->n_sample_type);

	rc = -ENOMEM;
	c.str_map = malloc((c.m->n_string_table + 1) * sizeof(*c.str_map));
	if (!c.str_map || qlocs_init(&c.locs, c.m->n_location + 1) ||
	    qmap_init(&c.loc_index, c.m->n_location))
		goto out;
	memset(c.str_map, 0xff, (c.m->n_string_table + 1) * sizeof(*c.str_map));
	c.dense_ids = true;
	for (size_t i = 0; i < c.m->n_location; i++)
		if (c.m->location[i]->id != i + 1)
			c.dense_ids = false;
	for (size_t i = 0; !c.dense_ids && i < c.m->n_location; i++)
		if (qmap_get(&c.loc_index, c.m->location[i]->id) == QNONE &&
		    qmap_put(&c.loc_index, c.m->location[i]->id, (uint32_t)i))
			goto out;

	if (!t->have_unit) {
		const Perftools__Profiles__ValueType *vt = c.m->sample_type[sample_index];

		t->unit = pstr(&c, vt->unit);
		t->sample_type = pstr(&c, vt->type);
		if (t->unit == QNONE || t->sample_type == QNONE)
			goto out;
		t->have_unit = true;
	}
	rc = add_samples(&c, sample_index, side == QUERY_SIDE_BASE);
out:
	if (rc == -E2BIG)
		kiln_error_set(err, E2BIG, "flame graph: more than %zu nodes", t->max_nodes);
	else if (rc)
		kiln_error_set(err, -rc, "flame graph: out of memory");
	free(c.str_map);
	qlocs_release(&c.locs);
	qfold_release(&c.fold);
	qmap_release(&c.loc_index);
	return rc;
}

/* ---- finishing -------------------------------------------------------------- */

static int cmp_frame(const void *a, const void *b, void *ctx)
{
	const struct query_tree *t = ctx;
	const struct qframe *fa = &t->frames[*(const uint32_t *)a];
	const struct qframe *fb = &t->frames[*(const uint32_t *)b];
	int c = strcmp(t->strs[fa->name], t->strs[fb->name]);

	if (c)
		return c;
	return strcmp(t->strs[fa->binary], t->strs[fb->binary]);
}

struct child_ref {
	uint32_t rank;
	uint32_t node;
};

static int cmp_child(const void *a, const void *b)
{
	const struct child_ref *x = a, *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static int64_t scaled(int64_t v, double k)
{
	double x = (double)v * k;
	return x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : llround(x);
}

/* A's values in B's terms (query_tree_options.diff_scale), before cum
 * values are summed, so every base value derives from scaled selves. */
static void scale_base(struct query_tree *t)
{
	double k = 1;

	if (t->diff && t->diff_scale == QUERY_DIFF_BY_TOTAL && t->base_total > 0)
		k = (double)t->total / (double)t->base_total;
	else if (t->diff && t->diff_scale == QUERY_DIFF_BY_FACTOR && t->base_factor > 0)
		k = t->base_factor;
	t->base_scale = k;
	if (k == 1)
		return;
	for (size_t i = 0; i < t->n_build; i++)
		t->build[i].base_self = scaled(t->build[i].base_self, k);
	t->base_total = scaled(t->base_total, k);
	t->base_filtered = scaled(t->base_filtered, k);
}

int query_tree_finish(struct query_tree *t, struct kiln_error *err)
{
	uint32_t *order = NULL, *rank = NULL, *stack = NULL;
	struct child_ref *kids = NULL;
	int64_t *pre_index = NULL; /* build node -> pre-order index */
	size_t n_stack = 0, cap_kids = 0, n = 0;
	int64_t threshold_a = 0, threshold_b = 0;
	int rc = -ENOMEM;

	if (t->finished)
		return 0;
	scale_base(t);
	/* rank frames by (name, binary) */
	order = malloc((t->n_frames + 1) * sizeof(*order));
	rank = malloc((t->n_frames + 1) * sizeof(*rank));
	stack = malloc(t->n_build * sizeof(*stack));
	pre_index = malloc(t->n_build * sizeof(*pre_index));
	t->nodes = malloc(t->n_build * sizeof(*t->nodes));
	if (!order || !rank || !stack || !pre_index || !t->nodes)
		goto out;
	mem_populate(t->nodes, t->n_build * sizeof(*t->nodes));
	mem_populate(pre_index, t->n_build * sizeof(*pre_index));
	for (size_t i = 0; i < t->n_frames; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, t->n_frames, sizeof(*order), cmp_frame, t);
	for (size_t i = 0; i < t->n_frames; i++)
		rank[order[i]] = (uint32_t)i;

	/* cum values: only self values were recorded while adding (a
	 * sample's value lands on its leaf alone); children are created after
	 * their parents, so one reverse pass sums subtrees */
	for (size_t i = t->n_build; i-- > 1;) {
		struct qbuild_node *bn = &t->build[i];

		sat_acc_i64(&bn->cum, bn->self);
		sat_acc_i64(&bn->base_cum, bn->base_self);
		sat_acc_i64(&t->build[bn->parent].cum, bn->cum);
		sat_acc_i64(&t->build[bn->parent].base_cum, bn->base_cum);
	}
	sat_acc_i64(&t->build[0].cum, t->build[0].self);
	sat_acc_i64(&t->build[0].base_cum, t->build[0].base_self);

	if (t->trim_fraction > 0) {
		threshold_b = (int64_t)(t->trim_fraction * (double)abs64(t->filtered));
		threshold_a = (int64_t)(t->trim_fraction * (double)abs64(t->base_filtered));
	}

	/* iterative pre-order DFS; children pushed in reverse rank order */
	stack[n_stack++] = 0;
	while (n_stack) {
		uint32_t b = stack[--n_stack];
		const struct qbuild_node *bn = &t->build[b];
		struct qnode *out = &t->nodes[n];
		size_t nk = 0;

		pre_index[b] = (int64_t)n;
		out->frame = bn->frame;
		out->parent = b ? pre_index[bn->parent] : -1;
		out->depth = b ? t->nodes[out->parent].depth + 1 : 0;
		out->cum = bn->cum;
		out->self = bn->self;
		out->base_cum = bn->base_cum;
		out->base_self = bn->base_self;
		out->subtree_size = 1;
		if (out->depth > t->height)
			t->height = out->depth;
		n++;
		for (uint32_t k = bn->first_child; k != QNONE; k = t->build[k].next_sibling) {
			const struct qbuild_node *kn = &t->build[k];

			if (t->trim_fraction > 0 && abs64(kn->cum) < threshold_b &&
			    (!t->diff || abs64(kn->base_cum) < threshold_a))
				continue;
			if (query_grow((void **)&kids, &cap_kids, nk + 1, sizeof(*kids)))
				goto out;
			kids[nk].rank = rank[kn->frame];
			kids[nk].node = k;
			nk++;
		}
		if (nk > 1)
			qsort(kids, nk, sizeof(*kids), cmp_child);
		for (size_t i = nk; i-- > 0;)
			stack[n_stack++] = kids[i].node;
	}
	t->n_nodes = n;
	/* subtree sizes: children follow parents in pre-order, so one reverse
	 * pass accumulates them */
	for (size_t i = n; i-- > 1;)
		t->nodes[t->nodes[i].parent].subtree_size += t->nodes[i].subtree_size;

	/* the build-time structures are no longer needed */
	free(t->build);
	t->build = NULL;
	t->n_build = t->cap_build = 0;
	qmap_release(&t->children);
	t->finished = true;
	rc = 0;
out:
	if (rc)
		kiln_error_set(err, ENOMEM, "flame graph: out of memory while finishing");
	free(order);
	free(rank);
	free(stack);
	free(pre_index);
	free(kids);
	return rc;
}

/* One or two profiles into a finished tree. The first side added sets the unit,
 * so a diff adds its comparison profile first. */
static int tree_build_sides(const struct query_tree_options *opts, bool diff,
			    const struct pprof_profile *first, int first_index,
			    enum query_side first_side, const struct pprof_profile *second,
			    int second_index, enum query_side second_side, struct query_tree **out,
			    struct kiln_error *err)
{
	struct query_tree_options o = opts ? *opts : (struct query_tree_options){0};
	struct query_tree *t;
	int rc;

	*out = NULL;
	o.diff = diff;
	rc = query_tree_create(&o, &t, err);
	if (rc)
		return rc;
	rc = query_tree_add(t, first, first_index, first_side, err);
	if (!rc && second)
		rc = query_tree_add(t, second, second_index, second_side, err);
	if (!rc)
		rc = query_tree_finish(t, err);
	if (rc) {
		query_tree_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int query_tree_build(const struct pprof_profile *p, int sample_index,
		     const struct query_tree_options *opts, struct query_tree **out,
		     struct kiln_error *err)
{
	return tree_build_sides(opts, false, p, sample_index, QUERY_SIDE_SINGLE, NULL, 0,
				QUERY_SIDE_SINGLE, out, err);
}

int query_tree_build_diff(const struct pprof_profile *a, int a_index, const struct pprof_profile *b,
			  int b_index, const struct query_tree_options *opts,
			  struct query_tree **out, struct kiln_error *err)
{
	return tree_build_sides(opts, true, b, b_index, QUERY_SIDE_COMPARE, a, a_index,
				QUERY_SIDE_BASE, out, err);
}

/* ---- accessors ------------------------------------------------------------- */

size_t query_tree_node_count(const struct query_tree *t)
{
	return t->finished ? t->n_nodes : 0;
}

void query_tree_node(const struct query_tree *t, size_t i, struct query_node *out)
{
	const struct qnode *n = &t->nodes[i];

	memset(out, 0, sizeof(*out));
	if (n->frame == QNONE) {
		out->name = t->str_total;
	} else {
		const struct qframe *f = &t->frames[n->frame];

		out->name = f->name;
		out->binary = f->binary;
		out->file = f->file;
		out->build_id = f->build_id;
		out->line = f->line;
	}
	out->depth = n->depth;
	out->parent = n->parent;
	out->first_child = n->subtree_size > 1 ? (int64_t)i + 1 : -1;
	out->next_sibling = -1;
	if (i > 0) {
		size_t next = i + n->subtree_size;
		const struct qnode *p = &t->nodes[n->parent];

		if (next < (size_t)n->parent + p->subtree_size)
			out->next_sibling = (int64_t)next;
	}
	out->subtree_size = n->subtree_size;
	out->cum = n->cum;
	out->self = n->self;
	out->base_cum = n->base_cum;
	out->base_self = n->base_self;
	out->diff = t->diff ? n->cum - n->base_cum : 0;
}

size_t query_tree_string_count(const struct query_tree *t)
{
	return t->n_strs;
}

const char *query_tree_string(const struct query_tree *t, uint32_t id)
{
	return id < t->n_strs ? t->strs[id] : "";
}

bool query_tree_is_diff(const struct query_tree *t)
{
	return t->diff;
}

double query_tree_base_scale(const struct query_tree *t)
{
	return t->base_scale > 0 ? t->base_scale : 1;
}

int64_t query_tree_total(const struct query_tree *t)
{
	return t->total;
}

int64_t query_tree_filtered(const struct query_tree *t)
{
	return t->filtered;
}

int64_t query_tree_base_total(const struct query_tree *t)
{
	return t->base_total;
}

int64_t query_tree_base_filtered(const struct query_tree *t)
{
	return t->base_filtered;
}

uint32_t query_tree_height(const struct query_tree *t)
{
	return t->height;
}

const char *query_tree_unit(const struct query_tree *t)
{
	return t->strs[t->unit];
}

const char *query_tree_sample_type(const struct query_tree *t)
{
	return t->strs[t->sample_type];
}
