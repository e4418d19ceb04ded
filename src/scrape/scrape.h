/*
 * scrape.h — pull mode: scrape pprof HTTP endpoints listed in a Parca-style
 * YAML config and hand each profile to an ingest callback.
 *
 * Config (scrape_config_load_file): the shape of Parca's parca.yaml, so a
 * user's file works unchanged:
 *
 *   object_storage: {bucket: {type: FILESYSTEM, config: {directory: ./data}}}
 *   scrape_configs:
 *     - job_name: app               # required, unique
 *       scrape_interval: 10s        # default 10s
 *       scrape_timeout: 13s         # default interval + 3s (Parca's rule)
 *       scheme: http                # http | https
 *       params: {k: [v]}            # extra query parameters
 *       static_configs: [{targets: ['host:port'], labels: {env: prod}}]
 *       file_sd_configs: [{files: ['targets/x.json'], refresh_interval: 5m}]
 *       http_sd_configs: [{url: 'http://sd.example/targets', refresh_interval: 60s}]
 *       profiling_config:
 *         path_prefix: /prefix
 *         pprof_config:             # memory (alias memory_allocs), block,
 *           process_cpu:            # mutex, goroutine, process_cpu, custom
 *             enabled: true
 *             path: /debug/pprof/profile
 *             delta: true           # target computes the delta (?seconds=N)
 *             seconds: 10           # Kiln extension: N (default = interval)
 *             keep_sample_type: [{type: samples, unit: count}]
 *       relabel_configs:            # Prometheus semantics
 *         - {source_labels: [a, b], separator: ';', regex: '(.*)',
 *            target_label: t, replacement: '$1', modulus: 8, action: replace}
 *
 * Unknown keys are errors (as Parca's strict decoding). Every error names the
 * place: "FILE:LINE:COLUMN: reason". scrape_config_dump writes a config with
 * every field explicit; loading the dump gives an equal config.
 *
 * Targets: each static target x each enabled profile kind is one scrape unit
 * with labels {__address__, job, __scheme__, __name__ = kind,
 * __profile_path__, static labels}; relabel_configs run on that set (so a
 * rule may drop one kind of one target); then `instance` defaults to
 * __address__ and labels starting with "__" (except __name__) are removed.
 *
 * Deltas. Three kinds of endpoint:
 *   - delta: true (process_cpu by default): called with ?seconds=N; the
 *     target returns the difference itself; ingested with delta = true.
 *   - memory, block, mutex without delta: cumulative since process start.
 *     Kiln keeps a baseline of the previous scrape of each series (struct
 *     scrape_baseline: per-stack sums) and ingests cur - prev
 *     (delta = true). Sample types named "inuse_*" (memory) are gauges and are
 *     ingested separately, as scraped (delta = false). The first scrape only
 *     primes the baseline. Counter reset rule: if any cumulative value of
 *     any stack would go negative (the process restarted, or the runtime
 *     reset the profile), the new scrape itself is the delta. Stacks whose
 *     delta is zero in every type are dropped.
 *   - everything else (goroutine, custom): ingested as scraped (delta false).
 *
 * Manager threading: one scheduler thread drives all transfers on one epoll
 * set (schedule, fetch, decode, delta); a few ingest threads call the
 * callback concurrently, so a slow fsync never delays a scrape and the
 * store can group-commit their writes. Reload
 * (scrape_manager_apply) is handed to the scheduler thread and swapped at a
 * loop boundary: units with the same job, URL and labels keep their state
 * (delta baselines, health), so nothing is lost.
 */
#ifndef KILN_SCRAPE_H
#define KILN_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "pprof/pprof.h"
#include "common/labels.h"

/* ---- labels ------------------------------------------------------------- */

/* A label set: owned, sorted by name after scrape_labels_sort. */
struct scrape_labels {
	struct label *v; /* name and value strings are owned (malloc) */
	size_t n;
};

const char *scrape_labels_get(const struct scrape_labels *l, const char *name);
/* Sets (replacing) or, with value NULL or "", deletes name. 0 or -ENOMEM. */
int scrape_labels_set(struct scrape_labels *l, const char *name, const char *value);
void scrape_labels_sort(struct scrape_labels *l);
int scrape_labels_copy(struct scrape_labels *dst, const struct scrape_labels *src);
void scrape_labels_free(struct scrape_labels *l);
/* Appends "{a="x", b="y"}" (sorted) to out. */
int scrape_labels_format(const struct scrape_labels *l, struct buf *out);

/* ---- config ------------------------------------------------------------- */

enum relabel_action {
	RELABEL_REPLACE,
	RELABEL_KEEP,
	RELABEL_DROP,
	RELABEL_HASHMOD,
	RELABEL_LABELMAP,
	RELABEL_LABELDROP,
	RELABEL_LABELKEEP,
	RELABEL_LOWERCASE,
	RELABEL_UPPERCASE,
};

const char *relabel_action_name(enum relabel_action a); /* "replace", ... */

struct relabel_config {
	char **source_labels;
	size_t n_source_labels;
	char *separator; /* default ";" */
	char *regex;	 /* as written; default "(.*)" */
	char *target_label;
	char *replacement; /* default "$1" */
	uint64_t modulus;
	enum relabel_action action;
	void *compiled; /* pcre2_code*, anchored at both ends */
};

struct pprof_endpoint_config {
	char *name; /* memory, block, mutex, goroutine, process_cpu or custom */
	bool enabled;
	char *path;
	bool delta;	   /* call with ?seconds=N, the target returns a delta */
	int64_t seconds;   /* N; 0 = the scrape interval */
	char **keep_types; /* keep_sample_type: "type" and "unit" pairs */
	char **keep_units; /* NULL unit = any */
	size_t n_keep;
};

struct static_config {
	char **targets;
	size_t n_targets;
	struct scrape_labels labels;
};

/* file_sd_configs: target groups (the static_configs shape, as a YAML or
 * JSON list) in files matching these patterns (a glob in the last path
 * element; relative to the config file's directory), re-read when they
 * change (checked every second) and every refresh interval. */
struct file_sd_config {
	char **files;
	size_t n_files;
	int64_t refresh_ms; /* default 5m */
};

/* http_sd_configs: target groups as the JSON list an HTTP GET of url
 * returns (200, application/json), fetched every refresh interval. */
struct http_sd_config {
	char *url;
	int64_t refresh_ms; /* default 60s */
};

struct scrape_job_config {
	char *job_name;
	int64_t interval_ms;
	int64_t timeout_ms;
	char *scheme;
	char *path_prefix;
	struct scrape_labels params; /* name -> first value */
	bool normalized_addresses;
	struct pprof_endpoint_config *endpoints;
	size_t n_endpoints;
	struct static_config *static_configs;
	size_t n_static_configs;
	struct file_sd_config *file_sd;
	size_t n_file_sd;
	struct http_sd_config *http_sd;
	size_t n_http_sd;
	struct relabel_config *relabel;
	size_t n_relabel;
};

struct scrape_config {
	char *path; /* file it came from, for messages */
	char *bucket_type;
	char *bucket_directory;
	struct scrape_job_config *jobs;
	size_t n_jobs;
};

/* Parses YAML text; name is used in messages ("kiln.yaml:12:5: ..."). */
int scrape_config_parse(const char *text, size_t len, const char *name, struct scrape_config **out,
			struct kiln_error *err);
int scrape_config_load_file(const char *path, struct scrape_config **out, struct kiln_error *err);
void scrape_config_free(struct scrape_config *c);
/* Replaces "${name}" by value in every static target (Kiln extension: the
 * server defines ${KILN_PORT}, its own HTTP port, so that the shipped
 * kiln.yaml scrapes the server whatever port it listens on). A "${" left
 * over afterwards is refused (-EINVAL, naming job and target). */
int scrape_config_substitute(struct scrape_config *c, const char *name, const char *value,
			     struct kiln_error *err);
/* Writes c as YAML with every field explicit (defaults filled in). */
int scrape_config_dump(const struct scrape_config *c, struct buf *out);

/* ---- discovery (discovery.c) ----------------------------------------------- */

/* Target groups as a file_sd file or http_sd body holds them: a YAML or
 * JSON list of {targets, labels}, checked as static_configs are; errors
 * name "NAME:LINE:COLUMN". *out (n entries) is the caller's: free each
 * with scrape_static_config_release, then the array. */
int scrape_target_groups_parse(const char *text, size_t len, const char *name,
			       struct static_config **out, size_t *n, struct kiln_error *err);
void scrape_static_config_release(struct static_config *s);

/* Returns a freshly parsed config as the user wrote it (the caller owns
 * it); discovery adds what it found to a copy of it each time. */
typedef int (*scrape_config_loader)(void *ctx, struct scrape_config **out, struct kiln_error *err);
struct scrape_manager;
struct scrape_discovery;
/* Starts discovery for the file_sd_configs and http_sd_configs of the
 * loader's config (*out stays NULL when it has none: nothing runs). The
 * first round is done before it returns, and applied to m. */
int scrape_discovery_start(scrape_config_loader load, void *load_ctx, struct scrape_manager *m,
			   struct scrape_discovery **out, struct kiln_error *err);
/* The loader's config changed (SIGHUP): take its definitions, re-apply. */
void scrape_discovery_reload(struct scrape_discovery *d);
/* Stops the thread and frees everything. NULL-safe. */
void scrape_discovery_stop(struct scrape_discovery *d);

/* ---- relabeling ----------------------------------------------------------- */

/* Compiles rc->regex (anchored). err names the regex and the offset. */
int relabel_compile(struct relabel_config *rc, struct kiln_error *err);
void relabel_release(struct relabel_config *rc);
/* Applies the rules in order. Returns 1 = keep, 0 = dropped, -ENOMEM. */
int relabel_apply(const struct relabel_config *rules, size_t n, struct scrape_labels *l);

/* ---- deltas --------------------------------------------------------------- */

/* Builds the profile made of the sample types idx[0..n) of cur, minus the
 * same types of prev when prev is not NULL (see "Deltas" above: a negative
 * value anywhere means a counter reset, then *reset is set and cur's values
 * are used as they are). Zero samples are dropped. *out is owned by the
 * caller. */
int scrape_delta(const struct pprof_profile *prev, const struct pprof_profile *cur,
		 const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		 struct kiln_error *err);

/* What a delta needs of the previous scrape of a series: per stack (a
 * 128-bit hash of its resolved frames and labels) the summed values of the
 * selected sample types, their names and the profile time — a few bytes per
 * sample instead of a whole decoded profile. */
struct scrape_baseline;
int scrape_baseline_new(const struct pprof_profile *p, const size_t *idx, size_t n,
			struct scrape_baseline **out, struct kiln_error *err);
void scrape_baseline_free(struct scrape_baseline *b);
/* scrape_delta against a baseline; with next, also returns cur's baseline
 * for the following scrape (owned by the caller). */
int scrape_delta_next(const struct scrape_baseline *prev, const struct pprof_profile *cur,
		      const size_t *idx, size_t n, struct pprof_profile **out, bool *reset,
		      struct scrape_baseline **next, struct kiln_error *err);

/* ---- manager -------------------------------------------------------------- */

/* Called on one of the ingest threads, several at once (it must be
 * thread-safe); labels include __name__, job and instance.
 * The profile is only valid during the call. Return 0 or negative errno
 * (logged with err). */
typedef int (*scrape_ingest_fn)(void *ctx, const struct label *labels, size_t n_labels,
				const struct pprof_profile *p, int64_t timestamp_ms, bool delta,
				struct kiln_error *err);

struct scrape_manager_options {
	scrape_ingest_fn ingest;
	void *ingest_ctx;
	size_t max_body_bytes; /* 0 = 64 MiB; compressed and decompressed */
	size_t ingest_queue;   /* 0 = 4096 profiles waiting for the callback */
	/* Optional, for archiving and tests: every 200 response body as
	 * received (before decoding), on the scheduler thread. */
	void (*on_body)(void *ctx, const struct label *labels, size_t n_labels, const void *body,
			size_t len);
	void *on_body_ctx;
	/* The server's own address, for scraping itself when it requires
	 * tokens: a target whose URL starts with one of these prefixes
	 * (NULL-terminated, e.g. "http://127.0.0.1:7070/") is sent
	 * `Authorization: self_authorization`; no other target ever sees it.
	 * NULL = none. Both must outlive the manager. */
	const char *const *self_url_prefixes;
	const char *self_authorization;
};

enum scrape_health { SCRAPE_HEALTH_UNKNOWN, SCRAPE_HEALTH_UP, SCRAPE_HEALTH_DOWN };
const char *scrape_health_name(enum scrape_health h); /* "unknown", "up", "down" */

struct scrape_target_info {
	char *job;
	char *url;
	struct scrape_labels labels;	 /* final (public) labels incl. __name__ */
	struct scrape_labels discovered; /* before relabeling */
	bool active;			 /* false = dropped by relabeling */
	enum scrape_health health;
	int64_t last_scrape_ms; /* 0 = never */
	int64_t last_duration_ms;
	char *last_error; /* "" when the last scrape worked */
};

struct scrape_stats {
	uint64_t scrapes; /* finished, successful or not */
	uint64_t scrape_errors;
	uint64_t profiles_ingested;
	uint64_t ingest_errors;
	uint64_t bytes_fetched;
	/* CPU time by phase (CLOCK_THREAD_CPUTIME_ID around each phase). The
	 * scrape overhead "beyond ingest" is scheduler_cpu_ns plus
	 * ingest_cpu_ns - callback_cpu_ns; the callback (store ingest) is not
	 * scrape overhead. */
	uint64_t scheduler_cpu_ns; /* the scheduler thread, all phases: */
	uint64_t decode_cpu_ns;	   /*   gunzip, parse, validate */
	uint64_t delta_cpu_ns;	   /*   type selection, deltas, projections, queueing */
	/* (scheduler - decode - delta = scheduling, libcurl, sockets, poll) */
	uint64_t ingest_cpu_ns;	  /* the ingest threads, incl. the callback */
	uint64_t callback_cpu_ns; /*   inside the ingest callback */
	uint64_t ingest_lag_ns_total;
	uint64_t ingest_lag_ns_max; /* scrape finished -> callback returned */
	size_t active_units;
	size_t ingest_queued;
};

struct scrape_manager;

/* Starts the threads. cfg may be NULL (no targets until apply). On success
 * the manager owns cfg. */
int scrape_manager_new(const struct scrape_manager_options *opts, struct scrape_config *cfg,
		       struct scrape_manager **out, struct kiln_error *err);
/* Swaps to cfg (owned by the manager on success; on error the caller keeps
 * it and the old config stays). Targets that remain keep their state. */
int scrape_manager_apply(struct scrape_manager *m, struct scrape_config *cfg,
			 struct kiln_error *err);
/* Stops the threads, drains the ingest queue, frees everything. NULL-safe. */
void scrape_manager_free(struct scrape_manager *m);

/* A consistent snapshot of every scrape unit, active then dropped, sorted by
 * job and URL. Free with scrape_targets_free. */
int scrape_manager_targets(struct scrape_manager *m, struct scrape_target_info **out, size_t *n);
void scrape_targets_free(struct scrape_target_info *t, size_t n);
void scrape_manager_get_stats(struct scrape_manager *m, struct scrape_stats *out);

#endif
