/*
 * symbolize.c — answers for locations that arrived without lines, from the
 * symbolizer hook of store_options (store.h).
 *
 * A location pushed with a mapping but no lines is queued at ingestion
 * (meta.c: meta.sym_queue, status SYM_PENDING). It is answered either when
 * a merge first describes it (symbolize_location: the hook's resolve() for
 * that one address) or by store_symbolize_pending, which a background
 * thread calls. Answers are metastore records, made durable by one WAL
 * commit at the end of the pass.
 *
 * The background pass with a resolve_batch() hook: the queue is taken in
 * chunks of up to SYM_CHUNK locations, each chunk grouped by object (the
 * mapping's build ID and file name string ids, so that one libc's locations
 * from every process that maps it fall together, whatever their mappings)
 * and handed to the hook one object at a time, each address with its own
 * mapping for normalization. The hook delivers per-address answers through
 * sym_emit, which may run under the hook's own locks: it only copies them
 * into the chunk's buffers (strings into an arena) and takes no store lock.
 * The answers are then recorded under meta.mu, re-checking that each
 * location is still pending (a query may have answered it meanwhile), a
 * slice at a time so that ingestion, which needs meta.mu too, never waits
 * for a whole object. Without resolve_batch() the pass asks resolve() one
 * location at a time.
 *
 * A merge (store_merge_visit, store_merge_pprof) first resolves the pending
 * locations of its stacks the same way, grouped by object
 * (symbolize_merge_locations): a query over an object the background pass
 * has not reached yet costs one cold batch, not as many cold single
 * lookups as it has locations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"
#include "store/internal.h"

#define MAX_SYM_LINES	 64
#define SYM_CHUNK	 16384 /* locations taken off the queue at once */
#define SYM_RECORD_SLICE 256   /* answers recorded per meta.mu hold */

void symbolize_mapping_info(struct meta *m, uint32_t mapping, struct store_mapping_info *info)
{
	const struct meta_mapping *mp = chunked_at(&m->mappings, mapping);

	info->memory_start = mp->start;
	info->memory_limit = mp->limit;
	info->file_offset = mp->offset;
	info->filename = meta_str(m, mp->filename);
	info->build_id = meta_str(m, mp->build_id);
	info->exec = (struct store_exec_info){mp->elf_type, mp->load_offset, mp->load_vaddr};
}

/* Records out[0..n) as the answer for location loc (n == 0: "no symbols
 * here", remembered): its frames become functions and lines. Caller holds
 * m->mu. Returns 1 if recorded, 0 if loc is no longer pending (answered
 * meanwhile), or -ENOMEM. */
static int record_answer(struct meta *m, uint32_t loc, const struct store_line_out *out, size_t n)
{
	struct meta_location *ml = chunked_at(&m->locations, loc);
	struct meta_line lines[MAX_SYM_LINES];
	int rc = 0;

	if (atomic_load(&ml->sym) != SYM_PENDING)
		return 0;
	if (n > MAX_SYM_LINES)
		n = MAX_SYM_LINES;
	for (size_t i = 0; i < n; i++) {
		const char *fn = out[i].function_name ? out[i].function_name : "";
		const char *sn = out[i].system_name ? out[i].system_name : fn;
		const char *file = out[i].filename ? out[i].filename : "";
		int64_t a = meta_string(m, fn, strlen(fn)), b = meta_string(m, sn, strlen(sn)),
			c = meta_string(m, file, strlen(file));
		struct meta_function f = {0};

		if (a < 0 || b < 0 || c < 0)
			return -ENOMEM;
		f.name = (uint32_t)a;
		f.system_name = (uint32_t)b;
		f.filename = (uint32_t)c;
		int64_t id = meta_function(m, &f);
		if (id < 0)
			return (int)id;
		lines[i].function = (uint32_t)id;
		lines[i].line = out[i].line;
	}
	rc = meta_set_symbolized(m, loc, lines, (uint32_t)n, n == 0);
	return rc < 0 ? rc : 1;
}

int symbolize_location(struct store *s, uint32_t loc)
{
	struct meta *m = &s->meta;
	struct meta_location *ml = chunked_at(&m->locations, loc);
	struct store_line_out out[MAX_SYM_LINES];
	struct store_mapping_info info;
	size_t n = 0;
	int rc;

	if (!s->has_symbolizer || atomic_load(&ml->sym) != SYM_PENDING)
		return 0;
	symbolize_mapping_info(m, ml->mapping, &info);
	memset(out, 0, sizeof(out));
	rc = s->symbolizer.resolve(s->symbolizer.ctx, &info, ml->address, out, MAX_SYM_LINES, &n);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->mu);
	rc = record_answer(m, loc, out, n);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The pass without resolve_batch(): one resolve() per location. */
static int symbolize_each(struct store *s, size_t max, size_t *done)
{
	while (max == 0 || *done < max) {
		uint32_t loc;
		int rc;

		pthread_mutex_lock(&s->meta.mu);
		if (s->meta.sym_cursor >= s->meta.n_sym_queue) {
			pthread_mutex_unlock(&s->meta.mu);
			break;
		}
		loc = s->meta.sym_queue[s->meta.sym_cursor++];
		pthread_mutex_unlock(&s->meta.mu);
		rc = symbolize_location(s, loc);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) {
			/* Transient: a query or store_resymbolize asks again. */
			log_debug("store: symbolizing location %u: %s", loc, strerror(-rc));
			continue;
		}
		*done += (size_t)rc;
	}
	return 0;
}

/* ---- the batched pass ---- */

/* A pending location taken off the queue, with the object it belongs to. */
struct sym_entry {
	uint32_t build_id, filename; /* the mapping's string ids: the object */
	uint32_t mapping, loc;
	uint64_t address;
	uint32_t object; /* dense number of (build_id, filename) in its chunk */
};

/* An entry's answer as emitted: status SYM_UNANSWERED until emit delivers
 * one, then 0 (lines[first..first+n) of the batch) or a negative errno. */
#define SYM_UNANSWERED 1
struct sym_answer {
	int status;
	uint32_t first, n;
};

/* One chunk's buffers, reused from chunk to chunk. e, a, infos and items
 * hold cap entries (a chunk's worth); one object's group is
 * e[base..base+n_group). */
struct sym_batch {
	struct sym_entry *e, *spare; /* spare: where e is sorted into */
	size_t *start;		     /* per object: its first entry, while sorting */
	struct htab *objects;	     /* (build_id, filename) -> object number */
	struct sym_answer *a;
	struct store_mapping_info *infos; /* one per run of one mapping in a group */
	struct store_symbolize_item *items;
	size_t cap, base, n_group;
	struct store_line_out *lines; /* emitted frames, strings in the arena */
	size_t n_lines, cap_lines;
	struct arena *strings;
	int rc; /* -ENOMEM when emit could not keep an answer */
};

static bool same_object(const struct sym_entry *a, const struct sym_entry *b)
{
	return a->build_id == b->build_id && a->filename == b->filename;
}

/* Orders b->e[0..n) by object, keeping the queue's order within each: a
 * stable counting sort (objects numbered as first met through b->objects,
 * then one scatter into b->spare), linear where qsort cost more than the
 * rest of the store's share. 0 or -ENOMEM. */
static int sym_sort_by_object(struct sym_batch *b, size_t n)
{
	struct sym_entry *tmp;
	size_t n_obj;

	htab_clear(b->objects, 4096);
	for (size_t i = 0; i < n; i++) {
		uint32_t key[2] = {b->e[i].build_id, b->e[i].filename};
		uint64_t id = htab_count(b->objects);
		int rc;

		if (i && same_object(&b->e[i], &b->e[i - 1])) {
			b->e[i].object = b->e[i - 1].object;
			continue;
		}
		rc = htab_intern(b->objects, key, sizeof(key), &id);
		if (rc < 0)
			return rc;
		b->e[i].object = (uint32_t)id;
	}
	n_obj = htab_count(b->objects);
	memset(b->start, 0, (n_obj + 1) * sizeof(*b->start));
	for (size_t i = 0; i < n; i++)
		b->start[b->e[i].object + 1]++;
	for (size_t k = 1; k <= n_obj; k++)
		b->start[k] += b->start[k - 1];
	for (size_t i = 0; i < n; i++)
		b->spare[b->start[b->e[i].object]++] = b->e[i];
	tmp = b->e;
	b->e = b->spare;
	b->spare = tmp;
	return 0;
}

/* Copies s into the batch's arena; false on out-of-memory. */
static bool sym_copy(struct sym_batch *b, const char *s, const char **out)
{
	*out = s ? arena_strdup(b->strings, s) : NULL;
	return !s || *out;
}

/* store_symbolize_emit_fn: keeps one answer of the current group. Called
 * with the hook's locks held, so it takes none. */
static void sym_emit(void *ectx, size_t i, int status, const struct store_line_out *lines, size_t n)
{
	struct sym_batch *b = ectx;
	struct sym_answer *a;

	if (i >= b->n_group)
		return; /* not an item of this call: ignored */
	a = &b->a[b->base + i];
	if (a->status != SYM_UNANSWERED)
		return; /* the first answer counts */
	if (status < 0) {
		a->status = status;
		return;
	}
	if (n > MAX_SYM_LINES)
		n = MAX_SYM_LINES;
	if (GROW_ARRAY(b->lines, b->cap_lines, b->n_lines + n, 4096)) {
		b->rc = -ENOMEM;
		return;
	}
	for (size_t j = 0; j < n; j++) {
		struct store_line_out *o = &b->lines[b->n_lines + j];

		o->line = lines[j].line;
		if (!sym_copy(b, lines[j].function_name, &o->function_name) ||
		    !sym_copy(b, lines[j].system_name, &o->system_name) ||
		    !sym_copy(b, lines[j].filename, &o->filename)) {
			b->rc = -ENOMEM;
			return;
		}
	}
	*a = (struct sym_answer){0, (uint32_t)b->n_lines, (uint32_t)n};
	b->n_lines += n;
}

/* The entry of pending location loc (ml). */
static struct sym_entry sym_entry_of(struct meta *m, uint32_t loc, const struct meta_location *ml)
{
	const struct meta_mapping *mp = chunked_at(&m->mappings, ml->mapping);

	return (struct sym_entry){.build_id = mp->build_id,
				  .filename = mp->filename,
				  .mapping = ml->mapping,
				  .loc = loc,
				  .address = ml->address};
}

/* Takes up to want pending locations off the queue into b->e (entries no
 * longer pending are dropped: answered since they were queued). Returns
 * how many. */
static size_t sym_take(struct store *s, struct sym_batch *b, size_t want)
{
	struct meta *m = &s->meta;
	size_t n = 0;

	pthread_mutex_lock(&m->mu);
	while (n < want && m->sym_cursor < m->n_sym_queue) {
		uint32_t loc = m->sym_queue[m->sym_cursor++];
		const struct meta_location *ml = chunked_at(&m->locations, loc);

		if (atomic_load(&ml->sym) != SYM_PENDING)
			continue;
		b->e[n++] = sym_entry_of(m, loc, ml);
	}
	pthread_mutex_unlock(&m->mu);
	return n;
}

/* Records the answers of entries [lo, hi), SYM_RECORD_SLICE per hold of
 * meta.mu. Adds how many were recorded to *done; 0 or -ENOMEM. */
static int sym_record(struct store *s, struct sym_batch *b, size_t lo, size_t hi, size_t *done)
{
	struct meta *m = &s->meta;
	size_t transient = 0;
	int rc = 0;

	for (size_t i = lo; i < hi && rc >= 0;) {
		size_t end = hi - i > SYM_RECORD_SLICE ? i + SYM_RECORD_SLICE : hi;

		pthread_mutex_lock(&m->mu);
		for (; i < end; i++) {
			const struct sym_answer *a = &b->a[i];

			if (a->status != 0) {
				transient++; /* stays pending */
				continue;
			}
			rc = record_answer(m, b->e[i].loc, b->lines + a->first, a->n);
			if (rc < 0)
				break;
			*done += (size_t)rc;
		}
		pthread_mutex_unlock(&m->mu);
	}
	if (transient)
		log_debug("store: symbolizing %zu of %zu locations of %s failed for now", transient,
			  hi - lo,
			  b->infos[0].build_id[0] ? b->infos[0].build_id : b->infos[0].filename);
	return rc < 0 ? rc : 0;
}

/* Resolves the entries [lo, hi) of one object with one resolve_batch()
 * call and records the answers. 0, or -ENOMEM (any other failure leaves
 * them pending). */
static int sym_group(struct store *s, struct sym_batch *b, size_t lo, size_t hi, size_t *done)
{
	size_t n_info = 0;
	int rc;

	for (size_t i = lo; i < hi; i++) {
		if (i == lo || b->e[i].mapping != b->e[i - 1].mapping)
			symbolize_mapping_info(&s->meta, b->e[i].mapping, &b->infos[n_info++]);
		b->items[i - lo] =
		    (struct store_symbolize_item){&b->infos[n_info - 1], b->e[i].address};
		b->a[i] = (struct sym_answer){.status = SYM_UNANSWERED};
	}
	b->base = lo;
	b->n_group = hi - lo;
	b->rc = 0;
	rc = s->symbolizer.resolve_batch(s->symbolizer.ctx, b->items, hi - lo, sym_emit, b);
	if (b->rc)
		return b->rc;
	if (rc < 0) {
		/* Transient for the whole object: a query or store_resymbolize
		 * asks again. */
		log_debug("store: symbolizing %zu locations of %s: %s", hi - lo,
			  b->infos[0].build_id[0] ? b->infos[0].build_id : b->infos[0].filename,
			  strerror(-rc));
		return rc == -ENOMEM ? rc : 0;
	}
	return sym_record(s, b, lo, hi, done);
}

static void sym_batch_free(struct sym_batch *b)
{
	free(b->e);
	free(b->spare);
	free(b->start);
	htab_free(b->objects);
	free(b->a);
	free(b->infos);
	free(b->items);
	free(b->lines);
	arena_free(b->strings);
}

/* Buffers for chunks of up to cap entries. 0 or -ENOMEM (then free b). */
static int sym_batch_init(struct sym_batch *b, size_t cap)
{
	memset(b, 0, sizeof(*b));
	b->cap = cap ? cap : 1;
	b->e = malloc(b->cap * sizeof(*b->e));
	b->spare = malloc(b->cap * sizeof(*b->spare));
	b->start = malloc((b->cap + 1) * sizeof(*b->start));
	b->objects = htab_new(0);
	b->a = malloc(b->cap * sizeof(*b->a));
	b->infos = malloc(b->cap * sizeof(*b->infos));
	b->items = malloc(b->cap * sizeof(*b->items));
	b->strings = arena_new(0);
	return b->e && b->spare && b->start && b->objects && b->a && b->infos && b->items &&
		       b->strings
		   ? 0
		   : -ENOMEM;
}

/* Resolves the chunk's n entries, one resolve_batch() per object. */
static int sym_chunk(struct store *s, struct sym_batch *b, size_t n, size_t *done)
{
	int rc = sym_sort_by_object(b, n);

	for (size_t lo = 0, hi; lo < n && rc == 0; lo = hi) {
		hi = lo + 1;
		while (hi < n && same_object(&b->e[lo], &b->e[hi]))
			hi++;
		rc = sym_group(s, b, lo, hi, done);
	}
	b->n_lines = 0;
	arena_reset(b->strings);
	return rc;
}

/* The pass with resolve_batch(): see the top of the file. */
static int symbolize_batched(struct store *s, size_t max, size_t *done)
{
	struct sym_batch b;
	int rc = sym_batch_init(&b, max && max < SYM_CHUNK ? max : SYM_CHUNK);

	while (rc == 0 && (max == 0 || *done < max)) {
		size_t want = max && max - *done < b.cap ? max - *done : b.cap;
		size_t n = sym_take(s, &b, want);

		if (n == 0)
			break;
		rc = sym_chunk(s, &b, n, done);
	}
	sym_batch_free(&b);
	return rc;
}

void symbolize_merge_locations(struct store *s, const struct merge_agg *a)
{
	struct meta *m = &s->meta;
	size_t n_loc = chunked_count(&m->locations), n = 0, done = 0;
	uint64_t *seen = NULL; /* a bit per location: each is looked at once */
	struct sym_batch b;

	memset(&b, 0, sizeof(b));
	if (!s->has_symbolizer || !s->symbolizer.resolve_batch ||
	    !(seen = calloc(n_loc / 64 + 1, sizeof(*seen))))
		return;
	for (size_t t = 0; t < a->n_touched; t++) {
		uint32_t st = a->touched[t];
		const struct meta_stack *stk = chunked_at(&m->stacks, st);

		if (a->sum[st] == 0)
			continue;
		for (uint32_t j = 0; j < stk->n; j++) {
			uint32_t id = stk->locs[j];
			const struct meta_location *ml;

			if (id == 0 || id >= n_loc || (seen[id / 64] >> (id % 64) & 1))
				continue;
			seen[id / 64] |= (uint64_t)1 << (id % 64);
			ml = chunked_at(&m->locations, id);
			if (atomic_load(&ml->sym) != SYM_PENDING)
				continue;
			/* The buffers only once there is something to do: most
			 * merges find every location answered. */
			if (!b.cap && sym_batch_init(&b, SYM_CHUNK) < 0)
				goto out;
			b.e[n++] = sym_entry_of(m, id, ml);
			if (n == b.cap) {
				if (sym_chunk(s, &b, n, &done) < 0)
					goto out;
				n = 0;
			}
		}
	}
	if (n)
		sym_chunk(s, &b, n, &done); /* failures: described as pending */
out:
	free(seen);
	sym_batch_free(&b);
}

int store_symbolize_pending(struct store *s, size_t max, struct kiln_error *err)
{
	size_t done = 0;
	int rc;

	if (!s->has_symbolizer)
		return 0;
	if (s->symbolizer.resolve_batch)
		rc = symbolize_batched(s, max, &done);
	else
		rc = symbolize_each(s, max, &done);
	if (rc < 0)
		return kiln_error_set(err, -rc, "symbolization: %s", strerror(-rc));
	/* Make the results durable (an empty commit writes pending metastore
	 * records). */
	if (done) {
		rc = store_commit_meta(s, err);
		if (rc)
			return rc;
	}
	return (int)(done > INT32_MAX ? INT32_MAX : done);
}
