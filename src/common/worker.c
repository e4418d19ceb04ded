/*
 * worker.c — see worker.h.
 *
 * Jobs are counted: posted (by worker_run) and done (by the thread). The
 * thread waits for posted to move, the owner for done to catch up; each
 * side spins on the atomic counter first when it has reason to expect the
 * other soon, then sleeps on its condition variable.
 */
#include "common/clock.h"
#include "common/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t posted_cond; /* the thread sleeps on it */
	pthread_cond_t done_cond;   /* the owner sleeps on it */
	atomic_uint posted;
	atomic_uint done;
	atomic_bool stop;
	/* The job: written by the owner before posted moves, read by the
	 * thread after it sees it move. */
	void (*fn)(void *arg);
	void *arg;
	unsigned spin_after_us;
};

/* Waits for a job other than taken (or stop), spinning until deadline
 * (in now_us time) first; returns false to stop. */
static bool wait_for_job(struct worker *w, unsigned taken, uint64_t deadline)
{
	for (unsigned i = 1; atomic_load(&w->posted) == taken && !atomic_load(&w->stop); i++) {
		if (i % 64 || (uint64_t)mono_us() < deadline) {
			worker_pause();
			continue;
		}
		pthread_mutex_lock(&w->lock);
		while (atomic_load(&w->posted) == taken && !atomic_load(&w->stop))
			pthread_cond_wait(&w->posted_cond, &w->lock);
		pthread_mutex_unlock(&w->lock);
	}
	return atomic_load(&w->posted) != taken;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned taken = 0;
	uint64_t deadline = 0;

	while (wait_for_job(w, taken, deadline)) {
		taken = atomic_load(&w->posted);
		w->fn(w->arg);
		deadline = w->spin_after_us ? (uint64_t)mono_us() + w->spin_after_us : 0;
		pthread_mutex_lock(&w->lock);
		atomic_store(&w->done, taken);
		pthread_cond_broadcast(&w->done_cond);
		pthread_mutex_unlock(&w->lock);
	}
	return NULL;
}

struct worker *worker_new(void)
{
	struct worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->posted_cond, NULL);
	pthread_cond_init(&w->done_cond, NULL);
	atomic_init(&w->posted, 0);
	atomic_init(&w->done, 0);
	atomic_init(&w->stop, false);
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
		pthread_cond_destroy(&w->done_cond);
		pthread_cond_destroy(&w->posted_cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return NULL;
	}
	return w;
}

void worker_run(struct worker *w, void (*fn)(void *arg), void *arg, unsigned spin_after_us)
{
	w->fn = fn;
	w->arg = arg;
	w->spin_after_us = spin_after_us;
	pthread_mutex_lock(&w->lock);
	atomic_fetch_add(&w->posted, 1);
	pthread_cond_signal(&w->posted_cond);
	pthread_mutex_unlock(&w->lock);
}

void worker_spin_after(struct worker *w, unsigned us)
{
	w->spin_after_us = us; /* (read by this thread once the job returns) */
}

void worker_wait(struct worker *w)
{
	unsigned want = atomic_load(&w->posted);

	if (atomic_load(&w->done) == want)
		return;
	pthread_mutex_lock(&w->lock);
	while (atomic_load(&w->done) != want)
		pthread_cond_wait(&w->done_cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	worker_wait(w);
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->stop, true);
	pthread_cond_signal(&w->posted_cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->done_cond);
	pthread_cond_destroy(&w->posted_cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
