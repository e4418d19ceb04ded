/*
 * agent.c — the main loop: poll the ring buffer, cut windows, emit profiles.
 *
 * Window invariant: a sample belongs to the window whose [start, end)
 * contains its kernel timestamp (CLOCK_MONOTONIC, taken in BPF). Records
 * are delivered in near time order; one whose timestamp is at or past the
 * current window's end goes to the next window. A window is cut GRACE_NS
 * after its end, once the ring buffer has been drained, so a sample taken
 * just before the end but committed microseconds later is still in it.
 * Every record is consumed exactly once, so no sample is lost or counted
 * twice at a boundary (the kernel counts what the ring buffer could not
 * take, and those drops are reported).
 */
#include "common/clock.h"
#include "agent/agent.h"
#include "agent/python.h"
#include "common/htab.h"
#include "common/log.h"
#include "pprof/pprof.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* Wakeups: the kernel wakes the loop for the first sample of a process
 * that exec'd in the last few seconds (whose /proc entries must be read
 * while it lives) or for a ring a quarter full, else the loop sleeps
 * until the window ends, at most MAX_WAIT_MS (long-running processes seen
 * for the first time are read then). After a wakeup it sleeps at least
 * MIN_WAKE_NS, so however many processes start there are at most 50
 * wakeups a second, each reading every process that appeared since, and
 * on a quiet host a few per window. Why 20 ms and not the 250 ms of a
 * fixed poll: a compiler or a script's command lives tens of
 * milliseconds, and with 250 ms most of them were gone before their maps
 * were read (78% of the samples of 60 ms processes kept bare addresses:
 * agent_short_lived). */
#define MIN_WAKE_NS	(20ull * 1000000)
#define MAX_WAIT_MS	2000
#define GRACE_NS	(50ull * 1000000)
#define MAPS_REFRESH_NS (1000ull * 1000000)
#define PROC_EXPIRY_NS	(600ull * 1000000000)
/* Kernel names are re-asked this often (see ksymcache.c), or sooner if the
 * cache grows past KSYM_CACHE_MAX addresses. */
#define KSYM_CLEAR_NS  (600ull * 1000000000)
#define KSYM_CACHE_MAX 200000
/* Local-store profiles whose encoding fits one file-system block are
 * stored, not compressed, inside their gzip framing (see profile_env). */
#define LOCAL_STORED_MAX 4096

struct agent {
	const struct agent_config *cfg;
	struct agent_metrics *m;
	struct proc_cache *procs;
	struct ksym_cache *ksyms;
	uint64_t ksyms_cleared_ns;
	struct agent_labels host_labels;
	struct window *cur, *next;
	struct sampler *sampler;
	/* Reused by every profile of every window (see profile_env). */
	struct libdeflate_compressor *gz, *gz_store;
	struct buf gz_scratch;
	struct pprof_builder *builder;
	int64_t wall_minus_mono;
	uint64_t now_ns;
	/* The loop's own CPU time (CLOCK_THREAD_CPUTIME_ID) at the end of the
	 * last window and its split, for the debug line of each window. */
	uint64_t cpu_mark_ns, cpu_build_ns, cpu_sinks_ns;
	/* The kernel's mmap records (NULL if refused: short-lived processes
	 * then keep bare addresses). */
	struct mmap_watch *mmaps;
	/* The table unwinder (NULL: frame pointers only), and the processes
	 * whose samples asked for a (re)load since the last poll. */
	struct unwinder *unwinder;
	uint32_t *unwind_queue;
	size_t unwind_queued, unwind_queue_cap;
	/* Python frames (NULL: off, or no unwinder to walk them with). */
	struct python *python;
	/* Samples that carry a copy of their stack (their process had no
	 * tables yet), held until the loads after this drain. */
	struct sample_event **held;
	size_t nheld, held_cap;
	/* JIT names from perf maps (NULL: not read, --perf-map-max-bytes=0). */
	struct perfmap_registry *perfmaps;
};

/* How many held samples at most: beyond, a sample goes in with the
 * frames the kernel's frame-pointer walk gave it. About 10 MB. */
#define HELD_MAX 1024

#define ADD(f, v) atomic_fetch_add_explicit(&a->m->f, (v), memory_order_relaxed)
#define SET(f, v) atomic_store_explicit(&a->m->f, (v), memory_order_relaxed)

/* Sleeps ns, less if a signal arrives (a stop). */
static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};

	nanosleep(&ts, NULL);
}

/* Notes that pid wants its unwind tables (re)loaded after this drain. */
static void unwind_request(struct agent *a, uint32_t pid)
{
	for (size_t i = 0; i < a->unwind_queued; i++)
		if (a->unwind_queue[i] == pid)
			return;
	if (!unwinder_reload_due(a->unwinder, pid, a->now_ns))
		return;
	if (a->unwind_queued == a->unwind_queue_cap) {
		size_t cap = a->unwind_queue_cap ? a->unwind_queue_cap * 2 : 64;
		uint32_t *q = realloc(a->unwind_queue, cap * sizeof(*q));

		if (!q)
			return;
		a->unwind_queue = q;
		a->unwind_queue_cap = cap;
	}
	a->unwind_queue[a->unwind_queued++] = pid;
}

static void add_sample(struct agent *a, const struct sample_event *e);

/* Walks a held sample's stack copy with its process's tables (when they
 * are loaded; else it keeps the frame-pointer frames it came with) and
 * counts it. Frees it. */
static void release_held(struct agent *a, struct sample_event *e)
{
	uint64_t regs[3] = {e->user_regs[0], e->user_regs[1], e->user_regs[2]};
	uint64_t frames[PROFILER_MAX_USER_FRAMES];
	uint8_t status;
	int n = unwinder_walk(a->unwinder, e->pid, regs, e->stack, e->stack_len, frames,
			      PROFILER_MAX_USER_FRAMES, &status, a->now_ns);
	bool python = false;

	/* Python frames come from the kernel's walk only (a stack copy has
	 * none of the interpreter's memory): such a sample keeps its frames,
	 * the walk above having built the tables its code lacked, unless
	 * the kernel sent its Python chain along (python_interleave). */
	for (size_t i = e->n_kernel; i < (size_t)e->n_kernel + e->n_user && !python; i++)
		python = PYFRAME_IS(e->frames[i]);
	if (e->n_python && a->python &&
	    python_held_frames(a->python, e, n > 0 ? frames : NULL, n > 0 ? (size_t)n : 0)) {
		if (n > 0) {
			e->user_status = status;
			ADD(unwind_rewalked, 1);
		}
	} else if (n > 0 && !python) {
		for (int f = 0; f < n && e->n_kernel + f < PROFILER_MAX_FRAMES; f++)
			e->frames[e->n_kernel + f] = frames[f];
		e->n_user = (uint16_t)n;
		e->user_status = status;
		ADD(unwind_rewalked, 1);
	}
	add_sample(a, e);
	free(e);
}

/* Counts pid's held samples now, before an exec or exit of pid is acted
 * on: they belong to the image (and the /proc entry) from before it, and
 * must reach the process cache in the order the kernel saw them. */
static void release_held_of(struct agent *a, uint32_t pid)
{
	size_t out = 0;

	for (size_t i = 0; i < a->nheld; i++) {
		if (a->held[i]->pid == pid)
			release_held(a, a->held[i]);
		else
			a->held[out++] = a->held[i];
	}
	a->nheld = out;
}

/* Loads what the last drain's samples asked for, then walks the stacks
 * the held samples carry with the tables just loaded. */
static void unwind_after_drain(struct agent *a)
{
	for (size_t i = 0; i < a->unwind_queued; i++)
		if (unwinder_load(a->unwinder, a->cfg->proc_root, a->unwind_queue[i], a->now_ns) ==
			0 &&
		    a->python)
			python_load(a->python, a->cfg->proc_root, a->unwind_queue[i]);
	a->unwind_queued = 0;
	for (size_t i = 0; i < a->nheld; i++)
		release_held(a, a->held[i]);
	a->nheld = 0;
	unwinder_idle(a->unwinder);
}

/* Holds a copy of a sample that carries its stack, until its process's
 * tables are loaded (unwind_after_drain). False if it cannot be held. */
static bool hold_sample(struct agent *a, const struct sample_event *e, size_t len)
{
	struct sample_event *copy;

	if (a->nheld == HELD_MAX)
		return false;
	if (a->nheld == a->held_cap) {
		size_t cap = a->held_cap ? a->held_cap * 2 : 64;
		struct sample_event **v = realloc(a->held, cap * sizeof(*v));

		if (!v)
			return false;
		a->held = v;
		a->held_cap = cap;
	}
	copy = malloc(sizeof(*copy));
	if (!copy)
		return false;
	memcpy(copy, e, len);
	a->held[a->nheld++] = copy;
	return true;
}

static void on_sample(struct agent *a, const struct sample_event *e, size_t len)
{
	size_t nf = (size_t)e->n_kernel + e->n_user;
	char comm[PROFILER_COMM_LEN + 1];

	if (len < SAMPLE_EVENT_HEADER_SIZE || nf > PROFILER_MAX_FRAMES ||
	    len < SAMPLE_EVENT_HEADER_SIZE + nf * 8)
		return;
	if (a->unwinder && e->stack_len && e->stack_len <= PROFILER_STACK_COPY &&
	    len >= SAMPLE_EVENT_STACK_OFFSET + e->stack_len) {
		/* Its process has no tables yet (or its code has none built
		 * yet): ask for them, read what /proc says of it while it
		 * lives, and walk it after the loads. */
		if (e->user_status == UNWIND_STATUS_NO_PROCESS)
			unwind_request(a, e->pid);
		memcpy(comm, e->thread_comm, PROFILER_COMM_LEN);
		comm[PROFILER_COMM_LEN] = '\0';
		proc_cache_get(a->procs, e->pid, comm, e->tid == e->pid, a->now_ns);
		/* its Python frames named now, while the process lives */
		if (a->python && e->n_python &&
		    (size_t)e->n_kernel + e->n_user + e->n_python <= PROFILER_MAX_FRAMES)
			python_note_frames(a->python, e->pid,
					   (const uint64_t *)&e->frames[e->n_kernel + e->n_user],
					   e->n_python);
		if (hold_sample(a, e, len))
			return;
	}
	add_sample(a, e);
}

/* Counts one sample into its window. */
static void add_sample(struct agent *a, const struct sample_event *e)
{
	size_t nf = (size_t)e->n_kernel + e->n_user;
	char comm[PROFILER_COMM_LEN + 1];
	struct proc_info *p;
	struct window *w;

	if (e->kind == PROFILER_EVENT_OFFCPU)
		ADD(offcpu_samples, 1);
	else
		ADD(samples, 1);
	if (e->user_status < UNWIND_STATUS_NR)
		ADD(unwind_status[e->user_status], 1);
	/* A user process without tables (a kernel thread has no user frames),
	 * or a pc in code mapped since its tables were loaded. */
	if (a->unwinder && ((e->user_status == UNWIND_STATUS_NO_PROCESS && e->n_user > 0) ||
			    e->user_status == UNWIND_STATUS_NO_MAPPING))
		unwind_request(a, e->pid);
	/* The main thread's name is the process's (the group leader's comm)
	 * as it was when sampled: /proc, read later, may show the image an
	 * exec since brought (a fork's child samples as "bash" first). For
	 * other threads the name comes from /proc/PID/stat, and their own
	 * name stands in only if the process is already gone. */
	memcpy(comm, e->thread_comm, PROFILER_COMM_LEN);
	comm[PROFILER_COMM_LEN] = '\0';
	p = proc_cache_get(a->procs, e->pid, comm, e->tid == e->pid, a->now_ns);
	if (!p) {
		ADD(drops_oom, 1);
		return;
	}
	/* A frame outside every known mapping: a code mapping not asked for
	 * yet (lazy entries), or the process mapped new code since we read
	 * its maps (dlopen, JIT). Ask while it lives. */
	for (size_t i = e->n_kernel; i < nf; i++) {
		if (PYFRAME_IS(e->frames[i]))
			continue;
		if (!procmaps_find(&p->maps, e->frames[i])) {
			proc_cache_resolve(a->procs, p, e->frames[i], a->now_ns, MAPS_REFRESH_NS);
			if (!p->lazy)
				break;
		}
	}
	/* Named now, while the process lives (it may be gone when its
	 * window's profile is built). */
	if (a->python)
		python_note_frames(a->python, e->pid, (const uint64_t *)&e->frames[e->n_kernel],
				   e->n_user);
	if (a->perfmaps)
		perfmap_note_sample(a->perfmaps, p, e, a->now_ns);
	w = e->ktime_ns >= a->cur->end_mono_ns ? a->next : a->cur;
	if (window_add(w, p, e) != 0)
		ADD(drops_oom, 1);
}

static void on_record(void *ctx, const void *data, size_t len)
{
	struct agent *a = ctx;
	uint32_t kind;

	if (len < sizeof(kind))
		return;
	memcpy(&kind, data, sizeof(kind));
	if (kind == PROFILER_EVENT_SAMPLE || kind == PROFILER_EVENT_OFFCPU) {
		on_sample(a, data, len);
	} else if (kind == PROFILER_EVENT_EXEC && len >= sizeof(struct exec_event)) {
		const struct exec_event *e = data;

		if (a->unwinder)
			release_held_of(a, e->pid);
		proc_cache_invalidate(a->procs, e->pid);
		/* A process we had tables for runs new code: load it again
		 * now rather than at its next sample. */
		if (a->unwinder && unwinder_forget(a->unwinder, e->pid, a->now_ns))
			unwind_request(a, e->pid);
		if (a->python)
			python_forget(a->python, e->pid, a->now_ns);
		ADD(exec_events, 1);
	} else if (kind == PROFILER_EVENT_EXIT && len >= sizeof(struct exec_event)) {
		const struct exec_event *e = data;

		if (a->unwinder)
			release_held_of(a, e->pid);
		proc_cache_mark_exited(a->procs, e->pid, a->now_ns);
		if (a->unwinder)
			unwinder_forget(a->unwinder, e->pid, a->now_ns);
		if (a->python)
			python_forget(a->python, e->pid, a->now_ns);
		ADD(exit_events, 1);
	}
}

static void on_mmap_event(void *ctx, const struct mmap_event *e)
{
	struct agent *a = ctx;

	proc_cache_note(a->procs, e, a->now_ns);
	if (a->python && !e->exec && !e->parent)
		python_note_mapping(a->python, a->cfg->proc_root, e->pid, e->m.path);
}

/* Before samples are handled: the mappings that processes made since. */
static void drain_mmap_records(void *ctx)
{
	struct agent *a = ctx;
	uint64_t lost = mmap_watch_drain(a->mmaps, on_mmap_event, a);

	if (a->python)
		python_new_drain(a->python);
	if (lost)
		ADD(mmap_records_lost, lost);
}

static void update_walk_hist(struct agent *a)
{
	uint64_t h[WALK_HIST_NR * WALK_HIST_BUCKETS];

	if (sampler_walk_hist(a->sampler, h, WALK_HIST_NR * WALK_HIST_BUCKETS) != 0)
		return;
	for (size_t i = 0; i < WALK_HIST_NR * WALK_HIST_BUCKETS; i++)
		SET(unwind_walk_hist[i], h[i]);
}

static void update_kernel_stats(struct agent *a)
{
	uint64_t st[STAT_NR];

	if (sampler_stats(a->sampler, st, STAT_NR) != 0)
		return;
	SET(kernel_samples, st[STAT_SAMPLES]);
	SET(drops_ringbuf, st[STAT_DROP_RINGBUF_FULL]);
	SET(kernel_stack_errors, st[STAT_KERNEL_STACK_ERR]);
	SET(user_stack_errors, st[STAT_USER_STACK_ERR]);
	SET(unwind_walks, st[STAT_UNWIND_WALKS]);
	SET(unwind_walk_ns, st[STAT_UNWIND_NS]);
	SET(unwind_walk_frames, st[STAT_UNWIND_FRAMES]);
	update_walk_hist(a);
	SET(offcpu_switches, st[STAT_OFFCPU_SWITCHES]);
	SET(offcpu_recorded, st[STAT_OFFCPU_RECORDED]);
	SET(offcpu_short, st[STAT_OFFCPU_SHORT]);
	SET(offcpu_kernel_samples, st[STAT_OFFCPU_SAMPLES]);
	SET(offcpu_drops_slot_taken, st[STAT_OFFCPU_DROP_SLOT_TAKEN]);
	SET(offcpu_drops_ringbuf, st[STAT_OFFCPU_DROP_RINGBUF_FULL]);
	SET(offcpu_kernel_threads, st[STAT_OFFCPU_KERNEL_THREAD]);
	SET(offcpu_nested, st[STAT_OFFCPU_NESTED]);
	if (a->python)
		python_update_metrics(a->python, st);
}

static int symbolize_batch(void *ctx, const uint64_t *addrs, size_t n,
			   const char (**names)[KSYM_NAME_LEN])
{
	return sampler_symbolize(ctx, addrs, n, names);
}

/* The kinds of profile a window gives (enum agent_profile_kind): CPU and
 * off-CPU. */
#define PROFILE_KINDS 2

/* Names the kernel frames of w that the cache does not know yet, in a few
 * batched lookups, before any profile is built. */
static void window_name_kernel_frames(struct agent *a, struct window *w)
{
	int rc = 0;

	if (!a->ksyms)
		return;
	if (a->now_ns - a->ksyms_cleared_ns > KSYM_CLEAR_NS ||
	    ksym_cache_count(a->ksyms) > KSYM_CACHE_MAX) {
		ksym_cache_clear(a->ksyms);
		a->ksyms_cleared_ns = a->now_ns;
	}
	for (size_t t = 0; t < PROFILE_KINDS * w->n && !rc; t++) {
		/* CPU stacks, then off-CPU stacks (NULL without any). */
		const struct htab *stacks =
		    t < w->n ? w->procs[t].stacks : w->procs[t - w->n].offcpu;
		size_t iter = 0, klen;
		const void *key;
		uint64_t count;

		while (!rc && stacks && htab_next(stacks, &iter, &key, &klen, &count)) {
			const struct window_stack_key *k = key;
			const uint64_t *frames = (const uint64_t *)((const char *)key + sizeof(*k));

			for (size_t f = 0; f < k->n_kernel && !rc; f++)
				rc = ksym_cache_want(a->ksyms, ksym_frame_addr(frames[f], f == 0));
			/* names dropped since the drain (the cache's bound) */
			if (a->python)
				python_note_frames(a->python, w->procs[t % w->n].info->pid,
						   frames + k->n_kernel, k->n_user);
		}
	}
	if (!rc)
		rc = ksym_cache_resolve(a->ksyms);
	if (rc)
		log_warn("naming kernel frames: %s (they stay addresses)", strerror(-rc));
}

static bool proc_has_kind(const struct window_proc *wp, int kind)
{
	return kind == AGENT_PROFILE_OFFCPU ? wp->offcpu_samples > 0 : wp->samples > 0;
}

/* Builds the profiles of w (in each shape some sink wants, CPU and, with
 * off-CPU samples, off-CPU) and hands them to every sink. */
static void window_emit(struct agent *a, struct window *w)
{
	const struct agent_config *cfg = a->cfg;
	struct profile_env env = {
	    .ksyms = a->ksyms,
	    .python = a->python,
	    .frequency_hz = cfg->frequency_hz,
	    .host_labels = &a->host_labels,
	    .gz = a->gz,
	    .scratch = &a->gz_scratch,
	    .builder = a->builder,
	};
	/* The local store's files (the shapes the push never takes) keep
	 * small profiles in stored gzip blocks: see profile_env. */
	struct profile_env env_local = env;
	/* Per shape: the profiles and their buffers, a slot per kind and
	 * process (SINK_WINDOW: per kind), slot = kind * n + process. */
	struct agent_profile *profs[SINK_SHAPES] = {NULL};
	struct buf *bufs[SINK_SHAPES] = {NULL};
	bool need[SINK_SHAPES] = {false};
	size_t nout[SINK_SHAPES] = {0};
	const struct agent_labels **labels = NULL; /* each its process's series */
	struct agent_exec_infos *execs = NULL;	   /* for SINK_PER_PROCESS, per slot */
	size_t nslots = PROFILE_KINDS * w->n;
	struct kiln_error err = {0};
	bool oom = false;

	for (size_t i = 0; i < cfg->n_sinks; i++)
		if (!cfg->sinks[i]->write_stacks)
			need[cfg->sinks[i]->shape] = true;
	if (!w->n || !cfg->n_sinks)
		return;
	env_local.gz_store = a->gz_store;
	env_local.stored_max = LOCAL_STORED_MAX;
	labels = calloc(w->n, sizeof(*labels));
	execs = calloc(nslots, sizeof(*execs));
	oom = !labels || !execs;
	for (int v = 0; v < SINK_SHAPES && !oom; v++) {
		size_t n = v == SINK_WINDOW ? PROFILE_KINDS : nslots;

		if (!need[v])
			continue;
		profs[v] = calloc(n, sizeof(*profs[v]));
		bufs[v] = calloc(n, sizeof(*bufs[v]));
		oom = !profs[v] || !bufs[v];
	}
	if (oom) {
		log_error("window: out of memory building %zu profiles", w->n);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++) {
		const struct window_proc *wp = &w->procs[i];

		if (!wp->info->series_ok) {
			if (profile_series_labels(&env, wp->info, &wp->info->series) != 0) {
				labels_free(&wp->info->series);
				log_error("window: out of memory building %zu profiles", w->n);
				goto out;
			}
			wp->info->series_ok = true;
		}
		labels[i] = &wp->info->series;
	}
	for (int kind = 0; kind < PROFILE_KINDS; kind++) {
		for (size_t i = 0; i < w->n; i++) {
			const struct window_proc *wp = &w->procs[i];
			size_t slot = (size_t)kind * w->n + i;

			if (!proc_has_kind(wp, kind))
				continue;
			for (int v = SINK_PER_PROCESS; v <= SINK_PER_PROCESS_LABELLED; v++) {
				bool labelled = v == SINK_PER_PROCESS_LABELLED;
				const struct profile_env *pe = labelled ? &env_local : &env;
				const struct agent_labels *sl = labelled ? labels[i] : NULL;
				struct agent_exec_infos *ex = labelled ? NULL : &execs[slot];
				struct agent_profile *p;
				int rc;

				if (!need[v])
					continue;
				kiln_error_clear(&err);
				if (kind == AGENT_PROFILE_OFFCPU)
					rc = profile_build_offcpu(pe, w, wp, sl, &bufs[v][slot], ex,
								  &err);
				else
					rc = profile_build(pe, w, wp, sl, &bufs[v][slot], ex, &err);
				if (rc) {
					log_warn("%s", err.msg);
					ADD(profiles_failed, 1);
					continue;
				}
				p = &profs[v][nout[v]++];
				p->pid = wp->info->pid;
				p->comm = wp->info->comm;
				p->labels = labels[i];
				p->time_ns = w->start_wall_ns;
				p->duration_ns = (int64_t)(w->end_mono_ns - w->start_mono_ns);
				p->pprof = bufs[v][slot].data;
				p->pprof_len = bufs[v][slot].len;
				p->exec_info = labelled ? NULL : execs[slot].v;
				p->n_exec_info = labelled ? 0 : execs[slot].n;
				p->kind = (enum agent_profile_kind)kind;
				if (kind == AGENT_PROFILE_OFFCPU)
					ADD(offcpu_profiles, 1);
			}
		}
		if (need[SINK_WINDOW] &&
		    (kind == AGENT_PROFILE_OFFCPU ? w->offcpu_samples : w->samples)) {
			struct buf *b = &bufs[SINK_WINDOW][kind];
			int rc;

			kiln_error_clear(&err);
			if (kind == AGENT_PROFILE_OFFCPU)
				rc = profile_build_offcpu_window(&env_local, w, labels, b, &err);
			else
				rc = profile_build_window(&env_local, w, labels, b, &err);
			if (rc == 0) {
				profs[SINK_WINDOW][nout[SINK_WINDOW]++] = (struct agent_profile){
				    .comm = "",
				    .time_ns = w->start_wall_ns,
				    .duration_ns = (int64_t)(w->end_mono_ns - w->start_mono_ns),
				    .pprof = b->data,
				    .pprof_len = b->len,
				    .kind = (enum agent_profile_kind)kind,
				};
				if (kind == AGENT_PROFILE_OFFCPU)
					ADD(offcpu_profiles, 1);
			} else {
				log_warn("%s", err.msg);
				ADD(profiles_failed, 1);
			}
		}
	}
	/* Every file a profile points into is a debuginfo candidate (the
	 * uploader remembers which it has handled, so this is a lookup). */
	for (size_t i = 0; cfg->uploader && need[SINK_PER_PROCESS] && i < nslots; i++) {
		for (size_t j = 0; j < execs[i].n; j++) {
			const struct proc_mapping *m = execs[i].v[j].mapping;
			char path[4096];

			if (!m || !m->build_id[0] || m->path[0] != '/')
				continue;
			snprintf(path, sizeof(path), "%s/%u/root%s", cfg->proc_root,
				 w->procs[i % w->n].info->pid, m->path);
			debuginfo_uploader_offer(cfg->uploader, m->build_id, path);
		}
	}
	a->cpu_build_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
	bool built_any =
	    need[SINK_PER_PROCESS] || need[SINK_PER_PROCESS_LABELLED] || need[SINK_WINDOW];
	for (size_t i = 0; i < cfg->n_sinks; i++) {
		struct agent_sink *s = cfg->sinks[i];
		int v = s->shape;
		int rc;

		kiln_error_clear(&err);
		if (s->write_stacks) {
			struct profile_env env_stacks = env;

			env_stacks.uploader = cfg->uploader;
			env_stacks.proc_root = cfg->proc_root;
			rc = s->write_stacks(s, w, &env_stacks, &err);
			if (rc < 0) {
				log_warn("sink %s: %s", s->name, err.msg);
				ADD(profiles_failed, 1);
			} else {
				ADD(profiles_written, (uint64_t)rc);
			}
			/* Off-CPU profiles are counted where they are built; with
			 * no other sink, none were. */
			for (size_t j = 0; rc > 0 && !built_any && j < w->n; j++)
				if (proc_has_kind(&w->procs[j], AGENT_PROFILE_OFFCPU))
					ADD(offcpu_profiles, 1);
			continue;
		}
		rc = s->write_window(s, profs[v], nout[v], &err);
		if (rc < 0) {
			log_warn("sink %s: %s", s->name, err.msg);
			ADD(profiles_failed, nout[v]);
		} else {
			ADD(profiles_written, (uint64_t)rc);
			if ((size_t)rc < nout[v]) {
				log_warn("sink %s: %zu of %zu profiles not written: %s", s->name,
					 nout[v] - (size_t)rc, nout[v], err.msg);
				ADD(profiles_failed, nout[v] - (size_t)rc);
			}
		}
	}
	a->cpu_sinks_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID) - a->cpu_build_ns;
out:
	for (int v = 0; v < SINK_SHAPES; v++) {
		size_t n = v == SINK_WINDOW ? PROFILE_KINDS : nslots;

		for (size_t i = 0; bufs[v] && i < n; i++)
			buf_free(&bufs[v][i]);
		free(bufs[v]);
		free(profs[v]);
	}
	free(labels);
	for (size_t i = 0; execs && i < nslots; i++)
		agent_exec_infos_free(&execs[i]);
	free(execs);
}

static void window_finish(struct agent *a, struct window *w)
{
	uint64_t t0 = (uint64_t)clock_read_ns(CLOCK_MONOTONIC),
		 c0 = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID), dt;

	a->cpu_build_ns = a->cpu_sinks_ns = 0;
	update_kernel_stats(a);
	window_name_kernel_frames(a, w);
	perfmap_window_prepare(a->perfmaps, w, a->now_ns);
	window_emit(a, w);
	/* CPU: between windows (reading rings and /proc), profiles (kernel
	 * names, build, gzip), sinks (files, or packing for the push). */
	log_debug("window: %llu samples from %zu processes; CPU ms: between %.2f, profiles %.2f, "
		  "sinks %.2f",
		  (unsigned long long)w->samples, w->n, (double)(c0 - a->cpu_mark_ns) / 1e6,
		  (double)(a->cpu_build_ns ? a->cpu_build_ns - c0 : 0) / 1e6,
		  (double)a->cpu_sinks_ns / 1e6);
	window_free(w);
	/* Exits normally remove entries; this is the safety net for exit
	 * events lost to a full ring. Re-reading a live process is cheap but
	 * not free, so the horizon is long. */
	if (a->now_ns > PROC_EXPIRY_NS)
		proc_cache_expire(a->procs, a->now_ns - PROC_EXPIRY_NS);
	/* An exited process's entry serves its last samples (taken while the
	 * kernel tore it down, or still queued) for a while; a pid reused
	 * within that time starts with a fork, which is rare so soon. */
	if (a->now_ns > PROC_EXIT_LINGER_NS)
		proc_cache_reap_exited(a->procs, a->now_ns - PROC_EXIT_LINGER_NS);
	proc_cache_expire_notes(a->procs, a->now_ns);
	if (a->python && a->now_ns > PROC_EXIT_LINGER_NS)
		python_reap_names(a->python, a->now_ns - PROC_EXIT_LINGER_NS);
	SET(processes_tracked, proc_cache_count(a->procs));
	a->cpu_mark_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
	dt = (uint64_t)clock_read_ns(CLOCK_MONOTONIC) - t0;
	SET(window_read_ns_last, dt);
	ADD(window_read_ns_total, dt);
	ADD(windows, 1);
}

static struct window *window_after(struct agent *a, const struct window *w)
{
	uint64_t start = w->end_mono_ns;

	return window_new(start, start + a->cfg->duration_ns, (int64_t)start + a->wall_minus_mono);
}

int agent_preflight(struct kiln_error *err)
{
	if (agent_check_privileges(err) != 0)
		return -1;
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		return kiln_error_set(
		    err, ENOENT,
		    "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): "
		    "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y");
	if (access("/proc/sys/kernel/perf_event_paranoid", F_OK) != 0)
		return kiln_error_set(err, ENOENT,
				      "perf events are disabled (no "
				      "/proc/sys/kernel/perf_event_paranoid): use a kernel built "
				      "with CONFIG_PERF_EVENTS=y");
	return 0;
}

int agent_run(const struct agent_config *cfg, struct agent_metrics *metrics,
	      volatile sig_atomic_t *stop, struct kiln_error *err)
{
	struct agent a = {.cfg = cfg, .m = metrics};
	struct kiln_error kerr = {0};
	struct utsname un;
	uint64_t last_wake = 0;
	int rc;

	buf_init(&a.gz_scratch);
	a.procs = proc_cache_new(cfg->proc_root);
	a.gz = libdeflate_alloc_compressor(1);
	a.gz_store = libdeflate_alloc_compressor(0);
	a.builder = pprof_builder_new_sized(64);
	if (cfg->perf_map_max_bytes)
		a.perfmaps =
		    perfmap_registry_new(cfg->proc_root, cfg->perf_map_max_bytes, &a.m->perfmap);
	if (!a.procs || !a.gz || !a.gz_store || !a.builder ||
	    (cfg->perf_map_max_bytes && !a.perfmaps)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	uname(&un);
	rc = labels_copy(&a.host_labels, &cfg->external);
	if (!rc)
		rc = labels_set(&a.host_labels, "node", cfg->node);
	if (!rc)
		rc = labels_set(&a.host_labels, "kernel_release", un.release);
	if (rc) {
		kiln_error_set(err, -rc, "out of memory");
		goto out;
	}
	a.now_ns = (uint64_t)clock_read_ns(CLOCK_MONOTONIC);
	a.wall_minus_mono = (int64_t)(uint64_t)clock_read_ns(CLOCK_REALTIME) - (int64_t)a.now_ns;
	a.cur = window_new(a.now_ns, a.now_ns + cfg->duration_ns,
			   (int64_t)a.now_ns + a.wall_minus_mono);
	a.next = a.cur ? window_after(&a, a.cur) : NULL;
	if (!a.next) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	{
		struct sampler_offcpu offcpu = {.threshold_ns = cfg->offcpu_threshold_ns,
						.probability = cfg->offcpu_probability};

		rc = sampler_open_ex(
		    cfg->frequency_hz, cfg->ringbuf_bytes,
		    (uint32_t)(cfg->unwind_table_bytes / sizeof(struct unwind_row)),
		    cfg->offcpu_threshold_ns ? &offcpu : NULL, on_record, &a, &a.sampler, err);
		if (rc)
			goto out;
		if (sampler_offcpu_active(a.sampler)) {
			atomic_store(&a.m->offcpu_enabled, 1);
			log_info("off-CPU: waits of %.3f ms or more, %g of switch-outs sampled",
				 (double)cfg->offcpu_threshold_ns / 1e6, cfg->offcpu_probability);
		}
	}
	{
		struct sampler_unwind_maps um;

		if (sampler_unwind_maps(a.sampler, &um)) {
			a.unwinder = unwinder_new(&um, cfg->debug_dir, a.m);
			if (cfg->python_frames && a.unwinder)
				a.python = python_new(sampler_python_map_fd(a.sampler), a.m);
			if (a.python)
				python_scan(a.python, cfg->proc_root);
			if (!a.unwinder || (cfg->python_frames && !a.python)) {
				rc = kiln_error_set(err, ENOMEM, "out of memory");
				goto out;
			}
		}
	}
	if (mmap_watch_open(&a.mmaps, &kerr) == 0)
		sampler_set_before_consume(a.sampler, drain_mmap_records, &a);
	else
		log_warn("%s", kerr.msg);
	/* Kernel frames are named per address by the kernel itself; a kernel
	 * too old for that gets the whole /proc/kallsyms table instead. */
	a.ksyms = ksym_cache_new(symbolize_batch, a.sampler);
	a.ksyms_cleared_ns = a.now_ns;
	if (a.ksyms && !sampler_can_symbolize(a.sampler)) {
		struct kallsyms *table = NULL;

		if (kallsyms_load("/proc/kallsyms", &table, &kerr) == 0) {
			ksym_cache_set_table(a.ksyms, table);
		} else {
			log_warn("kernel frames stay unsymbolized: %s", kerr.msg);
			ksym_cache_free(a.ksyms);
			a.ksyms = NULL;
		}
	}
	a.cpu_mark_ns = (uint64_t)clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
	log_debug("start-up: %.2f ms of CPU", (double)a.cpu_mark_ns / 1e6);
	log_info("profiling every CPU at %u Hz, %.1fs windows", cfg->frequency_hz,
		 (double)cfg->duration_ns / 1e9);

	while (!*stop) {
		uint64_t due = a.cur->end_mono_ns + GRACE_NS, wait_ns;

		if (a.now_ns - last_wake < MIN_WAKE_NS && a.now_ns < due) {
			wait_ns = MIN_WAKE_NS - (a.now_ns - last_wake);
			sleep_ns(wait_ns < due - a.now_ns ? wait_ns : due - a.now_ns);
			a.now_ns = (uint64_t)clock_read_ns(CLOCK_MONOTONIC);
		}
		wait_ns = due > a.now_ns ? due - a.now_ns : 0;
		rc = sampler_poll(a.sampler, wait_ns > MAX_WAIT_MS * 1000000ull
						 ? MAX_WAIT_MS
						 : (int)((wait_ns + 999999) / 1000000));
		a.now_ns = last_wake = (uint64_t)clock_read_ns(CLOCK_MONOTONIC);
		if (rc < 0 && rc != -EINTR) {
			kiln_error_set(err, -rc, "polling the ring buffer: %s", strerror(-rc));
			goto out;
		}
		if (a.unwinder)
			unwind_after_drain(&a);
		if (a.now_ns < due)
			continue;
		sampler_drain(a.sampler);
		if (a.unwinder)
			unwind_after_drain(&a);
		window_finish(&a, a.cur);
		a.cur = a.next;
		a.next = window_after(&a, a.cur);
		if (!a.next) {
			rc = kiln_error_set(err, ENOMEM, "out of memory");
			goto out;
		}
	}
	/* Stopping: the partial window ends now. Detach first so that the
	 * drain sees every sample the kernel counted. */
	a.now_ns = (uint64_t)clock_read_ns(CLOCK_MONOTONIC);
	sampler_stop(a.sampler);
	sampler_drain(a.sampler);
	if (a.unwinder)
		unwind_after_drain(&a);
	if (a.now_ns < a.cur->end_mono_ns)
		a.cur->end_mono_ns = a.now_ns;
	window_finish(&a, a.cur);
	a.cur = NULL;
	if (a.next->samples || a.next->offcpu_samples) {
		a.next->end_mono_ns =
		    a.now_ns > a.next->start_mono_ns ? a.now_ns : a.next->start_mono_ns + 1;
		window_finish(&a, a.next);
		a.next = NULL;
	}
	log_info("stopped: %llu samples received, %llu taken in the kernel, %llu lost "
		 "(ring buffer full), %llu profiles written",
		 (unsigned long long)atomic_load(&a.m->samples),
		 (unsigned long long)atomic_load(&a.m->kernel_samples),
		 (unsigned long long)atomic_load(&a.m->drops_ringbuf),
		 (unsigned long long)atomic_load(&a.m->profiles_written));
	if (atomic_load(&a.m->offcpu_enabled))
		log_info("stopped: %llu off-CPU samples received, %llu switch-outs timed of %llu",
			 (unsigned long long)atomic_load(&a.m->offcpu_samples),
			 (unsigned long long)atomic_load(&a.m->offcpu_recorded),
			 (unsigned long long)atomic_load(&a.m->offcpu_switches));
	rc = 0;
out:
	for (size_t i = 0; i < a.nheld; i++)
		free(a.held[i]);
	free(a.held);
	unwinder_free(a.unwinder);
	python_free(a.python);
	free(a.unwind_queue);
	sampler_close(a.sampler);
	mmap_watch_close(a.mmaps);
	window_free(a.cur);
	window_free(a.next);
	proc_cache_free(a.procs);
	/* After the cache: its entries give their perf maps' bytes back. */
	perfmap_registry_free(a.perfmaps);
	if (a.gz)
		libdeflate_free_compressor(a.gz);
	if (a.gz_store)
		libdeflate_free_compressor(a.gz_store);
	buf_free(&a.gz_scratch);
	pprof_builder_free(a.builder);
	ksym_cache_free(a.ksyms);
	labels_free(&a.host_labels);
	return rc;
}
