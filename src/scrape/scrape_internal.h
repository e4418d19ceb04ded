/*
 * scrape_internal.h — the scrape unit, shared by targets.c (building units
 * from a config) and manager.c (scheduling and fetching them). Not for use
 * outside src/scrape.
 */
#ifndef KILN_SCRAPE_INTERNAL_H
#define KILN_SCRAPE_INTERNAL_H

#include <curl/curl.h>

#include "scrape/scrape.h"

enum unit_kind {
	UNIT_REMOTE_DELTA, /* ?seconds=N: the target sends a delta */
	UNIT_CUMULATIVE,   /* memory, block, mutex: Kiln computes deltas */
	UNIT_GAUGE,	   /* goroutine, custom: ingested as scraped */
};

/* One (target, profile kind). Identity across reloads is `key`. Fields
 * above `health` are set when the unit is built and change only during a
 * reload swap; the status fields are guarded by the manager's status lock;
 * the rest belongs to the scheduler thread. */
struct scrape_unit {
	char *key;
	char *job;
	char *url;
	struct scrape_labels labels;	 /* public labels incl. __name__ */
	struct scrape_labels discovered; /* before relabeling */
	bool active;
	enum unit_kind kind;
	const struct pprof_endpoint_config *ep; /* into the manager's config */
	int64_t interval_ms;
	int64_t timeout_ms;

	enum scrape_health health;
	int64_t last_scrape_ms;
	int64_t last_duration_ms;
	char last_error[256];

	int64_t next_due_ms; /* monotonic */
	size_t heap_pos;
	bool in_flight;
	bool pending; /* came due while in flight: start again right after */
	CURL *easy;
	CURLM *multi; /* the shard's multi handle easy is in, while in_flight */
	struct buf body;
	bool too_big;
	size_t max_body;
	int64_t started_mono_ms;
	int64_t started_wall_ms;
	char curl_err[CURL_ERROR_SIZE];
	struct scrape_baseline *base; /* of the last cumulative scrape (UNIT_CUMULATIVE) */
};

/* Builds every unit of cfg (active and dropped), sorted by job then URL.
 * *out is a malloc'd array of malloc'd units. */
int scrape_units_build(const struct scrape_config *cfg, struct scrape_unit ***out, size_t *n,
		       struct kiln_error *err);
void scrape_unit_free(struct scrape_unit *u);

/* Gunzip with state kept across calls (inflate.c; one per scheduler
 * thread). scrape_inflate replaces out with the inflated data (concatenated
 * members allowed): 0, -EBADMSG (corrupt), -EFBIG (past max_out) or
 * -ENOMEM. scrape_inflater_trim drops an unusually large buffer. */
struct scrape_inflater {
	struct libdeflate_decompressor *d;
	struct buf out;
};
int scrape_inflate(struct scrape_inflater *z, const void *data, size_t len, size_t max_out,
		   struct kiln_error *err);
void scrape_inflater_trim(struct scrape_inflater *z);
void scrape_inflater_release(struct scrape_inflater *z);

#endif
