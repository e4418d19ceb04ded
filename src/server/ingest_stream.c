/*
 * ingest_stream.c — sessions and the row fast path of IngestService/Push
 * (ingest_stream.h, docs/API.md).
 *
 * Why sessions and not one bidirectional HTTP/2 stream: the agent's gRPC
 * client is libcurl, which cannot interleave reading and writing one
 * stream, and the server's h2.c hands a handler one whole message. A
 * session gives what the stream would (each series and stack described
 * once, rows by reference) over ordinary unary calls: the agent keeps a
 * "sent" set per session and starts a new session (start = true, all
 * references again from 0) whenever the server answers reset_session
 * (restart, eviction, a limit), so no round trip is spent asking for
 * missing stacks.
 *
 * Invariants:
 *   1. a session's references are dense: series reference r is
 *      series[r] once defined, a definition below the next reference is a
 *      resend of the same content (a retried call) and skipped, one above it
 *      is a gap and refused;
 *   2. a window is acknowledged only when store_write_rows returned (the
 *      rows are fsynced) or the store already holds it (its mark);
 *   3. one agent's pushes run one at a time (the session lock), which is
 *      what store_write_rows asks of a writer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/htab.h"
#include "common/log.h"
#include "pprof/pprof.h"
#include "server/ingest_stream.h"

struct stream_session {
	uint64_t agent_id, session_id; /* session_id 0: no session */
	pthread_mutex_t mu;
	int busy;	   /* pushes holding mu or waiting for it; guarded by table mu */
	uint64_t last_use; /* table tick of the last push; guarded by table mu */
	uint32_t *series, *stacks;
	size_t n_series, cap_series, n_stacks, cap_stacks;
};

struct stream_sessions {
	pthread_mutex_t mu;
	struct stream_limits lim;
	struct htab *by_agent; /* agent id -> slot + 1 */
	struct stream_session **slots;
	size_t n_slots;
	uint64_t tick;
};

struct stream_sessions *stream_sessions_new(const struct stream_limits *lim)
{
	struct stream_sessions *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	if (lim)
		t->lim = *lim;
	if (!t->lim.max_sessions)
		t->lim.max_sessions = 65536;
	if (!t->lim.max_stacks_per_session)
		t->lim.max_stacks_per_session = 1u << 20;
	if (!t->lim.max_series_per_session)
		t->lim.max_series_per_session = 65536;
	t->by_agent = htab_new(64);
	t->slots = calloc(t->lim.max_sessions, sizeof(*t->slots));
	if (!t->by_agent || !t->slots) {
		htab_free(t->by_agent);
		free(t->slots);
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	return t;
}

static void session_clear(struct stream_session *se)
{
	free(se->series);
	free(se->stacks);
	se->series = se->stacks = NULL;
	se->n_series = se->cap_series = se->n_stacks = se->cap_stacks = 0;
	se->session_id = 0;
}

void stream_sessions_free(struct stream_sessions *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_slots; i++) {
		session_clear(t->slots[i]);
		pthread_mutex_destroy(&t->slots[i]->mu);
		free(t->slots[i]);
	}
	free(t->slots);
	htab_free(t->by_agent);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void stream_sessions_stats(struct stream_sessions *t, size_t *n_sessions, size_t *bytes)
{
	size_t n = 0, b = sizeof(*t) + t->lim.max_sessions * sizeof(*t->slots);

	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n_slots; i++) {
		const struct stream_session *se = t->slots[i];

		n += se->session_id != 0;
		b += sizeof(*se) + (se->cap_series + se->cap_stacks) * sizeof(uint32_t) +
		     3 * sizeof(uint64_t); /* its entry in by_agent */
	}
	pthread_mutex_unlock(&t->mu);
	*n_sessions = n;
	*bytes = b;
}

/* The slot of agent_id, taken (busy) until session_release; a new agent
 * takes a fresh slot or the least recently used idle one. NULL when every
 * slot is in use (or out of memory). */
static struct stream_session *session_acquire(struct stream_sessions *t, uint64_t agent_id)
{
	struct stream_session *se = NULL;
	uint64_t idx;

	pthread_mutex_lock(&t->mu);
	if (htab_get(t->by_agent, &agent_id, sizeof(agent_id), &idx)) {
		se = t->slots[idx - 1];
	} else if (t->n_slots < t->lim.max_sessions) {
		se = calloc(1, sizeof(*se));
		if (se && htab_put(t->by_agent, &agent_id, sizeof(agent_id), t->n_slots + 1)) {
			free(se);
			se = NULL;
		}
		if (se) {
			pthread_mutex_init(&se->mu, NULL);
			se->agent_id = agent_id;
			t->slots[t->n_slots++] = se;
		}
	} else {
		/* Full: empty the least recently used idle session for this
		 * agent and index the slots again (the table has no delete;
		 * this happens only with max_sessions agents at once). */
		for (size_t i = 0; i < t->n_slots; i++)
			if (!t->slots[i]->busy && (!se || t->slots[i]->last_use < se->last_use))
				se = t->slots[i];
		if (se) {
			session_clear(se);
			se->agent_id = agent_id;
			htab_clear(t->by_agent, 0);
			for (size_t i = 0; i < t->n_slots; i++)
				if (htab_put(t->by_agent, &t->slots[i]->agent_id, sizeof(uint64_t),
					     i + 1))
					log_warn("stream ingest: out of memory indexing sessions");
		}
	}
	if (se) {
		se->busy++;
		se->last_use = ++t->tick;
	}
	pthread_mutex_unlock(&t->mu);
	if (se)
		pthread_mutex_lock(&se->mu);
	return se;
}

static void session_release(struct stream_sessions *t, struct stream_session *se)
{
	pthread_mutex_unlock(&se->mu);
	pthread_mutex_lock(&t->mu);
	se->busy--;
	pthread_mutex_unlock(&t->mu);
}

static int grow(uint32_t **v, size_t *cap, size_t need)
{
	size_t nc = *cap ? *cap : 64;
	uint32_t *nv;

	if (need <= *cap)
		return 0;
	while (nc < need)
		nc *= 2;
	if (!(nv = realloc(*v, nc * sizeof(*nv))))
		return -ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

static int define_series(struct stream_sessions *t, struct stream_session *se, struct store *s,
			 const struct ingest_series_def *d, struct kiln_error *err)
{
	struct store_label labels[INGEST_PUSH_MAX_LABELS];
	struct store_series_type type = {d->sample_type, d->sample_unit, d->period_type,
					 d->period_unit, d->period,	 d->delta};
	int64_t id;

	if (d->ref < se->n_series)
		return 0; /* sent again by a retried call: the same content */
	if (d->ref > se->n_series)
		return kiln_error_set(err, EINVAL, "ref %u: the next series ref is %zu", d->ref,
				      se->n_series);
	if (se->n_series >= t->lim.max_series_per_session)
		return kiln_error_set(err, ERANGE, "more than %zu series in one session",
				      t->lim.max_series_per_session);
	if (!*d->sample_type)
		return kiln_error_set(err, EINVAL, "sample_type missing");
	for (size_t i = 0; i < d->n_labels; i++)
		labels[i] = (struct store_label){d->labels[i].name, d->labels[i].value};
	id = store_intern_series(s, labels, d->n_labels, &type, err);
	if (id < 0)
		return (int)id;
	if (grow(&se->series, &se->cap_series, se->n_series + 1))
		return kiln_error_set(err, ENOMEM, "out of memory");
	se->series[se->n_series++] = (uint32_t)id;
	return 0;
}

static int define_stacks(struct stream_sessions *t, struct stream_session *se, struct store *s,
			 const struct ingest_stack_defs *d, struct kiln_error *err)
{
	struct pprof_decode_opts opts = {.max_inflated_bytes = 64u << 20};
	struct store_exec_info *exec = NULL;
	struct pprof_profile *p = NULL;
	uint32_t *ids = NULL;
	size_t n;
	int rc;

	if (d->first_ref > se->n_stacks)
		return kiln_error_set(err, EINVAL, "first_ref %u: the next stack ref is %zu",
				      d->first_ref, se->n_stacks);
	if ((rc = pprof_decode(d->pprof, d->pprof_len, &opts, &p, err))) {
		kiln_error_prefix(err, "pprof: ");
		return rc;
	}
	n = pprof_profile_msg(p)->n_sample;
	if (d->first_ref + n <= se->n_stacks)
		goto out; /* every one sent before */
	if (se->n_stacks + n > t->lim.max_stacks_per_session) {
		rc = kiln_error_set(err, ERANGE, "more than %zu stacks in one session",
				    t->lim.max_stacks_per_session);
		goto out;
	}
	exec = calloc(d->n_exec + 1, sizeof(*exec));
	ids = malloc((n + 1) * sizeof(*ids));
	if (!exec || !ids || grow(&se->stacks, &se->cap_stacks, d->first_ref + n)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < d->n_exec; i++)
		exec[i] = (struct store_exec_info){d->exec[i].elf_type, d->exec[i].load_offset,
						   d->exec[i].load_vaddr};
	if ((rc = store_intern_stacks(s, p, exec, d->n_exec, ids, err)))
		goto out;
	for (size_t i = se->n_stacks - d->first_ref; i < n; i++)
		se->stacks[se->n_stacks++] = ids[i];
out:
	pprof_profile_free(p);
	free(exec);
	free(ids);
	return rc;
}

/* Decodes a window's rows into groups (arrays from a); refs must be
 * defined in this session. */
static int window_rows(struct stream_session *se, const struct ingest_window *w, struct arena *a,
		       struct store_rows *groups, size_t *n_rows, struct kiln_error *err)
{
	*n_rows = 0;
	for (size_t i = 0; i < w->n_rows; i++) {
		const struct ingest_series_rows *r = &w->rows[i];
		const uint8_t *p = r->rows, *end = r->rows + r->len;
		size_t max = r->len / 2 + 1, n = 0;
		uint32_t *stacks = arena_alloc(a, max * sizeof(*stacks));
		int64_t *values = arena_alloc(a, max * sizeof(*values));
		uint64_t ref = 0;
		int64_t v;
		int k;

		if (!stacks || !values)
			return kiln_error_set(err, ENOMEM, "out of memory");
		if (r->series_ref >= se->n_series)
			return kiln_error_set(err, EINVAL,
					      "rows[%zu]: series_ref %u was not defined in this "
					      "session",
					      i, r->series_ref);
		while ((k = ingest_rows_next(&p, end, &ref, &v)) == 1) {
			if (ref >= se->n_stacks)
				return kiln_error_set(err, EINVAL,
						      "rows[%zu] row %zu: stack ref %llu was not "
						      "defined in this session",
						      i, n, (unsigned long long)ref);
			stacks[n] = se->stacks[ref];
			values[n++] = v;
		}
		if (k < 0)
			return kiln_error_set(err, EINVAL, "rows[%zu] row %zu: malformed", i, n);
		groups[i] = (struct store_rows){
		    se->series[r->series_ref], r->has_timestamp ? r->timestamp_ms : w->timestamp_ms,
		    stacks, values, n};
		*n_rows += n;
	}
	return 0;
}

int stream_push_apply(struct stream_sessions *t, struct store *s, const struct ingest_push *push,
		      struct stream_push_result *res, struct kiln_error *err)
{
	struct stream_session *se;
	struct arena *a = NULL;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	if (push->session_id == 0)
		return kiln_error_set(err, EINVAL, "session_id 0 is reserved");
	se = session_acquire(t, push->agent_id);
	if (!se)
		return kiln_error_set(err, EBUSY, "every stream session is in use");
	if (push->start) {
		session_clear(se);
		se->session_id = push->session_id;
	} else if (se->session_id != push->session_id) {
		res->reset_session = true;
		goto out;
	}
	if (!(a = arena_new(0))) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t wi = 0; wi < push->n_windows && !rc; wi++) {
		const struct ingest_window *w = &push->windows[wi];
		struct store_rows *groups;
		size_t n_rows;

		for (size_t i = 0; i < w->n_series && !rc; i++)
			if ((rc = define_series(t, se, s, &w->series[i], err)))
				kiln_error_prefix(err, "series[%zu]: ", i);
		for (size_t i = 0; i < w->n_stacks && !rc; i++)
			if ((rc = define_stacks(t, se, s, &w->stacks[i], err)))
				kiln_error_prefix(err, "stacks[%zu]: ", i);
		if (rc == -ERANGE) {
			/* A session at its limits starts over (the agent resends
			 * what it needs); nothing of this window was written. */
			kiln_error_clear(err);
			session_clear(se);
			res->reset_session = true;
			rc = 0;
			break;
		}
		if (rc)
			break;
		if (store_rows_seen(s, push->agent_id, w->window_id)) {
			res->acked[res->n_acked++] = w->window_id;
			res->duplicates++;
			continue;
		}
		arena_reset(a);
		groups = arena_calloc(a, w->n_rows + 1, sizeof(*groups));
		if (!groups) {
			rc = kiln_error_set(err, ENOMEM, "out of memory");
			break;
		}
		rc = window_rows(se, w, a, groups, &n_rows, err);
		if (!rc) {
			rc = store_write_rows(s, push->agent_id, w->window_id, groups, w->n_rows,
					      err);
			if (rc >= 0) {
				res->duplicates += rc == 1;
				res->rows_written += rc == 1 ? 0 : n_rows;
				res->acked[res->n_acked++] = w->window_id;
				rc = 0;
			}
		}
		if (rc)
			kiln_error_prefix(err, "window %llu: ", (unsigned long long)w->window_id);
	}
out:
	arena_free(a);
	session_release(t, se);
	return rc;
}
