/*
 * debuginfo_uploader.c — uploads the debug info of profiled binaries to the
 * server (Parca's DebuginfoService), off the sampling path.
 *
 * The main loop offers every mapping that appears in a window's profiles
 * (build ID, path through /proc/PID/root so a container's file is found);
 * offering is a hash lookup and, for a new build ID, a queue push: it never
 * waits. Worker threads (bounded: --debuginfo-upload-max-parallel) take
 * build IDs from the queue and run debuginfo_upload_file, each with its own
 * gRPC client. Stripped files with no local debug file are not uploaded:
 * their extract would hold no symbols and would only shadow a better
 * source (debuginfod) on the server. Every build ID is asked about once: once uploaded, or once
 * the server said it does not want it, it is never offered again; after a
 * failure it may be offered again after a backoff (10 s doubling to 1 h,
 * with jitter), and the queue is bounded (an offer that does not fit is
 * simply made again at the next window). Closing cancels uploads in
 * flight.
 */
#include "common/clock.h"
#include "agent/agent.h"
#include "client/client.h"
#include "common/htab.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_MAX	  1024
#define RETRY_MIN_NS	  (10ull * 1000000000)
#define RETRY_MAX_NS	  (3600ull * 1000000000)
#define MAX_WORKERS	  16
#define UPLOAD_TIMEOUT_MS 120000

enum entry_state { ST_QUEUED, ST_RUNNING, ST_DONE, ST_FAILED };

struct entry {
	char build_id[72];
	char *path;
	enum entry_state state;
	uint64_t retry_at_ns; /* ST_FAILED: not before */
	uint64_t backoff_ns;
	struct entry *next_queued;
};

struct debuginfo_uploader {
	struct grpc_client_config grpc;
	struct debuginfo_upload_opts opts;
	char *address, *token, *temp_dir;
	struct agent_metrics *m;
	pthread_t workers[MAX_WORKERS];
	size_t n_workers;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct htab *index; /* build ID -> entries index + 1; guarded by lock */
	struct entry **entries;
	size_t n, cap;
	struct entry *head, *tail; /* the queue */
	size_t queued;
	unsigned seed;
	bool closing;
	bool disabled;	    /* the server does not implement the service */
	atomic_bool cancel; /* set at close: aborts uploads in flight */
};

#define ADD(f, v)                                                                                  \
	do {                                                                                       \
		if (u->m)                                                                          \
			atomic_fetch_add_explicit(&u->m->f, (v), memory_order_relaxed);            \
	} while (0)

/* Whether a failure may go away by itself (retry later) or is final. */
static bool retryable(int code)
{
	return code != GRPC_STATUS_INVALID_ARGUMENT && code != GRPC_STATUS_ALREADY_EXISTS &&
	       code != GRPC_STATUS_RESOURCE_EXHAUSTED && code != GRPC_STATUS_FAILED_PRECONDITION &&
	       code != GRPC_STATUS_OK;
}

/* A process that exited took its /proc/PID/root with it: the same file on
 * the host is the best guess (the build ID is checked before anything is
 * sent). Rewrites path in place; true when it did. */
static bool fall_back_to_host_path(char *path)
{
	const char *host;

	if (!path || strncmp(path, "/proc/", 6) != 0 || access(path, R_OK) == 0)
		return false;
	if (!(host = strstr(path, "/root/")))
		return false;
	memmove(path, host + 5, strlen(host + 5) + 1);
	return true;
}
static void *worker_main(void *arg)
{
	struct debuginfo_uploader *u = arg;
	struct kiln_error err = {0};
	struct grpc_client *client = grpc_client_new(&u->grpc, &err);

	if (!client) {
		log_error("debuginfo upload to %s: %s", u->address, err.msg);
		return NULL;
	}
	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct debuginfo_upload_result *r;
		struct entry *e;
		const char *shown;
		char *path;
		int rc;

		while (!u->head && !u->closing)
			pthread_cond_wait(&u->cond, &u->lock);
		if (u->closing)
			break;
		e = u->head;
		u->head = e->next_queued;
		if (!u->head)
			u->tail = NULL;
		u->queued--;
		e->state = ST_RUNNING;
		path = strdup(e->path);
		pthread_mutex_unlock(&u->lock);

		fall_back_to_host_path(path);
		r = calloc(1, sizeof(*r));
		kiln_error_clear(&err);
		rc = (!path || !r)
			 ? kiln_error_set(&err, ENOMEM, "out of memory")
			 : debuginfo_upload_file(client, path, e->build_id, &u->opts, r, &err);
		/* The process may also exit while its file is being read. */
		if (rc < 0 && r && !r->grpc_code && fall_back_to_host_path(path)) {
			memset(r, 0, sizeof(*r));
			kiln_error_clear(&err);
			rc = debuginfo_upload_file(client, path, e->build_id, &u->opts, r, &err);
		}
		pthread_mutex_lock(&u->lock);
		shown = path ? path : "?"; /* out of memory: rc says so */
		if (rc == 0 && r->outcome == DEBUGINFO_UPLOADED) {
			log_info("debuginfo: uploaded %s (%s, %llu bytes from %s)", e->build_id,
				 shown, (unsigned long long)r->bytes, r->source);
			e->state = ST_DONE;
			ADD(debuginfo_uploaded, 1);
		} else if (rc == 0) {
			log_debug("debuginfo: server does not want %s (%s): %s", e->build_id, shown,
				  r->reason);
			e->state = ST_DONE;
			ADD(debuginfo_not_wanted, 1);
		} else if (rc == -ENODATA) {
			log_debug("debuginfo: %s (%s): %s", e->build_id, shown, err.msg);
			e->state = ST_DONE;
			ADD(debuginfo_no_symbols, 1);
		} else if (r && r->grpc_code == GRPC_STATUS_UNIMPLEMENTED) {
			/* The server has no DebuginfoService (a plain profile
			 * store): stop asking, once, quietly. */
			if (!u->disabled)
				log_warn("debuginfo: %s does not implement DebuginfoService (%s); "
					 "debuginfo upload is off",
					 u->address, err.msg);
			u->disabled = true;
			e->state = ST_DONE;
		} else if (r && !retryable(r->grpc_code) && r->grpc_code != 0) {
			log_warn("debuginfo: %s (%s): %s; not retrying", e->build_id, shown,
				 err.msg);
			e->state = ST_DONE;
			ADD(debuginfo_failed, 1);
		} else if (u->closing) {
			e->state = ST_FAILED; /* cancelled at exit: nothing to report */
		} else {
			uint64_t jitter;

			e->backoff_ns = e->backoff_ns ? e->backoff_ns * 2 : RETRY_MIN_NS;
			if (e->backoff_ns > RETRY_MAX_NS)
				e->backoff_ns = RETRY_MAX_NS;
			/* Half to all of the backoff, so agents do not retry in step. */
			jitter = (uint64_t)rand_r(&u->seed) % (e->backoff_ns / 2 + 1);
			e->retry_at_ns = (uint64_t)mono_ns() + e->backoff_ns / 2 + jitter;
			e->state = ST_FAILED;
			log_warn("debuginfo: %s (%s): %s; retrying in %llu s", e->build_id, shown,
				 err.msg,
				 (unsigned long long)((e->retry_at_ns - (uint64_t)mono_ns()) /
						      1000000000ull));
			ADD(debuginfo_failed, 1);
		}
		free(path);
		free(r);
	}
	pthread_mutex_unlock(&u->lock);
	grpc_client_free(client);
	return NULL;
}

void debuginfo_uploader_offer(struct debuginfo_uploader *u, const char *build_id, const char *path)
{
	struct entry *e = NULL;
	uint64_t v;
	size_t len;

	if (!u || !build_id || !build_id[0] || !path || !path[0])
		return;
	len = strlen(build_id);
	if (len >= sizeof(e->build_id))
		return;
	pthread_mutex_lock(&u->lock);
	if (u->disabled)
		goto out;
	if (htab_get(u->index, build_id, len, &v)) {
		e = u->entries[v - 1];
		if (e->state != ST_FAILED || (uint64_t)mono_ns() < e->retry_at_ns)
			goto out;
		/* The file may have moved (another process maps the same build
		 * ID from elsewhere): try the latest path. */
		char *np = strdup(path);

		if (np) {
			free(e->path);
			e->path = np;
		}
	} else {
		if (u->queued >= QUEUE_MAX)
			goto out;
		if (u->n == u->cap) {
			size_t cap = u->cap ? u->cap * 2 : 64;
			struct entry **nv = realloc(u->entries, cap * sizeof(*nv));

			if (!nv)
				goto out;
			u->entries = nv;
			u->cap = cap;
		}
		e = calloc(1, sizeof(*e));
		if (!e || !(e->path = strdup(path))) {
			free(e);
			goto out;
		}
		memcpy(e->build_id, build_id, len + 1);
		u->entries[u->n++] = e;
		if (htab_put(u->index, build_id, len, u->n) != 0) {
			u->n--;
			free(e->path);
			free(e);
			goto out;
		}
	}
	if (u->queued >= QUEUE_MAX)
		goto out;
	e->state = ST_QUEUED;
	e->next_queued = NULL;
	if (u->tail)
		u->tail->next_queued = e;
	else
		u->head = e;
	u->tail = e;
	u->queued++;
	pthread_cond_signal(&u->cond);
out:
	pthread_mutex_unlock(&u->lock);
}

struct debuginfo_uploader *debuginfo_uploader_new(const struct debuginfo_uploader_config *cfg,
						  struct agent_metrics *m, struct kiln_error *err)
{
	struct debuginfo_uploader *u = calloc(1, sizeof(*u));
	size_t want = cfg->max_parallel ? cfg->max_parallel : 2;

	if (!u)
		goto oom;
	u->m = m;
	u->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)u;
	u->address = strdup(cfg->address);
	u->token = cfg->bearer_token ? strdup(cfg->bearer_token) : NULL;
	u->temp_dir = cfg->temp_dir ? strdup(cfg->temp_dir) : NULL;
	u->index = htab_new(256);
	if (!u->address || (cfg->bearer_token && !u->token) || (cfg->temp_dir && !u->temp_dir) ||
	    !u->index)
		goto oom;
	u->grpc.address = u->address;
	u->grpc.insecure = cfg->insecure;
	u->grpc.skip_verify = cfg->insecure_skip_verify;
	u->grpc.tls = cfg->tls;
	u->grpc.bearer_token = u->token;
	u->grpc.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : UPLOAD_TIMEOUT_MS;
	u->grpc.cancel = &u->cancel;
	u->opts.temp_dir = u->temp_dir;
	u->opts.require_symbols = true;
	u->opts.no_extract = cfg->no_strip;
	u->opts.max_bytes_per_second = cfg->max_bytes_per_second;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	if (want > MAX_WORKERS)
		want = MAX_WORKERS;
	for (size_t i = 0; i < want; i++) {
		int rc = pthread_create(&u->workers[i], NULL, worker_main, u);

		if (rc) {
			kiln_error_set(err, rc, "debuginfo upload: starting a thread: %s",
				       strerror(rc));
			debuginfo_uploader_free(u);
			return NULL;
		}
		u->n_workers++;
	}
	return u;
oom:
	if (u) {
		free(u->address);
		free(u->token);
		free(u->temp_dir);
		htab_free(u->index);
		free(u);
	}
	kiln_error_set(err, ENOMEM, "debuginfo upload: out of memory");
	return NULL;
}

void debuginfo_uploader_free(struct debuginfo_uploader *u)
{
	if (!u)
		return;
	/* Uploads in flight are cancelled (libcurl checks about once a
	 * second), so stopping the agent does not wait for a slow server. */
	atomic_store(&u->cancel, true);
	pthread_mutex_lock(&u->lock);
	u->closing = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	for (size_t i = 0; i < u->n_workers; i++)
		pthread_join(u->workers[i], NULL);
	pthread_mutex_destroy(&u->lock);
	pthread_cond_destroy(&u->cond);
	for (size_t i = 0; i < u->n; i++) {
		free(u->entries[i]->path);
		free(u->entries[i]);
	}
	free(u->entries);
	htab_free(u->index);
	free(u->address);
	free(u->token);
	free(u->temp_dir);
	free(u);
}
