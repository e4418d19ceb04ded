/*
 * idtab.c — id -> object tables for decoded profiles (see internal.h).
 *
 * Producers number mappings, locations and functions 1..N, so the common
 * case is an array indexed by id. Ids that are sparse (more than four times
 * the item count, plus slack) fall back to the hash table, which keeps a
 * hostile id like 2^63 from allocating 2^63 slots.
 */
#include "pprof/internal.h"

#include <errno.h>
#include <stdlib.h>

int pprof_idtab_build(struct pprof_idtab *t, void **items, size_t n,
		      uint64_t (*id_of)(const void *item), const char *field,
		      struct kiln_error *err)
{
	uint64_t max_id = 0;
	size_t i;

	t->dense = NULL;
	t->n_dense = 0;
	t->sparse = NULL;
	t->items = items;
	for (i = 0; i < n; i++) {
		uint64_t id = id_of(items[i]);

		if (id == 0)
			return kiln_error_set(err, EINVAL, "%s[%zu].id: must not be 0", field, i);
		if (id > max_id)
			max_id = id;
	}
	if (n == 0)
		return 0;
	if (n >= UINT32_MAX)
		return kiln_error_set(err, E2BIG, "%s: too many entries (%zu)", field, n);
	if (max_id <= 4 * (uint64_t)n + 1024) {
		t->n_dense = (size_t)max_id + 1;
		t->dense = calloc(t->n_dense, sizeof(*t->dense));
		if (!t->dense)
			return kiln_error_set(err, ENOMEM, "%s: out of memory", field);
		for (i = 0; i < n; i++) {
			uint64_t id = id_of(items[i]);

			if (t->dense[id]) {
				pprof_idtab_free(t);
				return kiln_error_set(
				    err, EINVAL, "%s[%zu].id: duplicate id %" PRIu64, field, i, id);
			}
			t->dense[id] = (uint32_t)i + 1;
		}
		return 0;
	}
	t->sparse = htab_new(n);
	if (!t->sparse)
		return kiln_error_set(err, ENOMEM, "%s: out of memory", field);
	for (i = 0; i < n; i++) {
		uint64_t id = id_of(items[i]), idx = i;
		int rc = htab_intern(t->sparse, &id, sizeof(id), &idx);

		if (rc < 0) {
			pprof_idtab_free(t);
			return kiln_error_set(err, ENOMEM, "%s: out of memory", field);
		}
		if (rc == 1) {
			pprof_idtab_free(t);
			return kiln_error_set(err, EINVAL, "%s[%zu].id: duplicate id %" PRIu64,
					      field, i, id);
		}
	}
	return 0;
}

size_t pprof_idtab_index_sparse(const struct pprof_idtab *t, uint64_t id)
{
	uint64_t idx;

	if (t->sparse && htab_get(t->sparse, &id, sizeof(id), &idx))
		return (size_t)idx;
	return SIZE_MAX;
}

void pprof_idtab_free(struct pprof_idtab *t)
{
	free(t->dense);
	htab_free(t->sparse);
	t->dense = NULL;
	t->n_dense = 0;
	t->sparse = NULL;
}
