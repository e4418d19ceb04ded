/*
 * store.c — the embedded store: open/recover, the write path, and the
 * maintenance that turns the head into blocks.
 *
 * Directory layout (docs/STORAGE.md has the bytes):
 *   DIR/LOCK          flock()ed while open (one process per directory)
 *   DIR/meta.log      metastore log (strings ... stacks, series, symbols)
 *   DIR/wal/N.log     WAL segments (sample records)
 *   DIR/blocks/b-SEQ.kb  immutable blocks, one time window each
 *   DIR/CHECKPOINT    "segments <= N are in blocks"
 *
 * Write path: validate labels -> intern metadata and stacks (meta.mu) ->
 * encode one WAL record for all the profile's sample types -> group commit
 * (fsync) -> apply the same record to the head (head_lock) -> acknowledge.
 * Because the head is only changed after the fsync, a reader never sees an
 * unacknowledged write, and replay after a crash applies exactly the durable
 * records.
 *
 * Cut (background thread or store_flush): rotate the WAL segment and freeze
 * the head atomically (no commit in flight, every acknowledged record
 * applied), write one block per time window of the frozen head, publish the
 * blocks, then write CHECKPOINT and delete the covered segments. Readers see
 * the frozen head until its blocks are published, so nothing disappears in
 * between. Recovery invariants:
 *   1. a block whose cut_seg > CHECKPOINT is from an unfinished cut: deleted
 *      (its rows are still in the WAL, which is replayed);
 *   2. a block named as a source by another block was compacted: deleted;
 *   3. segments <= CHECKPOINT are covered by blocks: deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/satadd.h"
#include "common/log.h"
#include "pprof/pprof.h"
#include "store/ch.h"
#include "store/internal.h"

#include <stddef.h>
#include <xxhash.h>

#define DEFAULT_BLOCK_MS  (2 * 3600 * 1000LL)
#define DEFAULT_MAX_LABEL 64
#define DEFAULT_HEAD_ROWS (2u << 20)

static int64_t window_of(const struct store *s, int64_t ts)
{
	int64_t d = s->opts.block_duration_ms;
	int64_t q = ts / d;

	return (ts % d < 0) ? q - 1 : q;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- applying a WAL record ---------------------------------------------- */

/* A REC_ROWS record is a batch of samples records (rows.c); any other is
 * one samples record (apply.c). */
int store_apply_record(struct store *s, const uint8_t *p, size_t len)
{
	if (len > 0 && p[0] == REC_ROWS)
		return store_apply_rows_record(s, p, len);
	return store_apply_samples_record(s, p, len);
}

/* ---- committing a write -------------------------------------------------- */

int store_commit_record(struct store *s, const uint8_t *rec, size_t len, struct kiln_error *err)
{
	bool kick;
	int rc;

	if (s->ch)
		return ch_commit_record(s, rec, len, err);
	rc = wal_commit(s, rec, len, err);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&s->head_lock);
	rc = store_apply_record(s, rec, len);
	kick = s->head->n_rows >= s->opts.head_max_rows ||
	       window_of(s, s->head->max_ts) - window_of(s, s->head->min_ts) >= 2;
	pthread_rwlock_unlock(&s->head_lock);
	wal_applied(&s->wal);
	if (rc)
		/* The record is durable and will be replayed; only memory ran out. */
		return kiln_error_set(err, -rc, "cannot apply the write in memory: %s",
				      strerror(-rc));
	if (kick) {
		pthread_mutex_lock(&s->bg_mu);
		s->bg_kick = true;
		pthread_cond_signal(&s->bg_cond);
		pthread_mutex_unlock(&s->bg_mu);
	}
	return 0;
}

int store_commit_meta(struct store *s, struct kiln_error *err)
{
	int rc;

	if (s->ch) {
		/* ClickHouse keeps no metastore log: each server's symbolization
		 * results live in its memory (ch_store.c says why). */
		pthread_mutex_lock(&s->meta.mu);
		buf_reset(&s->meta.pending);
		pthread_mutex_unlock(&s->meta.mu);
		return 0;
	}
	rc = wal_commit(s, NULL, 0, err);
	if (rc == 0)
		wal_applied(&s->wal);
	return rc;
}

/* ---- blocks: cut, compaction, retention ------------------------------- */

static void freeze_head(struct store *s)
{
	pthread_rwlock_wrlock(&s->head_lock);
	struct head *fresh = head_new();
	if (fresh) {
		s->head->seg = s->wal.seg;
		s->head->next = s->frozen;
		s->frozen = s->head;
		s->head = fresh;
	}
	pthread_rwlock_unlock(&s->head_lock);
}

static const struct series_rows *head_get(void *ctx, uint32_t id, int *rc)
{
	struct head *h = ctx;

	(void)rc;
	return id < h->cap_series ? h->series[id] : NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_block(const void *a, const void *b)
{
	const struct block *x = *(struct block *const *)a, *y = *(struct block *const *)b;

	if (x->min_ts != y->min_ts)
		return x->min_ts < y->min_ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Adds and removes blocks under head_lock; drops `frozen` from the list. */
static int publish(struct store *s, struct block **add, size_t n_add, struct block **remove,
		   size_t n_remove, struct head *frozen)
{
	pthread_rwlock_wrlock(&s->head_lock);
	struct block **nb = realloc(s->blocks, (s->n_blocks + n_add + 1) * sizeof(*nb));
	if (!nb) {
		pthread_rwlock_unlock(&s->head_lock);
		return -ENOMEM;
	}
	s->blocks = nb;
	size_t k = 0;
	for (size_t i = 0; i < s->n_blocks; i++) {
		bool gone = false;

		for (size_t j = 0; j < n_remove && !gone; j++)
			gone = s->blocks[i] == remove[j];
		if (!gone)
			s->blocks[k++] = s->blocks[i];
	}
	for (size_t i = 0; i < n_add; i++)
		s->blocks[k++] = add[i];
	s->n_blocks = k;
	qsort(s->blocks, s->n_blocks, sizeof(*s->blocks), cmp_block);
	if (frozen) {
		struct head **pp = &s->frozen;

		while (*pp && *pp != frozen)
			pp = &(*pp)->next;
		if (*pp)
			*pp = frozen->next;
	}
	pthread_rwlock_unlock(&s->head_lock);
	return 0;
}

static int write_checkpoint(struct store *s, uint64_t seg, struct kiln_error *err)
{
	struct buf b = {0};
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/CHECKPOINT", s->dir);
	rc = buf_printf(&b, "kiln-store 1\nwal_segment %" PRIu64 "\n", seg);
	rc = rc ?: buf_write_file_mode(&b, path, STORE_FILE_MODE);
	buf_free(&b);
	if (rc)
		return kiln_error_set(err, -rc, "cannot write %s: %s", path, strerror(-rc));
	s->checkpoint_seg = seg;
	return 0;
}

/* Writes the oldest frozen head into blocks (one per window). */
static int write_frozen(struct store *s, struct head *h, struct kiln_error *err)
{
	int64_t *wins = NULL;
	size_t nw = 0, cap = 0;
	struct block **made = NULL;
	size_t n_made = 0;
	int rc = 0;

	for (size_t id = 0; id < h->cap_series; id++) {
		const struct series_rows *r = h->series[id];

		for (size_t i = 0; r && i < r->np; i++) {
			int64_t w = window_of(s, r->ts[i]);

			if (nw && wins[nw - 1] == w)
				continue;
			if (GROW_ARRAY(wins, cap, nw + 1, 16)) {
				free(wins);
				return kiln_error_set(err, ENOMEM, "out of memory");
			}
			wins[nw++] = w;
		}
	}
	if (nw)
		qsort(wins, nw, sizeof(*wins), cmp_i64);
	made = calloc(nw + 1, sizeof(*made));
	if (!made) {
		free(wins);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	uint32_t n_stacks = (uint32_t)chunked_count(&s->meta.stacks);
	for (size_t i = 0; i < nw && !rc; i++) {
		struct block *b;
		int64_t d = s->opts.block_duration_ms;

		if (i && wins[i] == wins[i - 1])
			continue;
		rc = block_write(s->block_dir, s->next_block_seq++, h->seg, NULL, 0, head_get, h,
				 h->cap_series, wins[i] * d, wins[i] * d + d, n_stacks, &b, err);
		if (!rc && b)
			made[n_made++] = b;
	}
	rc = rc ?: publish(s, made, n_made, NULL, 0, h);
	if (rc) {
		/* Unpublished blocks go: the retry writes them again. */
		for (size_t i = 0; i < n_made; i++) {
			unlink(made[i]->path);
			block_unref(made[i]);
		}
		kiln_error_set(err, -rc, "out of memory"); /* kept: the first error */
		goto out;
	}
	rc = write_checkpoint(s, h->seg, err);
	if (!rc)
		wal_drop_upto(&s->wal, h->seg);
	head_free(h);
out:
	free(made);
	free(wins);
	return rc;
}

static int cut(struct store *s, struct kiln_error *err)
{
	bool empty;
	int rc = 0;

	pthread_rwlock_rdlock(&s->head_lock);
	empty = s->head->n_profiles == 0;
	pthread_rwlock_unlock(&s->head_lock);
	if (!empty)
		rc = wal_rotate(s, freeze_head, err);
	/* Oldest frozen head first; a failure leaves it (and later ones) to
	 * the next attempt, still visible to readers. */
	while (!rc) {
		struct head *h;

		pthread_rwlock_rdlock(&s->head_lock);
		h = s->frozen;
		while (h && h->next)
			h = h->next;
		pthread_rwlock_unlock(&s->head_lock);
		if (!h)
			break;
		rc = write_frozen(s, h, err);
	}
	return rc;
}

struct compact_ctx {
	struct block **src;
	size_t n_src;
	uint32_t n_stacks;
	struct series_rows rows;
	struct kiln_error *err;
};

static const struct series_rows *compact_get(void *ctx, uint32_t id, int *rc)
{
	struct compact_ctx *c = ctx;

	series_rows_reset(&c->rows);
	for (size_t i = 0; i < c->n_src && !*rc; i++) {
		const struct block_series *bs = block_find(c->src[i], id);

		if (bs)
			*rc = block_read_rows(c->src[i], bs, c->n_stacks, &c->rows, c->err);
	}
	return c->rows.np ? &c->rows : NULL;
}

/* Merges the blocks of one window into one. */
static int compact_window(struct store *s, struct block **src, size_t n, struct kiln_error *err)
{
	struct compact_ctx c = {src, n, (uint32_t)chunked_count(&s->meta.stacks), {0}, err};
	uint64_t *seqs = calloc(n, sizeof(*seqs)), cut_seg = 0;
	uint32_t max_id = 0;
	struct block *out = NULL;
	int rc;

	if (!seqs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		seqs[i] = src[i]->seq;
		cut_seg = src[i]->cut_seg > cut_seg ? src[i]->cut_seg : cut_seg;
		if (src[i]->n_series && src[i]->series[src[i]->n_series - 1].id + 1 > max_id)
			max_id = src[i]->series[src[i]->n_series - 1].id + 1;
	}
	int64_t d = s->opts.block_duration_ms, w = window_of(s, src[0]->min_ts);
	rc = block_write(s->block_dir, s->next_block_seq++, cut_seg, seqs, n, compact_get, &c,
			 max_id, w * d, w * d + d, c.n_stacks, &out, err);
	series_rows_free(&c.rows);
	free(seqs);
	if (rc)
		return rc;
	rc = publish(s, out ? &out : NULL, out ? 1 : 0, src, n, NULL);
	if (rc) {
		/* Left on disk, it would name src as merged: a later merge of
		 * the same window would then count their rows twice. */
		if (out) {
			unlink(out->path);
			block_unref(out);
		}
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		unlink(src[i]->path);
		block_unref(src[i]); /* the store's reference */
	}
	atomic_fetch_add(&s->compactions, 1);
	return 0;
}

/* Snapshot of the block list with a reference each. */
static struct block **blocks_snapshot(struct store *s, size_t *n)
{
	struct block **bs;

	pthread_rwlock_rdlock(&s->head_lock);
	bs = calloc(s->n_blocks + 1, sizeof(*bs));
	*n = 0;
	if (bs) {
		for (size_t i = 0; i < s->n_blocks; i++) {
			block_ref(s->blocks[i]);
			bs[i] = s->blocks[i];
		}
		*n = s->n_blocks;
	}
	pthread_rwlock_unlock(&s->head_lock);
	return bs;
}

static void blocks_release(struct block **bs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		block_unref(bs[i]);
	free(bs);
}

static int compact(struct store *s, bool all, struct kiln_error *err)
{
	size_t n;
	struct block **bs = blocks_snapshot(s, &n);
	int64_t newest = INT64_MIN;
	int rc = 0;

	if (!bs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (window_of(s, bs[i]->max_ts) > newest)
			newest = window_of(s, bs[i]->max_ts);
	/* bs is sorted by min_ts, so one window's blocks are adjacent. */
	for (size_t i = 0; i < n && !rc;) {
		int64_t w = window_of(s, bs[i]->min_ts);
		size_t j = i;

		bool checkpointed = true;

		while (j < n && window_of(s, bs[j]->min_ts) == w)
			checkpointed &= bs[j++]->cut_seg <= s->checkpoint_seg;
		/* A block whose cut has no CHECKPOINT yet (its write failed) is
		 * dropped by recovery, its rows replayed from the WAL; merged
		 * now, the merge would be dropped too and take the checkpointed
		 * blocks it names as sources with it. Wait for the checkpoint. */
		if (j - i >= 2 && checkpointed && (all || w < newest))
			rc = compact_window(s, bs + i, j - i, err);
		i = j;
	}
	blocks_release(bs, n);
	return rc;
}

static void apply_retention(struct store *s)
{
	int64_t cutoff;
	size_t n, k = 0;
	struct block **bs, **old;

	if (s->opts.retention_ms <= 0)
		return;
	cutoff = wall_ms() - s->opts.retention_ms;
	bs = blocks_snapshot(s, &n);
	old = calloc(n + 1, sizeof(*old));
	if (!bs || !old) {
		free(old);
		blocks_release(bs, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (bs[i]->max_ts < cutoff)
			old[k++] = bs[i];
	if (k && publish(s, NULL, 0, old, k, NULL) == 0) {
		series_forget_before(&s->sx, cutoff);
		for (size_t i = 0; i < k; i++) {
			log_info("store: retention: deleting block %s (data up to %" PRId64 ")",
				 old[i]->path, old[i]->max_ts);
			atomic_fetch_sub(&s->total_rows, old[i]->n_rows);
			unlink(old[i]->path);
			block_unref(old[i]);
		}
	}
	free(old);
	blocks_release(bs, n);
}

static int maintain(struct store *s, bool all, struct kiln_error *err)
{
	int rc;

	pthread_mutex_lock(&s->maint_mu);
	rc = cut(s, err);
	rc = rc ?: compact(s, all, err);
	apply_retention(s);
	pthread_mutex_unlock(&s->maint_mu);
	return rc;
}

int store_flush(struct store *s, struct kiln_error *err)
{
	if (s->ch) /* every write is in ClickHouse already: only retention */
		return ch_apply_retention(s, err);
	return maintain(s, true, err);
}

static void *bg_main(void *arg)
{
	struct store *s = arg;

	pthread_mutex_lock(&s->bg_mu);
	while (!s->bg_stop) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		if (!s->bg_kick)
			pthread_cond_timedwait(&s->bg_cond, &s->bg_mu, &until);
		if (s->bg_stop)
			break;
		bool kicked = s->bg_kick;
		s->bg_kick = false;
		pthread_mutex_unlock(&s->bg_mu);

		struct kiln_error err = {0};
		int rc;
		if (kicked) {
			rc = maintain(s, false, &err);
		} else {
			pthread_mutex_lock(&s->maint_mu);
			rc = compact(s, false, &err);
			apply_retention(s);
			pthread_mutex_unlock(&s->maint_mu);
		}
		if (rc)
			log_error("store: background maintenance: %s", err.msg);
		pthread_mutex_lock(&s->bg_mu);
	}
	pthread_mutex_unlock(&s->bg_mu);
	return NULL;
}

/* ---- open / close -------------------------------------------------------- */

static int read_checkpoint(struct store *s, struct kiln_error *err)
{
	struct buf b = {0};
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/CHECKPOINT", s->dir);
	rc = buf_read_file(&b, path, 4096);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return kiln_error_set(err, -rc, "cannot read %s: %s", path, strerror(-rc));
	buf_terminate(&b);
	const char *p = b.data ? strstr((char *)b.data, "wal_segment ") : NULL;
	if (!p) {
		buf_free(&b);
		return kiln_error_set(err, EBADMSG, "%s: no wal_segment line", path);
	}
	s->checkpoint_seg = strtoull(p + 12, NULL, 10);
	buf_free(&b);
	return 0;
}

static int load_blocks(struct store *s, struct kiln_error *err)
{
	DIR *d = opendir(s->block_dir);
	struct dirent *e;
	struct block **all = NULL;
	size_t n = 0, cap = 0;
	char path[4096];

	if (!d)
		return kiln_error_set(err, errno, "cannot open %s: %s", s->block_dir,
				      strerror(errno));
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct block *b;
		struct kiln_error berr = {0};

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->block_dir, e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
			unlink(path); /* an unfinished write */
			continue;
		}
		if (len < 4 || strcmp(e->d_name + len - 3, ".kb") != 0)
			continue;
		if (block_open(path, 0, &b, &berr)) {
			log_error("store: skipping unreadable block: %s", berr.msg);
			continue;
		}
		if (GROW_ARRAY(all, cap, n + 1, 16)) {
			block_unref(b);
			break;
		}
		all[n++] = b;
	}
	closedir(d);
	/* Recovery invariants 1 and 2 (see the top of the file): decide for
	 * every block first, then drop. */
	bool *drop = calloc(n + 1, sizeof(*drop));
	if (!drop) {
		for (size_t i = 0; i < n; i++)
			block_unref(all[i]);
		free(all);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		drop[i] = all[i]->cut_seg > s->checkpoint_seg;
		for (size_t j = 0; j < n && !drop[i]; j++)
			for (size_t x = 0; x < all[j]->n_sources && !drop[i]; x++)
				drop[i] = all[j]->sources[x] == all[i]->seq && j != i;
		if (all[i]->seq >= s->next_block_seq)
			s->next_block_seq = all[i]->seq + 1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (drop[i]) {
			log_info(
			    "store: removing block %s left by an interrupted cut or compaction",
			    all[i]->path);
			unlink(all[i]->path);
			block_unref(all[i]);
			continue;
		}
		all[k++] = all[i];
	}
	free(drop);
	s->blocks = all;
	s->n_blocks = k;
	if (k)
		qsort(s->blocks, k, sizeof(*s->blocks), cmp_block);
	/* Series time ranges come from the blocks too. */
	for (size_t i = 0; i < k; i++)
		for (size_t j = 0; j < s->blocks[i]->n_series; j++) {
			const struct block_series *bs = &s->blocks[i]->series[j];

			if (bs->id < chunked_count(&s->sx.series)) {
				series_note_time(series_at(&s->sx, bs->id), bs->min_ts);
				series_note_time(series_at(&s->sx, bs->id), bs->max_ts);
			}
			atomic_fetch_add(&s->total_rows, bs->n_rows);
		}
	return 0;
}

/* The ClickHouse backend: the metastore and series index as a cache, no
 * directory, WAL, head or blocks (ch.h). */
static int store_open_clickhouse(const struct store_options *opts, struct store **out,
				 struct kiln_error *err)
{
	struct store *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return kiln_error_set(err, ENOMEM, "out of memory");
	s->opts = *opts;
	s->opts.path = NULL;
	if (!s->opts.max_labels_per_series)
		s->opts.max_labels_per_series = DEFAULT_MAX_LABEL;
	if (opts->symbolizer && opts->symbolizer->resolve) {
		s->symbolizer = *opts->symbolizer;
		s->has_symbolizer = true;
	}
	s->opts.symbolizer = NULL;
	memset(&s->opts.clickhouse, 0, sizeof(s->opts.clickhouse)); /* ch keeps copies */
	pthread_rwlock_init(&s->head_lock, NULL);
	pthread_mutex_init(&s->maint_mu, NULL);
	pthread_mutex_init(&s->bg_mu, NULL);
	pthread_cond_init(&s->bg_cond, NULL);
	s->head = head_new();
	s->wal.fd = s->wal.meta_fd = -1;
	s->lock_fd = -1;
	if (!s->head || meta_init(&s->meta) || series_index_init(&s->sx)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = ch_store_open(s, &opts->clickhouse, opts->retention_ms, err);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	store_close(s);
	return rc;
}

int store_open(const struct store_options *opts, struct store **out, struct kiln_error *err)
{
	struct store *s;
	char path[4096];
	int rc, fd;

	*out = NULL;
	if (opts && opts->backend == STORE_BACKEND_CLICKHOUSE)
		return store_open_clickhouse(opts, out, err);
	if (!opts || !opts->path || !*opts->path)
		return kiln_error_set(err, EINVAL, "store: no storage path");
	s = calloc(1, sizeof(*s));
	if (!s)
		return kiln_error_set(err, ENOMEM, "out of memory");
	s->opts = *opts;
	if (s->opts.block_duration_ms <= 0)
		s->opts.block_duration_ms = DEFAULT_BLOCK_MS;
	if (!s->opts.max_labels_per_series)
		s->opts.max_labels_per_series = DEFAULT_MAX_LABEL;
	if (!s->opts.head_max_rows)
		s->opts.head_max_rows = DEFAULT_HEAD_ROWS;
	if (opts->symbolizer && opts->symbolizer->resolve) {
		s->symbolizer = *opts->symbolizer;
		s->has_symbolizer = true;
	}
	s->opts.symbolizer = NULL;
	s->dir = strdup(opts->path);
	s->next_block_seq = 1;
	pthread_rwlock_init(&s->head_lock, NULL);
	pthread_mutex_init(&s->maint_mu, NULL);
	pthread_mutex_init(&s->bg_mu, NULL);
	pthread_cond_init(&s->bg_cond, NULL);
	s->head = head_new();
	s->wal.fd = s->wal.meta_fd = -1;
	s->lock_fd = -1;
	if (!s->dir || !s->head || asprintf(&s->block_dir, "%s/blocks", opts->path) < 0) {
		s->block_dir = NULL;
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (meta_init(&s->meta) || series_index_init(&s->sx)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if ((mkdir(s->dir, STORE_DIR_MODE) && errno != EEXIST) ||
	    (mkdir(s->block_dir, STORE_DIR_MODE) && errno != EEXIST)) {
		rc = kiln_error_set(err, errno, "cannot create %s: %s", s->block_dir,
				    strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/LOCK", s->dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		int e = errno;
		/* Only a held lock means another server; a file this user may
		 * not open is a matter of owners and modes. */
		rc = kiln_error_set(err, e == EWOULDBLOCK ? EBUSY : e, "cannot lock %s: %s%s", path,
				    strerror(e),
				    e == EWOULDBLOCK ? " (is another kiln using this directory?)"
				    : e == EACCES || e == EPERM
					? " (the files belong to another user: run kiln as their "
					  "owner, or chown the directory)"
					: "");
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	s->lock_fd = fd;
	rc = read_checkpoint(s, err);
	rc = rc ?: wal_open(s, err);
	rc = rc ?: wal_replay(s, store_apply_record, err);
	rc = rc ?: load_blocks(s, err);
	if (rc)
		goto fail;
	if (pthread_create(&s->bg_thread, NULL, bg_main, s)) {
		rc = kiln_error_set(err, EAGAIN, "cannot start the store's background thread");
		goto fail;
	}
	s->bg_started = true;
	log_info("store: opened %s: %zu series, %zu stacks, %zu blocks, %zu rows in the head",
		 s->dir, chunked_count(&s->sx.series), chunked_count(&s->meta.stacks), s->n_blocks,
		 s->head->n_rows);
	*out = s;
	return 0;
fail:
	kiln_error_prefix(err, "store %s: ", opts->path);
	store_close(s);
	return rc;
}

void store_close(struct store *s)
{
	struct kiln_error err = {0};

	if (!s)
		return;
	atomic_store(&s->closing, true);
	ch_store_close(s);
	if (s->bg_started) {
		pthread_mutex_lock(&s->bg_mu);
		s->bg_stop = true;
		pthread_cond_signal(&s->bg_cond);
		pthread_mutex_unlock(&s->bg_mu);
		pthread_join(s->bg_thread, NULL);
		/* Everything acknowledged is already durable; cutting now only
		 * spares the next start a replay. Pending metastore records
		 * (symbolization results) are written by an empty commit. */
		if (wal_commit(s, NULL, 0, &err) == 0)
			wal_applied(&s->wal);
		if (maintain(s, true, &err))
			log_warn("store: closing %s: %s (the WAL keeps the data)", s->dir, err.msg);
	}
	if (s->wal.dir)
		wal_close(&s->wal);
	store_rows_marks_free(s);
	for (size_t i = 0; i < s->n_blocks; i++)
		block_unref(s->blocks[i]);
	free(s->blocks);
	head_free(s->head);
	while (s->frozen) {
		struct head *h = s->frozen;

		s->frozen = h->next;
		head_free(h);
	}
	if (s->sx.key_ix || s->sx.series.dir)
		series_index_destroy(&s->sx);
	if (s->meta.arena || s->meta.strings.dir)
		meta_destroy(&s->meta);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	pthread_rwlock_destroy(&s->head_lock);
	pthread_mutex_destroy(&s->maint_mu);
	pthread_mutex_destroy(&s->bg_mu);
	pthread_cond_destroy(&s->bg_cond);
	free(s->dir);
	free(s->block_dir);
	free(s);
}

void store_get_stats(struct store *s, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (s->ch) {
		out->series = chunked_count(&s->sx.series);
		out->sample_rows = atomic_load(&s->ch->rows);
		out->stacks = chunked_count(&s->meta.stacks);
		out->locations = chunked_count(&s->meta.locations) - 1;
		return;
	}
	pthread_rwlock_rdlock(&s->head_lock);
	out->head_rows = s->head->n_rows;
	for (struct head *h = s->frozen; h; h = h->next)
		out->head_rows += h->n_rows;
	out->blocks = s->n_blocks;
	for (size_t i = 0; i < s->n_blocks; i++)
		out->disk_bytes += s->blocks[i]->file_size;
	pthread_rwlock_unlock(&s->head_lock);
	pthread_mutex_lock(&s->wal.mu);
	out->wal_bytes = s->wal.seg_len;
	out->disk_bytes += s->wal.seg_len + s->wal.meta_len;
	out->wal_fsyncs = s->wal.fsyncs;
	out->wal_fsync_ns_total = s->wal.fsync_ns;
	pthread_mutex_unlock(&s->wal.mu);
	out->series = chunked_count(&s->sx.series);
	out->sample_rows = atomic_load(&s->total_rows);
	out->stacks = chunked_count(&s->meta.stacks);
	out->locations = chunked_count(&s->meta.locations) - 1;
	pthread_mutex_lock(&s->meta.mu);
	for (size_t i = s->meta.sym_cursor; i < s->meta.n_sym_queue; i++) {
		const struct meta_location *l =
		    chunked_at(&s->meta.locations, s->meta.sym_queue[i]);
		out->symbolize_pending += atomic_load(&l->sym) == SYM_PENDING;
	}
	pthread_mutex_unlock(&s->meta.mu);
	out->compactions = atomic_load(&s->compactions);
}
