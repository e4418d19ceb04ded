/*
 * window.c — per-process aggregation of the samples of one window.
 *
 * Records arrive from the ring buffer one by one; each is counted under
 * (process entry, thread, thread name, frames). Processes are keyed by
 * their proc_info entry rather than the pid, so an exec in the middle of a
 * window yields two profiles (old image, new image) instead of one mixed
 * one. The window holds a reference on every entry it counts for, so the
 * process cache cannot free one before the window is turned into profiles.
 *
 * Off-CPU samples go to a table of their own per process, so that a stack
 * a thread both ran and blocked in is two stacks, one per profile; their
 * value is a (count, nanoseconds) pair, kept in an array the table
 * indexes, since a table value is one number.
 */
#include "agent/agent.h"
#include "common/htab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct window *window_new(uint64_t start_mono_ns, uint64_t end_mono_ns, int64_t start_wall_ns)
{
	struct window *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->start_mono_ns = start_mono_ns;
	w->end_mono_ns = end_mono_ns;
	w->start_wall_ns = start_wall_ns;
	w->index = htab_new(64);
	if (!w->index) {
		free(w);
		return NULL;
	}
	return w;
}

static struct window_proc *window_proc_get(struct window *w, struct proc_info *p)
{
	struct window_proc *wp;
	uint64_t idx;

	if (htab_get(w->index, &p, sizeof(p), &idx))
		return &w->procs[idx - 1];
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct window_proc *nv = realloc(w->procs, cap * sizeof(*nv));

		if (!nv)
			return NULL;
		w->procs = nv;
		w->cap = cap;
	}
	wp = &w->procs[w->n];
	memset(wp, 0, sizeof(*wp));
	wp->stacks = htab_new(16);
	if (!wp->stacks)
		return NULL;
	if (htab_put(w->index, &p, sizeof(p), w->n + 1) != 0) {
		htab_free(wp->stacks);
		return NULL;
	}
	wp->info = p;
	proc_info_hold(p);
	w->n++;
	return wp;
}

/* Adds one off-CPU sample under key (len bytes) in wp. 0 or -ENOMEM. */
static int offcpu_add(struct window_proc *wp, const void *key, size_t len, uint64_t ns)
{
	uint64_t idx = wp->n_offcpu;
	int rc;

	if (!wp->offcpu && !(wp->offcpu = htab_new(16)))
		return -ENOMEM;
	if (wp->n_offcpu == wp->cap_offcpu) {
		size_t cap = wp->cap_offcpu ? wp->cap_offcpu * 2 : 16;
		struct window_offcpu_total *nv = realloc(wp->offcpu_totals, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		wp->offcpu_totals = nv;
		wp->cap_offcpu = cap;
	}
	rc = htab_intern(wp->offcpu, key, len, &idx);
	if (rc < 0)
		return rc;
	if (rc == 0)
		wp->offcpu_totals[wp->n_offcpu++] = (struct window_offcpu_total){0};
	wp->offcpu_totals[idx].count++;
	wp->offcpu_totals[idx].ns += ns;
	return 0;
}

int window_add(struct window *w, struct proc_info *p, const struct sample_event *e)
{
	unsigned char key[sizeof(struct window_stack_key) + 8 * PROFILER_MAX_FRAMES];
	struct window_stack_key *k = (struct window_stack_key *)key;
	size_t nf = (size_t)e->n_kernel + e->n_user, len;
	struct window_proc *wp = window_proc_get(w, p);
	uint64_t *count, one = 1;
	int rc;

	if (!wp)
		return -ENOMEM;
	if (nf > PROFILER_MAX_FRAMES)
		return -EINVAL;
	memset(k, 0, sizeof(*k));
	k->tid = e->tid;
	k->n_kernel = e->n_kernel;
	k->n_user = e->n_user;
	memcpy(k->thread_comm, e->thread_comm, sizeof(k->thread_comm));
	k->thread_comm[sizeof(k->thread_comm) - 1] = '\0';
	memcpy(key + sizeof(*k), e->frames, nf * 8);
	len = sizeof(*k) + nf * 8;
	if (e->kind == PROFILER_EVENT_OFFCPU) {
		rc = offcpu_add(wp, key, len, e->off_cpu_ns);
		if (rc)
			return rc;
		wp->offcpu_samples++;
		w->offcpu_samples++;
		return 0;
	}
	rc = htab_intern(wp->stacks, key, len, &one);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		count = htab_lookup(wp->stacks, key, len);
		(*count)++;
	}
	wp->samples++;
	w->samples++;
	return 0;
}

void window_free(struct window *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++) {
		htab_free(w->procs[i].stacks);
		htab_free(w->procs[i].offcpu);
		free(w->procs[i].offcpu_totals);
		proc_info_release(w->procs[i].info);
	}
	free(w->procs);
	htab_free(w->index);
	free(w);
}
