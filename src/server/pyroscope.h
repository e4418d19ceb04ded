/*
 * pyroscope.h — the parsers behind Pyroscope's push API (POST /ingest),
 * without the transport, so that the fuzz targets drive them directly.
 *
 *   pyro_parse_name     "app.cpu{env=prod,region=eu}": the application
 *                       name, its profile-type suffix and its labels.
 *   pyro_parse_time     from/until: unix seconds, "now", "now-1h".
 *   pyro_folded_parse   format=folded ("a;b;c 42" per line, root first)
 *                       and format=lines ("a;b;c" per line, each line one
 *                       sample, as Pyroscope counts them).
 *   pyro_multipart_*    multipart/form-data (RFC 7578) as the Go and Node
 *                       SDKs send format=pprof: the parts by name.
 *
 * Every function returns 0 or a negative errno; -EINVAL comes with a
 * message in err that names what is wrong and where (line and byte offset
 * of a folded line, byte offset in a multipart body). Nothing here
 * allocates except pyro_folded_parse's one line buffer, freed before it
 * returns.
 */
#ifndef KILN_SERVER_PYROSCOPE_H
#define KILN_SERVER_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define PYRO_MAX_NAME_LABELS 32
#define PYRO_MAX_NAME_BYTES  1024
#define PYRO_MAX_FRAMES	     4096

struct pyro_name {
	/* Everything before '{' (trimmed); "app.cpu" stays whole here. */
	char app[PYRO_MAX_NAME_BYTES];
	/* label i is names[i] = values[i]; point into buf */
	const char *names[PYRO_MAX_NAME_LABELS];
	const char *values[PYRO_MAX_NAME_LABELS];
	size_t n_labels;
	char buf[PYRO_MAX_NAME_BYTES];
};

/* Parses name=APP{k=v,...}. APP is non-empty and has no '{', '}', ',' or
 * '='; labels are k=v pairs separated by ',', keys non-empty, at most
 * PYRO_MAX_NAME_LABELS. A key's characters other than [A-Za-z0-9_] (and a
 * leading digit) become '_': "otel.scope.name" is otel_scope_name; the
 * rest of the label checks are ingest's, as for any label.
 * "{}" and a missing brace part mean no labels. */
int pyro_parse_name(const char *s, struct pyro_name *out, struct kiln_error *err);

/* Splits "app.cpu" into "app" and the suffix "cpu" when the suffix is a
 * profile type Pyroscope knows (pyro_type_for_suffix); otherwise the whole
 * name is the app and *suffix is NULL. app must hold strlen(name)+1. */
void pyro_split_app(const char *name, char *app, const char **suffix);

/* What a Pyroscope profile-type suffix maps to (Pyroscope's own mapping for
 * pushed trees): the series' __name__ and the sample type and unit. NULL
 * for an unknown suffix. */
struct pyro_type {
	const char *suffix;
	const char *metric; /* __name__: process_cpu, memory, mutex, ... */
	const char *sample_type;
	const char *sample_unit;
	const char *period_type; /* as Go's runtime profiles name them */
	const char *period_unit;
};
const struct pyro_type *pyro_type_for_suffix(const char *suffix);

/* Parses a from/until value: decimal unix seconds (ms or ns when it has 13
 * or 19 digits), "now", or "now-N[smhd]". now_s is the current time. */
int pyro_parse_time(const char *s, int64_t now_s, int64_t *out_s, struct kiln_error *err);

/* Calls emit for each non-empty line: frames root first, NUL-terminated,
 * valid until emit returns. With lines_format every line has the value 1;
 * otherwise the value is the last space-separated field, a decimal integer
 * >= 0. A non-zero return from emit stops the walk and is returned. */
typedef int (*pyro_stack_fn)(void *ctx, const char *const *frames, size_t n_frames, int64_t value);
int pyro_folded_parse(const uint8_t *data, size_t len, bool lines_format, pyro_stack_fn emit,
		      void *ctx, struct kiln_error *err);

struct pyro_part {
	char name[64];	     /* the form field name */
	const uint8_t *data; /* into the body */
	size_t len;
};

#define PYRO_MAX_PARTS 8

/* The boundary parameter of a multipart/form-data Content-Type, copied to
 * out (at most 70 bytes, RFC 2046); -EINVAL if there is none. */
int pyro_multipart_boundary(const char *content_type, char *out, size_t size,
			    struct kiln_error *err);
/* Splits body into its parts (at most PYRO_MAX_PARTS). Each part must
 * carry Content-Disposition: form-data with a name; the body must end with
 * the closing delimiter. */
int pyro_multipart_parse(const uint8_t *body, size_t len, const char *boundary,
			 struct pyro_part *parts, size_t *n_parts, struct kiln_error *err);
/* The part named name, or NULL. */
const struct pyro_part *pyro_multipart_find(const struct pyro_part *parts, size_t n,
					    const char *name);

/* ---- writing (pyroscope_write.c) ---------------------------------------- */
struct store;
struct ingest_decoders;
struct pprof_profile;

/* A series' labels in the order they are sent; names[0] is "__name__". */
struct pyro_labels {
	const char *names[PYRO_MAX_NAME_LABELS + 4];
	const char *values[PYRO_MAX_NAME_LABELS + 4];
	size_t n;
};

/* What one write needs, and what it stored. */
struct pyro_write {
	struct store *store;		   /* NULL: decode and check only (benches) */
	struct ingest_decoders *decoders;  /* NULL: decode without a pooled decoder */
	size_t max_inflate;		   /* per profile; 0 = pprof's default */
	int64_t max_future_skew_ms;	   /* 0 = ingest's default */
	int64_t now_ms;			   /* the server's clock */
	int64_t timeless_ms;		   /* the time of a profile without time_nanos */
	uint64_t profiles, samples, bytes; /* added to by each successful write */
};

/* Pyroscope's __name__ for a pprof, from its sample types (process_cpu,
 * memory, mutex, block, goroutines, wall, else the first sample type). */
const char *pyro_pprof_metric(const struct pprof_profile *p);

/* Writes one pprof (raw or gzipped) as one series through WriteRaw's path
 * (ingest_prepare, ingest_commit), decoding it once. metric_from_profile:
 * __name__ becomes pyro_pprof_metric of the decoded profile (the value in
 * labels only has to pass as a metric name until then). 0 once durable, or
 * a negative errno with err set (a decode error starts "profile: "). */
int pyro_write_pprof(struct pyro_write *w, const struct pyro_labels *labels,
		     bool metric_from_profile, const uint8_t *pprof, size_t len,
		     struct kiln_error *err);

/* Writes a profile built in the server (folded/lines stacks) as one series
 * the same way, checked by ingest_prepare_built instead of being encoded
 * and decoded; p passes to the write, also on failure. wire_bytes: the
 * request body's size (metrics). */
int pyro_write_built(struct pyro_write *w, const struct pyro_labels *labels,
		     struct pprof_profile *p, size_t wire_bytes, struct kiln_error *err);

#endif
