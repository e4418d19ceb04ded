/*
 * merge.c — adding a decoded profile's samples to a builder.
 *
 * The profile's strings, mappings, functions and locations are translated
 * once into the builder's numbering (arrays indexed by the profile's own
 * index or position), then each sample is added with translated ids: the
 * per-sample cost is one hash of the stack and labels. Header rules follow
 * pprof's merge: same sample types required, earliest start and latest end
 * kept, largest period kept, comments deduplicated.
 */
#include "pprof/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct merge_maps {
	int64_t *str;	    /* profile string index -> builder string index */
	uint64_t *mapping;  /* profile mapping position -> builder id */
	uint64_t *function; /* profile function position -> builder id */
	uint64_t *location; /* profile location position -> builder id */
};

static void describe_types(const struct pprof_profile *p, struct buf *out)
{
	const pprof_msg *m = p->msg;

	for (size_t i = 0; i < m->n_sample_type; i++)
		buf_printf(out, "%s%s/%s", i ? " " : "", pprof_string(p, m->sample_type[i]->type),
			   pprof_string(p, m->sample_type[i]->unit));
}

static int check_types(struct pprof_builder *b, const struct pprof_profile *p,
		       struct kiln_error *err)
{
	const pprof_msg *m = p->msg;
	struct buf have = {0}, got = {0};
	bool same = b->n_types == m->n_sample_type;

	for (size_t i = 0; same && i < m->n_sample_type; i++)
		same = strcmp(pprof_builder_string_at(b, b->types[i].type),
			      pprof_string(p, m->sample_type[i]->type)) == 0 &&
		       strcmp(pprof_builder_string_at(b, b->types[i].unit),
			      pprof_string(p, m->sample_type[i]->unit)) == 0;
	if (same)
		return 0;
	for (size_t i = 0; i < b->n_types; i++)
		buf_printf(&have, "%s%s/%s", i ? " " : "",
			   pprof_builder_string_at(b, b->types[i].type),
			   pprof_builder_string_at(b, b->types[i].unit));
	describe_types(p, &got);
	buf_terminate(&have);
	buf_terminate(&got);
	kiln_error_set(err, EINVAL, "sample types differ: [%s] vs [%s]",
		       have.data ? (char *)have.data : "", got.data ? (char *)got.data : "");
	buf_free(&have);
	buf_free(&got);
	return -EINVAL;
}

/* A mismatch must be found before anything is interned. */
static int check_types_early(struct pprof_builder *b, const struct pprof_profile *p,
			     struct kiln_error *err)
{
	if (b->n_types == 0 && b->n_samples == 0)
		return 0;
	return check_types(b, p, err);
}

static int merge_header(struct pprof_builder *b, const struct pprof_profile *p,
			const struct merge_maps *mm, struct kiln_error *err)
{
	const pprof_msg *m = p->msg;
	size_t i;
	int rc;

	if (b->n_types == 0 && b->n_samples == 0) {
		for (i = 0; i < m->n_sample_type; i++) {
			rc = pprof_builder_add_sample_type(
			    b, pprof_string(p, m->sample_type[i]->type),
			    pprof_string(p, m->sample_type[i]->unit));
			if (rc)
				return kiln_error_set(err, rc, "out of memory");
		}
	}
	if (b->n_merged == 0 && b->time_nanos == 0 && b->duration_nanos == 0) {
		b->time_nanos = m->time_nanos;
		b->duration_nanos = m->duration_nanos;
	} else if (m->time_nanos || m->duration_nanos) {
		int64_t start = b->time_nanos, end = pprof_add(b->time_nanos, b->duration_nanos);
		int64_t pend = pprof_add(m->time_nanos, m->duration_nanos);

		if (m->time_nanos && (start == 0 || m->time_nanos < start))
			start = m->time_nanos;
		if (pend > end)
			end = pend;
		b->time_nanos = start;
		b->duration_nanos = (int64_t)((uint64_t)end - (uint64_t)start);
	}
	if (m->period_type && !b->has_period_type) {
		b->period_type =
		    (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		b->period_type.type = mm->str[m->period_type->type];
		b->period_type.unit = mm->str[m->period_type->unit];
		b->has_period_type = true;
	}
	if (m->period > b->period)
		b->period = m->period;
	if (b->n_merged == 0) {
		if (!b->default_type)
			b->default_type = mm->str[m->default_sample_type];
		if (!b->drop_frames)
			b->drop_frames = mm->str[m->drop_frames];
		if (!b->keep_frames)
			b->keep_frames = mm->str[m->keep_frames];
	}
	for (i = 0; i < m->n_comment; i++)
		if (pprof_builder_add_comment_idx(b, mm->str[m->comment[i]]))
			return kiln_error_set(err, ENOMEM, "out of memory");
	return 0;
}

static int translate_objects(struct pprof_builder *b, const struct pprof_profile *p,
			     struct merge_maps *mm)
{
	const pprof_msg *m = p->msg;
	struct pprof_line_desc small[32], *lines = small;
	size_t cap_lines = 32, i, j;
	int rc = -ENOMEM;

	for (i = 0; i < m->n_string_table; i++) {
		mm->str[i] = pprof_builder_string(b, m->string_table[i]);
		if (mm->str[i] < 0)
			return -ENOMEM;
	}
	for (i = 0; i < m->n_mapping; i++) {
		pprof_mapping_msg t = *m->mapping[i];

		t.filename = mm->str[t.filename];
		t.build_id = mm->str[t.build_id];
		mm->mapping[i] = pprof_builder_mapping_idx(b, &t);
		if (!mm->mapping[i])
			return -ENOMEM;
	}
	for (i = 0; i < m->n_function; i++) {
		const pprof_function_msg *f = m->function[i];

		mm->function[i] =
		    pprof_builder_function_idx(b, mm->str[f->name], mm->str[f->system_name],
					       mm->str[f->filename], f->start_line);
		if (!mm->function[i])
			return -ENOMEM;
	}
	for (i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		uint64_t map = 0;

		if (l->n_line > cap_lines) {
			if (lines != small)
				free(lines);
			lines = malloc(l->n_line * sizeof(*lines));
			if (!lines)
				return -ENOMEM;
			cap_lines = l->n_line;
		}
		/* Validation guarantees that every id below resolves. */
		if (l->mapping_id)
			map = mm->mapping[pprof_idtab_index(&p->mappings, l->mapping_id)];
		for (j = 0; j < l->n_line; j++) {
			size_t f = pprof_idtab_index(&p->functions, l->line[j]->function_id);

			lines[j].function_id = mm->function[f];
			lines[j].line = l->line[j]->line;
			lines[j].column = l->line[j]->column;
		}
		mm->location[i] = pprof_builder_location(b, map, l->address, lines, l->n_line);
		if (!mm->location[i])
			goto out;
	}
	rc = 0;
out:
	if (lines != small)
		free(lines);
	return rc;
}

/* v * scale rounded, saturated to the int64 range (a plain conversion of an
 * out-of-range double is undefined). */
static int64_t scale_value(int64_t v, double scale)
{
	double x = round((double)v * scale);

	if (!(x == x))
		return 0;
	if (x >= 9223372036854775807.0)
		return INT64_MAX;
	if (x <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)x;
}

/* Adds every sample, translated and scaled (scale 1 is exact). */
static int merge_samples(struct pprof_builder *b, const struct pprof_profile *p,
			 const struct merge_maps *mm, double scale)
{
	const pprof_msg *m = p->msg;
	uint64_t *locs = NULL;
	int64_t *values = NULL;
	Perftools__Profiles__Label *labels = NULL;
	size_t cap_locs = 0, cap_labels = 0, i, j;
	int rc = -ENOMEM;

	values = malloc((m->n_sample_type + 1) * sizeof(*values));
	if (!values || pprof_builder_reserve_samples(b, m->n_sample))
		goto out;
	for (i = 0; i < m->n_sample; i++) {
		const pprof_sample_msg *s = m->sample[i];

		if (s->n_location_id > cap_locs) {
			free(locs);
			cap_locs = s->n_location_id * 2;
			locs = malloc(cap_locs * sizeof(*locs));
			if (!locs)
				goto out;
		}
		if (s->n_label > cap_labels) {
			free(labels);
			cap_labels = s->n_label * 2;
			labels = malloc(cap_labels * sizeof(*labels));
			if (!labels)
				goto out;
		}
		for (j = 0; j < s->n_location_id; j++)
			locs[j] = mm->location[pprof_idtab_index(&p->locations, s->location_id[j])];
		for (j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];

			labels[j] = *l;
			labels[j].key = mm->str[l->key];
			labels[j].str = mm->str[l->str];
			labels[j].num_unit = mm->str[l->num_unit];
		}
		for (j = 0; j < s->n_value; j++)
			values[j] = scale == 1.0 ? s->value[j] : scale_value(s->value[j], scale);
		rc = pprof_builder_add_sample_ids(b, locs, s->n_location_id, values, labels,
						  s->n_label);
		if (rc)
			goto out;
	}
	rc = 0;
out:
	free(locs);
	free(values);
	free(labels);
	return rc;
}

int pprof_builder_merge_scaled(struct pprof_builder *b, const struct pprof_profile *p, double scale,
			       struct kiln_error *err)
{
	const pprof_msg *m = p->msg;
	struct merge_maps mm = {0};
	int rc;

	rc = check_types_early(b, p, err);
	if (rc)
		return rc;
	mm.str = malloc((m->n_string_table + 1) * sizeof(*mm.str));
	mm.mapping = malloc((m->n_mapping + 1) * sizeof(*mm.mapping));
	mm.function = malloc((m->n_function + 1) * sizeof(*mm.function));
	mm.location = malloc((m->n_location + 1) * sizeof(*mm.location));
	rc = -ENOMEM;
	if (!mm.str || !mm.mapping || !mm.function || !mm.location)
		goto oom;
	rc = translate_objects(b, p, &mm);
	if (rc)
		goto oom;
	rc = merge_header(b, p, &mm, err);
	if (rc)
		goto out;
	rc = merge_samples(b, p, &mm, scale);
	if (rc)
		goto oom;
	b->n_merged++;
	goto out;
oom:
	kiln_error_set(err, ENOMEM, "out of memory merging a profile");
out:
	free(mm.str);
	free(mm.mapping);
	free(mm.function);
	free(mm.location);
	return rc;
}

int pprof_builder_merge(struct pprof_builder *b, const struct pprof_profile *p,
			struct kiln_error *err)
{
	return pprof_builder_merge_scaled(b, p, 1.0, err);
}
