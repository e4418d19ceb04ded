/*
 * ch_merge.c — the merge's per-stack sums on ClickHouse, in one round trip.
 *
 * A merge needs three things from ClickHouse: the series table (series
 * other servers created), which selected series have data in the range
 * (the first of them names the merge's sample type), and the sums per
 * stack. Asked one after the other they cost three round trips, most of a
 * small merge's time. Here:
 *   - the series table is read on a second thread while the main thread
 *     selects, from the series this server already knows, those whose
 *     labels match (at any time: ClickHouse filters by time) and asks
 *     ClickHouse for their sums, grouped by stack for the stack rows and by
 *     series for the profile-total rows (CH_TOTALS_TYPE): one answer holds
 *     the per-stack sums and which series had data in the range;
 *   - if the series table brought series this server did not know and that
 *     match, the sums are asked again with them (a second round trip, only
 *     when a new series appeared since this server last looked).
 * The answer is then what the three queries gave (ch_read.c's sync, a
 * series_select, the sums), so merges answer exactly as before: a profile
 * acknowledged by any server is in the next merge of every server.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/satadd.h"
#include "store/ch.h"

#define ROW_BYTES 40 /* stack hash, series hash, sum, min time, max time */

/* The series table read on its own thread. */
struct series_read {
	struct ch_conn *conn;
	struct buf out;
	struct kiln_error err;
	int rc;
};

static void *read_series(void *arg)
{
	struct series_read *r = arg;

	r->rc = ch_http_retry(r->conn, CH_SERIES_SQL, NULL, 0, &r->out, &r->err);
	return NULL;
}

static const char *label_of(const struct series *se, const char *name)
{
	if (strcmp(name, "__name__") == 0)
		return se->name;
	for (size_t i = 0; i < se->n_labels; i++)
		if (strcmp(se->labels[i].name, name) == 0)
			return se->labels[i].value;
	return NULL;
}

/* The known series of sel's type whose labels match, whatever their time
 * range (ClickHouse filters by time); ascending ids, as series_select. */
static int select_any_time(struct store *s, const struct store_selector *sel, uint32_t **ids,
			   size_t *n, struct kiln_error *err)
{
	size_t cap = 0, k = 0, total;
	uint32_t *out = NULL;

	*ids = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&s->sx.lock);
	total = chunked_count(&s->sx.series);
	for (size_t id = 0; id < total; id++) {
		const struct series *se = series_at(&s->sx, (uint32_t)id);
		bool ok =
		    se->labels != NULL && se->type && strcmp(se->type, sel->profile_type) == 0;

		for (size_t i = 0; ok && i < sel->n_matchers; i++) {
			const struct store_matcher *mt = &sel->matchers[i];

			ok = store_matcher_matches(mt, label_of(se, mt->name ? mt->name : ""));
		}
		if (!ok)
			continue;
		if (k == cap) {
			size_t nc = cap ? cap * 2 : 16;
			uint32_t *o = realloc(out, nc * sizeof(*o));

			if (!o) {
				pthread_rwlock_unlock(&s->sx.lock);
				free(out);
				return kiln_error_set(err, ENOMEM,
						      "out of memory selecting series");
			}
			out = o;
			cap = nc;
		}
		out[k++] = (uint32_t)id;
	}
	pthread_rwlock_unlock(&s->sx.lock);
	*ids = out;
	*n = k;
	return 0;
}

/* The sums of series ids[0..n) in sel's range: rows of (stack hash, 0,
 * sum, min, max) and, for the profile totals, (CH_TOTAL_ROW, series hash,
 * sum, min, max). Only whole batches (their marker present, ch_write.c). */
static int ask_sums(struct store *s, const struct store_selector *sel, const uint32_t *ids,
		    size_t n, struct buf *out, struct kiln_error *err)
{
	struct buf q = {0};
	int rc = buf_printf(&q,
			    "SELECT if(type_hash = 1, 0, stack_hash) AS st, "
			    "if(type_hash = 1, series_hash, 0) AS sh, sum(value), "
			    "min(timestamp_ms), max(timestamp_ms) FROM samples WHERE type_hash IN "
			    "(1, %" PRIu64 ") AND series_hash IN (",
			    ch_hash_type(sel->profile_type));

	pthread_mutex_lock(&s->ch->mu);
	for (size_t i = 0; i < n && !rc; i++)
		rc = buf_printf(&q, "%s%" PRIu64, i ? "," : "", ch_hash_series(s, ids[i]));
	pthread_mutex_unlock(&s->ch->mu);
	rc = rc
		 ?: buf_printf(&q,
			       ") AND timestamp_ms >= %" PRId64 " AND timestamp_ms <= %" PRId64
			       " AND batch_id IN (SELECT batch_id FROM samples WHERE type_hash = 0 "
			       "AND series_hash = 0 AND timestamp_ms >= %" PRId64
			       " AND timestamp_ms <= %" PRId64 ") GROUP BY st, sh FORMAT RowBinary",
			       sel->start_ms, sel->end_ms, sel->start_ms, sel->end_ms);
	rc = rc ?: buf_terminate(&q);
	if (rc)
		rc = kiln_error_set(err, ENOMEM, "out of memory");
	else
		rc = ch_http_retry(&s->ch->conn, (char *)q.data, NULL, 0, out, err);
	if (!rc && out->len % ROW_BYTES)
		rc = kiln_error_set(err, EPROTO,
				    "clickhouse: malformed answer to the merge (%zu bytes, not "
				    "rows of %d)",
				    out->len, ROW_BYTES);
	buf_free(&q);
	return rc;
}

static bool same_ids(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return (a > b) - (a < b);
}

/* Fills a from the answer's rows; *first_series gets the smallest id of a
 * series with data, and each such series' time range is noted (as the
 * sync's would be). Returns 0 with a->n_touched == 0 and *any false when no
 * selected series has data in the range. */
static int fill(struct store *s, const struct buf *out, struct merge_agg *a, uint32_t *first_series,
		bool *any, struct kiln_error *err)
{
	size_t rows = out->len / ROW_BYTES;
	uint32_t first = UINT32_MAX;

	a->n_stacks = (uint32_t)chunked_count(&s->meta.stacks);
	a->sum = calloc(a->n_stacks + 1, sizeof(*a->sum));
	a->seen = calloc(a->n_stacks + 1, 1);
	a->touched = calloc(rows + 1, sizeof(*a->touched));
	a->cap_touched = rows + 1;
	if (!a->sum || !a->seen || !a->touched)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < rows; i++) {
		const uint8_t *p = out->data + i * ROW_BYTES;
		uint64_t h = get_u64le(p), sh = get_u64le(p + 8);
		int64_t lo = (int64_t)get_u64le(p + 24), hi = (int64_t)get_u64le(p + 32);
		uint32_t id;

		if (h == CH_TOTAL_ROW) {
			pthread_mutex_lock(&s->ch->mu);
			bool known = ch_memo_find(s->ch, CH_SERIES, sh, &id);
			pthread_mutex_unlock(&s->ch->mu);
			if (!known || id >= chunked_count(&s->sx.series))
				continue;
			series_note_time(series_at(&s->sx, id), lo);
			series_note_time(series_at(&s->sx, id), hi);
			first = id < first ? id : first;
			if (lo < a->min_ts)
				a->min_ts = lo;
			if (hi > a->max_ts)
				a->max_ts = hi;
			continue;
		}
		pthread_mutex_lock(&s->ch->mu);
		bool known = ch_memo_find(s->ch, CH_STACK, h, &id);
		pthread_mutex_unlock(&s->ch->mu);
		if (lo < a->min_ts)
			a->min_ts = lo;
		if (hi > a->max_ts)
			a->max_ts = hi;
		if (!known || id >= a->n_stacks) {
			log_warn("store: clickhouse: stack %016" PRIx64 " has rows but no stacks "
				 "row; skipped",
				 h);
			continue;
		}
		if (!a->seen[id]) {
			a->seen[id] = 1;
			a->touched[a->n_touched++] = id;
		}
		sat_acc_i64(&a->sum[id], (int64_t)get_u64le(p + 16));
	}
	/* In id order, as the embedded store meets them: stacks interned
	 * together sit together in the output (a pprof gzips smaller). */
	qsort(a->touched, a->n_touched, sizeof(*a->touched), cmp_u32);
	*any = first != UINT32_MAX;
	if (*any)
		*first_series = first;
	return 0;
}

int ch_merge_aggregate(struct store *s, const struct store_selector *sel, struct merge_agg *a,
		       uint32_t *first_series, struct kiln_error *err)
{
	struct series_read sr = {.conn = &s->ch->conn};
	struct buf out = {0};
	uint32_t *ids = NULL, *again = NULL;
	size_t n = 0, n_again = 0;
	bool reading = false, any = false;
	int rc;

	memset(a, 0, sizeof(*a));
	a->min_ts = INT64_MAX;
	a->max_ts = INT64_MIN;
	if (!sel->profile_type)
		return kiln_error_set(err, EINVAL, "merge: no profile type");
	pthread_t t;
	if (pthread_create(&t, NULL, read_series, &sr) == 0)
		reading = true;
	else
		read_series(&sr); /* no thread: in turn */
	rc = select_any_time(s, sel, &ids, &n, err);
	if (!rc && n)
		rc = ask_sums(s, sel, ids, n, &out, err);
	if (reading)
		pthread_join(t, NULL);
	if (!rc && sr.rc) {
		rc = sr.rc;
		*err = sr.err;
	}
	rc = rc ?: ch_apply_series(s, sr.out.data, sr.out.len, err);
	/* Series that other servers created since this one last looked. */
	rc = rc ?: select_any_time(s, sel, &again, &n_again, err);
	if (!rc && !same_ids(ids, n, again, n_again) && n_again) {
		buf_reset(&out);
		rc = ask_sums(s, sel, again, n_again, &out, err);
	}
	if (rc || !n_again)
		goto out;
	rc = ch_fetch_unknown_stacks(s, out.data, out.len / ROW_BYTES, ROW_BYTES, err);
	rc = rc ?: fill(s, &out, a, first_series, &any, err);
	if (!rc && !any) {
		/* No selected series has data in the range: an empty merge, as
		 * when series_select finds none. */
		merge_agg_free(a);
		memset(a, 0, sizeof(*a));
		a->min_ts = INT64_MAX;
		a->max_ts = INT64_MIN;
	}
out:
	free(ids);
	free(again);
	buf_free(&out);
	buf_free(&sr.out);
	if (rc)
		merge_agg_free(a);
	return rc;
}
