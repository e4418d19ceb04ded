/*
 * sink_remote.c — the push sink: each window goes to a Parca-compatible
 * server, over Kiln's stream protocol (IngestService/Push, sink_stream.c)
 * or as one ProfileStoreService/WriteRaw request, each profile with one
 * ExecutableInfo per mapping (ELF type, load segment).
 *
 * The sampler must never wait on the network, so the sink only queues the
 * window: for the stream protocol (auto or stream) write_stacks captures
 * it as resolved stacks (push_window.h), no profile built; with
 * --remote-store-protocol=writeraw write_window packs the agent's pprofs
 * (one RawProfileSeries per process: __name__="parca_agent" plus the
 * series labels, the gzipped pprof as its one RawSample). A server that
 * turns out to lack the stream protocol gets captured windows as WriteRaw
 * too (push_window_pprof.c). A sender thread owns the gRPC client and
 * delivers queued windows oldest first. The queue is bounded in bytes:
 * when a new window does not fit, the oldest queued windows are dropped and
 * their profiles counted in kiln_agent_profiles_dropped_total (the window
 * being sent is not among them: it keeps its retries). A failed call (no
 * answer, or a retryable gRPC status) is retried with exponential backoff
 * (0.5 s doubling to 30 s) and full jitter; a request the server rejects
 * as invalid is dropped at once (retrying cannot help). On close the
 * thread gets a few seconds to flush (a call still hanging then is
 * cancelled), then what is left is counted as dropped.
 */
#include "common/clock.h"
#include "agent/agent.h"
#include "agent/push_window.h"
#include "agent/sink_stream.h"
#include "client/client.h"
#include "common/ingest_proto.h"
#include "common/log.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WRITE_RAW      "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define CLOSE_FLUSH_MS 5000

struct batch {
	struct batch *next;
	/* The window as captured (write_stacks: the stream protocol's input),
	 * or NULL; then, or once a server without the stream protocol needs
	 * it, data holds it as a serialized WriteRawRequest. */
	struct push_window *pw;
	uint8_t *data;
	size_t len; /* bytes held: the queue's bound */
	size_t n_profiles;
	uint64_t window_id; /* the stream protocol's id of this window */
};

struct sink_remote {
	struct agent_sink sink; /* first: the sink is cast back to this */
	struct grpc_client_config cfg;
	char *address, *token;
	size_t max_bytes;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *head, *tail;	    /* guarded by lock */
	size_t queued_bytes;		    /* guarded by lock */
	size_t inflight_bytes;		    /* the window being sent; guarded by lock */
	bool closing;			    /* guarded by lock */
	bool exited;			    /* the sender is done; guarded by lock */
	uint64_t deadline_ms;		    /* flush deadline once closing */
	atomic_bool cancel;		    /* aborts a call still in flight at the deadline */
	enum sink_remote_protocol protocol; /* AUTO becomes one of the others */
	uint64_t next_window_id;	    /* guarded by lock */
};

static void count_dropped(struct sink_remote *r, size_t n)
{
	if (r->sink.metrics)
		atomic_fetch_add_explicit(&r->sink.metrics->profiles_dropped, n,
					  memory_order_relaxed);
}

static void batch_free(struct batch *b)
{
	if (!b)
		return;
	push_window_free(b->pw);
	free(b->data);
	free(b);
}

/* Packs one window into a WriteRawRequest. */
static int pack_window(const struct agent_profile *profiles, size_t n, struct batch **out)
{
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries *series = calloc(n, sizeof(*series));
	Parca__Profilestore__V1alpha1__RawProfileSeries **series_p = calloc(n, sizeof(*series_p));
	Parca__Profilestore__V1alpha1__LabelSet *sets = calloc(n, sizeof(*sets));
	Parca__Profilestore__V1alpha1__RawSample *samples = calloc(n, sizeof(*samples));
	Parca__Profilestore__V1alpha1__RawSample **samples_p = calloc(n, sizeof(*samples_p));
	Parca__Profilestore__V1alpha1__Label **labels_p = NULL, *labels = NULL;
	Parca__Profilestore__V1alpha1__ExecutableInfo *ei = NULL, **ei_p = NULL;
	Parca__Profilestore__V1alpha1__LoadSegment *segs = NULL;
	struct batch *b = NULL;
	size_t n_labels = 0, li = 0, n_ei = 0, eii = 0;
	int rc = -ENOMEM;

	for (size_t i = 0; i < n; i++) {
		n_labels += profiles[i].labels->n + 1;
		n_ei += profiles[i].n_exec_info;
	}
	labels = calloc(n_labels ? n_labels : 1, sizeof(*labels));
	labels_p = calloc(n_labels ? n_labels : 1, sizeof(*labels_p));
	ei = calloc(n_ei ? n_ei : 1, sizeof(*ei));
	ei_p = calloc(n_ei ? n_ei : 1, sizeof(*ei_p));
	segs = calloc(n_ei ? n_ei : 1, sizeof(*segs));
	if (!series || !series_p || !sets || !samples || !samples_p || !labels || !labels_p ||
	    !ei || !ei_p || !segs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct agent_labels *l = profiles[i].labels;

		parca__profilestore__v1alpha1__label_set__init(&sets[i]);
		sets[i].labels = &labels_p[li];
		/* Sorted by name: "__name__" sorts before every lower-case name. */
		parca__profilestore__v1alpha1__label__init(&labels[li]);
		labels[li].name = "__name__";
		labels[li].value = "parca_agent";
		labels_p[li] = &labels[li];
		li++;
		for (size_t j = 0; j < l->n; j++, li++) {
			parca__profilestore__v1alpha1__label__init(&labels[li]);
			labels[li].name = l->v[j].name;
			labels[li].value = l->v[j].value;
			labels_p[li] = &labels[li];
		}
		sets[i].n_labels = l->n + 1;
		parca__profilestore__v1alpha1__raw_sample__init(&samples[i]);
		samples[i].raw_profile.data = (uint8_t *)profiles[i].pprof;
		samples[i].raw_profile.len = profiles[i].pprof_len;
		/* One ExecutableInfo per pprof mapping, in mapping order. */
		samples[i].executable_info = &ei_p[eii];
		samples[i].n_executable_info = profiles[i].n_exec_info;
		for (size_t j = 0; j < profiles[i].n_exec_info; j++, eii++) {
			const struct agent_exec_info *x = &profiles[i].exec_info[j];

			parca__profilestore__v1alpha1__executable_info__init(&ei[eii]);
			ei[eii].elf_type = x->elf_type;
			if (x->has_load) {
				parca__profilestore__v1alpha1__load_segment__init(&segs[eii]);
				segs[eii].offset = x->load_offset;
				segs[eii].vaddr = x->load_vaddr;
				ei[eii].load_segment = &segs[eii];
			}
			ei_p[eii] = &ei[eii];
		}
		samples_p[i] = &samples[i];
		parca__profilestore__v1alpha1__raw_profile_series__init(&series[i]);
		series[i].labels = &sets[i];
		series[i].n_samples = 1;
		series[i].samples = &samples_p[i];
		series_p[i] = &series[i];
	}
	req.n_series = n;
	req.series = series_p;
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out;
	b->len = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
	b->data = malloc(b->len ? b->len : 1);
	if (!b->data)
		goto out;
	parca__profilestore__v1alpha1__write_raw_request__pack(&req, b->data);
	b->n_profiles = n;
	*out = b;
	b = NULL;
	rc = 0;
out:
	batch_free(b);
	free(series);
	free(series_p);
	free(sets);
	free(samples);
	free(samples_p);
	free(labels);
	free(labels_p);
	free(ei);
	free(ei_p);
	free(segs);
	return rc;
}

/* Queues b (n profiles) after dropping the oldest windows that leave no
 * room for it. Returns n, or -EMSGSIZE (b freed) when b alone is larger
 * than the buffer. */
static int enqueue(struct sink_remote *r, struct batch *b, size_t n, struct kiln_error *err)
{
	struct batch *old;

	b->n_profiles = n;
	pthread_mutex_lock(&r->lock);
	/* Make room by dropping the oldest windows: recent data matters more. */
	while (r->head && r->queued_bytes + r->inflight_bytes + b->len > r->max_bytes) {
		old = r->head;
		r->head = old->next;
		if (!r->head)
			r->tail = NULL;
		r->queued_bytes -= old->len;
		count_dropped(r, old->n_profiles);
		log_warn("remote store: buffer full (%zu bytes): dropped a window of %zu profiles",
			 r->max_bytes, old->n_profiles);
		batch_free(old);
	}
	if (b->len > r->max_bytes) {
		pthread_mutex_unlock(&r->lock);
		count_dropped(r, n);
		batch_free(b);
		return kiln_error_set(err, EMSGSIZE,
				      "remote store: a window of %zu profiles is larger than the "
				      "%zu-byte buffer",
				      n, r->max_bytes);
	}
	b->window_id = r->next_window_id++;
	if (r->tail)
		r->tail->next = b;
	else
		r->head = b;
	r->tail = b;
	r->queued_bytes += b->len;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	/* Queued: the sender thread counts delivery failures as drops. */
	return (int)n;
}

static int remote_write_window(struct agent_sink *s, const struct agent_profile *profiles, size_t n,
			       struct kiln_error *err)
{
	struct sink_remote *r = (struct sink_remote *)s;
	struct batch *b = NULL;
	int rc;

	if (n == 0)
		return 0;
	rc = pack_window(profiles, n, &b);
	if (rc)
		return kiln_error_set(err, -rc, "remote store: packing %zu profiles: out of memory",
				      n);
	return enqueue(r, b, n, err);
}

/* The stream protocol's sink: the window's stacks captured as they are
 * (push_window.h), no profile built. */
static int remote_write_stacks(struct agent_sink *s, const struct window *w,
			       const struct profile_env *env, struct kiln_error *err)
{
	struct sink_remote *r = (struct sink_remote *)s;
	struct batch *b = calloc(1, sizeof(*b));
	int rc = b ? push_window_capture(env, w, &b->pw) : -ENOMEM;

	if (rc) {
		batch_free(b);
		return kiln_error_set(err, -rc,
				      "remote store: capturing a window of %zu processes: %s", w->n,
				      strerror(-rc));
	}
	if (b->pw->n_procs == 0) {
		batch_free(b);
		return 0;
	}
	b->len = push_window_bytes(b->pw);
	return enqueue(r, b, b->pw->n_procs, err);
}

/* Turns b's captured window into a WriteRawRequest (a server without the
 * stream protocol). 0 or -ENOMEM. */
static int batch_writeraw(struct batch *b)
{
	struct agent_profile *profiles;
	struct agent_exec_infos *execs;
	struct agent_labels *labels;
	struct batch *packed = NULL;
	struct buf *bufs;
	int rc;

	if (b->data || !b->pw)
		return 0;
	rc = push_window_profiles(b->pw, &profiles, &bufs, &execs, &labels);
	if (rc)
		return rc;
	rc = pack_window(profiles, b->pw->n_procs, &packed);
	push_window_profiles_free(b->pw, profiles, bufs, execs, labels);
	if (rc)
		return rc;
	/* The sender converts a window it has taken off the queue, so the
	 * queue's byte count no longer depends on b->len. */
	b->data = packed->data;
	b->len = packed->len;
	packed->data = NULL;
	batch_free(packed);
	push_window_free(b->pw);
	b->pw = NULL;
	return 0;
}

static bool retryable(int code)
{
	return code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_DEADLINE_EXCEEDED ||
	       code == GRPC_STATUS_RESOURCE_EXHAUSTED || code == GRPC_STATUS_ABORTED ||
	       code == GRPC_STATUS_INTERNAL || code == GRPC_STATUS_UNKNOWN ||
	       code == GRPC_STATUS_CANCELLED;
}

/* Waits until ms have passed. When the sink starts closing during the
 * wait, returns at once (one prompt flush attempt); a wait that begins
 * while closing runs its course, but not past the flush deadline. New
 * windows signal the same condition, so the wait loops: the backoff must
 * not shrink because data keeps coming. Called with the lock held. */
static void wait_ms(struct sink_remote *r, uint64_t ms)
{
	uint64_t until = (uint64_t)mono_ms() + ms;
	bool was_closing = r->closing;

	for (;;) {
		uint64_t now = (uint64_t)mono_ms(), end = until, left;
		struct timespec ts;

		if (r->closing && !was_closing)
			return;
		if (r->closing && r->deadline_ms < end)
			end = r->deadline_ms;
		if (now >= end)
			return;
		left = end - now;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(left / 1000);
		ts.tv_nsec += (long)(left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
}

/* Pops the oldest queued window; NULL once closing with nothing left or
 * past the flush deadline. Called with the lock held. */
static struct batch *next_batch(struct sink_remote *r)
{
	struct batch *b;

	while (!r->head && !r->closing)
		pthread_cond_wait(&r->cond, &r->lock);
	if (!r->head || (r->closing && (uint64_t)mono_ms() > r->deadline_ms))
		return NULL;
	b = r->head;
	r->head = b->next;
	if (!r->head)
		r->tail = NULL;
	r->queued_bytes -= b->len;
	r->inflight_bytes = b->len;
	return b;
}

/* Sends b once as a WriteRawRequest. */
static int deliver_writeraw(struct grpc_client *client, struct batch *b, struct buf *resp,
			    struct grpc_status *st)
{
	int rc = batch_writeraw(b);

	if (rc) {
		st->code = GRPC_STATUS_INTERNAL;
		snprintf(st->message, sizeof(st->message), "building the WriteRaw request: %s",
			 strerror(-rc));
		return 0;
	}
	return grpc_client_unary(client, WRITE_RAW, b->data, b->len, resp, st);
}

/* Sends b once over the chosen protocol. The stream protocol is tried
 * first under --remote-store-protocol=auto; a server that answers
 * UNIMPLEMENTED gets WriteRaw from then on (the same bytes: the queue keeps
 * WriteRawRequests). A failed call resets the session, so its retry
 * describes every series and stack again and does not depend on what the
 * failed call left on the server. */
static int deliver(struct sink_remote *r, struct grpc_client *client, struct stream_client *sc,
		   struct batch *b, struct buf *req, bool *encoded, struct buf *resp,
		   struct grpc_status *st)
{
	struct kiln_error err = {0};
	size_t n_rows;
	int rc;

	if (r->protocol == SINK_PROTOCOL_WRITERAW || !sc)
		return deliver_writeraw(client, b, resp, st);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!*encoded) {
			rc = b->pw ? stream_client_encode_window(sc, b->pw, b->window_id, req,
								 &n_rows)
				   : stream_client_encode(sc, b->data, b->len, b->window_id, req,
							  &n_rows);
			if (rc) {
				st->code = GRPC_STATUS_INTERNAL;
				snprintf(st->message, sizeof(st->message),
					 "encoding the window: %s", strerror(-rc));
				return 0;
			}
			*encoded = true;
		}
		rc = grpc_client_unary(client, INGEST_PUSH_PATH, req->data, req->len, resp, st);
		if (rc || st->code != GRPC_STATUS_OK) {
			/* Whatever part of the request reached the server, a new
			 * session describes everything again: the retry cannot
			 * depend on it. */
			stream_client_reset(sc);
			*encoded = false;
			if (rc == 0 && st->code == GRPC_STATUS_UNIMPLEMENTED &&
			    r->protocol == SINK_PROTOCOL_AUTO) {
				log_info(
				    "remote store %s: no streaming ingest (%s); using WriteRaw",
				    r->address, st->message);
				r->protocol = SINK_PROTOCOL_WRITERAW;
				return deliver_writeraw(client, b, resp, st);
			}
			return rc;
		}
		rc = stream_client_answer(sc, resp->data, resp->len, b->window_id, &err);
		if (rc == 0) {
			if (r->protocol == SINK_PROTOCOL_AUTO) {
				log_info("remote store %s: using the streaming ingest protocol",
					 r->address);
				r->protocol = SINK_PROTOCOL_STREAM;
			}
			return 0;
		}
		*encoded = false;
		if (rc != -ECONNRESET) {
			st->code = GRPC_STATUS_INTERNAL;
			snprintf(st->message, sizeof(st->message), "%s", err.msg);
			return 0;
		}
		log_debug("remote store %s: the server asked for a new session", r->address);
	}
	st->code = GRPC_STATUS_UNAVAILABLE;
	snprintf(st->message, sizeof(st->message), "the server keeps resetting the session");
	return 0;
}

static void *sender_main(void *arg)
{
	struct sink_remote *r = arg;
	struct kiln_error err = {0};
	struct grpc_client *client = grpc_client_new(&r->cfg, &err);
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
	uint64_t backoff = BACKOFF_MIN_MS;
	struct batch *b = NULL;
	struct buf resp = {0}, req = {0};
	struct stream_client *sc =
	    r->protocol == SINK_PROTOCOL_WRITERAW ? NULL : stream_client_new();
	bool encoded;

	if (!client)
		log_error("remote store %s: %s", r->address, err.msg);
	pthread_mutex_lock(&r->lock);
	while (client && (b = next_batch(r)) != NULL) {
		/* Send this window until it is delivered, refused, or we stop. */
		encoded = false;
		for (;;) {
			struct grpc_status st = {0};
			uint64_t delay;
			int rc;

			pthread_mutex_unlock(&r->lock);
			rc = deliver(r, client, sc, b, &req, &encoded, &resp, &st);
			pthread_mutex_lock(&r->lock);
			if (rc == 0 && st.code == GRPC_STATUS_OK) {
				backoff = BACKOFF_MIN_MS;
				break;
			}
			if (rc == 0 && !retryable(st.code)) {
				log_warn("remote store %s: push refused (%s: %s): dropping %zu "
					 "profiles",
					 r->address, grpc_status_name(st.code), st.message,
					 b->n_profiles);
				count_dropped(r, b->n_profiles);
				break;
			}
			/* Full jitter, so that a fleet of agents does not retry in step. */
			delay = BACKOFF_MIN_MS / 2 + (uint64_t)rand_r(&seed) % backoff;
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			if (r->closing && (uint64_t)mono_ms() + delay >= r->deadline_ms) {
				count_dropped(r, b->n_profiles);
				log_warn(
				    "remote store %s: dropping %zu undelivered profiles at exit",
				    r->address, b->n_profiles);
				break;
			}
			log_warn("remote store %s: push failed (%s: %s), retrying in %llu ms",
				 r->address, grpc_status_name(st.code), st.message,
				 (unsigned long long)delay);
			wait_ms(r, delay);
		}
		r->inflight_bytes = 0;
		batch_free(b);
		b = NULL;
	}
	/* Whatever is left could not be delivered in time. */
	while (r->head) {
		b = r->head;
		r->head = b->next;
		count_dropped(r, b->n_profiles);
		log_warn("remote store %s: dropping %zu undelivered profiles at exit", r->address,
			 b->n_profiles);
		batch_free(b);
	}
	r->tail = NULL;
	r->queued_bytes = 0;
	r->exited = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	buf_free(&resp);
	buf_free(&req);
	stream_client_free(sc);
	grpc_client_free(client);
	return NULL;
}

static void remote_close(struct agent_sink *s)
{
	struct sink_remote *r = (struct sink_remote *)s;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->closing = true;
	r->deadline_ms = (uint64_t)mono_ms() + CLOSE_FLUSH_MS;
	pthread_cond_broadcast(&r->cond);
	/* Give the sender until the deadline; then abort a call that is still
	 * hanging on a server that does not answer. */
	while (!r->exited && (uint64_t)mono_ms() < r->deadline_ms) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
	atomic_store(&r->cancel, true);
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r->address);
	free(r->token);
	free(r);
}

int sink_remote_new(const struct sink_remote_config *cfg, struct agent_metrics *metrics,
		    struct agent_sink **out, struct kiln_error *err)
{
	struct sink_remote *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->address = strdup(cfg->address);
	r->token = cfg->bearer_token ? strdup(cfg->bearer_token) : NULL;
	if (!r->address || (cfg->bearer_token && !r->token)) {
		free(r->address);
		free(r->token);
		free(r);
		return -ENOMEM;
	}
	r->cfg.address = r->address;
	r->cfg.insecure = cfg->insecure;
	r->cfg.skip_verify = cfg->insecure_skip_verify;
	r->cfg.tls = cfg->tls;
	r->cfg.bearer_token = r->token;
	r->cfg.timeout_ms = 10000;
	r->cfg.cancel = &r->cancel;
	r->max_bytes = cfg->buffer_bytes ? cfg->buffer_bytes : (size_t)64 << 20;
	r->protocol = cfg->protocol;
	r->next_window_id = 1;
	r->sink.name = "remote";
	r->sink.shape = SINK_PER_PROCESS;
	r->sink.write_window = remote_write_window;
	/* The stream protocol takes windows as they are; WriteRaw (chosen up
	 * front) takes the pprofs the agent builds. */
	if (cfg->protocol != SINK_PROTOCOL_WRITERAW)
		r->sink.write_stacks = remote_write_stacks;
	r->sink.close = remote_close;
	r->sink.metrics = metrics;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	rc = pthread_create(&r->thread, NULL, sender_main, r);
	if (rc) {
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		free(r->address);
		free(r->token);
		free(r);
		return kiln_error_set(err, rc, "remote store: starting the sender thread: %s",
				      strerror(rc));
	}
	*out = &r->sink;
	return 0;
}
