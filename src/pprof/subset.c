/*
 * subset.c — a profile made of some samples of another, with new values.
 *
 * What a scraper needs twice per cumulative profile (the delta of the
 * counters and the gauge types as scraped): the same stacks, fewer samples,
 * other numbers. The builder would re-intern every string, function and
 * location through hash tables; here the source is already valid and
 * deduplicated as much as it is going to be, so objects are remapped by
 * position with plain arrays: one pass marks what the chosen samples use
 * (locations, then their mappings and functions, then strings), ids are
 * renumbered 1..N in order of first use, and the marked objects are copied
 * into the new profile's arena. Nothing is hashed, unused objects are left
 * out, and the cost is linear in what is copied.
 */
#include "pprof/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct remap {
	const struct pprof_profile *src;
	/* By position in the source arrays: new index (strings) or id
	 * (objects); 0 = not used (string 0 always maps to 0). */
	uint32_t *str, *loc, *fn, *map;
	/* Source positions in order of first use. */
	uint32_t *str_order, *loc_order, *fn_order, *map_order;
	size_t n_str, n_loc, n_fn, n_map;
};

static int64_t use_str(struct remap *r, int64_t idx)
{
	if (idx <= 0 || (uint64_t)idx >= r->src->msg->n_string_table)
		return 0;
	if (!r->str[idx]) {
		r->str_order[r->n_str] = (uint32_t)idx;
		r->str[idx] = (uint32_t)r->n_str++;
	}
	return r->str[idx];
}

/* Inline: called for every frame of every chosen sample (out of line, the
 * call was three quarters of its cost). */
static inline __attribute__((always_inline)) uint64_t
use_obj(const struct pprof_idtab *t, uint64_t id, uint32_t *ids, uint32_t *order, size_t *n)
{
	size_t pos = pprof_idtab_index(t, id);
	if (pos == SIZE_MAX)
		return 0;
	if (!ids[pos]) {
		order[*n] = (uint32_t)pos;
		ids[pos] = (uint32_t)++ * n;
	}
	return ids[pos];
}

static int copy_strings(struct remap *r, struct arena *a, pprof_msg *m)
{
	const pprof_msg *s = r->src->msg;
	size_t bytes = 0;
	m->n_string_table = r->n_str;
	m->string_table = arena_alloc(a, r->n_str * sizeof(char *));
	if (!m->string_table)
		return -ENOMEM;
	for (size_t i = 1; i < r->n_str; i++)
		bytes += strlen(s->string_table[r->str_order[i]]) + 1;
	char *chars = arena_alloc(a, bytes + 1);
	if (!chars)
		return -ENOMEM;
	chars[0] = 0;
	m->string_table[0] = chars++;
	for (size_t i = 1; i < r->n_str; i++) {
		const char *in = s->string_table[r->str_order[i]];
		size_t len = strlen(in) + 1;
		memcpy(chars, in, len);
		m->string_table[i] = chars;
		chars += len;
	}
	return 0;
}

int pprof_profile_subset(const struct pprof_profile *src, const size_t *types, size_t n_types,
			 const size_t *samples, const int64_t *values, size_t n_samples,
			 int64_t time_nanos, int64_t duration_nanos, struct pprof_profile **out,
			 struct kiln_error *err)
{
	const pprof_msg *s = src->msg;
	size_t ns = s->n_string_table, nl = s->n_location, nf = s->n_function, nm = s->n_mapping;
	struct remap r = {.src = src};
	struct pprof_profile *p = NULL;
	uint32_t *mem = NULL;
	pprof_msg *m;
	size_t n_locs = 0, n_lines = 0, n_labels = 0;
	int rc;

	*out = NULL;
	for (size_t t = 0; t < n_types; t++)
		if (types[t] >= s->n_sample_type)
			return kiln_error_set(err, EINVAL, "subset: no sample type %zu", types[t]);
	for (size_t i = 0; i < n_samples; i++)
		if (samples[i] >= s->n_sample)
			return kiln_error_set(err, EINVAL, "subset: no sample %zu", samples[i]);
	/* Two arrays per kind: ids by position, then positions in order. */
	mem = calloc(2 * (ns + nl + nf + nm) + 8, sizeof(*mem));
	if (!mem)
		goto fail;
	r.str = mem;
	r.loc = r.str + ns + 1;
	r.fn = r.loc + nl + 1;
	r.map = r.fn + nf + 1;
	r.str_order = r.map + nm + 1;
	r.loc_order = r.str_order + ns + 1;
	r.fn_order = r.loc_order + nl + 1;
	r.map_order = r.fn_order + nf + 1;
	r.n_str = 1; /* "" */

	/* Mark what the samples use, in order of first use. */
	for (size_t i = 0; i < n_samples; i++) {
		const pprof_sample_msg *sm = s->sample[samples[i]];
		for (size_t k = 0; k < sm->n_location_id; k++)
			use_obj(&src->locations, sm->location_id[k], r.loc, r.loc_order, &r.n_loc);
		for (size_t k = 0; k < sm->n_label; k++) {
			use_str(&r, sm->label[k]->key);
			use_str(&r, sm->label[k]->str);
			use_str(&r, sm->label[k]->num_unit);
		}
		n_locs += sm->n_location_id;
		n_labels += sm->n_label;
	}
	for (size_t i = 0; i < r.n_loc; i++) {
		const pprof_location_msg *l = s->location[r.loc_order[i]];
		if (l->mapping_id)
			use_obj(&src->mappings, l->mapping_id, r.map, r.map_order, &r.n_map);
		for (size_t k = 0; k < l->n_line; k++)
			use_obj(&src->functions, l->line[k]->function_id, r.fn, r.fn_order,
				&r.n_fn);
		n_lines += l->n_line;
	}

	if (!(p = calloc(1, sizeof(*p))))
		goto fail;
	size_t estimate = n_samples * (sizeof(pprof_sample_msg) + 8 * n_types + 16) + n_locs * 8 +
			  n_labels * 64 + r.n_loc * (sizeof(pprof_location_msg) + 8) +
			  n_lines * 48 + r.n_fn * (sizeof(pprof_function_msg) + 48) + 4096;
	if (!(p->arena = arena_new(estimate < 16384 ? 16384 : estimate)) ||
	    !(m = arena_alloc(p->arena, sizeof(*m))))
		goto fail;
	*m = (pprof_msg)PERFTOOLS__PROFILES__PROFILE__INIT;
	p->msg = m;
	struct arena *a = p->arena;

	/* Header. */
	m->n_sample_type = n_types;
	m->sample_type = arena_alloc(a, (n_types + 1) * sizeof(*m->sample_type));
	Perftools__Profiles__ValueType *vt = arena_alloc(a, (n_types + 1) * sizeof(*vt));
	if (!m->sample_type || !vt)
		goto fail;
	for (size_t t = 0; t < n_types; t++) {
		vt[t] = *s->sample_type[types[t]];
		vt[t].type = use_str(&r, vt[t].type);
		vt[t].unit = use_str(&r, vt[t].unit);
		m->sample_type[t] = &vt[t];
		if (s->default_sample_type &&
		    s->sample_type[types[t]]->type == s->default_sample_type)
			m->default_sample_type = vt[t].type;
	}
	if (s->period_type) {
		if (!(m->period_type = arena_alloc(a, sizeof(*m->period_type))))
			goto fail;
		*m->period_type = *s->period_type;
		m->period_type->type = use_str(&r, s->period_type->type);
		m->period_type->unit = use_str(&r, s->period_type->unit);
	}
	m->period = s->period;
	m->time_nanos = time_nanos;
	m->duration_nanos = duration_nanos;
	m->drop_frames = use_str(&r, s->drop_frames);
	m->keep_frames = use_str(&r, s->keep_frames);
	m->doc_url = use_str(&r, s->doc_url);
	if (s->n_comment) {
		if (!(m->comment = arena_alloc(a, s->n_comment * sizeof(*m->comment))))
			goto fail;
		for (size_t i = 0; i < s->n_comment; i++)
			m->comment[i] = use_str(&r, s->comment[i]);
		m->n_comment = s->n_comment;
	}

	/* Mappings and functions (their strings are marked here). */
	m->n_mapping = r.n_map;
	m->mapping = arena_alloc(a, (r.n_map + 1) * sizeof(*m->mapping));
	pprof_mapping_msg *maps = arena_alloc(a, (r.n_map + 1) * sizeof(*maps));
	m->n_function = r.n_fn;
	m->function = arena_alloc(a, (r.n_fn + 1) * sizeof(*m->function));
	pprof_function_msg *fns = arena_alloc(a, (r.n_fn + 1) * sizeof(*fns));
	if (!m->mapping || !maps || !m->function || !fns)
		goto fail;
	for (size_t i = 0; i < r.n_map; i++) {
		maps[i] = *s->mapping[r.map_order[i]];
		maps[i].id = i + 1;
		maps[i].filename = use_str(&r, maps[i].filename);
		maps[i].build_id = use_str(&r, maps[i].build_id);
		m->mapping[i] = &maps[i];
	}
	for (size_t i = 0; i < r.n_fn; i++) {
		fns[i] = *s->function[r.fn_order[i]];
		fns[i].id = i + 1;
		fns[i].name = use_str(&r, fns[i].name);
		fns[i].system_name = use_str(&r, fns[i].system_name);
		fns[i].filename = use_str(&r, fns[i].filename);
		m->function[i] = &fns[i];
	}

	/* Locations. */
	m->n_location = r.n_loc;
	m->location = arena_alloc(a, (r.n_loc + 1) * sizeof(*m->location));
	pprof_location_msg *locs = arena_alloc(a, (r.n_loc + 1) * sizeof(*locs));
	Perftools__Profiles__Line *lines = arena_alloc(a, (n_lines + 1) * sizeof(*lines));
	Perftools__Profiles__Line **line_ptrs = arena_alloc(a, (n_lines + 1) * sizeof(*line_ptrs));
	if (!m->location || !locs || !lines || !line_ptrs)
		goto fail;
	for (size_t i = 0; i < r.n_loc; i++) {
		const pprof_location_msg *in = s->location[r.loc_order[i]];
		locs[i] = *in;
		locs[i].id = i + 1;
		locs[i].mapping_id =
		    in->mapping_id ? r.map[pprof_idtab_index(&src->mappings, in->mapping_id)] : 0;
		locs[i].line = line_ptrs;
		for (size_t k = 0; k < in->n_line; k++) {
			*lines = *in->line[k];
			lines->function_id =
			    r.fn[pprof_idtab_index(&src->functions, in->line[k]->function_id)];
			*line_ptrs++ = lines++;
		}
		m->location[i] = &locs[i];
	}

	/* Samples. */
	m->n_sample = n_samples;
	m->sample = arena_alloc(a, (n_samples + 1) * sizeof(*m->sample));
	pprof_sample_msg *sms = arena_alloc(a, (n_samples + 1) * sizeof(*sms));
	uint64_t *ids = arena_alloc(a, (n_locs + 1) * sizeof(*ids));
	int64_t *vals = arena_alloc(a, (n_samples * n_types + 1) * sizeof(*vals));
	Perftools__Profiles__Label *labs = arena_alloc(a, (n_labels + 1) * sizeof(*labs));
	Perftools__Profiles__Label **lab_ptrs = arena_alloc(a, (n_labels + 1) * sizeof(*lab_ptrs));
	if (!m->sample || !sms || !ids || !vals || !labs || !lab_ptrs)
		goto fail;
	for (size_t i = 0; i < n_samples; i++) {
		const pprof_sample_msg *in = s->sample[samples[i]];
		sms[i] = *in;
		sms[i].location_id = ids;
		for (size_t k = 0; k < in->n_location_id; k++)
			*ids++ = r.loc[pprof_idtab_index(&src->locations, in->location_id[k])];
		sms[i].n_value = n_types;
		sms[i].value = vals;
		memcpy(vals, values + i * n_types, n_types * sizeof(*vals));
		vals += n_types;
		sms[i].label = lab_ptrs;
		for (size_t k = 0; k < in->n_label; k++) {
			*labs = *in->label[k];
			labs->key = use_str(&r, labs->key);
			labs->str = use_str(&r, labs->str);
			labs->num_unit = use_str(&r, labs->num_unit);
			*lab_ptrs++ = labs++;
		}
		m->sample[i] = &sms[i];
	}

	if ((rc = copy_strings(&r, a, m)) < 0)
		goto fail;
	/* Valid by construction: every index and id above was remapped from
	 * src, which was validated, so only the id tables are built (checking
	 * again looked up every location of every sample a second time; the
	 * tests and fuzz_scrape_delta validate subsets). */
	if ((rc = pprof_profile_index_tables(p, err)) < 0)
		goto out;
	free(mem);
	*out = p;
	return 0;
fail:
	rc = kiln_error_set(err, ENOMEM, "subset: out of memory");
out:
	free(mem);
	pprof_profile_free(p);
	return rc;
}

int pprof_profile_project(struct pprof_profile *p, const size_t *types, size_t n_types)
{
	pprof_msg *m = p->msg;
	bool keep_default = false;

	for (size_t t = 0; t < n_types; t++)
		if (types[t] >= m->n_sample_type || (t && types[t] <= types[t - 1]))
			return -EINVAL;
	/* In place, front to back: types[t] >= t, so nothing is overwritten
	 * before it is read. */
	size_t kept = 0;
	for (size_t i = 0; i < m->n_sample; i++) {
		pprof_sample_msg *s = m->sample[i];
		bool any = false;
		for (size_t t = 0; t < n_types; t++) {
			s->value[t] = s->value[types[t]];
			any = any || s->value[t] != 0;
		}
		s->n_value = n_types;
		if (any)
			m->sample[kept++] = s;
	}
	m->n_sample = kept;
	for (size_t t = 0; t < n_types; t++) {
		m->sample_type[t] = m->sample_type[types[t]];
		keep_default = keep_default || m->sample_type[t]->type == m->default_sample_type;
	}
	m->n_sample_type = n_types;
	if (!keep_default)
		m->default_sample_type = 0;
	return 0;
}
