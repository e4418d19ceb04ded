/*
 * manager_scrape.c — one scrape, from start to a queued profile: pick the
 * transport (http.c for plain http:// address targets, else a libcurl easy
 * handle on the target's shard), then check the finished transfer (status,
 * size, timeout), gunzip and decode it, cut deltas and gauges for the
 * cumulative kinds (delta.c) and queue the result (manager_ingest.c).
 * Runs on the scheduler thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/gzip.h"
#include "common/htab.h"
#include "common/log.h"
#include "scrape/manager_internal.h"

/* ---- one scrape -------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct scrape_unit *u = arg;
	size_t n = size * nmemb;
	if (u->body.len + n > u->max_body) {
		u->too_big = true;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	return buf_append(&u->body, data, n) == 0 ? n : 0;
}

void scrape_format_size(char *out, size_t len, size_t bytes)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(out, len, "%zu MiB", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(out, len, "%zu KiB", bytes >> 10);
	else
		snprintf(out, len, "%zu bytes", bytes);
}

/* Whether the URL's host is an IPv4 or IPv6 literal (nothing to resolve). */
static bool host_is_ip(const char *url)
{
	const char *h = strstr(url, "://");
	char host[64];
	size_t n = 0;
	unsigned char addr[16];
	if (!h)
		return false;
	h += 3;
	if (*h == '[') { /* [v6]:port */
		const char *e = strchr(h, ']');
		if (!e || (size_t)(e - h - 1) >= sizeof(host))
			return false;
		memcpy(host, h + 1, (size_t)(e - h - 1));
		host[e - h - 1] = 0;
		return inet_pton(AF_INET6, host, addr) == 1;
	}
	while (h[n] && h[n] != ':' && h[n] != '/' && h[n] != '?' && n < sizeof(host) - 1)
		n++;
	memcpy(host, h, n);
	host[n] = 0;
	return inet_pton(AF_INET, host, addr) == 1;
}

/* The shard of a URL: by its host and port, so that the kinds of one
 * target share the shard and its kept-alive connection. */
static struct scrape_shard *shard_of(struct scrape_manager *m, const char *url)
{
	const char *h = strstr(url, "://");
	h = h ? h + 3 : url;
	size_t n = strcspn(h, "/?#");
	return m->shards[htab_hash(h, n) % m->n_shards];
}

/* Whether url is the server itself (opts.self_url_prefixes): only those
 * targets get opts.self_authorization. */
static bool is_self(const struct scrape_manager *m, const char *url)
{
	if (!m->opts.self_authorization || !m->opts.self_url_prefixes)
		return false;
	for (const char *const *p = m->opts.self_url_prefixes; *p; p++)
		if (strncmp(url, *p, strlen(*p)) == 0)
			return true;
	return false;
}

/* Whether u goes through http.c (decided once per unit: its URL is part of
 * its identity and does not change). */
static bool use_http(struct scrape_manager *m, struct scrape_unit *u)
{
	if (!u->http_tried) {
		u->http_tried = true;
		struct http_target *t = m->http_ok ? calloc(1, sizeof(*t)) : NULL;
		const char *auth = is_self(m, u->url) ? m->opts.self_authorization : NULL;
		if (t && http_target_parse_auth(u->url, auth, t) == 0)
			u->ht = t;
		else
			free(t);
	}
	return u->ht != NULL;
}

int mgr_start_scrape(struct scrape_manager *m, struct scrape_unit *u)
{
	u->max_body = m->opts.max_body_bytes;
	u->too_big = false;
	u->curl_err[0] = 0;
	if (use_http(m, u)) {
		if (!u->body.cap && m->n_body_pool)
			u->body = m->body_pool[--m->n_body_pool];
		buf_reset(&u->body);
		u->started_wall_ms = realtime_ms();
		int64_t now = mono_ns();
		u->started_mono_ms = now / 1000000;
		u->in_flight = true;
		http_start(&m->http, u, now);
		return 0;
	}
	if (!m->n_shards)
		return -ENOMEM;
	if (!u->easy) {
		if (!(u->easy = curl_easy_init()))
			return -ENOMEM;
		curl_easy_setopt(u->easy, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(u->easy, CURLOPT_WRITEDATA, u);
		curl_easy_setopt(u->easy, CURLOPT_PRIVATE, u);
		curl_easy_setopt(u->easy, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(u->easy, CURLOPT_ERRORBUFFER, u->curl_err);
		curl_easy_setopt(u->easy, CURLOPT_USERAGENT, "kiln-scrape/1");
		curl_easy_setopt(u->easy, CURLOPT_ACCEPT_ENCODING, "");
	}
	/* An address needs no DNS, so its cache entry never goes stale:
	 * "forever" also spares the walk over every entry of libcurl's DNS
	 * cache that each transfer otherwise makes to expire old ones (1,000
	 * targets = 1,000 entries, one per host and port). Host names keep
	 * libcurl's default (60 s). */
	curl_easy_setopt(u->easy, CURLOPT_DNS_CACHE_TIMEOUT, host_is_ip(u->url) ? -1L : 60L);
	/* Settings that a reload may change. */
	curl_easy_setopt(u->easy, CURLOPT_URL, u->url);
	bool self = is_self(m, u->url);
	if (self && !m->self_headers) { /* built once, on this (the scheduler) thread */
		struct buf h = {0};
		if (buf_printf(&h, "Authorization: %s", m->opts.self_authorization) >= 0 &&
		    buf_terminate(&h) >= 0)
			m->self_headers = curl_slist_append(NULL, (const char *)h.data);
		buf_free(&h);
	}
	curl_easy_setopt(u->easy, CURLOPT_HTTPHEADER, self ? m->self_headers : NULL);
	curl_easy_setopt(u->easy, CURLOPT_TIMEOUT_MS, (long)u->timeout_ms);
	curl_easy_setopt(u->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(u->timeout_ms < 10000 ? u->timeout_ms : 10000));
	curl_easy_setopt(u->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)m->opts.max_body_bytes);
	if (!u->body.cap && m->n_body_pool)
		u->body = m->body_pool[--m->n_body_pool];
	buf_reset(&u->body);
	u->started_mono_ms = mono_ms();
	u->started_wall_ms = realtime_ms();
	struct scrape_shard *sh = shard_of(m, u->url);
	if (curl_multi_add_handle(sh->multi, u->easy) != CURLM_OK)
		return -EIO;
	u->multi = sh->multi;
	u->in_flight = true;
	return 0;
}

/* A short, printable excerpt of a body that is not a profile. */
static void describe_non_pprof(const struct buf *b, const char *decode_err, char *out, size_t len)
{
	size_t i = 0;
	while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\n' || b->data[i] == '\r' ||
			      b->data[i] == '\t'))
		i++;
	if (b->len == 0) {
		snprintf(out, len, "not a pprof profile: empty body");
		return;
	}
	if (i < b->len && b->data[i] == '<') {
		snprintf(out, len, "not a pprof profile: looks like HTML");
		return;
	}
	size_t printable = 0, n = b->len < 256 ? b->len : 256;
	for (size_t k = 0; k < n; k++)
		printable += (b->data[k] >= 0x20 && b->data[k] < 0x7f) || b->data[k] == '\n' ||
			     b->data[k] == '\t' || b->data[k] == '\r';
	if (printable == n) {
		char text[48];
		size_t t = 0;
		for (size_t k = i; k < b->len && t < 40; k++)
			text[t++] = b->data[k] == '\n' || b->data[k] == '\r' ? ' ' : b->data[k];
		text[t] = 0;
		snprintf(out, len, "not a pprof profile: looks like text (\"%s%s\")", text,
			 b->len - i > 40 ? "..." : "");
		return;
	}
	snprintf(out, len, "not a pprof profile: %.200s", decode_err);
}

/* Indices of the sample types to keep (keep_sample_type), split into
 * cumulative and gauge ("inuse_*") when split is true. */
static void select_types(const struct pprof_endpoint_config *e, const struct pprof_profile *p,
			 bool split, size_t *cum, size_t *n_cum, size_t *gauge, size_t *n_gauge)
{
	const pprof_msg *msg = pprof_profile_msg(p);
	*n_cum = *n_gauge = 0;
	for (size_t i = 0; i < msg->n_sample_type && i < 64; i++) {
		const char *ty = pprof_string(p, msg->sample_type[i]->type);
		const char *un = pprof_string(p, msg->sample_type[i]->unit);
		bool keep = e->n_keep == 0;
		for (size_t k = 0; k < e->n_keep && !keep; k++)
			keep = strcmp(e->keep_types[k], ty) == 0 &&
			       (!e->keep_units[k] || strcmp(e->keep_units[k], un) == 0);
		if (!keep)
			continue;
		if (split && strncmp(ty, "inuse_", 6) == 0)
			gauge[(*n_gauge)++] = i;
		else
			cum[(*n_cum)++] = i;
	}
}

/* Decoded profile -> ingest items. Takes ownership of p. The delta of a
 * cumulative profile and its gauge types are both cut out of it
 * (pprof_profile_subset); other kinds queue p itself. */
static int process_profile(struct scrape_manager *m, struct scrape_unit *u, struct pprof_profile *p,
			   int64_t done_ns, struct kiln_error *err)
{
	const pprof_msg *msg = pprof_profile_msg(p);
	int64_t ts = msg->time_nanos ? msg->time_nanos / 1000000 : u->started_wall_ms;
	size_t cum[64], gauge[64], n_cum, n_gauge;
	struct pprof_profile *out;
	bool reset;
	int rc = 0;

	select_types(u->ep, p, u->kind == UNIT_CUMULATIVE, cum, &n_cum, gauge, &n_gauge);
	if (u->kind != UNIT_CUMULATIVE) {
		bool delta = u->kind == UNIT_REMOTE_DELTA;
		if (n_cum == 0) {
			pprof_decoder_recycle(m->decoder, p);
			return 0;
		}
		if (n_cum < msg->n_sample_type && pprof_profile_project(p, cum, n_cum) < 0) {
			pprof_decoder_recycle(m->decoder, p);
			return kiln_error_set(err, EINVAL, "keep_sample_type: bad projection");
		}
		return mgr_enqueue(m, u, p, ts, delta, done_ns);
	}
	if (n_cum) {
		struct scrape_baseline *next = NULL;
		if (u->base) {
			if ((rc = scrape_delta_next(u->base, p, cum, n_cum, &out, &reset, &next,
						    err)) < 0)
				goto fail;
			if (reset)
				log_info("scrape: %s: counters went backwards (target restarted?); "
					 "the new scrape is taken as the delta",
					 u->url);
			rc = mgr_enqueue(m, u, out, ts, true, done_ns);
		} else {
			rc = scrape_baseline_new(p, cum, n_cum, &next, err);
		}
		if (next) { /* the baseline for the next delta */
			scrape_baseline_free(u->base);
			u->base = next;
		}
		if (rc < 0)
			goto fail;
	}
	if (n_gauge) {
		/* The "inuse_*" types, as scraped, cut out of p like the delta:
		 * only the samples with a value and the objects they use (a few
		 * of an allocs profile's). p itself is freed here, on the thread
		 * that allocated it, where its memory is reused warm by the next
		 * decode, instead of crossing to the ingest thread whole. */
		struct pprof_profile *g;
		bool unused;
		rc = scrape_delta_next(NULL, p, gauge, n_gauge, &g, &unused, NULL, err);
		pprof_decoder_recycle(m->decoder, p);
		return rc < 0 ? rc : mgr_enqueue(m, u, g, ts, false, done_ns);
	}
fail:
	pprof_decoder_recycle(m->decoder, p);
	return rc;
}

void mgr_finish_scrape(struct scrape_manager *m, struct scrape_unit *u, const char *fetch_err,
		       long status);

/* libcurl's result as Kiln's message ("" = a complete response). */
void mgr_finish_curl(struct scrape_manager *m, struct scrape_unit *u, CURLcode res)
{
	char msg[256] = "";
	long status = 0;
	char size[32];

	curl_multi_remove_handle(u->multi, u->easy);
	scrape_format_size(size, sizeof(size), m->opts.max_body_bytes);
	curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &status);
	if (res == CURLE_OK) {
		/* status checked by finish_scrape */
	} else if (res == CURLE_WRITE_ERROR && u->too_big) {
		snprintf(msg, sizeof(msg), "body exceeds %s", size);
	} else if (res == CURLE_FILESIZE_EXCEEDED) {
		snprintf(msg, sizeof(msg), "body exceeds %s", size);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		if (u->timeout_ms % 1000 == 0)
			snprintf(msg, sizeof(msg), "timeout after %llds",
				 (long long)u->timeout_ms / 1000);
		else
			snprintf(msg, sizeof(msg), "timeout after %lldms",
				 (long long)u->timeout_ms);
	} else if (res == CURLE_COULDNT_CONNECT) {
		long oserr = 0;
		curl_easy_getinfo(u->easy, CURLINFO_OS_ERRNO, &oserr);
		if (oserr == ECONNREFUSED)
			snprintf(msg, sizeof(msg), "connection refused");
		else
			snprintf(msg, sizeof(msg), "cannot connect: %.200s",
				 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	} else if (res == CURLE_COULDNT_RESOLVE_HOST) {
		snprintf(msg, sizeof(msg), "cannot resolve host: %.200s",
			 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	} else {
		snprintf(msg, sizeof(msg), "%s",
			 u->curl_err[0] ? u->curl_err : curl_easy_strerror(res));
	}
	mgr_finish_scrape(m, u, msg, status);
}

/* Undoes a Content-Encoding: gzip of http.c's response (libcurl does it
 * itself), so that the body is what the target's handler wrote. */
static int gunzip_body(struct scrape_manager *m, struct scrape_unit *u, char *msg, size_t len)
{
	struct kiln_error err = {0};
	const uint8_t *data = u->body.data ? u->body.data : (const uint8_t *)"";
	int rc = scrape_inflate(&m->inflater, data, u->body.len, u->max_body, &err);
	if (rc == -EFBIG) {
		char size[32];
		scrape_format_size(size, sizeof(size), u->max_body);
		snprintf(msg, len, "body exceeds %s", size);
	} else if (rc < 0) {
		snprintf(msg, len, "Content-Encoding: %.200s", err.msg);
	} else { /* swap buffers: no copy */
		struct buf t = u->body;
		u->body = m->inflater.out;
		m->inflater.out = t;
		buf_reset(&m->inflater.out);
	}
	return rc;
}

/* A fetch ended (fetch_err empty: a complete response with this status):
 * check, decode, delta, queue; record the unit's health. */
void mgr_finish_scrape(struct scrape_manager *m, struct scrape_unit *u, const char *fetch_err,
		       long status)
{
	char msg[256] = "";
	int64_t done_ns = mono_ns();
	int64_t dur = done_ns / 1000000 - u->started_mono_ms;
	char size[32];
	uint64_t decode_ns = 0, delta_ns = 0;

	u->in_flight = false;
	scrape_format_size(size, sizeof(size), m->opts.max_body_bytes);
	if (fetch_err[0]) {
		snprintf(msg, sizeof(msg), "%s", fetch_err);
	} else if (status != 200) {
		snprintf(msg, sizeof(msg), "HTTP status %ld", status);
		struct buf b = u->body;
		if (b.len && b.data[0] == '<')
			snprintf(msg, sizeof(msg), "HTTP status %ld (HTML body)", status);
	} else if (u->ht && u->resp.gzip && gunzip_body(m, u, msg, sizeof(msg)) < 0) {
		/* msg says why */
	} else {
		struct pprof_decode_opts o = {.max_inflated_bytes = m->opts.max_body_bytes};
		if (m->opts.on_body)
			m->opts.on_body(m->opts.on_body_ctx, u->labels.v, u->labels.n, u->body.data,
					u->body.len);
		struct pprof_profile *p = NULL;
		struct kiln_error err = {0};
		uint64_t t0 = (uint64_t)thread_cpu_ns();
		const uint8_t *data = u->body.data ? u->body.data : (const uint8_t *)"";
		size_t len = u->body.len;
		int rc = 0;
		if (gzip_is_gzip(data, len)) { /* into the kept buffer */
			rc = scrape_inflate(&m->inflater, data, len, m->opts.max_body_bytes, &err);
			data = m->inflater.out.data;
			len = m->inflater.out.len;
			if (rc == 0 && len == 0)
				rc = kiln_error_set(&err, EINVAL, "empty input after gunzip");
		}
		struct pprof_decoder *d = NULL;
		if (u->kind == UNIT_CUMULATIVE) {
			if (!m->decoder)
				m->decoder = pprof_decoder_new();
			d = m->decoder;
		}
		if (rc == 0)
			rc = pprof_decoder_decode(d, data, len, &o, &p, &err);
		scrape_inflater_trim(&m->inflater);
		uint64_t t1 = (uint64_t)thread_cpu_ns();
		decode_ns = t1 - t0;
		if (rc == -EFBIG)
			snprintf(msg, sizeof(msg), "body exceeds %s (decompressed)", size);
		else if (rc < 0)
			describe_non_pprof(&u->body, err.msg, msg, sizeof(msg));
		else if ((rc = process_profile(m, u, p, done_ns, &err)) < 0)
			snprintf(msg, sizeof(msg), "processing the profile: %.200s",
				 err.msg[0] ? err.msg : strerror(-rc));
		if (p) /* decoded: the rest was type selection and deltas */
			delta_ns = (uint64_t)thread_cpu_ns() - t1;
	}
	size_t fetched = u->body.len;
	/* Bodies can be large; do not keep one per target between scrapes. */
	if (u->body.cap && u->body.cap <= BODY_POOL_CAP && m->n_body_pool < BODY_POOL) {
		m->body_pool[m->n_body_pool++] = u->body;
		buf_init(&u->body);
	} else {
		buf_free(&u->body);
	}

	pthread_mutex_lock(&m->status_lock);
	u->last_scrape_ms = u->started_wall_ms;
	u->last_duration_ms = dur;
	u->health = msg[0] ? SCRAPE_HEALTH_DOWN : SCRAPE_HEALTH_UP;
	snprintf(u->last_error, sizeof(u->last_error), "%s", msg);
	m->stats.scrapes++;
	m->stats.bytes_fetched += fetched;
	m->stats.decode_cpu_ns += decode_ns;
	m->stats.delta_cpu_ns += delta_ns;
	if (msg[0])
		m->stats.scrape_errors++;
	pthread_mutex_unlock(&m->status_lock);
	if (msg[0])
		log_debug("scrape: %s: %s", u->url, msg);
}
