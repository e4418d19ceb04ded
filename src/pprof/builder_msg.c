/*
 * builder_msg.c — turning a builder into a message: for encoding (pointing
 * into the builder) or for a struct pprof_profile (a deep copy).
 */
#include "pprof/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define COPY_ARRAY(a, dst, src, n)                                                                 \
	do {                                                                                       \
		(dst) = arena_alloc((a), ((n) ? (n) : 1) * sizeof(*(src)));                        \
		if (!(dst))                                                                        \
			return -ENOMEM;                                                            \
		if (n)                                                                             \
			memcpy((dst), (src), (n) * sizeof(*(src)));                                \
	} while (0)

static int copy_location(struct arena *a, const pprof_location_msg *in, pprof_location_msg **out)
{
	pprof_location_msg *l = arena_alloc(a, sizeof(*l));
	Perftools__Profiles__Line *ls;

	if (!l)
		return -ENOMEM;
	*l = *in;
	if (in->n_line) {
		l->line = arena_alloc(a, in->n_line * sizeof(*l->line));
		ls = arena_alloc(a, in->n_line * sizeof(*ls));
		if (!l->line || !ls)
			return -ENOMEM;
		for (size_t i = 0; i < in->n_line; i++) {
			ls[i] = *in->line[i];
			l->line[i] = &ls[i];
		}
	}
	*out = l;
	return 0;
}

static int copy_sample(struct arena *a, const pprof_sample_msg *in, pprof_sample_msg **out)
{
	pprof_sample_msg *s = arena_alloc(a, sizeof(*s));
	Perftools__Profiles__Label *ls;

	if (!s)
		return -ENOMEM;
	*s = *in;
	COPY_ARRAY(a, s->location_id, in->location_id, in->n_location_id);
	COPY_ARRAY(a, s->value, in->value, in->n_value);
	if (in->n_label) {
		s->label = arena_alloc(a, in->n_label * sizeof(*s->label));
		ls = arena_alloc(a, in->n_label * sizeof(*ls));
		if (!s->label || !ls)
			return -ENOMEM;
		for (size_t i = 0; i < in->n_label; i++) {
			ls[i] = *in->label[i];
			s->label[i] = &ls[i];
		}
	}
	*out = s;
	return 0;
}

/* Pointer array over a struct array, copying the structs when deep. */
static void **pointers(struct arena *a, void *items, size_t n, size_t size, bool deep)
{
	void **ptrs = arena_alloc(a, (n ? n : 1) * sizeof(void *));
	char *base = items;

	if (!ptrs)
		return NULL;
	if (deep && n) {
		base = arena_alloc(a, n * size);
		if (!base)
			return NULL;
		memcpy(base, items, n * size);
	}
	for (size_t i = 0; i < n; i++)
		ptrs[i] = base + i * size;
	return ptrs;
}

int pprof_builder_build_msg(struct pprof_builder *b, struct arena *a, bool deep, pprof_msg **out)
{
	pprof_msg *m = arena_alloc(a, sizeof(*m));
	size_t i;
	int rc;

	if (!m)
		return -ENOMEM;
	*m = (pprof_msg)PERFTOOLS__PROFILES__PROFILE__INIT;
	m->n_string_table = b->n_strings;
	m->string_table = arena_alloc(a, b->n_strings * sizeof(char *));
	if (!m->string_table)
		return -ENOMEM;
	for (i = 0; i < b->n_strings; i++) {
		m->string_table[i] = deep ? arena_strdup(a, b->strings[i]) : b->strings[i];
		if (!m->string_table[i])
			return -ENOMEM;
	}
	m->n_sample_type = b->n_types;
	m->sample_type = (Perftools__Profiles__ValueType **)pointers(a, b->types, b->n_types,
								     sizeof(*b->types), true);
	m->n_mapping = b->n_mappings;
	m->mapping = (pprof_mapping_msg **)pointers(a, b->mappings, b->n_mappings,
						    sizeof(*b->mappings), deep);
	m->n_function = b->n_functions;
	m->function = (pprof_function_msg **)pointers(a, b->functions, b->n_functions,
						      sizeof(*b->functions), deep);
	m->n_location = b->n_locations;
	m->n_sample = b->n_samples;
	if (deep) {
		m->location = arena_alloc(a, (b->n_locations + 1) * sizeof(*m->location));
		m->sample = arena_alloc(a, (b->n_samples + 1) * sizeof(*m->sample));
		if (!m->location || !m->sample)
			return -ENOMEM;
		for (i = 0; i < b->n_locations; i++) {
			rc = copy_location(a, &b->locations[i], &m->location[i]);
			if (rc)
				return rc;
		}
		for (i = 0; i < b->n_samples; i++) {
			rc = copy_sample(a, &b->samples[i], &m->sample[i]);
			if (rc)
				return rc;
		}
	} else {
		m->location = (pprof_location_msg **)pointers(a, b->locations, b->n_locations,
							      sizeof(*b->locations), false);
		m->sample = (pprof_sample_msg **)pointers(a, b->samples, b->n_samples,
							  sizeof(*b->samples), false);
	}
	if (!m->sample_type || !m->mapping || !m->function || !m->location || !m->sample)
		return -ENOMEM;
	if (b->has_period_type) {
		m->period_type = arena_alloc(a, sizeof(*m->period_type));
		if (!m->period_type)
			return -ENOMEM;
		*m->period_type = b->period_type;
	}
	m->period = b->period;
	m->time_nanos = b->time_nanos;
	m->duration_nanos = b->duration_nanos;
	m->default_sample_type = b->default_type;
	m->drop_frames = b->drop_frames;
	m->keep_frames = b->keep_frames;
	m->n_comment = b->n_comments;
	COPY_ARRAY(a, m->comment, b->comments, b->n_comments);
	*out = m;
	return 0;
}

int pprof_builder_encode(struct pprof_builder *b, bool gzip, struct buf *out)
{
	struct arena *a = arena_new(0);
	pprof_msg *m;
	int rc;

	if (!a)
		return -ENOMEM;
	rc = pprof_builder_build_msg(b, a, false, &m);
	if (!rc)
		rc = pprof_encode(m, gzip, out);
	arena_free(a);
	return rc;
}

int pprof_builder_to_profile(struct pprof_builder *b, struct pprof_profile **out,
			     struct kiln_error *err)
{
	struct pprof_profile *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return kiln_error_set(err, ENOMEM, "out of memory");
	p->arena = arena_new(256 * 1024);
	if (!p->arena) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = pprof_builder_build_msg(b, p->arena, true, &p->msg);
	if (rc) {
		kiln_error_set(err, rc, "out of memory building the profile");
		goto fail;
	}
	/* The builder only makes valid profiles, but indexing needs the tables
	 * anyway and the check is linear: keep the one code path. */
	rc = pprof_profile_index(p, err);
	if (rc)
		goto fail;
	*out = p;
	return 0;
fail:
	pprof_profile_free(p);
	return rc;
}
