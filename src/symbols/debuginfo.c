/*
 * debuginfo.c — the content-addressed debuginfo store and debuginfod fetcher.
 *
 * Layout: <storage>/debuginfo/<build-id>/debuginfo, build IDs lowercase hex
 * (validated before they become a path). Writes go to a temporary file in
 * the same directory, are fsync'd and renamed, so a crash leaves either the
 * whole file or none.
 *
 * debuginfod fetching runs on one thread owned by the store: lookups only
 * enqueue a build ID and return -EAGAIN, so nothing on the ingest or query
 * path waits for the network. Each build ID has one state in `state`:
 * pending (queued or being fetched) or negative until a deadline (every
 * upstream said no or failed); a success simply becomes a stored file.
 * Every request has a deadline (CURLOPT_TIMEOUT) and its progress callback
 * aborts it as soon as the store is being freed, so that a slow upstream
 * never holds up the server's shutdown.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/htab.h"
#include "common/log.h"
#include "symbols/debuginfo.h"
#include "symbols/symbols.h"

enum { ST_PENDING = 1, ST_NEGATIVE = 2 };

struct fetch {
	struct fetch *next;
	char build_id[SYMBOLS_BUILD_ID_MAX + 1];
};

struct debuginfo_store {
	char *dir;	   /* <storage>/debuginfo, or NULL */
	char **local_dirs; /* realpath(3) of each existing local directory */
	size_t nlocal_dirs;
	struct own_file {
		char build_id[SYMBOLS_BUILD_ID_MAX + 1];
		char *path;
	} * own;
	size_t nown;
	char **upstreams;
	size_t nupstreams;
	int timeout;
	size_t max_upload;
	int negative_ttl;
	void (*on_fetched)(void *arg, const char *build_id);
	void *on_fetched_arg;
	int (*before_adopt)(void *arg, const char *build_id, struct kiln_error *e);

	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct htab *state; /* build ID -> (deadline << 2) | ST_* */
	struct fetch *queue;
	bool stop, thread_started;
	atomic_bool abort_fetch; /* set by debuginfo_store_free: cut requests short */
	pthread_t thread;
};

static void lower(char *dst, const char *src, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n && src[i]; i++)
		dst[i] = (char)(src[i] >= 'A' && src[i] <= 'F' ? src[i] - 'A' + 'a' : src[i]);
	dst[i] = '\0';
}

static int mkdir_p(const char *path)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void stored_path(const struct debuginfo_store *d, const char *id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s/debuginfo", d->dir, id);
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Moves the file at tmp into the store as id's debuginfo after checking that
 * it is an ELF file with that build ID. Unlinks tmp on failure. */
static int adopt_file(struct debuginfo_store *d, const char *id, const char *tmp,
		      struct kiln_error *e)
{
	struct elfinfo info;
	char final[4096];
	int rc;

	rc = elfinfo_read_file(tmp, &info, e);
	if (rc < 0) {
		rc = kiln_error_set(e, EINVAL, "debuginfo for %s is not an ELF file", id);
		goto fail;
	}
	if (strcasecmp(info.build_id, id) != 0) {
		rc = kiln_error_set(e, EINVAL,
				    "debuginfo build ID mismatch: file has %s, expected %s",
				    info.build_id[0] ? info.build_id : "none", id);
		goto fail;
	}
	if (d->before_adopt && (rc = d->before_adopt(d->on_fetched_arg, id, e)) < 0)
		goto fail;
	stored_path(d, id, final, sizeof(final));
	if (rename(tmp, final) < 0) {
		rc = kiln_error_set(e, errno, "rename %s: %s", final, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	unlink(tmp);
	return rc;
}

static int make_tmp(struct debuginfo_store *d, const char *id, char *tmp, size_t n,
		    struct kiln_error *e)
{
	char dir[4096];
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s/%s", d->dir, id);
	rc = mkdir_p(dir);
	if (rc < 0)
		return kiln_error_set(e, -rc, "mkdir %s: %s", dir, strerror(-rc));
	if (snprintf(tmp, n, "%s/.tmp-XXXXXX", dir) >= (int)n)
		return kiln_error_set(e, ENAMETOOLONG, "%s: path too long", dir);
	fd = mkstemp(tmp);
	if (fd < 0)
		return kiln_error_set(e, errno, "create %s: %s", tmp, strerror(errno));
	return fd;
}

int debuginfo_store_put(struct debuginfo_store *d, const char *build_id, const void *data,
			size_t size, struct kiln_error *e)
{
	char id[SYMBOLS_BUILD_ID_MAX + 1], tmp[4096];
	struct elfinfo info;
	int fd, rc;

	if (!d->dir)
		return kiln_error_set(e, ENOTSUP, "no storage path for debuginfo");
	if (!symbols_build_id_valid(build_id))
		return kiln_error_set(e, EINVAL, "invalid build ID \"%.80s\"",
				      build_id ? build_id : "");
	lower(id, build_id, sizeof(id));
	if (size > d->max_upload)
		return kiln_error_set(e, EFBIG, "debuginfo for %s is %zu bytes, limit %zu", id,
				      size, d->max_upload);
	/* Check before touching the disk: most bad uploads are cheap to spot. */
	if (elfinfo_read_mem(data, size, &info, NULL) < 0)
		return kiln_error_set(e, EINVAL, "debuginfo for %s is not an ELF file", id);
	if (strcasecmp(info.build_id, id) != 0)
		return kiln_error_set(e, EINVAL,
				      "debuginfo build ID mismatch: file has %s, expected %s",
				      info.build_id[0] ? info.build_id : "none", id);
	fd = make_tmp(d, id, tmp, sizeof(tmp), e);
	if (fd < 0)
		return fd;
	rc = fd_write_all(fd, data, size);
	if (rc < 0) {
		rc = kiln_error_set(e, -rc, "write %s: %s", tmp, strerror(-rc));
		close(fd);
		unlink(tmp);
		return rc;
	}
	if (fsync(fd) < 0) {
		rc = kiln_error_set(e, errno, "fsync %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return rc;
	}
	close(fd);
	rc = adopt_file(d, id, tmp, e);
	if (rc == 0) {
		pthread_mutex_lock(&d->lock);
		htab_put(d->state, id, strlen(id), 0);
		pthread_mutex_unlock(&d->lock);
	}
	return rc;
}

bool debuginfo_store_has(struct debuginfo_store *d, const char *build_id)
{
	char id[SYMBOLS_BUILD_ID_MAX + 1], path[4096];

	if (!d->dir || !symbols_build_id_valid(build_id))
		return false;
	lower(id, build_id, sizeof(id));
	stored_path(d, id, path, sizeof(path));
	return is_file(path);
}

int debuginfo_store_delete(struct debuginfo_store *d, const char *build_id, struct kiln_error *e)
{
	char id[SYMBOLS_BUILD_ID_MAX + 1], path[4096];

	if (!d->dir)
		return kiln_error_set(e, ENOTSUP, "no storage path for debuginfo");
	if (!symbols_build_id_valid(build_id))
		return kiln_error_set(e, EINVAL, "invalid build ID \"%.80s\"",
				      build_id ? build_id : "");
	lower(id, build_id, sizeof(id));
	stored_path(d, id, path, sizeof(path));
	if (unlink(path) < 0)
		return errno == ENOENT
			   ? kiln_error_set(e, ENOENT, "no debuginfo stored for %s", id)
			   : kiln_error_set(e, errno, "unlink %s: %s", path, strerror(errno));
	*strrchr(path, '/') = '\0';
	rmdir(path); /* best effort: an upload in progress may hold a file there */
	pthread_mutex_lock(&d->lock);
	htab_put(d->state, id, strlen(id), 0);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

size_t debuginfo_store_max_upload(const struct debuginfo_store *d)
{
	return d->max_upload;
}

int debuginfo_store_list(struct debuginfo_store *d,
			 void (*fn)(void *arg, const char *build_id, uint64_t size, time_t mtime),
			 void *arg)
{
	DIR *dir;
	struct dirent *de;

	if (!d->dir)
		return 0;
	dir = opendir(d->dir);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(dir)) != NULL) {
		char path[4096];
		struct stat st;

		if (!symbols_build_id_valid(de->d_name))
			continue;
		stored_path(d, de->d_name, path, sizeof(path));
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			fn(arg, de->d_name, (uint64_t)st.st_size, st.st_mtime);
	}
	closedir(dir);
	return 0;
}

/* --- debuginfod ------------------------------------------------------------ */

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	int fd = *(int *)arg;
	size_t n = size * nmemb, done = 0;

	while (done < n) {
		ssize_t w = write(fd, ptr + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return 0; /* aborts the transfer */
		done += (size_t)w;
	}
	return n;
}

/* CURLOPT_XFERINFOFUNCTION: non-zero aborts the transfer (the store is
 * being freed). */
static int fetch_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			  curl_off_t ulnow)
{
	const struct debuginfo_store *d = arg;

	return atomic_load(&d->abort_fetch) ? 1 : 0;
}

/* Fetches one build ID from the upstreams in order; 0 when stored. */
static int fetch_one(struct debuginfo_store *d, const char *id)
{
	for (size_t i = 0; i < d->nupstreams && !atomic_load(&d->abort_fetch); i++) {
		char url[4096], tmp[4096];
		struct kiln_error e = {0};
		long status = 0;
		CURLcode cc;
		CURL *curl;
		int fd;

		snprintf(url, sizeof(url), "%s%sbuildid/%s/debuginfo", d->upstreams[i],
			 d->upstreams[i][strlen(d->upstreams[i]) - 1] == '/' ? "" : "/", id);
		fd = make_tmp(d, id, tmp, sizeof(tmp), &e);
		if (fd < 0) {
			log_warn("debuginfod: %s", e.msg);
			return fd;
		}
		curl = curl_easy_init();
		if (!curl) {
			close(fd);
			unlink(tmp);
			return -ENOMEM;
		}
		curl_easy_setopt(curl, CURLOPT_URL, url);
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &fd);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)d->timeout);
		curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT,
				 (long)(d->timeout < 10 ? d->timeout : 10));
		curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, fetch_progress);
		curl_easy_setopt(curl, CURLOPT_XFERINFODATA, d);
		curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)d->max_upload);
		curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
		cc = curl_easy_perform(curl);
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(curl);
		close(fd);
		if (cc != CURLE_OK || status != 200) {
			log_debug("debuginfod: %s: %s (HTTP %ld)", url, curl_easy_strerror(cc),
				  status);
			unlink(tmp);
			continue;
		}
		if (adopt_file(d, id, tmp, &e) < 0) {
			log_warn("debuginfod: %s: %s", url, e.msg);
			continue;
		}
		log_info("debuginfod: fetched %s from %s", id, d->upstreams[i]);
		return 0;
	}
	return -ENOENT;
}

static void *fetch_thread(void *arg)
{
	struct debuginfo_store *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct fetch *f = d->queue;

		if (!f) {
			pthread_cond_wait(&d->wake, &d->lock);
			continue;
		}
		d->queue = f->next;
		pthread_mutex_unlock(&d->lock);
		int rc = fetch_one(d, f->build_id);
		if (rc == 0 && d->on_fetched)
			d->on_fetched(d->on_fetched_arg, f->build_id);
		pthread_mutex_lock(&d->lock);
		uint64_t v =
		    rc == 0 ? 0 : ((uint64_t)(time(NULL) + d->negative_ttl) << 2) | ST_NEGATIVE;
		htab_put(d->state, f->build_id, strlen(f->build_id), v);
		free(f);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Queues a fetch unless one is pending or a recent one failed. Returns
 * -EAGAIN (queued/pending) or -ENOENT (negative). */
static int request_fetch(struct debuginfo_store *d, const char *id)
{
	uint64_t v = 0;
	int rc = -EAGAIN;

	pthread_mutex_lock(&d->lock);
	if (htab_get(d->state, id, strlen(id), &v) && v) {
		if ((v & 3) == ST_PENDING)
			goto out;
		if ((time_t)(v >> 2) > time(NULL)) {
			rc = -ENOENT;
			goto out;
		}
	}
	struct fetch *f = calloc(1, sizeof(*f));
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(f->build_id, sizeof(f->build_id), "%s", id);
	/* Appended, so that fetches happen in the order they were asked. */
	struct fetch **tail = &d->queue;
	while (*tail)
		tail = &(*tail)->next;
	*tail = f;
	htab_put(d->state, id, strlen(id), ST_PENDING);
	pthread_cond_signal(&d->wake);
out:
	pthread_mutex_unlock(&d->lock);
	return rc;
}

/* Looks for id in the local directories: DIR/.build-id/xx/yyyy.debug, then
 * DIR/.build-id/xx/yyyy, each only if it resolves to a regular file inside
 * DIR and has build ID id. Copies the resolved path into out (PATH_MAX
 * bytes) and its facts into info; 0 or -ENOENT. */
static int find_local(const struct debuginfo_store *d, const char *id, char *out,
		      struct elfinfo *info)
{
	static const char *const suffixes[] = {".debug", ""};

	for (size_t i = 0; i < d->nlocal_dirs; i++) {
		for (size_t j = 0; j < 2; j++) {
			char path[PATH_MAX];
			struct kiln_error e = {0};
			int fd, rc;

			if (snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s%s", d->local_dirs[i],
				     id, id + 2, suffixes[j]) >= (int)sizeof(path))
				continue;
			fd = fd_open_under(d->local_dirs[i], path, out, &e);
			if (fd < 0) {
				/* (Asked again on every lookup: not a warning.) */
				if (fd != -ENOENT)
					log_debug("debuginfo: %s", e.msg);
				continue;
			}
			rc = elfinfo_read_fd(fd, path, info, &e);
			close(fd);
			if (rc == 0 && strcasecmp(info->build_id, id) == 0)
				return 0;
			log_debug("debuginfo: %s: %s", path,
				  rc < 0 ? e.msg : "build ID differs from its name; not used");
		}
	}
	return -ENOENT;
}

/* One of the operator's own files (debuginfo_config.own_files) with build
 * ID id: 0 with its path and facts, or -ENOENT. */
static int find_own(const struct debuginfo_store *d, const char *id, char *out, size_t outsz,
		    struct elfinfo *info)
{
	for (size_t i = 0; i < d->nown; i++) {
		if (strcasecmp(d->own[i].build_id, id) != 0)
			continue;
		if (elfinfo_read_file(d->own[i].path, info, NULL) != 0 ||
		    strcasecmp(info->build_id, id) != 0)
			return -ENOENT;
		snprintf(out, outsz, "%s", d->own[i].path);
		return 0;
	}
	return -ENOENT;
}

int debuginfo_store_find(struct debuginfo_store *d, const char *build_id, const char *path_hint,
			 char *out, size_t outsz)
{
	char id[SYMBOLS_BUILD_ID_MAX + 1], path[PATH_MAX];
	struct elfinfo info;
	bool have = false; /* path holds a binary of id, info its facts */
	int rc;

	if (!symbols_build_id_valid(build_id))
		return -EINVAL;
	lower(id, build_id, sizeof(id));
	if (d->dir) {
		stored_path(d, id, path, sizeof(path));
		if (is_file(path))
			goto found;
	}
	if (find_local(d, id, path, &info) == 0) {
		have = true;
	} else if (find_own(d, id, path, sizeof(path), &info) == 0) {
		have = true;
	} else if (path_hint && *path_hint && elfinfo_read_file(path_hint, &info, NULL) == 0 &&
		   strcasecmp(info.build_id, id) == 0) {
		have = true;
		snprintf(path, sizeof(path), "%s", path_hint);
	}
	/* A file with DWARF is as good as it gets. A binary with only
	 * .symtab names functions now, while the upstreams are asked for
	 * DWARF; a stripped one is used only after they said no. */
	if (have && info.has_debug_info)
		goto found;
	if (have && info.has_symtab) {
		if (d->nupstreams && d->dir)
			request_fetch(d, id);
		goto found;
	}
	if (d->nupstreams && d->dir) {
		rc = request_fetch(d, id);
		if (rc != -ENOENT || !have)
			return rc;
	}
	if (!have)
		return -ENOENT;
found:
	snprintf(out, outsz, "%s", path);
	return 0;
}

struct debuginfo_store *debuginfo_store_new(const struct debuginfo_config *c, struct kiln_error *e)
{
	struct debuginfo_store *d = calloc(1, sizeof(*d));
	char buf[4096];

	if (!d)
		goto nomem;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	d->timeout = c->http_timeout_seconds > 0 ? c->http_timeout_seconds : 30;
	d->max_upload = c->max_upload_bytes ? c->max_upload_bytes : ((size_t)1 << 30);
	d->negative_ttl = c->negative_ttl_seconds > 0 ? c->negative_ttl_seconds : 600;
	d->on_fetched = c->on_fetched;
	d->on_fetched_arg = c->on_fetched_arg;
	d->before_adopt = c->before_adopt;
	d->state = htab_new(64);
	if (!d->state)
		goto nomem;
	for (const char *const *l = c->local_dirs; l && *l; l++) {
		char real[PATH_MAX], **nl;

		if (!**l || !realpath(*l, real)) {
			log_debug("debuginfo: local directory %s: %s; skipped", *l,
				  **l ? strerror(errno) : "empty");
			continue;
		}
		nl = realloc(d->local_dirs, (d->nlocal_dirs + 1) * sizeof(*nl));
		if (!nl)
			goto nomem;
		d->local_dirs = nl;
		if (!(d->local_dirs[d->nlocal_dirs] = strdup(real)))
			goto nomem;
		d->nlocal_dirs++;
	}
	for (const char *const *f = c->own_files; f && *f; f++) {
		char real[PATH_MAX];
		struct elfinfo info;
		struct own_file *no;

		if (!realpath(*f, real) || elfinfo_read_file(real, &info, NULL) != 0 ||
		    !info.build_id[0])
			continue;
		no = realloc(d->own, (d->nown + 1) * sizeof(*no));
		if (!no)
			goto nomem;
		d->own = no;
		snprintf(d->own[d->nown].build_id, sizeof(d->own[d->nown].build_id), "%s",
			 info.build_id);
		if (!(d->own[d->nown].path = strdup(real)))
			goto nomem;
		d->nown++;
	}
	if (c->storage_path) {
		snprintf(buf, sizeof(buf), "%s/debuginfo", c->storage_path);
		int rc = mkdir_p(buf);
		if (rc < 0) {
			kiln_error_set(e, -rc, "mkdir %s: %s", buf, strerror(-rc));
			goto err;
		}
		d->dir = strdup(buf);
		if (!d->dir)
			goto nomem;
	}
	for (const char *const *u = c->upstreams; u && *u; u++) {
		if (!**u)
			continue;
		char **nu = realloc(d->upstreams, (d->nupstreams + 1) * sizeof(*nu));
		if (!nu)
			goto nomem;
		d->upstreams = nu;
		d->upstreams[d->nupstreams] = strdup(*u);
		if (!d->upstreams[d->nupstreams])
			goto nomem;
		d->nupstreams++;
	}
	if (d->nupstreams && d->dir) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		if (pthread_create(&d->thread, NULL, fetch_thread, d) != 0) {
			kiln_error_set(e, EAGAIN, "debuginfod: cannot start fetch thread");
			goto err;
		}
		d->thread_started = true;
	}
	return d;
nomem:
	kiln_error_set(e, ENOMEM, "debuginfo store: out of memory");
err:
	debuginfo_store_free(d);
	return NULL;
}

void debuginfo_store_free(struct debuginfo_store *d)
{
	if (!d)
		return;
	if (d->thread_started) {
		atomic_store(&d->abort_fetch, true);
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_signal(&d->wake);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	while (d->queue) {
		struct fetch *f = d->queue;

		d->queue = f->next;
		free(f);
	}
	for (size_t i = 0; i < d->nupstreams; i++)
		free(d->upstreams[i]);
	free(d->upstreams);
	htab_free(d->state);
	free(d->dir);
	for (size_t i = 0; i < d->nlocal_dirs; i++)
		free(d->local_dirs[i]);
	free(d->local_dirs);
	for (size_t i = 0; i < d->nown; i++)
		free(d->own[i].path);
	free(d->own);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
