/*
 * rows_commit.c — rows keyed by metastore ids, written without a writer
 * mark (store_write_groups, store.h): for requests that are complete in
 * themselves and never re-sent by a batch id, such as an OTLP export.
 *
 * The groups become ordinary REC_SAMPLES records, one per timestamp, each
 * holding every series written at that time (rows sorted by stack,
 * duplicates summed, zero sums dropped), committed through
 * store_commit_record: the same record store_write_profile writes, so
 * replay, blocks and the ClickHouse backend see nothing new. A request of
 * many profiles at one time costs one commit instead of one per profile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/satadd.h"
#include "store/internal.h"

struct group_ref {
	int64_t ts;
	uint32_t series;
	size_t index;
};

static int cmp_group_ref(const void *a, const void *b)
{
	const struct group_ref *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->series != y->series)
		return x->series < y->series ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

struct pair {
	uint32_t stack;
	int64_t value;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Appends series id and its rows (the pairs, n of them) to rec. */
static int put_series(struct buf *rec, uint32_t series, struct pair *pairs, size_t n,
		      struct buf *body)
{
	uint32_t last = 0;
	size_t kept = 0;
	int rc = 0;

	qsort(pairs, n, sizeof(*pairs), cmp_pair);
	buf_reset(body);
	for (size_t i = 0; i < n && !rc;) {
		uint32_t st = pairs[i].stack;
		int64_t v = 0;

		for (; i < n && pairs[i].stack == st; i++)
			sat_acc_i64(&v, pairs[i].value);
		if (v == 0)
			continue;
		rc = put_uvarint(body, st - last);
		rc = rc ?: put_svarint(body, v);
		last = st;
		kept++;
	}
	rc = rc ?: put_uvarint(rec, series);
	rc = rc ?: put_uvarint(rec, kept);
	rc = rc ?: buf_append(rec, body->data, body->len);
	return rc;
}

int store_write_groups(struct store *s, const struct store_rows *g, size_t n_groups,
		       struct kiln_error *err)
{
	size_t n_series = chunked_count(&s->sx.series), n_stacks = chunked_count(&s->meta.stacks);
	struct group_ref *refs = NULL;
	struct pair *pairs = NULL;
	struct buf rec = {0}, body = {0};
	size_t max_rows = 0;
	int rc = 0;

	if (atomic_load(&s->closing))
		return kiln_error_set(err, ESHUTDOWN, "store is shutting down");
	if (n_groups == 0)
		return 0;
	for (size_t i = 0; i < n_groups; i++) {
		if (g[i].series >= n_series)
			return kiln_error_set(err, EINVAL, "rows[%zu]: no series %u", i,
					      g[i].series);
		for (size_t j = 0; j < g[i].n; j++)
			if (g[i].stacks[j] >= n_stacks)
				return kiln_error_set(err, EINVAL, "rows[%zu][%zu]: no stack %u", i,
						      j, g[i].stacks[j]);
	}
	refs = malloc(n_groups * sizeof(*refs));
	if (!refs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n_groups; i++)
		refs[i] = (struct group_ref){g[i].timestamp_ms, g[i].series, i};
	qsort(refs, n_groups, sizeof(*refs), cmp_group_ref);
	/* The most rows one series gets at one time: all its groups' rows. */
	for (size_t i = 0; i < n_groups;) {
		size_t rows = 0, j = i;

		for (; j < n_groups && refs[j].ts == refs[i].ts && refs[j].series == refs[i].series;
		     j++)
			rows += g[refs[j].index].n;
		max_rows = rows > max_rows ? rows : max_rows;
		i = j;
	}
	pairs = malloc((max_rows + 1) * sizeof(*pairs));
	if (!pairs) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_groups && !rc;) {
		int64_t ts = refs[i].ts;
		size_t end = i, n_in_record = 0;

		/* One record per time, each of its series once. */
		for (; end < n_groups && refs[end].ts == ts; end++)
			n_in_record += end == i || refs[end].series != refs[end - 1].series;
		buf_reset(&rec);
		rc = buf_append(&rec, (uint8_t[]){REC_SAMPLES}, 1);
		rc = rc ?: put_svarint(&rec, ts);
		rc = rc ?: put_uvarint(&rec, n_in_record);
		while (i < end && !rc) {
			uint32_t series = refs[i].series;
			size_t n = 0;

			for (; i < end && refs[i].series == series; i++) {
				const struct store_rows *gr = &g[refs[i].index];

				for (size_t k = 0; k < gr->n; k++)
					pairs[n++] = (struct pair){gr->stacks[k], gr->values[k]};
			}
			rc = put_series(&rec, series, pairs, n, &body);
		}
		if (rc) {
			rc = kiln_error_set(err, ENOMEM, "out of memory encoding the WAL record");
			goto out;
		}
		rc = store_commit_record(s, rec.data, rec.len, err);
	}
out:
	free(refs);
	free(pairs);
	buf_free(&rec);
	buf_free(&body);
	return rc;
}
