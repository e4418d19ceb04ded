/*
 * worker.h — one long-lived thread that runs one job at a time and can be
 * kept warm between jobs.
 *
 * Why not a thread per job: in a VM a vCPU left idle is soon descheduled
 * by the host, and a thread started on it can begin milliseconds late —
 * as long as the work (a symbolizer batch) it was started for. A worker that has just finished a job can spin for a while
 * (the job says how long) so that the next one, known to follow shortly
 * (a batch after the inflating of its file), starts at once; otherwise it
 * sleeps on a condition variable and costs nothing.
 *
 * Contract: one owner submits jobs (worker_run) and waits for them
 * (worker_wait), from one thread at a time; the job runs on the worker's
 * thread. worker_free waits for the job in flight, stops the thread and
 * frees the worker.
 */
#ifndef KILN_COMMON_WORKER_H
#define KILN_COMMON_WORKER_H

#include <stdbool.h>

struct worker;

/* A pause in a spin-wait loop (x86 PAUSE: lets the sibling hyperthread
 * run, and saves power). */
static inline void worker_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* A worker with its thread started; NULL when the thread cannot be had. */
struct worker *worker_new(void);

/* Hands fn(arg) to w, which must be idle (every earlier job waited for).
 * Once fn returns, the thread spins for about spin_after_us microseconds
 * for the next job before it sleeps (0: sleeps at once). */
void worker_run(struct worker *w, void (*fn)(void *arg), void *arg, unsigned spin_after_us);

/* Called by a job of w, on w's thread: how long to spin once it returns,
 * instead of what worker_run said (the job knows better, e.g. that nothing
 * follows it after all). */
void worker_spin_after(struct worker *w, unsigned us);

/* Waits until the job handed last has returned. */
void worker_wait(struct worker *w);

/* Waits for the job in flight, stops the thread, frees w (NULL: nothing). */
void worker_free(struct worker *w);

#endif
