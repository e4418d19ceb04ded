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
#include "scrape/scrape_internal.h"

#define BODY_POOL      32
#define BODY_POOL_CAP  ((size_t)1 << 20) /* larger bodies are freed */
#define SHARD_UNITS    16 /* active units per multi handle, about (1 per target: slower) */
#define MAX_SHARDS     256
#define BATCH_MAX      64
#define BATCH_NS       (50 * 1000000LL) /* a profile waits at most this for its batch */
#define WAKE_TAG       UINT32_MAX	/* epoll data of wakefd: no shard */
#define HTTP_TAG       (UINT32_MAX - 1) /* epoll data of http.c's connections */
#define TICK_NS	       (20 * 1000000LL) /* at most one wakeup per tick while busy */
#define INGEST_THREADS 4		/* concurrent callers of the ingest callback */
#define INGEST_TAKE    16		/* profiles an ingest thread takes from the queue at once */

struct ingest_item {
	struct ingest_item *next;
	struct scrape_labels labels; /* inline: in the item's own allocation */
	struct pprof_profile *profile;
	int64_t timestamp_ms;
	bool delta;
	int64_t done_ns; /* monotonic: when the scrape finished */
	/* Set by the ingest thread. */
	int rc;
	int64_t lag_ns;
};

/* One multi handle and its connection cache; see "Shards" above. */
struct scrape_shard {
	struct scrape_manager *m;
	CURLM *multi;
	uint32_t index;
	int64_t due_ns; /* libcurl's timer for this multi (monotonic ns), -1 = none */
};

struct scrape_manager {
	struct scrape_manager_options opts;
	/* Authorization for self targets (libcurl); scheduler thread */
	struct curl_slist *self_headers;
	struct scrape_shard **shards; /* never shrinks: in-flight handles stay valid */
	size_t n_shards;
	long max_conns; /* CURLMOPT_MAXCONNECTS of every shard */
	int epfd;	/* the sockets libcurl watches, and wakefd */
	int wakefd;	/* eventfd: a reload is parked, or stop */
	pthread_t scheduler;
	pthread_t ingesters[INGEST_THREADS];
	size_t n_ingesters;
	atomic_bool stop;
	_Atomic uint64_t callback_cpu_ns; /* stats.callback_cpu_ns, kept here */
	/* Set (under queue_lock) once the scheduler thread has exited: only then
	 * may the ingest thread stop, as the scheduler still finishes transfers
	 * (and enqueues their profiles) after stop is set. */
	bool scheduler_done;

	/* Guarded by status_lock: the unit list as snapshots see it, the
	 * status fields of units, stats. */
	pthread_mutex_t status_lock;
	struct scrape_config *cfg;
	struct scrape_unit **units;
	size_t n_units;
	struct scrape_stats stats;

	/* Reload hand-off, guarded by pending_lock. */
	pthread_mutex_t pending_lock;
	struct scrape_config *pending_cfg;
	struct scrape_unit **pending_units;
	size_t n_pending_units;
	bool has_pending;

	/* Scheduler-only. */
	struct scrape_unit **heap;
	size_t heap_len;
	/* Response buffers between scrapes: a few are reused instead of one
	 * grown by doubling (and faulted in) per scrape, or one kept per unit. */
	struct buf body_pool[BODY_POOL];
	size_t n_body_pool;
	struct scrape_inflater inflater;
	/* Decodes cumulative units' responses, whose decoded profile is freed
	 * here after the delta: its message buffer and arena are recycled
	 * for the next decode (no malloc, no page faults; at most one
	 * profile's worth is kept). Created on first use; NULL = plain
	 * pprof_decode. Other units' profiles go to the ingest thread whole,
	 * so they are decoded without it. */
	struct pprof_decoder *decoder;
	/* Plain http:// targets with an address (http.c); the rest go to
	 * libcurl. Off when a proxy is set in the environment (libcurl
	 * honors it). */
	struct http_client http;
	bool http_ok;
	/* Profiles not yet handed to the ingest thread (see enqueue). */
	struct ingest_item *batch_head, *batch_tail;
	size_t batch_n;
	int64_t batch_due_ns; /* hand over by then (monotonic) */

	/* Ingest queue. */
	pthread_mutex_t queue_lock;
	pthread_cond_t queue_cond; /* items arrived or stop */
	pthread_cond_t space_cond; /* room freed */
	struct ingest_item *head, *tail;
	size_t queued;
};

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
static void *ingest_main(void *arg)
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
static void flush_batch(struct scrape_manager *m)
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
static int enqueue(struct scrape_manager *m, const struct scrape_unit *u, struct pprof_profile *p,
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
		flush_batch(m);
	return 0;
}

/* ---- one scrape -------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct scrape_unit *u = arg;
	size_t n = size * nmemb;
	if (u->body.len + n > u->max_body) {
		u->too_big = true;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	return buf_append(&u->body, data, n) == 0 ? n : 0;
}

void scrape_format_size(char *out, size_t len, size_t bytes)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(out, len, "%zu MiB", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(out, len, "%zu KiB", bytes >> 10);
	else
		snprintf(out, len, "%zu bytes", bytes);
}

/* Whether the URL's host is an IPv4 or IPv6 literal (nothing to resolve). */
static bool host_is_ip(const char *url)
{
	const char *h = strstr(url, "://");
	char host[64];
	size_t n = 0;
	unsigned char addr[16];
	if (!h)
		return false;
	h += 3;
	if (*h == '[') { /* [v6]:port */
		const char *e = strchr(h, ']');
		if (!e || (size_t)(e - h - 1) >= sizeof(host))
			return false;
		memcpy(host, h + 1, (size_t)(e - h - 1));
		host[e - h - 1] = 0;
		return inet_pton(AF_INET6, host, addr) == 1;
	}
	while (h[n] && h[n] != ':' && h[n] != '/' && h[n] != '?' && n < sizeof(host) - 1)
		n++;
	memcpy(host, h, n);
	host[n] = 0;
	return inet_pton(AF_INET, host, addr) == 1;
}

/* The shard of a URL: by its host and port, so that the kinds of one
 * target share the shard and its kept-alive connection. */
static struct scrape_shard *shard_of(struct scrape_manager *m, const char *url)
{
	const char *h = strstr(url, "://");
	h = h ? h + 3 : url;
	size_t n = strcspn(h, "/?#");
	return m->shards[htab_hash(h, n) % m->n_shards];
}

/* Whether url is the server itself (opts.self_url_prefixes): only those
 * targets get opts.self_authorization. */
static bool is_self(const struct scrape_manager *m, const char *url)
{
	if (!m->opts.self_authorization || !m->opts.self_url_prefixes)
		return false;
	for (const char *const *p = m->opts.self_url_prefixes; *p; p++)
		if (strncmp(url, *p, strlen(*p)) == 0)
			return true;
	return false;
}

/* Whether u goes through http.c (decided once per unit: its URL is part of
 * its identity and does not change). */
static bool use_http(struct scrape_manager *m, struct scrape_unit *u)
{
	if (!u->http_tried) {
		u->http_tried = true;
		struct http_target *t = m->http_ok ? calloc(1, sizeof(*t)) : NULL;
		const char *auth = is_self(m, u->url) ? m->opts.self_authorization : NULL;
		if (t && http_target_parse_auth(u->url, auth, t) == 0)
			u->ht = t;
		else
			free(t);
	}
	return u->ht != NULL;
}

static int start_scrape(struct scrape_manager *m, struct scrape_unit *u)
{
	u->max_body = m->opts.max_body_bytes;
	u->too_big = false;
	u->curl_err[0] = 0;
	if (use_http(m, u)) {
		if (!u->body.cap && m->n_body_pool)
			u->body = m->body_pool[--m->n_body_pool];
		buf_reset(&u->body);
		u->started_wall_ms = realtime_ms();
		int64_t now = mono_ns();
		u->started_mono_ms = now / 1000000;
		u->in_flight = true;
		http_start(&m->http, u, now);
		return 0;
	}
	if (!m->n_shards)
		return -ENOMEM;
	if (!u->easy) {
		if (!(u->easy = curl_easy_init()))
			return -ENOMEM;
		curl_easy_setopt(u->easy, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(u->easy, CURLOPT_WRITEDATA, u);
		curl_easy_setopt(u->easy, CURLOPT_PRIVATE, u);
		curl_easy_setopt(u->easy, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(u->easy, CURLOPT_ERRORBUFFER, u->curl_err);
		curl_easy_setopt(u->easy, CURLOPT_USERAGENT, "kiln-scrape/1");
		curl_easy_setopt(u->easy, CURLOPT_ACCEPT_ENCODING, "");
	}
	/* An address needs no DNS, so its cache entry never goes stale:
	 * "forever" also spares the walk over every entry of libcurl's DNS
	 * cache that each transfer otherwise makes to expire old ones (1,000
	 * targets = 1,000 entries, one per host and port). Host names keep
	 * libcurl's default (60 s). */
	curl_easy_setopt(u->easy, CURLOPT_DNS_CACHE_TIMEOUT, host_is_ip(u->url) ? -1L : 60L);
	/* Settings that a reload may change. */
	curl_easy_setopt(u->easy, CURLOPT_URL, u->url);
	bool self = is_self(m, u->url);
	if (self && !m->self_headers) { /* built once, on this (the scheduler) thread */
		struct buf h = {0};
		if (buf_printf(&h, "Authorization: %s", m->opts.self_authorization) >= 0 &&
		    buf_terminate(&h) >= 0)
			m->self_headers = curl_slist_append(NULL, (const char *)h.data);
		buf_free(&h);
	}
	curl_easy_setopt(u->easy, CURLOPT_HTTPHEADER, self ? m->self_headers : NULL);
	curl_easy_setopt(u->easy, CURLOPT_TIMEOUT_MS, (long)u->timeout_ms);
	curl_easy_setopt(u->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(u->timeout_ms < 10000 ? u->timeout_ms : 10000));
	curl_easy_setopt(u->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)m->opts.max_body_bytes);
	if (!u->body.cap && m->n_body_pool)
		u->body = m->body_pool[--m->n_body_pool];
	buf_reset(&u->body);
	u->started_mono_ms = mono_ms();
	u->started_wall_ms = realtime_ms();
	struct scrape_shard *sh = shard_of(m, u->url);
	if (curl_multi_add_handle(sh->multi, u->easy) != CURLM_OK)
		return -EIO;
	u->multi = sh->multi;
	u->in_flight = true;
	return 0;
}

/* A short, printable excerpt of a body that is not a profile. */
static void describe_non_pprof(const struct buf *b, const char *decode_err, char *out, size_t len)
{
	size_t i = 0;
	while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\n' || b->data[i] == '\r' ||
			      b->data[i] == '\t'))
		i++;
	if (b->len == 0) {
		snprintf(out, len, "not a pprof profile: empty body");
		return;
	}
	if (i < b->len && b->data[i] == '<') {
		snprintf(out, len, "not a pprof profile: looks like HTML");
		return;
	}
	size_t printable = 0, n = b->len < 256 ? b->len : 256;
	for (size_t k = 0; k < n; k++)
		printable += (b->data[k] >= 0x20 && b->data[k] < 0x7f) || b->data[k] == '\n' ||
			     b->data[k] == '\t' || b->data[k] == '\r';
	if (printable == n) {
		char text[48];
		size_t t = 0;
		for (size_t k = i; k < b->len && t < 40; k++)
			text[t++] = b->data[k] == '\n' || b->data[k] == '\r' ? ' ' : b->data[k];
		text[t] = 0;
		snprintf(out, len, "not a pprof profile: looks like text (\"%s%s\")", text,
			 b->len - i > 40 ? "..." : "");
		return;
	}
	snprintf(out, len, "not a pprof profile: %.200s", decode_err);
}

/* Indices of the sample types to keep (keep_sample_type), split into
 * cumulative and gauge ("inuse_*") when split is true. */
static void select_types(const struct pprof_endpoint_config *e, const struct pprof_profile *p,
			 bool split, size_t *cum, size_t *n_cum, size_t *gauge, size_t *n_gauge)
{
	const pprof_msg *msg = pprof_profile_msg(p);
	*n_cum = *n_gauge = 0;
	for (size_t i = 0; i < msg->n_sample_type && i < 64; i++) {
		const char *ty = pprof_string(p, msg->sample_type[i]->type);
		const char *un = pprof_string(p, msg->sample_type[i]->unit);
		bool keep = e->n_keep == 0;
		for (size_t k = 0; k < e->n_keep && !keep; k++)
			keep = strcmp(e->keep_types[k], ty) == 0 &&
			       (!e->keep_units[k] || strcmp(e->keep_units[k], un) == 0);
		if (!keep)
			continue;
		if (split && strncmp(ty, "inuse_", 6) == 0)
			gauge[(*n_gauge)++] = i;
		else
			cum[(*n_cum)++] = i;
	}
}

/* Decoded profile -> ingest items. Takes ownership of p. The delta of a
 * cumulative profile and its gauge types are both cut out of it
 * (pprof_profile_subset); other kinds queue p itself. */
static int process_profile(struct scrape_manager *m, struct scrape_unit *u, struct pprof_profile *p,
			   int64_t done_ns, struct kiln_error *err)
{
	const pprof_msg *msg = pprof_profile_msg(p);
	int64_t ts = msg->time_nanos ? msg->time_nanos / 1000000 : u->started_wall_ms;
	size_t cum[64], gauge[64], n_cum, n_gauge;
	struct pprof_profile *out;
	bool reset;
	int rc = 0;

	select_types(u->ep, p, u->kind == UNIT_CUMULATIVE, cum, &n_cum, gauge, &n_gauge);
	if (u->kind != UNIT_CUMULATIVE) {
		bool delta = u->kind == UNIT_REMOTE_DELTA;
		if (n_cum == 0) {
			pprof_decoder_recycle(m->decoder, p);
			return 0;
		}
		if (n_cum < msg->n_sample_type && pprof_profile_project(p, cum, n_cum) < 0) {
			pprof_decoder_recycle(m->decoder, p);
			return kiln_error_set(err, EINVAL, "keep_sample_type: bad projection");
		}
		return enqueue(m, u, p, ts, delta, done_ns);
	}
	if (n_cum) {
		struct scrape_baseline *next = NULL;
		if (u->base) {
			if ((rc = scrape_delta_next(u->base, p, cum, n_cum, &out, &reset, &next,
						    err)) < 0)
				goto fail;
			if (reset)
				log_info("scrape: %s: counters went backwards (target restarted?); "
					 "the new scrape is taken as the delta",
					 u->url);
			rc = enqueue(m, u, out, ts, true, done_ns);
		} else {
			rc = scrape_baseline_new(p, cum, n_cum, &next, err);
		}
		if (next) { /* the baseline for the next delta */
			scrape_baseline_free(u->base);
			u->base = next;
		}
		if (rc < 0)
			goto fail;
	}
	if (n_gauge) {
		/* The "inuse_*" types, as scraped, cut out of p like the delta:
		 * only the samples with a value and the objects they use (a few
		 * of an allocs profile's). p itself is freed here, on the thread
		 * that allocated it, where its memory is reused warm by the next
		 * decode, instead of crossing to the ingest thread whole. */
		struct pprof_profile *g;
		bool unused;
		rc = scrape_delta_next(NULL, p, gauge, n_gauge, &g, &unused, NULL, err);
		pprof_decoder_recycle(m->decoder, p);
		return rc < 0 ? rc : enqueue(m, u, g, ts, false, done_ns);
	}
fail:
	pprof_decoder_recycle(m->decoder, p);
	return rc;
}

static void finish_scrape(struct scrape_manager *m, struct scrape_unit *u, const char *fetch_err,
			  long status);

/* libcurl's result as Kiln's message ("" = a complete response). */
static void finish_curl(struct scrape_manager *m, struct scrape_unit *u, CURLcode res)
{
	char msg[256] = "";
	long status = 0;
	char size[32];

	curl_multi_remove_handle(u->multi, u->easy);
	scrape_format_size(size, sizeof(size), m->opts.max_body_bytes);
	curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &status);
	if (res == CURLE_OK) {
		/* status checked by finish_scrape */
	} else if (res == CURLE_WRITE_ERROR && u->too_big) {
		snprintf(msg, sizeof(msg), "body exceeds %s", size);
	} else if (res == CURLE_FILESIZE_EXCEEDED) {
		snprintf(msg, sizeof(msg), "body exceeds %s", size);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		if (u->timeout_ms % 1000 == 0)
			snprintf(msg, sizeof(msg), "timeout after %llds",
				 (long long)u->timeout_ms / 1000);
		else
			snprintf(msg, sizeof(msg), "timeout after %lldms",
				 (long long)u->timeout_ms);
	} else if (res == CURLE_COULDNT_CONNECT) {
		long oserr = 0;
		curl_easy_getinfo(u->easy, CURLINFO_OS_ERRNO, &oserr);
		if (oserr == ECONNREFUSED)
			snprintf(msg, sizeof(msg), "connection refused");
		else
			snprintf(msg, sizeof(msg), "cannot connect: %.200s",
				 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	} else if (res == CURLE_COULDNT_RESOLVE_HOST) {
		snprintf(msg, sizeof(msg), "cannot resolve host: %.200s",
			 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	} else {
		snprintf(msg, sizeof(msg), "%s",
			 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	}
	finish_scrape(m, u, msg, status);
}

/* Undoes a Content-Encoding: gzip of http.c's response (libcurl does it
 * itself), so that the body is what the target's handler wrote. */
static int gunzip_body(struct scrape_manager *m, struct scrape_unit *u, char *msg, size_t len)
{
	struct kiln_error err = {0};
	const uint8_t *data = u->body.data ? u->body.data : (const uint8_t *)"";
	int rc = scrape_inflate(&m->inflater, data, u->body.len, u->max_body, &err);
	if (rc == -EFBIG) {
		char size[32];
		scrape_format_size(size, sizeof(size), u->max_body);
		snprintf(msg, len, "body exceeds %s", size);
	} else if (rc < 0) {
		snprintf(msg, len, "Content-Encoding: %.200s", err.msg);
	} else { /* swap buffers: no copy */
		struct buf t = u->body;
		u->body = m->inflater.out;
		m->inflater.out = t;
		buf_reset(&m->inflater.out);
	}
	return rc;
}

/* A fetch ended (fetch_err empty: a complete response with this status):
 * check, decode, delta, queue; record the unit's health. */
static void finish_scrape(struct scrape_manager *m, struct scrape_unit *u, const char *fetch_err,
			  long status)
{
	char msg[256] = "";
	int64_t done_ns = mono_ns();
	int64_t dur = done_ns / 1000000 - u->started_mono_ms;
	char size[32];
	uint64_t decode_ns = 0, delta_ns = 0;

	u->in_flight = false;
	scrape_format_size(size, sizeof(size), m->opts.max_body_bytes);
	if (fetch_err[0]) {
		snprintf(msg, sizeof(msg), "%s", fetch_err);
	} else if (status != 200) {
		snprintf(msg, sizeof(msg), "HTTP status %ld", status);
		struct buf b = u->body;
		if (b.len && b.data[0] == '<')
			snprintf(msg, sizeof(msg), "HTTP status %ld (HTML body)", status);
	} else if (u->ht && u->resp.gzip && gunzip_body(m, u, msg, sizeof(msg)) < 0) {
		/* msg says why */
	} else {
		struct pprof_decode_opts o = {.max_inflated_bytes = m->opts.max_body_bytes};
		if (m->opts.on_body)
			m->opts.on_body(m->opts.on_body_ctx, u->labels.v, u->labels.n, u->body.data,
					u->body.len);
		struct pprof_profile *p = NULL;
		struct kiln_error err = {0};
		uint64_t t0 = (uint64_t)thread_cpu_ns();
		const uint8_t *data = u->body.data ? u->body.data : (const uint8_t *)"";
		size_t len = u->body.len;
		int rc = 0;
		if (gzip_is_gzip(data, len)) { /* into the kept buffer */
			rc = scrape_inflate(&m->inflater, data, len, m->opts.max_body_bytes, &err);
			data = m->inflater.out.data;
			len = m->inflater.out.len;
			if (rc == 0 && len == 0)
				rc = kiln_error_set(&err, EINVAL, "empty input after gunzip");
		}
		struct pprof_decoder *d = NULL;
		if (u->kind == UNIT_CUMULATIVE) {
			if (!m->decoder)
				m->decoder = pprof_decoder_new();
			d = m->decoder;
		}
		if (rc == 0)
			rc = pprof_decoder_decode(d, data, len, &o, &p, &err);
		scrape_inflater_trim(&m->inflater);
		uint64_t t1 = (uint64_t)thread_cpu_ns();
		decode_ns = t1 - t0;
		if (rc == -EFBIG)
			snprintf(msg, sizeof(msg), "body exceeds %s (decompressed)", size);
		else if (rc < 0)
			describe_non_pprof(&u->body, err.msg, msg, sizeof(msg));
		else if ((rc = process_profile(m, u, p, done_ns, &err)) < 0)
			snprintf(msg, sizeof(msg), "processing the profile: %.200s",
				 err.msg[0] ? err.msg : strerror(-rc));
		if (p) /* decoded: the rest was type selection and deltas */
			delta_ns = (uint64_t)thread_cpu_ns() - t1;
	}
	size_t fetched = u->body.len;
	/* Bodies can be large; do not keep one per target between scrapes. */
	if (u->body.cap && u->body.cap <= BODY_POOL_CAP && m->n_body_pool < BODY_POOL) {
		m->body_pool[m->n_body_pool++] = u->body;
		buf_init(&u->body);
	} else {
		buf_free(&u->body);
	}

	pthread_mutex_lock(&m->status_lock);
	u->last_scrape_ms = u->started_wall_ms;
	u->last_duration_ms = dur;
	u->health = msg[0] ? SCRAPE_HEALTH_DOWN : SCRAPE_HEALTH_UP;
	snprintf(u->last_error, sizeof(u->last_error), "%s", msg);
	m->stats.scrapes++;
	m->stats.bytes_fetched += fetched;
	m->stats.decode_cpu_ns += decode_ns;
	m->stats.delta_cpu_ns += delta_ns;
	if (msg[0])
		m->stats.scrape_errors++;
	pthread_mutex_unlock(&m->status_lock);
	if (msg[0])
		log_debug("scrape: %s: %s", u->url, msg);
}

/* ---- reload swap ------------------------------------------------------------ */

/* How many idle connections the multi handle keeps for reuse: one per
 * active unit, so that every target is scraped over a kept-alive connection
 * (libcurl's default keeps 4 per transfer in flight; with 1,000 targets
 * each scrape then opened a new connection and evicting the oldest walked
 * the whole cache). Bounded by half the descriptor limit, leaving the rest
 * to the server. */
static size_t max_connections(size_t active_units)
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

static void add_shards(struct scrape_manager *m, size_t active);

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
	add_shards(m, active);
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

/* libcurl: watch fd for what (CURL_POLL_IN/OUT/INOUT), or stop (REMOVE).
 * The epoll data carries the shard's index beside the fd. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *arg, void *sockp)
{
	struct scrape_shard *sh = arg;
	int epfd = sh->m->epfd;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); /* EBADF if closed: fine */
		return 0;
	}
	struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
					   (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
				 .data.u64 = (uint64_t)sh->index << 32 | (uint32_t)fd};
	/* sockp (set by curl_multi_assign) marks a socket already in the set;
	 * libcurl forgets it on REMOVE. */
	if (sockp)
		return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -1 : 0;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 &&
	    (errno != EEXIST || epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0))
		return -1;
	curl_multi_assign(sh->multi, fd, sh);
	return 0;
}

/* libcurl: call socket_action(CURL_SOCKET_TIMEOUT) on this shard in
 * timeout_ms (-1 = no timer). */
static int on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	struct scrape_shard *sh = arg;
	(void)multi;
	sh->due_ns = timeout_ms < 0 ? -1 : mono_ns() + (int64_t)timeout_ms * 1000000;
	return 0;
}

static void shard_free(struct scrape_shard *sh)
{
	if (!sh)
		return;
	if (sh->multi)
		curl_multi_cleanup(sh->multi); /* may still tell on_socket to forget sockets */
	free(sh);
}

/* Grows the shards to about one per SHARD_UNITS active units (never
 * fewer than there are: handles in flight keep their multi) and sets how
 * many idle connections each keeps: twice its share of the targets, as
 * hashing does not spread them evenly, within max_connections. */
static void add_shards(struct scrape_manager *m, size_t active)
{
	size_t want = (active + SHARD_UNITS - 1) / SHARD_UNITS;
	want = want < 1 ? 1 : want > MAX_SHARDS ? MAX_SHARDS : want;
	if (want > m->n_shards) {
		struct scrape_shard **v = realloc(m->shards, want * sizeof(*v));
		if (v) {
			m->shards = v;
			while (m->n_shards < want) {
				struct scrape_shard *sh = calloc(1, sizeof(*sh));
				if (!sh || !(sh->multi = curl_multi_init())) {
					free(sh);
					log_warn("scrape: out of memory for curl multi handles");
					break;
				}
				sh->m = m;
				sh->index = (uint32_t)m->n_shards;
				sh->due_ns = -1;
				curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
				curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
				curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, on_timer);
				curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
				m->shards[m->n_shards++] = sh;
			}
		}
	}
	size_t cap = max_connections(active);
	m->http.max_conns = cap;
	size_t keep = m->n_shards ? 2 * cap / m->n_shards + 8 : cap;
	keep = keep < cap ? keep : cap;
	if ((long)keep == m->max_conns)
		return;
	m->max_conns = (long)keep;
	for (size_t i = 0; i < m->n_shards; i++)
		curl_multi_setopt(m->shards[i]->multi, CURLMOPT_MAXCONNECTS, m->max_conns);
}

/* Finished transfers of a shard: check, decode, delta, queue; restart a
 * unit that came due meanwhile. */
static void reap(struct scrape_manager *m, struct scrape_shard *sh)
{
	CURLMsg *cm;
	int left;
	while ((cm = curl_multi_info_read(sh->multi, &left))) {
		if (cm->msg != CURLMSG_DONE)
			continue;
		struct scrape_unit *u;
		curl_easy_getinfo(cm->easy_handle, CURLINFO_PRIVATE, (char **)&u);
		CURLcode res = cm->data.result;
		finish_curl(m, u, res);
		if (u->pending) {
			u->pending = false;
			if (start_scrape(m, u) < 0)
				log_warn("scrape: cannot start %s", u->url);
		}
	}
}

/* Finished transfers of http.c, as reap does for libcurl's; a restarted
 * one that fails at once is taken in the same loop. */
static void reap_http(struct scrape_manager *m)
{
	struct scrape_unit *u;
	while ((u = http_reap(&m->http))) {
		finish_scrape(m, u, u->fetch_err, u->fetch_status);
		if (u->pending) {
			u->pending = false;
			if (start_scrape(m, u) < 0)
				log_warn("scrape: cannot start %s", u->url);
		}
	}
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
			else if (start_scrape(m, u) < 0)
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
			flush_batch(m);
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
			reap(m, m->shards[si]);
		}
		if (http_due >= 0 && last_wake_ns >= http_due)
			http_check_timeouts(&m->http, last_wake_ns);
		reap_http(m);
		if (due >= 0) {
			now_ns = last_wake_ns;
			for (size_t i = 0; i < m->n_shards; i++) {
				struct scrape_shard *sh = m->shards[i];
				if (sh->due_ns < 0 || now_ns < sh->due_ns)
					continue;
				sh->due_ns = -1;
				curl_multi_socket_action(sh->multi, CURL_SOCKET_TIMEOUT, 0,
							 &running);
				reap(m, sh);
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
	flush_batch(m);
	return NULL;
}

static void free_shards(struct scrape_manager *m)
{
	for (size_t i = 0; i < m->n_shards; i++)
		shard_free(m->shards[i]);
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
	add_shards(m, 0);
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
		if (pthread_create(&m->ingesters[m->n_ingesters], NULL, ingest_main, m) != 0)
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
