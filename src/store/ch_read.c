/*
 * ch_read.c — reads on ClickHouse: the series index synced from the series
 * table, range queries and the merge's per-stack sums computed by
 * ClickHouse (GROUP BY in the server: only one row per distinct stack comes
 * back), and the metastore objects of stacks this server has not seen,
 * fetched once and interned into the local cache (ch.h). Everything after
 * the per-stack sums (symbolization, describing locations, flame graph,
 * pprof) is query.c's and merge_pprof.c's code, unchanged.
 *
 * Answers from ClickHouse are parsed as untrusted input: RowBinary read
 * with bounds checks, a short or malformed answer is -EPROTO with a
 * message, never a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/satadd.h"
#include "store/ch.h"

static uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_bytes(r, 8);

	return p ? get_u64le(p) : 0;
}

/* A RowBinary String: its bytes (not NUL-terminated) and length. */
static const char *rd_str(struct rd *r, size_t *len)
{
	uint64_t n = rd_uvarint(r);
	const uint8_t *p = n <= (uint64_t)(r->end - r->p) ? rd_bytes(r, n) : NULL;

	if (!p)
		r->bad = true;
	*len = p ? n : 0;
	return p ? (const char *)p : "";
}

static char *rd_cstr(struct rd *r, struct buf *scratch)
{
	size_t n;
	const char *p = rd_str(r, &n);

	buf_reset(scratch);
	if (buf_append(scratch, p, n) || buf_terminate(scratch)) {
		r->bad = true;
		return NULL;
	}
	return strdup((char *)scratch->data);
}

static int bad_answer(struct kiln_error *err, const char *what)
{
	/* EPROTO, not EBADMSG: the client's request was fine, the server's was not. */
	return kiln_error_set(err, EPROTO, "clickhouse: malformed answer to the %s query", what);
}

/* ---- series ------------------------------------------------------------- */

static int add_remote_series(struct store *s, uint64_t hash, struct rd *r, struct kiln_error *err)
{
	char *f[7] = {0}; /* type, name, st, su, pt, pu */
	struct buf scratch = {0};
	struct store_label *in = NULL, *sorted = NULL;
	char **lnames = NULL, **lvalues = NULL;
	uint64_t n = 0, nv = 0;
	int64_t period;
	uint8_t delta = 0;
	const char *name;
	int rc = 0;

	for (int i = 0; i < 6; i++)
		f[i] = rd_cstr(r, &scratch);
	period = (int64_t)rd_u64(r);
	const uint8_t *d = rd_bytes(r, 1);
	delta = d ? *d : 0;
	n = rd_below(r, 4096);
	lnames = calloc(n + 1, sizeof(*lnames));
	for (uint64_t i = 0; lnames && i < n && !r->bad; i++)
		lnames[i] = rd_cstr(r, &scratch);
	nv = rd_below(r, 4096);
	lvalues = calloc(n + 1, sizeof(*lvalues));
	for (uint64_t i = 0; lvalues && i < nv && i < n && !r->bad; i++)
		lvalues[i] = rd_cstr(r, &scratch);
	in = calloc(n + 2, sizeof(*in));
	sorted = calloc(n + 2, sizeof(*sorted));
	if (!lnames || !lvalues || !in || !sorted) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < 6; i++)
		if (!f[i])
			r->bad = true;
	for (uint64_t i = 0; i < n; i++)
		if (!lnames[i] || !lvalues[i])
			r->bad = true;
	if (r->bad || nv != n) {
		rc = bad_answer(err, "series");
		goto out;
	}
	in[0] = (struct store_label){"__name__", f[1]};
	for (uint64_t i = 0; i < n; i++)
		in[i + 1] = (struct store_label){lnames[i], lvalues[i]};
	int nl = series_check_labels(in, n + 1, n + 1, sorted, &name, err);
	if (nl < 0) {
		rc = nl;
		kiln_error_prefix(err, "clickhouse: series %016" PRIx64 ": ", hash);
		goto out;
	}
	pthread_rwlock_wrlock(&s->sx.lock);
	pthread_mutex_lock(&s->meta.mu);
	int64_t id = series_get(&s->sx, &s->meta, name, f[0], f[2], f[3], f[4], f[5], period,
				delta != 0, sorted, (size_t)nl);
	buf_reset(&s->meta.pending);
	pthread_mutex_lock(&s->ch->mu);
	rc = id < 0 ? (int)id : ch_memo_set(s->ch, CH_SERIES, (uint32_t)id, hash, true);
	pthread_mutex_unlock(&s->ch->mu);
	pthread_mutex_unlock(&s->meta.mu);
	pthread_rwlock_unlock(&s->sx.lock);
	if (rc)
		rc = kiln_error_set(err, -rc, "clickhouse: cannot add series: %s", strerror(-rc));
out:
	for (int i = 0; i < 6; i++)
		free(f[i]);
	for (uint64_t i = 0; lnames && i < n; i++)
		free(lnames[i]);
	for (uint64_t i = 0; lvalues && i < n; i++)
		free(lvalues[i]);
	free(lnames);
	free(lvalues);
	free(in);
	free(sorted);
	buf_free(&scratch);
	return rc;
}

int ch_apply_series(struct store *s, const uint8_t *data, size_t len, struct kiln_error *err)
{
	struct rd r = rd_of(data, len);
	int rc = 0;

	while (!rc && r.p < r.end) {
		uint64_t hash = rd_u64(&r);
		uint32_t id;
		bool known;

		pthread_mutex_lock(&s->ch->mu);
		known = ch_memo_find(s->ch, CH_SERIES, hash, &id);
		pthread_mutex_unlock(&s->ch->mu);
		if (!known) {
			rc = add_remote_series(s, hash, &r, err);
			continue;
		}
		/* Known: skip the row. */
		struct buf scratch = {0};
		for (int i = 0; i < 6; i++)
			free(rd_cstr(&r, &scratch));
		rd_u64(&r);
		rd_bytes(&r, 1);
		for (int a = 0; a < 2; a++) {
			uint64_t n = rd_below(&r, 4096);
			for (uint64_t i = 0; i < n && !r.bad; i++)
				free(rd_cstr(&r, &scratch));
		}
		buf_free(&scratch);
		if (r.bad)
			rc = bad_answer(err, "series");
	}
	return rc;
}

int ch_apply_time_ranges(struct store *s, const uint8_t *data, size_t len, struct kiln_error *err)
{
	struct rd r = rd_of(data, len);

	while (r.p < r.end) {
		uint64_t hash = rd_u64(&r);
		int64_t lo = (int64_t)rd_u64(&r), hi = (int64_t)rd_u64(&r);
		uint32_t id;
		bool known;

		if (r.bad)
			return bad_answer(err, "series time range");
		pthread_mutex_lock(&s->ch->mu);
		known = ch_memo_find(s->ch, CH_SERIES, hash, &id);
		pthread_mutex_unlock(&s->ch->mu);
		if (!known || id >= chunked_count(&s->sx.series))
			continue; /* written after the series query: the next sync has it */
		series_note_time(series_at(&s->sx, id), lo);
		series_note_time(series_at(&s->sx, id), hi);
	}
	return 0;
}

int ch_sync_series(struct store *s, int64_t start_ms, int64_t end_ms, struct kiln_error *err)
{
	struct ch_conn *c = &s->ch->conn;
	struct buf out = {0}, q = {0};
	int rc;

	rc = ch_http_retry(c, CH_SERIES_SQL, NULL, 0, &out, err);
	rc = rc ?: ch_apply_series(s, out.data, out.len, err);
	/* The time range, within [start_ms, end_ms], of each series with data
	 * there, from its profiles' total rows of whole batches: reads only the
	 * query's days, not the table. */
	rc = rc
		 ?: buf_printf(
			&q,
			"SELECT series_hash, min(timestamp_ms), max(timestamp_ms) FROM samples "
			"WHERE type_hash = 1 AND timestamp_ms >= %" PRId64
			" AND timestamp_ms <= %" PRId64 " AND batch_id IN (SELECT batch_id "
			"FROM samples WHERE type_hash = 0 AND series_hash = 0 AND "
			"timestamp_ms >= %" PRId64 " AND timestamp_ms <= %" PRId64
			") GROUP BY series_hash FORMAT RowBinary",
			start_ms, end_ms, start_ms, end_ms);
	rc = rc ?: buf_terminate(&q);
	rc = rc ?: ch_http_retry(c, (char *)q.data, NULL, 0, &out, err);
	rc = rc ?: ch_apply_time_ranges(s, out.data, out.len, err);
	buf_free(&out);
	buf_free(&q);
	return rc;
}

/* "type_hash = T AND series_hash IN (...) AND timestamp_ms BETWEEN" for sel
 * and the selected series ids[0..n). */
static int where_clause(struct store *s, const struct store_selector *sel, const uint32_t *ids,
			size_t n, bool totals_only, struct buf *q)
{
	int rc = 0;

	/* The series hashes name the type already; the type's own rows and
	 * its totals rows are two ranges of the primary key. */
	if (totals_only)
		rc = buf_append_str(q, "type_hash = 1 AND ");
	else if (sel->profile_type)
		rc = buf_printf(q, "type_hash IN (1, %" PRIu64 ") AND ",
				ch_hash_type(sel->profile_type));
	rc = rc ?: buf_append_str(q, "series_hash IN (");
	pthread_mutex_lock(&s->ch->mu);
	for (size_t i = 0; i < n && !rc; i++)
		rc = buf_printf(q, "%s%" PRIu64, i ? "," : "", ch_hash_series(s, ids[i]));
	pthread_mutex_unlock(&s->ch->mu);
	rc = rc
		 ?: buf_printf(q, ") AND timestamp_ms >= %" PRId64 " AND timestamp_ms <= %" PRId64,
			       sel->start_ms, sel->end_ms);
	/* Only whole batches: those with their marker (ch_write.c). */
	rc = rc
		 ?: buf_printf(q,
			       " AND batch_id IN (SELECT batch_id FROM samples WHERE type_hash = 0 "
			       "AND series_hash = 0 AND timestamp_ms >= %" PRId64
			       " AND timestamp_ms <= %" PRId64 ")",
			       sel->start_ms, sel->end_ms);
	return rc;
}

int ch_query_range(struct store *s, const struct store_selector *sel,
		   void (*cb)(void *ctx, const struct store_label *labels, size_t n_labels,
			      const struct store_point *points, size_t n_points),
		   void *ctx, struct kiln_error *err)
{
	struct buf q = {0}, out = {0};
	struct store_point *pts = NULL;
	uint32_t *ids = NULL;
	size_t n = 0;
	int rc = ch_sync_series(s, sel->start_ms, sel->end_ms, err);

	rc = rc ?: series_select(&s->sx, sel, &ids, &n, err);
	if (rc || !n)
		goto out;
	series_sort_by_labels(&s->sx, ids, n);
	rc = buf_append_str(&q, "SELECT series_hash, timestamp_ms, sum(value) FROM samples WHERE ");
	rc = rc ?: where_clause(s, sel, ids, n, true, &q);
	rc = rc
		 ?: buf_append_str(&q, " GROUP BY series_hash, timestamp_ms "
				       "ORDER BY series_hash, timestamp_ms FORMAT RowBinary");
	rc = rc ?: buf_terminate(&q);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ch_http_retry(&s->ch->conn, (char *)q.data, NULL, 0, &out, err);
	if (rc)
		goto out;
	if (out.len % 24)
		return bad_answer(err, "range");
	size_t rows = out.len / 24;
	if (!(pts = calloc(rows + 1, sizeof(*pts)))) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	/* Rows come sorted by series hash; series go out in label order. */
	for (size_t i = 0; i < n; i++) {
		uint64_t h;
		size_t k = 0;

		pthread_mutex_lock(&s->ch->mu);
		h = ch_hash_series(s, ids[i]);
		pthread_mutex_unlock(&s->ch->mu);
		/* binary search the first row of h */
		size_t lo = 0, hi = rows;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (get_u64le(out.data + mid * 24) < h)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t j = lo; j < rows && get_u64le(out.data + j * 24) == h; j++)
			pts[k++] = (struct store_point){(int64_t)get_u64le(out.data + j * 24 + 8),
							(int64_t)get_u64le(out.data + j * 24 + 16)};
		if (k) {
			const struct series *se = series_at(&s->sx, ids[i]);

			cb(ctx, se->labels, se->n_labels, pts, k);
		}
	}
out:
	free(pts);
	free(ids);
	buf_free(&q);
	buf_free(&out);
	return rc;
}

/* ---- fetching metastore objects ----------------------------------------- */

/* Hashes (deduplicated) to fetch, as an IN list. */
struct hash_set {
	struct htab *ix;
	uint64_t *h;
	size_t n, cap;
};

static int hs_add(struct hash_set *hs, uint64_t h)
{
	uint64_t v = hs->n;
	int rc;

	if (!hs->ix && !(hs->ix = htab_new(256)))
		return -ENOMEM;
	rc = htab_intern(hs->ix, &h, sizeof(h), &v);
	if (rc)
		return rc < 0 ? rc : 0;
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? hs->cap * 2 : 256;
		uint64_t *a = realloc(hs->h, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		hs->h = a;
		hs->cap = cap;
	}
	hs->h[hs->n++] = h;
	return 0;
}

static void hs_free(struct hash_set *hs)
{
	htab_free(hs->ix);
	free(hs->h);
	memset(hs, 0, sizeof(*hs));
}

#define FETCH_CHUNK 20000 /* hashes per IN list */

/* SELECT cols FROM table WHERE key IN (set) GROUP BY key, into out (one
 * query per FETCH_CHUNK hashes, answers appended). */
static int fetch(struct store *s, const char *cols, const char *table, const char *key,
		 const struct hash_set *hs, struct buf *out, struct kiln_error *err)
{
	struct buf q = {0}, part = {0};
	int rc = 0;

	buf_reset(out);
	for (size_t at = 0; at < hs->n && !rc; at += FETCH_CHUNK) {
		size_t end = at + FETCH_CHUNK < hs->n ? at + FETCH_CHUNK : hs->n;

		buf_reset(&q);
		rc = buf_printf(&q, "SELECT %s, %s FROM %s WHERE %s IN (", key, cols, table, key);
		for (size_t i = at; i < end && !rc; i++)
			rc = buf_printf(&q, "%s%" PRIu64, i > at ? "," : "", hs->h[i]);
		rc = rc ?: buf_printf(&q, ") GROUP BY %s FORMAT RowBinary", key);
		rc = rc ?: buf_terminate(&q);
		if (rc) {
			rc = kiln_error_set(err, ENOMEM, "out of memory");
			break;
		}
		rc = ch_http_retry(&s->ch->conn, (char *)q.data, NULL, 0, &part, err);
		if (!rc && buf_append(out, part.data, part.len))
			rc = kiln_error_set(err, ENOMEM, "out of memory");
	}
	buf_free(&q);
	buf_free(&part);
	return rc;
}

/* Interns, bottom-up, the objects of a fetch (see ch.h). */
int ch_intern_objects(struct store *s, const struct buf *st, const struct buf *lo,
		      const struct buf *fn, const struct buf *mp, struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct rd r;
	int rc = 0;

	/* Intern bottom-up under the metastore lock (then ch->mu: ch.h). */
	pthread_mutex_lock(&s->meta.mu);
	pthread_mutex_lock(&ch->mu);
	struct meta *m = &s->meta;
	r = rd_of(mp->data, mp->len);
	while (!rc && r.p < r.end && !r.bad) {
		struct meta_mapping mm = {0};
		uint64_t h = rd_u64(&r);
		size_t fl, bl;

		mm.start = rd_u64(&r);
		mm.limit = rd_u64(&r);
		mm.offset = rd_u64(&r);
		const char *fname = rd_str(&r, &fl);
		const char *bid = rd_str(&r, &bl);
		const uint8_t *u = rd_bytes(&r, 8);
		mm.flags = u ? get_u32le(u) : 0;
		mm.elf_type = u ? get_u32le(u + 4) : 0;
		mm.load_offset = rd_u64(&r);
		mm.load_vaddr = rd_u64(&r);
		if (r.bad)
			break;
		int64_t a = meta_string(m, fname, fl), b = meta_string(m, bid, bl);
		int64_t mid = a < 0 ? a : b < 0 ? b : 0;
		if (!mid) {
			mm.filename = (uint32_t)a;
			mm.build_id = (uint32_t)b;
			mid = meta_mapping(m, &mm);
		}
		rc = mid < 0 ? (int)mid : ch_memo_set(ch, CH_MAPPING, (uint32_t)mid, h, true);
	}
	if (!rc && r.bad)
		rc = bad_answer(err, "mappings");
	r = rd_of(fn->data, fn->len);
	while (!rc && r.p < r.end && !r.bad) {
		struct meta_function mf = {0};
		uint64_t h = rd_u64(&r);
		size_t l1, l2, l3;
		const char *a = rd_str(&r, &l1), *b = rd_str(&r, &l2), *c = rd_str(&r, &l3);

		mf.start_line = (int64_t)rd_u64(&r);
		if (r.bad)
			break;
		int64_t x = meta_string(m, a, l1), y = meta_string(m, b, l2),
			z = meta_string(m, c, l3);
		int64_t fid = x < 0 ? x : y < 0 ? y : z < 0 ? z : 0;
		if (!fid) {
			mf.name = (uint32_t)x;
			mf.system_name = (uint32_t)y;
			mf.filename = (uint32_t)z;
			fid = meta_function(m, &mf);
		}
		rc = fid < 0 ? (int)fid : ch_memo_set(ch, CH_FUNCTION, (uint32_t)fid, h, true);
	}
	if (!rc && r.bad)
		rc = bad_answer(err, "functions");
	r = rd_of(lo->data, lo->len);
	struct meta_line *lines = NULL;
	while (!rc && r.p < r.end && !r.bad) {
		uint64_t h = rd_u64(&r), mh = rd_u64(&r), addr = rd_u64(&r);
		uint32_t map_id = 0;
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 8 + 1);

		free(lines);
		if (!(lines = calloc(n + 1, sizeof(*lines)))) {
			rc = -ENOMEM;
			break;
		}
		for (uint64_t i = 0; i < n && !r.bad; i++) {
			uint64_t f = rd_u64(&r);

			if (f && !ch_memo_find(ch, CH_FUNCTION, f, &lines[i].function))
				r.bad = true; /* refers to a function ClickHouse lacks */
		}
		if (rd_below(&r, n + 1) != n)
			r.bad = true;
		for (uint64_t i = 0; i < n && !r.bad; i++)
			lines[i].line = (int64_t)rd_u64(&r);
		if (mh && !ch_memo_find(ch, CH_MAPPING, mh, &map_id))
			r.bad = true;
		if (r.bad)
			break;
		int64_t lid = meta_location(m, map_id, addr, lines, (uint32_t)n);
		rc = lid < 0 ? (int)lid : ch_memo_set(ch, CH_LOCATION, (uint32_t)lid, h, true);
	}
	free(lines);
	if (!rc && r.bad)
		rc = bad_answer(err, "locations");
	r = rd_of(st->data, st->len);
	uint32_t *ls = NULL;
	while (!rc && r.p < r.end && !r.bad) {
		uint64_t h = rd_u64(&r);
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 8 + 1);

		free(ls);
		if (!(ls = calloc(n + 1, sizeof(*ls)))) {
			rc = -ENOMEM;
			break;
		}
		for (uint64_t i = 0; i < n && !r.bad; i++)
			if (!ch_memo_find(ch, CH_LOCATION, rd_u64(&r), &ls[i]))
				r.bad = true;
		if (r.bad)
			break;
		int64_t sid = meta_stack(m, ls, (uint32_t)n);
		rc = sid < 0 ? (int)sid : ch_memo_set(ch, CH_STACK, (uint32_t)sid, h, true);
	}
	free(ls);
	if (!rc && r.bad)
		rc = bad_answer(err, "stacks");
	buf_reset(&m->pending);
	pthread_mutex_unlock(&ch->mu);
	pthread_mutex_unlock(&s->meta.mu);
	if (rc > 0)
		rc = 0;
	else if (rc < 0 && !(err && err->code))
		rc = kiln_error_set(err, -rc, "clickhouse: cannot intern objects: %s",
				    strerror(-rc));
	return rc;
}

/* Interns, bottom-up, the stacks in need (their hashes) and whatever they
 * refer to that this server lacks; sets their memo. Caller holds nothing. */
static int fetch_stacks(struct store *s, const struct hash_set *need, struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct buf st = {0}, lo = {0}, fn = {0}, mp = {0};
	struct hash_set locs = {0}, fns = {0}, maps = {0};
	struct rd r;
	uint32_t id;
	int rc;

	rc = fetch(s, "any(locations)", "stacks", "stack_hash", need, &st, err);
	if (rc)
		goto out;
	/* Locations that are not local yet. */
	r = rd_of(st.data, st.len);
	while (!rc && r.p < r.end && !r.bad) {
		rd_u64(&r);
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 8 + 1);
		for (uint64_t i = 0; i < n && !rc && !r.bad; i++) {
			uint64_t h = rd_u64(&r);

			pthread_mutex_lock(&ch->mu);
			bool known = ch_memo_find(ch, CH_LOCATION, h, &id);
			pthread_mutex_unlock(&ch->mu);
			if (!known)
				rc = hs_add(&locs, h);
		}
	}
	if (!rc && r.bad)
		rc = bad_answer(err, "stacks");
	if (rc || !locs.n)
		goto objects;
	rc = fetch(s, "any(mapping_hash), any(address), any(line_functions), any(line_numbers)",
		   "locations", "location_hash", &locs, &lo, err);
	r = rd_of(lo.data, lo.len);
	while (!rc && r.p < r.end && !r.bad) {
		rd_u64(&r);
		uint64_t m = rd_u64(&r);
		rd_u64(&r);
		pthread_mutex_lock(&ch->mu);
		bool known = !m || ch_memo_find(ch, CH_MAPPING, m, &id);
		pthread_mutex_unlock(&ch->mu);
		if (!known)
			rc = hs_add(&maps, m);
		uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 8 + 1);
		for (uint64_t i = 0; i < n && !rc && !r.bad; i++) {
			uint64_t f = rd_u64(&r);

			pthread_mutex_lock(&ch->mu);
			known = !f || ch_memo_find(ch, CH_FUNCTION, f, &id);
			pthread_mutex_unlock(&ch->mu);
			if (!known)
				rc = hs_add(&fns, f);
		}
		n = rd_below(&r, (uint64_t)(r.end - r.p) / 8 + 1);
		rd_bytes(&r, n * 8);
	}
	if (!rc && r.bad)
		rc = bad_answer(err, "locations");
	if (!rc && fns.n)
		rc = fetch(s, "any(name), any(system_name), any(filename), any(start_line)",
			   "functions", "function_hash", &fns, &fn, err);
	if (!rc && maps.n)
		rc = fetch(s,
			   "any(memory_start), any(memory_limit), any(file_offset), any(filename), "
			   "any(build_id), any(flags), any(elf_type), any(load_offset), "
			   "any(load_vaddr)",
			   "mappings", "mapping_hash", &maps, &mp, err);
objects:
	rc = rc ?: ch_intern_objects(s, &st, &lo, &fn, &mp, err);
out:
	hs_free(&locs);
	hs_free(&fns);
	hs_free(&maps);
	buf_free(&st);
	buf_free(&lo);
	buf_free(&fn);
	buf_free(&mp);
	return rc;
}

/* ---- stacks named by an answer ---------------------------------------- */

int ch_fetch_unknown_stacks(struct store *s, const uint8_t *rows, size_t n_rows, size_t stride,
			    struct kiln_error *err)
{
	struct hash_set missing = {0};
	int rc = 0;

	for (size_t i = 0; i < n_rows && !rc; i++) {
		uint64_t h = get_u64le(rows + i * stride);
		uint32_t id;

		pthread_mutex_lock(&s->ch->mu);
		bool known = h == CH_TOTAL_ROW || ch_memo_find(s->ch, CH_STACK, h, &id);
		pthread_mutex_unlock(&s->ch->mu);
		if (!known && hs_add(&missing, h))
			rc = kiln_error_set(err, ENOMEM, "out of memory");
	}
	if (!rc && missing.n)
		rc = fetch_stacks(s, &missing, err);
	hs_free(&missing);
	return rc;
}
