/*
 * store.h — the storage interface: everything ingest and query code may ask
 * of a profile store. The embedded store (WAL + head + blocks, under
 * --storage-path) implements it today; a ClickHouse backend will implement
 * the same functions later without ingest or query code changing.
 *
 * Data model (Parca's):
 *   - A *profile type* is "NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT"
 *     with ":delta" appended for delta profiles, e.g.
 *     "parca_agent:samples:count:cpu:nanoseconds:delta". NAME comes from the
 *     series' __name__ label. One pushed pprof profile with k sample types
 *     becomes k series, one per profile type.
 *   - A *series* is a profile type plus a label set (Prometheus label-name
 *     rules; __name__ is not repeated among the labels).
 *   - A *sample row* is (series, timestamp ms, stack, value). Stacks,
 *     locations, functions, mappings and strings are deduplicated in the
 *     metastore; rows refer to a stack by id.
 *
 * Threading: every function is safe to call from several threads at once.
 * Writes are serialized internally; reads never wait for an fsync.
 *
 * Durability: store_write_profile returns 0 only after the write is in the
 * WAL and fsynced (group commit may batch concurrent writers). After a crash,
 * store_open replays the WAL: every acknowledged write is visible again, a
 * torn tail is truncated and logged.
 *
 * Errors: negative errno plus a message in struct kiln_error. -EINVAL for bad
 * input (the message says which label or field), -ENOSPC when the disk is
 * full (reads keep working), -ESHUTDOWN after store_close has begun.
 */
#ifndef KILN_STORE_H
#define KILN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/labels.h"
#include "common/error.h"
#include "pprof/pprof.h"

struct store;

/* ---- symbolization hook ----------------------------------------------------
 * A location pushed without lines (an agent sends raw addresses) but with a
 * mapping that names a build id or a file can be symbolized later. The store
 * calls resolve() for such a location at most once (results, including "no
 * symbols", are stored persistently in the metastore and survive restarts),
 * either from store_merge when a query first needs it or from
 * store_symbolize_pending, which a background thread calls. Ingestion never
 * calls the symbolizer. resolve() may be called from several threads at once
 * and must not call back into the store. When the hook has resolve_batch(),
 * store_symbolize_pending hands it each object's pending locations together,
 * and so does a merge with the pending locations of its stacks before it
 * describes them (resolve() is then asked only for one still unanswered). */
/* Parca's ExecutableInfo of a mapping, as WriteRaw's RawSample carries it
 * (one per pprof mapping, in mapping order): the object's ELF type and the
 * executable PT_LOAD segment the mapping maps, enough to normalize an
 * address without the file. elf_type 0: not sent. */
struct store_exec_info {
	uint32_t elf_type; /* ET_EXEC, ET_DYN; 0 = unknown */
	uint64_t load_offset, load_vaddr;
};

struct store_mapping_info {
	uint64_t memory_start;
	uint64_t memory_limit;
	uint64_t file_offset;
	const char *filename; /* "" when unknown */
	const char *build_id; /* "" when unknown */
	struct store_exec_info exec;
};

/* One frame at an address; strings only need to live until resolve() (or a
 * resolve_batch() emit) returns to the store: it copies them. */
struct store_line_out {
	const char *function_name; /* demangled */
	const char *system_name;   /* raw (mangled) symbol; NULL = same as function_name */
	const char *filename;	   /* NULL = unknown */
	int64_t line;		   /* 0 = unknown */
};

/* One address of a resolve_batch() call and the mapping it was sampled in. */
struct store_symbolize_item {
	const struct store_mapping_info *mapping;
	uint64_t address;
};

/* Receives the answer for items[i] of a resolve_batch() call: status 0 with
 * lines[0..n_lines) as resolve() would fill them (n_lines == 0: "no symbols
 * here", remembered), or a negative errno, resolve()'s transient failure for
 * this address alone (it stays pending). The strings only need to live until
 * emit returns: the store copies them. emit takes no lock and never calls
 * the hook, so the hook may call it with its own locks held, from any
 * thread, but one call's emit not from two threads at once. */
typedef void (*store_symbolize_emit_fn)(void *ectx, size_t i, int status,
					const struct store_line_out *lines, size_t n_lines);

struct store_symbolizer {
	void *ctx;
	/* Fills lines[0..*n_lines) innermost (inlined) frame first, at most
	 * max_lines. Returns 0 (with *n_lines == 0 meaning "no symbols here", a
	 * remembered negative result) or a negative errno for a transient
	 * failure (nothing is remembered; a later call retries). */
	int (*resolve)(void *ctx, const struct store_mapping_info *m, uint64_t address,
		       struct store_line_out *lines, size_t max_lines, size_t *n_lines);
	/* Optional: resolves items[0..n) at once, which all belong to one
	 * object (the same build_id and filename; their mappings differ when
	 * the object is mapped by several processes, so normalize per item),
	 * calling emit exactly once per item, in any order, with what
	 * resolve() would give for it. Returns 0, or a negative errno for a
	 * transient failure of the whole batch: then every item stays pending,
	 * whatever emit received. Items emit was not called for stay pending
	 * too. Called from store_symbolize_pending and from merges
	 * (store_merge_visit, store_merge_pprof); the same threading rules as
	 * resolve(). */
	int (*resolve_batch)(void *ctx, const struct store_symbolize_item *items, size_t n,
			     store_symbolize_emit_fn emit, void *ectx);
	/* Optional: the display name of a location resolve() could not
	 * answer yet (its debuginfo is missing or being fetched), e.g.
	 * "[binary] +0xOFFSET", so that the frame shows in query results
	 * instead of vanishing. Not stored: a later query tries resolve()
	 * again. */
	void (*unresolved)(void *ctx, const struct store_mapping_info *m, uint64_t address,
			   char *name, size_t size);
};

/* ---- backends ---------------------------------------------------------------
 * Where the store keeps its data: the embedded store (files under
 * store_options.path; the default) or a ClickHouse server shared by several
 * stateless kiln servers (docs/SCALE-OUT.md). Both answer every function
 * below the same way on the same data. */
enum store_backend {
	STORE_BACKEND_EMBEDDED = 0,
	STORE_BACKEND_CLICKHOUSE,
};
struct store_clickhouse_options {
	const char *url;      /* "http://HOST:8123" (the HTTP interface) */
	const char *database; /* NULL = "kiln"; [A-Za-z0-9_]+, created if missing */
	const char *user;     /* NULL = "default" */
	const char *password; /* NULL = none */
};

struct store_options {
	const char *path;	      /* directory; created if missing */
	int64_t retention_ms;	      /* blocks older than this are deleted; 0 = keep forever */
	int64_t block_duration_ms;    /* head is cut into a block after this much time (0 = 2h) */
	size_t max_labels_per_series; /* 0 = 64 */
	size_t head_max_rows;	      /* head is cut when it holds this many rows (0 = 2M) */
	const struct store_symbolizer *symbolizer;  /* optional; copied by store_open */
	enum store_backend backend;		    /* path is unused on ClickHouse */
	struct store_clickhouse_options clickhouse; /* copied by store_open */
};

/* A series label is the common struct label (common/labels.h). The old
 * name stays an alias while code written against it (store.c and branches
 * in flight) moves over; new code says struct label. */
#define store_label label

enum store_match_op {
	STORE_MATCH_EQ,	       /* =  */
	STORE_MATCH_NEQ,       /* != */
	STORE_MATCH_REGEX,     /* =~ fully anchored */
	STORE_MATCH_NOT_REGEX, /* !~ fully anchored */
};

/* A label matcher. Regex matchers must be compiled with
 * store_matcher_compile before use (linear-time-bounded pcre2 with a match
 * limit); store_matcher_release frees the compiled form. */
struct store_matcher {
	enum store_match_op op;
	char *name;
	char *value;
	void *compiled; /* owned; NULL for = and != */
};

int store_matcher_compile(struct store_matcher *m, struct kiln_error *err);
void store_matcher_release(struct store_matcher *m);
/* Does value (NULL = label absent, which matches as "") satisfy m? */
bool store_matcher_matches(const struct store_matcher *m, const char *value);

/* What a query selects: one profile type, matchers, a closed time range. */
struct store_selector {
	const char *profile_type; /* full type string, as above */
	const struct store_matcher *matchers;
	size_t n_matchers;
	int64_t start_ms;
	int64_t end_ms;
};

/* Opens (creating or recovering) the store. *out is freed by store_close. */
int store_open(const struct store_options *opts, struct store **out, struct kiln_error *err);
/* Flushes what is needed and frees everything; NULL-safe. */
void store_close(struct store *s);

/* Ingests one profile for the series `labels` (must include __name__).
 * timestamp_ms: the profile's time (callers pass time_nanos / 1e6, or now
 * when it is 0). delta: whether the profile holds deltas (CPU samples) or
 * cumulative values; it becomes the ":delta" suffix. Returns after the
 * write is durable. */
int store_write_profile(struct store *s, const struct label *labels, size_t n_labels,
			const struct pprof_profile *p, int64_t timestamp_ms, bool delta,
			struct kiln_error *err);
/* The same with the ExecutableInfo of p's mappings: exec[i] belongs to the
 * i-th mapping of the message (n_exec may be fewer; the rest have none). It
 * is stored with the mapping and handed to the symbolizer hook. */
int store_write_profile_exec(struct store *s, const struct label *labels, size_t n_labels,
			     const struct pprof_profile *p, const struct store_exec_info *exec,
			     size_t n_exec, int64_t timestamp_ms, bool delta,
			     struct kiln_error *err);

/* Every profile type with data in [start_ms, end_ms]; cb is called once per
 * type, in sorted order. */
int store_profile_types(struct store *s, int64_t start_ms, int64_t end_ms,
			void (*cb)(void *ctx, const char *profile_type), void *ctx,
			struct kiln_error *err);
/* Label names (sorted, deduplicated) of series matching sel; sel may have
 * profile_type NULL (all types). */
int store_label_names(struct store *s, const struct store_selector *sel,
		      void (*cb)(void *ctx, const char *name), void *ctx, struct kiln_error *err);
/* Values of label `name` among series matching sel (sorted, deduplicated). */
int store_label_values(struct store *s, const struct store_selector *sel, const char *name,
		       void (*cb)(void *ctx, const char *value), void *ctx, struct kiln_error *err);

/* For every matching series: its labels and, for each profile timestamp in
 * range, the sum of its values. Called per series, in the order of their
 * label sets, with points sorted by time. */
struct store_point {
	int64_t timestamp_ms;
	int64_t value;
};
int store_query_range(struct store *s, const struct store_selector *sel,
		      void (*cb)(void *ctx, const struct label *labels, size_t n_labels,
				 const struct store_point *points, size_t n_points),
		      void *ctx, struct kiln_error *err);

/* Merges every sample of the matching series in range into `out` (a builder
 * that the caller created and owns): stacks resolved through the metastore
 * into locations, functions and mappings; sample types and period taken from
 * the profile type. With no matching data, out stays empty and 0 is
 * returned. A single profile is a merge with start_ms == end_ms == its
 * timestamp. */
int store_merge(struct store *s, const struct store_selector *sel, struct pprof_builder *out,
		struct kiln_error *err);

/* The same merge written straight out as an encoded pprof Profile message
 * (gzip: one gzip member), appended to out: the bytes, uncompressed, are those
 * of store_merge followed by pprof_builder_encode, but no profile is built
 * (the merge of everything in a store stays a few MB above its output).
 * res->n_samples 0: nothing matched (or every value summed to 0) and nothing
 * is appended. */
struct store_pprof_result {
	size_t n_samples;
	int64_t total; /* sum of the sample values */
};
int store_merge_pprof(struct store *s, const struct store_selector *sel, bool gzip, struct buf *out,
		      struct store_pprof_result *res, struct kiln_error *err);

/* The same merge handed to a visitor instead of a pprof builder (the flame
 * graph folds stacks straight into its tree). begin() is called once when
 * anything matched, then location() once per distinct location before the
 * first stack that uses it, then stack() once per distinct stack with a
 * non-zero sum. Views and their strings are valid during the call only;
 * ids are metastore ids, stable for the store's lifetime, so a visitor may
 * cache by them. A callback's negative errno stops the merge and is
 * returned (with err set). */
struct store_merge_info {
	const char *sample_type, *sample_unit, *period_type, *period_unit;
	int64_t period;
	int64_t min_ts_ms, max_ts_ms; /* of the rows merged */
	size_t n_stacks;    /* distinct stacks touched (an upper bound of stack() calls) */
	size_t n_locations; /* location ids are below this */
};
struct store_mapping_view {
	uint32_t id;
	uint64_t memory_start, memory_limit, file_offset;
	const char *filename, *build_id;
	unsigned flags; /* bit 0..3: has_functions, filenames, line numbers, inline frames */
};
struct store_line_view {
	uint32_t function_id; /* 0: a name from the symbolizer's unresolved() hook */
	const char *name, *system_name, *filename;
	int64_t start_line;
	int64_t line;
};
struct store_location_view {
	uint32_t id;
	uint64_t address;
	const struct store_mapping_view *mapping; /* NULL when none */
	const struct store_line_view *lines;	  /* innermost (inlined) first, as in pprof */
	size_t n_lines;
};
struct store_merge_visitor {
	void *ctx;
	int (*begin)(void *ctx, const struct store_merge_info *info);
	int (*location)(void *ctx, const struct store_location_view *loc);
	/* loc_ids: leaf first */
	int (*stack)(void *ctx, const uint32_t *loc_ids, size_t n, int64_t value);
};
int store_merge_visit(struct store *s, const struct store_selector *sel,
		      const struct store_merge_visitor *v, struct kiln_error *err);

/* Cuts the whole head into blocks now, compacts every time window that has
 * several blocks and applies retention (the background thread does the same
 * on its own schedule). For tests, benchmarks and a clean shutdown. */
int store_flush(struct store *s, struct kiln_error *err);

/* Symbolizes up to max (0 = all) locations that are waiting for it, with the
 * symbolizer from store_options; returns how many were resolved (>= 0) or a
 * negative errno. The queue is taken in chunks of up to 16384 locations,
 * grouped by object (build ID and file name) for resolve_batch() when the
 * hook has it. Each queued location is tried once: one that failed
 * transiently stays pending (a query asks again, store_resymbolize queues
 * it again). Meant for a background thread; never blocks ingestion. */
int store_symbolize_pending(struct store *s, size_t max, struct kiln_error *err);
/* Better debuginfo for build_id is about to be stored: records durably
 * (a metastore record replayed at start-up, which puts the object's
 * locations back to pending) that its answers must be redone. Call it before
 * the file becomes visible, so that a crash right after loses nothing.
 * 0, or a negative errno with err set (then refuse the file). */
int store_resymbolize_note(struct store *s, const char *build_id, struct kiln_error *err);
/* Better debuginfo for build_id arrived: its symbolized locations become
 * pending again (keeping their answer until the new one is stored) and
 * store_symbolize_pending redoes them. Returns how many, or -ENOMEM. */
int store_resymbolize(struct store *s, const char *build_id);

/* Sizes for /metrics. */
struct store_stats {
	uint64_t series;
	uint64_t sample_rows;
	uint64_t head_rows;
	uint64_t blocks;
	uint64_t disk_bytes;
	uint64_t wal_bytes;
	uint64_t wal_fsyncs;
	uint64_t wal_fsync_ns_total;
	uint64_t stacks;
	uint64_t locations;
	uint64_t symbolize_pending;
	uint64_t compactions;
};
void store_get_stats(struct store *s, struct store_stats *out);

/* ---- the row path (rows.c): writes keyed by metastore ids -----------------
 * For ingest protocols that name each series and stack once and then send
 * rows (the streaming agent protocol): intern a series and its stacks once,
 * then each row costs a lookup in the caller's table and an append. */
struct store_series_type {
	const char *sample_type, *sample_unit, *period_type, *period_unit;
	int64_t period;
	bool delta;
};
/* The id (> 0) of the series of labels (with __name__) and type, created if
 * new; or a negative errno (-EINVAL: bad labels, err says which). */
int64_t store_intern_series(struct store *s, const struct store_label *labels, size_t n_labels,
			    const struct store_series_type *t, struct kiln_error *err);
/* stack_ids[i] = the metastore id of sample i's stack of p (locations,
 * functions, mappings with exec[j] for the j-th mapping, strings interned
 * as store_write_profile_exec does). Only the samples' stacks are read. */
int store_intern_stacks(struct store *s, const struct pprof_profile *p,
			const struct store_exec_info *exec, size_t n_exec, uint32_t *stack_ids,
			struct kiln_error *err);
/* One series' rows at one time; stacks[i] with values[i], any order. */
struct store_rows {
	uint32_t series;
	int64_t timestamp_ms;
	const uint32_t *stacks;
	const int64_t *values;
	size_t n;
};
/* Writes the groups as one durable WAL record tagged (writer, batch):
 * returns 0 once it is fsynced and queryable, 1 when batch is at or below
 * the last batch of writer already stored (nothing written: a replay), or
 * a negative errno. Calls for one writer must not overlap. */
int store_write_rows(struct store *s, uint64_t writer, uint64_t batch, const struct store_rows *g,
		     size_t n_groups, struct kiln_error *err);
/* Whether batch of writer is at or below its last stored batch. */
bool store_rows_seen(struct store *s, uint64_t writer, uint64_t batch);
/* Writes the groups without a writer mark (rows_commit.c), for a request
 * that is never re-sent by batch id (OTLP export): one REC_SAMPLES record
 * per timestamp, groups of one series at one time summed. Returns 0 once
 * every record is durable and queryable, or a negative errno (-EINVAL: an
 * unknown series or stack id). Works on both backends. */
int store_write_groups(struct store *s, const struct store_rows *g, size_t n_groups,
		       struct kiln_error *err);

#endif
