/*
 * sink_stream.h — the push sink's IngestService/Push encoder and session
 * (sink_stream.c; the protocol is in docs/API.md). Used by sink_remote.c's
 * sender thread only, one client per sink, no locking.
 */
#ifndef KILN_AGENT_SINK_STREAM_H
#define KILN_AGENT_SINK_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

struct stream_client;
struct push_window;

/* A client with a random agent id and a fresh session; NULL on ENOMEM. */
struct stream_client *stream_client_new(void);
void stream_client_free(struct stream_client *sc); /* NULL-safe */
/* Forgets what was sent: the next request starts a new session. */
void stream_client_reset(struct stream_client *sc);

/* Encodes a packed WriteRawRequest (one process profile per series) as a
 * PushRequest of one Window, window_id, into req (reset first), adding the
 * new series and stacks to the session; *n_rows gets its rows. 0, or a
 * negative errno (-EINVAL: not a WriteRawRequest). */
int stream_client_encode(struct stream_client *sc, const uint8_t *writeraw, size_t len,
			 uint64_t window_id, struct buf *req, size_t *n_rows);

/* The same from a captured window (push_window.h): what the push sink
 * sends. Builds no pprof but the one describing the stacks this session
 * has not sent yet. A failure leaves a fresh session. */
int stream_client_encode_window(struct stream_client *sc, const struct push_window *pw,
				uint64_t window_id, struct buf *req, size_t *n_rows);

/* Reads the PushResponse of such a request: 0 when window_id was
 * acknowledged; -ECONNRESET when the server asked for a new session (the
 * session is reset: encode again); another negative errno otherwise. */
int stream_client_answer(struct stream_client *sc, const uint8_t *resp, size_t len,
			 uint64_t window_id, struct kiln_error *err);

#endif
