/*
 * ingest.h — WriteRaw without the transport: decode and validate a
 * WriteRawRequest into a batch, then commit the batch to a store.
 *
 * Split in two so that nothing is written unless the whole request is valid
 * (a bad profile in series 3 must not leave series 1 half-stored), and so
 * that the fuzz target can drive the decoder without a store.
 *
 * Validation (each failure -EINVAL with a message naming the series, label
 * or sample; -EFBIG for a profile that inflates past the limit):
 *   - every series has a __name__ label with a valid metric name
 *     ([a-zA-Z_:][a-zA-Z0-9_:]*), which becomes the profile type's NAME;
 *   - other label names follow Prometheus ([a-zA-Z_][a-zA-Z0-9_]*), are not
 *     reserved ("__" prefix), unique, and at most max_labels per series;
 *     values are valid UTF-8;
 *   - no label name or value holds a NUL byte: protobuf-c hands strings
 *     over NUL-terminated, so "a\0b" would silently become "a" (and
 *     "a\0b", "a\0c" and "a" one series); the request is refused instead
 *     (ingest_check_label_bytes, on the wire bytes);
 *   - at most max_series series, label names and values of at most
 *     max_label_bytes bytes, profiles with at most max_sample_types sample
 *     types and stacks at most max_stack_depth locations deep: what one
 *     request may make the server hold and store (docs/SECURITY.md);
 *   - a profile's time (time_nanos, when set) lies between 2000-01-01 and
 *     now_ms + max_future_skew_ms;
 *   - every raw sample decodes as pprof (pprof_decode: validated, gzip
 *     bounded by max_inflate).
 * Delta (Parca's ":delta" marker): a CPU profile (period type "cpu") that
 * covers a duration holds deltas; everything else is cumulative.
 */
#ifndef KILN_SERVER_INGEST_H
#define KILN_SERVER_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/error.h"
#include "pprof/pprof.h"
#include "store/store.h"

#define INGEST_MAX_LABELS 64
/* The other per-request limits' defaults (ingest_limits, 0 = these). */
#define INGEST_MAX_SERIES	100000
#define INGEST_MAX_LABEL_BYTES	4096
#define INGEST_MAX_STACK_DEPTH	4096
#define INGEST_MAX_SAMPLE_TYPES 32
/* 2000-01-01T00:00:00Z: no profile is older (the window's lower end). */
#define INGEST_MIN_TIME_MS	      946684800000LL
#define INGEST_DEFAULT_FUTURE_SKEW_MS (3600LL * 1000)

struct ingest_profile {
	size_t series; /* index into the request's series */
	/* NULL when the batch decodes at commit (ingest_limits): then raw is
	 * decoded again, one profile at a time, by ingest_commit. */
	struct pprof_profile *profile;
	const uint8_t *raw; /* the RawSample's bytes (in the arena) */
	int64_t timestamp_ms;
	bool delta;
	size_t raw_bytes;
	/* RawSample.executable_info, one per pprof mapping (in the arena). */
	struct store_exec_info *exec;
	size_t n_exec;
};

struct ingest_series {
	struct label *labels; /* __name__ first */
	size_t n_labels;
};

struct ingest_batch {
	struct ingest_series *series;
	size_t n_series;
	struct ingest_profile *profiles;
	size_t n_profiles;
	uint64_t total_samples; /* sample rows: samples x sample types */
	uint64_t total_bytes;
	struct pprof_decoder *decoder; /* from ingest_limits; gets the profiles back */
	struct pprof_decode_opts dopts;
};

struct ingest_limits {
	size_t max_inflate;	 /* per profile; 0 = pprof's default */
	size_t max_labels;	 /* 0 = INGEST_MAX_LABELS */
	size_t max_series;	 /* 0 = INGEST_MAX_SERIES */
	size_t max_label_bytes;	 /* 0 = INGEST_MAX_LABEL_BYTES */
	size_t max_stack_depth;	 /* 0 = INGEST_MAX_STACK_DEPTH */
	size_t max_sample_types; /* 0 = INGEST_MAX_SAMPLE_TYPES */
	int64_t now_ms;		 /* used when a profile has no time_nanos */
	/* How far past now_ms a profile's time may lie; 0 = 1 h. */
	int64_t max_future_skew_ms;
	/* Optional: decodes with (and ingest_batch_release recycles into)
	 * this decoder, which the caller owns and must not share with another
	 * thread until the batch is released. NULL: plain pprof_decode. */
	struct pprof_decoder *decoder;
	/* Keep no decoded profile past its validation: ingest_commit decodes
	 * each again just before writing it. A decoded profile takes several
	 * times its wire size, so holding a whole big request's (10k series)
	 * took ~10x the request; this way the peak is the request plus one
	 * profile, for twice the decoding. */
	bool decode_at_commit;
};

/* Decoders for the ingest threads to borrow, one per request, so that each
 * reuses the buffers of an earlier request (pprof_decoder in pprof.h).
 * Thread-safe. At most max_kept idle decoders are kept (each holds up to
 * PPROF_DECODER_KEEP_BYTES, ~0.7 MB for an agent profile); take returns NULL
 * only when out of memory (then decode without one). */
struct ingest_decoders;
struct ingest_decoders *ingest_decoders_new(size_t max_kept);
void ingest_decoders_free(struct ingest_decoders *ds);
struct pprof_decoder *ingest_decoder_take(struct ingest_decoders *ds);
void ingest_decoder_give(struct ingest_decoders *ds, struct pprof_decoder *d);

/* Walks the wire bytes of a WriteRawRequest and refuses (-EINVAL, naming
 * the series and label) a label name or value that holds a NUL byte.
 * Malformed wire data is left to the protobuf decoder (0 here). */
int ingest_check_label_bytes(const uint8_t *req, size_t len, struct kiln_error *err);

/* Decodes req into out; everything lives in arena a except the profiles
 * (release with ingest_batch_release). */
int ingest_prepare(const uint8_t *req, size_t len, const struct ingest_limits *lim, struct arena *a,
		   struct ingest_batch *out, struct kiln_error *err);
/* The batch of one series (labels, __name__ among them) and one profile
 * built in the server (Pyroscope's folded stacks), checked as
 * ingest_prepare checks a series and its decoded profile, without the
 * encode and decode a WriteRawRequest would cost. p passes to the batch,
 * also on failure; wire_bytes is what the request carried (metrics). */
int ingest_prepare_built(const struct label *labels, size_t n_labels, struct pprof_profile *p,
			 size_t wire_bytes, const struct ingest_limits *lim, struct arena *a,
			 struct ingest_batch *out, struct kiln_error *err);
/* Writes every profile (decoding it first under decode_at_commit); stops
 * at the first failure (-ENOSPC, -ESHUTDOWN, ...). */
int ingest_commit(struct store *s, const struct ingest_batch *b, struct kiln_error *err);
void ingest_batch_release(struct ingest_batch *b);

#endif
