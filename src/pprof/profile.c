/*
 * profile.c — a decoded struct pprof_profile: its accessors and its free.
 *
 * Apart from decode.c so that code that only builds and frees profiles
 * (kiln-agent's builder) links without the decoder and its inflater.
 */
#include "pprof/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void pprof_profile_free(struct pprof_profile *p)
{
	if (!p)
		return;
	pprof_idtab_free(&p->locations);
	pprof_idtab_free(&p->functions);
	pprof_idtab_free(&p->mappings);
	arena_free(p->arena);
	buf_free(&p->raw);
	free(p);
}

const pprof_msg *pprof_profile_msg(const struct pprof_profile *p)
{
	return p->msg;
}

size_t pprof_sample_count(const struct pprof_profile *p)
{
	return p->msg->n_sample;
}

const char *pprof_string(const struct pprof_profile *p, int64_t idx)
{
	if (idx < 0 || (uint64_t)idx >= p->msg->n_string_table)
		return "";
	return p->msg->string_table[idx];
}

const pprof_location_msg *pprof_location(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_get(&p->locations, id);
}

const pprof_function_msg *pprof_function(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_get(&p->functions, id);
}

const pprof_mapping_msg *pprof_mapping(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_get(&p->mappings, id);
}

size_t pprof_location_pos(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_index(&p->locations, id);
}

size_t pprof_function_pos(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_index(&p->functions, id);
}

size_t pprof_mapping_pos(const struct pprof_profile *p, uint64_t id)
{
	return pprof_idtab_index(&p->mappings, id);
}

int pprof_sample_type_index(const struct pprof_profile *p, const char *name, struct kiln_error *err)
{
	const pprof_msg *m = p->msg;
	struct buf avail = {0};
	size_t i;

	if (m->n_sample_type == 0)
		return kiln_error_set(err, ENOENT, "profile has no sample types");
	if (!name && m->default_sample_type) {
		name = pprof_string(p, m->default_sample_type);
		for (i = 0; i < m->n_sample_type; i++)
			if (strcmp(pprof_string(p, m->sample_type[i]->type), name) == 0)
				return (int)i;
		/* A default naming no type is ignored, as pprof does. */
		return (int)m->n_sample_type - 1;
	}
	if (!name)
		return (int)m->n_sample_type - 1;
	for (i = 0; i < m->n_sample_type; i++) {
		if (strcmp(pprof_string(p, m->sample_type[i]->type), name) == 0)
			return (int)i;
	}
	for (i = 0; i < m->n_sample_type; i++)
		buf_printf(&avail, "%s%s", i ? ", " : "", pprof_string(p, m->sample_type[i]->type));
	buf_terminate(&avail);
	kiln_error_set(err, ENOENT, "no sample type \"%s\" (available: %s)", name,
		       avail.data ? (char *)avail.data : "");
	buf_free(&avail);
	return -ENOENT;
}
