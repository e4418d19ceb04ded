/*
 * internal.h — what the files behind store.h share; not part of the API.
 *
 * Layers, each talking only to the ones below it:
 *   store.c   open/close, the write path, cut/compaction/retention thread
 *   apply.c   one samples record applied to the head (commit, replay, rows)
 *   query.c   series selection, query_range, merge
 *   symbolize.c  the symbolizer hook: pending locations, one or in batches
 *   block.c   immutable block files: write, open, decode, compact
 *   head.c    the in-memory head (rows not yet in a block)
 *   wal.c     WAL segments and the metastore log, group commit, replay
 *   meta.c    the metastore: strings, mappings, functions, locations, stacks
 *   series.c  series, label validation, postings, matchers
 *   codec.c   varints, checksums, append-only chunked arrays
 *   fp_tab.c  the 128-bit content hash -> id table
 *
 * Locks (always taken in this order, never the other way):
 *   wal.mu  ->  head_lock  ->  series_lock  ->  meta.mu
 * Readers take head_lock (read) briefly; metastore entries are read without
 * any lock (append-only, published with a release store of the count).
 */
#ifndef KILN_STORE_INTERNAL_H
#define KILN_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/htab.h"
#include "store/store.h"

/* ---- codec.c ----------------------------------------------------------- */

int put_uvarint(struct buf *b, uint64_t v);
int put_svarint(struct buf *b, int64_t v);
int put_u32le(struct buf *b, uint32_t v);
int put_u64le(struct buf *b, uint64_t v);
uint32_t get_u32le(const uint8_t *p);
uint64_t get_u64le(const uint8_t *p);

/* A bounds-checked reader: once bad is set every read returns 0. */
struct rd {
	const uint8_t *p, *end;
	bool bad;
};
/* A reader over [data, data + len); an empty buffer (data may be NULL)
 * reads as already at its end, without arithmetic on a NULL pointer. */
static inline struct rd rd_of(const uint8_t *data, size_t len)
{
	static const uint8_t none[1];
	const uint8_t *p = data ? data : none;
	return (struct rd){p, p + (data ? len : 0), false};
}
uint64_t rd_uvarint(struct rd *r);
int64_t rd_svarint(struct rd *r);
/* rd_uvarint, and bad unless the value is < limit. */
uint64_t rd_below(struct rd *r, uint64_t limit);
const uint8_t *rd_bytes(struct rd *r, size_t n);

/* The checksum of every record and frame: low 32 bits of XXH3-64. */
uint32_t store_checksum(const void *p, size_t n);

/* Appends a framed record: u32 payload length, u32 checksum, payload. */
/* Profiles are private to the server's user: data files (WAL, metastore
 * log, blocks, CHECKPOINT, LOCK) are created 0600, directories 0700. */
#define STORE_FILE_MODE 0600
#define STORE_DIR_MODE	0700

#define RECORD_HEADER 8
#define RECORD_MAX    (256u << 20)
int record_append(struct buf *out, const void *payload, size_t len);

/* An append-only array whose elements never move: a two-level table of
 * fixed-size chunks (2048 x 2048 chunks of 1024 elements). One writer
 * (holding the owner's lock) pushes; readers read any index below
 * chunked_count() without a lock, because a chunk and the table entries
 * leading to it are written before the count that makes them reachable. */
#define CHUNK_SHIFT 10
#define CHUNK_LEN   (1u << CHUNK_SHIFT)
#define DIR_SHIFT   11
#define DIR_LEN	    (1u << DIR_SHIFT)
struct chunked {
	size_t elem;
	uint8_t ***dir;
	_Atomic size_t count;
};
int chunked_init(struct chunked *c, size_t elem);
void chunked_free(struct chunked *c);
/* Zeroed slot at index count (not yet visible), or NULL on out-of-memory. */
void *chunked_slot(struct chunked *c);
/* Makes the slot returned by chunked_slot visible. */
void chunked_publish(struct chunked *c);
static inline size_t chunked_count(const struct chunked *c)
{
	return atomic_load_explicit(&((struct chunked *)c)->count, memory_order_acquire);
}
static inline void *chunked_at(const struct chunked *c, size_t i)
{
	size_t ch = i >> CHUNK_SHIFT;

	return c->dir[ch >> DIR_SHIFT][ch & (DIR_LEN - 1)] + (i & (CHUNK_LEN - 1)) * c->elem;
}

/* ---- meta.c ------------------------------------------------------------ */

enum meta_record {
	MREC_STRING = 1,
	MREC_MAPPING,
	MREC_FUNCTION,
	MREC_LOCATION,
	MREC_STACK,
	MREC_SERIES,
	MREC_SYMBOLIZED,
	MREC_RESYMBOLIZE,
};

struct meta_mapping {
	uint64_t start, limit, offset;
	uint32_t filename, build_id; /* string ids */
	uint32_t flags;		     /* bit 0..3: has_functions, filenames, line numbers, inline */
	uint32_t elf_type;	     /* executable_info; 0: none (then the two below are 0) */
	uint64_t load_offset, load_vaddr;
};
struct meta_function {
	uint32_t name, system_name, filename;
	int64_t start_line;
};
struct meta_line {
	uint32_t function;
	int64_t line;
};
struct meta_lines {
	uint32_t n;
	struct meta_line l[];
};
enum meta_sym { SYM_NONE = 0, SYM_PENDING, SYM_DONE, SYM_FAILED };
struct meta_location {
	uint64_t address;
	uint32_t mapping; /* 0 = none */
	_Atomic(struct meta_lines *) lines;
	_Atomic int sym; /* enum meta_sym */
};
struct meta_stack {
	uint32_t n;
	const uint32_t *locs; /* leaf first */
};

/* ---- fp_tab.c ---------------------------------------------------------- */

/* A 128-bit content hash -> 32-bit id (stack fingerprints -> stack ids, a
 * pprof merge's objects -> output ids): open addressing with the key
 * inline, so a probe touches one cache line. */
struct fp_slot {
	uint64_t lo;
	uint32_t hi;  /* the low 32 bits of the hash's high half */
	uint32_t id1; /* id + 1; 0 = empty slot */
};
struct fp_tab {
	struct fp_slot *slots;
	size_t cap, count; /* cap: a power of two */
	/* Set before the first put: up to 3/4 full instead of 1/2, for a
	 * short-lived table where memory matters more than probe length (a
	 * merge's); the metastore's stays at 1/2. */
	bool dense;
};
/* Returns true and sets *id if fp is present. */
bool fp_tab_get(const struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t *id);
/* Inserts or replaces; 0, -ERANGE (id UINT32_MAX) or -ENOMEM. */
int fp_tab_put(struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t id);
/* The id stored under (lo, hi) into *id: 1 when found, else fresh is
 * stored and returned (0); -ERANGE (fresh UINT32_MAX) or -ENOMEM. */
int fp_tab_intern(struct fp_tab *t, uint64_t lo, uint64_t hi, uint32_t fresh, uint32_t *id);
void fp_tab_free(struct fp_tab *t);
/* A hint only: starts loading the home slot of lo ahead of fp_tab_get. */
static inline void fp_tab_prefetch(const struct fp_tab *t, uint64_t lo)
{
	if (t->cap)
		__builtin_prefetch(&t->slots[(size_t)lo & (t->cap - 1)]);
}

/* Every table has a dummy entry 0 (string 0 is "", stack 0 the empty stack),
 * so that id 0 can mean "none". */
struct meta {
	pthread_mutex_t mu; /* writers; readers use chunked_count/chunked_at */
	struct arena *arena;
	struct chunked strings; /* const char * */
	struct chunked mappings, functions, locations, stacks;
	struct htab *string_ix, *mapping_ix, *function_ix, *location_ix, *stack_ix;
	struct fp_tab fp_ix; /* stack fingerprint (store.c) -> stack id; memory only */
	struct buf pending;  /* records for the metastore log, not yet written */
	struct buf key;	     /* scratch */
	uint32_t *sym_queue; /* locations waiting for symbolization */
	size_t n_sym_queue, cap_sym_queue, sym_cursor;
};

int meta_init(struct meta *m);
void meta_destroy(struct meta *m);
/* Interning; the caller holds m->mu. Return the id (> 0 except string "")
 * or a negative errno. New objects append a record to m->pending. */
int64_t meta_string(struct meta *m, const char *s, size_t len);
int64_t meta_mapping(struct meta *m, const struct meta_mapping *mp);
int64_t meta_function(struct meta *m, const struct meta_function *f);
int64_t meta_location(struct meta *m, uint32_t mapping, uint64_t address,
		      const struct meta_line *lines, uint32_t n_lines);
int64_t meta_stack(struct meta *m, const uint32_t *locs, uint32_t n);
/* Queues location loc for the background symbolization pass; caller holds
 * m->mu. 0 or -ENOMEM. */
int meta_sym_enqueue(struct meta *m, uint32_t loc);
/* Records a symbolization result (n == 0 with failed: no symbols). */
int meta_set_symbolized(struct meta *m, uint32_t loc, const struct meta_line *lines, uint32_t n,
			bool failed);
/* Puts the symbolized locations of every mapping whose build ID string
 * equals build_sid's (case-insensitively) back to pending and queues them;
 * caller holds m->mu. Returns how many, or -ENOMEM. resymbolize.c */
int meta_requeue_build_id(struct meta *m, uint32_t build_sid);
/* Replays one metastore log record; -EBADMSG if it is inconsistent. */
struct store;
int meta_replay_record(struct store *s, const uint8_t *p, size_t len);

static inline const char *meta_str(const struct meta *m, uint32_t id)
{
	return id < chunked_count(&m->strings) ? *(const char **)chunked_at(&m->strings, id) : "";
}

/* ---- query.c: the merge, shared by its outputs (query.c, merge_pprof.c) -- */

/* Values summed per stack id over a selection. */
struct merge_agg {
	int64_t *sum;	   /* by stack id */
	uint8_t *seen;	   /* by stack id */
	uint32_t *touched; /* stack ids with a row, in the order first met */
	size_t n_touched, cap_touched;
	uint32_t n_stacks;
	int64_t min_ts, max_ts;
	int rc;
};
/* Sums the selection's rows per stack (n_touched 0: nothing matched, and
 * *first_series is untouched; else it is the first matching series). Free
 * with merge_agg_free, also after an error. */
int merge_aggregate(struct store *s, const struct store_selector *sel, struct merge_agg *a,
		    uint32_t *first_series, struct kiln_error *err);
void merge_agg_free(struct merge_agg *a);

/* Per-merge state for describing locations (the views point into it and
 * into the metastore, so each description is good until the next). */
struct describer {
	struct store *s;
	struct store_mapping_view map;
	struct store_line_view lines[256];
	char name[512]; /* from the unresolved() hook */
};
/* Fills *v with location id (symbolizing it first when it waits for that). */
void merge_describe_location(struct describer *d, uint32_t id, struct store_location_view *v);

/* ---- symbolize.c --------------------------------------------------------- */

/* The hook's view of mapping id mapping (strings point into the metastore). */
void symbolize_mapping_info(struct meta *m, uint32_t mapping, struct store_mapping_info *info);
/* Resolves location loc with the hook's resolve() if it is pending and
 * records the answer. Returns 1 if recorded, 0 if there was nothing to do,
 * or a negative errno (resolve()'s, transient: it stays pending; or -ENOMEM). */
int symbolize_location(struct store *s, uint32_t loc);
/* Resolves the pending locations of a's stacks (those with a non-zero sum)
 * with the hook's resolve_batch(), one call per object, before a merge
 * describes them. Does nothing without resolve_batch(); what fails stays
 * pending (merge_describe_location tries it alone). */
void symbolize_merge_locations(struct store *s, const struct merge_agg *a);

/* ---- series.c ---------------------------------------------------------- */

struct series {
	uint32_t id;
	const char *type; /* full profile type string */
	const char *name, *sample_type, *sample_unit, *period_type, *period_unit;
	int64_t period;
	bool delta;
	size_t n_labels;
	struct label *labels; /* sorted by name, without __name__ */
	_Atomic int64_t min_ts, max_ts;
};

struct postings {
	uint32_t *ids;
	size_t n, cap;
};

struct series_index {
	pthread_rwlock_t lock;
	struct chunked series; /* struct series */
	struct htab *key_ix;   /* canonical key -> id */
	struct htab *post_ix;  /* "name\0value" or "\1type" -> postings index */
	struct postings *posts;
	size_t n_posts, cap_posts;
	struct buf key;
};

int series_index_init(struct series_index *x);
void series_index_destroy(struct series_index *x);
/* Validates labels (names, __name__, count) into a sorted copy. */
int series_check_labels(const struct label *in, size_t n, size_t max, struct label *out,
			const char **name, struct kiln_error *err);
/* Finds or creates the series; the caller holds x->lock for writing and
 * m->mu. Returns the id or a negative errno. */
int64_t series_get(struct series_index *x, struct meta *m, const char *name, const char *type,
		   const char *st, const char *su, const char *pt, const char *pu, int64_t period,
		   bool delta, const struct label *labels, size_t n_labels);
/* Adds an existing record's series (replay); caller holds the locks. */
int series_add(struct series_index *x, struct meta *m, uint32_t id, uint32_t type_sid,
	       uint32_t pt_sid, uint32_t pu_sid, int64_t period, const uint32_t *label_sids,
	       size_t n_labels);
static inline struct series *series_at(const struct series_index *x, uint32_t id)
{
	return (struct series *)chunked_at(&x->series, id);
}
/* Ids (sorted) of series matching sel (profile_type may be NULL) whose time
 * range overlaps [start_ms, end_ms]. *ids is malloc'ed. */
int series_select(struct series_index *x, const struct store_selector *sel, uint32_t **ids,
		  size_t *n, struct kiln_error *err);
void series_note_time(struct series *se, int64_t ts);
/* Sorts ids by their series' labels (then type): the order in which range
 * queries hand series over, the same on every backend. */
void series_sort_by_labels(struct series_index *x, uint32_t *ids, size_t n);
/* After retention deleted everything before cutoff: no series claims data
 * before it any more, so one whose data is all gone (min > max) stops
 * matching selections (label names and values, profile types). */
void series_forget_before(struct series_index *x, int64_t cutoff);

/* ---- head.c ------------------------------------------------------------ */

/* One series' rows: profiles (timestamp, total, rows[off, off+n)) and rows
 * (stack id, value), rows of a profile sorted by stack id. Also the shape in
 * which block.c takes and returns a series. */
struct series_rows {
	int64_t *ts, *total;
	uint32_t *off, *n;
	size_t np, cap_p;
	uint32_t *stacks;
	int64_t *values;
	size_t nr, cap_r;
};
void series_rows_free(struct series_rows *r);
void series_rows_reset(struct series_rows *r);
int series_rows_add_profile(struct series_rows *r, int64_t ts, const uint32_t *stacks,
			    const int64_t *values, size_t n);

struct head {
	struct series_rows **series; /* indexed by series id; NULL when absent */
	size_t cap_series;
	size_t n_rows, n_profiles;
	int64_t min_ts, max_ts;
	uint64_t seg;	   /* frozen: the WAL segment that holds exactly this data */
	struct head *next; /* frozen heads: a list, newest first */
};
struct head *head_new(void);
void head_free(struct head *h);
struct series_rows *head_series(struct head *h, uint32_t id, bool create);

/* ---- block.c ----------------------------------------------------------- */

struct block_series {
	uint32_t id;
	int64_t min_ts, max_ts;
	uint64_t n_profiles, n_rows;
	uint64_t off[3], len[3]; /* frames: summary, rollup, rows */
	uint32_t sum[3];
};

struct block {
	_Atomic int refs;
	char *path;
	uint64_t seq, cut_seg;
	int64_t min_ts, max_ts;
	uint64_t n_rows, file_size;
	uint64_t *sources;
	size_t n_sources;
	struct block_series *series; /* sorted by id */
	size_t n_series;
	const uint8_t *map;
	size_t map_len;
};

/* Writes series (indexed by id, NULL = absent) restricted to [lo, hi) into
 * DIR/b-SEQ.kb atomically. Returns 0 with *out set (NULL if nothing was in
 * range) or a negative errno (-ENOSPC on a full disk). */
/* Series come from get(ctx, id), for every id < n_series: it returns NULL
 * when the series has no data, or rows valid until the next call. */
typedef const struct series_rows *(*block_series_fn)(void *ctx, uint32_t id, int *rc);
int block_write(const char *dir, uint64_t seq, uint64_t cut_seg, const uint64_t *sources,
		size_t n_sources, block_series_fn get, void *ctx, size_t n_series, int64_t lo,
		int64_t hi, uint32_t n_stacks, struct block **out, struct kiln_error *err);
int block_open(const char *path, uint32_t n_stacks, struct block **out, struct kiln_error *err);
void block_ref(struct block *b);
void block_unref(struct block *b);
const struct block_series *block_find(const struct block *b, uint32_t id);
/* Appends the series' profiles and rows to out. */
int block_read_rows(const struct block *b, const struct block_series *bs, uint32_t n_stacks,
		    struct series_rows *out, struct kiln_error *err);
/* Profile timestamps and totals only. */
int block_read_summary(const struct block *b, const struct block_series *bs, int64_t **ts,
		       int64_t **total, struct kiln_error *err);
/* The series' per-stack sums over the whole block. */
int block_read_rollup(const struct block *b, const struct block_series *bs, uint32_t n_stacks,
		      uint32_t **stacks, int64_t **sums, size_t *n, struct kiln_error *err);

/* ---- wal.c ------------------------------------------------------------- */

struct wal_waiter {
	pthread_cond_t cond; /* each waiter sleeps on its own: no thundering herd */
	uint64_t seq;
	int rc;
	bool done;
	struct kiln_error err;
	struct wal_waiter *next;
};

struct wal {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char *dir;	 /* DIR/wal */
	int fd, meta_fd; /* active segment; metastore log */
	uint64_t seg;	 /* active segment number */
	uint64_t seg_len, meta_len;
	struct buf pending;
	struct wal_waiter *waiters, **waiters_tail;
	uint64_t enq_seq;
	bool leader;
	int applying; /* acknowledged, not yet applied to the head */
	uint64_t fsyncs, fsync_ns, bytes;
};

/* ---- store.c ----------------------------------------------------------- */

struct store {
	struct store_options opts;
	struct store_symbolizer symbolizer;
	bool has_symbolizer;
	char *dir, *block_dir;
	int lock_fd;
	struct meta meta;
	struct series_index sx;
	struct wal wal;

	pthread_rwlock_t head_lock; /* head, frozen list, blocks array */
	struct head *head;	    /* active */
	struct head *frozen;	    /* being written into blocks */
	struct block **blocks;	    /* sorted by min_ts */
	size_t n_blocks;
	uint64_t next_block_seq, checkpoint_seg;

	pthread_mutex_t maint_mu; /* one cut/compaction at a time */
	pthread_mutex_t bg_mu;
	pthread_cond_t bg_cond;
	bool bg_stop, bg_kick;
	pthread_t bg_thread;
	bool bg_started;
	_Atomic bool closing;
	_Atomic uint64_t compactions;
	_Atomic uint64_t total_rows;
	struct ch_store *ch; /* --storage=clickhouse: the backend; NULL = embedded */
	_Atomic(struct rows_marks *) row_marks; /* rows.c; created on first use */
};

int wal_open(struct store *s, struct kiln_error *err);
void wal_close(struct wal *w);
/* Appends one record (and any pending metastore records), fsyncs and
 * returns once durable. On success the caller must apply the record and
 * then call wal_applied. */
int wal_commit(struct store *s, const void *rec, size_t len, struct kiln_error *err);
void wal_applied(struct wal *w);
/* Waits for in-flight commits to be applied, then starts segment seg+1.
 * Called with head_lock NOT held; calls freeze(ctx) with wal.mu held. */
int wal_rotate(struct store *s, void (*freeze)(struct store *s), struct kiln_error *err);
/* Deletes segments <= seg. */
void wal_drop_upto(struct wal *w, uint64_t seg);
/* Applies one samples record read back from the log; the layer above the
 * WAL (store.c's store_apply_record) says what a record means, so the WAL
 * never calls up into it. Called with head_lock held for writing. */
typedef int (*wal_apply_fn)(struct store *s, const uint8_t *p, size_t len);
/* Replays the metastore log, then each segment > s->checkpoint_seg through
 * apply (in segment and record order). */
int wal_replay(struct store *s, wal_apply_fn apply, struct kiln_error *err);
/* The sample record's type byte (ingest.c writes it, store.c applies it). */
#define REC_SAMPLES 1
/* A streamed batch of sample records with its writer and batch ids (rows.c). */
#define REC_ROWS 2
/* Applies a decoded WAL record (REC_SAMPLES or REC_ROWS) to the active
 * head (head_lock held). store.c */
int store_apply_record(struct store *s, const uint8_t *p, size_t len);
/* apply.c: applies one REC_SAMPLES record (the only kind a REC_ROWS part
 * holds); validated whole first, so a bad record changes nothing. */
int store_apply_samples_record(struct store *s, const uint8_t *p, size_t len);
/* Makes one sample record (ingest.c) durable on the store's backend and
 * visible to readers: the WAL and the head, or ClickHouse. 0 = acknowledged. */
int store_commit_record(struct store *s, const uint8_t *rec, size_t len, struct kiln_error *err);
/* Makes pending metastore records (symbolization results) durable. */
int store_commit_meta(struct store *s, struct kiln_error *err);
/* rows.c: applies a REC_ROWS record (store_apply_record's type 2) and
 * raises its writer's mark; frees the marks at close. */
int store_apply_rows_record(struct store *s, const uint8_t *p, size_t len);
void store_rows_marks_free(struct store *s);

#endif
