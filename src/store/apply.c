/*
 * apply.c — one samples record (REC_SAMPLES) applied to the active head:
 * the step shared by a write's commit and the WAL's replay (through
 * store.c's store_apply_record) and by each part of a streamed batch
 * (rows.c). It sits below both so that neither calls up into the other.
 */
#include <errno.h>
#include <stdlib.h>

#include "store/internal.h"

/* Record: type u8 (1), ts svarint, n_series, per series: id, n_rows, rows
 * (stack id delta uvarint, value svarint). Validated completely before
 * anything is applied, so a bad record changes nothing. */
int store_apply_samples_record(struct store *s, const uint8_t *p, size_t len)
{
	struct rd r = rd_of(p, len);
	size_t n_series = chunked_count(&s->sx.series);
	size_t n_stacks = chunked_count(&s->meta.stacks);
	uint32_t *stacks = NULL;
	int64_t *values = NULL;
	size_t cap = 0;
	int rc = 0;

	for (int pass = 0; pass < 2 && !rc; pass++) {
		r.p = p;
		const uint8_t *type = rd_bytes(&r, 1);
		int64_t ts = rd_svarint(&r);
		uint64_t ns = rd_below(&r, 1 << 16);

		if (!type || *type != REC_SAMPLES)
			return -EBADMSG;
		for (uint64_t i = 0; i < ns && !r.bad; i++) {
			uint32_t id = (uint32_t)rd_below(&r, n_series);
			uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 2 + 1), st = 0;

			if (r.bad)
				break;
			if (n > cap) {
				uint32_t *a = realloc(stacks, n * sizeof(*a));
				if (a)
					stacks = a;
				int64_t *v = realloc(values, n * sizeof(*v));
				if (v)
					values = v;
				if (!a || !v) {
					rc = -ENOMEM;
					break;
				}
				cap = n;
			}
			for (uint64_t j = 0; j < n; j++) {
				st += rd_uvarint(&r);
				if (st >= n_stacks)
					r.bad = true;
				stacks[j] = (uint32_t)st;
				values[j] = rd_svarint(&r);
			}
			if (pass == 1 && !r.bad) {
				struct series_rows *sr = head_series(s->head, id, true);

				if (!sr || series_rows_add_profile(sr, ts, stacks, values, n)) {
					rc = -ENOMEM;
					break;
				}
				s->head->n_rows += n;
				s->head->n_profiles++;
				if (ts < s->head->min_ts)
					s->head->min_ts = ts;
				if (ts > s->head->max_ts)
					s->head->max_ts = ts;
				series_note_time(series_at(&s->sx, id), ts);
				atomic_fetch_add(&s->total_rows, n);
			}
		}
		if (!rc && (r.bad || r.p != r.end))
			rc = -EBADMSG;
	}
	free(stacks);
	free(values);
	return rc;
}
