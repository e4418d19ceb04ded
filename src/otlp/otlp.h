/*
 * otlp.h — OpenTelemetry profiles (OTLP, v1development as of
 * opentelemetry-proto v1.8.0) turned into what Kiln stores: one label set
 * per OTLP Profile, and either one pprof profile each (otlp_convert) or,
 * what the server uses, rows over one stack table for the whole request
 * (otlp_convert_rows, otlp_rows_store: the store's row path).
 *
 * An ExportProfilesServiceRequest carries one ProfilesDictionary (strings,
 * functions, locations, mappings, links, attributes, stacks) that every
 * profile of the request refers to by index. Conversion happens in two
 * levels, and the level decides what a bad index costs:
 *   - the dictionary is checked first, row by row (every index it holds is
 *     bounds-checked against its table): a bad row fails the whole request
 *     (-EINVAL), since any profile may use it;
 *   - then each profile is converted on its own: a bad index in a profile
 *     (its sample type, stacks, attributes, links) or a label or time that
 *     Kiln refuses rejects that profile only; it is counted in
 *     otlp_result.n_rejected and its reason joins error_message (OTLP's
 *     partial success). Nothing of a rejected profile is kept.
 * Error messages name the place ("resource_profiles[0].scope_profiles[1].
 * profiles[2]: samples[4].stack_index 9 is out of range (stack_table has 3
 * rows)").
 *
 * Mapping to Kiln (docs/API.md, "OTLP profiles"):
 *   - series labels: the resource's, the scope's and the profile's
 *     attributes, later ones overriding earlier ones, names sanitized to
 *     Prometheus rules (service.name -> service_name, k8s.pod.name ->
 *     k8s_pod_name); __name__ is the scope name (sanitized; "unknown" when
 *     empty), as Parca does;
 *   - the profile's sample_type and period_type/period become the pprof
 *     profile's; a sample's value is the sum of its values, or the number of
 *     its timestamps when it has no values; a CPU period ("cpu") is delta;
 *   - a sample's attributes and link (trace_id, span_id as hex) become pprof
 *     sample labels;
 *   - a location's profile.frame.type attribute is kept on its mapping: a
 *     location without a mapping whose frame type is not "native" gets the
 *     mapping "[TYPE]" ("[kernel]", "[python]", "[jvm]"), which the query
 *     side keeps and shows; mappings take their build ID from the
 *     process.executable.build_id.{gnu,go,htlhash} attributes.
 */
#ifndef KILN_OTLP_H
#define KILN_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/error.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pprof/pprof.h"
#include "store/store.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    otlp_request;

#define OTLP_MAX_LABELS 64

/* One converted OTLP Profile. */
struct otlp_profile {
	struct label *labels; /* __name__ first; in the caller's arena */
	size_t n_labels;
	struct pprof_profile *profile; /* owned; freed by otlp_result_release */
	int64_t timestamp_ms;
	bool delta;
	uint64_t samples; /* OTLP samples it came from */
};

struct otlp_result {
	struct otlp_profile *profiles; /* the accepted ones, in request order */
	size_t n_profiles;
	size_t n_seen;		   /* profiles in the request */
	size_t n_rejected;	   /* n_seen - n_profiles */
	uint64_t samples_accepted; /* OTLP samples of the accepted profiles */
	uint64_t samples_rejected;
	char error_message[1024]; /* why profiles were rejected ("" if none) */
};

struct otlp_limits {
	size_t max_labels; /* 0 = OTLP_MAX_LABELS */
	int64_t now_ms;	   /* a profile without time_unix_nano gets this */
	/* Oldest and newest accepted profile times. */
	int64_t min_time_ms;
	int64_t max_future_skew_ms;
};

/* Unpacks an ExportProfilesServiceRequest into arena a. -EINVAL (err says
 * what) for bytes that are not one, attribute values nested more than 32
 * deep, or a NUL byte in a string that would become a label or name. */
int otlp_request_unpack(const uint8_t *data, size_t len, struct arena *a, otlp_request **out,
			struct kiln_error *err);

/* Converts req (see the top of this file). Returns 0 with out filled (some
 * or all profiles may be rejected), -EINVAL for a bad dictionary, -ENOMEM.
 * Labels live in a; release out with otlp_result_release either way. */
int otlp_convert(const otlp_request *req, const struct otlp_limits *lim, struct arena *a,
		 struct otlp_result *out, struct kiln_error *err);
void otlp_result_release(struct otlp_result *r);

/* The same request for the store's row path (rows.c): the stacks every
 * accepted profile uses as one pprof (stacks: sample k is stack number k;
 * NULL when there is none) and each profile as rows referring to them.
 * Accepts and rejects exactly what otlp_convert does, with the same
 * messages; a rejected profile adds nothing to the stack table. */
struct otlp_rows_profile {
	struct label *labels; /* __name__ first; in the caller's arena */
	size_t n_labels;
	struct store_series_type type; /* strings from the request */
	int64_t timestamp_ms;
	uint32_t *stacks; /* stack numbers (in the arena), with values */
	int64_t *values;
	size_t n;
	uint64_t samples; /* OTLP samples it came from */
};

struct otlp_rows {
	struct otlp_rows_profile *profiles; /* the accepted ones, in request order */
	size_t n_profiles;
	struct pprof_profile *stacks; /* owned; freed by otlp_rows_release */
	size_t n_stacks;
	size_t n_seen, n_rejected;
	uint64_t samples_accepted, samples_rejected;
	char error_message[1024];
};

/* Returns 0 with out filled, -EINVAL for a bad dictionary, -ENOMEM; release
 * out with otlp_rows_release either way. */
int otlp_convert_rows(const otlp_request *req, const struct otlp_limits *lim, struct arena *a,
		      struct otlp_rows *out, struct kiln_error *err);
void otlp_rows_release(struct otlp_rows *r);
/* Stores r: its stack table interned once (store_intern_stacks), each
 * profile's series interned (the store's label checks: -EINVAL naming the
 * profile), then every profile's rows (store_write_groups). r's stack
 * numbers become store stack ids. 0 once durable, else a negative errno. */
int otlp_rows_store(struct store *st, struct otlp_rows *r, struct kiln_error *err);

/* OTLP/JSON (lowerCamelCase or original field names, 64-bit integers as
 * strings or numbers, enums by name or number, trace_id, span_id and
 * profile_id in hex, other bytes in base64, unknown fields ignored) of an
 * ExportProfilesServiceRequest, re-encoded as protobuf into out, so that one
 * decoder serves both. -EINVAL with the JSON path of the first bad value
 * ("resourceProfiles[0].scopeProfiles[0].profiles[0].samples[1].values[0]:
 * expected an integer, got true"), or -ENOMEM. */
int otlp_json_to_protobuf(const char *json, size_t len, struct buf *out, struct kiln_error *err);

/* The reverse for the answer: appends ExportProfilesServiceResponse as
 * OTLP/JSON ("{}" or {"partialSuccess":{...}}). */
int otlp_response_json(int64_t rejected, const char *error_message, struct buf *out);

#endif
