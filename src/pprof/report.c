/*
 * report.c — folded stacks and the flat/cum table (see pprof.h).
 *
 * Both walk every sample's frames, so both first resolve each location once:
 * folded keeps the location's frames as a ready "outer;inner" fragment, top
 * keeps the entry index of each frame. Samples then cost one pass over their
 * location ids. Names of unsymbolized frames ("0x...") are made here and
 * live in an arena owned by the caller's result.
 */
#include "common/grow.h"
#include "pprof/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of line j of location l (or its address when it has no lines). */
static const char *frame_name(const struct pprof_profile *p, const pprof_location_msg *l, size_t j,
			      char *scratch, size_t n)
{
	const pprof_function_msg *f;

	if (l->n_line) {
		f = pprof_function(p, l->line[j]->function_id);
		if (f && pprof_string(p, f->name)[0])
			return pprof_string(p, f->name);
		if (f && pprof_string(p, f->system_name)[0])
			return pprof_string(p, f->system_name);
	}
	snprintf(scratch, n, "0x%" PRIx64, l->address);
	return scratch;
}

/* ---- folded ---- */

struct fold_line {
	const char *stack;
	size_t len;
	int64_t value;
};

static int fold_cmp(const void *a, const void *b)
{
	const struct fold_line *x = a, *y = b;
	int c = memcmp(x->stack, y->stack, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Fragment of location i: its frames root-first, joined by ';'. */
static int location_fragments(const struct pprof_profile *p, struct arena *a, char ***out)
{
	const pprof_msg *m = p->msg;
	char **frag = arena_alloc(a, (m->n_location + 1) * sizeof(*frag));
	struct buf s = {0};
	char scratch[32];

	if (!frag)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		size_t n = l->n_line ? l->n_line : 1;

		buf_reset(&s);
		for (size_t j = n; j-- > 0;) {
			if (j != n - 1)
				buf_append(&s, ";", 1);
			buf_append_str(&s, frame_name(p, l, j, scratch, sizeof(scratch)));
		}
		frag[i] = arena_strndup(a, s.data ? (char *)s.data : "", s.len);
		if (!frag[i]) {
			buf_free(&s);
			return -ENOMEM;
		}
	}
	buf_free(&s);
	*out = frag;
	return 0;
}

int pprof_folded(const struct pprof_profile *p, int ti, struct buf *out)
{
	const pprof_msg *m = p->msg;
	struct arena *a = arena_new(0);
	struct htab *stacks = htab_new(m->n_sample);
	struct fold_line *lines = NULL;
	struct buf key = {0};
	size_t n = 0, iter = 0, len;
	const void *k;
	uint64_t idx;
	char **frag;
	int rc = -ENOMEM;

	if (!a || !stacks || location_fragments(p, a, &frag))
		goto out;
	lines = malloc((m->n_sample + 1) * sizeof(*lines));
	if (!lines)
		goto out;
	for (size_t i = 0; i < m->n_sample; i++) {
		const pprof_sample_msg *s = m->sample[i];
		uint64_t *slot;

		if (s->value[ti] == 0)
			continue;
		buf_reset(&key);
		for (size_t j = s->n_location_id; j-- > 0;) {
			size_t pos = pprof_idtab_index(&p->locations, s->location_id[j]);

			if (j != s->n_location_id - 1 && buf_append(&key, ";", 1))
				goto out;
			if (buf_append_str(&key, frag[pos]))
				goto out;
		}
		slot = htab_lookup(stacks, key.data ? (void *)key.data : "", key.len);
		if (slot) {
			lines[*slot].value = pprof_add(lines[*slot].value, s->value[ti]);
			continue;
		}
		if (htab_put(stacks, key.data ? (void *)key.data : "", key.len, n))
			goto out;
		lines[n].value = s->value[ti];
		n++;
	}
	/* The table owns a copy of each key: point the lines at those. */
	while (htab_next(stacks, &iter, &k, &len, &idx)) {
		lines[idx].stack = k;
		lines[idx].len = len;
	}
	qsort(lines, n, sizeof(*lines), fold_cmp);
	for (size_t i = 0; i < n; i++) {
		if (lines[i].value == 0)
			continue;
		if (buf_append(out, lines[i].stack, lines[i].len) ||
		    buf_printf(out, " %" PRId64 "\n", lines[i].value))
			goto out;
	}
	rc = 0;
out:
	free(lines);
	buf_free(&key);
	htab_free(stacks);
	arena_free(a);
	return rc;
}

/* ---- top ---- */

static int top_cmp(const void *a, const void *b)
{
	const struct pprof_top_entry *x = a, *y = b;
	int64_t fx = x->flat < 0 ? -x->flat : x->flat, fy = y->flat < 0 ? -y->flat : y->flat;
	int64_t cx = x->cum < 0 ? -x->cum : x->cum, cy = y->cum < 0 ? -y->cum : y->cum;

	if (fx != fy)
		return fx > fy ? -1 : 1;
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(x->name, y->name);
}

int pprof_top(const struct pprof_profile *p, int ti, struct pprof_top *out)
{
	const pprof_msg *m = p->msg;
	struct htab *names = htab_new(m->n_function);
	size_t *loc_start = calloc(m->n_location + 1, sizeof(size_t));
	size_t n_frames = 0, cap = 0;
	uint32_t *frames = NULL, *stamp = NULL;
	int rc = -ENOMEM;
	char scratch[32];

	*out = (struct pprof_top){0};
	out->names = arena_new(0);
	if (!names || !loc_start || !out->names)
		goto out;
	for (size_t i = 0; i < m->n_location; i++)
		n_frames += m->location[i]->n_line ? m->location[i]->n_line : 1;
	frames = malloc((n_frames + 1) * sizeof(*frames));
	if (!frames)
		goto out;
	/* Entry index of every frame, location by location (innermost first). */
	n_frames = 0;
	for (size_t i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		size_t nl = l->n_line ? l->n_line : 1;

		loc_start[i] = n_frames;
		for (size_t j = 0; j < nl; j++) {
			const char *name = frame_name(p, l, j, scratch, sizeof(scratch));
			uint64_t idx = out->n;
			int r = htab_intern(names, name, strlen(name), &idx);

			if (r < 0)
				goto out;
			if (r == 0) {
				if (GROW_ARRAY(out->entries, cap, out->n + 1, 256))
					goto out;
				if (name == scratch)
					name = arena_strdup(out->names, scratch);
				if (!name)
					goto out;
				out->entries[out->n] = (struct pprof_top_entry){.name = name};
				out->n++;
			}
			frames[n_frames++] = (uint32_t)idx;
		}
	}
	loc_start[m->n_location] = n_frames;
	stamp = calloc(out->n + 1, sizeof(*stamp));
	if (!stamp)
		goto out;
	/* stamp[e] == i + 1 once entry e has counted sample i's cum. */
	for (size_t i = 0; i < m->n_sample; i++) {
		const pprof_sample_msg *s = m->sample[i];
		int64_t v = s->value[ti];

		if (v == 0)
			continue;
		out->total = pprof_add(out->total, v);
		for (size_t j = 0; j < s->n_location_id; j++) {
			size_t pos = pprof_idtab_index(&p->locations, s->location_id[j]);

			for (size_t f = loc_start[pos]; f < loc_start[pos + 1]; f++) {
				struct pprof_top_entry *e = &out->entries[frames[f]];

				if (j == 0 && f == loc_start[pos])
					e->flat = pprof_add(e->flat, v);
				if (f + 1 < loc_start[pos + 1])
					e->called_inline = true;
				else if (j + 1 < s->n_location_id)
					e->called_outline = true;
				if (stamp[frames[f]] != (uint32_t)i + 1) {
					stamp[frames[f]] = (uint32_t)i + 1;
					e->cum = pprof_add(e->cum, v);
				}
			}
		}
	}
	/* Functions only in zero-valued samples are left out, as pprof does. */
	{
		size_t kept = 0;

		for (size_t i = 0; i < out->n; i++)
			if (stamp[i])
				out->entries[kept++] = out->entries[i];
		out->n = kept;
	}
	if (out->n)
		qsort(out->entries, out->n, sizeof(*out->entries), top_cmp);
	rc = 0;
out:
	free(stamp);
	free(frames);
	free(loc_start);
	htab_free(names);
	if (rc)
		pprof_top_free(out);
	return rc;
}

void pprof_top_free(struct pprof_top *t)
{
	free(t->entries);
	arena_free(t->names);
	*t = (struct pprof_top){0};
}
