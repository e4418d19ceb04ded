/*
 * delta.c — turns cumulative profiles into deltas between two scrapes, and
 * projects a profile onto some of its sample types.
 *
 * Both are a copy through the pprof builder: every sample of `cur` (and of
 * `prev`, negated) is re-interned into one builder, which sums samples with
 * the same stack and labels. The stack identity is therefore the resolved
 * frames (function names, files, lines, mapping, address), not the source
 * ids, which differ between two scrapes of the same process.
 *
 * Counter-reset rule (documented in scrape.h): when any value of the
 * difference is negative, the counters went backwards — the target
 * restarted or reset its profile — so cur itself is the delta.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/htab.h"
#include "scrape/scrape.h"

struct copier {
	struct pprof_builder *b;
	const struct pprof_profile *src;
	struct htab *locs;  /* source location id -> builder id */
	struct htab *funcs; /* source function id -> builder id */
	struct htab *maps;  /* source mapping id -> builder id */
};

static int copier_init(struct copier *c, struct pprof_builder *b, const struct pprof_profile *src)
{
	c->b = b;
	c->src = src;
	c->locs = htab_new(256);
	c->funcs = htab_new(256);
	c->maps = htab_new(8);
	return c->locs && c->funcs && c->maps ? 0 : -ENOMEM;
}

static void copier_release(struct copier *c)
{
	htab_free(c->locs);
	htab_free(c->funcs);
	htab_free(c->maps);
}

static uint64_t copy_mapping(struct copier *c, uint64_t id)
{
	uint64_t out;
	if (id == 0)
		return 0;
	if (htab_get(c->maps, &id, sizeof(id), &out))
		return out;
	const pprof_mapping_msg *m = pprof_mapping(c->src, id);
	if (!m)
		return 0;
	struct pprof_mapping_desc d = {
	    .memory_start = m->memory_start,
	    .memory_limit = m->memory_limit,
	    .file_offset = m->file_offset,
	    .filename = pprof_string(c->src, m->filename),
	    .build_id = pprof_string(c->src, m->build_id),
	    .has_functions = m->has_functions,
	    .has_filenames = m->has_filenames,
	    .has_line_numbers = m->has_line_numbers,
	    .has_inline_frames = m->has_inline_frames,
	};
	out = pprof_builder_mapping(c->b, &d);
	if (out && htab_put(c->maps, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

static uint64_t copy_function(struct copier *c, uint64_t id)
{
	uint64_t out;
	if (htab_get(c->funcs, &id, sizeof(id), &out))
		return out;
	const pprof_function_msg *f = pprof_function(c->src, id);
	if (!f)
		return 0;
	out = pprof_builder_function(c->b, pprof_string(c->src, f->name),
				     pprof_string(c->src, f->system_name),
				     pprof_string(c->src, f->filename), f->start_line);
	if (out && htab_put(c->funcs, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

static uint64_t copy_location(struct copier *c, uint64_t id)
{
	uint64_t out;
	struct pprof_line_desc lines_stack[16], *lines = lines_stack;

	if (htab_get(c->locs, &id, sizeof(id), &out))
		return out;
	const pprof_location_msg *l = pprof_location(c->src, id);
	if (!l)
		return 0;
	if (l->n_line > 16 && !(lines = calloc(l->n_line, sizeof(*lines))))
		return 0;
	out = 1;
	for (size_t i = 0; i < l->n_line && out; i++) {
		lines[i].function_id = copy_function(c, l->line[i]->function_id);
		lines[i].line = l->line[i]->line;
		lines[i].column = l->line[i]->column;
		out = lines[i].function_id;
	}
	if (out) {
		uint64_t map = copy_mapping(c, l->mapping_id);
		out = (l->mapping_id && !map)
			  ? 0
			  : pprof_builder_location(c->b, map, l->address, lines, l->n_line);
	}
	if (lines != lines_stack)
		free(lines);
	if (out && htab_put(c->locs, &id, sizeof(id), out) < 0)
		return 0;
	return out;
}

/* Adds one source sample with the values v (already selected and scaled). */
static int copy_sample(struct copier *c, const pprof_sample_msg *s, const int64_t *v)
{
	uint64_t ids_stack[128], *ids = ids_stack;
	struct pprof_label_desc lab_stack[16], *lab = lab_stack;
	int rc = 0;

	if (s->n_location_id > 128 && !(ids = calloc(s->n_location_id, sizeof(*ids))))
		return -ENOMEM;
	if (s->n_label > 16 && !(lab = calloc(s->n_label, sizeof(*lab)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->n_location_id; i++) {
		if (!(ids[i] = copy_location(c, s->location_id[i]))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		lab[i].key = pprof_string(c->src, l->key);
		lab[i].str = l->str ? pprof_string(c->src, l->str) : NULL;
		lab[i].num = l->num;
		lab[i].num_unit = l->num_unit ? pprof_string(c->src, l->num_unit) : NULL;
	}
	rc = pprof_builder_add_sample(c->b, ids, s->n_location_id, v, lab, s->n_label);
out:
	if (ids != ids_stack)
		free(ids);
	if (lab != lab_stack)
		free(lab);
	return rc;
}

/* Index in p of the sample type with the same type and unit strings as
 * type t of ref, or -1. */
static int same_type(const struct pprof_profile *p, const struct pprof_profile *ref, size_t t)
{
	const pprof_msg *m = pprof_profile_msg(p), *r = pprof_profile_msg(ref);
	const char *ty = pprof_string(ref, r->sample_type[t]->type);
	const char *un = pprof_string(ref, r->sample_type[t]->unit);
	for (size_t i = 0; i < m->n_sample_type; i++)
		if (strcmp(pprof_string(p, m->sample_type[i]->type), ty) == 0 &&
		    strcmp(pprof_string(p, m->sample_type[i]->unit), un) == 0)
			return (int)i;
	return -1;
}

static int start_builder(const struct pprof_profile *cur, const size_t *idx, size_t n,
			 int64_t duration, struct pprof_builder **out)
{
	const pprof_msg *m = pprof_profile_msg(cur);
	struct pprof_builder *b = pprof_builder_new();
	int rc = 0;
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = pprof_builder_add_sample_type(b,
						   pprof_string(cur, m->sample_type[idx[i]]->type),
						   pprof_string(cur, m->sample_type[idx[i]]->unit));
	if (rc == 0 && m->period_type)
		rc = pprof_builder_set_period(b, pprof_string(cur, m->period_type->type),
					      pprof_string(cur, m->period_type->unit), m->period);
	pprof_builder_set_time(b, m->time_nanos, duration);
	if (rc < 0) {
		pprof_builder_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* Copies the samples of src (types map[0..n) of src, times sign) into b;
 * with skip_zero, samples whose selected values are all 0 are left out. */
static int copy_all(struct pprof_builder *b, const struct pprof_profile *src, const int *map,
		    size_t n, int64_t sign, bool skip_zero)
{
	const pprof_msg *m = pprof_profile_msg(src);
	struct copier c;
	int64_t v[64];
	int rc = copier_init(&c, b, src);

	for (size_t i = 0; i < m->n_sample && rc == 0; i++) {
		bool any = false;
		for (size_t k = 0; k < n; k++) {
			v[k] = sign * m->sample[i]->value[map[k]];
			any = any || v[k] != 0;
		}
		if (skip_zero && !any)
			continue;
		rc = copy_sample(&c, m->sample[i], v);
	}
	copier_release(&c);
	return rc;
}

int scrape_delta(const struct pprof_profile *prev, const struct pprof_profile *cur,
		 const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		 struct kiln_error *err)
{
	const pprof_msg *cm = pprof_profile_msg(cur);
	struct pprof_builder *b = NULL;
	struct pprof_profile *diff = NULL;
	int cur_map[64], prev_map[64];
	int rc;

	*out = NULL;
	*reset = false;
	if (n == 0 || n > 64)
		return kiln_error_set(err, EINVAL, "delta over %zu sample types", n);
	for (size_t k = 0; k < n; k++) {
		cur_map[k] = (int)idx[k];
		prev_map[k] = prev ? same_type(prev, cur, idx[k]) : -1;
		if (prev && prev_map[k] < 0) {
			prev = NULL; /* the sample types changed: a new process */
			*reset = true;
		}
	}
	int64_t duration = cm->duration_nanos;
	if (prev && pprof_profile_msg(prev)->time_nanos && cm->time_nanos)
		duration = cm->time_nanos - pprof_profile_msg(prev)->time_nanos;

	if (prev) {
		/* cur - prev, zeros kept for now: the builder needs both sides
		 * to meet before a zero can be told from a missing sample. */
		if ((rc = start_builder(cur, idx, n, duration, &b)) < 0 ||
		    (rc = copy_all(b, cur, cur_map, n, 1, false)) < 0 ||
		    (rc = copy_all(b, prev, prev_map, n, -1, false)) < 0 ||
		    (rc = pprof_builder_to_profile(b, &diff, err)) < 0)
			goto fail;
		pprof_builder_free(b);
		b = NULL;
		const pprof_msg *dm = pprof_profile_msg(diff);
		for (size_t i = 0; i < dm->n_sample && !*reset; i++)
			for (size_t k = 0; k < n; k++)
				if (dm->sample[i]->value[k] < 0) {
					*reset = true;
					break;
				}
		if (*reset) {
			pprof_profile_free(diff);
			diff = NULL;
		}
	}
	/* Final pass: drop zero samples (from diff, or straight from cur). */
	int ident[64];
	for (size_t k = 0; k < n; k++)
		ident[k] = (int)k;
	if ((rc = start_builder(cur, idx, n, diff ? duration : cm->duration_nanos, &b)) < 0)
		goto fail;
	rc = diff ? copy_all(b, diff, ident, n, 1, true) : copy_all(b, cur, cur_map, n, 1, true);
	if (rc < 0 || (rc = pprof_builder_to_profile(b, out, err)) < 0)
		goto fail;
	pprof_builder_free(b);
	pprof_profile_free(diff);
	return 0;
fail:
	pprof_builder_free(b);
	pprof_profile_free(diff);
	if (rc == -ENOMEM)
		kiln_error_set(err, ENOMEM, "delta: out of memory");
	return kiln_error_set(err, -rc, "delta: cannot build the profile (%d)", rc);
}
