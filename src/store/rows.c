/*
 * rows.c — the row path of the store: writes that arrive as rows already
 * keyed by metastore series and stack ids (the streaming ingest protocol,
 * src/server/ingest_stream.c), with no pprof profile built or decoded.
 *
 * A write is one WAL record of type REC_ROWS:
 *   u8 2, writer id u64le, batch id uvarint, n_parts uvarint,
 *   per part: uvarint length + one REC_SAMPLES record (store.c's format:
 *   timestamp, series ids, (stack delta, value) rows)
 * so a row costs its two varints, with no label set. The record carries the
 * writer's batch id (an agent's window id): applying it, live or during
 * replay, raises the writer's mark, and a batch at or below the mark is a
 * replay of something durable that store_write_rows acknowledges without
 * writing it again. Invariants:
 *   1. a mark is raised only by applying a durable record, so a mark never
 *      claims a batch the WAL does not hold;
 *   2. after a crash, replaying the WAL raises the marks again before the
 *      server accepts writes, so a batch acknowledged before the crash is
 *      recognised when the agent sends it again.
 * Marks live in memory and in the WAL records only: once a cut has moved a
 * writer's records into blocks and deleted their segments, a restart no
 * longer knows its mark (the first batch after it is taken as new). An
 * agent only re-sends batches it holds no acknowledgement for, which a cut
 * cannot be older than unless the server died between a window's fsync and
 * its answer and a cut happened before the restart.
 *
 * Callers serialize the writes of one writer id (the server's session lock
 * does); different writers commit concurrently (group commit).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/satadd.h"
#include "store/ch.h"
#include "store/internal.h"

#define MAX_WRITERS (1u << 20)

struct rows_marks {
	pthread_mutex_t mu;
	struct htab *last; /* writer id -> last durable batch id + 1 */
};

static struct rows_marks *marks_get(struct store *s)
{
	struct rows_marks *m = atomic_load(&s->row_marks), *fresh;

	if (m)
		return m;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return NULL;
	fresh->last = htab_new(64);
	if (!fresh->last) {
		free(fresh);
		return NULL;
	}
	pthread_mutex_init(&fresh->mu, NULL);
	if (!atomic_compare_exchange_strong(&s->row_marks, &m, fresh)) {
		htab_free(fresh->last);
		pthread_mutex_destroy(&fresh->mu);
		free(fresh);
		return m;
	}
	return fresh;
}

void store_rows_marks_free(struct store *s)
{
	struct rows_marks *m = atomic_load(&s->row_marks);

	if (!m)
		return;
	htab_free(m->last);
	pthread_mutex_destroy(&m->mu);
	free(m);
	atomic_store(&s->row_marks, NULL);
}

static int marks_note(struct store *s, uint64_t writer, uint64_t batch)
{
	struct rows_marks *m = marks_get(s);
	uint64_t cur = 0;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	pthread_mutex_lock(&m->mu);
	if (!htab_get(m->last, &writer, sizeof(writer), &cur) || cur < batch + 1)
		rc = htab_put(m->last, &writer, sizeof(writer), batch + 1);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

bool store_rows_seen(struct store *s, uint64_t writer, uint64_t batch)
{
	struct rows_marks *m = marks_get(s);
	uint64_t cur = 0;
	bool seen;

	if (!m)
		return false;
	pthread_mutex_lock(&m->mu);
	seen = htab_get(m->last, &writer, sizeof(writer), &cur) && batch < cur;
	pthread_mutex_unlock(&m->mu);
	return seen;
}

/* Applies a REC_ROWS record (store_apply_record hands it here): every part
 * is checked for framing before any is applied, then the mark is raised. */
int store_apply_rows_record(struct store *s, const uint8_t *p, size_t len)
{
	struct rd r = rd_of(p, len);
	const uint8_t *type = rd_bytes(&r, 1), *w = rd_bytes(&r, 8), *body;
	uint64_t writer, batch, n_parts;
	int rc;

	if (!type || !w || *type != REC_ROWS)
		return -EBADMSG;
	writer = get_u64le(w);
	batch = rd_uvarint(&r);
	n_parts = rd_below(&r, (uint64_t)(r.end - r.p) + 1);
	body = r.p;
	for (uint64_t i = 0; i < n_parts && !r.bad; i++) {
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) + 1);

		rd_bytes(&r, n);
	}
	if (r.bad || r.p != r.end)
		return -EBADMSG;
	r.p = body;
	for (uint64_t i = 0; i < n_parts; i++) {
		uint64_t n = rd_uvarint(&r);
		const uint8_t *part = rd_bytes(&r, n);

		if ((rc = store_apply_samples_record(s, part, n)))
			return rc;
	}
	return marks_note(s, writer, batch);
}

/* ---- interning series ---------------------------------------------------- */

int64_t store_intern_series(struct store *s, const struct store_label *labels, size_t n_labels,
			    const struct store_series_type *t, struct kiln_error *err)
{
	struct store_label *sorted = calloc(n_labels + 1, sizeof(*sorted));
	struct buf type = {0};
	const char *name;
	int64_t id;
	int nl;

	if (!sorted)
		return kiln_error_set(err, ENOMEM, "out of memory");
	nl = series_check_labels(labels, n_labels, s->opts.max_labels_per_series, sorted, &name,
				 err);
	if (nl < 0) {
		id = nl;
		goto out;
	}
	id = buf_printf(&type, "%s:%s:%s:%s:%s%s", name, t->sample_type, t->sample_unit,
			t->period_type, t->period_unit, t->delta ? ":delta" : "");
	id = id ?: buf_terminate(&type);
	if (id) {
		id = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	pthread_rwlock_wrlock(&s->sx.lock);
	pthread_mutex_lock(&s->meta.mu);
	id = series_get(&s->sx, &s->meta, name, (char *)type.data, t->sample_type, t->sample_unit,
			t->period_type, t->period_unit, t->period, t->delta, sorted, (size_t)nl);
	pthread_mutex_unlock(&s->meta.mu);
	pthread_rwlock_unlock(&s->sx.lock);
	if (id < 0)
		id = kiln_error_set(err, (int)-id, "cannot intern the series: %s",
				    strerror((int)-id));
out:
	free(sorted);
	buf_free(&type);
	return id;
}

/* ---- writing rows ---------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t d)
{
	return a / d - (a % d < 0);
}

struct row_pair {
	uint32_t stack;
	int64_t value;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct row_pair *x = a, *y = b;

	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Appends one REC_SAMPLES record for g (stacks sorted, duplicates summed,
 * zero sums dropped) to out, length-prefixed; *n_rows gets the rows kept. */
static int encode_part(const struct store_rows *g, struct row_pair *pairs, struct buf *part,
		       struct buf *out, size_t *n_rows)
{
	uint32_t last = 0;
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < g->n; i++)
		pairs[i] = (struct row_pair){g->stacks[i], g->values[i]};
	qsort(pairs, g->n, sizeof(*pairs), cmp_pair);
	buf_reset(part);
	for (size_t i = 0; i < g->n;) {
		uint32_t st = pairs[i].stack;
		int64_t v = 0;

		for (; i < g->n && pairs[i].stack == st; i++)
			sat_acc_i64(&v, pairs[i].value);
		if (v == 0)
			continue;
		if ((rc = put_uvarint(part, st - last)) || (rc = put_svarint(part, v)))
			return rc;
		last = st;
		n++;
	}
	*n_rows = n;
	if (n == 0)
		return 0;
	struct buf head = {0};
	rc = buf_append(&head, (uint8_t[]){REC_SAMPLES}, 1);
	rc = rc ?: put_svarint(&head, g->timestamp_ms);
	rc = rc ?: put_uvarint(&head, 1);
	rc = rc ?: put_uvarint(&head, g->series);
	rc = rc ?: put_uvarint(&head, n);
	rc = rc ?: put_uvarint(out, head.len + part->len);
	rc = rc ?: buf_append(out, head.data, head.len);
	rc = rc ?: buf_append(out, part->data, part->len);
	buf_free(&head);
	return rc;
}

int store_write_rows(struct store *s, uint64_t writer, uint64_t batch, const struct store_rows *g,
		     size_t n_groups, struct kiln_error *err)
{
	size_t n_series = chunked_count(&s->sx.series), n_stacks = chunked_count(&s->meta.stacks);
	size_t max_rows = 0, n_parts = 0;
	struct row_pair *pairs = NULL;
	struct buf rec = {0}, parts = {0}, part = {0};
	uint8_t w[8];
	int rc;

	if (atomic_load(&s->closing))
		return kiln_error_set(err, ESHUTDOWN, "store is shutting down");
	if (store_rows_seen(s, writer, batch))
		return 1;
	for (size_t i = 0; i < n_groups; i++) {
		if (g[i].series >= n_series)
			return kiln_error_set(err, EINVAL, "rows[%zu]: no series %u", i,
					      g[i].series);
		for (size_t j = 0; j < g[i].n; j++)
			if (g[i].stacks[j] >= n_stacks)
				return kiln_error_set(err, EINVAL, "rows[%zu][%zu]: no stack %u", i,
						      j, g[i].stacks[j]);
		max_rows = g[i].n > max_rows ? g[i].n : max_rows;
	}
	pairs = malloc((max_rows + 1) * sizeof(*pairs));
	if (!pairs) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < n_groups && !rc; i++) {
		size_t kept = 0;

		rc = encode_part(&g[i], pairs, &part, &parts, &kept);
		n_parts += kept > 0;
	}
	for (int k = 0; k < 8; k++)
		w[k] = (uint8_t)(writer >> (8 * k));
	rc = rc ?: buf_append(&rec, (uint8_t[]){REC_ROWS}, 1);
	rc = rc ?: buf_append(&rec, w, sizeof(w));
	rc = rc ?: put_uvarint(&rec, batch);
	rc = rc ?: put_uvarint(&rec, n_parts);
	rc = rc ?: buf_append(&rec, parts.data, parts.len);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory encoding the WAL record");
		goto out;
	}
	if (s->ch) {
		/* ClickHouse is the durable copy (ch_write.c): no WAL, and the
		 * window's marker there, not the local mark, is what dedupes. */
		rc = ch_commit_rows(s, writer, batch, parts.data, parts.len, n_parts, err);
		if (rc >= 0 && marks_note(s, writer, batch))
			log_warn("store: out of memory noting batch %llu",
				 (unsigned long long)batch);
		goto out;
	}
	if ((rc = wal_commit(s, rec.data, rec.len, err)))
		goto out;
	pthread_rwlock_wrlock(&s->head_lock);
	rc = store_apply_rows_record(s, rec.data, rec.len);
	bool kick = s->head->n_rows >= s->opts.head_max_rows ||
		    floor_div(s->head->max_ts, s->opts.block_duration_ms) -
			    floor_div(s->head->min_ts, s->opts.block_duration_ms) >=
			2;
	pthread_rwlock_unlock(&s->head_lock);
	wal_applied(&s->wal);
	if (rc) {
		/* Durable, and replayed at the next start; only memory ran out. */
		rc = kiln_error_set(err, -rc, "cannot apply the rows in memory: %s", strerror(-rc));
		goto out;
	}
	if (kick) {
		pthread_mutex_lock(&s->bg_mu);
		s->bg_kick = true;
		pthread_cond_signal(&s->bg_cond);
		pthread_mutex_unlock(&s->bg_mu);
	}
out:
	free(pairs);
	buf_free(&rec);
	buf_free(&parts);
	buf_free(&part);
	return rc;
}
