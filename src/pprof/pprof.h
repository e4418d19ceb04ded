/*
 * pprof.h — the pprof Profile format: decode, validate, build, encode, merge.
 *
 * Every other module speaks pprof through this header. A decoded profile is
 * the protobuf-c message (generated from proto/pprof/profile.proto) living in
 * an arena owned by struct pprof_profile, plus id -> index tables so that
 * references resolve in O(1). Decoding always validates: a profile handed
 * out by pprof_decode has string_table[0] == "", every id reference
 * resolving, and one value per sample type in every sample. An invalid
 * input yields an error naming the field ("sample[12].location_id[3]: no
 * location with id 77"), never a partial result.
 *
 * The builder interns strings, mappings, functions and locations (equal
 * inputs get the same id) and sums samples with the same stack and labels.
 * Ids are 1-based and dense, in order of first use. The agent builds its
 * per-process profiles with it; merge is built on it too.
 *
 * pprof_encode_symbolized writes a decoded profile back with names given
 * to its addresses (what `kilnctl pprof symbolize` does with a symbolizer's
 * answers), changing nothing else.
 *
 * Stacks follow pprof's order: location_id[0] is the leaf; within a
 * location, line[0] is the innermost (inlined) frame and the last line is
 * the function that the others were inlined into.
 */
#ifndef KILN_PPROF_H
#define KILN_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "pprof/profile.pb-c.h"

typedef Perftools__Profiles__Profile pprof_msg;
typedef Perftools__Profiles__Sample pprof_sample_msg;
typedef Perftools__Profiles__Location pprof_location_msg;
typedef Perftools__Profiles__Function pprof_function_msg;
typedef Perftools__Profiles__Mapping pprof_mapping_msg;

/* ---- decoding ----------------------------------------------------------- */

struct pprof_decode_opts {
	size_t max_inflated_bytes; /* 0 = default 1 GiB; larger gzip input is refused */
};

struct pprof_profile; /* opaque: the message, its arena and lookup tables */

/* Decodes gzip-compressed or raw protobuf bytes and validates the result.
 * On success *out owns everything (free with pprof_profile_free); data may be
 * released right away. Returns 0 or a negative errno with err filled. */
int pprof_decode(const void *data, size_t len, const struct pprof_decode_opts *opts,
		 struct pprof_profile **out, struct kiln_error *err);
/* Reads and decodes a file; the error message starts with the path. */
int pprof_decode_file(const char *path, const struct pprof_decode_opts *opts,
		      struct pprof_profile **out, struct kiln_error *err);
void pprof_profile_free(struct pprof_profile *p);

/* A decoder keeps what decoding one profile allocates (the inflater, the
 * message buffer, the arena) for the next one, so that a thread decoding
 * profile after profile (WriteRaw) does not malloc, fault in and free half a
 * megabyte each time. Not thread-safe: one decoder per thread at a time.
 * pprof_decoder_decode is pprof_decode (same checks, same result);
 * pprof_decoder_recycle frees p (NULL-safe) but gives its memory back to d
 * when d has none or less and it is not oversized (the smaller spare is
 * freed instead), so a decoder holds at most one
 * profile's buffers (at most PPROF_DECODER_KEEP_BYTES). A profile may be
 * recycled into any decoder, or freed with pprof_profile_free instead; d may
 * be NULL in both calls (plain pprof_decode / pprof_profile_free). */
#define PPROF_DECODER_KEEP_BYTES ((size_t)10 << 20)
struct pprof_decoder;
struct pprof_decoder *pprof_decoder_new(void);
void pprof_decoder_free(struct pprof_decoder *d);
int pprof_decoder_decode(struct pprof_decoder *d, const void *data, size_t len,
			 const struct pprof_decode_opts *opts, struct pprof_profile **out,
			 struct kiln_error *err);
void pprof_decoder_recycle(struct pprof_decoder *d, struct pprof_profile *p);

/* Checks the invariants listed above on any message. */
int pprof_validate(const pprof_msg *m, struct kiln_error *err);

/* The message (read-only for callers). */
const pprof_msg *pprof_profile_msg(const struct pprof_profile *p);
/* string_table[idx], or "" when out of range. */
const char *pprof_string(const struct pprof_profile *p, int64_t idx);
/* Lookups by id; NULL when absent (id 0 is always absent). */
const pprof_location_msg *pprof_location(const struct pprof_profile *p, uint64_t id);
const pprof_function_msg *pprof_function(const struct pprof_profile *p, uint64_t id);
const pprof_mapping_msg *pprof_mapping(const struct pprof_profile *p, uint64_t id);
/* Positions in msg->location / function / mapping of the object with this
 * id, or SIZE_MAX: for per-object side tables (arrays indexed by position). */
size_t pprof_location_pos(const struct pprof_profile *p, uint64_t id);
size_t pprof_function_pos(const struct pprof_profile *p, uint64_t id);
size_t pprof_mapping_pos(const struct pprof_profile *p, uint64_t id);
/* Index of the sample type whose type string is name; with name NULL the
 * default one (default_sample_type if set, else the last, as pprof does).
 * -ENOENT if there is no such type; the error lists the available ones. */
int pprof_sample_type_index(const struct pprof_profile *p, const char *name,
			    struct kiln_error *err);
/* Number of samples (same as pprof_profile_msg(p)->n_sample). */
size_t pprof_sample_count(const struct pprof_profile *p);

/* ---- reports ----------------------------------------------------------- */

/* Frames are named by function name; a location without lines (not
 * symbolized) is named by its address, "0x4a3f20". Inlined frames are
 * expanded: a location with lines [inner, outer] contributes outer;inner. */

/* Appends folded stacks for sample type index ti: "root;...;leaf VALUE\n",
 * one line per distinct stack (samples whose frame names are equal are
 * summed, whatever their labels), sorted by stack, stacks summing to 0
 * left out. Returns 0 or -ENOMEM. */
int pprof_folded(const struct pprof_profile *p, int ti, struct buf *out);

struct pprof_top_entry {
	const char *name; /* valid while both the profile and the table live */
	int64_t flat;	  /* value of samples whose leaf frame is this function */
	int64_t cum;	  /* value of samples with this function anywhere (once each) */
	/* How callers reached it, as pprof labels nodes: only through inlined
	 * calls (a line before the last of a location) is "(inline)", through
	 * both kinds "(partial-inline)". Root frames have no caller. */
	bool called_inline, called_outline;
};

struct arena;

struct pprof_top {
	struct pprof_top_entry *entries;
	size_t n;
	int64_t total;	     /* sum of the values of all samples */
	struct arena *names; /* names made for unsymbolized frames */
};

/* Flat/cum per function name for sample type index ti, sorted like
 * `go tool pprof -top`: by flat, then cum (absolute, descending), then name.
 * Functions seen only in zero-valued samples are left out, as pprof does.
 * Returns 0 or -ENOMEM; free with pprof_top_free. */
int pprof_top(const struct pprof_profile *p, int ti, struct pprof_top *out);
void pprof_top_free(struct pprof_top *t);

/* ---- subsets ------------------------------------------------------------ */

/* A new profile made of some samples of src with new values: sample i has
 * the stack and labels of src sample samples[i] and the values
 * values[i * n_types .. (i + 1) * n_types) for the sample types
 * types[0..n_types) of src (indices). Only the strings, mappings, functions
 * and locations those samples use are kept, renumbered 1..N in order of
 * first use, by position (no interning: much cheaper than the builder;
 * samples are not merged). Period, comments and frame filters as in src;
 * default_sample_type only if it is among the chosen types. Returns 0,
 * -EINVAL (an index out of range) or -ENOMEM. */
int pprof_profile_subset(const struct pprof_profile *src, const size_t *types, size_t n_types,
			 const size_t *samples, const int64_t *values, size_t n_samples,
			 int64_t time_nanos, int64_t duration_nanos, struct pprof_profile **out,
			 struct kiln_error *err);

/* Keeps only the sample types types[0..n_types) of p (strictly increasing
 * indices), in place, and drops the samples whose kept values are all 0.
 * No copy: objects that only dropped samples used stay in the tables.
 * default_sample_type is cleared unless kept. Returns 0 or -EINVAL. */
int pprof_profile_project(struct pprof_profile *p, const size_t *types, size_t n_types);

/* ---- encoding ----------------------------------------------------------- */

/* Appends the serialized message to out, gzip-compressed when gzip is true. */
int pprof_encode(const pprof_msg *m, bool gzip, struct buf *out);

/* ---- naming addresses --------------------------------------------------- */

/* One frame a symbolizer found for an address. */
struct pprof_frame_desc {
	const char *function;	 /* display name; NULL = "" */
	const char *system_name; /* raw (mangled) name; NULL = function */
	const char *filename;	 /* NULL = "" (unknown) */
	int64_t line;		 /* 0 = unknown */
	int64_t start_line;	 /* the function's first line; 0 = unknown */
};

/* The frames for one location, innermost first (pprof's Location.line
 * order: the last is the function the others were inlined into). */
struct pprof_location_frames {
	const struct pprof_frame_desc *frames;
	size_t n; /* 0: nothing for this location */
};

/* Appends p, encoded as pprof_encode would (gzip-compressed when gzip is
 * true), with names given to its addresses: frames[i] becomes the lines of
 * msg->location[i] (by position; frames may be NULL: nothing is added) if
 * that location has no lines; a location that has lines keeps them. Each
 * distinct (function, system_name, filename, start_line) is one Function —
 * p's own if it has an equal one, else a new one with the next free id —
 * and new strings join the end of the string table. The mapping of a
 * location that gains lines gets has_functions, and has_filenames,
 * has_line_numbers or has_inline_frames when a frame has a file name, a
 * line, or the location more than one frame. Everything else is p's,
 * unchanged: ids, order, samples, labels, comments, period and time. The
 * strings of frames are only read during the call. Returns 0, -ENOMEM, or
 * -EINVAL when the result would not be a valid profile (err says why). */
int pprof_encode_symbolized(const struct pprof_profile *p,
			    const struct pprof_location_frames *frames, bool gzip, struct buf *out,
			    struct kiln_error *err);

/* ---- naming mappings --------------------------------------------------- */

/*
 * The filename to write in a Mapping for memory the kernel names path:
 * "[anon]" for anonymous memory ("" in /proc/PID/maps, "//anon" in perf mmap
 * records, "/anon_hugepage"), path itself otherwise. Go's pprof leaves a
 * mapping whose base name starts with '[' alone, as it does [vdso] and
 * [heap]; "//anon" it tries to open and "" it reports as a missing binary,
 * a warning each. Returns path or a static string.
 */
const char *pprof_mapping_filename(const char *path);

/* ---- building ----------------------------------------------------------- */

struct pprof_builder;

struct pprof_mapping_desc {
	uint64_t memory_start;
	uint64_t memory_limit;
	uint64_t file_offset;
	const char *filename; /* NULL = "" */
	const char *build_id; /* NULL = "" */
	bool has_functions;
	bool has_filenames;
	bool has_line_numbers;
	bool has_inline_frames;
};

struct pprof_line_desc {
	uint64_t function_id;
	int64_t line;
	int64_t column;
};

struct pprof_label_desc {
	const char *key;
	const char *str;      /* string label when not NULL ... */
	int64_t num;	      /* ... otherwise a numeric label */
	const char *num_unit; /* NULL = none */
};

/* Returns NULL on out-of-memory. */
struct pprof_builder *pprof_builder_new(void);
/* The same, with tables sized for about hint strings, functions,
 * locations and samples (they grow past it): a small profile then costs
 * a few KiB to set up instead of ~300 KiB. pprof_builder_new() is
 * pprof_builder_new_sized(1024). */
struct pprof_builder *pprof_builder_new_sized(size_t hint);
void pprof_builder_free(struct pprof_builder *b);
/* Empties b for the next profile, as if new from pprof_builder_new_sized
 * (hint), but keeping its arena chunk, tables and arrays: a caller that
 * builds many small profiles in a row (the agent: one per process per
 * window) pays no malloc per profile. Everything b handed out before
 * (strings, ids) is invalid after. Returns 0, or -ENOMEM (b is then
 * unusable except for another reset or pprof_builder_free). */
int pprof_builder_reset(struct pprof_builder *b, size_t hint);

/* Interns s in the string table and returns its index (0 for ""), or -1 on
 * out-of-memory. */
int64_t pprof_builder_string(struct pprof_builder *b, const char *s);
int pprof_builder_add_sample_type(struct pprof_builder *b, const char *type, const char *unit);
int pprof_builder_set_period(struct pprof_builder *b, const char *type, const char *unit,
			     int64_t period);
void pprof_builder_set_time(struct pprof_builder *b, int64_t time_nanos, int64_t duration_nanos);
int pprof_builder_set_default_sample_type(struct pprof_builder *b, const char *type);
int pprof_builder_add_comment(struct pprof_builder *b, const char *comment);

/* Each returns the interned object's id (>= 1), or 0 on out-of-memory. */
uint64_t pprof_builder_mapping(struct pprof_builder *b, const struct pprof_mapping_desc *m);
uint64_t pprof_builder_function(struct pprof_builder *b, const char *name, const char *system_name,
				const char *filename, int64_t start_line);
/* lines: innermost first; n_lines may be 0 (an unsymbolized address).
 * mapping_id may be 0 (no mapping). */
uint64_t pprof_builder_location(struct pprof_builder *b, uint64_t mapping_id, uint64_t address,
				const struct pprof_line_desc *lines, size_t n_lines);

/* Adds values (one per sample type, in order) to the sample with this stack
 * (leaf first) and label set, creating it if new. Returns 0, -EINVAL (a
 * location id that the builder never returned), or -ENOMEM. */
int pprof_builder_add_sample(struct pprof_builder *b, const uint64_t *location_ids,
			     size_t n_locations, const int64_t *values,
			     const struct pprof_label_desc *labels, size_t n_labels);

/* Copies every sample of p into b (re-interning everything). The first
 * profile added to an empty builder sets sample types, period and time;
 * later ones must have the same sample types (else -EINVAL naming both) and
 * widen the time range. */
int pprof_builder_merge(struct pprof_builder *b, const struct pprof_profile *p,
			struct kiln_error *err);

/* Like pprof_builder_merge with every value multiplied by scale and rounded
 * to the nearest integer (scale 1.0 is exact). For weighting profiles, e.g.
 * by 1/N when averaging N of them. */
int pprof_builder_merge_scaled(struct pprof_builder *b, const struct pprof_profile *p, double scale,
			       struct kiln_error *err);

size_t pprof_builder_sample_count(const struct pprof_builder *b);
/* Room for n more samples (and their index) before adding them: one resize
 * instead of many. Returns 0 or -ENOMEM. */
int pprof_builder_reserve_samples(struct pprof_builder *b, size_t n);

/* Turns what was built so far into a validated profile without a
 * serialize/parse round trip: everything is copied into the profile's own
 * arena, so the builder stays usable (and may be freed right away). Returns
 * 0 or -ENOMEM. */
int pprof_builder_to_profile(struct pprof_builder *b, struct pprof_profile **out,
			     struct kiln_error *err);

/* Serializes the profile built so far (the builder stays usable). */
int pprof_builder_encode(struct pprof_builder *b, bool gzip, struct buf *out);

/* ---- streamed encoding (stream.c) --------------------------------------
 *
 * For a caller that keeps its own tables and writes a Profile without
 * building it (store_merge_pprof): the mapping, location, function and
 * string sections are encoded field by field into buffers the caller owns
 * (each put appends one repeated-field entry), and the message is written
 * in field order through a pprof_stream: sample types, samples, the
 * sections as bytes, time and duration, the period type, the period. Ids,
 * string indexes and values are the caller's; a zero scalar is left out as
 * protobuf-c does, so equal input gives the bytes pprof_encode gives.
 * Gzipped, a message up to 4 MiB is compressed whole with
 * gzip_deflate_fast (pprof_encode's bytes); a larger one is streamed
 * through zlib at level 1 without holding it. All return 0 or -ENOMEM
 * (-EIO from the compressor). */
int pprof_put_string(struct buf *sec, const char *s, size_t len);
int pprof_put_mapping(struct buf *sec, uint64_t id, uint64_t memory_start, uint64_t memory_limit,
		      uint64_t file_offset, int64_t filename, int64_t build_id, unsigned flags);
int pprof_put_function(struct buf *sec, uint64_t id, int64_t name, int64_t system_name,
		       int64_t filename, int64_t start_line);
/* lines: n_lines (function id, line, column) triples, innermost first;
 * scratch is any buffer of the caller's (its content is replaced). */
int pprof_put_location(struct buf *sec, struct buf *scratch, uint64_t id, uint64_t mapping_id,
		       uint64_t address, const uint64_t *lines, size_t n_lines);

struct pprof_stream;
/* Appends the message to out (gzip: compressed); on error out may hold a
 * part of it, for the caller to cut off. */
struct pprof_stream *pprof_stream_new(struct buf *out, bool gzip);
void pprof_stream_free(struct pprof_stream *k); /* NULL-safe */
int pprof_stream_sample_type(struct pprof_stream *k, int64_t type, int64_t unit);
/* One sample of one value; ids: n location ids, leaf first. */
int pprof_stream_sample(struct pprof_stream *k, const uint64_t *ids, size_t n, int64_t value);
/* Pre-encoded fields (the sections), in field order. */
int pprof_stream_bytes(struct pprof_stream *k, const void *data, size_t len);
int pprof_stream_time(struct pprof_stream *k, int64_t time_nanos, int64_t duration_nanos);
int pprof_stream_period(struct pprof_stream *k, int64_t type, int64_t unit, int64_t period);
/* Ends the message (flushes and ends the gzip member). */
int pprof_stream_finish(struct pprof_stream *k);

#endif
