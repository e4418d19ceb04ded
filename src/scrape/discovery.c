/*
 * discovery.c — file_sd_configs and http_sd_configs: scrape targets that
 * come from files and HTTP endpoints and change while the server runs,
 * with Prometheus's formats and semantics.
 *
 * A target group is a static_configs entry: {targets: [host:port...],
 * labels: {...}}; a file or an HTTP body holds a list of them, in YAML or
 * JSON (libyaml reads both). Each group gets a meta label naming where it
 * came from (__meta_filepath, __meta_url), which relabel_configs may use
 * and which is dropped afterwards with the other "__" labels.
 *
 * One thread polls every second: a file is re-read when its inode, size or
 * modification time changed, or its refresh interval passed (globs are
 * expanded again each time, so new files are found); a URL is fetched
 * every refresh interval (libcurl, bounded time and size, 200 and a JSON
 * body required). A source that fails to read or parse keeps its last good
 * groups (and the error is logged once per change), as Prometheus keeps
 * them. When the union of all groups changes, the config is rebuilt from
 * the loader (the config as written) plus the discovered groups appended
 * to each job's static_configs, and handed to scrape_manager_apply: units
 * that stay keep their state, exactly as on SIGHUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include <curl/curl.h>

#include "common/grow.h"
#include "common/clock.h"
#include "common/log.h"
#include "scrape/config_walk.h"

#define SD_MAX_BYTES	   (10u << 20) /* a target file or HTTP body */
#define SD_HTTP_TIMEOUT_MS 30000
#define SD_POLL_MS	   1000

/* ---- target groups ------------------------------------------------------- */

static void groups_free(struct static_config *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		scrape_static_config_release(&g[i]);
	free(g);
}

int scrape_target_groups_parse(const char *text, size_t len, const char *name,
			       struct static_config **out, size_t *n, struct kiln_error *err)
{
	struct walker w = {.name = name, .err = err};
	yaml_parser_t parser;
	struct static_config *g = NULL;
	yaml_node_t *root;
	size_t count = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!yaml_parser_initialize(&parser))
		return kiln_error_set(err, ENOMEM, "%s: out of memory", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &w.doc)) {
		rc = kiln_error_set(err, EINVAL, "%s:%zu:%zu: %s", name,
				    parser.problem_mark.line + 1, parser.problem_mark.column + 1,
				    parser.problem ? parser.problem : "not YAML or JSON");
		yaml_parser_delete(&parser);
		return rc;
	}
	yaml_parser_delete(&parser);
	root = yaml_document_get_root_node(&w.doc);
	if (!root || is_null(root))
		goto out; /* an empty file: no targets */
	if ((rc = want(&w, root, YAML_SEQUENCE_NODE, "target groups")))
		goto out;
	count = root->data.sequence.items.top - root->data.sequence.items.start;
	if (!(g = calloc(count + 1, sizeof(*g)))) {
		rc = kiln_error_set(err, ENOMEM, "%s: out of memory", name);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		yaml_node_t *item = node(&w, root->data.sequence.items.start[i]);

		if ((rc = scrape_walk_static(&w, item, &g[i]))) {
			count = i + 1;
			goto out;
		}
	}
out:
	yaml_document_delete(&w.doc);
	if (rc) {
		groups_free(g, count);
		return rc < 0 ? rc : -EINVAL;
	}
	*out = g;
	*n = count;
	return 0;
}

/* Sets the meta label on every group. */
static int groups_label(struct static_config *g, size_t n, const char *label, const char *value)
{
	for (size_t i = 0; i < n; i++)
		if (scrape_labels_set(&g[i].labels, label, value) < 0)
			return -ENOMEM;
	return 0;
}

static int group_copy(struct static_config *dst, const struct static_config *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->targets = calloc(src->n_targets + 1, sizeof(*dst->targets));
	if (!dst->targets)
		return -ENOMEM;
	for (size_t i = 0; i < src->n_targets; i++) {
		if (!(dst->targets[i] = strdup(src->targets[i])))
			return -ENOMEM;
		dst->n_targets++;
	}
	return scrape_labels_copy(&dst->labels, &src->labels);
}

/* ---- sources --------------------------------------------------------------- */

/* One file a file_sd pattern matched, or one http_sd URL, of one job. */
struct sd_source {
	char *job;
	char *key; /* the path or the URL */
	bool http;
	bool seen; /* matched by this round's globbing */
	int64_t refresh_ms, next_ms;
	struct stat st; /* what the file was when last read */
	char *last_error;
	struct static_config *groups; /* the last good ones */
	size_t n_groups;
};

struct scrape_discovery {
	scrape_config_loader load;
	void *load_ctx;
	struct scrape_manager *manager;
	struct scrape_config *defs; /* the SD definitions in effect */
	struct sd_source *src;
	size_t n_src, cap_src;
	uint64_t applied; /* hash of the groups last applied */
	bool applied_once;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, reload;
};

static void source_release(struct sd_source *s)
{
	free(s->job);
	free(s->key);
	free(s->last_error);
	groups_free(s->groups, s->n_groups);
	memset(s, 0, sizeof(*s));
}

static struct sd_source *source_find(struct scrape_discovery *d, const char *job, const char *key,
				     bool http)
{
	for (size_t i = 0; i < d->n_src; i++)
		if (d->src[i].http == http && !strcmp(d->src[i].job, job) &&
		    !strcmp(d->src[i].key, key))
			return &d->src[i];
	return NULL;
}

static struct sd_source *source_add(struct scrape_discovery *d, const char *job, const char *key,
				    bool http, int64_t refresh_ms)
{
	struct sd_source *s;

	if (GROW_ARRAY(d->src, d->cap_src, d->n_src + 1, 8))
		return NULL;
	s = &d->src[d->n_src];
	memset(s, 0, sizeof(*s));
	if (!(s->job = strdup(job)) || !(s->key = strdup(key))) {
		source_release(s);
		return NULL;
	}
	s->http = http;
	s->refresh_ms = refresh_ms;
	d->n_src++;
	return s;
}

/* Logs err once per distinct message, and remembers it. */
static void source_failed(struct sd_source *s, const char *msg)
{
	if (s->last_error && !strcmp(s->last_error, msg))
		return;
	log_warn("discovery: job %s: %s (its last good targets stay)", s->job, msg);
	free(s->last_error);
	s->last_error = strdup(msg);
}

static void source_update(struct sd_source *s, struct static_config *g, size_t n)
{
	groups_free(s->groups, s->n_groups);
	s->groups = g;
	s->n_groups = n;
	if (s->last_error)
		log_info("discovery: job %s: %s reads again", s->job, s->key);
	free(s->last_error);
	s->last_error = NULL;
}

static void read_file_source(struct sd_source *s, const struct stat *st)
{
	struct kiln_error err = {0};
	struct static_config *g;
	struct buf text = {0};
	size_t n;
	int rc;

	s->st = *st;
	/* Symbolic links are followed (Kubernetes mounts ConfigMaps through
	 * them); the caller checked that this is a regular file. */
	if ((rc = buf_read_file(&text, s->key, SD_MAX_BYTES)) < 0) {
		kiln_error_set(&err, -rc, "%s: %s", s->key,
			       rc == -EFBIG ? "over the 10 MiB limit" : strerror(-rc));
		goto fail;
	}
	if (scrape_target_groups_parse((const char *)text.data, text.len, s->key, &g, &n, &err) < 0)
		goto fail;
	if (groups_label(g, n, "__meta_filepath", s->key) < 0) {
		groups_free(g, n);
		kiln_error_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	source_update(s, g, n);
	buf_free(&text);
	return;
fail:
	buf_free(&text);
	source_failed(s, err.msg);
}

static size_t on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct buf *b = arg;

	if (b->len + sz * nm > SD_MAX_BYTES || buf_append(b, p, sz * nm) < 0)
		return 0; /* aborts the transfer */
	return sz * nm;
}

static void fetch_http_source(struct sd_source *s)
{
	struct kiln_error err = {0};
	struct static_config *g;
	struct buf body = {0};
	char cerr[CURL_ERROR_SIZE] = "";
	CURL *c = curl_easy_init();
	long status = 0;
	char *ctype = NULL;
	size_t n;

	if (!c) {
		source_failed(s, "out of memory");
		return;
	}
	curl_easy_setopt(c, CURLOPT_URL, s->key);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(
	    c, CURLOPT_TIMEOUT_MS,
	    (long)(s->refresh_ms < SD_HTTP_TIMEOUT_MS ? s->refresh_ms : SD_HTTP_TIMEOUT_MS));
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "kiln-http-sd");
	if (curl_easy_perform(c) != CURLE_OK) {
		kiln_error_set(&err, EIO, "%s: %s", s->key,
			       cerr[0] ? cerr : "the body is over the 10 MiB limit");
		goto fail;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
	if (status != 200) {
		kiln_error_set(&err, EIO, "%s: HTTP %ld (200 expected)", s->key, status);
		goto fail;
	}
	if (!ctype || strncmp(ctype, "application/json", 16) != 0) {
		kiln_error_set(&err, EINVAL, "%s: Content-Type %s (application/json expected)",
			       s->key, ctype ? ctype : "missing");
		goto fail;
	}
	if (scrape_target_groups_parse((const char *)body.data, body.len, s->key, &g, &n, &err) < 0)
		goto fail;
	if (groups_label(g, n, "__meta_url", s->key) < 0) {
		groups_free(g, n);
		kiln_error_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	source_update(s, g, n);
	goto done;
fail:
	source_failed(s, err.msg);
done:
	buf_free(&body);
	curl_easy_cleanup(c);
}

/* Expands a job's file patterns: new files become sources, and every
 * matched source is read if it changed or its refresh is due. */
static void poll_files(struct scrape_discovery *d, const char *job, const struct file_sd_config *f,
		       int64_t now)
{
	for (size_t p = 0; p < f->n_files; p++) {
		glob_t gl;

		if (glob(f->files[p], GLOB_NOSORT, NULL, &gl) != 0)
			continue; /* no match (yet) */
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			const char *path = gl.gl_pathv[i];
			struct sd_source *s = source_find(d, job, path, false);
			struct stat st;

			if (!s && !(s = source_add(d, job, path, false, f->refresh_ms)))
				continue;
			s->seen = true;
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			if (st.st_ino != s->st.st_ino || st.st_size != s->st.st_size ||
			    st.st_mtim.tv_sec != s->st.st_mtim.tv_sec ||
			    st.st_mtim.tv_nsec != s->st.st_mtim.tv_nsec || now >= s->next_ms) {
				read_file_source(s, &st);
				s->next_ms = now + s->refresh_ms;
			}
		}
		globfree(&gl);
	}
}

/* One round: files and due URLs, then sources nothing matches any more
 * (a deleted file, a job or URL gone from the config) are dropped. */
static void poll_all(struct scrape_discovery *d)
{
	int64_t now = mono_ms();
	size_t out = 0;

	for (size_t i = 0; i < d->n_src; i++)
		d->src[i].seen = false;
	for (size_t j = 0; d->defs && j < d->defs->n_jobs; j++) {
		const struct scrape_job_config *job = &d->defs->jobs[j];

		for (size_t k = 0; k < job->n_file_sd; k++)
			poll_files(d, job->job_name, &job->file_sd[k], now);
		for (size_t k = 0; k < job->n_http_sd; k++) {
			const struct http_sd_config *h = &job->http_sd[k];
			struct sd_source *s = source_find(d, job->job_name, h->url, true);

			if (!s && !(s = source_add(d, job->job_name, h->url, true, h->refresh_ms)))
				continue;
			s->seen = true;
			s->refresh_ms = h->refresh_ms;
			if (now >= s->next_ms) {
				fetch_http_source(s);
				s->next_ms = mono_ms() + s->refresh_ms;
			}
		}
	}
	for (size_t i = 0; i < d->n_src; i++) {
		if (!d->src[i].seen)
			source_release(&d->src[i]);
		else if (i != out)
			d->src[out++] = d->src[i];
		else
			out++;
	}
	d->n_src = out;
}

/* A hash of every source's groups, in source order. */
static uint64_t groups_hash(const struct scrape_discovery *d)
{
	XXH64_state_t *h = XXH64_createState();
	uint64_t v;

	if (!h)
		return 0;
	XXH64_reset(h, 0);
	for (size_t i = 0; i < d->n_src; i++) {
		const struct sd_source *s = &d->src[i];

		XXH64_update(h, s->job, strlen(s->job) + 1);
		for (size_t g = 0; g < s->n_groups; g++) {
			for (size_t t = 0; t < s->groups[g].n_targets; t++)
				XXH64_update(h, s->groups[g].targets[t],
					     strlen(s->groups[g].targets[t]) + 1);
			for (size_t l = 0; l < s->groups[g].labels.n; l++) {
				const struct label *lb = &s->groups[g].labels.v[l];

				XXH64_update(h, lb->name, strlen(lb->name) + 1);
				XXH64_update(h, lb->value, strlen(lb->value) + 1);
			}
			XXH64_update(h, "\n", 1);
		}
	}
	v = XXH64_digest(h);
	XXH64_freeState(h);
	return v;
}

/* cfg's jobs with each source's groups appended to their static_configs. */
static int append_groups(struct scrape_discovery *d, struct scrape_config *cfg)
{
	for (size_t j = 0; j < cfg->n_jobs; j++) {
		struct scrape_job_config *job = &cfg->jobs[j];
		size_t extra = 0;
		struct static_config *v;

		for (size_t i = 0; i < d->n_src; i++)
			if (!strcmp(d->src[i].job, job->job_name))
				extra += d->src[i].n_groups;
		if (!extra)
			continue;
		v = realloc(job->static_configs, (job->n_static_configs + extra) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		job->static_configs = v;
		for (size_t i = 0; i < d->n_src; i++) {
			if (strcmp(d->src[i].job, job->job_name))
				continue;
			for (size_t g = 0; g < d->src[i].n_groups; g++) {
				int rc =
				    group_copy(&v[job->n_static_configs++], &d->src[i].groups[g]);

				if (rc)
					return rc;
			}
		}
	}
	return 0;
}

static bool has_sd(const struct scrape_config *c)
{
	for (size_t j = 0; c && j < c->n_jobs; j++)
		if (c->jobs[j].n_file_sd || c->jobs[j].n_http_sd)
			return true;
	return false;
}

/* Rebuilds and applies the config when the groups changed (or always). */
static void apply_if_changed(struct scrape_discovery *d, bool always)
{
	struct kiln_error err = {0};
	struct scrape_config *cfg = NULL;
	uint64_t h = groups_hash(d);
	size_t targets = 0;

	if (!always && d->applied_once && h == d->applied)
		return;
	if (d->load(d->load_ctx, &cfg, &err) < 0 || append_groups(d, cfg) < 0 ||
	    scrape_manager_apply(d->manager, cfg, &err) < 0) {
		log_error("discovery: targets not applied: %s",
			  err.msg[0] ? err.msg : "out of memory");
		scrape_config_free(cfg);
		return;
	}
	d->applied = h;
	d->applied_once = true;
	for (size_t i = 0; i < d->n_src; i++)
		for (size_t g = 0; g < d->src[i].n_groups; g++)
			targets += d->src[i].groups[g].n_targets;
	log_info("discovery: %zu targets from %zu sources applied", targets, d->n_src);
}

/* Takes the SD definitions of a freshly loaded config. */
static int load_defs(struct scrape_discovery *d, struct kiln_error *err)
{
	struct scrape_config *c = NULL;
	int rc = d->load(d->load_ctx, &c, err);

	if (rc < 0)
		return rc;
	scrape_config_free(d->defs);
	d->defs = c;
	return 0;
}

static void *discovery_main(void *arg)
{
	struct scrape_discovery *d = arg;

	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		struct timespec until;
		bool reload = d->reload;

		d->reload = false;
		pthread_mutex_unlock(&d->mu);
		if (reload) {
			struct kiln_error err = {0};

			if (load_defs(d, &err) < 0)
				log_error("discovery: config not reloaded: %s", err.msg);
		}
		poll_all(d);
		apply_if_changed(d, reload);
		pthread_mutex_lock(&d->mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += SD_POLL_MS / 1000;
		while (!d->stop && !d->reload &&
		       pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

int scrape_discovery_start(scrape_config_loader load, void *load_ctx, struct scrape_manager *m,
			   struct scrape_discovery **out, struct kiln_error *err)
{
	struct scrape_discovery *d;
	int rc;

	*out = NULL;
	if (!(d = calloc(1, sizeof(*d))))
		return kiln_error_set(err, ENOMEM, "out of memory");
	d->load = load;
	d->load_ctx = load_ctx;
	d->manager = m;
	if ((rc = load_defs(d, err)) < 0) {
		free(d);
		return rc;
	}
	if (!has_sd(d->defs)) { /* nothing to discover: no thread */
		scrape_config_free(d->defs);
		free(d);
		return 0;
	}
	/* The first round before start-up goes on, so that the first scrapes
	 * already include what the files list. */
	poll_all(d);
	apply_if_changed(d, true);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if ((rc = pthread_create(&d->thread, NULL, discovery_main, d)) != 0) {
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
		d->thread = 0;
		scrape_discovery_stop(d);
		return kiln_error_set(err, rc, "discovery thread: %s", strerror(rc));
	}
	*out = d;
	return 0;
}

void scrape_discovery_reload(struct scrape_discovery *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->reload = true;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void scrape_discovery_stop(struct scrape_discovery *d)
{
	if (!d)
		return;
	if (d->thread) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
	}
	for (size_t i = 0; i < d->n_src; i++)
		source_release(&d->src[i]);
	free(d->src);
	scrape_config_free(d->defs);
	free(d);
}
