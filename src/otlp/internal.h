/*
 * internal.h — what the two OTLP converters share (convert.c builds one
 * pprof per profile, rows.c one stack table per request and rows per
 * profile): the dictionary view and its check, the per-conversion state,
 * a profile's labels, type and time, a sample's checks and value, and a
 * dictionary location as a pprof builder location. Both converters accept
 * and reject exactly the same profiles with the same messages, because
 * every check lives here once.
 */
#ifndef KILN_OTLP_INTERNAL_H
#define KILN_OTLP_INTERNAL_H

#include "otlp/otlp.h"

typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary otlp_dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles otlp_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles otlp_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile otlp_profile_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Sample otlp_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Location otlp_location;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping otlp_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Function otlp_function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit otlp_attribute;
typedef Opentelemetry__Proto__Common__V1__KeyValue otlp_key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue otlp_any_value;

/* The dictionary's table sizes, and an empty dictionary when there is none. */
struct dict_view {
	const otlp_dict *d;
	size_t n_string, n_function, n_location, n_mapping, n_link, n_attribute, n_stack;
};

struct conv {
	const struct dict_view *v;
	const struct otlp_limits *lim;
	struct arena *a;
	struct pprof_builder *b;
	/* Builder ids by dictionary row, 0 = not made yet in this builder. */
	uint64_t *location_ids, *function_ids, *mapping_ids;
	/* Synthetic "[TYPE]" mappings for unmapped frames, by frame type. */
	struct {
		const char *type;
		uint64_t id;
	} frame_maps[16];
	size_t n_frame_maps;
	/* Series labels being gathered. */
	struct label *labels;
	size_t n_labels, max_labels;
};

/* A profile's type, period and time, checked (otlp_profile_header). */
struct otlp_header {
	const char *sample_type, *sample_unit;
	bool has_period;
	const char *period_type, *period_unit;
	int64_t period;
	int64_t time_nanos, duration_nanos;
	int64_t timestamp_ms;
	bool delta;
};

/* v describes req's dictionary (an empty one when it has none). */
void otlp_dict_view_init(struct dict_view *v, const otlp_request *req);
/* Every index held by a dictionary row, bounds-checked (-EINVAL). */
int otlp_check_dictionary(const struct dict_view *v, struct kiln_error *err);
/* Gathers p's series labels into c->labels (resource, scope, then profile
 * attributes; in c->a) and checks and fills h: -EINVAL rejects the profile,
 * -ENOMEM fails the request. */
int otlp_profile_header(struct conv *c, const otlp_resource_profiles *rp,
			const otlp_scope_profiles *sp, const otlp_profile_msg *p,
			struct otlp_header *h, struct kiln_error *err);
/* Checks sample s (its stack, values, link and attributes, where names it
 * in messages) and gives its value: -EINVAL rejects the profile. */
int otlp_sample_check(const struct conv *c, const otlp_sample *s, const char *where, int64_t *value,
		      struct kiln_error *err);
/* Builder id of dictionary location li in c->b, made on first use; 0 on
 * out-of-memory. */
uint64_t otlp_location_id(struct conv *c, int32_t li);
/* Appends "where: why" to a partial-success message of size bytes. */
void otlp_note_rejection(char *msg, size_t size, const char *where, const char *why);

#endif
