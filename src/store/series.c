/*
 * series.c — series (a profile type plus a label set), their postings index
 * and label matchers.
 *
 * A series gets a dense id the first time it is written; its record (type,
 * period, label string ids) goes to the metastore log like every other
 * metadata object. The postings index maps "name\0value" (and "\1TYPE") to
 * the sorted list of series ids carrying it; a selector intersects by
 * starting from the shortest list that its equality matchers name and then
 * checks the remaining matchers on each candidate.
 *
 * Matchers: regexes are PCRE2, fully anchored (PCRE2_ANCHORED |
 * PCRE2_ENDANCHORED), with match and depth limits, so a pathological
 * pattern costs a bounded amount of work and then simply does not match.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/labels.h"
#include "store/internal.h"

#define MATCH_LIMIT 100000
#define DEPTH_LIMIT 1000

struct compiled_re {
	pcre2_code *code;
	pcre2_match_context *mctx;
};

int store_matcher_compile(struct store_matcher *m, struct kiln_error *err)
{
	struct compiled_re *re;
	int errcode;
	PCRE2_SIZE erroff;

	if (m->op != STORE_MATCH_REGEX && m->op != STORE_MATCH_NOT_REGEX)
		return 0;
	if (m->compiled)
		return 0;
	re = calloc(1, sizeof(*re));
	if (!re)
		return kiln_error_set(err, ENOMEM, "out of memory compiling regex");
	re->code = pcre2_compile((PCRE2_SPTR)(m->value ? m->value : ""), PCRE2_ZERO_TERMINATED,
				 PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOTALL, &errcode,
				 &erroff, NULL);
	if (!re->code) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(errcode, msg, sizeof(msg));
		free(re);
		return kiln_error_set(
		    err, EINVAL, "label %s: invalid regex \"%s\" at offset %zu: %s",
		    m->name ? m->name : "", m->value ? m->value : "", (size_t)erroff, (char *)msg);
	}
	re->mctx = pcre2_match_context_create(NULL);
	if (!re->mctx) {
		pcre2_code_free(re->code);
		free(re);
		return kiln_error_set(err, ENOMEM, "out of memory compiling regex");
	}
	pcre2_set_match_limit(re->mctx, MATCH_LIMIT);
	pcre2_set_depth_limit(re->mctx, DEPTH_LIMIT);
	m->compiled = re;
	return 0;
}

void store_matcher_release(struct store_matcher *m)
{
	struct compiled_re *re = m ? m->compiled : NULL;

	if (!re)
		return;
	pcre2_match_context_free(re->mctx);
	pcre2_code_free(re->code);
	free(re);
	m->compiled = NULL;
}

static bool regex_matches(const struct compiled_re *re, const char *v)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
	int rc;

	if (!md)
		return false;
	rc = pcre2_match(re->code, (PCRE2_SPTR)v, strlen(v), 0, 0, md, re->mctx);
	pcre2_match_data_free(md);
	/* Errors (match limit hit) count as "no match". */
	return rc >= 0;
}

bool store_matcher_matches(const struct store_matcher *m, const char *value)
{
	const char *v = value ? value : "";
	const char *want = m->value ? m->value : "";

	switch (m->op) {
	case STORE_MATCH_EQ:
		return strcmp(v, want) == 0;
	case STORE_MATCH_NEQ:
		return strcmp(v, want) != 0;
	case STORE_MATCH_REGEX:
		return m->compiled && regex_matches(m->compiled, v);
	case STORE_MATCH_NOT_REGEX:
		return m->compiled && !regex_matches(m->compiled, v);
	}
	return false;
}

/* ---- labels ---- */

int series_check_labels(const struct label *in, size_t n, size_t max, struct label *out,
			const char **name, struct kiln_error *err)
{
	size_t k = 0;

	*name = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!label_name_valid(in[i].name))
			return kiln_error_set(err, EINVAL,
					      "label %zu: invalid label name \"%s\" (must match "
					      "[a-zA-Z_][a-zA-Z0-9_]*)",
					      i, in[i].name ? in[i].name : "(null)");
		if (!in[i].value)
			return kiln_error_set(err, EINVAL, "label %s: no value", in[i].name);
		if (strcmp(in[i].name, "__name__") == 0) {
			if (!label_name_valid(in[i].value))
				return kiln_error_set(err, EINVAL,
						      "label __name__: invalid profile name \"%s\"",
						      in[i].value);
			*name = in[i].value;
			continue;
		}
		if (!*in[i].value)
			continue; /* an empty value is the same as no label */
		out[k++] = in[i];
	}
	if (!*name)
		return kiln_error_set(err, EINVAL, "labels: missing __name__");
	if (k > max)
		return kiln_error_set(err, EINVAL, "labels: too many labels (%zu, limit %zu)", k,
				      max);
	labels_sort(out, k);
	for (size_t i = 1; i < k; i++)
		if (strcmp(out[i].name, out[i - 1].name) == 0)
			return kiln_error_set(err, EINVAL, "label %s: duplicate label name",
					      out[i].name);
	return (int)k;
}

/* ---- the index ---- */

int series_index_init(struct series_index *x)
{
	memset(x, 0, sizeof(*x));
	pthread_rwlock_init(&x->lock, NULL);
	x->key_ix = htab_new(256);
	x->post_ix = htab_new(256);
	if (!x->key_ix || !x->post_ix || chunked_init(&x->series, sizeof(struct series)))
		return -ENOMEM;
	return 0;
}

void series_index_destroy(struct series_index *x)
{
	size_t n = x->series.dir ? chunked_count(&x->series) : 0;

	for (size_t i = 0; i < n; i++)
		free(series_at(x, (uint32_t)i)->labels);
	chunked_free(&x->series);
	htab_free(x->key_ix);
	htab_free(x->post_ix);
	for (size_t i = 0; i < x->n_posts; i++)
		free(x->posts[i].ids);
	free(x->posts);
	buf_free(&x->key);
	pthread_rwlock_destroy(&x->lock);
}

static int post_add(struct series_index *x, const char *a, const char *b, uint32_t id)
{
	uint64_t idx = x->n_posts;
	int rc;

	buf_reset(&x->key);
	rc = buf_append_str(&x->key, a);
	rc = rc ?: buf_append(&x->key, "", 1);
	rc = rc ?: buf_append_str(&x->key, b);
	if (rc)
		return rc;
	rc = htab_intern(x->post_ix, x->key.data, x->key.len, &idx);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (GROW_ARRAY(x->posts, x->cap_posts, x->n_posts + 1, 64))
			return -ENOMEM;
		memset(&x->posts[x->n_posts++], 0, sizeof(struct postings));
	}
	struct postings *p = &x->posts[idx];
	if (GROW_ARRAY(p->ids, p->cap, p->n + 1, 4))
		return -ENOMEM;
	p->ids[p->n++] = id; /* ids grow, so the list stays sorted */
	return 0;
}

static const struct postings *post_get(struct series_index *x, const char *a, const char *b)
{
	uint64_t idx;

	buf_reset(&x->key);
	if (buf_append_str(&x->key, a) || buf_append(&x->key, "", 1) || buf_append_str(&x->key, b))
		return NULL;
	return htab_get(x->post_ix, x->key.data, x->key.len, &idx) ? &x->posts[idx] : NULL;
}

/* Splits "name:st:su:pt:pu[:delta]" into the series' fields (strings in the
 * metastore arena). */
static int parse_type(struct meta *m, struct series *se, const char *type)
{
	char *parts[6] = {0};
	char *copy = arena_strdup(m->arena, type);
	size_t n = 0;

	if (!copy)
		return -ENOMEM;
	for (char *p = copy; n < 6;) {
		parts[n++] = p;
		p = strchr(p, ':');
		if (!p)
			break;
		*p++ = 0;
	}
	if (n < 5)
		return -EBADMSG;
	se->name = parts[0];
	se->sample_type = parts[1];
	se->sample_unit = parts[2];
	se->period_type = parts[3];
	se->period_unit = parts[4];
	se->delta = n == 6 && strcmp(parts[5], "delta") == 0;
	return 0;
}

static int insert_series(struct series_index *x, struct meta *m, uint32_t id, const char *type,
			 int64_t period, const struct label *labels, size_t n)
{
	struct series *se = chunked_slot(&x->series);
	int rc;

	if (!se)
		return -ENOMEM;
	se->id = id;
	se->type = type;
	se->period = period;
	se->n_labels = n;
	se->labels = calloc(n ? n : 1, sizeof(*labels));
	if (!se->labels)
		return -ENOMEM;
	memcpy(se->labels, labels, n * sizeof(*labels));
	atomic_store(&se->min_ts, INT64_MAX);
	atomic_store(&se->max_ts, INT64_MIN);
	rc = parse_type(m, se, type);
	rc = rc ?: post_add(x, "\1", type, id);
	for (size_t i = 0; i < n && !rc; i++)
		rc = post_add(x, labels[i].name, labels[i].value, id);
	if (rc) {
		free(se->labels);
		se->labels = NULL;
		return rc;
	}
	chunked_publish(&x->series);
	return 0;
}

static int series_key(struct buf *k, const char *type, const struct label *labels, size_t n)
{
	int rc;

	buf_reset(k);
	rc = buf_append(k, type, strlen(type) + 1);
	for (size_t i = 0; i < n && !rc; i++) {
		rc = buf_append(k, labels[i].name, strlen(labels[i].name) + 1);
		rc = rc ?: buf_append(k, labels[i].value, strlen(labels[i].value) + 1);
	}
	return rc;
}

int64_t series_get(struct series_index *x, struct meta *m, const char *name, const char *type,
		   const char *st, const char *su, const char *pt, const char *pu, int64_t period,
		   bool delta, const struct label *labels, size_t n_labels)
{
	uint64_t id = chunked_count(&x->series);
	struct label *interned = NULL;
	struct buf rec = {0};
	int64_t sid, tsid, ptsid, pusid;
	int rc;

	(void)name, (void)st, (void)su, (void)delta;
	rc = series_key(&x->key, type, labels, n_labels);
	if (rc)
		return rc;
	if (htab_get(x->key_ix, x->key.data, x->key.len, &id))
		return (int64_t)id;
	id = chunked_count(&x->series);
	tsid = meta_string(m, type, strlen(type));
	ptsid = meta_string(m, pt, strlen(pt));
	pusid = meta_string(m, pu, strlen(pu));
	if (tsid < 0 || ptsid < 0 || pusid < 0)
		return -ENOMEM;
	interned = calloc(n_labels ? n_labels : 1, sizeof(*interned));
	if (!interned)
		return -ENOMEM;
	rc = buf_append(&rec, (uint8_t[]){MREC_SERIES}, 1);
	rc = rc ?: put_uvarint(&rec, id);
	rc = rc ?: put_uvarint(&rec, (uint64_t)tsid);
	rc = rc ?: put_uvarint(&rec, (uint64_t)ptsid);
	rc = rc ?: put_uvarint(&rec, (uint64_t)pusid);
	rc = rc ?: put_svarint(&rec, period);
	rc = rc ?: put_uvarint(&rec, n_labels);
	for (size_t i = 0; i < n_labels && !rc; i++) {
		int64_t a = meta_string(m, labels[i].name, strlen(labels[i].name));
		int64_t b = meta_string(m, labels[i].value, strlen(labels[i].value));

		if (a < 0 || b < 0) {
			rc = -ENOMEM;
			break;
		}
		interned[i].name = meta_str(m, (uint32_t)a);
		interned[i].value = meta_str(m, (uint32_t)b);
		rc = put_uvarint(&rec, (uint64_t)a);
		rc = rc ?: put_uvarint(&rec, (uint64_t)b);
	}
	/* The record goes to the log only once the series is in the index: a
	 * series that failed to register must leave no record behind, since
	 * its id goes to the next new series, and two records with one id stop
	 * the log's replay there, dropping every later acknowledged write
	 * (found by make soak-faults, a calloc failing in insert_series). A
	 * series registered whose record could not be appended is not keyed
	 * either: the next write of its labels makes a new one, and logs it. */
	rc = rc
		 ?: insert_series(x, m, (uint32_t)id, meta_str(m, (uint32_t)tsid), period, interned,
				  n_labels);
	rc = rc ?: record_append(&m->pending, rec.data, rec.len);
	/* series_key used x->key; insert_series reused it for postings. */
	rc = rc ?: series_key(&x->key, type, labels, n_labels);
	rc = rc ?: htab_put(x->key_ix, x->key.data, x->key.len, id);
	free(interned);
	buf_free(&rec);
	sid = id;
	return rc ? rc : sid;
}

int series_add(struct series_index *x, struct meta *m, uint32_t id, uint32_t type_sid,
	       uint32_t pt_sid, uint32_t pu_sid, int64_t period, const uint32_t *label_sids,
	       size_t n_labels)
{
	struct label *labels = calloc(n_labels ? n_labels : 1, sizeof(*labels));
	int rc;

	(void)pt_sid, (void)pu_sid;
	if (!labels)
		return -ENOMEM;
	for (size_t i = 0; i < n_labels; i++) {
		labels[i].name = meta_str(m, label_sids[2 * i]);
		labels[i].value = meta_str(m, label_sids[2 * i + 1]);
	}
	rc = insert_series(x, m, id, meta_str(m, type_sid), period, labels, n_labels);
	rc = rc ?: series_key(&x->key, meta_str(m, type_sid), labels, n_labels);
	rc = rc ?: htab_put(x->key_ix, x->key.data, x->key.len, id);
	free(labels);
	return rc;
}

void series_note_time(struct series *se, int64_t ts)
{
	int64_t cur = atomic_load(&se->min_ts);

	while (ts < cur && !atomic_compare_exchange_weak(&se->min_ts, &cur, ts))
		;
	cur = atomic_load(&se->max_ts);
	while (ts > cur && !atomic_compare_exchange_weak(&se->max_ts, &cur, ts))
		;
}

void series_forget_before(struct series_index *x, int64_t cutoff)
{
	pthread_rwlock_rdlock(&x->lock);
	size_t n = chunked_count(&x->series);
	for (size_t i = 0; i < n; i++) {
		struct series *se = series_at(x, (uint32_t)i);
		int64_t cur = atomic_load(&se->min_ts);

		while (cur < cutoff && !atomic_compare_exchange_weak(&se->min_ts, &cur, cutoff))
			;
	}
	pthread_rwlock_unlock(&x->lock);
}

static const char *label_value(const struct series *se, const char *name)
{
	if (strcmp(name, "__name__") == 0)
		return se->name;
	for (size_t i = 0; i < se->n_labels; i++)
		if (strcmp(se->labels[i].name, name) == 0)
			return se->labels[i].value;
	return NULL;
}

int series_select(struct series_index *x, const struct store_selector *sel, uint32_t **ids,
		  size_t *n, struct kiln_error *err)
{
	const struct postings *best = NULL;
	size_t total, cap = 0, k = 0;
	uint32_t *out = NULL;
	bool none = false;

	*ids = NULL;
	*n = 0;
	for (size_t i = 0; i < sel->n_matchers; i++) {
		const struct store_matcher *mt = &sel->matchers[i];

		if ((mt->op == STORE_MATCH_REGEX || mt->op == STORE_MATCH_NOT_REGEX) &&
		    !mt->compiled)
			return kiln_error_set(err, EINVAL,
					      "label %s: regex matcher was not compiled",
					      mt->name ? mt->name : "");
	}
	pthread_rwlock_wrlock(&x->lock); /* post_get uses the shared key buffer */
	total = chunked_count(&x->series);
	if (sel->profile_type) {
		best = post_get(x, "\1", sel->profile_type);
		none = !best;
	}
	for (size_t i = 0; i < sel->n_matchers && !none; i++) {
		const struct store_matcher *mt = &sel->matchers[i];
		const struct postings *p;

		if (mt->op != STORE_MATCH_EQ || !mt->value || !*mt->value || !mt->name ||
		    strcmp(mt->name, "__name__") == 0)
			continue;
		p = post_get(x, mt->name, mt->value);
		if (!p)
			none = true;
		else if (!best || p->n < best->n)
			best = p;
	}
	size_t n_cand = none ? 0 : best ? best->n : total;
	for (size_t c = 0; c < n_cand; c++) {
		uint32_t id = best ? best->ids[c] : (uint32_t)c;
		struct series *se = series_at(x, id);
		bool ok = se->labels != NULL;

		if (ok && sel->profile_type && strcmp(se->type, sel->profile_type) != 0)
			ok = false;
		int64_t lo = atomic_load(&se->min_ts), hi = atomic_load(&se->max_ts);
		/* lo > hi: no data left (retention removed it, or a restart found
		 * the series' record but none of its rows). */
		if (ok && (lo > hi || hi < sel->start_ms || lo > sel->end_ms))
			ok = false;
		for (size_t i = 0; ok && i < sel->n_matchers; i++)
			ok = store_matcher_matches(
			    &sel->matchers[i],
			    label_value(se, sel->matchers[i].name ? sel->matchers[i].name : ""));
		if (!ok)
			continue;
		if (GROW_ARRAY(out, cap, k + 1, 16)) {
			pthread_rwlock_unlock(&x->lock);
			free(out);
			return kiln_error_set(err, ENOMEM, "out of memory selecting series");
		}
		out[k++] = id;
	}
	pthread_rwlock_unlock(&x->lock);
	*ids = out;
	*n = k;
	return 0;
}

static int cmp_series_labels(const void *a, const void *b, void *arg)
{
	const struct series *x = series_at(arg, *(const uint32_t *)a);
	const struct series *y = series_at(arg, *(const uint32_t *)b);
	int c = strcmp(x->name, y->name);

	for (size_t i = 0; !c && i < x->n_labels && i < y->n_labels; i++) {
		c = strcmp(x->labels[i].name, y->labels[i].name);
		c = c ?: strcmp(x->labels[i].value, y->labels[i].value);
	}
	if (!c)
		c = (x->n_labels > y->n_labels) - (x->n_labels < y->n_labels);
	return c ?: strcmp(x->type, y->type);
}

void series_sort_by_labels(struct series_index *x, uint32_t *ids, size_t n)
{
	if (n > 1)
		qsort_r(ids, n, sizeof(*ids), cmp_series_labels, x);
}
