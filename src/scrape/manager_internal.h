/*
 * manager_internal.h — what the files of the scrape manager share: its
 * limits, a queued profile, a shard of libcurl multi handles, the manager
 * itself, and the steps each file provides to the others. The design is
 * in manager.c's file comment. Everything here runs on the scheduler
 * thread unless it says otherwise.
 */
#ifndef KILN_SCRAPE_MANAGER_INTERNAL_H
#define KILN_SCRAPE_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* ---- manager.c ---- */
/* Idle connections to keep in all, for this many active units (bounded by
 * the descriptor limit). */
size_t mgr_max_connections(size_t active_units);

/* ---- manager_ingest.c (may run on an ingest thread: mgr_ingest_main) ---- */
/* An ingest thread (arg: the manager): takes queued profiles and calls the
 * ingest callback until stop and the queue is drained. */
void *mgr_ingest_main(void *arg);
/* Hands the pending batch to the ingest queue (waits while it is full). */
void mgr_flush_batch(struct scrape_manager *m);
/* Adds a decoded profile (owned from here) of unit u to the batch. */
int mgr_enqueue(struct scrape_manager *m, const struct scrape_unit *u, struct pprof_profile *p,
		int64_t ts_ms, bool delta, int64_t done_ns);

/* ---- manager_scrape.c ---- */
/* A libcurl transfer of u ended with res: check, decode, queue. */
void mgr_finish_curl(struct scrape_manager *m, struct scrape_unit *u, CURLcode res);
/* A transfer of u ended (fetch_err NULL on success, HTTP status): check
 * the body, decode, cut deltas, queue, and record u's health. */
void mgr_finish_scrape(struct scrape_manager *m, struct scrape_unit *u, const char *fetch_err,
		       long status);
/* Starts a scrape of u on its transport: 0 or a negative errno. */
int mgr_start_scrape(struct scrape_manager *m, struct scrape_unit *u);

/* ---- manager_curl.c ---- */
/* Finishes the shard's completed transfers; restarts units that came due. */
void mgr_reap(struct scrape_manager *m, struct scrape_shard *sh);
/* NULL-safe. */
void mgr_shard_free(struct scrape_shard *sh);
/* Grows the shards to fit active units and sets their connection caps. */
void mgr_add_shards(struct scrape_manager *m, size_t active);
/* Finishes http.c's completed transfers, as mgr_reap does for libcurl. */
void mgr_reap_http(struct scrape_manager *m);

#endif
