/*
 * resymbolize.c — redo the symbolization of one object's locations.
 *
 * Symbolization results are stored once per location (query.c). When
 * better debuginfo for a build ID arrives later (an upload, a debuginfod
 * fetch after a negative answer), answers computed from a poorer source (a
 * symbol table without DWARF: names but no file:line or inlined frames) must
 * not stay forever: their locations go back to pending, keeping their lines
 * until the new answer replaces them (queries meanwhile show the old one),
 * and the background pass symbolizes them again. The new answer is a new
 * metastore record; replay keeps the last one.
 */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "store/internal.h"
#include "store/store.h"

int store_resymbolize(struct store *s, const char *build_id)
{
	struct meta *m = &s->meta;
	size_t nm, nl;
	bool *hit, any = false;
	int n = 0;

	if (!build_id || !*build_id || !s->has_symbolizer)
		return 0;
	pthread_mutex_lock(&m->mu);
	nm = chunked_count(&m->mappings);
	nl = chunked_count(&m->locations);
	hit = calloc(nm + 1, sizeof(*hit));
	if (!hit) {
		pthread_mutex_unlock(&m->mu);
		return -ENOMEM;
	}
	for (size_t i = 1; i < nm; i++) {
		const struct meta_mapping *mp = chunked_at(&m->mappings, i);

		hit[i] = strcasecmp(meta_str(m, mp->build_id), build_id) == 0;
		any |= hit[i];
	}
	for (size_t i = 1; any && i < nl; i++) {
		struct meta_location *l = chunked_at(&m->locations, i);
		int sym = atomic_load(&l->sym);

		/* Pending ones too: the background pass tries each queued
		 * location once, and these may have failed (no file) then. */
		if (!l->mapping || l->mapping >= nm || !hit[l->mapping] || sym == SYM_NONE)
			continue;
		if (meta_sym_enqueue(m, (uint32_t)i) < 0) {
			n = -ENOMEM;
			break;
		}
		atomic_store(&l->sym, SYM_PENDING);
		n++;
	}
	pthread_mutex_unlock(&m->mu);
	free(hit);
	return n;
}
