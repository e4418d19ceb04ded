/*
 * wal.c — durability: the metastore log (DIR/meta.log) and the write-ahead
 * log segments (DIR/wal/SEGMENT.log), both sequences of framed records
 * (u32 length, u32 checksum, payload).
 *
 * Group commit. A writer appends its record to wal.pending and waits. The
 * first waiter that finds no commit in flight becomes the leader: it takes
 * every pending record (and every pending metastore record, taken *after*
 * the WAL records so that each of them only refers to metadata in this or an
 * earlier batch), writes both, fsyncs meta.log then the segment, and wakes
 * the whole batch with one result. So N concurrent writers share one fsync.
 * Only wal.mu is involved: readers never wait for an fsync.
 *
 * Failure (a full disk): the files are truncated back to their last durable
 * length, the metastore records are put back at the front of the pending
 * buffer (they are already in the in-memory metastore and must reach the log
 * before anything that refers to them), and every writer of the batch gets
 * -ENOSPC with a message. Nothing of a failed batch is applied to the head.
 *
 * Replay: meta.log first, then each segment newer than the checkpoint, in
 * order. The first record that is short, fails its checksum or refers to an
 * unknown id ends the log: the file is truncated there (with a log line) and
 * later segments are removed. Such a record was never acknowledged, because
 * acknowledgement happens only after the fsync that covers the whole record.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/clock.h"
#include "common/log.h"
#include "store/internal.h"

static void seg_path(const struct wal *w, uint64_t seg, char *out, size_t n)
{
	snprintf(out, n, "%s/%016" PRIx64 ".log", w->dir, seg);
}

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const uint8_t *c = p;

	while (n) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int open_segment(struct wal *w, uint64_t seg, int *fd, struct kiln_error *err)
{
	char path[4096];
	int dfd;

	seg_path(w, seg, path, sizeof(path));
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (*fd < 0)
		return kiln_error_set(err, errno, "cannot create WAL segment %s: %s", path,
				      strerror(errno));
	dfd = open(w->dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int wal_open(struct store *s, struct kiln_error *err)
{
	struct wal *w = &s->wal;
	char path[4096];

	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->fd = w->meta_fd = -1;
	w->waiters_tail = &w->waiters;
	if (asprintf(&w->dir, "%s/wal", s->dir) < 0) {
		w->dir = NULL;
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	if (mkdir(w->dir, STORE_DIR_MODE) && errno != EEXIST)
		return kiln_error_set(err, errno, "cannot create %s: %s", w->dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/meta.log", s->dir);
	w->meta_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (w->meta_fd < 0)
		return kiln_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	return 0;
}

void wal_close(struct wal *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->meta_fd >= 0)
		close(w->meta_fd);
	w->fd = w->meta_fd = -1;
	buf_free(&w->pending);
	free(w->dir);
	w->dir = NULL;
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cond);
}

/* Writes and fsyncs one batch; on failure truncates what failed back to its
 * last durable length. *meta_done tells whether the metastore records made
 * it (they are written first). Lengths are advanced here. */
static int write_batch(struct store *s, const struct buf *meta, const struct buf *recs,
		       bool *meta_done, struct kiln_error *err)
{
	struct wal *w = &s->wal;
	const char *what = "metastore log";
	uint64_t t0 = (uint64_t)mono_ns();
	int rc = 0;

	*meta_done = false;
	if (meta->len) {
		rc = pwrite_all(w->meta_fd, meta->data, meta->len, w->meta_len);
		if (!rc && fdatasync(w->meta_fd))
			rc = -errno;
		if (rc) {
			if (ftruncate(w->meta_fd, (off_t)w->meta_len))
				log_warn("store: cannot truncate the metastore log: %s",
					 strerror(errno));
			goto fail;
		}
		w->meta_len += meta->len;
		w->fsyncs++;
	}
	*meta_done = true;
	if (recs->len) {
		what = "WAL segment";
		rc = pwrite_all(w->fd, recs->data, recs->len, w->seg_len);
		if (!rc && fdatasync(w->fd))
			rc = -errno;
		if (rc) {
			if (ftruncate(w->fd, (off_t)w->seg_len))
				log_warn("store: cannot truncate the WAL segment: %s",
					 strerror(errno));
			goto fail;
		}
		w->seg_len += recs->len;
		w->fsyncs++;
	}
	w->fsync_ns += (uint64_t)mono_ns() - t0;
	w->bytes += meta->len + recs->len;
	return 0;
fail:
	if (rc == -ENOSPC || rc == -EDQUOT)
		return kiln_error_set(err, ENOSPC,
				      "disk full: cannot append to the %s in %s (%s); writes are "
				      "refused until space is freed, reads keep working",
				      what, s->dir, strerror(ENOSPC));
	return kiln_error_set(err, -rc, "cannot write the %s in %s: %s", what, s->dir,
			      strerror(-rc));
}

int wal_commit(struct store *s, const void *rec, size_t len, struct kiln_error *err)
{
	struct wal *w = &s->wal;
	struct wal_waiter me = {0};
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = len ? record_append(&w->pending, rec, len) : 0;
	if (rc) {
		pthread_mutex_unlock(&w->mu);
		return kiln_error_set(err, -rc, "cannot queue a WAL record of %zu bytes", len);
	}
	/* Group commit: see the top of the file. */
	pthread_cond_init(&me.cond, NULL);
	me.seq = ++w->enq_seq;
	*w->waiters_tail = &me;
	w->waiters_tail = &me.next;
	while (!me.done) {
		if (w->leader) {
			/* Woken when our batch is done, or to lead the next one. */
			pthread_cond_wait(&me.cond, &w->mu);
			continue;
		}
		/* Lead one batch: everyone queued so far. */
		struct buf recs = w->pending, meta = {0};
		struct wal_waiter *batch = w->waiters;
		struct kiln_error berr = {0};

		memset(&w->pending, 0, sizeof(w->pending));
		w->waiters = NULL;
		w->waiters_tail = &w->waiters;
		w->leader = true;
		pthread_mutex_unlock(&w->mu);

		pthread_mutex_lock(&s->meta.mu);
		meta = s->meta.pending;
		memset(&s->meta.pending, 0, sizeof(s->meta.pending));
		pthread_mutex_unlock(&s->meta.mu);

		/* Only the leader touches the files and lengths (rotation waits
		 * for !leader), so no lock is held across the fsync. */
		bool meta_done;
		rc = write_batch(s, &meta, &recs, &meta_done, &berr);
		if (!meta_done && meta.len) {
			/* Put unwritten metastore records back in front. */
			pthread_mutex_lock(&s->meta.mu);
			if (!buf_append(&meta, s->meta.pending.data, s->meta.pending.len)) {
				buf_free(&s->meta.pending);
				s->meta.pending = meta;
				memset(&meta, 0, sizeof(meta));
			}
			pthread_mutex_unlock(&s->meta.mu);
		}
		buf_free(&meta);
		buf_free(&recs);
		pthread_mutex_lock(&w->mu);
		for (struct wal_waiter *x = batch, *next; x; x = next) {
			next = x->next;
			x->rc = rc;
			if (rc)
				x->err = berr;
			else
				w->applying++;
			x->done = true;
			if (x != &me)
				pthread_cond_signal(&x->cond);
		}
		w->leader = false;
		if (w->waiters) /* the first queued writer leads the next batch */
			pthread_cond_signal(&w->waiters->cond);
		pthread_cond_broadcast(&w->cond); /* wal_rotate */
	}
	pthread_mutex_unlock(&w->mu);
	pthread_cond_destroy(&me.cond);
	if (me.rc && err && !err->code)
		*err = me.err;
	return me.rc;
}

void wal_applied(struct wal *w)
{
	pthread_mutex_lock(&w->mu);
	if (--w->applying == 0)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

int wal_rotate(struct store *s, void (*freeze)(struct store *s), struct kiln_error *err)
{
	struct wal *w = &s->wal;
	int fd, rc;

	pthread_mutex_lock(&w->mu);
	while (w->leader || w->applying > 0)
		pthread_cond_wait(&w->cond, &w->mu);
	rc = open_segment(w, w->seg + 1, &fd, err);
	if (!rc) {
		freeze(s);
		close(w->fd);
		w->fd = fd;
		w->seg++;
		w->seg_len = 0;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

/* Segment numbers in the WAL directory, sorted. */
static int list_segments(struct wal *w, uint64_t **out, size_t *n)
{
	DIR *d = opendir(w->dir);
	struct dirent *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char *end;
		uint64_t seg = strtoull(e->d_name, &end, 16);

		if (end == e->d_name || strcmp(end, ".log") != 0)
			continue;
		if (GROW_ARRAY(*out, cap, *n + 1, 16)) {
			closedir(d);
			return -ENOMEM;
		}
		(*out)[(*n)++] = seg;
	}
	closedir(d);
	for (size_t i = 1; i < *n; i++)
		for (size_t j = i; j > 0 && (*out)[j - 1] > (*out)[j]; j--) {
			uint64_t t = (*out)[j];
			(*out)[j] = (*out)[j - 1];
			(*out)[j - 1] = t;
		}
	return 0;
}

void wal_drop_upto(struct wal *w, uint64_t seg)
{
	uint64_t *segs;
	size_t n;
	char path[4096];

	if (list_segments(w, &segs, &n))
		return;
	for (size_t i = 0; i < n; i++)
		if (segs[i] <= seg && segs[i] != w->seg) {
			seg_path(w, segs[i], path, sizeof(path));
			unlink(path);
		}
	free(segs);
}

/* Replays a file of records with apply(); returns the length of the valid
 * prefix (the file is truncated to it if it was longer). */
static int replay_file(struct store *s, const char *path, int fd,
		       int (*apply)(struct store *s, const uint8_t *p, size_t len), uint64_t *valid,
		       bool *torn, struct kiln_error *err)
{
	struct buf b = {0};
	size_t off = 0;
	const char *why = NULL;
	int rc = buf_read_file(&b, path, 0);

	*torn = false;
	if (rc && rc != -ENOENT)
		return kiln_error_set(err, -rc, "cannot read %s: %s", path, strerror(-rc));
	while (off < b.len) {
		uint32_t len, sum;

		if (b.len - off < RECORD_HEADER) {
			why = "torn record header";
			break;
		}
		len = get_u32le(b.data + off);
		sum = get_u32le(b.data + off + 4);
		if (len > RECORD_MAX || len > b.len - off - RECORD_HEADER) {
			why = "torn record";
			break;
		}
		if (store_checksum(b.data + off + RECORD_HEADER, len) != sum) {
			why = "checksum mismatch";
			break;
		}
		rc = apply(s, b.data + off + RECORD_HEADER, len);
		if (rc == -ENOMEM) {
			buf_free(&b);
			return kiln_error_set(err, ENOMEM, "out of memory replaying %s", path);
		}
		if (rc) {
			why = "inconsistent record";
			break;
		}
		off += RECORD_HEADER + len;
	}
	if (why) {
		log_warn("store: %s: %s at offset %zu; truncating the last %zu bytes (they were "
			 "never acknowledged)",
			 path, why, off, b.len - off);
		if (ftruncate(fd, (off_t)off) || fsync(fd))
			log_warn("store: cannot truncate %s: %s", path, strerror(errno));
		*torn = true;
	}
	*valid = off;
	buf_free(&b);
	return 0;
}

int wal_replay(struct store *s, wal_apply_fn apply, struct kiln_error *err)
{
	struct wal *w = &s->wal;
	char path[4096];
	uint64_t *segs = NULL, last = s->checkpoint_seg;
	size_t n = 0;
	bool torn = false, stop = false;
	int rc;

	snprintf(path, sizeof(path), "%s/meta.log", s->dir);
	rc = replay_file(s, path, w->meta_fd, meta_replay_record, &w->meta_len, &torn, err);
	if (rc)
		return rc;
	rc = list_segments(w, &segs, &n);
	if (rc)
		return kiln_error_set(err, -rc, "cannot list %s: %s", w->dir, strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		seg_path(w, segs[i], path, sizeof(path));
		if (segs[i] <= s->checkpoint_seg || stop) {
			if (stop)
				log_warn("store: %s: follows a truncated segment; removing it",
					 path);
			unlink(path);
			continue;
		}
		int fd = open(path, O_RDWR | O_CLOEXEC);
		uint64_t valid;

		if (fd < 0) {
			rc =
			    kiln_error_set(err, errno, "cannot open %s: %s", path, strerror(errno));
			break;
		}
		pthread_rwlock_wrlock(&s->head_lock);
		rc = replay_file(s, path, fd, apply, &valid, &torn, err);
		pthread_rwlock_unlock(&s->head_lock);
		close(fd);
		if (rc)
			break;
		stop = torn;
		last = segs[i];
	}
	free(segs);
	if (rc)
		return rc;
	/* New writes go to a fresh segment. */
	w->seg = last + 1;
	w->seg_len = 0;
	return open_segment(w, w->seg, &w->fd, err);
}
