/*
 * manager.c — the scrape scheduler and the ingest threads.
 *
 * Scheduler thread: every active unit sits in a min-heap by next due time
 * (monotonic ms). The first due time is the unit's stable offset within its
 * interval (hash of its key mod interval, as Parca does), so 1,000 targets
 * spread evenly instead of firing together, and the same target keeps the
 * same phase across restarts of the schedule. Later due times step by the
 * interval on that grid, so there is no drift. A unit that comes due while
 * its previous scrape is still running (a CPU profile takes the whole
 * interval) is started again as soon as that one ends, like a Go ticker with
 * one buffered tick. Transfers are driven by events on one epoll set:
 * plain http:// targets with an address go through http.c (Kiln's own
 * HTTP/1.1 client: one send and one recv per scrape on a kept connection);
 * the rest through libcurl (curl_multi_socket_action, its socket callback
 * maintaining its sockets in the set): a readable socket runs only its own
 * transfer, where curl_multi_perform would run — and poll(2) — every
 * transfer in flight.
 * The thread sleeps in epoll_wait until the next due time, libcurl's timer,
 * a socket event, a batch of profiles to hand over or a wakeup (reload,
 * stop: an eventfd), but while busy no more often than once per TICK_NS
 * (20 ms): it then takes all the events of the tick at once. Each blocking
 * wait costs two context switches, expensive in a VM; at 200 scrapes/s
 * that was ~600 of them a second, for a latency nobody needs at 10 s
 * intervals. Idle connections stay in libcurl's cache, one per target, and
 * are reused (keep-alive).
 *
 * Shards: the targets are spread (by host:port) over several multi handles,
 * one per SHARD_UNITS active units (~8 targets of two kinds each: their
 * kept-alive connections), because libcurl (7.88) walks the whole
 * connection cache of a multi handle each time a transfer is removed from
 * it (curl_multi_remove_handle marks "connect-only" connections for
 * closing): with one multi handle and 1,000 kept-alive targets that was a
 * walk of 1,000 connections per scrape.
 *
 * A finished transfer is checked (HTTP status, size limit, timeout), decoded
 * with the pprof library (gzip or plain), turned into deltas where the kind
 * needs it (delta.c) and queued for the ingest threads, which call the
 * user's callback. Profiles are handed over in batches (up to BATCH_MAX, or
 * after BATCH_NS at the latest): waking the ingest thread once per scrape
 * cost two futex calls and two context switches each. The queue is bounded;
 * when it is full the scheduler waits (backpressure) rather than dropping
 * data.
 *
 * Files: this one is the heap, the scheduler loop, reload and the public
 * API; manager_scrape.c one scrape, manager_curl.c libcurl and the shards,
 * manager_ingest.c the ingest threads (manager_internal.h: what they share).
 *
 * Reload: scrape_manager_apply builds the new units on the caller's thread
 * and parks them; the scheduler swaps them in between two poll rounds. A
 * unit whose key (job, URL, labels) exists in both keeps the old object —
 * with its in-flight transfer, delta baseline and health — and takes the new
 * settings.
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
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include "common/clock.h"
#include "common/gzip.h"
#include "common/htab.h"
#include "common/log.h"
#include "scrape/manager_internal.h"

static uint64_t thread_clock_ns(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
		return 0;
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void curl_global_init_void(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

const char *scrape_health_name(enum scrape_health h)
{
	return h == SCRAPE_HEALTH_UP ? "up" : h == SCRAPE_HEALTH_DOWN ? "down" : "unknown";
}

/* ---- heap ------------------------------------------------------------------ */

static void heap_swap(struct scrape_manager *m, size_t a, size_t b)
{
	struct scrape_unit *t = m->heap[a];
	m->heap[a] = m->heap[b];
	m->heap[b] = t;
	m->heap[a]->heap_pos = a;
	m->heap[b]->heap_pos = b;
}

static void heap_down(struct scrape_manager *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		if (l < m->heap_len && m->heap[l]->next_due_ms < m->heap[s]->next_due_ms)
			s = l;
		if (r < m->heap_len && m->heap[r]->next_due_ms < m->heap[s]->next_due_ms)
			s = r;
		if (s == i)
			return;
		heap_swap(m, i, s);
		i = s;
	}
}

static void heap_build(struct scrape_manager *m)
{
	m->heap_len = 0;
	for (size_t i = 0; i < m->n_units; i++) {
		if (!m->units[i]->active)
			continue;
		m->units[i]->heap_pos = m->heap_len;
		m->heap[m->heap_len++] = m->units[i];
	}
	for (size_t i = m->heap_len / 2; i-- > 0;)
		heap_down(m, i);
}

/* The first due time: the unit's stable phase within its interval. */
static void schedule_first(struct scrape_unit *u, int64_t now)
{
	uint64_t off = htab_hash(u->key, strlen(u->key)) % (uint64_t)u->interval_ms;
	int64_t due = now - now % u->interval_ms + (int64_t)off;
	if (due < now)
		due += u->interval_ms;
	u->next_due_ms = due;
}

/* ---- reload swap ------------------------------------------------------------ */

/* How many idle connections the multi handle keeps for reuse: one per
 * active unit, so that every target is scraped over a kept-alive connection
 * (libcurl's default keeps 4 per transfer in flight; with 1,000 targets
 * each scrape then opened a new connection and evicting the oldest walked
 * the whole cache). Bounded by half the descriptor limit, leaving the rest
 * to the server. */
size_t mgr_max_connections(size_t active_units)
{
	struct rlimit rl;
	size_t cap = 512;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		cap = rl.rlim_cur / 2;
	else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		cap = 65536;
	size_t n = active_units + 8;
	return n < cap ? n : cap < 16 ? 16 : cap;
}

void mgr_add_shards(struct scrape_manager *m, size_t active);

static void swap_in(struct scrape_manager *m, struct scrape_config *cfg, struct scrape_unit **units,
		    size_t n)
{
	struct htab *old = htab_new(m->n_units);
	int64_t now = mono_ms();

	for (size_t i = 0; old && i < m->n_units; i++)
		htab_put(old, m->units[i]->key, strlen(m->units[i]->key), i);
	pthread_mutex_lock(&m->status_lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t idx;
		struct scrape_unit *nu = units[i];
		if (old && htab_get(old, nu->key, strlen(nu->key), &idx) && m->units[idx]) {
			/* Same target: keep the old object and its state. */
			struct scrape_unit *ou = m->units[idx];
			m->units[idx] = NULL;
			ou->ep = nu->ep;
			ou->kind = nu->kind;
			if (ou->interval_ms != nu->interval_ms) {
				ou->interval_ms = nu->interval_ms;
				schedule_first(ou, now);
			}
			ou->timeout_ms = nu->timeout_ms;
			scrape_labels_free(&ou->discovered);
			ou->discovered = nu->discovered;
			nu->discovered = (struct scrape_labels){0};
			scrape_unit_free(nu);
			units[i] = ou;
		} else if (nu->active) {
			schedule_first(nu, now);
		}
	}
	for (size_t i = 0; i < m->n_units; i++) {
		struct scrape_unit *u = m->units[i];
		if (!u)
			continue;
		if (u->in_flight && !u->ht)
			curl_multi_remove_handle(u->multi, u->easy);
		http_forget(&m->http, u);
		scrape_unit_free(u);
	}
	free(m->units);
	scrape_config_free(m->cfg);
	m->units = units;
	m->n_units = n;
	m->cfg = cfg;
	m->stats.active_units = 0;
	for (size_t i = 0; i < n; i++)
		m->stats.active_units += units[i]->active;
	size_t active = m->stats.active_units;
	pthread_mutex_unlock(&m->status_lock);
	mgr_add_shards(m, active);
	htab_free(old);
	free(m->heap);
	m->heap = calloc(n + 1, sizeof(*m->heap));
	if (m->heap)
		heap_build(m);
	else
		m->heap_len = 0;
}

/* ---- scheduler thread ------------------------------------------------------- */

static void wake(struct scrape_manager *m)
{
	uint64_t one = 1;
	ssize_t w = write(m->wakefd, &one, sizeof(one));
	(void)w; /* EAGAIN: a wakeup is already pending */
}

static void *scheduler_main(void *arg)
{
	struct scrape_manager *m = arg;
	int64_t last_wake_ns = 0;
	int running;

	while (!atomic_load(&m->stop)) {
		pthread_mutex_lock(&m->pending_lock);
		if (m->has_pending) {
			struct scrape_config *cfg = m->pending_cfg;
			struct scrape_unit **units = m->pending_units;
			size_t n = m->n_pending_units;
			m->has_pending = false;
			m->pending_cfg = NULL;
			m->pending_units = NULL;
			m->n_pending_units = 0;
			pthread_mutex_unlock(&m->pending_lock);
			swap_in(m, cfg, units, n);
		} else {
			pthread_mutex_unlock(&m->pending_lock);
		}

		/* Start what is due. */
		int64_t now = mono_ms();
		while (m->heap_len && m->heap[0]->next_due_ms <= now) {
			struct scrape_unit *u = m->heap[0];
			if (u->in_flight)
				u->pending = true;
			else if (mgr_start_scrape(m, u) < 0)
				log_warn("scrape: cannot start %s", u->url);
			u->next_due_ms += u->interval_ms;
			if (u->next_due_ms <= now) /* fell behind: skip to the grid ahead */
				u->next_due_ms +=
				    (now - u->next_due_ms) / u->interval_ms * u->interval_ms +
				    u->interval_ms;
			heap_down(m, 0);
		}

		/* Sleep until something is due: a unit, a libcurl timer, the
		 * batch hand-over, a socket or a wakeup. */
		int64_t now_ns = mono_ns(), wait = 1000;
		if (m->batch_head && now_ns >= m->batch_due_ns)
			mgr_flush_batch(m);
		if (m->heap_len) {
			int64_t until = m->heap[0]->next_due_ms - now_ns / 1000000;
			wait = until < wait ? until : wait;
		}
		int64_t due = m->batch_head ? m->batch_due_ns : -1;
		int64_t http_due = http_next_deadline(&m->http);
		if (http_due >= 0 && (due < 0 || http_due < due))
			due = http_due;
		for (size_t i = 0; i < m->n_shards; i++)
			if (m->shards[i]->due_ns >= 0 && (due < 0 || m->shards[i]->due_ns < due))
				due = m->shards[i]->due_ns;
		if (due >= 0) {
			int64_t until = (due - now_ns + 999999) / 1000000;
			wait = until < wait ? until : wait;
		}
		if (m->http.done_head) /* failed at start: reap now */
			wait = 0;
		/* Coalesce wakeups: come back no sooner than TICK_NS after the
		 * last one and take every event that arrived meanwhile in one
		 * epoll_wait, instead of blocking (two context switches) for
		 * each response as it arrives. The nap is not cut short for a
		 * unit or timer due within the tick either: it is started at
		 * the tick's end, at most TICK_NS late; 1,000 targets of two
		 * kinds come due every 5 ms, which woke the thread 200 times
		 * a second. */
		if (wait > 0 && now_ns - last_wake_ns < TICK_NS) {
			int64_t nap = last_wake_ns + TICK_NS - now_ns;
			struct timespec ts = {.tv_sec = nap / 1000000000,
					      .tv_nsec = nap % 1000000000};
			nanosleep(&ts, NULL);
			int64_t slept = (mono_ns() - now_ns) / 1000000;
			wait = wait > slept ? wait - slept : 0;
		}
		struct epoll_event ev[256];
		int nev = epoll_wait(m->epfd, ev, 256, wait < 0 ? 0 : (int)wait);
		last_wake_ns = mono_ns();
		for (int i = 0; i < nev; i++) {
			uint32_t si = (uint32_t)(ev[i].data.u64 >> 32);
			if (si == WAKE_TAG) {
				uint64_t v;
				ssize_t r = read(m->wakefd, &v, sizeof(v));
				(void)r; /* EAGAIN: drained already */
				continue;
			}
			if (si == HTTP_TAG) {
				http_on_event(&m->http, (int)(uint32_t)ev[i].data.u64,
					      ev[i].events);
				continue;
			}
			if (si >= m->n_shards)
				continue;
			int what = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
				   (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
				   (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
			curl_multi_socket_action(m->shards[si]->multi,
						 (curl_socket_t)(uint32_t)ev[i].data.u64, what,
						 &running);
			mgr_reap(m, m->shards[si]);
		}
		if (http_due >= 0 && last_wake_ns >= http_due)
			http_check_timeouts(&m->http, last_wake_ns);
		mgr_reap_http(m);
		if (due >= 0) {
			now_ns = last_wake_ns;
			for (size_t i = 0; i < m->n_shards; i++) {
				struct scrape_shard *sh = m->shards[i];
				if (sh->due_ns < 0 || now_ns < sh->due_ns)
					continue;
				sh->due_ns = -1;
				curl_multi_socket_action(sh->multi, CURL_SOCKET_TIMEOUT, 0,
							 &running);
				mgr_reap(m, sh);
			}
		}
	}
	/* Abort what is in flight; units are freed by the caller. */
	for (size_t i = 0; i < m->n_units; i++) {
		struct scrape_unit *u = m->units[i];
		if (u->in_flight && !u->ht)
			curl_multi_remove_handle(u->multi, u->easy);
		http_forget(&m->http, u);
		u->in_flight = false;
	}
	mgr_flush_batch(m);
	return NULL;
}

static void free_shards(struct scrape_manager *m)
{
	for (size_t i = 0; i < m->n_shards; i++)
		mgr_shard_free(m->shards[i]);
	free(m->shards);
	m->shards = NULL;
	m->n_shards = 0;
}

static void close_fds(struct scrape_manager *m)
{
	http_client_release(&m->http); /* its connections are the units' */
	if (m->epfd >= 0)
		close(m->epfd);
	if (m->wakefd >= 0)
		close(m->wakefd);
	m->epfd = m->wakefd = -1;
}

/* ---- public API --------------------------------------------------------------- */

int scrape_manager_new(const struct scrape_manager_options *opts, struct scrape_config *cfg,
		       struct scrape_manager **out, struct kiln_error *err)
{
	static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
	struct scrape_manager *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (!m)
		return kiln_error_set(err, ENOMEM, "out of memory");
	pthread_once(&curl_once, curl_global_init_void);
	m->opts = *opts;
	if (!m->opts.max_body_bytes)
		m->opts.max_body_bytes = 64u << 20;
	if (!m->opts.ingest_queue)
		m->opts.ingest_queue = 4096;
	pthread_mutex_init(&m->status_lock, NULL);
	pthread_mutex_init(&m->pending_lock, NULL);
	pthread_mutex_init(&m->queue_lock, NULL);
	pthread_cond_init(&m->queue_cond, NULL);
	pthread_cond_init(&m->space_cond, NULL);
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event wev = {.events = EPOLLIN, .data.u64 = (uint64_t)WAKE_TAG << 32};
	if (m->epfd < 0 || m->wakefd < 0 ||
	    epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->wakefd, &wev) < 0) {
		rc = kiln_error_set(err, errno, "scrape: epoll/eventfd: %s", strerror(errno));
		close_fds(m);
		free(m);
		return rc;
	}
	if (http_client_init(&m->http, m->epfd, HTTP_TAG) < 0) {
		close_fds(m);
		free(m);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	/* libcurl honors these for http:// URLs; then it does them all. */
	m->http_ok = !getenv("http_proxy") && !getenv("all_proxy") && !getenv("ALL_PROXY");
	/* The first shard now, so that a libcurl without memory is reported
	 * here; the others come with the config (swap_in). */
	mgr_add_shards(m, 0);
	if (!m->n_shards) {
		close_fds(m);
		free(m);
		return kiln_error_set(err, ENOMEM, "curl_multi_init failed");
	}
	if (cfg && (rc = scrape_manager_apply(m, cfg, err)) < 0) {
		free_shards(m);
		close_fds(m);
		free(m);
		return rc;
	}
	for (; m->n_ingesters < INGEST_THREADS; m->n_ingesters++)
		if (pthread_create(&m->ingesters[m->n_ingesters], NULL, mgr_ingest_main, m) != 0)
			break;
	if (m->n_ingesters == 0) {
		rc = kiln_error_set(err, EAGAIN, "cannot start the scrape ingest threads");
		goto fail;
	}
	if (pthread_create(&m->scheduler, NULL, scheduler_main, m) != 0) {
		atomic_store(&m->stop, true);
		pthread_mutex_lock(&m->queue_lock);
		m->scheduler_done = true;
		pthread_cond_broadcast(&m->queue_cond);
		pthread_mutex_unlock(&m->queue_lock);
		for (size_t i = 0; i < m->n_ingesters; i++)
			pthread_join(m->ingesters[i], NULL);
		rc = kiln_error_set(err, EAGAIN, "cannot start the scrape scheduler thread");
		goto fail;
	}
	*out = m;
	return 0;
fail:
	/* cfg is the caller's again on failure. */
	pthread_mutex_lock(&m->pending_lock);
	for (size_t i = 0; i < m->n_pending_units; i++)
		scrape_unit_free(m->pending_units[i]);
	free(m->pending_units);
	pthread_mutex_unlock(&m->pending_lock);
	free_shards(m);
	close_fds(m);
	curl_slist_free_all(m->self_headers);
	free(m);
	return rc;
}

int scrape_manager_apply(struct scrape_manager *m, struct scrape_config *cfg,
			 struct kiln_error *err)
{
	struct scrape_unit **units;
	size_t n;
	int rc = scrape_units_build(cfg, &units, &n, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->pending_lock);
	if (m->has_pending) {
		/* An earlier reload not yet picked up: this one supersedes it. */
		for (size_t i = 0; i < m->n_pending_units; i++)
			scrape_unit_free(m->pending_units[i]);
		free(m->pending_units);
		scrape_config_free(m->pending_cfg);
	}
	m->pending_cfg = cfg;
	m->pending_units = units;
	m->n_pending_units = n;
	m->has_pending = true;
	pthread_mutex_unlock(&m->pending_lock);
	wake(m);
	size_t active = 0;
	for (size_t i = 0; i < n; i++)
		active += units[i]->active;
	log_info("scrape: config %s: %zu jobs, %zu active scrape targets, %zu dropped",
		 cfg->path ? cfg->path : "", cfg->n_jobs, active, n - active);
	return 0;
}

void scrape_manager_free(struct scrape_manager *m)
{
	if (!m)
		return;
	atomic_store(&m->stop, true);
	wake(m);
	pthread_join(m->scheduler, NULL);
	pthread_mutex_lock(&m->queue_lock);
	m->scheduler_done = true;
	pthread_cond_broadcast(&m->queue_cond);
	pthread_cond_broadcast(&m->space_cond);
	pthread_mutex_unlock(&m->queue_lock);
	for (size_t i = 0; i < m->n_ingesters; i++)
		pthread_join(m->ingesters[i], NULL);
	for (size_t i = 0; i < m->n_units; i++)
		scrape_unit_free(m->units[i]);
	free(m->units);
	for (size_t i = 0; i < m->n_pending_units; i++)
		scrape_unit_free(m->pending_units[i]);
	free(m->pending_units);
	scrape_config_free(m->pending_cfg);
	scrape_config_free(m->cfg);
	free(m->heap);
	for (size_t i = 0; i < m->n_body_pool; i++)
		buf_free(&m->body_pool[i]);
	scrape_inflater_release(&m->inflater);
	pprof_decoder_free(m->decoder);
	free_shards(m);
	close_fds(m);
	curl_slist_free_all(m->self_headers);
	pthread_mutex_destroy(&m->status_lock);
	pthread_mutex_destroy(&m->pending_lock);
	pthread_mutex_destroy(&m->queue_lock);
	pthread_cond_destroy(&m->queue_cond);
	pthread_cond_destroy(&m->space_cond);
	free(m);
}

int scrape_manager_targets(struct scrape_manager *m, struct scrape_target_info **out, size_t *n)
{
	int rc = 0;
	pthread_mutex_lock(&m->status_lock);
	struct scrape_target_info *v = calloc(m->n_units + 1, sizeof(*v));
	size_t cnt = 0;
	for (size_t i = 0; v && i < m->n_units && rc == 0; i++) {
		const struct scrape_unit *u = m->units[i];
		struct scrape_target_info *t = &v[cnt++];
		t->job = strdup(u->job);
		t->url = strdup(u->url);
		t->last_error = strdup(u->last_error);
		t->active = u->active;
		t->health = u->health;
		t->last_scrape_ms = u->last_scrape_ms;
		t->last_duration_ms = u->last_duration_ms;
		if (!t->job || !t->url || !t->last_error ||
		    scrape_labels_copy(&t->labels, &u->labels) < 0 ||
		    scrape_labels_copy(&t->discovered, &u->discovered) < 0)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&m->status_lock);
	if (!v || rc < 0) {
		scrape_targets_free(v, cnt);
		return -ENOMEM;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void scrape_targets_free(struct scrape_target_info *t, size_t n)
{
	if (!t)
		return;
	for (size_t i = 0; i < n; i++) {
		free(t[i].job);
		free(t[i].url);
		free(t[i].last_error);
		scrape_labels_free(&t[i].labels);
		scrape_labels_free(&t[i].discovered);
	}
	free(t);
}

void scrape_manager_get_stats(struct scrape_manager *m, struct scrape_stats *out)
{
	pthread_mutex_lock(&m->status_lock);
	*out = m->stats;
	pthread_mutex_unlock(&m->status_lock);
	/* Both threads' CPU clocks, read from here: the threads themselves
	 * spend nothing on it. */
	out->scheduler_cpu_ns = thread_clock_ns(m->scheduler);
	out->ingest_cpu_ns = 0;
	for (size_t i = 0; i < m->n_ingesters; i++)
		out->ingest_cpu_ns += thread_clock_ns(m->ingesters[i]);
	out->callback_cpu_ns = atomic_load_explicit(&m->callback_cpu_ns, memory_order_relaxed);
	pthread_mutex_lock(&m->queue_lock);
	out->ingest_queued = m->queued;
	pthread_mutex_unlock(&m->queue_lock);
}
