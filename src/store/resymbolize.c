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
 *
 * The request itself is a metastore record too (type 8, naming the build
 * ID's string), committed by store_resymbolize_note before the new file
 * becomes visible: a server killed after that, before the pass finished,
 * replays the request, finds those locations pending again (the answers
 * written after it flip them back to done) and finishes the work.
 */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "common/buf.h"
#include "store/internal.h"
#include "store/store.h"

int meta_requeue_build_id(struct meta *m, uint32_t build_sid)
{
	size_t nm = chunked_count(&m->mappings), nl = chunked_count(&m->locations);
	const char *build_id = meta_str(m, build_sid);
	bool *hit, any = false;
	int n = 0;

	hit = calloc(nm + 1, sizeof(*hit));
	if (!hit)
		return -ENOMEM;
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
	free(hit);
	return n;
}

/* The string id of the first mapping whose build ID is build_id, or 0. */
static uint32_t build_id_string(struct meta *m, const char *build_id)
{
	size_t nm = chunked_count(&m->mappings);

	for (size_t i = 1; i < nm; i++) {
		const struct meta_mapping *mp = chunked_at(&m->mappings, i);

		if (mp->build_id && strcasecmp(meta_str(m, mp->build_id), build_id) == 0)
			return mp->build_id;
	}
	return 0;
}

int store_resymbolize_note(struct store *s, const char *build_id, struct kiln_error *err)
{
	struct meta *m = &s->meta;
	struct buf rec = {0};
	uint32_t sid;
	int rc = 0;

	if (!build_id || !*build_id || !s->has_symbolizer)
		return 0;
	pthread_mutex_lock(&m->mu);
	sid = build_id_string(m, build_id);
	if (sid) {
		rc = buf_append(&rec, (uint8_t[]){MREC_RESYMBOLIZE}, 1);
		rc = rc ?: put_uvarint(&rec, sid);
		rc = rc ?: record_append(&m->pending, rec.data, rec.len);
	}
	pthread_mutex_unlock(&m->mu);
	buf_free(&rec);
	if (rc)
		return kiln_error_set(err, ENOMEM, "resymbolize %s: out of memory", build_id);
	if (!sid)
		return 0; /* no location refers to it: nothing to redo */
	/* An empty commit writes the pending metastore records durably. */
	return store_commit_meta(s, err);
}

int store_resymbolize(struct store *s, const char *build_id)
{
	struct meta *m = &s->meta;
	uint32_t sid;
	int n = 0;

	if (!build_id || !*build_id || !s->has_symbolizer)
		return 0;
	pthread_mutex_lock(&m->mu);
	sid = build_id_string(m, build_id);
	if (sid)
		n = meta_requeue_build_id(m, sid);
	pthread_mutex_unlock(&m->mu);
	return n;
}
