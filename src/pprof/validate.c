/*
 * validate.c — the invariants every profile handed out satisfies.
 *
 * 1. string_table is non-empty and string_table[0] is "".
 * 2. Every string index (types, units, names, labels, comments, ...) is in
 *    range.
 * 3. Mapping, location and function ids are non-zero and unique.
 * 4. Every reference resolves: sample.location_id, location.mapping_id (0 =
 *    none is allowed), line.function_id (0 is not).
 * 5. Every sample has exactly one value per sample type.
 * The first violation found is reported with the path of the field, e.g.
 * "sample[12].location_id[3]: no location with id 77".
 */
#include "common/json.h"
#include "pprof/internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int check_str(const pprof_msg *m, int64_t idx, struct kiln_error *err, const char *fmt,
		     size_t i, size_t j)
{
	char where[128];

	if (idx >= 0 && (uint64_t)idx < m->n_string_table)
		return 0;
	snprintf(where, sizeof(where), fmt, i, j);
	return kiln_error_set(err, EINVAL,
			      "%s: string index %" PRId64 " out of range (%zu strings)", where, idx,
			      m->n_string_table);
}

static int check_header(const pprof_msg *m, struct kiln_error *err)
{
	size_t i;
	int rc;

	if (m->n_string_table == 0)
		return kiln_error_set(err, EINVAL,
				      "string_table: empty (string_table[0] must be \"\")");
	if (!m->string_table[0] || m->string_table[0][0] != '\0') {
		const char *s0 = m->string_table[0] ? m->string_table[0] : "(null)";
		struct buf q = {0};
		/* Quoted as JSON: the bytes are the input's, and a newline or an
		 * escape sequence in them must not reach a terminal as such. */
		json_append_string_n(&q, s0, strnlen(s0, 40));
		buf_terminate(&q);
		rc = kiln_error_set(err, EINVAL, "string_table[0]: must be \"\", is %s",
				    q.data ? (const char *)q.data : "\"?\"");
		buf_free(&q);
		return rc;
	}
	for (i = 0; i < m->n_sample_type; i++) {
		rc = check_str(m, m->sample_type[i]->type, err, "sample_type[%zu].type", i, 0);
		if (!rc)
			rc = check_str(m, m->sample_type[i]->unit, err, "sample_type[%zu].unit", i,
				       0);
		if (rc)
			return rc;
	}
	if (m->period_type) {
		rc = check_str(m, m->period_type->type, err, "period_type.type", 0, 0);
		if (!rc)
			rc = check_str(m, m->period_type->unit, err, "period_type.unit", 0, 0);
		if (rc)
			return rc;
	}
	for (i = 0; i < m->n_comment; i++) {
		rc = check_str(m, m->comment[i], err, "comment[%zu]", i, 0);
		if (rc)
			return rc;
	}
	rc = check_str(m, m->drop_frames, err, "drop_frames", 0, 0);
	if (!rc)
		rc = check_str(m, m->keep_frames, err, "keep_frames", 0, 0);
	if (!rc)
		rc = check_str(m, m->default_sample_type, err, "default_sample_type", 0, 0);
	if (!rc)
		rc = check_str(m, m->doc_url, err, "doc_url", 0, 0);
	return rc;
}

static int check_objects(const pprof_msg *m, const struct pprof_idtab *functions,
			 const struct pprof_idtab *mappings, struct kiln_error *err)
{
	size_t i, j;
	int rc;

	for (i = 0; i < m->n_mapping; i++) {
		const pprof_mapping_msg *mp = m->mapping[i];

		rc = check_str(m, mp->filename, err, "mapping[%zu].filename", i, 0);
		if (!rc)
			rc = check_str(m, mp->build_id, err, "mapping[%zu].build_id", i, 0);
		if (rc)
			return rc;
	}
	for (i = 0; i < m->n_function; i++) {
		const pprof_function_msg *f = m->function[i];

		rc = check_str(m, f->name, err, "function[%zu].name", i, 0);
		if (!rc)
			rc = check_str(m, f->system_name, err, "function[%zu].system_name", i, 0);
		if (!rc)
			rc = check_str(m, f->filename, err, "function[%zu].filename", i, 0);
		if (rc)
			return rc;
	}
	for (i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];

		if (l->mapping_id && !pprof_idtab_get(mappings, l->mapping_id))
			return kiln_error_set(
			    err, EINVAL, "location[%zu].mapping_id: no mapping with id %" PRIu64, i,
			    l->mapping_id);
		for (j = 0; j < l->n_line; j++) {
			uint64_t fid = l->line[j]->function_id;

			if (!pprof_idtab_get(functions, fid))
				return kiln_error_set(err, EINVAL,
						      "location[%zu].line[%zu].function_id: no "
						      "function with id %" PRIu64,
						      i, j, fid);
		}
	}
	return 0;
}

/* Whether every sample satisfies invariants 2, 4 and 5, for a location
 * table whose ids are exactly 1..n_location (what every producer writes):
 * then a location id is valid iff 1 <= id <= n_location, a comparison
 * instead of a lookup, and the checks are or-ed together without a branch
 * per field. It says only whether all hold; check_samples finds the first
 * violation to report. */
static bool samples_valid(const pprof_msg *m)
{
	uint64_t n_loc = m->n_location, n_str = m->n_string_table, bad = 0;

	for (size_t i = 0; i < m->n_sample; i++) {
		const pprof_sample_msg *s = m->sample[i];

		bad |= s->n_value ^ m->n_sample_type;
		for (size_t j = 0; j < s->n_location_id; j++)
			bad |= s->location_id[j] - 1 >= n_loc; /* id 0 wraps around */
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];

			bad |= ((uint64_t)l->key >= n_str) | ((uint64_t)l->str >= n_str) |
			       ((uint64_t)l->num_unit >= n_str);
		}
	}
	return bad == 0;
}

static int check_samples(const pprof_msg *m, const struct pprof_idtab *locations,
			 struct kiln_error *err)
{
	size_t i, j;
	int rc;

	/* Ids are unique and non-zero (the table was built), so a dense table
	 * of n_location + 1 slots holds exactly the ids 1..n_location. */
	if (locations->dense && locations->n_dense == m->n_location + 1 && samples_valid(m))
		return 0;
	for (i = 0; i < m->n_sample; i++) {
		const pprof_sample_msg *s = m->sample[i];

		if (s->n_value != m->n_sample_type)
			return kiln_error_set(err, EINVAL,
					      "sample[%zu].value: %zu values for %zu sample types",
					      i, s->n_value, m->n_sample_type);
		for (j = 0; j < s->n_location_id; j++) {
			if (!pprof_idtab_get(locations, s->location_id[j]))
				return kiln_error_set(err, EINVAL,
						      "sample[%zu].location_id[%zu]: no location "
						      "with id %" PRIu64,
						      i, j, s->location_id[j]);
		}
		for (j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];

			rc = check_str(m, l->key, err, "sample[%zu].label[%zu].key", i, j);
			if (!rc)
				rc = check_str(m, l->str, err, "sample[%zu].label[%zu].str", i, j);
			if (!rc)
				rc = check_str(m, l->num_unit, err,
					       "sample[%zu].label[%zu].num_unit", i, j);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int pprof_check(const pprof_msg *m, const struct pprof_idtab *locations,
		const struct pprof_idtab *functions, const struct pprof_idtab *mappings,
		struct kiln_error *err)
{
	int rc = check_header(m, err);

	if (!rc)
		rc = check_objects(m, functions, mappings, err);
	if (!rc)
		rc = check_samples(m, locations, err);
	return rc;
}

static uint64_t location_id(const void *x)
{
	return ((const pprof_location_msg *)x)->id;
}

static uint64_t function_id(const void *x)
{
	return ((const pprof_function_msg *)x)->id;
}

static uint64_t mapping_id(const void *x)
{
	return ((const pprof_mapping_msg *)x)->id;
}

static int build_tables(const pprof_msg *m, struct pprof_idtab *locs, struct pprof_idtab *funcs,
			struct pprof_idtab *maps, struct kiln_error *err)
{
	int rc;

	*locs = (struct pprof_idtab){0};
	*funcs = (struct pprof_idtab){0};
	*maps = (struct pprof_idtab){0};
	rc = pprof_idtab_build(maps, (void **)m->mapping, m->n_mapping, mapping_id, "mapping", err);
	if (!rc)
		rc = pprof_idtab_build(funcs, (void **)m->function, m->n_function, function_id,
				       "function", err);
	if (!rc)
		rc = pprof_idtab_build(locs, (void **)m->location, m->n_location, location_id,
				       "location", err);
	return rc;
}

int pprof_validate(const pprof_msg *m, struct kiln_error *err)
{
	struct pprof_idtab locs, funcs, maps;
	int rc = build_tables(m, &locs, &funcs, &maps, err);

	if (!rc)
		rc = pprof_check(m, &locs, &funcs, &maps, err);
	pprof_idtab_free(&locs);
	pprof_idtab_free(&funcs);
	pprof_idtab_free(&maps);
	return rc;
}

int pprof_profile_index(struct pprof_profile *p, struct kiln_error *err)
{
	int rc = build_tables(p->msg, &p->locations, &p->functions, &p->mappings, err);

	if (!rc)
		rc = pprof_check(p->msg, &p->locations, &p->functions, &p->mappings, err);
	return rc;
}

int pprof_profile_index_tables(struct pprof_profile *p, struct kiln_error *err)
{
	return build_tables(p->msg, &p->locations, &p->functions, &p->mappings, err);
}
