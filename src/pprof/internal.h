/*
 * internal.h — what the files behind pprof.h share; not part of the API.
 *
 * struct pprof_profile is a decoded (or built) message in its own arena plus
 * three id tables. An id table maps a 64-bit id to the message object with
 * that id: a plain array indexed by id when the ids are dense (what every
 * real producer writes: 1..N), a hash table otherwise.
 */
#ifndef KILN_PPROF_INTERNAL_H
#define KILN_PPROF_INTERNAL_H

#include "common/satadd.h"
#include "pprof/pprof.h"

#include "common/arena.h"
#include "common/buf.h"
#include "common/htab.h"

#include <inttypes.h>

struct pprof_idtab {
	uint32_t *dense; /* position + 1 of id, for id < n_dense (0 = absent) ... */
	size_t n_dense;
	struct htab *sparse; /* ... or id -> position in items */
	void **items;
};

struct pprof_profile {
	struct arena *arena;
	struct buf raw; /* decoded: the message bytes, which the strings point into */
	pprof_msg *msg;
	struct pprof_idtab locations, functions, mappings;
};

/* Sums saturate instead of overflowing (common/satadd.h): values come
 * from untrusted files. */
static inline int64_t pprof_add(int64_t a, int64_t b)
{
	return sat_add_i64(a, b);
}

/* Builds a table over n items whose ids are read by id_of. Rejects id 0 and
 * duplicate ids with an error naming field[i].id. */
int pprof_idtab_build(struct pprof_idtab *t, void **items, size_t n,
		      uint64_t (*id_of)(const void *item), const char *field,
		      struct kiln_error *err);
size_t pprof_idtab_index_sparse(const struct pprof_idtab *t, uint64_t id);

/* Position in items of the object with this id, or SIZE_MAX. Inline: the
 * validator and merge call it once per stack frame. */
static inline size_t pprof_idtab_index(const struct pprof_idtab *t, uint64_t id)
{
	if (t->dense)
		return id < t->n_dense && t->dense[id] ? t->dense[id] - 1 : SIZE_MAX;
	return pprof_idtab_index_sparse(t, id);
}

/* The object with this id, or NULL. */
static inline void *pprof_idtab_get(const struct pprof_idtab *t, uint64_t id)
{
	size_t i = pprof_idtab_index(t, id);

	return i == SIZE_MAX ? NULL : t->items[i];
}
void pprof_idtab_free(struct pprof_idtab *t);

/* Parses protobuf bytes into a message allocated in a (no validation).
 * The string table is not copied: its strings point into data, which must
 * outlive the message and have one writable byte at data[len]; each string
 * is NUL-terminated in place by overwriting the byte after it (the key of
 * the next field, or data[len]), so data is no longer valid protobuf
 * afterwards. */
int pprof_parse(struct arena *a, uint8_t *data, size_t len, pprof_msg **out,
		struct kiln_error *err);

/* Builds the three tables of p->msg and checks every invariant. */
int pprof_profile_index(struct pprof_profile *p, struct kiln_error *err);
/* Builds the three tables only (ids still checked non-zero and unique), for
 * a message that is valid by construction (subset.c: every reference was
 * remapped from a validated source). */
int pprof_profile_index_tables(struct pprof_profile *p, struct kiln_error *err);
/* The invariants, given tables already built over m. */
int pprof_check(const pprof_msg *m, const struct pprof_idtab *locations,
		const struct pprof_idtab *functions, const struct pprof_idtab *mappings,
		struct kiln_error *err);

/* The builder's state; see builder.c for how it is laid out. */
struct pprof_builder {
	struct arena *arena;
	struct htab *string_ix, *mapping_ix, *function_ix, *location_ix, *sample_ix;
	char **strings;
	size_t n_strings, cap_strings;
	pprof_mapping_msg *mappings;
	size_t n_mappings, cap_mappings;
	pprof_function_msg *functions;
	size_t n_functions, cap_functions;
	pprof_location_msg *locations;
	size_t n_locations, cap_locations;
	pprof_sample_msg *samples;
	size_t n_samples, cap_samples;
	Perftools__Profiles__ValueType *types;
	size_t n_types, cap_types;
	int64_t *comments;
	size_t n_comments, cap_comments;
	Perftools__Profiles__ValueType period_type;
	bool has_period_type;
	int64_t period, time_nanos, duration_nanos, default_type, drop_frames, keep_frames;
	size_t n_merged; /* profiles merged so far (merge.c) */
	struct buf key;	 /* scratch for interning keys */
	Perftools__Profiles__Label *label_scratch;
	size_t cap_label_scratch;
};

/* Interning by string-table index (indices of this builder). */
int64_t pprof_builder_string_n(struct pprof_builder *b, const char *s, size_t len);
const char *pprof_builder_string_at(const struct pprof_builder *b, int64_t idx);
uint64_t pprof_builder_mapping_idx(struct pprof_builder *b, const pprof_mapping_msg *in);
uint64_t pprof_builder_function_idx(struct pprof_builder *b, int64_t name, int64_t system_name,
				    int64_t filename, int64_t start_line);
int pprof_builder_add_comment_idx(struct pprof_builder *b, int64_t idx);
/* Like pprof_builder_add_sample with labels already interned. */
int pprof_builder_add_sample_ids(struct pprof_builder *b, const uint64_t *locs, size_t n_locs,
				 const int64_t *values, const Perftools__Profiles__Label *labels,
				 size_t n_labels);

/* Assembles the builder's profile as a message allocated in a: with deep,
 * everything is copied (the message outlives the builder); without, the
 * message points into the builder and is valid until its next change. */
int pprof_builder_build_msg(struct pprof_builder *b, struct arena *a, bool deep, pprof_msg **out);

#endif
