/*
 * conn_limits.c — the connection table: admission, eviction, deadlines.
 *
 * Why evict instead of refusing the newest at the limit: an attacker who
 * opens connections and keeps them quiet (slowloris, HTTP/2 PINGs) would
 * otherwise hold every slot for as long as he likes, and no new client
 * would be served. A connection with no request in flight loses nothing
 * when closed — an agent or a browser reconnects on its next request.
 *
 * Why fair share: with enough addresses a flood can hold every slot
 * within the per-client limit and, reconnecting as fast as it is evicted,
 * win every race for the slot an eviction frees. So the victim is taken
 * from the clients holding the most connections, never from one holding
 * fewer than the newcomer will: the flood evicts its own connections, and
 * a client with one or two is still served. Among those: the one idle the
 * longest; else one whose request body trickles in (a slow-body flood keeps
 * its slots "busy"); else one younger than a second (a newcomer gets that
 * long to send its request before it can go). A connection with a request
 * in flight at a fair rate is never closed; when every candidate is one,
 * the newcomer is refused: the server is genuinely busy.
 *
 * The table is a list under one mutex: admission, removal and the reaper
 * walk it (at most --max-connections entries plus the evicted ones still
 * closing); owners touch only their entry's atomics, never the list.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "server/conn_limits.h"
#include "server/server.h"

struct conn_entry {
	int fd;		  /* the client's socket: shutdown(2) closes the connection */
	int mhd_fd;	  /* what libmicrohttpd sees (-1 until the hand-off) */
	bool mhd_owns;	  /* libmicrohttpd closes fd (plaintext), not a relay */
	bool linked;	  /* in the list: its fd is open */
	bool evicted;	  /* shut down by the table; no longer counted */
	int refs;	  /* the socket's owner, and libmicrohttpd while it runs it */
	uint8_t addr[16]; /* the client: IPv4 as v4-mapped IPv6, IPv6 by its /64 */
	/* 0 while a request is in flight, else when the connection went idle. */
	_Atomic int64_t idle_since_ns;
	int64_t admitted_ns;
	_Atomic int64_t body_start_ns; /* HTTP/1.1 body in progress (libmicrohttpd) */
	_Atomic uint64_t body_bytes;
	struct conn_entry *prev, *next;
};

/* A client address and how many live connections it has (victim_entry's
 * scratch map, open addressing). */
struct addr_count {
	uint8_t addr[16];
	unsigned n;
	bool used;
};

struct conn_table {
	const struct server_config *cfg;
	pthread_mutex_t lock;
	struct conn_entry *head;
	struct addr_count *counts; /* scratch, under the lock */
	size_t counts_cap;	   /* a power of two, over twice the entries */
	unsigned live;		   /* not evicted */
	unsigned total;
};

struct conn_table *conn_table_new(const struct server_config *cfg)
{
	struct conn_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->cfg = cfg;
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void conn_table_free(struct conn_table *t)
{
	if (!t)
		return;
	while (t->head) {
		struct conn_entry *e = t->head;
		t->head = e->next;
		free(e);
	}
	pthread_mutex_destroy(&t->lock);
	free(t->counts);
	free(t);
}

static void peer_key(const struct sockaddr_storage *ss, uint8_t out[16])
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		memcpy(out, a, 16);
		/* One IPv6 client holds a whole /64: count it as one address. */
		if (!IN6_IS_ADDR_V4MAPPED(a))
			memset(out + 8, 0, 8);
	} else if (ss->ss_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

static void entry_shutdown(struct conn_table *t, struct conn_entry *e)
{
	shutdown(e->fd, SHUT_RDWR);
	if (!e->evicted) {
		e->evicted = true;
		t->live--;
	}
}

/* A body slower than this many times the minimum rate, for at least a
 * second, is a candidate when no connection is idle. */
#define SLOW_BODY_FACTOR 16
/* A connection this young is closed for being idle only after the others:
 * a new client gets the time to send its first request, or a flood of new
 * connections would close each one (the idlest) before it could. */
#define EVICT_MIN_AGE_NS 1000000000LL

static unsigned *addr_slot(struct conn_table *t, const uint8_t addr[16])
{
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 1099511628211ULL;
	for (size_t i = h & (t->counts_cap - 1);; i = (i + 1) & (t->counts_cap - 1)) {
		struct addr_count *c = &t->counts[i];
		if (!c->used) {
			c->used = true;
			memcpy(c->addr, addr, 16);
			c->n = 0;
			return &c->n;
		}
		if (memcmp(c->addr, addr, 16) == 0)
			return &c->n;
	}
}

/* Under the lock: the connection to close to make room for a client that
 * will then hold min_n connections, or NULL (refuse it). Fair share first:
 * the victim belongs to a client holding the most connections, and never to
 * one holding fewer than min_n — so a flood from many addresses evicts its
 * own connections, not those of a client with one or two. Among the
 * connections of equally heavy clients, in this order:
 *   1. the one idle the longest among those admitted a second ago or more;
 *   2. the one whose request body arrives the slowest, if well under a fair
 *      rate (with enough addresses, a slow-body flood would otherwise keep
 *      every slot busy until its deadlines cut each one);
 *   3. the one idle the longest among the young (a newcomer gets the time to
 *      send its first request before it goes).
 * A connection with a request in flight at a fair rate is never chosen. */
static struct conn_entry *victim_entry(struct conn_table *t, int64_t now_ns, unsigned min_n)
{
	size_t need = 4;
	while (need < (size_t)t->total * 2 + 2)
		need <<= 1;
	if (need > t->counts_cap) {
		struct addr_count *m = calloc(need, sizeof(*m));
		if (!m)
			return NULL;
		free(t->counts);
		t->counts = m;
		t->counts_cap = need;
	} else {
		memset(t->counts, 0, t->counts_cap * sizeof(*t->counts));
	}
	for (struct conn_entry *o = t->head; o; o = o->next)
		if (!o->evicted)
			(*addr_slot(t, o->addr))++;

	struct conn_entry *best = NULL;
	unsigned best_n = 0;
	int best_kind = 0;
	double best_key = 0;
	double fair_rate = (double)t->cfg->body_min_rate * SLOW_BODY_FACTOR;
	for (struct conn_entry *o = t->head; o; o = o->next) {
		if (o->evicted)
			continue;
		unsigned n = *addr_slot(t, o->addr);
		if (n < min_n)
			continue;
		int64_t since = atomic_load(&o->idle_since_ns);
		int64_t start = atomic_load(&o->body_start_ns);
		int kind;
		double key; /* smaller goes first */
		if (since && now_ns - o->admitted_ns >= EVICT_MIN_AGE_NS) {
			kind = 1;
			key = (double)since;
		} else if (start && now_ns - start >= 1000000000LL &&
			   (key = (double)atomic_load(&o->body_bytes) /
				  ((double)(now_ns - start) / 1e9)) < fair_rate) {
			kind = 2;
		} else if (since) {
			kind = 3;
			key = (double)since;
		} else {
			continue;
		}
		if (!best || n > best_n || (n == best_n && kind < best_kind) ||
		    (n == best_n && kind == best_kind && key < best_key)) {
			best = o;
			best_n = n;
			best_kind = kind;
			best_key = key;
		}
	}
	return best;
}

bool conn_table_evict_idlest(struct conn_table *t)
{
	pthread_mutex_lock(&t->lock);
	struct conn_entry *e = victim_entry(t, mono_ns(), 1);
	if (e)
		entry_shutdown(t, e);
	pthread_mutex_unlock(&t->lock);
	return e != NULL;
}

struct conn_entry *conn_table_admit(struct conn_table *t, int fd,
				    const struct sockaddr_storage *peer, uint64_t *evicted,
				    char *why, size_t whycap)
{
	struct conn_entry *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(why, whycap, "out of memory");
		return NULL;
	}
	e->fd = fd;
	e->mhd_fd = -1;
	e->refs = 1;
	e->linked = true;
	peer_key(peer, e->addr);
	e->admitted_ns = mono_ns();
	atomic_store(&e->idle_since_ns, e->admitted_ns);

	pthread_mutex_lock(&t->lock);
	unsigned same = 0;
	for (struct conn_entry *o = t->head; o; o = o->next)
		if (!o->evicted && memcmp(o->addr, e->addr, 16) == 0)
			same++;
	int per_client = t->cfg->max_connections_per_client;
	if (per_client > 0 && same >= (unsigned)per_client) {
		snprintf(why, whycap,
			 "this client already has %u connections "
			 "(--max-connections-per-client)",
			 same);
		goto refuse;
	}
	if (t->live >= (unsigned)t->cfg->max_connections) {
		struct conn_entry *victim = victim_entry(t, mono_ns(), same + 1);
		if (!victim) {
			snprintf(why, whycap,
				 "%u connections, none of a client with more than this one's "
				 "%u idle or slow (--max-connections)",
				 t->live, same);
			goto refuse;
		}
		entry_shutdown(t, victim);
		(*evicted)++;
	}
	e->next = t->head;
	if (t->head)
		t->head->prev = e;
	t->head = e;
	t->live++;
	t->total++;
	pthread_mutex_unlock(&t->lock);
	return e;
refuse:
	pthread_mutex_unlock(&t->lock);
	free(e);
	return NULL;
}

/* Under the lock: the socket is about to close; never touch it again. */
static void entry_unlink(struct conn_table *t, struct conn_entry *e)
{
	if (!e->linked)
		return;
	if (e->prev)
		e->prev->next = e->next;
	else
		t->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	if (!e->evicted)
		t->live--;
	t->total--;
	e->linked = false;
	e->prev = e->next = NULL;
}

/* Under the lock; true when the caller must free e (after unlocking). */
static bool entry_unref(struct conn_entry *e)
{
	return --e->refs == 0;
}

void conn_table_remove(struct conn_table *t, struct conn_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&t->lock);
	entry_unlink(t, e);
	bool last = entry_unref(e);
	pthread_mutex_unlock(&t->lock);
	if (last)
		free(e);
}

void conn_entry_set_busy(struct conn_entry *e, bool busy)
{
	if (!e)
		return;
	if (busy)
		atomic_store(&e->idle_since_ns, 0);
	else if (atomic_load(&e->idle_since_ns) == 0)
		atomic_store(&e->idle_since_ns, mono_ns());
}

int64_t conn_entry_idle_since(const struct conn_entry *e)
{
	return atomic_load(&((struct conn_entry *)e)->idle_since_ns);
}

void conn_entry_set_mhd_fd(struct conn_table *t, struct conn_entry *e, int mhd_fd, bool mhd_owns)
{
	pthread_mutex_lock(&t->lock);
	e->mhd_fd = mhd_fd;
	e->mhd_owns = mhd_owns;
	pthread_mutex_unlock(&t->lock);
}

struct conn_entry *conn_table_mhd_started(struct conn_table *t, int mhd_fd)
{
	struct conn_entry *found = NULL;
	pthread_mutex_lock(&t->lock);
	for (struct conn_entry *o = t->head; o; o = o->next) {
		if (o->mhd_fd == mhd_fd) {
			found = o;
			/* A plaintext socket's reference was handed over with it
			 * (this runs on libmicrohttpd's thread, maybe after the
			 * listener's thread is gone); a relay keeps its own. */
			if (!o->mhd_owns)
				o->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return found;
}

void conn_table_mhd_closed(struct conn_table *t, struct conn_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&t->lock);
	if (e->mhd_owns)
		entry_unlink(t, e); /* libmicrohttpd closes the socket next */
	e->mhd_fd = -1;
	bool last = entry_unref(e);
	pthread_mutex_unlock(&t->lock);
	if (last)
		free(e);
}

void conn_entry_body_progress(struct conn_entry *e, int64_t start_ns, uint64_t bytes)
{
	if (!e)
		return;
	atomic_store(&e->body_bytes, bytes);
	atomic_store(&e->body_start_ns, start_ns);
}

bool conn_body_too_slow(const struct server_config *cfg, int64_t start_ns, uint64_t bytes,
			int64_t now_ns)
{
	int64_t grace_ns = (int64_t)cfg->header_timeout_s * 1000000000LL;
	int64_t elapsed = now_ns - start_ns - grace_ns;
	if (!start_ns || cfg->body_min_rate == 0 || elapsed <= 0)
		return false;
	return (double)bytes < (double)cfg->body_min_rate * ((double)elapsed / 1e9);
}

unsigned conn_table_reap(struct conn_table *t, int64_t now_ns)
{
	unsigned n = 0;
	int64_t idle_max = (int64_t)t->cfg->header_timeout_s * 1000000000LL;

	pthread_mutex_lock(&t->lock);
	for (struct conn_entry *o = t->head; o; o = o->next) {
		if (o->evicted || o->mhd_fd < 0)
			continue;
		int64_t since = atomic_load(&o->idle_since_ns);
		bool stalled = o->mhd_owns && since && now_ns - since > idle_max;
		bool slow = conn_body_too_slow(t->cfg, atomic_load(&o->body_start_ns),
					       atomic_load(&o->body_bytes), now_ns);
		if (stalled || slow) {
			entry_shutdown(t, o);
			n++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

unsigned conn_table_count(struct conn_table *t)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = t->total;
	pthread_mutex_unlock(&t->lock);
	return n;
}

bool inflight_reserve(_Atomic uint64_t *used, uint64_t budget, uint64_t n)
{
	uint64_t cur = atomic_load(used);
	do {
		if (cur + n > budget || cur + n < cur)
			return false;
	} while (!atomic_compare_exchange_weak(used, &cur, cur + n));
	return true;
}

void inflight_release(_Atomic uint64_t *used, uint64_t n)
{
	atomic_fetch_sub(used, n);
}
