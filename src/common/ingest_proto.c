/*
 * ingest_proto.c — the Push messages on the wire (ingest_proto.h).
 *
 * Each message is read in two passes: the first checks framing and counts
 * the repeated fields so that the arrays are allocated once at their size,
 * the second fills them. Unknown fields are skipped, as protobuf requires.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/ingest_proto.h"
#include "common/pbwire.h"
#include "common/utf8.h"
#include "common/varint.h"

struct field {
	uint32_t number, type;
	uint64_t v;	  /* varint / fixed value */
	const uint8_t *p; /* bytes */
	size_t len;
};

/* The next field of [*p, end); 1, 0 at the end, -1 on bad data. */
static int next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
	uint64_t key;

	if (*p >= end)
		return 0;
	if (!pbwire_varint(p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return -1;
	f->number = (uint32_t)(key >> 3);
	f->type = (uint32_t)(key & 7);
	f->p = NULL;
	f->len = 0;
	f->v = 0;
	switch (f->type) {
	case 0:
		return pbwire_varint(p, end, &f->v) ? 1 : -1;
	case 1:
		if (end - *p < 8)
			return -1;
		for (int i = 0; i < 8; i++)
			f->v |= (uint64_t)(*p)[i] << (8 * i);
		*p += 8;
		return 1;
	case 2:
		if (!pbwire_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p))
			return -1;
		f->p = *p;
		f->len = (size_t)f->v;
		*p += f->len;
		return 1;
	case 5:
		if (end - *p < 4)
			return -1;
		for (int i = 0; i < 4; i++)
			f->v |= (uint64_t)(*p)[i] << (8 * i);
		*p += 4;
		return 1;
	default:
		return -1;
	}
}

/* Counts the occurrences of field number `number` (any wire type) in a
 * message; -1 if its framing is bad. */
static long count_field(const uint8_t *p, size_t len, uint32_t number)
{
	const uint8_t *end = p + len;
	struct field f;
	long n = 0;
	int r;

	while ((r = next_field(&p, end, &f)) == 1)
		n += f.number == number;
	return r < 0 ? -1 : n;
}

static const char *dup_str(struct arena *a, const struct field *f, int *rc)
{
	char *s;

	if (f->type != 2 || memchr(f->p, 0, f->len)) {
		*rc = -EINVAL;
		return NULL;
	}
	if (!(s = arena_strndup(a, (const char *)f->p, f->len))) {
		*rc = -ENOMEM;
		return NULL;
	}
	if (!utf8_valid_str(s)) {
		*rc = -EINVAL;
		return NULL;
	}
	return s;
}

static int decode_label(const struct field *lf, struct arena *a, struct ingest_label *l)
{
	const uint8_t *p = lf->p, *end = lf->p + lf->len;
	struct field f;
	int r, rc = 0;

	l->name = l->value = "";
	while (rc == 0 && (r = next_field(&p, end, &f)) == 1) {
		if (f.number == 1)
			l->name = dup_str(a, &f, &rc);
		else if (f.number == 2)
			l->value = dup_str(a, &f, &rc);
	}
	return rc ? rc : r < 0 ? -EINVAL : 0;
}

static int decode_series(const struct field *sf, struct arena *a, struct ingest_series_def *d,
			 struct kiln_error *err)
{
	const uint8_t *p = sf->p, *end = sf->p + sf->len;
	long n = count_field(sf->p, sf->len, 2);
	struct field f;
	int r, rc = 0;

	if (n < 0)
		return kiln_error_set(err, EINVAL, "malformed SeriesDef");
	if (n > INGEST_PUSH_MAX_LABELS)
		return kiln_error_set(err, EINVAL, "%ld labels (limit %d)", n,
				      INGEST_PUSH_MAX_LABELS);
	memset(d, 0, sizeof(*d));
	d->sample_type = d->sample_unit = d->period_type = d->period_unit = "";
	if (!(d->labels = arena_calloc(a, (size_t)n + 1, sizeof(*d->labels))))
		return kiln_error_set(err, ENOMEM, "out of memory");
	while (rc == 0 && (r = next_field(&p, end, &f)) == 1) {
		switch (f.number) {
		case 1:
			if (f.type != 0 || f.v > UINT32_MAX)
				rc = kiln_error_set(err, EINVAL, "ref: not a uint32");
			d->ref = (uint32_t)f.v;
			break;
		case 2:
			if (f.type != 2 || (rc = decode_label(&f, a, &d->labels[d->n_labels])))
				rc = kiln_error_set(err, rc == -ENOMEM ? ENOMEM : EINVAL,
						    "labels[%zu]: not a Label of UTF-8 strings",
						    d->n_labels);
			d->n_labels++;
			break;
		case 3:
		case 4:
		case 5:
		case 6: {
			const char **dst[] = {&d->sample_type, &d->sample_unit, &d->period_type,
					      &d->period_unit};
			static const char *const names[] = {"sample_type", "sample_unit",
							    "period_type", "period_unit"};
			const char *s = dup_str(a, &f, &rc);

			if (rc)
				rc = kiln_error_set(err, -rc, "%s: not a UTF-8 string",
						    names[f.number - 3]);
			else
				*dst[f.number - 3] = s;
			break;
		}
		case 7:
			if (f.type != 0)
				rc = kiln_error_set(err, EINVAL, "period: not a varint");
			d->period = (int64_t)f.v;
			break;
		case 8:
			if (f.type != 0)
				rc = kiln_error_set(err, EINVAL, "delta: not a varint");
			d->delta = f.v != 0;
			break;
		}
	}
	if (!rc && r < 0)
		rc = kiln_error_set(err, EINVAL, "malformed SeriesDef");
	return rc;
}

static int decode_exec(const struct field *ef, struct ingest_exec_info *x)
{
	const uint8_t *p = ef->p, *end = ef->p + ef->len;
	struct field f;
	int r;

	memset(x, 0, sizeof(*x));
	while ((r = next_field(&p, end, &f)) == 1) {
		if (f.type != 0 && f.number >= 1 && f.number <= 3)
			return -EINVAL;
		if (f.number == 1) {
			if (f.v > UINT32_MAX)
				return -EINVAL;
			x->elf_type = (uint32_t)f.v;
		} else if (f.number == 2) {
			x->load_offset = f.v;
		} else if (f.number == 3) {
			x->load_vaddr = f.v;
		}
	}
	return r < 0 ? -EINVAL : 0;
}

static int decode_stacks(const struct field *sf, struct arena *a, struct ingest_stack_defs *d,
			 struct kiln_error *err)
{
	const uint8_t *p = sf->p, *end = sf->p + sf->len;
	long n = count_field(sf->p, sf->len, 3);
	struct field f;
	int r, rc = 0;

	if (n < 0)
		return kiln_error_set(err, EINVAL, "malformed StackDefs");
	memset(d, 0, sizeof(*d));
	if (!(d->exec = arena_calloc(a, (size_t)n + 1, sizeof(*d->exec))))
		return kiln_error_set(err, ENOMEM, "out of memory");
	while (rc == 0 && (r = next_field(&p, end, &f)) == 1) {
		if (f.number == 1) {
			if (f.type != 0 || f.v > UINT32_MAX)
				rc = kiln_error_set(err, EINVAL, "first_ref: not a uint32");
			d->first_ref = (uint32_t)f.v;
		} else if (f.number == 2) {
			if (f.type != 2)
				rc = kiln_error_set(err, EINVAL, "pprof: not bytes");
			d->pprof = f.p;
			d->pprof_len = f.len;
		} else if (f.number == 3) {
			if (f.type != 2 || decode_exec(&f, &d->exec[d->n_exec]))
				rc = kiln_error_set(err, EINVAL, "executable_info[%zu]: malformed",
						    d->n_exec);
			d->n_exec++;
		}
	}
	if (!rc && r < 0)
		rc = kiln_error_set(err, EINVAL, "malformed StackDefs");
	if (!rc && !d->pprof)
		rc = kiln_error_set(err, EINVAL, "pprof missing");
	return rc;
}

static int decode_rows(const struct field *rf, struct ingest_series_rows *d, struct kiln_error *err)
{
	const uint8_t *p = rf->p, *end = rf->p + rf->len;
	struct field f;
	int r;

	memset(d, 0, sizeof(*d));
	while ((r = next_field(&p, end, &f)) == 1) {
		if (f.number == 1) {
			if (f.type != 0 || f.v > UINT32_MAX)
				return kiln_error_set(err, EINVAL, "series_ref: not a uint32");
			d->series_ref = (uint32_t)f.v;
			d->has_series_ref = true;
		} else if (f.number == 2) {
			if (f.type != 2)
				return kiln_error_set(err, EINVAL, "rows: not bytes");
			d->rows = f.p;
			d->len = f.len;
		} else if (f.number == 3) {
			if (f.type != 0)
				return kiln_error_set(err, EINVAL, "timestamp_ms: not a varint");
			d->timestamp_ms = (int64_t)f.v;
			d->has_timestamp = true;
		}
	}
	if (r < 0)
		return kiln_error_set(err, EINVAL, "malformed SeriesRows");
	if (!d->has_series_ref)
		return kiln_error_set(err, EINVAL, "series_ref missing");
	if (!d->rows)
		d->rows = (const uint8_t *)""; /* no rows: an empty range, never NULL */
	return 0;
}

static int decode_window(const struct field *wf, struct arena *a, struct ingest_window *w,
			 struct kiln_error *err)
{
	const uint8_t *p = wf->p, *end = wf->p + wf->len;
	long ns = count_field(wf->p, wf->len, 3), nk = count_field(wf->p, wf->len, 4),
	     nr = count_field(wf->p, wf->len, 5);
	struct field f;
	int r, rc = 0;

	if (ns < 0 || nk < 0 || nr < 0)
		return kiln_error_set(err, EINVAL, "malformed Window");
	if (ns > INGEST_PUSH_MAX_SERIES_DEFS)
		return kiln_error_set(err, EINVAL, "%ld series definitions (limit %d)", ns,
				      INGEST_PUSH_MAX_SERIES_DEFS);
	memset(w, 0, sizeof(*w));
	w->series = arena_calloc(a, (size_t)ns + 1, sizeof(*w->series));
	w->stacks = arena_calloc(a, (size_t)nk + 1, sizeof(*w->stacks));
	w->rows = arena_calloc(a, (size_t)nr + 1, sizeof(*w->rows));
	if (!w->series || !w->stacks || !w->rows)
		return kiln_error_set(err, ENOMEM, "out of memory");
	while (rc == 0 && (r = next_field(&p, end, &f)) == 1) {
		switch (f.number) {
		case 1:
			if (f.type != 0)
				rc = kiln_error_set(err, EINVAL, "window_id: not a varint");
			w->window_id = f.v;
			break;
		case 2:
			if (f.type != 0)
				rc = kiln_error_set(err, EINVAL, "timestamp_ms: not a varint");
			w->timestamp_ms = (int64_t)f.v;
			break;
		case 3:
			if (f.type != 2 || decode_series(&f, a, &w->series[w->n_series], err))
				rc = kiln_error_set(err, EINVAL, "malformed");
			if (rc)
				kiln_error_prefix(err, "series[%zu]: ", w->n_series);
			w->n_series++;
			break;
		case 4:
			if (f.type != 2 || decode_stacks(&f, a, &w->stacks[w->n_stacks], err))
				rc = kiln_error_set(err, EINVAL, "malformed");
			if (rc)
				kiln_error_prefix(err, "stacks[%zu]: ", w->n_stacks);
			w->n_stacks++;
			break;
		case 5:
			if (f.type != 2 || decode_rows(&f, &w->rows[w->n_rows], err))
				rc = kiln_error_set(err, EINVAL, "malformed");
			if (rc)
				kiln_error_prefix(err, "rows[%zu]: ", w->n_rows);
			w->n_rows++;
			break;
		}
	}
	if (!rc && r < 0)
		rc = kiln_error_set(err, EINVAL, "malformed Window");
	if (!rc && w->window_id == 0)
		rc = kiln_error_set(err, EINVAL, "window_id missing (ids start at 1)");
	return rc;
}

int ingest_push_decode(const uint8_t *p, size_t len, struct arena *a, struct ingest_push *out,
		       struct kiln_error *err)
{
	const uint8_t *end = p + len;
	long nw = count_field(p, len, 4);
	struct field f;
	bool has_agent = false, has_session = false;
	int r, rc = 0;

	memset(out, 0, sizeof(*out));
	if (nw < 0)
		return kiln_error_set(err, EINVAL, "PushRequest: malformed protobuf");
	if (nw > INGEST_PUSH_MAX_WINDOWS)
		return kiln_error_set(err, EINVAL, "PushRequest: %ld windows (limit %d)", nw,
				      INGEST_PUSH_MAX_WINDOWS);
	if (!(out->windows = arena_calloc(a, (size_t)nw + 1, sizeof(*out->windows))))
		return kiln_error_set(err, ENOMEM, "out of memory");
	while (rc == 0 && (r = next_field(&p, end, &f)) == 1) {
		switch (f.number) {
		case 1:
			if (f.type != 1)
				rc = kiln_error_set(err, EINVAL, "agent_id: not a fixed64");
			out->agent_id = f.v;
			has_agent = true;
			break;
		case 2:
			if (f.type != 1)
				rc = kiln_error_set(err, EINVAL, "session_id: not a fixed64");
			out->session_id = f.v;
			has_session = true;
			break;
		case 3:
			if (f.type != 0)
				rc = kiln_error_set(err, EINVAL, "start: not a varint");
			out->start = f.v != 0;
			break;
		case 4:
			if (f.type != 2)
				rc = kiln_error_set(err, EINVAL, "malformed");
			else
				rc = decode_window(&f, a, &out->windows[out->n_windows], err);
			if (rc)
				kiln_error_prefix(err, "windows[%zu]: ", out->n_windows);
			out->n_windows++;
			break;
		}
	}
	if (!rc && r < 0)
		rc = kiln_error_set(err, EINVAL, "PushRequest: malformed protobuf");
	if (!rc && (!has_agent || !has_session))
		rc = kiln_error_set(err, EINVAL,
				    "PushRequest: agent_id and session_id are required");
	for (size_t i = 1; !rc && i < out->n_windows; i++)
		if (out->windows[i].window_id <= out->windows[i - 1].window_id)
			rc = kiln_error_set(err, EINVAL,
					    "windows[%zu]: window_id %llu not above the previous "
					    "one's",
					    i, (unsigned long long)out->windows[i].window_id);
	if (rc)
		kiln_error_prefix(err, "PushRequest: ");
	return rc;
}

int ingest_rows_next(const uint8_t **p, const uint8_t *end, uint64_t *ref, int64_t *value)
{
	uint64_t d, v;

	if (*p >= end)
		return 0;
	if (!pbwire_varint(p, end, &d) || !pbwire_varint(p, end, &v))
		return -EINVAL;
	if (d > UINT32_MAX || *ref + d > UINT32_MAX)
		return -EINVAL;
	*ref += d;
	*value = zigzag_decode(v);
	return 1;
}

/* ---- encoding ------------------------------------------------------------- */

int ingest_put_varint(struct buf *out, uint64_t v)
{
	return pbwire_put_varint(out, v);
}

int ingest_put_row(struct buf *out, uint32_t ref_delta, int64_t value)
{
	int rc = ingest_put_varint(out, ref_delta);

	return rc ?: ingest_put_varint(out, zigzag_encode(value));
}

int ingest_put_field_varint(struct buf *out, uint32_t field, uint64_t v)
{
	int rc = ingest_put_varint(out, (uint64_t)field << 3);

	return rc ?: ingest_put_varint(out, v);
}

int ingest_put_field_fixed64(struct buf *out, uint32_t field, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	int rc = ingest_put_varint(out, (uint64_t)field << 3 | 1);
	return rc ?: buf_append(out, b, sizeof(b));
}

int ingest_put_field_bytes(struct buf *out, uint32_t field, const void *p, size_t len)
{
	int rc = ingest_put_varint(out, (uint64_t)field << 3 | 2);

	rc = rc ?: ingest_put_varint(out, len);
	return rc ?: buf_append(out, p, len);
}

int ingest_put_field_str(struct buf *out, uint32_t field, const char *s)
{
	return ingest_put_field_bytes(out, field, s, strlen(s));
}

int ingest_response_encode(const uint64_t *acked, size_t n, bool reset_session, struct buf *out)
{
	struct buf packed = {0};
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++)
		rc = ingest_put_varint(&packed, acked[i]);
	if (!rc && n)
		rc = ingest_put_field_bytes(out, 1, packed.data, packed.len);
	if (!rc && reset_session)
		rc = ingest_put_field_varint(out, 2, 1);
	buf_free(&packed);
	return rc;
}

int ingest_response_decode(const uint8_t *p, size_t len, struct ingest_push_response *out,
			   struct kiln_error *err)
{
	const uint8_t *end = p + len;
	struct field f;
	size_t cap = 0;
	int r;

	memset(out, 0, sizeof(*out));
	while ((r = next_field(&p, end, &f)) == 1) {
		if (f.number == 2) {
			out->reset_session = f.v != 0;
			continue;
		}
		if (f.number != 1)
			continue;
		const uint8_t *q = f.p, *qe = f.p ? f.p + f.len : NULL;
		uint64_t v = f.v;
		/* Packed (the server's) or not: both are proto3 encodings. */
		while (f.type != 2 || q < qe) {
			if (f.type == 2 && !pbwire_varint(&q, qe, &v))
				goto bad;
			if (GROW_ARRAY(out->acked, cap, out->n_acked + 1, 8)) {
				free(out->acked);
				out->acked = NULL;
				return kiln_error_set(err, ENOMEM, "out of memory");
			}
			out->acked[out->n_acked++] = v;
			if (f.type != 2)
				break;
		}
	}
	if (r == 0)
		return 0;
bad:
	free(out->acked);
	out->acked = NULL;
	out->n_acked = 0;
	return kiln_error_set(err, EINVAL, "PushResponse: malformed protobuf");
}
