/*
 * pool.c — a fixed set of worker threads draining one FIFO of jobs.
 *
 * The server runs two: ingestion and queries. Keeping them apart is what
 * stops a 2-second merge from delaying an agent's WriteRaw: the two never
 * wait for each other's threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/internal.h"

struct job {
	void (*fn)(void *arg);
	void *arg;
	struct job *next;
};

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	bool closing;
	int nthreads;
	pthread_t threads[];
};

static void *pool_worker(void *arg)
{
	struct pool *p = arg;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		while (!p->head && !p->closing)
			pthread_cond_wait(&p->cond, &p->lock);
		struct job *j = p->head;
		if (!j) { /* closing and drained */
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		j->fn(j->arg);
		free(j);
	}
}

struct pool *pool_new(const char *name, int nthreads)
{
	if (nthreads < 1)
		nthreads = 1;
	struct pool *p = calloc(1, sizeof(*p) + (size_t)nthreads * sizeof(pthread_t));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (int i = 0; i < nthreads; i++) {
		int rc = pthread_create(&p->threads[i], NULL, pool_worker, p);
		if (rc) {
			log_error("pool %s: pthread_create: %s", name, strerror(rc));
			break;
		}
		p->nthreads++;
	}
	if (p->nthreads == 0) {
		free(p);
		return NULL;
	}
	return p;
}

void pool_submit(struct pool *p, void (*fn)(void *arg), void *arg)
{
	struct job *j = malloc(sizeof(*j));
	if (!j) { /* out of memory: run inline rather than drop the request */
		fn(arg);
		return;
	}
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->closing = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
