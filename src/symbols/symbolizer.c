/*
 * symbolizer.c — the public API of src/symbols (symbols.h): ELF virtual
 * address -> frames, for objects found by build ID (the debuginfo store)
 * or path. The top layer: it finds and keeps one symfile per object
 * (keyed by build ID, else path), replaces a provisional one (no DWARF)
 * when a better file turns up, and hands single addresses to
 * symfile_resolve (resolve.c) and batches to symfile_resolve_batch
 * (batch.c); opening an object is the batch layer's (symfile_open), as
 * the batch that opens a file answers while it inflates. One lock covers
 * the whole symbolizer; a batch's helper threads take none.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/htab.h"
#include "common/log.h"
#include "common/worker.h"
#include "symbols/batch.h"
#include "symbols/debuginfo.h"
#include "symbols/resolve.h"
#include "symbols/symfile.h"

struct symbolizer *symbolizer_new(const struct symbolizer_config *config)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	elf_version(EV_CURRENT);
	pthread_mutex_init(&s->lock, NULL);
	s->debuginfo = config ? config->debuginfo : NULL;
	s->max_cached =
	    config && config->max_cached_results ? config->max_cached_results : (1u << 20);
	s->recheck = config && config->recheck_seconds > 0 ? config->recheck_seconds : 10;
	s->libdw_only = config && config->libdw_only;
	s->by_build_id_only = config && config->by_build_id_only;
	s->batch_threads = config && config->batch_threads ? config->batch_threads : 2;
	s->batch_threads_always = config && config->batch_threads_always;
	s->stream_test = config ? config->stream_test : SYMBOLIZER_STREAM_SHARED;
	s->files = htab_new(64);
	if (!s->files) {
		symbolizer_free(s);
		return NULL;
	}
	return s;
}

void symbolizer_free(struct symbolizer *s)
{
	size_t it = 0;
	const void *k;
	size_t kl;
	uint64_t v;

	if (!s)
		return;
	for (size_t i = 0; i < BATCH_MAX_THREADS - 1; i++)
		worker_free(s->workers[i]);
	while (s->files && htab_next(s->files, &it, &k, &kl, &v))
		symfile_free((struct symfile *)(uintptr_t)v);
	htab_free(s->files);
	while (s->retired) {
		struct symfile *next = s->retired->next_retired;

		symfile_free(s->retired);
		s->retired = next;
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Picks the file to open for obj: the debuginfo store's by build ID, else the
 * path (when its build ID matches, or none was given) unless
 * by_build_id_only. */
static int locate(struct symbolizer *s, const struct symbols_object *obj, char *out, size_t outsz,
		  struct kiln_error *e)
{
	bool has_id = obj->build_id && *obj->build_id;
	bool has_path = obj->path && *obj->path && !s->by_build_id_only;
	int rc = -ENOENT;

	if (has_id && s->debuginfo) {
		rc = debuginfo_store_find(s->debuginfo, obj->build_id, has_path ? obj->path : NULL,
					  out, outsz);
		if (rc == 0 || rc == -EAGAIN)
			return rc == 0 ? 0
				       : kiln_error_set(e, EAGAIN, "debuginfo %s: being fetched",
							obj->build_id);
	}
	if (has_path) {
		struct elfinfo info;

		if (elfinfo_read_file(obj->path, &info, e) < 0)
			return -ENOENT;
		if (has_id && strcasecmp(info.build_id, obj->build_id) != 0)
			return kiln_error_set(e, ENOENT, "%s: build ID %s, want %s", obj->path,
					      info.build_id[0] ? info.build_id : "none",
					      obj->build_id);
		snprintf(out, outsz, "%s", obj->path);
		return 0;
	}
	return kiln_error_set(e, ENOENT, "no debuginfo for build ID %s",
			      has_id ? obj->build_id : "(none)");
}

/* A provisional symfile (no DWARF) is due: looks for obj's file again (which
 * may queue a debuginfod fetch once the negative cache expired) and, when
 * another file is found now, opens it in f's place; f is retired, so the
 * strings it handed out stay valid. Caller holds the lock. */
static struct symfile *recheck(struct symbolizer *s, const struct symbols_object *obj,
			       const char *key, struct symfile *f)
{
	char path[4096];
	struct symfile *nf;
	uint64_t *slot;

	f->recheck_at = time(NULL) + s->recheck;
	if (locate(s, obj, path, sizeof(path), NULL) != 0 || strcmp(path, f->path) == 0)
		return f;
	nf = symfile_open(s, path, obj->build_id, NULL, NULL);
	slot = htab_lookup(s->files, key, strlen(key));
	if (!nf || !slot) {
		symfile_free(nf);
		return f;
	}
	log_debug("symbolizer: %s: %s replaces %s", key, path, f->path);
	nf->recheck_at = f->recheck_at;
	nf->obj_build_id = f->obj_build_id;
	nf->obj_path = f->obj_path;
	f->obj_build_id = f->obj_path = NULL;
	f->next_retired = s->retired;
	s->retired = f;
	*slot = (uint64_t)(uintptr_t)nf;
	s->last_len = 0;
	return nf;
}

/* Opens obj's file, keyed by key, into s->files; caller holds the lock.
 * (Apart from symfile_get, which runs for every address: its 4 KiB path
 * buffer made each call's frame span a page of stack.) */
static __attribute__((noinline)) int symfile_add(struct symbolizer *s,
						 const struct symbols_object *obj, const char *key,
						 struct opening *op, struct symfile **out,
						 struct kiln_error *e)
{
	struct symfile *f;
	char path[4096];
	int rc;

	rc = locate(s, obj, path, sizeof(path), e);
	if (rc < 0)
		return rc; /* not cached: may appear later */
	f = symfile_open(s, path, obj->build_id, op, e);
	if (!f)
		return -ENOENT;
	f->recheck_at = time(NULL) + s->recheck;
	f->obj_build_id = strdup(obj->build_id ? obj->build_id : "");
	f->obj_path = strdup(obj->path ? obj->path : "");
	if (!f->obj_build_id || !f->obj_path) {
		symfile_free(f);
		return -ENOMEM;
	}
	rc = htab_put(s->files, key, strlen(key), (uint64_t)(uintptr_t)f);
	if (rc < 0) {
		symfile_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* The open symfile for obj (opening it on first use, for the batch op,
 * NULL for one address); caller holds the lock. */
static int symfile_get(struct symbolizer *s, const struct symbols_object *obj, struct opening *op,
		       struct symfile **out, struct kiln_error *e)
{
	const char *key = obj->build_id && *obj->build_id ? obj->build_id : obj->path;
	struct symfile *f;
	uint64_t v;
	size_t len;
	bool hit_last;

	if (!key || !*key)
		return kiln_error_set(e, EINVAL, "object has neither build ID nor path");
	/* One strcmp against the last key (kept NUL-terminated) rather than
	 * a strlen and a memcmp per call. */
	hit_last = s->last_len && strcmp(key, s->last_key) == 0 && (f = s->last) != NULL;
	len = hit_last ? s->last_len : strlen(key);
	if (hit_last ||
	    (htab_get(s->files, key, len, &v) && v && (f = (struct symfile *)(uintptr_t)v))) {
		if (!f->dwarf && time(NULL) >= f->recheck_at)
			f = recheck(s, obj, key, f);
		/* (Not copied again per call when it is the last one.) */
		if (!(hit_last && f == s->last) && len < sizeof(s->last_key)) {
			memcpy(s->last_key, key, len);
			s->last_key[len] = '\0';
			s->last_len = len;
			s->last = f;
		}
		*out = f;
		return 0;
	}
	return symfile_add(s, obj, key, op, out, e);
}

int symbolizer_resolve(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
		       struct symbols_location *out, struct kiln_error *e)
{
	struct symfile *f;
	int rc;

	out->nframes = 0;
	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, NULL, &f, e);
	if (rc == 0)
		rc = symfile_resolve(s, f, addr, out);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_resolve_batch(struct symbolizer *s, const struct symbols_object *obj,
			     const uint64_t *addrs, size_t n, symbols_emit_fn emit, void *ctx,
			     struct kiln_error *e)
{
	struct opening op = {addrs, n, emit, ctx, NULL};
	struct symfile *f;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, &op, &f, e);
	if (rc == 0)
		rc = symfile_resolve_batch(s, f, addrs, n, emit, ctx, op.emitted);
	free(op.emitted);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_normalize(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
			 uint64_t map_start, uint64_t map_limit, uint64_t map_offset,
			 uint64_t *vaddr, struct kiln_error *e)
{
	struct symfile *f;
	int rc;

	*vaddr = addr;
	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, NULL, &f, e);
	if (rc == 0)
		rc = symbols_normalize(&f->info, addr, map_start, map_limit, map_offset, vaddr);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_normalize_mapping(struct symbolizer *s, const struct symbols_object *obj,
				 uint64_t addr, uint64_t map_start, uint64_t map_limit,
				 uint64_t map_offset, uint64_t *vaddr, struct kiln_error *e)
{
	int rc;

	*vaddr = addr;
	if (map_limit <= map_start)
		return 0; /* no addresses: addr is file-relative already */
	rc = symbolizer_normalize(s, obj, addr, map_start, map_limit, map_offset, vaddr, e);
	return rc == -ERANGE ? 0 : rc; /* *vaddr as symbols_normalize left it */
}

void symbolizer_recheck(struct symbolizer *s)
{
	size_t it = 0, kl;
	const void *k;
	uint64_t v;
	time_t now = time(NULL);
	char key[4096];

	pthread_mutex_lock(&s->lock);
	while (htab_next(s->files, &it, &k, &kl, &v)) {
		struct symfile *f = (struct symfile *)(uintptr_t)v;

		if (!f || f->dwarf || now < f->recheck_at || kl >= sizeof(key))
			continue;
		memcpy(key, k, kl);
		key[kl] = '\0';
		/* Replacing the value of the current key keeps the iteration. */
		recheck(s, &(struct symbols_object){f->obj_build_id, f->obj_path}, key, f);
	}
	pthread_mutex_unlock(&s->lock);
}

void symbolizer_forget(struct symbolizer *s, const char *build_id)
{
	uint64_t *slot;

	if (!build_id || !*build_id)
		return;
	pthread_mutex_lock(&s->lock);
	slot = htab_lookup(s->files, build_id, strlen(build_id));
	if (slot && *slot) {
		struct symfile *f = (struct symfile *)(uintptr_t)*slot;

		/* htab has no delete: a zero slot means "look again". */
		f->next_retired = s->retired;
		s->retired = f;
		*slot = 0;
		s->last_len = 0;
	}
	pthread_mutex_unlock(&s->lock);
}

void symbolizer_dwarf_stats(struct symbolizer *s, size_t *reader_cus, size_t *stream_cus,
			    size_t *libdw_cus)
{
	size_t streamed = 0;
	size_t it = 0, kl;
	const void *k;
	uint64_t v;

	pthread_mutex_lock(&s->lock);
	*reader_cus = *libdw_cus = 0;
	while (htab_next(s->files, &it, &k, &kl, &v)) {
		const struct symfile *f = (const struct symfile *)(uintptr_t)v;

		if (f) {
			*reader_cus += f->reader_cus;
			streamed += f->stream_cus;
			*libdw_cus += f->libdw_cus;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (stream_cus)
		*stream_cus = streamed;
}
