/*
 * scrape_internal.h — the scrape unit, shared by targets.c (building units
 * from a config) and manager.c (scheduling and fetching them). Not for use
 * outside src/scrape.
 */
#ifndef KILN_SCRAPE_INTERNAL_H
#define KILN_SCRAPE_INTERNAL_H

#include <curl/curl.h>
#include <sys/socket.h>

#include "common/gzip.h"
#include "scrape/scrape.h"

/* ---- HTTP/1.1 responses (http_parse.c) ------------------------------------ */

#define HTTP_HEAD_MAX (64 * 1024) /* status line + headers, and each trailer line */

/* One response being parsed; zero it, then http_response_init before each
 * response (the line buffer is kept). */
struct http_response {
	int state;
	int status; /* 200, 404, ... once the head is parsed */
	int minor;  /* HTTP/1.minor */
	bool has_length, chunked, gzip, close, keep_alive_10;
	bool keep_alive; /* the connection may carry another request after this */
	uint64_t length, remaining;
	size_t offset;	   /* bytes of the response consumed so far */
	size_t line_start; /* start of the current line in line */
	struct buf line;   /* the head so far, or a chunk-size / trailer line */
};

void http_response_init(struct http_response *r);
void http_response_release(struct http_response *r);
/* Feeds n bytes; body bytes are appended to body (never past max_body).
 * Returns 1 when the response is complete (*used = bytes of p it took; any
 * rest is not part of it), 0 when more is needed (all taken), -EBADMSG
 * (malformed: err says what, at which byte), -EFBIG (body over max_body)
 * or -ENOMEM. */
int http_response_feed(struct http_response *r, const uint8_t *p, size_t n, size_t *used,
		       struct buf *body, size_t max_body, struct kiln_error *err);
/* The peer closed the connection: 1 when that ends the response (a body
 * delimited by the close, or already complete), else -EPIPE with where. */
int http_response_eof(struct http_response *r, const struct buf *body, struct kiln_error *err);
bool http_response_done(const struct http_response *r);

/* ---- plain-HTTP client on the scheduler's epoll (http.c) ------------------- */

/* Where and what to ask, from an http:// URL with an IP-literal host. */
struct http_target {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char *request; /* the whole GET request, malloc'd */
	size_t request_len;
};

/* Fills t from url; -EINVAL when the URL is not for this client (not
 * http://, a host name, user info, a fragment, unusual characters): those
 * go to libcurl, as before. */
int http_target_parse(const char *url, struct http_target *t);
/* The same, with `Authorization: authorization` in the request (NULL =
 * none). */
int http_target_parse_auth(const char *url, const char *authorization, struct http_target *t);
void http_target_release(struct http_target *t);

struct scrape_unit;

/* The client: connections of units (one kept-alive connection each), in
 * the scheduler's epoll set with tag << 32 | fd as data. Scheduler-only. */
struct http_client {
	int epfd;
	uint32_t tag;
	struct scrape_unit **by_fd; /* fd -> unit owning the connection */
	size_t n_by_fd;
	struct scrape_unit *flight;		   /* transfers in flight (for timeouts) */
	struct scrape_unit *done_head, *done_tail; /* finished, to reap */
	int64_t due_ns;	  /* earliest deadline in flight (or earlier), -1 = none */
	size_t n_conns;	  /* open connections */
	size_t max_conns; /* kept alive at most */
	uint8_t *scratch; /* receive buffer */
};

int http_client_init(struct http_client *c, int epfd, uint32_t tag);
void http_client_release(struct http_client *c);
/* Starts u's request on its kept connection or a new one. A failure to
 * start is reported like any other: the unit comes out of http_reap. */
void http_start(struct http_client *c, struct scrape_unit *u, int64_t now_ns);
void http_on_event(struct http_client *c, int fd, uint32_t events);
/* The earliest deadline of a transfer in flight (monotonic ns), or -1. */
int64_t http_next_deadline(const struct http_client *c);
void http_check_timeouts(struct http_client *c, int64_t now_ns);
/* A finished unit (u->fetch_err empty and u->fetch_status set, or
 * fetch_err says what failed), or NULL. */
struct scrape_unit *http_reap(struct http_client *c);
/* Forgets u: aborts its transfer if in flight, closes its connection. */
void http_forget(struct http_client *c, struct scrape_unit *u);

/* "1 MiB", "4 KiB", "1000 bytes" */
void scrape_format_size(char *out, size_t len, size_t bytes);

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

	/* Plain HTTP (http.c), when ht is set; else libcurl (easy). */
	struct http_target *ht;
	bool http_tried; /* ht parsed (or found not applicable) once */
	bool via_http;	 /* the transfer in flight is http.c's */
	int fd;		 /* its connection, when conn_open */
	bool conn_open, in_hflight;
	bool connecting, reused, want_out, retried;
	size_t sent;
	int64_t deadline_ns, connect_deadline_ns;
	struct http_response resp;
	struct scrape_unit *hnext, *hprev; /* in flight, or done list (hnext) */
	long fetch_status;
	char fetch_err[256];
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
	struct gzip_inflater *z;
	struct buf out;
};
int scrape_inflate(struct scrape_inflater *z, const void *data, size_t len, size_t max_out,
		   struct kiln_error *err);
void scrape_inflater_trim(struct scrape_inflater *z);
void scrape_inflater_release(struct scrape_inflater *z);

#endif
