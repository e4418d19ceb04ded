/*
 * ingest_stream.h — the server side of kiln.ingest.v1.IngestService/Push
 * (docs/API.md): per-agent sessions that map the agent's series and stack
 * references to metastore ids, and the handler that turns a window's rows
 * into one store_write_rows call.
 *
 * A session belongs to one agent id and holds two dense arrays (series
 * reference -> series id, stack reference -> stack id); an idle session is
 * a few dozen bytes plus 4 bytes per reference. Sessions are bounded in
 * number (the least recently used idle one is emptied first) and each in
 * references (a client past the limit is told to start a new session), so
 * a hostile client cannot grow the server without bound.
 */
#ifndef KILN_SERVER_INGEST_STREAM_H
#define KILN_SERVER_INGEST_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/ingest_proto.h"
#include "store/store.h"

struct stream_sessions;

struct stream_limits {
	size_t max_sessions;	       /* agents with state; 0 = 65536 */
	size_t max_stacks_per_session; /* 0 = 1M */
	size_t max_series_per_session; /* 0 = 65536 */
};

struct stream_sessions *stream_sessions_new(const struct stream_limits *lim);
void stream_sessions_free(struct stream_sessions *t); /* NULL-safe */

/* What one Push did. */
struct stream_push_result {
	uint64_t acked[INGEST_PUSH_MAX_WINDOWS];
	size_t n_acked;
	bool reset_session;
	size_t rows_written, duplicates;
};

/* Applies a decoded Push to the store: definitions, then each window's rows
 * (acked once durable, or at once when the window is a replay). 0 with *res
 * filled, or a negative errno with err naming the window and field (the
 * windows acked before it stay acked in *res). */
int stream_push_apply(struct stream_sessions *t, struct store *s, const struct ingest_push *push,
		      struct stream_push_result *res, struct kiln_error *err);

/* Sessions held and the bytes of their tables (for /metrics and the bench). */
void stream_sessions_stats(struct stream_sessions *t, size_t *n_sessions, size_t *bytes);

#endif
