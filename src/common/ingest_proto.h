/*
 * ingest_proto.h — the messages of kiln.ingest.v1.IngestService/Push
 * (proto/kiln/ingest/v1/ingest.proto, docs/API.md), read and written by
 * hand: the server decodes requests and encodes answers, the agent the
 * other way round. Shared here because both sides must agree byte for
 * byte and neither may depend on the other.
 *
 * Decoding never trusts its input: every length is bounded by the buffer,
 * counts by the limits below, strings must be UTF-8 without NUL; a bad
 * message is rejected with a message naming the field (e.g.
 * "windows[2].rows[0]: series_ref missing"). Decoded views point into the
 * request buffer (bytes fields) or the caller's arena (arrays, strings), so
 * they live as long as both.
 */
#ifndef KILN_COMMON_INGEST_PROTO_H
#define KILN_COMMON_INGEST_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/error.h"

#define INGEST_PUSH_PATH	    "/kiln.ingest.v1.IngestService/Push"
#define INGEST_PUSH_MAX_WINDOWS	    256	  /* per request */
#define INGEST_PUSH_MAX_SERIES_DEFS 65536 /* per window */
#define INGEST_PUSH_MAX_LABELS	    128	  /* per series, __name__ included */

struct ingest_label {
	const char *name, *value;
};

struct ingest_series_def {
	uint32_t ref;
	struct ingest_label *labels;
	size_t n_labels;
	const char *sample_type, *sample_unit, *period_type, *period_unit;
	int64_t period;
	bool delta;
};

struct ingest_exec_info {
	uint32_t elf_type;
	uint64_t load_offset, load_vaddr;
};

struct ingest_stack_defs {
	uint32_t first_ref;
	const uint8_t *pprof; /* a pprof Profile, gzipped or not */
	size_t pprof_len;
	struct ingest_exec_info *exec;
	size_t n_exec;
};

struct ingest_series_rows {
	uint32_t series_ref;
	bool has_series_ref, has_timestamp;
	int64_t timestamp_ms; /* the window's when !has_timestamp */
	const uint8_t *rows;  /* packed (stack ref delta, zigzag value) */
	size_t len;
};

struct ingest_window {
	uint64_t window_id;
	int64_t timestamp_ms;
	struct ingest_series_def *series;
	size_t n_series;
	struct ingest_stack_defs *stacks;
	size_t n_stacks;
	struct ingest_series_rows *rows;
	size_t n_rows;
};

struct ingest_push {
	uint64_t agent_id, session_id;
	bool start;
	struct ingest_window *windows;
	size_t n_windows;
};

/* Decodes a PushRequest; 0, or -EINVAL (-ENOMEM) with err saying where. */
int ingest_push_decode(const uint8_t *p, size_t len, struct arena *a, struct ingest_push *out,
		       struct kiln_error *err);

/* Reads the next row of a SeriesRows.rows: *ref is advanced by the delta.
 * Returns 1 for a row, 0 at the end, -EINVAL on a bad varint or a
 * reference that overflows 32 bits. */
int ingest_rows_next(const uint8_t **p, const uint8_t *end, uint64_t *ref, int64_t *value);

/* Encoding (the agent's side): append to out. */
int ingest_put_varint(struct buf *out, uint64_t v);
int ingest_put_row(struct buf *out, uint32_t ref_delta, int64_t value);
int ingest_put_field_varint(struct buf *out, uint32_t field, uint64_t v);
int ingest_put_field_fixed64(struct buf *out, uint32_t field, uint64_t v);
int ingest_put_field_bytes(struct buf *out, uint32_t field, const void *p, size_t len);
int ingest_put_field_str(struct buf *out, uint32_t field, const char *s);

/* PushResponse. */
struct ingest_push_response {
	uint64_t *acked; /* malloc'ed; freed by the caller */
	size_t n_acked;
	bool reset_session;
};
int ingest_response_encode(const uint64_t *acked, size_t n, bool reset_session, struct buf *out);
int ingest_response_decode(const uint8_t *p, size_t len, struct ingest_push_response *out,
			   struct kiln_error *err);

#endif
