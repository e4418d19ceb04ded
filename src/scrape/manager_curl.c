/*
 * manager_curl.c — libcurl's side of the scheduler: the socket and timer
 * callbacks that keep libcurl's sockets in the scheduler's epoll set, the
 * shards of multi handles (see "Shards" in manager.c), and reaping the
 * transfers libcurl and http.c have finished. Scheduler thread only.
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
#include "common/log.h"
#include "scrape/manager_internal.h"

/* libcurl: watch fd for what (CURL_POLL_IN/OUT/INOUT), or stop (REMOVE).
 * The epoll data carries the shard's index beside the fd. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *arg, void *sockp)
{
	struct scrape_shard *sh = arg;
	int epfd = sh->m->epfd;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); /* EBADF if closed: fine */
		return 0;
	}
	struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
					   (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
				 .data.u64 = (uint64_t)sh->index << 32 | (uint32_t)fd};
	/* sockp (set by curl_multi_assign) marks a socket already in the set;
	 * libcurl forgets it on REMOVE. */
	if (sockp)
		return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -1 : 0;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 &&
	    (errno != EEXIST || epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0))
		return -1;
	curl_multi_assign(sh->multi, fd, sh);
	return 0;
}

/* libcurl: call socket_action(CURL_SOCKET_TIMEOUT) on this shard in
 * timeout_ms (-1 = no timer). */
static int on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	struct scrape_shard *sh = arg;
	(void)multi;
	sh->due_ns = timeout_ms < 0 ? -1 : mono_ns() + (int64_t)timeout_ms * 1000000;
	return 0;
}

void mgr_shard_free(struct scrape_shard *sh)
{
	if (!sh)
		return;
	if (sh->multi)
		curl_multi_cleanup(sh->multi); /* may still tell on_socket to forget sockets */
	free(sh);
}

/* Grows the shards to about one per SHARD_UNITS active units (never
 * fewer than there are: handles in flight keep their multi) and sets how
 * many idle connections each keeps: twice its share of the targets, as
 * hashing does not spread them evenly, within max_connections. */
void mgr_add_shards(struct scrape_manager *m, size_t active)
{
	size_t want = (active + SHARD_UNITS - 1) / SHARD_UNITS;
	want = want < 1 ? 1 : want > MAX_SHARDS ? MAX_SHARDS : want;
	if (want > m->n_shards) {
		struct scrape_shard **v = realloc(m->shards, want * sizeof(*v));
		if (v) {
			m->shards = v;
			while (m->n_shards < want) {
				struct scrape_shard *sh = calloc(1, sizeof(*sh));
				if (!sh || !(sh->multi = curl_multi_init())) {
					free(sh);
					log_warn("scrape: out of memory for curl multi handles");
					break;
				}
				sh->m = m;
				sh->index = (uint32_t)m->n_shards;
				sh->due_ns = -1;
				curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
				curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
				curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, on_timer);
				curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
				m->shards[m->n_shards++] = sh;
			}
		}
	}
	size_t cap = mgr_max_connections(active);
	m->http.max_conns = cap;
	size_t keep = m->n_shards ? 2 * cap / m->n_shards + 8 : cap;
	keep = keep < cap ? keep : cap;
	if ((long)keep == m->max_conns)
		return;
	m->max_conns = (long)keep;
	for (size_t i = 0; i < m->n_shards; i++)
		curl_multi_setopt(m->shards[i]->multi, CURLMOPT_MAXCONNECTS, m->max_conns);
}

/* Finished transfers of a shard: check, decode, delta, queue; restart a
 * unit that came due meanwhile. */
void mgr_reap(struct scrape_manager *m, struct scrape_shard *sh)
{
	CURLMsg *cm;
	int left;
	while ((cm = curl_multi_info_read(sh->multi, &left))) {
		if (cm->msg != CURLMSG_DONE)
			continue;
		struct scrape_unit *u;
		curl_easy_getinfo(cm->easy_handle, CURLINFO_PRIVATE, (char **)&u);
		CURLcode res = cm->data.result;
		mgr_finish_curl(m, u, res);
		if (u->pending) {
			u->pending = false;
			if (mgr_start_scrape(m, u) < 0)
				log_warn("scrape: cannot start %s", u->url);
		}
	}
}

/* Finished transfers of http.c, as reap does for libcurl's; a restarted
 * one that fails at once is taken in the same loop. */
void mgr_reap_http(struct scrape_manager *m)
{
	struct scrape_unit *u;
	while ((u = http_reap(&m->http))) {
		mgr_finish_scrape(m, u, u->fetch_err, u->fetch_status);
		if (u->pending) {
			u->pending = false;
			if (mgr_start_scrape(m, u) < 0)
				log_warn("scrape: cannot start %s", u->url);
		}
	}
}
