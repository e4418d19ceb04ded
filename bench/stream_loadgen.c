/*
 * stream_loadgen.c — simulated kiln-agents pushing to a real server over
 * real connections, for `make bench-server` (bench/bench-stream.sh).
 *
 * Each simulated agent has P processes of S stacks (agent-shaped: raw
 * addresses in a mapping with a build id, depth 8..23) packed once as the
 * WriteRawRequest kiln-agent's push sink queues, and pushes it every
 * interval as a new window, either as it is (WriteRaw) or through the
 * agent's own stream encoder (sink_stream.c): the same data both ways.
 * Agents are spread over T threads; each call is a new connection, as the
 * agent's libcurl client makes them.
 *
 * Prints one line of key=value figures: windows sent and acknowledged,
 * rows, request bytes, bytes per row after each agent's first window (the
 * steady state: stacks known), the wall time, and the latency of the
 * acknowledged pushes (p50, p99, max: request sent to answer read, on a
 * new connection).
 *
 *   stream_loadgen ADDR[,ADDR...] PROTOCOL AGENTS PROCS STACKS WINDOWS INTERVAL_MS THREADS
 *
 * With several addresses (servers behind no load balancer), agent i
 * pushes to address i mod N, as a balancer spreading connections would.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/sink_stream.h"
#include "client/client.h"
#include "common/ingest_proto.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "pprof/pprof.h"

#define WRITE_RAW "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"

struct sim_agent {
	uint8_t *req; /* WriteRawRequest */
	size_t len;
	struct stream_client *sc;
	uint64_t next_window;
};

static char *addrs[64];
static int n_addrs;
static bool stream_mode;
static int n_agents, n_procs, n_stacks, n_windows, interval_ms, n_threads;
static struct sim_agent *agents;
static _Atomic uint64_t windows_acked, windows_lost, rows_sent, bytes_sent, steady_rows,
    steady_bytes;

/* Latencies of acknowledged pushes, microseconds, one array per thread. */
struct lat {
	uint32_t *us;
	size_t n, cap;
};
static struct lat lats[256];

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void lat_add(struct lat *l, uint64_t us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		uint32_t *p = realloc(l->us, cap * sizeof(*p));

		if (!p)
			return; /* a latency less: the figures stay honest enough */
		l->us = p;
		l->cap = cap;
	}
	l->us[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One process's gzipped pprof, as the agent makes it. */
static int make_pprof(int agent, int proc, struct buf *out)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x2000000,
					.filename = "/usr/bin/service",
					.build_id = "0123456789abcdef0123456789abcdef01234567"};
	struct timespec ts;
	unsigned seed = (unsigned)(agent * 7919 + proc);
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 52631578);
	pprof_builder_set_time(b, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, 10000000000);
	uint64_t map = pprof_builder_mapping(b, &md);
	for (int s = 0; s < n_stacks; s++) {
		uint64_t locs[24];
		int depth = 8 + rand_r(&seed) % 16;

		for (int d = 0; d < depth; d++)
			locs[d] = pprof_builder_location(
			    b, map, 0x401000 + (uint64_t)(rand_r(&seed) % 4096) * 16, NULL, 0);
		int64_t c = 1 + rand_r(&seed) % 4, v[2] = {c, c * 52631578};
		pprof_builder_add_sample(b, locs, (size_t)depth, v, NULL, 0);
	}
	rc = pprof_builder_encode(b, true, out);
	pprof_builder_free(b);
	return rc;
}

static int make_agent(int i, struct sim_agent *a)
{
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries series[n_procs], *sp[n_procs];
	Parca__Profilestore__V1alpha1__LabelSet sets[n_procs];
	Parca__Profilestore__V1alpha1__Label lab[n_procs][4], *lp[n_procs][4];
	Parca__Profilestore__V1alpha1__RawSample raw[n_procs], *rp[n_procs];
	struct buf pp[n_procs];
	char vals[n_procs][3][32];
	int rc = 0;

	memset(pp, 0, sizeof(pp));
	for (int j = 0; j < n_procs && !rc; j++) {
		const char *names[4] = {"__name__", "comm", "node", "pid"};

		snprintf(vals[j][0], 32, "proc%d", j);
		snprintf(vals[j][1], 32, "agent-%d", i);
		snprintf(vals[j][2], 32, "%d", 1000 + j);
		const char *values[4] = {"parca_agent", vals[j][0], vals[j][1], vals[j][2]};
		for (int k = 0; k < 4; k++) {
			parca__profilestore__v1alpha1__label__init(&lab[j][k]);
			lab[j][k].name = (char *)names[k];
			lab[j][k].value = (char *)values[k];
			lp[j][k] = &lab[j][k];
		}
		parca__profilestore__v1alpha1__label_set__init(&sets[j]);
		sets[j].labels = lp[j];
		sets[j].n_labels = 4;
		rc = make_pprof(i, j, &pp[j]);
		parca__profilestore__v1alpha1__raw_sample__init(&raw[j]);
		raw[j].raw_profile.data = pp[j].data;
		raw[j].raw_profile.len = pp[j].len;
		rp[j] = &raw[j];
		parca__profilestore__v1alpha1__raw_profile_series__init(&series[j]);
		series[j].labels = &sets[j];
		series[j].samples = &rp[j];
		series[j].n_samples = 1;
		sp[j] = &series[j];
	}
	req.series = sp;
	req.n_series = (size_t)n_procs;
	if (!rc) {
		a->len = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
		a->req = malloc(a->len);
		if (!a->req)
			rc = -ENOMEM;
		else
			parca__profilestore__v1alpha1__write_raw_request__pack(&req, a->req);
	}
	for (int j = 0; j < n_procs; j++)
		buf_free(&pp[j]);
	a->sc = stream_client_new();
	a->next_window = 1;
	return rc ? rc : a->sc ? 0 : -ENOMEM;
}

/* Sends one window of agent a; counts it acked or lost. */
static void send_window(struct grpc_client *c, struct sim_agent *a, struct buf *req,
			struct buf *resp, struct lat *lat)
{
	struct grpc_status st = {0};
	struct kiln_error err = {0};
	size_t n_rows = 0;
	bool first = a->next_window == 1;
	int rc;

	if (!stream_mode) {
		uint64_t t0 = now_us();

		rc = grpc_client_unary(c, WRITE_RAW, a->req, a->len, resp, &st);
		n_rows = (size_t)n_procs * (size_t)n_stacks * 2;
		if (rc == 0 && st.code == GRPC_STATUS_OK) {
			lat_add(lat, now_us() - t0);
			atomic_fetch_add(&windows_acked, 1);
			atomic_fetch_add(&rows_sent, n_rows);
			atomic_fetch_add(&bytes_sent, a->len);
			if (!first) {
				atomic_fetch_add(&steady_rows, n_rows);
				atomic_fetch_add(&steady_bytes, a->len);
			}
		} else {
			atomic_fetch_add(&windows_lost, 1);
			fprintf(stderr, "WriteRaw: %s\n", st.message);
		}
		a->next_window++;
		return;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = stream_client_encode(a->sc, a->req, a->len, a->next_window, req, &n_rows);
		if (rc)
			break;
		uint64_t t0 = now_us();

		rc = grpc_client_unary(c, INGEST_PUSH_PATH, req->data, req->len, resp, &st);
		if (rc == 0 && st.code == GRPC_STATUS_OK)
			lat_add(lat, now_us() - t0);
		if (rc == 0 && st.code == GRPC_STATUS_OK)
			rc = stream_client_answer(a->sc, resp->data, resp->len, a->next_window,
						  &err);
		else
			stream_client_reset(a->sc);
		if (rc == 0 && st.code == GRPC_STATUS_OK) {
			atomic_fetch_add(&windows_acked, 1);
			atomic_fetch_add(&rows_sent, n_rows);
			atomic_fetch_add(&bytes_sent, req->len);
			if (!first) {
				atomic_fetch_add(&steady_rows, n_rows);
				atomic_fetch_add(&steady_bytes, req->len);
			}
			a->next_window++;
			return;
		}
		if (rc != -ECONNRESET)
			fprintf(stderr, "Push: %s %s\n", st.message, err.msg);
	}
	atomic_fetch_add(&windows_lost, 1);
	a->next_window++;
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct grpc_client *c[64] = {0};
	struct kiln_error err = {0};
	struct buf req = {0}, resp = {0};
	uint64_t start = now_ms();

	for (int k = 0; k < n_addrs; k++) {
		struct grpc_client_config cfg = {
		    .address = addrs[k], .insecure = true, .timeout_ms = 60000};

		if (!(c[k] = grpc_client_new(&cfg, &err))) {
			fprintf(stderr, "client: %s\n", err.msg);
			goto out;
		}
	}
	for (int w = 0; w < n_windows; w++) {
		for (int i = t; i < n_agents; i += n_threads)
			send_window(c[i % n_addrs], &agents[i], &req, &resp, &lats[t]);
		if (interval_ms) {
			uint64_t next = start + (uint64_t)(w + 1) * (uint64_t)interval_ms,
				 now = now_ms();
			if (next > now)
				usleep((useconds_t)(next - now) * 1000);
		}
	}
out:
	buf_free(&req);
	buf_free(&resp);
	for (int k = 0; k < n_addrs; k++)
		if (c[k])
			grpc_client_free(c[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[256];
	uint64_t t0;

	if (argc != 9) {
		fprintf(stderr,
			"usage: %s ADDR stream|writeraw AGENTS PROCS STACKS WINDOWS "
			"INTERVAL_MS THREADS\n",
			argv[0]);
		return 2;
	}
	for (char *save = NULL, *a = strtok_r(argv[1], ",", &save); a && n_addrs < 64;
	     a = strtok_r(NULL, ",", &save))
		addrs[n_addrs++] = a;
	if (!n_addrs)
		return 2;
	stream_mode = strcmp(argv[2], "stream") == 0;
	n_agents = atoi(argv[3]);
	n_procs = atoi(argv[4]);
	n_stacks = atoi(argv[5]);
	n_windows = atoi(argv[6]);
	interval_ms = atoi(argv[7]);
	n_threads = atoi(argv[8]);
	if (n_agents < 1 || n_procs < 1 || n_stacks < 1 || n_threads < 1 || n_threads > 256)
		return 2;
	agents = calloc((size_t)n_agents, sizeof(*agents));
	for (int i = 0; i < n_agents; i++)
		if (make_agent(i, &agents[i])) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
	t0 = now_ms();
	for (int t = 0; t < n_threads; t++)
		pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
	for (int t = 0; t < n_threads; t++)
		pthread_join(th[t], NULL);
	uint64_t ms = now_ms() - t0;
	struct lat all = {0};
	for (int t = 0; t < n_threads; t++) {
		for (size_t i = 0; i < lats[t].n; i++)
			lat_add(&all, lats[t].us[i]);
		free(lats[t].us);
	}
	qsort(all.us, all.n, sizeof(*all.us), cmp_u32);
#define PCT(p) (all.n ? all.us[(size_t)((double)(all.n - 1) * (p))] / 1000.0 : 0.0)
	printf("protocol=%s agents=%d windows_acked=%" PRIu64 " windows_lost=%" PRIu64
	       " rows=%" PRIu64 " bytes=%" PRIu64 " steady_bytes_per_row=%.2f wall_ms=%" PRIu64
	       " push_p50_ms=%.1f push_p99_ms=%.1f push_max_ms=%.1f\n",
	       stream_mode ? "stream" : "writeraw", n_agents, atomic_load(&windows_acked),
	       atomic_load(&windows_lost), atomic_load(&rows_sent), atomic_load(&bytes_sent),
	       steady_rows ? (double)steady_bytes / (double)steady_rows : 0.0, ms, PCT(0.50),
	       PCT(0.99), all.n ? all.us[all.n - 1] / 1000.0 : 0.0);
#undef PCT
	free(all.us);
	for (int i = 0; i < n_agents; i++) {
		free(agents[i].req);
		stream_client_free(agents[i].sc);
	}
	free(agents);
	return windows_lost ? 1 : 0;
}
