/*
 * manager_ingest.c — the ingest threads of the scrape manager: the
 * scheduler hands decoded profiles over in batches (enqueue, flush_batch)
 * through a bounded queue, and INGEST_THREADS threads call the user's
 * ingest callback, so that the store's group commit shares one fsync among
 * them and a slow fsync never delays a scrape. A full queue makes the
 * scheduler wait (backpressure) rather than drop data.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/gzip.h"
#include "common/log.h"
#include "scrape/manager_internal.h"

/* ---- ingest threads -------------------------------------------------------- */

static void item_free(struct ingest_item *it)
{
	pprof_profile_free(it->profile);
	free(it);
}

/* Calls the callback for each item of a batch, then does the bookkeeping
 * for all of them under one lock and frees them. The callback's CPU is read
 * between consecutive callbacks: n + 1 clock reads for n items. */
static void ingest_batch(struct scrape_manager *m, struct ingest_item *list)
{
	uint64_t t = (uint64_t)thread_cpu_ns();
	for (struct ingest_item *it = list; it; it = it->next) {
		struct kiln_error err = {0};
		it->rc = m->opts.ingest
			     ? m->opts.ingest(m->opts.ingest_ctx, it->labels.v, it->labels.n,
					      it->profile, it->timestamp_ms, it->delta, &err)
			     : 0;
		uint64_t now = (uint64_t)thread_cpu_ns();
		uint64_t cb_ns = now - t;
		/* Counted at once, not with the batch's other stats: a
		 * snapshot taken mid-batch then sees the callback time that
		 * its thread clock includes. */
		atomic_fetch_add_explicit(&m->callback_cpu_ns, cb_ns, memory_order_relaxed);
		it->lag_ns = mono_ns() - it->done_ns;
		t = now;
		if (it->rc < 0) {
			struct buf b;
			buf_init(&b);
			scrape_labels_format(&it->labels, &b);
			buf_terminate(&b);
			log_warn("scrape: ingest of %s failed: %s", b.data ? (char *)b.data : "",
				 err.msg[0] ? err.msg : strerror(-it->rc));
			buf_free(&b);
			t = (uint64_t)thread_cpu_ns();
		}
	}
	pthread_mutex_lock(&m->status_lock);
	for (struct ingest_item *it = list; it; it = it->next) {
		if (it->rc < 0)
			m->stats.ingest_errors++;
		else
			m->stats.profiles_ingested++;
		m->stats.ingest_lag_ns_total += (uint64_t)it->lag_ns;
		if ((uint64_t)it->lag_ns > m->stats.ingest_lag_ns_max)
			m->stats.ingest_lag_ns_max = (uint64_t)it->lag_ns;
	}
	pthread_mutex_unlock(&m->status_lock);
	while (list) {
		struct ingest_item *it = list;
		list = it->next;
		item_free(it);
	}
}

/* Several ingest threads call the callback concurrently: the store's
 * group commit then shares one fsync among their writes (one thread wrote
 * one profile per fsync, ~200 a second on a slow disk, fewer than 1,000
 * targets produce, and the queue grew until backpressure). Each takes up
 * to INGEST_TAKE profiles per lock round and leaves the rest to the
 * others. Profiles of one series are 10 s apart: two in flight at once
 * means a backlog, and the store takes writes in any order. */
void *mgr_ingest_main(void *arg)
{
	struct scrape_manager *m = arg;
	for (;;) {
		pthread_mutex_lock(&m->queue_lock);
		while (!m->head && !m->scheduler_done)
			pthread_cond_wait(&m->queue_cond, &m->queue_lock);
		struct ingest_item *list = m->head, *last = list;
		if (!list) {
			pthread_mutex_unlock(&m->queue_lock);
			break; /* stopped and drained */
		}
		size_t k = 1;
		while (k < INGEST_TAKE && last->next)
			last = last->next, k++;
		m->head = last->next;
		if (!m->head)
			m->tail = NULL;
		last->next = NULL;
		m->queued -= k;
		pthread_cond_signal(&m->space_cond);
		if (m->head) /* the rest for another thread */
			pthread_cond_signal(&m->queue_cond);
		pthread_mutex_unlock(&m->queue_lock);
		ingest_batch(m, list);
	}
	return NULL;
}

/* Hands the batch to the ingest threads; waits while the queue is full. */
void mgr_flush_batch(struct scrape_manager *m)
{
	if (!m->batch_head)
		return;
	pthread_mutex_lock(&m->queue_lock);
	while (m->queued >= m->opts.ingest_queue && !atomic_load(&m->stop))
		pthread_cond_wait(&m->space_cond, &m->queue_lock);
	if (m->tail)
		m->tail->next = m->batch_head;
	else
		m->head = m->batch_head;
	m->tail = m->batch_tail;
	m->queued += m->batch_n;
	pthread_cond_signal(&m->queue_cond);
	pthread_mutex_unlock(&m->queue_lock);
	m->batch_head = m->batch_tail = NULL;
	m->batch_n = 0;
}

/* Queues p (ownership passes) for the callback, in the current batch. */
int mgr_enqueue(struct scrape_manager *m, const struct scrape_unit *u, struct pprof_profile *p,
		int64_t ts_ms, bool delta, int64_t done_ns)
{
	/* One allocation: the item, then its label array, then the strings
	 * (the unit's labels may go away with a reload while it waits). */
	struct ingest_item *it;
	size_t bytes = sizeof(*it) + u->labels.n * sizeof(struct label);
	for (size_t i = 0; i < u->labels.n; i++)
		bytes += strlen(u->labels.v[i].name) + strlen(u->labels.v[i].value) + 2;
	it = malloc(bytes);
	if (!it) {
		pprof_profile_free(p);
		return -ENOMEM;
	}
	memset(it, 0, sizeof(*it));
	it->labels.v = (struct label *)(it + 1);
	it->labels.n = u->labels.n;
	char *str = (char *)(it->labels.v + u->labels.n);
	for (size_t i = 0; i < u->labels.n; i++) {
		size_t nl = strlen(u->labels.v[i].name) + 1, vl = strlen(u->labels.v[i].value) + 1;
		it->labels.v[i].name = memcpy(str, u->labels.v[i].name, nl);
		it->labels.v[i].value = memcpy(str + nl, u->labels.v[i].value, vl);
		str += nl + vl;
	}
	it->profile = p;
	it->timestamp_ms = ts_ms;
	it->delta = delta;
	it->done_ns = done_ns;
	if (m->batch_tail)
		m->batch_tail->next = it;
	else
		m->batch_head = it, m->batch_due_ns = done_ns + BATCH_NS;
	m->batch_tail = it;
	if (++m->batch_n >= BATCH_MAX)
		mgr_flush_batch(m);
	return 0;
}
