/*
 * bench_store.c — the driver of `make bench-server` (bench/bench-server.sh):
 * a synthetic fleet of agent-like CPU profiles ingested into the embedded
 * store, then merged.
 *
 * Fleet: 10 nodes x 20 busy processes; one profile per process per 10 s
 * window; each profile ~100 distinct stacks (depth 10-60) drawn from the
 * process' pool of 2,000 stacks. Profiles are shaped as kiln-agent pushes
 * them (make_agent_profile); --symbolized gives every frame a function,
 * file and line instead, as Go's runtime/pprof writes them. The 20 processes are 20 programs that run
 * on every node (same binary, same addresses), so their locations are
 * shared across nodes as they would be in a real fleet. --scale S ingests
 * S x 24 h (1.0 = 24 h, ~170M sample rows).
 *
 *   bench_store run DIR [--scale S] [--threads N] [--ingest-threads M] [--symbolized]
 *       N connections (writers); M server threads serving them in turn, as
 *       the server's ingest pool does (default M = N: one per connection).
 *       ingests, prints figures, writes the profiles of two peer cases as
 *       gzipped pprof files under DIR/peer-1h and DIR/peer-node0 for
 *       `go tool pprof -proto`, and prints kiln's merge totals for them.
 *   bench_store total FILE     prints the sum of sample type 0 of a pprof file
 *   bench_store anatomy [N] [--symbolized]
 *                              one process' N consecutive profiles (default
 *       60): per-profile CPU of inflate alone (Kiln's igzip, libdeflate,
 *       zlib), pprof_decode and a reused pprof_decoder next to the budget
 *       per profile at 1M sample rows/s per core, and how many Location/Function/string-table entries
 *       of each profile recur byte for byte in the one before (what a cache
 *       keyed by raw entry bytes could skip).
 *
 * BENCH_CLICKHOUSE_URL=http://HOST:PORT (make bench-scaleout): the same run
 * on the ClickHouse backend, through two store instances on one ClickHouse
 * (two stateless kiln servers; writer threads alternate between them), the
 * merges asked of the second.
 *
 * Two processes, so that what is printed is the server's alone: a forked
 * generator builds the profiles (gzipped as an agent sends them) and sends
 * one WriteRawRequest per profile over a socket per writer thread; the
 * bench process is the server: per connection a thread does what the
 * WriteRaw handler does minus HTTP/2 (ingest_prepare: unpack, label
 * validation, gunzip, pprof parse and validation; ingest_commit:
 * store_write_profile with WAL group commit and fsync), then the merges run
 * against the store. Ingest CPU and peak RSS are this process' own
 * (getrusage RUSAGE_SELF); the generator's peak is printed separately.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libdeflate.h>
#include <zlib.h>

#include "common/fdio.h"
#include "common/gzip.h"
#include "common/log.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "pprof/pprof.h"
#include "server/ingest.h"
#include "store/store.h"

#define NODES	    10
#define KINDS	    20
#define POOL	    2000
#define PER_PROFILE 100
#define MAX_DEPTH   60
#define WINDOW_MS   10000
#define LEVEL_CAP   256

struct kind {
	char *names[MAX_DEPTH][LEVEL_CAP];
	uint8_t depth[POOL];
	char file[64], build_id[64];
};

static struct kind *kinds; /* read-only after setup */

struct config {
	int64_t w_begin, w_end; /* the phase being run */
	const char *dir;
	double scale;
	int threads;
	int64_t t0, n_windows;
	int64_t peer_1h_windows, peer_node_windows;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static int level_size(int j)
{
	int m = 2 << (j / 4);

	return m > LEVEL_CAP ? LEVEL_CAP : m;
}

static void setup_kinds(void)
{
	kinds = calloc(KINDS, sizeof(*kinds));
	for (int k = 0; k < KINDS; k++) {
		struct kind *kd = &kinds[k];

		snprintf(kd->file, sizeof(kd->file), "/usr/bin/service-%02d", k);
		snprintf(kd->build_id, sizeof(kd->build_id), "%016llx%016llx",
			 (unsigned long long)mix(k + 1), (unsigned long long)mix(k + 100));
		for (int j = 0; j < MAX_DEPTH; j++)
			for (int i = 0; i < level_size(j); i++) {
				char b[96];

				snprintf(b, sizeof(b), "service%02d::module%d::function_%d_%d", k,
					 j / 6, j, i);
				kd->names[j][i] = strdup(b);
			}
		for (int s = 0; s < POOL; s++)
			kd->depth[s] = (uint8_t)(10 + mix((uint64_t)k * POOL + s) % 51);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double process_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* Kernel function names for the kernel frames of agent-shaped profiles. */
#define KERNEL_NAMES 400

static char *kernel_names[KERNEL_NAMES]; /* read-only after setup */

/* Profile shape: what kiln-agent pushes (the default), or every frame
 * symbolized as a Go program's runtime/pprof writes it (--symbolized). */
static bool symbolized_shape;

static void setup_kernel_names(void)
{
	for (int i = 0; i < KERNEL_NAMES; i++) {
		char b[64];

		snprintf(b, sizeof(b), "kernel_subsys%d_function_%d", i % 23, i);
		kernel_names[i] = strdup(b);
	}
}

/* A profile as kiln-agent pushes it (src/agent/profile.c): user frames are
 * addresses in their mapping (the executable, and libc for a third of the
 * stacks' leaf frames), left for the server to symbolize; a quarter of the
 * stacks end in 2-9 kernel frames, named by the agent (one function per
 * kernel symbol, file "[kernel.kallsyms]"); every sample carries the
 * thread_id and thread_name labels. One sample type (samples/count), so a
 * profile is ~100 sample rows as the fleet counts them. */
static void make_agent_profile(struct pprof_builder *b, const struct kind *kd, int kind,
			       uint64_t seed)
{
	struct pprof_mapping_desc exe = {.memory_start = 0x55d000400000ull,
					 .memory_limit = 0x55d004000000ull,
					 .file_offset = 0,
					 .filename = kd->file,
					 .build_id = kd->build_id};
	struct pprof_mapping_desc libc = {.memory_start = 0x7f3a10028000ull,
					  .memory_limit = 0x7f3a101bd000ull,
					  .file_offset = 0x28000,
					  .filename = "/usr/lib/x86_64-linux-gnu/libc.so.6",
					  .build_id = "2e01923fea4ad9f7fa50fe24e0f3385a45a6cd1c"};
	struct pprof_mapping_desc kernel = {.memory_start = 0xffffffff81000000ull,
					    .memory_limit = 0xffffffff83000000ull,
					    .filename = "[kernel.kallsyms]",
					    .has_functions = true};
	uint64_t m_exe = pprof_builder_mapping(b, &exe), m_libc = pprof_builder_mapping(b, &libc);
	uint64_t m_kernel = pprof_builder_mapping(b, &kernel);
	uint64_t locs[MAX_DEPTH + 10];
	char tid[16], tname[32];
	struct pprof_label_desc labels[2] = {{.key = "thread_id", .str = tid},
					     {.key = "thread_name", .str = tname}};

	snprintf(tid, sizeof(tid), "%d", 1000 + kind);
	snprintf(tname, sizeof(tname), "service-%02d", kind);
	for (int i = 0; i < PER_PROFILE; i++) {
		int s = (int)(mix(seed + (uint64_t)i) % POOL);
		int d = kd->depth[s], n = 0;
		uint64_t h = mix((uint64_t)kind * POOL + (uint64_t)s + 7);

		if (h % 4 == 0) { /* the kernel tail, leaf first */
			int nk = 2 + (int)((h >> 8) % 8);

			for (int j = 0; j < nk; j++) {
				int k = (int)(((h >> 16) + (uint64_t)j * 37) % KERNEL_NAMES);
				struct pprof_line_desc line = {
				    .function_id =
					pprof_builder_function(b, kernel_names[k], kernel_names[k],
							       "[kernel.kallsyms]", 0)};

				locs[n++] = pprof_builder_location(
				    b, m_kernel,
				    0xffffffff81000000ull + (uint64_t)k * 0x1000 + 0x40, &line, 1);
			}
		}
		for (int j = d - 1; j >= 0; j--) { /* user frames, leaf first */
			int idx = s % level_size(j);
			bool in_libc = h % 3 == 0 && j >= d - 2;
			uint64_t off = ((uint64_t)j * LEVEL_CAP + (uint64_t)idx) * 16;

			locs[n++] =
			    in_libc ? pprof_builder_location(
					  b, m_libc, 0x7f3a10028000ull + off % 0x190000, NULL, 0)
				    : pprof_builder_location(b, m_exe, 0x55d000400000ull + off,
							     NULL, 0);
		}
		int64_t v = 1 + (int64_t)(mix(seed ^ (uint64_t)s) % 20);
		pprof_builder_add_sample(b, locs, (size_t)n, &v, labels, 2);
	}
}

/* The same stacks with every frame symbolized (function, file, line), as
 * a Go program's runtime/pprof writes them. */
static void make_symbolized_profile(struct pprof_builder *b, const struct kind *kd, uint64_t seed)
{
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x4000000,
					.filename = kd->file,
					.build_id = kd->build_id,
					.has_functions = true};
	uint64_t locs[MAX_DEPTH];
	uint64_t map = pprof_builder_mapping(b, &md);

	for (int i = 0; i < PER_PROFILE; i++) {
		int s = (int)(mix(seed + (uint64_t)i) % POOL);
		int d = kd->depth[s];

		for (int j = 0; j < d; j++) {
			int idx = s % level_size(j);
			struct pprof_line_desc line = {0};

			line.function_id = pprof_builder_function(
			    b, kd->names[j][idx], kd->names[j][idx], "service.c", 0);
			line.line = 100 + idx;
			/* leaf first: the deepest frame is location 0 */
			locs[d - 1 - j] = pprof_builder_location(
			    b, map, 0x400000 + ((uint64_t)j * LEVEL_CAP + (uint64_t)idx) * 16,
			    &line, 1);
		}
		int64_t v = 1 + (int64_t)(mix(seed ^ (uint64_t)s) % 20);
		pprof_builder_add_sample(b, locs, (size_t)d, &v, NULL, 0);
	}
}

/* The profile of process (node, kind) in window w, gzipped as an agent
 * sends it (libdeflate level 1), appended to out. */
static void make_profile(int node, int kind, int64_t w, int64_t ts, struct buf *out)
{
	const struct kind *kd = &kinds[kind];
	struct pprof_builder *b = pprof_builder_new();
	uint64_t seed = mix(((uint64_t)node << 40) ^ ((uint64_t)kind << 32) ^ (uint64_t)w);

	pprof_builder_add_sample_type(b, "samples", "count");
	pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
	pprof_builder_set_time(b, ts * 1000000, (int64_t)WINDOW_MS * 1000000);
	if (symbolized_shape)
		make_symbolized_profile(b, kd, seed);
	else
		make_agent_profile(b, kd, kind, seed);
	pprof_builder_encode(b, true, out);
	pprof_builder_free(b);
}

static void write_peer_file(const struct config *cfg, const char *sub, int node, int kind,
			    int64_t w, const struct buf *gz)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/n%02d-k%02d-%08" PRId64 ".pb.gz", cfg->dir, sub, node,
		 kind, w);
	f = fopen(path, "w");
	if (f) {
		fwrite(gz->data, 1, gz->len, f);
		fclose(f);
	}
}

/* ---- the generator process: one thread per connection ----
 * Each thread sends, over its socket, one WriteRawRequest per profile of
 * its share of the fleet (u32 length + message), and an empty frame where
 * the warm-up phase ends. */
struct gen {
	const struct config *cfg;
	int id, fd;
};

static void send_phase(const struct gen *g, int64_t w_begin, int64_t w_end, struct buf *gz,
		       struct buf *msg)
{
	const struct config *cfg = g->cfg;
	char node_s[16], comm_s[32];

	for (int64_t w = w_begin; w < w_end; w++) {
		for (int pidx = g->id; pidx < NODES * KINDS; pidx += cfg->threads) {
			int node = pidx / KINDS, kind = pidx % KINDS;
			int64_t ts = cfg->t0 + w * WINDOW_MS + pidx * 37;

			buf_reset(gz);
			make_profile(node, kind, w, ts, gz);
			/* peer files: the last hour of process (0, 0); node 0, last peer_node_windows */
			if (node == 0 && kind == 0 && w >= cfg->n_windows - cfg->peer_1h_windows)
				write_peer_file(cfg, "peer-1h", node, kind, w, gz);
			if (node == 0 && w >= cfg->n_windows - cfg->peer_node_windows)
				write_peer_file(cfg, "peer-node0", node, kind, w, gz);

			snprintf(node_s, sizeof(node_s), "node-%02d", node);
			snprintf(comm_s, sizeof(comm_s), "service-%02d", kind);
			Parca__Profilestore__V1alpha1__Label l[3] = {
			    PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT,
			    PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT,
			    PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT};
			Parca__Profilestore__V1alpha1__Label *lp[3] = {&l[0], &l[1], &l[2]};
			Parca__Profilestore__V1alpha1__LabelSet ls =
			    PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
			Parca__Profilestore__V1alpha1__RawSample rs =
			    PARCA__PROFILESTORE__V1ALPHA1__RAW_SAMPLE__INIT;
			Parca__Profilestore__V1alpha1__RawSample *rsp = &rs;
			Parca__Profilestore__V1alpha1__RawProfileSeries se =
			    PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
			Parca__Profilestore__V1alpha1__RawProfileSeries *sep = &se;
			Parca__Profilestore__V1alpha1__WriteRawRequest req =
			    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;

			l[0].name = "__name__";
			l[0].value = "parca_agent";
			l[1].name = "node";
			l[1].value = node_s;
			l[2].name = "comm";
			l[2].value = comm_s;
			ls.n_labels = 3;
			ls.labels = lp;
			rs.raw_profile.data = gz->data;
			rs.raw_profile.len = gz->len;
			se.labels = &ls;
			se.n_samples = 1;
			se.samples = &rsp;
			req.n_series = 1;
			req.series = &sep;
			size_t n =
			    parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
			uint32_t len = (uint32_t)n;
			buf_reset(msg);
			if (buf_reserve(msg, n))
				exit(1);
			parca__profilestore__v1alpha1__write_raw_request__pack(&req, msg->data);
			if (fd_write_all(g->fd, &len, sizeof(len)) ||
			    fd_write_all(g->fd, msg->data, n))
				exit(1);
		}
	}
}

static void *gen_main(void *arg)
{
	const struct gen *g = arg;
	const struct config *cfg = g->cfg;
	struct buf gz = {0}, msg = {0};
	uint32_t zero = 0;

	send_phase(g, 0, cfg->n_windows / 2, &gz, &msg);
	if (fd_write_all(g->fd, &zero, sizeof(zero)))
		exit(1);
	send_phase(g, cfg->n_windows / 2, cfg->n_windows, &gz, &msg);
	close(g->fd);
	buf_free(&gz);
	buf_free(&msg);
	return NULL;
}

/* Runs in the forked generator process; never returns. */
static void generator(const struct config *cfg, const int *fds)
{
	struct gen *g = calloc((size_t)cfg->threads, sizeof(*g));
	pthread_t *th = calloc((size_t)cfg->threads, sizeof(*th));

	setup_kinds();
	setup_kernel_names();
	for (int i = 0; i < cfg->threads; i++) {
		g[i] = (struct gen){cfg, i, fds[i]};
		pthread_create(&th[i], NULL, gen_main, &g[i]);
	}
	for (int i = 0; i < cfg->threads; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

/* ---- the server process: one ingest thread per connection ----
 * What rpc_write_raw does with a request, minus HTTP/2: ingest_prepare
 * (WriteRawRequest unpack, label validation, gunzip, pprof parse and
 * validation) and ingest_commit (store_write_profile: interning, WAL, group
 * commit fsync, head). */
struct worker {
	struct store *s;
	struct ingest_decoders *decoders; /* shared, as the server's; NULL: --no-decoder-reuse */
	int *fd;			  /* the connections this thread serves, in turn */
	bool *done, *eof;		  /* per connection: phase over; stream over */
	size_t n_fd;
	struct buf msg;
	double decode_cpu, write_cpu;
	uint64_t rows, profiles, failures;
};

static int64_t wall_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads and ingests one request from connection j; marks it done at the
 * end of the phase (an empty frame) or of the stream. */
static void serve_one(struct worker *wk, size_t j)
{
	uint32_t len;

	if (fd_read_all(wk->fd[j], &len, sizeof(len))) {
		wk->eof[j] = wk->done[j] = true;
		return;
	}
	if (len == 0) {
		wk->done[j] = true;
		return;
	}
	buf_reset(&wk->msg);
	if (buf_reserve(&wk->msg, len) || fd_read_all(wk->fd[j], wk->msg.data, len)) {
		wk->eof[j] = wk->done[j] = true;
		wk->failures++;
		return;
	}
	struct ingest_limits lim = {.now_ms = wall_now_ms()};
	struct ingest_batch b = {0};
	struct kiln_error err = {0};
	struct arena *a = arena_new(0);
	double c0 = thread_cpu_s();
	lim.decoder = wk->decoders ? ingest_decoder_take(wk->decoders) : NULL;
	int rc = a ? ingest_prepare(wk->msg.data, len, &lim, a, &b, &err) : -ENOMEM;
	double c1 = thread_cpu_s();

	wk->decode_cpu += c1 - c0;
	if (rc == 0) {
		rc = ingest_commit(wk->s, &b, &err);
		wk->write_cpu += thread_cpu_s() - c1;
	}
	if (rc) {
		if (!wk->failures++)
			fprintf(stderr, "write failed: %s\n", err.msg);
	} else {
		wk->rows += b.total_samples;
		wk->profiles += b.n_profiles;
	}
	c0 = thread_cpu_s();
	ingest_batch_release(&b);
	if (wk->decoders)
		ingest_decoder_give(wk->decoders, lim.decoder);
	arena_free(a);
	wk->decode_cpu += thread_cpu_s() - c0;
}

/* Serves its connections round-robin, one request at a time, until each
 * has ended the phase: like a server's ingest pool thread. */
static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	bool more = true;

	for (size_t j = 0; j < wk->n_fd; j++)
		wk->done[j] = wk->eof[j];
	while (more) {
		more = false;
		for (size_t j = 0; j < wk->n_fd; j++)
			if (!wk->done[j]) {
				serve_one(wk, j);
				more = true;
			}
	}
	return NULL;
}

#define TYPE "parca_agent:samples:count:cpu:nanoseconds:delta"

static double median(double *t, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
			double x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[n / 2];
}

/* Median of `runs` merges written out as gzipped pprof the way the server's
 * PPROF report does (store_merge_pprof: merge + encode + gzip in one go);
 * returns wall ms, sets *cpu_ms to the median thread CPU ms (on a loaded
 * machine the wall time includes waiting for a core), fills samples, total
 * and the gzipped size (*gz_bytes) of the last. */
static double time_merge(struct store *s, const struct store_matcher *m, size_t nm, int64_t lo,
			 int64_t hi, int runs, size_t *samples, int64_t *total, size_t *gz_bytes,
			 double *cpu_ms)
{
	double t[16], c[16];
	struct store_selector sel = {TYPE, m, nm, lo, hi};

	for (int r = 0; r < runs; r++) {
		struct store_pprof_result res = {0};
		struct kiln_error err = {0};
		struct buf out = {0};
		double t0 = now_s(), c0 = thread_cpu_s();

		if (store_merge_pprof(s, &sel, true, &out, &res, &err))
			fprintf(stderr, "merge: %s\n", err.msg);
		t[r] = (now_s() - t0) * 1000;
		c[r] = (thread_cpu_s() - c0) * 1000;
		*samples = res.n_samples;
		*total = res.total;
		*gz_bytes = out.len;
		buf_free(&out);
	}
	*cpu_ms = median(c, runs);
	return median(t, runs);
}

/* field: "VmRSS" (now), "VmHWM" (peak so far), "RssAnon" or "RssFile" (now)
 * of this process. */
static double status_mb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256], fmt[64];
	double kb = 0;

	snprintf(fmt, sizeof(fmt), "%s: %%lf kB", field);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb / 1024;
}

static uint64_t dir_bytes(const char *dir, const char *suffix)
{
	char cmd[4200];
	uint64_t total = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find '%s' -type f -name '*%s' -printf '%%s\\n'", dir, suffix);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	unsigned long long v;
	while (fscanf(f, "%llu", &v) == 1)
		total += v;
	pclose(f);
	return total;
}

static int run(const char *dir, double scale, int threads, int ingest_threads, bool reuse)
{
	struct config cfg = {.dir = dir, .scale = scale, .threads = threads};
	struct store_options o = {0};
	struct store *s;
	struct kiln_error err = {0};
	char path[4096];

	cfg.n_windows = (int64_t)(scale * 24 * 360 + 0.5);
	if (cfg.n_windows < 1)
		cfg.n_windows = 1;
	cfg.peer_1h_windows = cfg.n_windows < 360 ? cfg.n_windows : 360;
	/* go tool pprof needs ~50-150 ms per file here; keep its subset at
	 * 20 processes x 25 windows = 500 files */
	cfg.peer_node_windows = cfg.n_windows < 25 ? cfg.n_windows : 25;
	/* aligned end so that the last hour is deterministic; recent enough
	 * that no retention applies */
	int64_t end = ((int64_t)time(NULL) * 1000 / 3600000) * 3600000;
	cfg.t0 = end - cfg.n_windows * WINDOW_MS;
	snprintf(path, sizeof(path), "%s/store", dir);
	o.path = path;
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/peer-1h", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/peer-node0", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/store", dir);
	printf("scale: %.4f of 24 h = %.2f h of data: %d nodes x %d processes, one profile per "
	       "process per 10 s (%" PRId64 " windows), ~%d stacks per profile from a pool of %d, "
	       "depth 10-60, %s; %d writer connections served by %d server threads%s\n",
	       scale, cfg.n_windows * WINDOW_MS / 3.6e6, NODES, KINDS, cfg.n_windows, PER_PROFILE,
	       POOL,
	       symbolized_shape ? "every frame symbolized (--symbolized)"
				: "shaped as kiln-agent pushes them (user frames unsymbolized)",
	       threads, ingest_threads < threads ? ingest_threads : threads,
	       reuse ? "" : " (no decoder reuse)");
	/* The generator is a separate process, so that the figures below
	 * (CPU, RSS) are the server's alone. */
	int *srv_fd = calloc((size_t)threads, sizeof(int)),
	    *gen_fd = calloc((size_t)threads, sizeof(int));
	for (int i = 0; i < threads; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
			perror("socketpair");
			return 1;
		}
		srv_fd[i] = sv[0];
		gen_fd[i] = sv[1];
	}
	fflush(stdout);
	pid_t gen_pid = fork();
	if (gen_pid < 0) {
		perror("fork");
		return 1;
	}
	if (gen_pid == 0) {
		for (int i = 0; i < threads; i++)
			close(srv_fd[i]);
		generator(&cfg, gen_fd);
	}
	for (int i = 0; i < threads; i++)
		close(gen_fd[i]);
	const char *ch_url = getenv("BENCH_CLICKHOUSE_URL");
	struct store *s2 = NULL;
	if (ch_url && *ch_url) {
		mkdir(path, 0755); /* empty: the disk figures below read it */
		o.backend = STORE_BACKEND_CLICKHOUSE;
		o.clickhouse.url = ch_url;
		o.retention_ms = 0;
	}
	if (store_open(&o, &s, &err) || (ch_url && *ch_url && store_open(&o, &s2, &err))) {
		fprintf(stderr, "open: %s\n", err.msg);
		kill(gen_pid, SIGTERM);
		return 1;
	}

	/* Two phases: the first half of the windows sees most stacks for the
	 * first time (slow path: interning), the second is the steady state of
	 * a running fleet. */
	int nw = ingest_threads < threads ? ingest_threads : threads;
	/* Decode memory reused across requests as the server does (one
	 * decoder per request in flight, kept for the next). */
	struct ingest_decoders *decoders = reuse ? ingest_decoders_new((size_t)nw) : NULL;
	struct worker *wk = calloc((size_t)nw, sizeof(*wk));
	pthread_t *th = calloc((size_t)nw, sizeof(*th));
	uint64_t rows = 0, profiles = 0, failures = 0;
	double t0 = now_s(), wall = 0, cpu = 0;
	for (int i = 0; i < nw; i++) {
		wk[i] = (struct worker){.s = s2 && i % 2 ? s2 : s, .decoders = decoders};
		wk[i].fd = calloc((size_t)threads / nw + 1, sizeof(int));
		wk[i].done = calloc((size_t)threads / nw + 1, sizeof(bool));
		wk[i].eof = calloc((size_t)threads / nw + 1, sizeof(bool));
	}
	for (int c = 0; c < threads; c++)
		wk[c % nw].fd[wk[c % nw].n_fd++] = srv_fd[c];
	for (int phase = 0; phase < 2; phase++) {
		double cpu0 = process_cpu_s(), p0 = now_s();
		uint64_t prow = 0;
		double pdecode = 0, pwrite = 0;

		for (int i = 0; i < nw; i++) {
			wk[i].rows = wk[i].profiles = 0;
			wk[i].decode_cpu = wk[i].write_cpu = 0;
			pthread_create(&th[i], NULL, worker_main, &wk[i]);
		}
		for (int i = 0; i < nw; i++) {
			pthread_join(th[i], NULL);
			prow += wk[i].rows;
			profiles += wk[i].profiles;
			pdecode += wk[i].decode_cpu;
			pwrite += wk[i].write_cpu;
		}
		if (phase == 1 && store_flush(s, &err))
			fprintf(stderr, "flush: %s\n", err.msg);
		double pcpu = process_cpu_s() - cpu0, pwall = now_s() - p0;
		printf("ingest %s: %" PRIu64
		       " rows, %.0f sample rows/s per core (server CPU %.1f s: WriteRaw decode "
		       "%.1f s, store_write_profile %.1f s, the rest WAL leader/background), "
		       "%.1f s wall; inside store_write_profile alone: %.0f rows/s per core\n",
		       phase ? "steady state (second half, incl. final cut+compaction)"
			     : "warm-up (first half, new stacks)",
		       prow, prow / pcpu, pcpu, pdecode, pwrite, pwall, prow / pwrite);
		printf("  RSS now %.0f MB, peak so far %.0f MB\n", status_mb("VmRSS"),
		       status_mb("VmHWM"));
		rows += prow;
		cpu += pcpu;
	}
	ingest_decoders_free(decoders);
	for (int i = 0; i < nw; i++) {
		failures += wk[i].failures;
		buf_free(&wk[i].msg);
		free(wk[i].fd);
		free(wk[i].done);
		free(wk[i].eof);
	}
	for (int i = 0; i < threads; i++)
		close(srv_fd[i]);
	int gen_status = 0;
	waitpid(gen_pid, &gen_status, 0);
	if (!WIFEXITED(gen_status) || WEXITSTATUS(gen_status)) {
		fprintf(stderr, "generator process failed (status %d)\n", gen_status);
		failures++;
	}
	struct rusage gen_ru;
	getrusage(RUSAGE_CHILDREN, &gen_ru);
	free(srv_fd);
	free(gen_fd);
	wall = now_s() - t0;
	printf("ingest: %" PRIu64 " sample rows in %" PRIu64 " profiles (%" PRIu64
	       " failed); %.1f s wall; overall %.0f sample rows/s per core\n",
	       rows, profiles, failures, wall, rows / cpu);
	struct store_stats st;
	store_get_stats(s, &st);
	printf("wal: %" PRIu64 " fsyncs, mean %.2f ms\n", st.wal_fsyncs,
	       st.wal_fsyncs ? st.wal_fsync_ns_total / 1e6 / st.wal_fsyncs : 0.0);
	uint64_t blocks = dir_bytes(path, ".kb"), meta = dir_bytes(path, "meta.log");
	printf("disk: %" PRIu64 " bytes in %" PRIu64 " blocks = %.2f bytes per sample row; "
	       "metastore log %" PRIu64 " bytes (%.2f bytes/row); all together %.2f bytes/row; "
	       "%" PRIu64 " stacks, %" PRIu64 " locations\n",
	       blocks, st.blocks, (double)blocks / rows, meta, (double)meta / rows,
	       (double)(blocks + meta) / rows, st.stacks, st.locations);

	printf("RSS after ingest: %.0f MB, peak during ingest %.0f MB (server process: store with "
	       "%" PRIu64 " head rows)\n",
	       status_mb("VmRSS"), status_mb("VmHWM"), st.head_rows);
	size_t samples, gz;
	int64_t total;
	struct store_matcher m1[2] = {{STORE_MATCH_EQ, "node", "node-00", NULL},
				      {STORE_MATCH_EQ, "comm", "service-00", NULL}};
	int64_t last = cfg.t0 + cfg.n_windows * WINDOW_MS;
	int64_t lo1 = last - cfg.peer_1h_windows * WINDOW_MS;
	double merge_cpu;
	if (s2) { /* merges on the server that wrote only half of the data */
		struct store *t = s;
		s = s2;
		s2 = t;
	}
	double ms = time_merge(s, m1, 2, lo1, last, 7, &samples, &total, &gz, &merge_cpu);
	printf("merge one process, last %.2f h: %.2f ms wall, %.2f ms CPU (median of 7, merge + "
	       "pprof encode + gzip; %zu samples, total %" PRId64 ", %zu KB gzipped); RSS peak so "
	       "far %.0f MB\n",
	       (last - lo1) / 3.6e6, ms, merge_cpu, samples, total, gz / 1024, status_mb("VmHWM"));
	printf("peer-1h kiln_total %" PRId64 " kiln_ms %.2f\n", total, ms);
	ms = time_merge(s, NULL, 0, cfg.t0, last, 3, &samples, &total, &gz, &merge_cpu);
	printf("merge everything, %.2f h x %d processes: %.1f ms wall, %.1f ms CPU (median of 3, "
	       "merge + pprof encode + gzip; %zu samples, total %" PRId64 ", %zu KB gzipped); RSS "
	       "peak so far %.0f MB (now: heap and other anonymous %.0f MB, mapped block and other "
	       "file pages %.0f MB)\n",
	       (last - cfg.t0) / 3.6e6, NODES * KINDS, ms, merge_cpu, samples, total, gz / 1024,
	       status_mb("VmHWM"), status_mb("RssAnon"), status_mb("RssFile"));
	int64_t lo_node = last - cfg.peer_node_windows * WINDOW_MS;
	ms = time_merge(s, m1, 1, lo_node, last, 3, &samples, &total, &gz, &merge_cpu);
	printf("merge node-00 (20 processes), last %.2f h: %.1f ms wall, %.1f ms CPU (%zu "
	       "samples); RSS peak so far %.0f MB\n",
	       (last - lo_node) / 3.6e6, ms, merge_cpu, samples, status_mb("VmHWM"));
	printf("peer-node0 kiln_total %" PRId64 " kiln_ms %.2f\n", total, ms);
	store_close(s);
	store_close(s2);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("peak RSS: %.0f MB (server process alone; the profile generator, a separate "
	       "process, peaked at %.0f MB)\n",
	       ru.ru_maxrss / 1024.0, gen_ru.ru_maxrss / 1024.0);
	free(wk);
	free(th);
	return failures ? 1 : 0;
}

static int total(const char *path)
{
	struct pprof_profile *p;
	struct kiln_error err = {0};
	int64_t t = 0;

	if (pprof_decode_file(path, NULL, &p, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	const pprof_msg *m = pprof_profile_msg(p);
	for (size_t i = 0; i < m->n_sample; i++)
		t += m->sample[i]->value[0];
	printf("%" PRId64 "\n", t);
	pprof_profile_free(p);
	return 0;
}

/* ---- anatomy: what one agent profile costs to decode ---- */

/* The payloads of top-level LEN fields number `field` of a Profile message
 * (4 location, 5 function, 6 string_table), without parsing them. */
static size_t top_fields(const uint8_t *p, size_t n, uint32_t field, const uint8_t **at,
			 size_t *len, size_t max)
{
	const uint8_t *end = p + n;
	size_t k = 0;

	while (p < end && k < max) {
		uint64_t key = 0, v = 0;
		int sh = 0;

		while (p < end && (*p & 0x80))
			key |= (uint64_t)(*p++ & 0x7f) << (sh += 7, sh - 7);
		if (p < end)
			key |= (uint64_t)*p++ << sh;
		if ((key & 7) == 0 || (key & 7) == 2) {
			sh = 0;
			while (p < end && (*p & 0x80))
				v |= (uint64_t)(*p++ & 0x7f) << (sh += 7, sh - 7);
			if (p < end)
				v |= (uint64_t)*p++ << sh;
		} else {
			return k; /* pprof writes no fixed-width fields */
		}
		if ((key & 7) == 2) {
			if (v > (size_t)(end - p))
				return k;
			if ((key >> 3) == field) {
				at[k] = p;
				len[k++] = (size_t)v;
			}
			p += v;
		}
	}
	return k;
}

/* zlib's inflate of one gzip stream into out (a peer for the floor). */
static void zlib_gunzip(const struct buf *gz, struct buf *out)
{
	z_stream zs = {0};

	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return;
	zs.next_in = gz->data;
	zs.avail_in = (uInt)gz->len;
	zs.next_out = out->data;
	zs.avail_out = (uInt)out->cap;
	inflate(&zs, Z_FINISH);
	inflateEnd(&zs);
}

/* Mean sample rows per profile (pprof samples: one row each). */
static double rows_per_profile(struct buf *gz, int n)
{
	size_t rows = 0;

	for (int w = 0; w < n; w++) {
		struct pprof_profile *p = NULL;

		if (pprof_decode(gz[w].data, gz[w].len, NULL, &p, NULL) == 0)
			rows += pprof_sample_count(p);
		pprof_profile_free(p);
	}
	return n ? (double)rows / n : 0;
}

/* mode: 0 libdeflate, 1 pprof_decode, 2 a reused pprof_decoder, 3 Kiln's
 * gunzip (gzip_inflate_with, igzip), 4 zlib. */
static double anatomy_time(struct buf *gz, int n, int mode, struct pprof_decoder *d,
			   struct libdeflate_decompressor *inf, struct buf *out)
{
	struct gzip_inflater *z = gzip_inflater_new();

	double best = 1e9;

	for (int round = 0; round < 3; round++) {
		double c0 = thread_cpu_s();

		for (int w = 0; w < n; w++) {
			struct pprof_profile *p = NULL;
			struct kiln_error err = {0};
			size_t got = 0;

			if (mode == 0)
				libdeflate_gzip_decompress(inf, gz[w].data, gz[w].len, out->data,
							   out->cap, &got);
			else if (mode == 1 &&
				 pprof_decode(gz[w].data, gz[w].len, NULL, &p, &err) == 0)
				pprof_profile_free(p);
			else if (mode == 2 && pprof_decoder_decode(d, gz[w].data, gz[w].len, NULL,
								   &p, &err) == 0)
				pprof_decoder_recycle(d, p);
			else if (mode == 3) {
				buf_reset(out);
				gzip_inflate_with(z, gz[w].data, gz[w].len, 0, out, &err);
			} else if (mode == 4)
				zlib_gunzip(&gz[w], out);
		}
		double t = (thread_cpu_s() - c0) / n * 1e6;
		best = t < best ? t : best;
	}
	gzip_inflater_free(z);
	return best;
}

static int anatomy(int n)
{
	struct buf *gz = calloc((size_t)n, sizeof(*gz)), *raw = calloc((size_t)n, sizeof(*raw));
	struct libdeflate_decompressor *inf = libdeflate_alloc_decompressor();
	struct pprof_decoder *d = pprof_decoder_new();
	struct buf out = {0};
	size_t max = 1 << 16;
	const uint8_t **at[2] = {calloc(max, sizeof(void *)), calloc(max, sizeof(void *))};
	size_t *len[2] = {calloc(max, sizeof(size_t)), calloc(max, sizeof(size_t))};

	if (!gz || !raw || !inf || !d || !at[0] || !at[1] || !len[0] || !len[1] ||
	    buf_reserve(&out, 16 << 20))
		return 1;
	setup_kinds();
	setup_kernel_names();
	for (int w = 0; w < n; w++) {
		size_t got = 0;

		make_profile(0, 0, w, (int64_t)w * WINDOW_MS, &gz[w]);
		if (libdeflate_gzip_decompress(inf, gz[w].data, gz[w].len, out.data, out.cap,
					       &got) != LIBDEFLATE_SUCCESS ||
		    buf_append(&raw[w], out.data, got))
			return 1;
	}
	printf("anatomy: %d consecutive profiles of one process, %zu bytes gzipped -> %zu "
	       "inflated (the first)\n",
	       n, gz[0].len, raw[0].len);
	printf("per profile, thread CPU (best of 3): inflate alone: Kiln's (ISA-L igzip) %.1f us, "
	       "libdeflate %.1f us, zlib %.1f us; pprof_decode %.1f us; pprof_decoder_decode "
	       "(reused) %.1f us; the whole budget at 1M sample rows/s per core: %.1f us\n",
	       anatomy_time(gz, n, 3, d, inf, &out), anatomy_time(gz, n, 0, d, inf, &out),
	       anatomy_time(gz, n, 4, d, inf, &out), anatomy_time(gz, n, 1, d, inf, &out),
	       anatomy_time(gz, n, 2, d, inf, &out), rows_per_profile(gz, n));
	const char *names[] = {"Location", "Function", "string_table"};
	for (uint32_t f = 4; f <= 6; f++) {
		size_t total = 0, same = 0, same_pos = 0;

		for (int w = 1; w < n; w++) {
			size_t np =
			    top_fields(raw[w - 1].data, raw[w - 1].len, f, at[0], len[0], max);
			size_t nc = top_fields(raw[w].data, raw[w].len, f, at[1], len[1], max);

			for (size_t i = 0; i < nc; i++) {
				bool hit = false;

				for (size_t j = 0; j < np && !hit; j++)
					hit = len[0][j] == len[1][i] &&
					      memcmp(at[0][j], at[1][i], len[1][i]) == 0;
				total++;
				same += hit;
				same_pos += i < np && len[0][i] == len[1][i] &&
					    memcmp(at[0][i], at[1][i], len[1][i]) == 0;
			}
		}
		printf("%s: %.0f entries per profile; byte-identical to an entry of the previous "
		       "profile %.1f%%, at the same index %.1f%%\n",
		       names[f - 4], (double)total / (n - 1), 100.0 * same / total,
		       100.0 * same_pos / total);
	}
	for (int w = 0; w < n; w++) {
		buf_free(&gz[w]);
		buf_free(&raw[w]);
	}
	free(gz);
	free(raw);
	free(at[0]);
	free(at[1]);
	free(len[0]);
	free(len[1]);
	buf_free(&out);
	pprof_decoder_free(d);
	libdeflate_free_decompressor(inf);
	return 0;
}

int main(int argc, char **argv)
{
	double scale = 0.02;
	int threads = 8, ingest_threads = 0;
	bool reuse = true;

	log_set_level(LOG_WARN);
	if (argc == 3 && strcmp(argv[1], "total") == 0)
		return total(argv[2]);
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--symbolized") == 0) {
			symbolized_shape = true;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			argc--;
			break;
		}
	}
	if (argc >= 2 && strcmp(argv[1], "anatomy") == 0)
		return anatomy(argc >= 3 && atoi(argv[2]) > 1 ? atoi(argv[2]) : 60);
	if (argc < 3 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: bench_store run DIR [--scale S] [--threads N] "
				"[--ingest-threads M] [--no-decoder-reuse] [--symbolized]\n"
				"       bench_store total FILE\n"
				"       bench_store anatomy [N] [--symbolized]\n");
		return 2;
	}
	for (int i = 3; i < argc; i += 2) {
		if (strcmp(argv[i], "--no-decoder-reuse") == 0) {
			reuse = false;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			break;
		if (strcmp(argv[i], "--scale") == 0)
			scale = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--ingest-threads") == 0)
			ingest_threads = atoi(argv[i + 1]);
	}
	if (scale <= 0 || threads < 1)
		return 2;
	if (ingest_threads < 1)
		ingest_threads = threads;
	return run(argv[2], scale, threads, ingest_threads, reuse);
}
