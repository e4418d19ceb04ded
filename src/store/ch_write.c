/*
 * ch_write.c — one sample record into ClickHouse.
 *
 * Order: first the objects the rows refer to that this server has not yet
 * seen stored (series, mappings, functions, locations, stacks; inserting
 * one twice is harmless, see ch_schema.c), then the rows in one INSERT.
 * A reader therefore never finds a row whose stack is missing, and the
 * write is acknowledged only once ClickHouse confirmed the rows.
 *
 * Idempotent retries: all rows of a record carry one random batch id and
 * go in one INSERT, whose last row is the batch's commit marker (type and
 * series hash 0, CH_MARKER_*). ClickHouse writes an INSERT as one part
 * (max_insert_block_size is raised above any record's size), but a body cut
 * short on a row boundary (the sender killed mid-request) would be taken
 * as complete: so readers count only rows whose batch has its marker
 * (ch_read.c), and a batch without one is garbage that retention drops.
 * When the outcome of the INSERT is unknown (the connection broke after
 * sending, a timeout, ClickHouse restarting), the retry first asks whether
 * the marker exists (one primary-key range) and, if not, inserts again
 * under a new batch id, so that rows of a partial first attempt never join
 * it. A retried write is counted once. (18.16 deduplicates retried inserts
 * only for Replicated tables; this works on any engine.)
 *
 * Streamed windows (the row path, ch_commit_rows) are written the same way,
 * all parts of a window in one batch; their marker also carries the key of
 * (agent, window), which is looked up before writing, so that a window an
 * agent sends again after a lost answer, to any server, is counted once.
 * (Two servers writing the same window at the same moment could both miss
 * the other's marker; an agent sends a window to one server at a time.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/satadd.h"
#include "store/ch.h"

#define INSERT_ATTEMPTS 6
#define ROW_BYTES	48 /* a samples row in RowBinary: six 8-byte columns */

static int put_u64(struct buf *b, uint64_t v)
{
	return put_u64le(b, v);
}

static int put_str(struct buf *b, const char *s)
{
	size_t n = strlen(s);

	return put_uvarint(b, n) ?: buf_append(b, s, n);
}

/* Objects to write, one RowBinary body per table, and what to mark stored
 * once they are in. */
struct ch_batch {
	struct buf series, mappings, functions, locations, stacks, samples;
	struct htab *seen; /* (kind, id) already queued in this batch */
	uint32_t *mark;	   /* kind << 29 | id is too tight: pairs instead */
	size_t n_mark, cap_mark;
};

static void batch_free(struct ch_batch *b)
{
	buf_free(&b->series);
	buf_free(&b->mappings);
	buf_free(&b->functions);
	buf_free(&b->locations);
	buf_free(&b->stacks);
	buf_free(&b->samples);
	htab_free(b->seen);
	free(b->mark);
}

/* true if (k, id) must be written in this batch (not stored, not queued). */
static int want(struct store *s, struct ch_batch *b, enum ch_kind k, uint32_t id)
{
	uint32_t key[2] = {k, id};
	uint64_t v = 0;
	int rc;

	if (ch_memo_is_stored(s->ch, k, id))
		return 0;
	rc = htab_intern(b->seen, key, sizeof(key), &v);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	if (b->n_mark + 2 > b->cap_mark) {
		size_t cap = b->cap_mark ? b->cap_mark * 2 : 256;
		uint32_t *m = realloc(b->mark, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		b->mark = m;
		b->cap_mark = cap;
	}
	b->mark[b->n_mark++] = k;
	b->mark[b->n_mark++] = id;
	return 1;
}

static int add_mapping(struct store *s, struct ch_batch *b, uint32_t id)
{
	int w = id ? want(s, b, CH_MAPPING, id) : 0;

	if (w <= 0)
		return w;
	const struct meta_mapping *mp = chunked_at(&s->meta.mappings, id);
	struct buf *o = &b->mappings;
	return put_u64(o, ch_hash_mapping(s, id)) ?: put_u64(o, mp->start)
	    ?: put_u64(o, mp->limit)
	    ?: put_u64(o, mp->offset)
	    ?: put_str(o, meta_str(&s->meta, mp->filename))
	    ?: put_str(o, meta_str(&s->meta, mp->build_id))
	    ?: put_u32le(o, mp->flags)
	    ?: put_u32le(o, mp->elf_type)
	    ?: put_u64(o, mp->load_offset)
	    ?: put_u64(o, mp->load_vaddr);
}

static int add_function(struct store *s, struct ch_batch *b, uint32_t id)
{
	int w = id ? want(s, b, CH_FUNCTION, id) : 0;

	if (w <= 0)
		return w;
	const struct meta_function *f = chunked_at(&s->meta.functions, id);
	struct buf *o = &b->functions;
	return put_u64(o, ch_hash_function(s, id)) ?: put_str(o, meta_str(&s->meta, f->name))
	    ?: put_str(o, meta_str(&s->meta, f->system_name))
	    ?: put_str(o, meta_str(&s->meta, f->filename))
	    ?: put_u64(o, (uint64_t)f->start_line);
}

static int add_location(struct store *s, struct ch_batch *b, uint32_t id)
{
	int w = want(s, b, CH_LOCATION, id);

	if (w <= 0)
		return w;
	struct meta_location *l = chunked_at(&s->meta.locations, id);
	const struct meta_lines *ls = atomic_load(&l->lines);
	/* As pushed: a location that came without lines is stored without the
	 * lines this server's symbolizer may have found since. */
	uint32_t n = atomic_load(&l->sym) == SYM_NONE ? ls->n : 0;
	struct buf *o = &b->locations;
	int rc = add_mapping(s, b, l->mapping);

	for (uint32_t i = 0; i < n && rc >= 0; i++)
		rc = add_function(s, b, ls->l[i].function);
	if (rc < 0)
		return rc;
	rc = put_u64(o, ch_hash_location(s, id)) ?: put_u64(o, ch_hash_mapping(s, l->mapping))
	    ?: put_u64(o, l->address)
	    ?: put_uvarint(o, n);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = put_u64(o, ch_hash_function(s, ls->l[i].function));
	rc = rc ?: put_uvarint(o, n);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = put_u64(o, (uint64_t)ls->l[i].line);
	return rc;
}

static int add_stack(struct store *s, struct ch_batch *b, uint32_t id)
{
	int w = want(s, b, CH_STACK, id);

	if (w <= 0)
		return w;
	const struct meta_stack *sk = chunked_at(&s->meta.stacks, id);
	int rc = 0;

	for (uint32_t i = 0; i < sk->n && rc >= 0; i++)
		rc = add_location(s, b, sk->locs[i]);
	if (rc < 0)
		return rc;
	rc = put_u64(&b->stacks, ch_hash_stack(s, id)) ?: put_uvarint(&b->stacks, sk->n);
	for (uint32_t i = 0; i < sk->n && !rc; i++)
		rc = put_u64(&b->stacks, ch_hash_location(s, sk->locs[i]));
	return rc;
}

static int add_series(struct store *s, struct ch_batch *b, uint32_t id)
{
	int w = want(s, b, CH_SERIES, id);

	if (w <= 0)
		return w;
	const struct series *se = series_at(&s->sx, id);
	struct buf *o = &b->series;
	int rc = put_u64(o, ch_hash_series(s, id)) ?: put_u64(o, ch_hash_type(se->type))
	    ?: put_str(o, se->type)
	    ?: put_str(o, se->name)
	    ?: put_str(o, se->sample_type)
	    ?: put_str(o, se->sample_unit)
	    ?: put_str(o, se->period_type)
	    ?: put_str(o, se->period_unit)
	    ?: put_u64(o, (uint64_t)se->period)
	    ?: buf_append(o, (uint8_t[]){se->delta}, 1)
	    ?: put_uvarint(o, se->n_labels);
	for (size_t i = 0; i < se->n_labels && !rc; i++)
		rc = put_str(o, se->labels[i].name);
	rc = rc ?: put_uvarint(o, se->n_labels);
	for (size_t i = 0; i < se->n_labels && !rc; i++)
		rc = put_str(o, se->labels[i].value);
	return rc;
}

static int add_sample(struct buf *o, uint64_t type, uint64_t series, int64_t ts, uint64_t stack,
		      int64_t value, uint64_t batch)
{
	return put_u64(o, type) ?: put_u64(o, series)
	    ?: put_u64(o, (uint64_t)ts)
	    ?: put_u64(o, stack)
	    ?: put_u64(o, (uint64_t)value)
	    ?: put_u64(o, batch);
}

/* Decodes rec (one REC_SAMPLES record, ingest.c's format; made by this
 * process, but checked like any input) into b: objects to write and the
 * samples rows of batch. *ts gets the record's time. */
static int batch_add_record(struct store *s, const uint8_t *rec, size_t len, struct ch_batch *b,
			    uint64_t batch, int64_t *ts_out)
{
	struct rd r = rd_of(rec, len);
	size_t n_series = chunked_count(&s->sx.series), n_stacks = chunked_count(&s->meta.stacks);
	const uint8_t *type = rd_bytes(&r, 1);
	int64_t ts = rd_svarint(&r);
	uint64_t ns = rd_below(&r, 1 << 16);
	int rc = 0;

	if (!type || *type != REC_SAMPLES)
		return -EBADMSG;
	for (uint64_t i = 0; i < ns && !r.bad && rc >= 0; i++) {
		uint32_t id = (uint32_t)rd_below(&r, n_series);
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 2 + 1), st = 0;
		int64_t total = 0;

		if (r.bad)
			break;
		const struct series *se = series_at(&s->sx, id);
		uint64_t th = ch_hash_type(se->type), sh = ch_hash_series(s, id);

		rc = add_series(s, b, id);
		for (uint64_t j = 0; j < n && !r.bad && rc >= 0; j++) {
			st += rd_uvarint(&r);
			int64_t v = rd_svarint(&r);
			if (st >= n_stacks) {
				r.bad = true;
				break;
			}
			sat_acc_i64(&total, v);
			rc = add_stack(s, b, (uint32_t)st);
			if (rc >= 0)
				rc = add_sample(&b->samples, th, sh, ts,
						ch_hash_stack(s, (uint32_t)st), v, batch);
		}
		if (rc >= 0)
			rc = add_sample(&b->samples, CH_TOTALS_TYPE, sh, ts, th, total, batch);
	}
	if (rc < 0)
		return rc;
	if (r.bad || r.p != r.end)
		return -EBADMSG;
	*ts_out = ts;
	return 0;
}

/* The batch's commit marker, last row of its INSERT: at time ts, its value
 * the number of rows before it; its stack column holds the key of the
 * streamed window it completes (ch_window_key), else 0. */
static int batch_add_marker(struct ch_batch *b, int64_t ts, uint64_t window_key, uint64_t batch)
{
	return add_sample(&b->samples, 0, 0, ts, window_key, (int64_t)(b->samples.len / ROW_BYTES),
			  batch);
}

static int insert_objects(struct ch_conn *c, const char *table, const struct buf *body,
			  struct kiln_error *err)
{
	char sql[128];

	if (!body->len)
		return 0;
	snprintf(sql, sizeof(sql), "INSERT INTO %s FORMAT RowBinary", table);
	return ch_http_retry(c, sql, body->data, body->len, NULL, err);
}

/* Gives every row of body batch id batch. */
static void set_batch(struct buf *body, uint64_t batch)
{
	for (size_t off = ROW_BYTES - 8; off < body->len; off += ROW_BYTES)
		for (int i = 0; i < 8; i++)
			body->data[off + i] = (uint8_t)(batch >> (8 * i));
}

static uint64_t new_batch_id(void)
{
	uint64_t id = 0;

	while (getrandom(&id, sizeof(id), 0) != sizeof(id) || !id)
		;
	return id;
}

/* After an INSERT of group g whose outcome is unknown: marks the writes
 * whose marker is in (landed, rc 0) and gives the others a new batch id, so
 * that their rows from the attempt, if any arrived, never join the next.
 * 0, or a negative errno when ClickHouse could not be asked (the outcome
 * stays unknown). */
static int group_check(struct ch_conn *c, struct ch_pending *g, struct kiln_error *err)
{
	struct buf q = {0}, out = {0};
	int rc = buf_append_str(&q, "SELECT batch_id FROM samples WHERE type_hash = 0 AND "
				    "series_hash = 0 AND timestamp_ms IN (");

	for (struct ch_pending *p = g; p && !rc; p = p->next)
		if (!p->landed)
			rc = buf_printf(&q, "%s%" PRId64, q.data[q.len - 1] == '(' ? "" : ",",
					p->ts);
	rc = rc ?: buf_append_str(&q, ") AND batch_id IN (");
	for (struct ch_pending *p = g; p && !rc; p = p->next)
		if (!p->landed)
			rc = buf_printf(&q, "%s%" PRIu64, q.data[q.len - 1] == '(' ? "" : ",",
					p->batch);
	rc = rc ?: buf_append_str(&q, ") FORMAT RowBinary");
	rc = rc ?: buf_terminate(&q);
	if (rc)
		rc = kiln_error_set(err, ENOMEM, "out of memory");
	rc = rc ?: ch_http_retry(c, (char *)q.data, NULL, 0, &out, err);
	for (struct ch_pending *p = g; p && !rc; p = p->next) {
		bool in = false;

		if (p->landed)
			continue;
		for (size_t off = 0; off + 8 <= out.len && !in; off += 8)
			in = get_u64le(out.data + off) == p->batch;
		if (in) {
			p->landed = true;
			p->rc = 0;
		} else {
			p->batch = new_batch_id();
			set_batch(p->body, p->batch);
		}
	}
	buf_free(&q);
	buf_free(&out);
	return rc;
}

/* Inserts the rows of every write of group g in one INSERT (retried as the
 * file comment says); sets each write's rc and err; done is left to the
 * caller, under the group lock. */
static void insert_group(struct store *s, struct ch_pending *g)
{
	struct ch_conn *c = &s->ch->conn;
	const char *sql = "INSERT INTO samples FORMAT RowBinary";
	struct buf body = {0};
	struct kiln_error e = {0};
	long delay_ms = 100;
	bool unknown = false;
	int rc = 0;

	for (int attempt = 0; attempt < INSERT_ATTEMPTS; attempt++) {
		if (attempt) {
			struct timespec t = {delay_ms / 1000, (delay_ms % 1000) * 1000000};

			nanosleep(&t, NULL);
			delay_ms *= 2;
			atomic_fetch_add(&s->ch->insert_retries, 1);
		}
		memset(&e, 0, sizeof(e));
		if (unknown) {
			rc = group_check(c, g, &e);
			if (rc) {
				log_warn("store: clickhouse: cannot check an insert: %s", e.msg);
				continue; /* still unknown: check again */
			}
			unknown = false;
		}
		buf_reset(&body);
		for (struct ch_pending *p = g; p && !rc; p = p->next)
			if (!p->landed)
				rc = buf_append(&body, p->body->data, p->body->len);
		if (rc) {
			rc = kiln_error_set(&e, ENOMEM, "out of memory");
			break;
		}
		if (!body.len)
			goto out; /* every write was in after all */
		rc = ch_http(c, sql, body.data, body.len, NULL, &e);
		if (rc != -ECONNREFUSED && rc != -EIO && rc != -ETIMEDOUT)
			break;
		unknown = rc != -ECONNREFUSED;
		log_warn("store: clickhouse: insert of %zu rows failed (%s); retrying",
			 body.len / ROW_BYTES, e.msg);
	}
	if (rc)
		kiln_error_prefix(&e, "not stored: ");
	for (struct ch_pending *p = g; p; p = p->next)
		if (!p->landed) {
			p->rc = rc;
			p->err = e;
		}
	if (!rc)
		atomic_fetch_add(&s->ch->inserts, 1);
out:
	buf_free(&body);
}

/* Group commit: concurrent writes go in one INSERT. The first writer to
 * find no INSERT in flight leads: it takes every queued write (its own
 * included), inserts them, hands each its result and wakes the next
 * waiter to lead. A part per write would make ClickHouse merge far more. */
static int insert_samples(struct store *s, struct buf *body, int64_t ts, uint64_t batch,
			  struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct ch_pending me = {.body = body, .ts = ts, .batch = batch};

	pthread_cond_init(&me.cond, NULL);
	pthread_mutex_lock(&ch->gc_mu);
	*ch->gc_tail = &me;
	ch->gc_tail = &me.next;
	while (!me.done && ch->gc_leader)
		pthread_cond_wait(&me.cond, &ch->gc_mu);
	if (!me.done) {
		struct ch_pending *g = ch->gc_head;

		ch->gc_leader = true;
		ch->gc_head = NULL;
		ch->gc_tail = &ch->gc_head;
		pthread_mutex_unlock(&ch->gc_mu);
		insert_group(s, g);
		pthread_mutex_lock(&ch->gc_mu);
		for (struct ch_pending *p = g, *next; p; p = next) {
			next = p->next; /* p may return and vanish once done */
			p->done = true;
			if (p != &me)
				pthread_cond_signal(&p->cond);
		}
		ch->gc_leader = false;
		if (ch->gc_head)
			pthread_cond_signal(&ch->gc_head->cond);
	}
	pthread_mutex_unlock(&ch->gc_mu);
	pthread_cond_destroy(&me.cond);
	if (me.rc)
		return kiln_error_set(err, -me.rc, "%s", me.err.msg);
	return 0;
}

/* Inserts b's objects, then its rows (group commit); marks the objects
 * stored once ClickHouse confirmed everything. */
static int batch_commit(struct store *s, struct ch_batch *b, int64_t ts, uint64_t batch,
			struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	int rc = insert_objects(&ch->conn, "mappings", &b->mappings, err);

	rc = rc ?: insert_objects(&ch->conn, "functions", &b->functions, err);
	rc = rc ?: insert_objects(&ch->conn, "locations", &b->locations, err);
	rc = rc ?: insert_objects(&ch->conn, "stacks", &b->stacks, err);
	rc = rc ?: insert_objects(&ch->conn, "series", &b->series, err);
	rc = rc ?: insert_samples(s, &b->samples, ts, batch, err);
	if (rc) {
		kiln_error_prefix(err, "store: ");
		return rc;
	}
	atomic_fetch_add(&ch->inserts, 1);
	atomic_fetch_add(&ch->rows, b->samples.len / ROW_BYTES);
	pthread_mutex_lock(&ch->mu);
	for (size_t i = 0; i + 1 < b->n_mark; i += 2)
		ch_memo_mark_stored(ch, (enum ch_kind)b->mark[i], b->mark[i + 1]);
	pthread_mutex_unlock(&ch->mu);
	return 0;
}

/* Metastore records are for the embedded store's log only. */
static void drop_meta_log(struct store *s)
{
	pthread_mutex_lock(&s->meta.mu);
	buf_reset(&s->meta.pending);
	pthread_mutex_unlock(&s->meta.mu);
}

int ch_commit_record(struct store *s, const uint8_t *rec, size_t len, struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct ch_batch b = {0};
	uint64_t batch = new_batch_id();
	int64_t ts = 0;
	int rc;

	drop_meta_log(s);
	if (!(b.seen = htab_new(256)))
		return kiln_error_set(err, ENOMEM, "out of memory");
	pthread_mutex_lock(&ch->mu);
	rc = batch_add_record(s, rec, len, &b, batch, &ts);
	rc = rc ?: batch_add_marker(&b, ts, 0, batch);
	pthread_mutex_unlock(&ch->mu);
	if (rc) {
		rc = kiln_error_set(err, -rc, "clickhouse: cannot encode the write: %s",
				    strerror(-rc));
		goto out;
	}
	rc = batch_commit(s, &b, ts, batch, err);
out:
	batch_free(&b);
	return rc;
}

uint64_t ch_window_key(uint64_t writer, uint64_t window)
{
	uint64_t k[2] = {writer, window};
	uint64_t h = XXH3_64bits_withSeed(k, sizeof(k), 0x6b696c6e726f7773ULL); /* "kilnrows" */

	return h ? h : 1;
}

/* Whether a write of window key exists (its marker, at time ts): 1 yes, 0
 * no, or a negative errno. */
static int window_stored(struct ch_store *ch, int64_t ts, uint64_t key, struct kiln_error *err)
{
	struct buf q = {0}, out = {0};
	int rc = buf_printf(&q,
			    "SELECT count() FROM samples WHERE type_hash = 0 AND series_hash = 0 "
			    "AND timestamp_ms = %" PRId64 " AND stack_hash = %" PRIu64
			    " FORMAT RowBinary",
			    ts, key);

	rc = rc ?: buf_terminate(&q);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ch_http_retry(&ch->conn, (char *)q.data, NULL, 0, &out, err);
	if (rc)
		goto out;
	if (out.len != 8) {
		rc = kiln_error_set(err, EPROTO,
				    "clickhouse: malformed answer to the window check (%zu bytes)",
				    out.len);
		goto out;
	}
	rc = get_u64le(out.data) > 0;
out:
	buf_free(&q);
	buf_free(&out);
	return rc;
}

int ch_commit_rows(struct store *s, uint64_t writer, uint64_t window, const uint8_t *parts,
		   size_t len, size_t n_parts, struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct ch_batch b = {0};
	struct rd r = rd_of(parts, len);
	uint64_t batch = new_batch_id(), key = ch_window_key(writer, window);
	int64_t first = INT64_MAX;
	int rc = 0;

	drop_meta_log(s);
	if (!n_parts)
		return 0;
	if (!(b.seen = htab_new(256)))
		return kiln_error_set(err, ENOMEM, "out of memory");
	pthread_mutex_lock(&ch->mu);
	for (size_t i = 0; i < n_parts && !rc; i++) {
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) + 1);
		const uint8_t *part = rd_bytes(&r, n);
		int64_t ts = 0;

		rc = part ? batch_add_record(s, part, n, &b, batch, &ts) : -EBADMSG;
		first = ts < first ? ts : first;
	}
	if (!rc && r.p != r.end)
		rc = -EBADMSG;
	/* The marker sits at the window's first time and carries the window's
	 * key, so that a window sent again (to this server or another, after a
	 * lost answer) is found with one primary-key lookup. */
	rc = rc ?: batch_add_marker(&b, first, key, batch);
	pthread_mutex_unlock(&ch->mu);
	if (rc) {
		rc = kiln_error_set(err, -rc, "clickhouse: cannot encode the rows: %s",
				    strerror(-rc));
		goto out;
	}
	rc = window_stored(ch, first, key, err);
	if (rc < 0) {
		kiln_error_prefix(err, "store: ");
		goto out;
	}
	if (rc == 1)
		goto out; /* written before: acknowledged again, not counted again */
	rc = batch_commit(s, &b, first, batch, err);
out:
	batch_free(&b);
	return rc;
}
