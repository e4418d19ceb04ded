/*
 * ch.h — the ClickHouse backend behind store.h (--storage=clickhouse); not
 * part of the API. docs/SCALE-OUT.md has the deployment and the schema.
 *
 * The backend keeps the embedded store's in-memory metastore and series
 * index (s->meta, s->sx) as a *cache* of what ClickHouse holds, so that the
 * query code (query.c, merge_pprof.c, symbolize.c) runs unchanged on local
 * ids. ClickHouse is the only durable copy: every object there is keyed by
 * a 64-bit hash of its content (ch_hash.c), which any server computes the
 * same way, so several kiln servers write the same tables without talking
 * to each other. Only rows (and the reads that filter and sum them) go
 * to ClickHouse per request; objects are fetched once per server and cached.
 *
 * Files:
 *   ch_http.c    one HTTP request to ClickHouse (libcurl), errors classified
 *   ch_schema.c  the tables, created at start-up; retention by partition
 *   ch_hash.c    content hashes of local objects, hash -> local id maps
 *   ch_write.c   a sample record -> RowBinary inserts, idempotent retries
 *   ch_read.c    series sync, query_range, fetching unknown stacks
 *   ch_merge.c   the merge's per-stack sums
 *
 * Locks: ch->mu (the hash memo and maps) is taken after meta.mu and the
 * series lock, never before them.
 */
#ifndef KILN_STORE_CH_H
#define KILN_STORE_CH_H

#include <pthread.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/htab.h"
#include "store/internal.h"

/* ---- ch_http.c ------------------------------------------------------------ */

struct ch_conn {
	char *url; /* base, without a trailing '/' */
	char *database, *user, *password;
	long timeout_ms;
};

/* Runs one statement. With data (an INSERT ... FORMAT RowBinary), the
 * statement goes in the URL and data is the body; else the statement is the
 * body. out (may be NULL) receives the response body. Errors: -EPROTO when
 * ClickHouse answered with an error (its message in err: the statement
 * failed and changed nothing), -ECONNREFUSED when it could not be reached
 * (nothing was sent), -EIO or -ETIMEDOUT when the outcome is unknown (the
 * request may have been executed). */
int ch_http(struct ch_conn *c, const char *sql, const void *data, size_t len, struct buf *out,
	    struct kiln_error *err);
/* The same, retried with backoff while ClickHouse is unreachable or the
 * outcome unknown (only for statements that are safe to repeat: reads,
 * DDL with IF NOT EXISTS, inserts into ReplacingMergeTree tables). */
int ch_http_retry(struct ch_conn *c, const char *sql, const void *data, size_t len, struct buf *out,
		  struct kiln_error *err);

/* ---- ch_hash.c ------------------------------------------------------------ */

/* Per kind of object: its content hash by local id (0 = not computed yet),
 * whether this server knows it is in ClickHouse, and hash -> local id. */
struct ch_memo {
	uint64_t *hash;
	uint8_t *stored;
	size_t cap;
	struct htab *by_hash;
};
/* A write waiting in the group commit (ch_write.c). */
struct ch_pending {
	struct buf *body; /* its samples rows, marker last */
	int64_t ts;	  /* where its marker is */
	uint64_t batch;
	bool done;   /* the leader is finished with it (group lock) */
	bool landed; /* its rows are in (the leader's own) */
	int rc;
	struct kiln_error err;
	pthread_cond_t cond;
	struct ch_pending *next;
};

enum ch_kind { CH_SERIES, CH_MAPPING, CH_FUNCTION, CH_LOCATION, CH_STACK, CH_N_KINDS };

struct ch_store {
	struct ch_conn conn;
	pthread_mutex_t mu; /* memo[] */
	struct ch_memo memo[CH_N_KINDS];
	int64_t retention_ms;
	pthread_t retention_thread;
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cond;
	bool stop, thread_started;
	pthread_mutex_t gc_mu; /* the group commit's queue */
	struct ch_pending *gc_head, **gc_tail;
	bool gc_leader;
	_Atomic uint64_t inserts, insert_retries, rows;
};

/* The samples rows that carry a profile's total (one per series and
 * profile, so that a profile whose values all summed to 0 still shows in
 * query_range, as on the embedded store) have type_hash CH_TOTALS_TYPE and
 * the real type hash in stack_hash: they sort together, so that range
 * queries and the series sync read them alone. No profile type hashes to
 * 0 (the batch markers' type) or 1. In a merge's answer they come back as
 * stack CH_TOTAL_ROW, which no stack hashes to. */
#define CH_TOTALS_TYPE 1
#define CH_TOTAL_ROW   0

/* Content hashes of local objects (computed once, memoized; ch->mu held).
 * A location pushed without lines is hashed without them, whatever a
 * symbolizer found since: the hash names what was pushed. Never 0. */
uint64_t ch_hash_series(struct store *s, uint32_t id);
uint64_t ch_hash_mapping(struct store *s, uint32_t id);
uint64_t ch_hash_function(struct store *s, uint32_t id);
uint64_t ch_hash_location(struct store *s, uint32_t id);
uint64_t ch_hash_stack(struct store *s, uint32_t id);
uint64_t ch_hash_type(const char *profile_type);
/* Records that local object id of kind k has content hash h (read side).
 * 0 or -ENOMEM; ch->mu held. */
int ch_memo_set(struct ch_store *ch, enum ch_kind k, uint32_t id, uint64_t h, bool stored);
/* The local id of hash h, if this server has it. ch->mu held. */
bool ch_memo_find(struct ch_store *ch, enum ch_kind k, uint64_t h, uint32_t *id);
/* Marks/asks whether local object id is known to be in ClickHouse. */
void ch_memo_mark_stored(struct ch_store *ch, enum ch_kind k, uint32_t id);
bool ch_memo_is_stored(const struct ch_store *ch, enum ch_kind k, uint32_t id);
void ch_memo_free(struct ch_memo *m);

/* ---- ch_schema.c ----------------------------------------------------------- */

/* A backend with no connection yet (ch_store_open connects it; the fuzz
 * target uses it as is). NULL on out-of-memory; freed by ch_store_close. */
struct ch_store *ch_store_new(void);
/* Checks the options, creates the database and tables if missing. */
int ch_store_open(struct store *s, const struct store_clickhouse_options *o, int64_t retention_ms,
		  struct kiln_error *err);
void ch_store_close(struct store *s);
/* Drops the days of samples entirely older than the retention. */
int ch_apply_retention(struct store *s, struct kiln_error *err);

/* ---- ch_write.c ------------------------------------------------------------ */

/* Writes one sample record (ingest.c's format) and the objects it refers to
 * that ClickHouse may not have yet; 0 once ClickHouse confirmed every
 * insert (an acknowledged write is in ClickHouse, no local WAL). */
int ch_commit_record(struct store *s, const uint8_t *rec, size_t len, struct kiln_error *err);
/* The row path (rows.c) on ClickHouse: parts (n_parts length-prefixed
 * REC_SAMPLES records, rows.c's format) written as one batch for window
 * of writer. 0 once ClickHouse confirmed it; 1 when that window was stored
 * before, by this server or another (nothing written); a negative errno. */
int ch_commit_rows(struct store *s, uint64_t writer, uint64_t window, const uint8_t *parts,
		   size_t len, size_t n_parts, struct kiln_error *err);
/* The key of a streamed window, kept in its batch marker. Never 0. */
uint64_t ch_window_key(uint64_t writer, uint64_t window);

/* ---- ch_read.c ------------------------------------------------------------- */

/* The series table, as ch_apply_series reads it. */
#define CH_SERIES_SQL                                                                              \
	"SELECT series_hash, any(profile_type), any(name), any(sample_type), any(sample_unit), "   \
	"any(period_type), any(period_unit), any(period), any(delta), any(label_names), "          \
	"any(label_values) FROM series GROUP BY series_hash FORMAT RowBinary"
/* Brings the local series index up to date with ClickHouse: series other
 * servers wrote, and the time range of those with data in [start_ms,
 * end_ms] (a series whose data lies only before and after the range is not
 * widened to cover it, as the embedded store's would be). Before each
 * series_select. */
int ch_sync_series(struct store *s, int64_t start_ms, int64_t end_ms, struct kiln_error *err);
/* The parsers of ClickHouse's answers (RowBinary, untrusted: -EPROTO with a
 * message for anything malformed), separate from the requests so that
 * fuzz/fuzz_ch_answers.c reaches them: the series table's rows, the
 * per-series time ranges, and the stacks/locations/functions/mappings rows
 * of a fetch, interned bottom-up into the local metastore. */
int ch_apply_series(struct store *s, const uint8_t *data, size_t len, struct kiln_error *err);
int ch_apply_time_ranges(struct store *s, const uint8_t *data, size_t len, struct kiln_error *err);
int ch_intern_objects(struct store *s, const struct buf *stacks, const struct buf *locations,
		      const struct buf *functions, const struct buf *mappings,
		      struct kiln_error *err);
/* Fetches and interns the stacks this server lacks among those named in
 * the first 8 bytes (a stack hash, CH_TOTAL_ROW skipped) of each of n_rows
 * answer rows of stride bytes. */
int ch_fetch_unknown_stacks(struct store *s, const uint8_t *rows, size_t n_rows, size_t stride,
			    struct kiln_error *err);
/* store_query_range on ClickHouse (sums pushed down). */
int ch_query_range(struct store *s, const struct store_selector *sel,
		   void (*cb)(void *ctx, const struct store_label *labels, size_t n_labels,
			      const struct store_point *points, size_t n_points),
		   void *ctx, struct kiln_error *err);

/* ---- ch_merge.c ------------------------------------------------------------ */

/* merge_aggregate on ClickHouse: per-stack sums computed there, in one
 * round trip while the series table is read alongside. */
int ch_merge_aggregate(struct store *s, const struct store_selector *sel, struct merge_agg *a,
		       uint32_t *first_series, struct kiln_error *err);

#endif
