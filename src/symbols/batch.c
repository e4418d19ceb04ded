/*
 * batch.c — many addresses of one object at once (see batch.h): the layer
 * above resolving one address (resolve.c), below the public API.
 *
 * With every address known up front (symbolizer_resolve_batch), a cold
 * object is read in address order, one CU at a time: the CU's line program
 * runs once and is matched against all of its addresses without building
 * the row table (kdw_cu_lines_match), and its DIE tree is walked once
 * asking only about them (kdw_walk_ops.want), so that functions none of
 * them falls into are stepped over rather than indexed, and no segment
 * table is built. The answers are node_frames' as for single addresses
 * (the walk reports the same nodes and ranges for the functions it does not
 * step over; the innermost range holding an address wins, as in
 * build_segments). CUs indexed before, the reader's failures and addresses
 * in no unit go the single-address way: symfile_resolve, the serial
 * reference path, whose answers a batch's must equal byte for byte
 * (tests/integration/symbols_batch_serial.sh, tests/symbols/test_symbols.c).
 *
 * A batch call (symfile_resolve_batch), on the calling thread T and up to
 * BATCH_MAX_THREADS - 1 helpers H (s->workers, kept from call to call):
 *
 *      T: cached answers emitted; the misses sorted (radix) and chained
 *         per reader CU; others (CU indexed before, unit the reader does
 *         not support, address in no unit) -> symfile_resolve, emitted
 *         |        \
 *         |         H (started before the sort when the batch is large:
 *         |            BATCH_THREAD_MISSES misses, BATCH_THREAD_INFO bytes
 *         |            of DIEs): opens its reader (a copy of the unit
 *         |            table, once per object), spins, then sleeps until
 *         v            `listed`
 *     LISTED (batch_listed: the list is complete; helpers go)
 *         |
 *         v
 *     WORK: every thread takes the next listed CU (bt.next): one run of
 *         its line program matched against its addresses, one DIE walk
 *         for them -> idx[c] in that thread's arena (NULL: unreadable).
 *         T answers, caches and emits its own CUs at once; H answer none
 *         (the cache, names and emit are T's alone)
 *         |
 *         v
 *     JOINED: T waits for H; answers H's CUs from idx[c]; a CU without
 *         idx (unreadable, or no memory to take it) -> symfile_resolve
 *         |
 *         v
 *     DONE: every address emitted exactly once
 *
 * When there is nothing to gain (one address, no reader, the cache full)
 * or no memory for the lists, every address goes the serial path.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "common/worker.h"
#include "symbols/batch.h"
#include "symbols/resolve.h"
#include "symbols/symfile.h"

/* Sorts m[0..n) by address (LSD radix over the bytes in which addresses
 * differ, stable) with tmp[0..n); returns the sorted array (m or tmp). */
struct bmiss *batch_sort_misses(struct bmiss *m, struct bmiss *tmp, size_t n)
{
	uint64_t diff = 0;
	size_t count[256];

	for (size_t i = 1; i < n; i++)
		diff |= m[i].addr ^ m[0].addr;
	for (unsigned shift = 0; shift < 64 && (diff >> shift); shift += 8) {
		struct bmiss *t;

		if (!((diff >> shift) & 0xff))
			continue;
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[(m[i].addr >> shift) & 0xff]++;
		for (size_t b = 0, sum = 0; b < 256; b++) {
			size_t c = count[b];

			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(m[i].addr >> shift) & 0xff]++] = m[i];
		t = m;
		m = tmp;
		tmp = t;
	}
	return m;
}

/* One CU's walk for a batch: the build (first, for cu_index_fast_func) and, per
 * wanted address, the deepest node whose range holds it. */
struct cu_batch {
	struct cu_build b;
	const uint64_t *want;
	size_t nwant;
	int32_t *node, *depth;
};

static int batch_range(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	struct cu_batch *cb = ctx;
	size_t lo = kdw_lower_bound(cb->want, cb->nwant, low);

	for (; lo < cb->nwant && cb->want[lo] < high; lo++)
		if (depth > cb->depth[lo]) {
			cb->depth[lo] = depth;
			cb->node[lo] = node;
		}
	return 0;
}

static const char no_file[] = "";

/* Whether a batch of n addresses not cached yet is for more than one
 * thread (given an object with BATCH_THREAD_INFO bytes of DIEs). */
bool batch_wants_helpers(const struct symbolizer *s, size_t n)
{
	return s->batch_threads >= 2 && (s->batch_threads_always || n >= BATCH_THREAD_MISSES);
}

/* The work for the misses of one listed CU of w's reader (the list from
 * m[first], ascending): its line program run once against all of them,
 * its DIE tree walked once for them, the nodes found kept as an index in
 * w's arena (no segments: each miss's result says which node). NULL
 * (nothing found) when the reader cannot read the CU. */
struct cu_index *batch_cu(struct batch_worker *w, struct kdw_cu *kcu, uint32_t first)
{
	const struct bmiss *m = w->bt->m;
	struct bfound *res = w->bt->res;
	struct cu_batch cb = {.b = {.f = w->bt->f, .r = w->r}};
	struct kdw_walk_ops ops = {.ctx = &cb, .func = cu_index_fast_func, .range = batch_range};
	struct kiln_error e = {0};
	struct cu_index *idx;
	size_t nw = 0, wi = 0;

	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next)
		if (nw == 0 || w->want[nw - 1] != m[k].addr) {
			w->want[nw] = m[k].addr;
			w->node[nw] = -1;
			w->depth[nw] = -1;
			nw++;
		}
	/* Each address's line row from one run of the line program (and
	 * the file names, which inlined calls' sites need during the walk). */
	if (kdw_cu_lines_match(w->r.kdw, kcu, w->want, nw, w->rows, w->found, &cb.b.lines, &e) <
	    0) {
		if (e.code != -ENOENT)
			return NULL;
		cb.b.lines = NULL;
		memset(w->found, 0, nw * sizeof(*w->found));
	}
	memset(&e, 0, sizeof(e));
	cb.want = ops.want = w->want;
	cb.nwant = ops.nwant = nw;
	cb.node = w->node;
	cb.depth = w->depth;
	if (kdw_walk_cu(w->r.kdw, kcu, &ops, &e) < 0 || cb.b.oom)
		return NULL;
	idx = cu_index_new(w->r.arena);
	if (!idx)
		return NULL;
	idx->fast = true;
	idx->nnodes = cb.b.nnodes;
	idx->nodes = arena_alloc(w->r.arena, (cb.b.nnodes ? cb.b.nnodes : 1) * sizeof(*idx->nodes));
	if (!idx->nodes)
		return NULL;
	if (cb.b.nnodes)
		memcpy(idx->nodes, w->r.sc->nodes, cb.b.nnodes * sizeof(*idx->nodes));
	w->reader_cus++;
	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next) {
		if (m[k].addr != w->want[wi]) /* (the list is ascending) */
			wi++;
		res[k] = (struct bfound){.node = w->node[wi]};
		if (w->found[wi]) {
			res[k].file = kdw_lines_file(cb.b.lines, w->rows[wi].file, w->r.arena);
			if (!res[k].file)
				res[k].file = no_file;
			res[k].line = w->rows[wi].line;
		}
	}
	return idx;
}

void batch_worker_free(struct batch_worker *w)
{
	free(w->want);
	free(w->node);
	free(w->depth);
	free(w->rows);
	free(w->found);
}

/* Answers (and caches) the misses of the list from m[first], which the
 * work on their CU found in idx; emits them when bt has an emit. On the
 * calling thread only. */
void batch_answer_found(struct batch *bt, uint32_t first, const struct cu_index *idx)
{
	const struct bmiss *m = bt->m;
	struct symbols_location loc;

	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next) {
		struct cached_ref ref = {0};
		const struct bfound *r = &bt->res[k];
		size_t nf;

		loc.stripped = loc.partial = false; /* (f has DWARF) */
		nf = resolve_frames(bt->f, idx, r->node, r->file != NULL,
				    r->file == no_file ? NULL : r->file, r->line, m[k].addr,
				    loc.frames, &ref);
		resolve_answer(bt->s, bt->f, m[k].addr, nf, &ref, &loc, SIZE_MAX);
		if (bt->emit)
			bt->emit(bt->ctx, m[k].i, &loc);
		if (bt->emitted)
			bt->emitted[m[k].i] = 1;
	}
}

/* Answers and emits the misses of listed CU c, from its work when done,
 * else address by address. On the calling thread only. */
static void batch_answer(struct batch *bt, size_t c, bool done)
{
	struct symfile *f = bt->f;
	const struct bmiss *m = bt->m;
	uint32_t first = bt->head[kdw_cu_ordinal(f->kdw, bt->cus[c])];
	struct symbols_location loc;

	if (done)
		batch_answer_found(bt, first, bt->idx[c]);
	for (uint32_t k = first; !done && k != UINT32_MAX; k = m[k].next) {
		symfile_resolve(bt->s, f, m[k].addr, &loc);
		bt->emit(bt->ctx, m[k].i, &loc);
	}
	bt->answered[c] = true;
}

/* w's arrays for the misses of one CU (at most bt->longest); false when
 * out of memory. */
bool batch_worker_arrays(struct batch_worker *w)
{
	size_t n = w->bt->longest ? w->bt->longest : 1;

	w->want = malloc(n * sizeof(*w->want));
	w->node = malloc(n * sizeof(*w->node));
	w->depth = malloc(n * sizeof(*w->depth));
	w->rows = malloc(n * sizeof(*w->rows));
	w->found = malloc(n * sizeof(*w->found));
	return w->want && w->node && w->depth && w->rows && w->found;
}

/* Takes listed CUs until none is left (none when its arrays cannot be
 * had: the other threads take them); the calling thread answers its own
 * at once. */
static void batch_work(struct batch_worker *w)
{
	struct batch *bt = w->bt;
	size_t c;

	if (!batch_worker_arrays(w))
		return;
	while ((c = atomic_fetch_add(&bt->next, 1)) < bt->nlisted) {
		size_t o = kdw_cu_ordinal(bt->f->kdw, bt->cus[c]);

		bt->idx[c] =
		    batch_cu(w, w->helper ? kdw_cu_at(w->r.kdw, o) : bt->cus[c], bt->head[o]);
		if (!w->helper)
			batch_answer(bt, c, bt->idx[c] != NULL);
	}
}

/* How long a helper spins for the list before it sleeps: in a VM, a vCPU
 * left idle is soon descheduled by the host, and waking it again can take
 * milliseconds (see struct worker), longer than listing the misses of a
 * large batch. */
#define BATCH_SPIN 200000

/* A helper thread: makes its reader on its first batch (a copy of the
 * symfile reader's unit table, read while the calling thread lists the
 * misses: it reads only unit headers, which nothing writes after the
 * open), waits for the list, works. */
static void batch_thread(void *arg)
{
	struct batch_worker *w = arg;
	struct batch *bt = w->bt;
	struct batch_helper *h = w->helper;
	struct kiln_error e = {0};

	if (!h->arena)
		h->arena = bt->f->large ? arena_new_huge() : arena_new(256 * 1024);
	if (!h->names)
		h->names = htab_new(64);
	if (!h->kdw && h->arena && h->names)
		h->kdw = kdw_clone_units(bt->f->kdw, h->arena, &e);
	if (!h->kdw)
		return; /* out of memory: the other threads take every CU */
	w->r = (struct cu_reader){h->kdw, h->arena, h->names, &h->scratch};
	for (unsigned i = 0; !atomic_load(&bt->listed); i++) {
		if (i < BATCH_SPIN) {
			worker_pause();
			continue;
		}
		pthread_mutex_lock(&bt->lock);
		while (!atomic_load(&bt->listed))
			pthread_cond_wait(&bt->cond, &bt->lock);
		pthread_mutex_unlock(&bt->lock);
	}
	batch_work(w);
}

/* Starts the helper threads of a batch with nm misses in f (none when
 * they are few, or threads are not to be used); returns the threads the
 * work will take, this one included. */
static size_t batch_start_helpers(struct symbolizer *s, struct symfile *f, struct batch *bt,
				  struct batch_worker *w, size_t nm)
{
	size_t want = s->batch_threads, t;

	if (want > BATCH_MAX_THREADS)
		want = BATCH_MAX_THREADS;
	if (!batch_wants_helpers(s, nm) ||
	    (!s->batch_threads_always && f->secs.size[KDW_INFO] < BATCH_THREAD_INFO))
		return 1;
	if (!f->helpers && !(f->helpers = calloc(BATCH_MAX_THREADS - 1, sizeof(*f->helpers))))
		return 1;
	for (t = 1; t < want; t++) {
		w[t].bt = bt;
		w[t].helper = &f->helpers[t - 1];
		if (!(w[t].thread = symbolizer_worker(s, t - 1)))
			break;
		worker_run(w[t].thread, batch_thread, &w[t], 0);
	}
	return t;
}

/* Lets the helpers go: the list in bt is complete. */
static void batch_listed(struct batch *bt)
{
	pthread_mutex_lock(&bt->lock);
	atomic_store(&bt->listed, true);
	pthread_cond_broadcast(&bt->cond);
	pthread_mutex_unlock(&bt->lock);
}

/* symbolizer_resolve_batch for the open symfile f; emitted (or NULL): the
 * addresses answered already (by the stream batch that opened f). */
int symfile_resolve_batch(struct symbolizer *s, struct symfile *f, const uint64_t *addrs, size_t n,
			  symbols_emit_fn emit, void *ctx, const uint8_t *emitted)
{
	struct batch bt = {.s = s, .f = f, .emit = emit, .ctx = ctx};
	struct batch_worker w[BATCH_MAX_THREADS];
	struct symbols_location loc;
	struct bmiss *m = NULL, *tmp = NULL, *sorted;
	uint32_t *head = NULL, *len = NULL; /* by unit ordinal */
	size_t nm = 0, ncus, nthreads = 0;

	memset(w, 0, sizeof(w));
	/* (With the cache full, a batch's nodes would be kept for answers
	 * that are not cached.) */
	if (f->kdw && n > 1 && n < UINT32_MAX && f->results.n < s->max_cached) {
		m = malloc(n * sizeof(*m));
		tmp = malloc(n * sizeof(*tmp));
		ncus = kdw_ncus(f->kdw);
		head = malloc((ncus ? ncus : 1) * sizeof(*head));
		len = malloc((ncus ? ncus : 1) * sizeof(*len));
		bt.cus = malloc(n * sizeof(*bt.cus));
		bt.idx = malloc(n * sizeof(*bt.idx));
		bt.answered = calloc(n, sizeof(*bt.answered));
	}
	if (!m || !tmp || !head || !len || !bt.cus || !bt.idx || !bt.answered) {
		/* Not worth it, or not possible: one by one. */
		for (size_t i = 0; i < n; i++) {
			if (emitted && emitted[i])
				continue;
			symfile_resolve(s, f, addrs[i], &loc);
			emit(ctx, i, &loc);
		}
		goto out;
	}
	atomic_init(&bt.listed, false);
	atomic_init(&bt.next, 0);
	pthread_mutex_init(&bt.lock, NULL);
	pthread_cond_init(&bt.cond, NULL);
	/* Cached answers first; the rest sorted by address. */
	loc.stripped = !f->dwarf && !f->info.has_symtab;
	loc.partial = !f->dwarf;
	for (size_t i = 0; i < n; i++) {
		size_t slot;
		uintptr_t v;

		if (emitted && emitted[i])
			continue;
		/* (A file just opened has nothing cached.) */
		v = f->results.n ? rcache_get(&f->results, addrs[i], &slot) : 0;
		if (v) {
			resolve_cached(v, &loc);
			emit(ctx, i, &loc);
		} else {
			m[nm++] = (struct bmiss){addrs[i], (uint32_t)i, UINT32_MAX};
		}
	}
	/* The helpers before the sort: they make their readers meanwhile (and
	 * a thread takes a while to start). A warm batch starts none. */
	nthreads = batch_start_helpers(s, f, &bt, w, nm);
	sorted = batch_sort_misses(m, tmp, nm);
	/* Each reader CU's misses as a list in address order (pushed from
	 * the highest address down); the others one by one. */
	memset(head, 0xff, (ncus ? ncus : 1) * sizeof(*head));
	for (size_t j = nm; j-- > 0;) {
		struct kdw_cu *kcu = NULL;
		void **user = kdw_arange_user(f->kdw, sorted[j].addr, &kcu);
		size_t o;

		if (!kcu || !kcu->supported || kcu->user || (user && *user)) {
			symfile_resolve(s, f, sorted[j].addr, &loc);
			emit(ctx, sorted[j].i, &loc);
			continue;
		}
		o = kdw_cu_ordinal(f->kdw, kcu);
		if (head[o] == UINT32_MAX) {
			bt.cus[bt.nlisted++] = kcu;
			len[o] = 0;
		}
		sorted[j].next = head[o];
		head[o] = (uint32_t)j;
		if (++len[o] > bt.longest)
			bt.longest = len[o];
	}
	bt.m = sorted;
	bt.res = (struct bfound *)(sorted == m ? tmp : m);
	bt.head = head;
	/* The work, on this thread and the helpers. */
	batch_listed(&bt);
	w[0] = (struct batch_worker){.bt = &bt, .r = symfile_reader(f)};
	batch_work(&w[0]);
	for (size_t t = 0; t < nthreads; t++) {
		if (w[t].thread)
			worker_wait(w[t].thread);
		f->reader_cus += w[t].reader_cus;
	}
	pthread_mutex_destroy(&bt.lock);
	pthread_cond_destroy(&bt.cond);
	/* The helpers' CUs; those the work did not take (no memory for it)
	 * or the reader could not read go address by address. */
	for (size_t c = bt.nlisted; c-- > 0;)
		if (!bt.answered[c])
			batch_answer(&bt, c, c < atomic_load(&bt.next) && bt.idx[c]);
out:
	for (size_t t = 0; t < BATCH_MAX_THREADS; t++)
		batch_worker_free(&w[t]);
	free(m);
	free(tmp);
	free(head);
	free(len);
	free(bt.cus);
	free(bt.idx);
	free(bt.answered);
	return 0;
}
