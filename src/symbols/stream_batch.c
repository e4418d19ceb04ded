/*
 * stream_batch.c — opening an object (symfile_open), and the batch that
 * opens it (see batch.h): the batch layer, above resolving one address
 * and the object; it drives inflate.c, following .debug_info as it
 * inflates through struct inflate_with's callbacks.
 *
 * A compressed file's .debug_info inflates on the second thread for
 * milliseconds (libc's debug file holds 5.8 MB of it), and the calling
 * thread, done with the smaller sections and the symbol table, would wait
 * for most of that time if no unit were read before the whole section.
 * So the batch that opens the file reads units as they arrive. The calling thread lists
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
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/arena.h"
#include "common/fdio.h"
#include "common/htab.h"
#include "common/worker.h"
#include "symbols/batch.h"
#include "symbols/symfile.h"

/* How long the thread that inflated a file for a large batch spins, once
 * done, for that batch's work: the rest of the open and the listing of the
 * misses take a few milliseconds on a large debug file, and a thread left
 * to sleep can be as late as that to start again (see struct worker). */
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
struct symfile *symfile_open(struct symbolizer *s, const char *path, const char *want_id,
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
