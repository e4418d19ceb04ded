/*
 * symbolizer.c — the public API of src/symbols, and batches: many
 * addresses of one object at once, and the batch that opens a file. One
 * address is resolve.c's; the object (symbol table, result cache, CU
 * index) is symfile.h's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/arena.h"
#include "common/fdio.h"
#include "common/htab.h"
#include "common/log.h"
#include "common/worker.h"
#include "symbols/debuginfo.h"
#include "symbols/resolve.h"
#include "symbols/symfile.h"

struct bmiss {
	uint64_t addr;
	uint32_t i;    /* the address's index in the batch */
	uint32_t next; /* the next miss of the same CU, in address order */
};

/* What the work found for one miss: its node in its CU's index (-1: none)
 * and its line row's file name (NULL: no row; no_file: a row whose file
 * has no name) and line. It takes the place of a struct bmiss in the
 * radix sort's spare buffer: fresh memory for it was a tenth of a cold
 * pass's page faults on libc. */
struct bfound {
	const char *file;
	int32_t node;
	int32_t line;
};
_Static_assert(sizeof(struct bfound) <= sizeof(struct bmiss) &&
		   _Alignof(struct bfound) <= _Alignof(struct bmiss),
	       "a struct bfound fits in the place of a struct bmiss");

/* One batch call, shared by its threads. The work (lines, walk, index per
 * listed CU) is spread over them, CU by CU from a counter; the answers are
 * made and emitted on the calling thread alone (the result cache, the
 * symfile's names and the caller's emit are not for threads): of its own
 * CUs as it goes, of the helpers' once they are done. */
struct batch {
	struct symbolizer *s;
	struct symfile *f;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* per address: set once emitted (a stream batch's), or NULL */
	/* Set by the calling thread before it sets listed: */
	const struct bmiss *m; /* the misses, sorted */
	struct kdw_cu **cus;   /* the listed CUs (the symfile reader's units) */
	const uint32_t *head;  /* by unit ordinal: its first miss, in address order */
	size_t nlisted;
	size_t longest;	    /* the most misses of one listed CU */
	struct bfound *res; /* per miss (by its index in m) */
	/* Helpers start before the misses are listed and wait for them. */
	atomic_bool listed;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_size_t next;    /* the next listed CU to take */
	struct cu_index **idx; /* per listed CU; NULL: go address by address */
	bool *answered;	       /* per listed CU (the calling thread's) */
};

/* One thread's share: its reader, arena, names and scratch (the symfile's,
 * or a helper's), and arrays for the addresses of one CU. */
struct batch_worker {
	struct batch *bt;
	struct batch_helper *helper; /* NULL: the calling thread */
	struct cu_reader r;
	uint64_t *want; /* one CU's addresses, ascending, each once */
	int32_t *node, *depth;
	struct kdw_row *rows; /* each one's line row, when found */
	bool *found;
	size_t reader_cus;
	struct worker *thread; /* a helper's, while it works */
};

/* The batch a file is opened for (symfile_get): its addresses, where its
 * answers go, and which of them the opening answered already. */
struct opening {
	const uint64_t *addrs;
	size_t n;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* out: per address, 1 once emitted (NULL: none; the caller frees) */
};

/* --- batches ----------------------------------------------------------------
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

/* Sorts m[0..n) by address (LSD radix over the bytes in which addresses
 * differ, stable) with tmp[0..n); returns the sorted array (m or tmp). */
static struct bmiss *batch_sort_misses(struct bmiss *m, struct bmiss *tmp, size_t n)
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
static bool batch_wants_helpers(const struct symbolizer *s, size_t n)
{
	return s->batch_threads >= 2 && (s->batch_threads_always || n >= BATCH_THREAD_MISSES);
}

/* The work for the misses of one listed CU of w's reader (the list from
 * m[first], ascending): its line program run once against all of them,
 * its DIE tree walked once for them, the nodes found kept as an index in
 * w's arena (no segments: each miss's result says which node). NULL
 * (nothing found) when the reader cannot read the CU. */
static struct cu_index *batch_cu(struct batch_worker *w, struct kdw_cu *kcu, uint32_t first)
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

static void batch_worker_free(struct batch_worker *w)
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
static void batch_answer_found(struct batch *bt, uint32_t first, const struct cu_index *idx)
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
static bool batch_worker_arrays(struct batch_worker *w)
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
 * left idle is soon descheduled by the host, and waking it again took up
 * to milliseconds (measured here: 0.1 to 4 ms), longer than listing the
 * misses of a large batch. */
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
static int symfile_resolve_batch(struct symbolizer *s, struct symfile *f, const uint64_t *addrs,
				 size_t n, symbols_emit_fn emit, void *ctx, const uint8_t *emitted)
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

/* --- opening an object (symfile_open), and the batch that
 * opens it (see batch.h): the batch layer, above resolving one address
 * and the object; it drives inflate.c, following .debug_info as it
 * inflates through struct inflate_with's callbacks.
 *
 * A compressed file's .debug_info inflates on the second thread for 10 ms
 * and more (libc's debug file: 5.8 MB), and for most of that time the
 * calling thread, done with the smaller sections and the symbol table,
 * waited: no unit was read before the whole section was. The batch that
 * opens the file now reads units as they arrive. The calling thread lists
 * the units its addresses fall in, by .debug_aranges, and reads them from
 * the first on with a stream reader (kdw_open_stream: a unit is read once
 * all of its bytes are there), behind the inflating, answering into the
 * result cache. The second thread, once .debug_info is whole, opens the
 * reader on the whole section (which becomes the file's) and reads units
 * from the last one back; the two meet in the middle (each unit goes to
 * the thread that takes it first). The batch then finds its answers cached
 * and resolves what is left (units the readers could not read, addresses
 * that only the whole reader places).
 *
 * The answers stay only when the reader on the whole section maps every
 * address answered to the same unit as .debug_aranges did
 * (stream_batch_end): it checks .debug_aranges against the units, and it
 * adds ranges for units that .debug_aranges leaves out, which could take
 * an address from another unit. A unit referring into another one
 * (DW_FORM_ref_addr) fails in the stream reader and is left to the batch.
 *
 * States (sb->state, set by the calling thread T; the second thread B,
 * which inflates .debug_info, waits on it in stream_batch_back):
 *
 *   UNDECIDED --T: units listed, reader arrays had--> GO
 *       |                                             |
 *       +--T: no stream batch after all, or            |  T reads units
 *          inflate_finish before deciding --> OFF      |  from the front, B
 *          (B returns; the batch does it all)          |  (once .debug_info
 *                                                      |  is whole) opens the
 *                                                      |  whole reader, sets
 *                                                      |  the verdict and
 *                                                      |  reads from the back;
 *                                                      v  each unit once
 *   verdict (B's): UNKNOWN --> AGREE: the whole reader maps addresses to
 *                                     units as .debug_aranges did; T emits
 *                                     as it goes
 *                          --> CHECK: answers wait for stream_batch_end,
 *                                     which keeps them (units agree) or
 *                                     clears the result cache
 *   stream_batch_end: the whole reader becomes the object's; what was not
 *   answered goes to the batch (symfile_resolve_batch), address by
 *   address where no reader can read it.
 */

/* How long the thread that inflated a file for a large batch spins, once
 * done, for that batch's work: the rest of the open and the listing of the
 * misses take 2-3 ms (libc's debug file); a thread left to sleep was 0.1-4
 * ms late to start again (see struct worker). */
#define INFLATE_SPIN_US 10000

enum { STREAM_UNDECIDED, STREAM_GO, STREAM_OFF };
enum { VERDICT_UNKNOWN, VERDICT_AGREE, VERDICT_CHECK };

/* The batch that opens a file, shared by its two threads. The calling
 * thread lists the units before it sets state to STREAM_GO (or to
 * STREAM_OFF: no stream batch after all); the second thread waits for
 * that decision once it has inflated .debug_info. */
struct stream_batch {
	atomic_int state;
	enum symbolizer_stream_test test;
	bool front, back;	     /* each thread reads units (from its end) */
	struct batch bt;	     /* m: the addresses sorted; res: what was found */
	struct bmiss *m, *spare;     /* (bt.m and bt.res are these two) */
	struct bmiss *units, *tmp;   /* per address in a unit: its offset, index in m */
	size_t ngroups;		     /* the units with addresses, by offset: */
	uint64_t *group_unit;	     /* the unit's offset */
	uint32_t *group_first;	     /* its first miss in bt.m (the rest chained) */
	atomic_uchar *taken;	     /* by one thread or the other */
	struct cu_index **front_idx; /* per group, what the calling thread found */
	bool *answered;		     /* per group: answered (and emitted) */
	size_t flushed;		     /* the calling thread's groups below are answered */
	size_t stream_naranges;	     /* the stream reader's ranges */
	/* Set by the second thread once its reader is open: VERDICT_AGREE
	 * when that reader maps addresses to units as the stream reader does
	 * (no answer can be taken back: the calling thread emits them as it
	 * goes); else they wait for stream_batch_end. */
	atomic_int verdict;
	struct kdw_sections secs;
	/* The second thread's reader on the whole section, its arena,
	 * names and scratch, and per group what it found (NULL: nothing). */
	struct kdw *back_kdw;
	struct batch_helper *back_h;
	struct cu_index **back_idx;
	size_t back_cus;
};

static void stream_batch_free(struct stream_batch *sb)
{
	if (!sb)
		return;
	kdw_close(sb->back_kdw);
	if (sb->back_h)
		batch_helper_free(sb->back_h);
	free(sb->back_h);
	free(sb->back_idx);
	free(sb->m);
	free(sb->spare);
	free(sb->units);
	free(sb->tmp);
	free(sb->group_unit);
	free(sb->group_first);
	free(sb->taken);
	free(sb->front_idx);
	free(sb->answered);
	free(sb->bt.emitted);
	free(sb);
}

/* A stream batch for opening f for addrs[0 .. n), if it is worth one;
 * decided and listed later (stream_batch_run). */
static struct stream_batch *stream_batch_new(struct symbolizer *s, const struct opening *op)
{
	struct stream_batch *sb;

	if (!op || op->n < 2 || op->n >= UINT32_MAX || s->libdw_only ||
	    (op->n < BATCH_THREAD_MISSES && !s->stream_test) || !(sb = calloc(1, sizeof(*sb))))
		return NULL;
	atomic_init(&sb->state, STREAM_UNDECIDED);
	atomic_init(&sb->verdict, VERDICT_UNKNOWN);
	sb->test = s->stream_test;
	sb->front = sb->test != SYMBOLIZER_STREAM_BACK;
	sb->back = sb->test != SYMBOLIZER_STREAM_FRONT && s->batch_threads >= 2;
	return sb;
}

/* Calls the stream batch off unless it was decided. */
static void stream_batch_off(struct stream_batch *sb)
{
	int undecided = STREAM_UNDECIDED;

	atomic_compare_exchange_strong(&sb->state, &undecided, STREAM_OFF);
}

/* Lists the units of the batch's addrs[0 .. n) by offset (stream reader
 * d's ranges), each unit's misses chained in address order; false when
 * out of memory. */
static bool stream_batch_list(struct stream_batch *sb, struct kdw *d, const uint64_t *addrs,
			      size_t n)
{
	const struct bmiss *units;
	struct bmiss *sorted;
	size_t nu = 0, run = 0;

	sb->m = malloc(n * sizeof(*sb->m));
	sb->spare = malloc(n * sizeof(*sb->spare));
	sb->units = malloc(n * sizeof(*sb->units));
	sb->tmp = malloc(n * sizeof(*sb->tmp));
	if (!sb->m || !sb->spare || !sb->units || !sb->tmp)
		return false;
	for (size_t i = 0; i < n; i++)
		sb->m[i] = (struct bmiss){addrs[i], (uint32_t)i, UINT32_MAX};
	sorted = batch_sort_misses(sb->m, sb->spare, n);
	for (size_t j = 0; j < n; j++) {
		uint64_t u = kdw_stream_unit_offset(d, sorted[j].addr);

		if (u != UINT64_MAX)
			sb->units[nu++] = (struct bmiss){u, (uint32_t)j, UINT32_MAX};
	}
	/* (Stable: each unit's misses stay in address order.) */
	units = batch_sort_misses(sb->units, sb->tmp, nu);
	for (size_t a = 0; a < nu; a++)
		sb->ngroups += a + 1 == nu || units[a + 1].addr != units[a].addr;
	sb->group_unit = malloc((sb->ngroups ? sb->ngroups : 1) * sizeof(*sb->group_unit));
	sb->group_first = malloc((sb->ngroups ? sb->ngroups : 1) * sizeof(*sb->group_first));
	sb->taken = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->taken));
	sb->front_idx = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->front_idx));
	sb->answered = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->answered));
	sb->back_idx = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->back_idx));
	sb->bt.emitted = calloc(n, sizeof(*sb->bt.emitted));
	if (!sb->group_unit || !sb->group_first || !sb->taken || !sb->front_idx || !sb->answered ||
	    !sb->back_idx || !sb->bt.emitted)
		return false;
	for (size_t a = 0, g = 0; a < nu; a++) {
		bool last = a + 1 == nu || units[a + 1].addr != units[a].addr;

		if (run++ == 0) {
			sb->group_unit[g] = units[a].addr;
			sb->group_first[g] = units[a].i;
		}
		sorted[units[a].i].next = last ? UINT32_MAX : units[a + 1].i;
		if (last) {
			sb->bt.longest = run > sb->bt.longest ? run : sb->bt.longest;
			run = 0;
			g++;
		}
	}
	sb->bt.m = sorted;
	sb->bt.res = (struct bfound *)(sorted == sb->m ? sb->spare : sb->m);
	return true;
}

/* Answers (caches, emits) group g from what idx found (NULL: nothing),
 * once. On the calling thread. */
static void stream_group_answer(struct stream_batch *sb, size_t g, const struct cu_index *idx)
{
	if (!idx || sb->answered[g])
		return;
	batch_answer_found(&sb->bt, sb->group_first[g], idx);
	sb->answered[g] = true;
}

/* Waits for the stream reader's unit at off while info inflates: NULL
 * when there is no unit at off, or the inflating failed. */
static struct kdw_cu *stream_unit_wait(struct kdw *d, struct inflate_job *info, uint64_t off)
{
	for (;;) {
		bool over = atomic_load_explicit(&info->finished, memory_order_acquire);
		size_t avail = atomic_load_explicit(&info->avail, memory_order_acquire);
		struct kiln_error e = {0};
		struct kdw_cu *cu;

		if (over && !info->ok)
			return NULL;
		cu = kdw_stream_unit(d, off, avail, &e);
		if (cu || e.code)
			return cu;
		worker_pause();
	}
}

/* The calling thread's part of the stream batch sb for addrs[0 .. n),
 * while the second thread inflates in's .debug_info: decides (lists the
 * units, or calls it off), then reads units from the front until it meets
 * the second thread. */
static void stream_batch_run(struct symbolizer *s, struct symfile *f, struct inflating *in,
			     struct stream_batch *sb, struct opening *op)
{
	struct inflate_job *info = in->info;
	struct batch_worker w;
	struct batch_helper *h;
	struct kiln_error e = {0};

	memset(&w, 0, sizeof(w));
	if (!sb)
		return;
	if (!info || (!sb->test && atomic_load(&info->finished)))
		goto off;
	/* The other sections are whole: this thread inflated them, unless
	 * the second one, done with .debug_info, took some. */
	for (size_t i = 0; i < in->njobs; i++)
		while (&in->jobs[i] != info &&
		       !atomic_load_explicit(&in->jobs[i].finished, memory_order_acquire))
			worker_pause();
	if (!inflate_sections(f->elf, in, &sb->secs) || !(f->early = calloc(1, sizeof(*f->early))))
		goto off;
	h = f->early;
	h->arena = f->large ? arena_new_huge() : arena_new(256 * 1024);
	h->names = htab_new(64);
	if (!h->arena || !h->names || !(h->kdw = kdw_open_stream(&sb->secs, h->arena, &e)) ||
	    !stream_batch_list(sb, h->kdw, op->addrs, op->n))
		goto off;
	sb->stream_naranges = kdw_naranges(h->kdw);
	sb->bt.s = s;
	sb->bt.f = f;
	sb->bt.emit = op->emit;
	sb->bt.ctx = op->ctx;
	w = (struct batch_worker){
	    .bt = &sb->bt, .helper = h, .r = {h->kdw, h->arena, h->names, &h->scratch}};
	if (!batch_worker_arrays(&w))
		goto off;
	atomic_store_explicit(&sb->state, STREAM_GO, memory_order_release);
	for (size_t g = 0; sb->front && g < sb->ngroups; g++) {
		struct kdw_cu *kcu;
		struct cu_index *idx;

		if (atomic_exchange(&sb->taken[g], 1))
			break; /* the second thread's from here on */
		kcu = stream_unit_wait(h->kdw, info, sb->group_unit[g]);
		if (!kcu) {
			if (atomic_load(&info->finished) && !info->ok)
				break;
			continue;
		}
		if (!kcu->supported || !(idx = batch_cu(&w, kcu, sb->group_first[g])))
			continue;
		sb->front_idx[g] = idx;
		if (atomic_load_explicit(&sb->verdict, memory_order_relaxed) == VERDICT_AGREE)
			for (; sb->flushed <= g; sb->flushed++)
				stream_group_answer(sb, sb->flushed, sb->front_idx[sb->flushed]);
	}
	f->reader_cus += w.reader_cus;
	f->stream_cus += w.reader_cus;
	batch_worker_free(&w);
	return;
off:
	batch_worker_free(&w);
	stream_batch_off(sb);
}

/* The second thread's part, once it has inflated .debug_info: waits for
 * the decision, opens the reader on the whole section and reads units
 * from the last one back until it meets the calling thread. Returns
 * whether there was a stream batch. */
static bool stream_batch_back(struct stream_batch *sb, struct inflate_job *info, bool large)
{
	struct batch_worker w;
	struct batch_helper *h;
	struct kiln_error e = {0};
	int state;

	while ((state = atomic_load_explicit(&sb->state, memory_order_acquire)) == STREAM_UNDECIDED)
		worker_pause();
	if (state != STREAM_GO)
		return false;
	if (!sb->back || !info->ok || !(h = calloc(1, sizeof(*h))))
		return true;
	sb->back_h = h;
	h->arena = large ? arena_new_huge() : arena_new(256 * 1024);
	h->names = htab_new(64);
	if (!h->arena || !h->names || !(sb->back_kdw = kdw_open(&sb->secs, h->arena, &e)))
		return true;
	atomic_store_explicit(&sb->verdict,
			      kdw_aranges_whole(sb->back_kdw) &&
				      kdw_naranges(sb->back_kdw) == sb->stream_naranges
				  ? VERDICT_AGREE
				  : VERDICT_CHECK,
			      memory_order_relaxed);
	w = (struct batch_worker){
	    .bt = &sb->bt, .helper = h, .r = {sb->back_kdw, h->arena, h->names, &h->scratch}};
	if (batch_worker_arrays(&w))
		for (size_t g = sb->ngroups; g-- > 0;) {
			struct kdw_cu *kcu;

			if (atomic_exchange(&sb->taken[g], 1))
				break; /* the calling thread's from here back */
			kcu = kdw_unit_at(sb->back_kdw, sb->group_unit[g]);
			if (kcu && kcu->supported)
				sb->back_idx[g] = batch_cu(&w, kcu, sb->group_first[g]);
		}
	sb->back_cus = w.reader_cus;
	batch_worker_free(&w);
	return true;
}

/* Whether f's reader (on the whole section) maps every address of group g
 * to the group's unit. */
static bool stream_group_agrees(struct symfile *f, const struct stream_batch *sb, size_t g)
{
	for (uint32_t k = sb->group_first[g]; k != UINT32_MAX; k = sb->bt.m[k].next) {
		const struct kdw_cu *cu = kdw_cu_for_addr(f->kdw, sb->bt.m[k].addr);

		if (!cu || cu->offset != sb->group_unit[g])
			return false;
	}
	return true;
}

/* Once both threads are done and libdw has the file: gives f the second
 * thread's reader (else opens one), answers what the threads found (those
 * not answered yet) when that reader agrees on their units, else forgets
 * every cached answer (all of them this batch's); hands op the addresses
 * emitted; frees sb. */
static void stream_batch_end(struct symbolizer *s, struct symfile *f, struct stream_batch *sb,
			     struct opening *op)
{
	bool keep, check;

	if (f->dwarf && !s->libdw_only) {
		if (sb && sb->back_kdw) {
			f->kdw = sb->back_kdw;
			f->secs = sb->secs;
			f->back = sb->back_h;
			sb->back_kdw = NULL;
			sb->back_h = NULL;
		} else {
			symfile_open_reader(f);
		}
	}
	if (!sb || atomic_load(&sb->state) != STREAM_GO) {
		stream_batch_free(sb);
		return;
	}
	keep = f->dwarf && f->kdw && kdw_aranges_whole(f->kdw);
	check = keep && kdw_naranges(f->kdw) != sb->stream_naranges;
	for (size_t g = 0; check && keep && g < sb->ngroups; g++)
		if (sb->front_idx[g] || sb->back_idx[g])
			keep = stream_group_agrees(f, sb, g);
	if (keep) {
		for (size_t g = 0; g < sb->ngroups; g++)
			stream_group_answer(sb, g,
					    sb->front_idx[g] ? sb->front_idx[g] : sb->back_idx[g]);
		f->reader_cus += sb->back_cus;
		f->stream_cus += sb->back_cus;
	} else {
		/* (What was emitted stands: the verdict was given by the reader
		 * on the whole section, which libdw then refused.) */
		rcache_clear(&f->results);
	}
	op->emitted = sb->bt.emitted;
	sb->bt.emitted = NULL;
	stream_batch_free(sb);
}

/* struct inflate_with's callbacks: the second thread's part, and calling
 * the stream batch off. */
static bool stream_batch_back_cb(void *sb, struct inflate_job *info, bool large)
{
	return stream_batch_back(sb, info, large);
}

static void stream_batch_off_cb(void *sb)
{
	stream_batch_off(sb);
}

static struct worker *first_worker(void *s)
{
	return symbolizer_worker(s, 0);
}

/* Opens path for s, for the batch op (NULL: for one address), which it
 * starts answering while .debug_info inflates. With by_build_id_only, a
 * final symbolic link is not followed and the file must have build ID
 * want_id (when not NULL/""). */
static struct symfile *symfile_open(struct symbolizer *s, const char *path, const char *want_id,
				    struct opening *op, struct kiln_error *e)
{
	struct symfile *f = calloc(1, sizeof(*f));
	struct stream_batch *sb = NULL;
	struct inflating in;
	struct inflate_with with;

	if (!f)
		return NULL;
	/* Never a FIFO or a device. */
	f->fd = s->by_build_id_only ? fd_open_nofollow(path, e) : fd_open_regular(path, e);
	if (f->fd < 0)
		goto err;
	/* Private: inflate_finish rewrites section headers in place. */
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
		kiln_error_set(e, ENOEXEC, "%s: not an ELF file", path);
		goto err;
	}
	f->names = htab_new(256);
	if (symfile_large(f->elf) && (f->arena = arena_new_huge()) != NULL) {
		f->large = true;
		f->results.first_cap = 65536;
		rcache_init_in(&f->results, f->arena);
	} else {
		f->arena = arena_new(64 * 1024);
	}
	f->cus = htab_new(256);
	f->path = strdup(path);
	if (!f->names || !f->arena || !f->cus || !f->path) {
		kiln_error_set(e, ENOMEM, "%s: out of memory", path);
		goto err;
	}
	/* The symbol table and program headers are read while the second
	 * thread inflates (inflate_start). */
	sb = stream_batch_new(s, op);
	with = (struct inflate_with){.thread = first_worker,
				     .thread_ctx = s,
				     .always = s->stream_test != SYMBOLIZER_STREAM_SHARED,
				     .spin_us =
					 op && batch_wants_helpers(s, op->n) ? INFLATE_SPIN_US : 0,
				     .large = f->large,
				     .after = sb ? stream_batch_back_cb : NULL,
				     .stop = sb ? stream_batch_off_cb : NULL,
				     .follower = sb};
	inflate_start(&in, f->elf, &f->inflated, &f->ninflated, &with);
	if (elfinfo_read_fd(f->fd, path, &f->info, e) < 0 || symtab_load(f) < 0) {
		if (!e || !e->code)
			kiln_error_set(e, ENOMEM, "%s: out of memory reading symbols", path);
		inflate_finish(&in, &f->inflated, &f->ninflated);
		goto err;
	}
	if (s->by_build_id_only && want_id && *want_id &&
	    strcasecmp(f->info.build_id, want_id) != 0) {
		kiln_error_set(e, ENOENT, "%s: build ID %s, want %s", path,
			       f->info.build_id[0] ? f->info.build_id : "none", want_id);
		inflate_finish(&in, &f->inflated, &f->ninflated);
		goto err;
	}
	inflate_jobs(&in, false);
	stream_batch_run(s, f, &in, sb, op);
	inflate_finish(&in, &f->inflated, &f->ninflated);
	/* No DWARF is fine: the symbol table still names functions. The
	 * reader is opened here (or by the stream batch's second thread). */
	f->dwarf = dwarf_begin_elf(f->elf, DWARF_C_READ, NULL);
	stream_batch_end(s, f, sb, op);
	return f;
err:
	stream_batch_free(sb);
	symfile_free(f);
	return NULL;
}

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
