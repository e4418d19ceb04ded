/*
 * block.c — immutable block files: one time window of sample rows, columnar
 * per series, zstd-compressed. The byte layout is in docs/STORAGE.md; in
 * short:
 *
 *   "KILNBLK1" | per series: summary, rollup and rows frames (zstd) |
 *   index (varints) | footer: index offset u64, index length u32,
 *   index checksum u32, "KILNEND1"
 *
 * Rows refer to stacks through a per-series dictionary (the sorted distinct
 * stack ids of that series in the block), so a row is a small index delta
 * and a value: about 2 bytes before zstd. The rollup frame holds each
 * dictionary stack's sum over the whole block, which lets a merge whose
 * range covers the block skip the rows entirely.
 *
 * A block is written to a temporary name, fsynced and renamed, then the
 * directory is fsynced: a block file either exists whole or not at all.
 * Readers mmap the file and check a checksum before decompressing a frame;
 * nothing read from a block is trusted (ids are bounds-checked). Once a
 * frame (or the index, at open) is decoded its pages are unmapped from this
 * process again (they stay in the page cache): a merge over a day of blocks
 * would otherwise keep every page it touched counted in the server's RSS.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "common/grow.h"
#include "common/satadd.h"
#include "common/fdio.h"
#include "common/log.h"
#include "store/internal.h"

#define BLOCK_MAGIC   "KILNBLK1"
#define BLOCK_END     "KILNEND1"
#define FOOTER_LEN    24
#define BLOCK_VERSION 1
#define ZSTD_LEVEL    3

enum { F_SUMMARY, F_ROLLUP, F_ROWS };

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Profile indices sorted by timestamp (stable). */
struct pidx {
	int64_t ts;
	uint32_t i;
};
static int cmp_pidx(const void *a, const void *b)
{
	const struct pidx *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

struct row {
	uint32_t local;
	int64_t value;
};
static int cmp_row(const void *a, const void *b)
{
	return cmp_u32(&((const struct row *)a)->local, &((const struct row *)b)->local);
}

struct writer {
	int fd;
	uint64_t off;
	ZSTD_CCtx *cctx;
	struct buf z;
	int err;
};

static int emit_frame(struct writer *w, const struct buf *raw, uint64_t *off, uint64_t *len,
		      uint32_t *sum)
{
	size_t bound = ZSTD_compressBound(raw->len);
	size_t n;
	int rc;

	buf_reset(&w->z);
	rc = buf_reserve(&w->z, bound);
	if (rc)
		return rc;
	n = ZSTD_compressCCtx(w->cctx, w->z.data, bound, raw->data ? raw->data : (void *)"",
			      raw->len, ZSTD_LEVEL);
	if (ZSTD_isError(n))
		return -EIO;
	rc = fd_write_all(w->fd, w->z.data, n);
	if (rc)
		return rc;
	*off = w->off;
	*len = n;
	*sum = store_checksum(w->z.data, n);
	w->off += n;
	return 0;
}

/* Encodes one series' profiles in [lo, hi) into three frames. Returns 1 if
 * the series had data in range, 0 if not, or a negative errno. */
static int write_series(struct writer *w, uint32_t id, const struct series_rows *r, int64_t lo,
			int64_t hi, uint32_t *local, struct block_series *bs)
{
	struct buf f[3] = {{0}};
	struct pidx *ps = NULL;
	uint32_t *dict = NULL;
	int64_t *sums = NULL;
	struct row *tmp = NULL;
	size_t np = 0, nd = 0, nrows = 0, cap_tmp = 0;
	int rc = 0;

	ps = malloc((r->np ? r->np : 1) * sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	for (size_t i = 0; i < r->np; i++)
		if (r->ts[i] >= lo && r->ts[i] < hi)
			ps[np++] = (struct pidx){r->ts[i], (uint32_t)i};
	if (!np) {
		free(ps);
		return 0;
	}
	qsort(ps, np, sizeof(*ps), cmp_pidx);
	/* The dictionary: distinct stacks, sorted. local[] is 0 for unseen
	 * stacks and is cleared again before returning. */
	for (size_t k = 0; k < np; k++) {
		uint32_t p = ps[k].i;

		nrows += r->n[p];
		for (uint32_t j = 0; j < r->n[p]; j++) {
			uint32_t st = r->stacks[r->off[p] + j];

			if (local[st])
				continue;
			local[st] = 1;
			if (nd % 1024 == 0) {
				uint32_t *d = realloc(dict, (nd + 1024) * sizeof(*d));
				if (!d) {
					rc = -ENOMEM;
					goto out;
				}
				dict = d;
			}
			dict[nd++] = st;
		}
	}
	if (nd)
		qsort(dict, nd, sizeof(*dict), cmp_u32);
	for (size_t d = 0; d < nd; d++)
		local[dict[d]] = (uint32_t)d + 1;
	sums = calloc(nd ? nd : 1, sizeof(*sums));
	if (!sums) {
		rc = -ENOMEM;
		goto out;
	}

	bs->id = id;
	bs->min_ts = ps[0].ts;
	bs->max_ts = ps[np - 1].ts;
	bs->n_profiles = np;
	bs->n_rows = nrows;
	/* summary: per profile ts delta, row count, total */
	rc = put_uvarint(&f[F_SUMMARY], np);
	int64_t prev = bs->min_ts;
	for (size_t k = 0; k < np && !rc; k++) {
		uint32_t p = ps[k].i;

		rc = put_uvarint(&f[F_SUMMARY], (uint64_t)(ps[k].ts - prev));
		rc = rc ?: put_uvarint(&f[F_SUMMARY], r->n[p]);
		rc = rc ?: put_svarint(&f[F_SUMMARY], r->total[p]);
		prev = ps[k].ts;
	}
	/* rows: per profile, local index deltas (sorted) and values */
	for (size_t k = 0; k < np && !rc; k++) {
		uint32_t p = ps[k].i, n = r->n[p];

		if (n > cap_tmp) {
			struct row *t = realloc(tmp, n * sizeof(*t));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			tmp = t;
			cap_tmp = n;
		}
		bool sorted = true;
		for (uint32_t j = 0; j < n; j++) {
			tmp[j].local = local[r->stacks[r->off[p] + j]] - 1;
			tmp[j].value = r->values[r->off[p] + j];
			if (j && tmp[j].local < tmp[j - 1].local)
				sorted = false;
		}
		if (!sorted)
			qsort(tmp, n, sizeof(*tmp), cmp_row);
		uint32_t last = 0;
		for (uint32_t j = 0; j < n && !rc; j++) {
			rc = put_uvarint(&f[F_ROWS], tmp[j].local - last);
			rc = rc ?: put_svarint(&f[F_ROWS], tmp[j].value);
			sat_acc_i64(&sums[tmp[j].local], tmp[j].value);
			last = tmp[j].local;
		}
	}
	/* rollup: the dictionary (deltas) and per-stack sums */
	rc = rc ?: put_uvarint(&f[F_ROLLUP], nd);
	uint32_t last = 0;
	for (size_t d = 0; d < nd && !rc; d++) {
		rc = put_uvarint(&f[F_ROLLUP], dict[d] - last);
		last = dict[d];
	}
	for (size_t d = 0; d < nd && !rc; d++)
		rc = put_svarint(&f[F_ROLLUP], sums[d]);
	for (int i = 0; i < 3 && !rc; i++)
		rc = emit_frame(w, &f[i], &bs->off[i], &bs->len[i], &bs->sum[i]);
out:
	for (size_t d = 0; d < nd; d++)
		local[dict[d]] = 0;
	for (int i = 0; i < 3; i++)
		buf_free(&f[i]);
	free(ps);
	free(dict);
	free(sums);
	free(tmp);
	return rc ? rc : 1;
}

static int encode_index(struct buf *ix, const struct block *b)
{
	int rc = put_uvarint(ix, BLOCK_VERSION);

	rc = rc ?: put_uvarint(ix, b->seq);
	rc = rc ?: put_uvarint(ix, b->cut_seg);
	rc = rc ?: put_svarint(ix, b->min_ts);
	rc = rc ?: put_svarint(ix, b->max_ts);
	rc = rc ?: put_uvarint(ix, b->n_rows);
	rc = rc ?: put_uvarint(ix, b->n_sources);
	for (size_t i = 0; i < b->n_sources && !rc; i++)
		rc = put_uvarint(ix, b->sources[i]);
	rc = rc ?: put_uvarint(ix, b->n_series);
	for (size_t i = 0; i < b->n_series && !rc; i++) {
		const struct block_series *bs = &b->series[i];

		rc = put_uvarint(ix, bs->id);
		rc = rc ?: put_svarint(ix, bs->min_ts);
		rc = rc ?: put_uvarint(ix, (uint64_t)(bs->max_ts - bs->min_ts));
		rc = rc ?: put_uvarint(ix, bs->n_profiles);
		rc = rc ?: put_uvarint(ix, bs->n_rows);
		for (int f = 0; f < 3 && !rc; f++) {
			rc = put_uvarint(ix, bs->off[f]);
			rc = rc ?: put_uvarint(ix, bs->len[f]);
			rc = rc ?: put_u32le(ix, bs->sum[f]);
		}
	}
	return rc;
}

static void block_free(struct block *b)
{
	if (!b)
		return;
	if (b->map)
		munmap((void *)b->map, b->map_len);
	free(b->path);
	free(b->sources);
	free(b->series);
	free(b);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

int block_write(const char *dir, uint64_t seq, uint64_t cut_seg, const uint64_t *sources,
		size_t n_sources, block_series_fn get, void *ctx, size_t n_series, int64_t lo,
		int64_t hi, uint32_t n_stacks, struct block **out, struct kiln_error *err)
{
	struct writer w = {.fd = -1};
	struct block *b = calloc(1, sizeof(*b));
	struct buf ix = {0};
	uint32_t *local = calloc(n_stacks ? n_stacks : 1, sizeof(*local));
	char tmp[4200], path[4096];
	size_t cap = 0;
	int rc = 0;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/b-%016" PRIx64 ".kb", dir, seq);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	w.cctx = ZSTD_createCCtx();
	if (!b || !local || !w.cctx) {
		rc = kiln_error_set(err, ENOMEM, "out of memory writing block %s", path);
		goto fail;
	}
	w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, STORE_FILE_MODE);
	if (w.fd < 0) {
		rc = kiln_error_set(err, errno, "cannot create block %s: %s", tmp, strerror(errno));
		goto fail;
	}
	rc = fd_write_all(w.fd, BLOCK_MAGIC, 8);
	w.off = 8;
	b->min_ts = INT64_MAX;
	b->max_ts = INT64_MIN;
	for (size_t id = 0; id < n_series && !rc; id++) {
		const struct series_rows *sr = get(ctx, (uint32_t)id, &rc);

		if (rc)
			break;
		if (!sr || !sr->np)
			continue;
		if (GROW_ARRAY(b->series, cap, b->n_series + 1, 64)) {
			rc = -ENOMEM;
			break;
		}
		struct block_series *bs = &b->series[b->n_series];
		memset(bs, 0, sizeof(*bs));
		rc = write_series(&w, (uint32_t)id, sr, lo, hi, local, bs);
		if (rc == 1) {
			rc = 0;
			b->n_series++;
			b->n_rows += bs->n_rows;
			if (bs->min_ts < b->min_ts)
				b->min_ts = bs->min_ts;
			if (bs->max_ts > b->max_ts)
				b->max_ts = bs->max_ts;
		}
	}
	if (!rc && !b->n_series) {
		close(w.fd);
		unlink(tmp);
		w.fd = -1;
		goto done; /* nothing in range: no block */
	}
	b->seq = seq;
	b->cut_seg = cut_seg;
	b->n_sources = n_sources;
	if (n_sources) {
		b->sources = malloc(n_sources * sizeof(*sources));
		if (!b->sources)
			rc = rc ?: -ENOMEM;
		else
			memcpy(b->sources, sources, n_sources * sizeof(*sources));
	}
	rc = rc ?: encode_index(&ix, b);
	if (!rc) {
		uint64_t ix_off = w.off;
		uint32_t ix_len = (uint32_t)ix.len, ix_sum = store_checksum(ix.data, ix.len);

		rc = put_u64le(&ix, ix_off);
		rc = rc ?: put_u32le(&ix, ix_len);
		rc = rc ?: put_u32le(&ix, ix_sum);
		rc = rc ?: buf_append(&ix, BLOCK_END, 8);
		rc = rc ?: fd_write_all(w.fd, ix.data, ix.len);
	}
	if (!rc && fsync(w.fd))
		rc = -errno;
	if (rc) {
		if (rc == -ENOSPC || rc == -EDQUOT)
			kiln_error_set(err, ENOSPC,
				       "disk full writing block %s; the head stays in memory and "
				       "in the WAL until space is freed",
				       tmp);
		else
			kiln_error_set(err, -rc, "cannot write block %s: %s", tmp, strerror(-rc));
		goto fail;
	}
	close(w.fd);
	w.fd = -1;
	if (rename(tmp, path)) {
		rc = kiln_error_set(err, errno, "cannot rename %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto fail;
	}
	rc = fsync_dir(dir);
	if (rc)
		kiln_error_set(err, -rc, "cannot fsync %s: %s", dir, strerror(-rc));
	block_free(b);
	b = NULL;
	rc = rc ?: block_open(path, n_stacks, out, err);
	/* A failed block must not stay under its final name: the caller
	 * retries the same cut or compaction under a new sequence number,
	 * and recovery would then load both copies (rows counted twice).
	 * Should this unlink not reach the disk, recovery still drops the
	 * file (its cut is not checkpointed), and the next block's directory
	 * fsync makes the unlink durable. */
	if (rc)
		unlink(path);
	goto done;
fail:
	if (w.fd >= 0) {
		close(w.fd);
		unlink(tmp);
	}
done:
	block_free(b);
	buf_free(&ix);
	buf_free(&w.z);
	free(local);
	ZSTD_freeCCtx(w.cctx);
	return rc;
}

/*
 * A read fault on a file mapping also maps the neighbouring pages already in
 * the page cache, in an aligned window of fault_around_bytes (64 KiB unless
 * an administrator changed it): releasing only a frame's own pages left most
 * of a block mapped after a merge over it.
 */
#define FAULT_AROUND ((uintptr_t)64 << 10)

/*
 * Drops this process's page-table entries around [p, p + len) of a block's
 * read-only shared mapping (the whole fault-around windows it touched).
 * Safe while other threads read the same pages: the file never changes, so
 * a later access faults the same bytes back in from the page cache.
 * Advisory: a failure only costs memory.
 */
static void release_pages(const struct block *b, const uint8_t *p, size_t len)
{
	uintptr_t start = (uintptr_t)b->map, end = start + b->map_len;
	uintptr_t lo = (uintptr_t)p & ~(FAULT_AROUND - 1);
	uintptr_t hi = ((uintptr_t)p + len + FAULT_AROUND - 1) & ~(FAULT_AROUND - 1);

	if (lo < start)
		lo = start;
	if (hi > end)
		hi = end;
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int block_open(const char *path, uint32_t n_stacks, struct block **out, struct kiln_error *err)
{
	struct block *b = calloc(1, sizeof(*b));
	struct stat st;
	int fd = -1, rc;

	(void)n_stacks;
	*out = NULL;
	if (!b)
		return kiln_error_set(err, ENOMEM, "out of memory opening block %s", path);
	atomic_store(&b->refs, 1);
	b->path = strdup(path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		rc = kiln_error_set(err, errno, "cannot open block %s: %s", path, strerror(errno));
		goto fail;
	}
	if (st.st_size < 8 + FOOTER_LEN) {
		rc = kiln_error_set(err, EBADMSG, "block %s: too short (%lld bytes)", path,
				    (long long)st.st_size);
		goto fail;
	}
	b->map_len = (size_t)st.st_size;
	b->file_size = (uint64_t)st.st_size;
	void *m = mmap(NULL, b->map_len, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = kiln_error_set(err, errno, "cannot map block %s: %s", path, strerror(errno));
		goto fail;
	}
	b->map = m;
	close(fd);
	fd = -1;
	const uint8_t *foot = b->map + b->map_len - FOOTER_LEN;
	uint64_t ix_off = get_u64le(foot);
	uint32_t ix_len = get_u32le(foot + 8), ix_sum = get_u32le(foot + 12);
	if (memcmp(b->map, BLOCK_MAGIC, 8) || memcmp(foot + 16, BLOCK_END, 8) || ix_off < 8 ||
	    ix_off > b->map_len - FOOTER_LEN || ix_len != b->map_len - FOOTER_LEN - ix_off ||
	    store_checksum(b->map + ix_off, ix_len) != ix_sum) {
		rc = kiln_error_set(err, EBADMSG, "block %s: bad magic, footer or index checksum",
				    path);
		goto fail;
	}
	struct rd r = {b->map + ix_off, b->map + ix_off + ix_len, false};
	if (rd_uvarint(&r) != BLOCK_VERSION) {
		rc = kiln_error_set(err, EBADMSG, "block %s: unknown version", path);
		goto fail;
	}
	b->seq = rd_uvarint(&r);
	b->cut_seg = rd_uvarint(&r);
	b->min_ts = rd_svarint(&r);
	b->max_ts = rd_svarint(&r);
	b->n_rows = rd_uvarint(&r);
	b->n_sources = rd_below(&r, 1 << 16);
	b->sources = calloc(b->n_sources + 1, sizeof(*b->sources));
	for (size_t i = 0; b->sources && i < b->n_sources; i++)
		b->sources[i] = rd_uvarint(&r);
	b->n_series = rd_below(&r, ix_len / 4 + 1);
	b->series = calloc(b->n_series + 1, sizeof(*b->series));
	if (!b->sources || !b->series) {
		rc = kiln_error_set(err, ENOMEM, "out of memory opening block %s", path);
		goto fail;
	}
	for (size_t i = 0; i < b->n_series && !r.bad; i++) {
		struct block_series *bs = &b->series[i];

		bs->id = (uint32_t)rd_below(&r, UINT32_MAX);
		bs->min_ts = rd_svarint(&r);
		bs->max_ts = bs->min_ts + (int64_t)rd_below(&r, INT64_MAX);
		bs->n_profiles = rd_below(&r, 1u << 31);
		bs->n_rows = rd_below(&r, 1u << 31);
		for (int f = 0; f < 3; f++) {
			bs->off[f] = rd_uvarint(&r);
			bs->len[f] = rd_uvarint(&r);
			const uint8_t *s = rd_bytes(&r, 4);
			bs->sum[f] = s ? get_u32le(s) : 0;
			if (bs->off[f] < 8 || bs->off[f] > ix_off ||
			    bs->len[f] > ix_off - bs->off[f])
				r.bad = true;
		}
		if (i && bs->id <= b->series[i - 1].id)
			r.bad = true;
		if (bs->min_ts < b->min_ts || bs->max_ts > b->max_ts)
			r.bad = true;
	}
	if (r.bad || r.p != r.end || b->min_ts > b->max_ts) {
		rc = kiln_error_set(err, EBADMSG, "block %s: corrupt index", path);
		goto fail;
	}
	release_pages(b, b->map, 8);
	release_pages(b, b->map + ix_off, ix_len + FOOTER_LEN);
	*out = b;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	block_free(b);
	return rc;
}

void block_ref(struct block *b)
{
	atomic_fetch_add(&b->refs, 1);
}

void block_unref(struct block *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		block_free(b);
}

const struct block_series *block_find(const struct block *b, uint32_t id)
{
	size_t lo = 0, hi = b->n_series;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (b->series[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b->n_series && b->series[lo].id == id ? &b->series[lo] : NULL;
}

/* Decompresses frame f of bs into out (reset first); max bounds the size. */
static int read_frame(const struct block *b, const struct block_series *bs, int f, size_t max,
		      struct buf *out, struct kiln_error *err)
{
	const uint8_t *src = b->map + bs->off[f];
	unsigned long long size;
	size_t n;

	buf_reset(out);
	if (store_checksum(src, bs->len[f]) != bs->sum[f])
		return kiln_error_set(err, EBADMSG,
				      "block %s: series %u: frame %d checksum mismatch", b->path,
				      bs->id, f);
	size = ZSTD_getFrameContentSize(src, bs->len[f]);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > max)
		return kiln_error_set(err, EBADMSG, "block %s: series %u: frame %d has a bad size",
				      b->path, bs->id, f);
	if (buf_reserve(out, (size_t)size + 1))
		return kiln_error_set(err, ENOMEM, "out of memory reading block %s", b->path);
	n = ZSTD_decompress(out->data, (size_t)size + 1, src, bs->len[f]);
	release_pages(b, src, bs->len[f]);
	if (ZSTD_isError(n) || n != size)
		return kiln_error_set(err, EBADMSG, "block %s: series %u: frame %d is corrupt",
				      b->path, bs->id, f);
	out->len = n;
	return 0;
}

static int corrupt(const struct block *b, const struct block_series *bs, const char *what,
		   struct kiln_error *err)
{
	return kiln_error_set(err, EBADMSG, "block %s: series %u: corrupt %s", b->path, bs->id,
			      what);
}

int block_read_summary(const struct block *b, const struct block_series *bs, int64_t **ts,
		       int64_t **total, struct kiln_error *err)
{
	struct buf raw = {0};
	int rc;

	*ts = *total = NULL;
	rc = read_frame(b, bs, F_SUMMARY, bs->n_profiles * 30 + 16, &raw, err);
	if (rc)
		goto out;
	struct rd r = {raw.data, raw.data + raw.len, false};
	uint64_t np = rd_uvarint(&r);
	int64_t t = bs->min_ts;
	if (np != bs->n_profiles) {
		rc = corrupt(b, bs, "summary", err);
		goto out;
	}
	*ts = malloc((np + 1) * sizeof(int64_t));
	*total = malloc((np + 1) * sizeof(int64_t));
	if (!*ts || !*total) {
		rc = kiln_error_set(err, ENOMEM, "out of memory reading %s", b->path);
		goto out;
	}
	for (uint64_t i = 0; i < np; i++) {
		t += (int64_t)rd_below(&r, (uint64_t)(bs->max_ts - t) + 1);
		rd_uvarint(&r);
		(*ts)[i] = t;
		(*total)[i] = rd_svarint(&r);
	}
	if (r.bad)
		rc = corrupt(b, bs, "summary", err);
out:
	if (rc) {
		free(*ts);
		free(*total);
		*ts = *total = NULL;
	}
	buf_free(&raw);
	return rc;
}

/* Reads the dictionary (and sums when sums != NULL) from the rollup frame. */
static int read_rollup(const struct block *b, const struct block_series *bs, uint32_t n_stacks,
		       uint32_t **dict, int64_t **sums, size_t *n, struct kiln_error *err)
{
	struct buf raw = {0};
	int rc;

	*dict = NULL;
	if (sums)
		*sums = NULL;
	rc = read_frame(b, bs, F_ROLLUP, bs->n_rows * 20 + 16, &raw, err);
	if (rc)
		goto out;
	struct rd r = {raw.data, raw.data + raw.len, false};
	uint64_t nd = rd_below(&r, bs->n_rows + 1);
	uint64_t st = 0;
	*dict = malloc((nd + 1) * sizeof(uint32_t));
	if (sums)
		*sums = malloc((nd + 1) * sizeof(int64_t));
	if (!*dict || (sums && !*sums)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory reading %s", b->path);
		goto out;
	}
	for (uint64_t i = 0; i < nd; i++) {
		uint64_t d = rd_uvarint(&r);

		if (i && d == 0)
			r.bad = true;
		st += d;
		if (st >= n_stacks)
			r.bad = true;
		(*dict)[i] = (uint32_t)st;
	}
	for (uint64_t i = 0; sums && i < nd; i++)
		(*sums)[i] = rd_svarint(&r);
	*n = nd;
	if (r.bad)
		rc = corrupt(b, bs, "rollup", err);
out:
	if (rc) {
		free(*dict);
		*dict = NULL;
		if (sums) {
			free(*sums);
			*sums = NULL;
		}
	}
	buf_free(&raw);
	return rc;
}

int block_read_rollup(const struct block *b, const struct block_series *bs, uint32_t n_stacks,
		      uint32_t **stacks, int64_t **sums, size_t *n, struct kiln_error *err)
{
	return read_rollup(b, bs, n_stacks, stacks, sums, n, err);
}

int block_read_rows(const struct block *b, const struct block_series *bs, uint32_t n_stacks,
		    struct series_rows *out, struct kiln_error *err)
{
	struct buf sraw = {0}, rraw = {0};
	uint32_t *dict = NULL, *stk = NULL;
	int64_t *val = NULL;
	size_t nd = 0, cap = 0;
	int rc;

	rc = read_rollup(b, bs, n_stacks, &dict, NULL, &nd, err);
	rc = rc ?: read_frame(b, bs, F_SUMMARY, bs->n_profiles * 30 + 16, &sraw, err);
	rc = rc ?: read_frame(b, bs, F_ROWS, bs->n_rows * 20 + 16, &rraw, err);
	if (rc)
		goto out;
	struct rd s = rd_of(sraw.data, sraw.len);
	struct rd r = {rraw.data, rraw.data + rraw.len, false};
	uint64_t np = rd_uvarint(&s), seen = 0;
	int64_t t = bs->min_ts;
	if (np != bs->n_profiles) {
		rc = corrupt(b, bs, "summary", err);
		goto out;
	}
	for (uint64_t i = 0; i < np && !s.bad && !r.bad; i++) {
		uint64_t n;
		uint32_t last = 0;

		t += (int64_t)rd_below(&s, (uint64_t)(bs->max_ts - t) + 1);
		n = rd_below(&s, bs->n_rows - seen + 1);
		rd_svarint(&s);
		seen += n;
		if (n > cap) {
			cap = n;
			uint32_t *a = realloc(stk, cap * sizeof(*a));
			if (a)
				stk = a;
			int64_t *v = realloc(val, cap * sizeof(*v));
			if (v)
				val = v;
			if (!a || !v) {
				rc = kiln_error_set(err, ENOMEM, "out of memory reading %s",
						    b->path);
				goto out;
			}
		}
		for (uint64_t j = 0; j < n; j++) {
			last += (uint32_t)rd_below(&r, nd);
			if (last >= nd)
				r.bad = true;
			stk[j] = r.bad ? 0 : dict[last];
			val[j] = rd_svarint(&r);
		}
		if (s.bad || r.bad)
			break;
		rc = series_rows_add_profile(out, t, stk, val, n);
		if (rc) {
			kiln_error_set(err, ENOMEM, "out of memory reading %s", b->path);
			goto out;
		}
	}
	if (s.bad || r.bad || seen != bs->n_rows)
		rc = corrupt(b, bs, "rows", err);
out:
	buf_free(&sraw);
	buf_free(&rraw);
	free(dict);
	free(stk);
	free(val);
	return rc;
}
