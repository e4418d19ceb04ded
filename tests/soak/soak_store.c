/*
 * soak_store.c — fault injection in the store's I/O and allocation paths
 * (make soak-faults). Linked with -Wl,--wrap for the functions of
 * fault_inject.h against libkiln.a, so the Nth write/pwrite/fsync/
 * fdatasync/ftruncate/rename/open/malloc/calloc/realloc made by Kiln's own
 * code fails with EIO, ENOSPC or ENOMEM.
 *
 * One run = two processes on a fresh directory:
 *   1. the writer opens a store with the fault armed, writes W profiles
 *      (one series each, label seq=I, timestamp 1000 + 300*I so that they
 *      span several blocks), flushes half-way and at the end (head cut,
 *      block write, compaction), then closes the store or, in "crash" runs,
 *      _exits without closing. Each write acknowledged (0 returned) is
 *      appended to acked.txt before the next one starts;
 *   2. the checker, with no fault, reopens the store and checks the
 *      recovery invariants: the store opens; every acknowledged seq is
 *      there; every series present is one the writer attempted, exactly
 *      once, with exactly its profile's value (nothing half-written); the
 *      merge of everything totals the same; and a new write succeeds.
 * Either process dying of a signal (a crash, an abort, the 60 s alarm of a
 * hang) is reported as such.
 *
 *   soak_store sweep [--ops SPEC,...] [--max-runs N] [--writes W] [--dir D]
 *       a calibration run counts each op's calls, then every op is failed
 *       at up to N points spread over 1..calls, once transiently (that call
 *       alone) with a clean close and once persistently (every call from
 *       the Nth on) followed by a crash; prints one row per op and a
 *       reproducer line per failure. SPEC is op or op:ERRNO (EIO, ENOSPC,
 *       ENOMEM, EDQUOT). Exit 1 when any run broke an invariant.
 *   soak_store run --op OP[:ERRNO] --nth N [--persistent] [--crash]
 *       [--writes W] [--dir D]
 *       one run, with the writer's and checker's logs on stderr.
 *   soak_store populate --dir D --series N [--threads T] [--crash]
 *       writes N series (one small profile each, T writers at once so that
 *       group commit batches their fsyncs) into the store at D, for timing
 *       the server's start on it; --crash leaves them in the WAL (no close).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "fault_inject.h"
#include "store_test_util.h"

#define SOAK_TYPE     "soak:samples:count:cpu:nanoseconds:delta"
#define SOAK_STACKS   3
#define CHILD_TIMEOUT 60

/* Checker verdicts (its exit status). */
enum verdict {
	VERDICT_OK = 0,
	VERDICT_LOST = 1,
	VERDICT_CORRUPT = 2,
	VERDICT_OPEN_FAILED = 3,
	VERDICT_WRITE_FAILED = 4,
	VERDICT_HARNESS = 5,
};

struct fault_plan {
	enum fault_op op;
	int err;
	uint64_t nth; /* 0: count only */
	bool persistent;
	bool crash; /* writer _exits without store_close */
	int writes;
};

static int64_t seq_timestamp(int seq)
{
	return 1000 + (int64_t)seq * 300;
}

/* The samples total of seq's profile: make_profile(SOAK_STACKS, seq + 1, seq). */
static int64_t seq_value(int seq)
{
	int64_t base = seq + 1;

	return SOAK_STACKS * base + SOAK_STACKS * (SOAK_STACKS - 1) / 2;
}

static void store_opts(struct store_options *o, const char *path)
{
	memset(o, 0, sizeof(*o));
	o->path = path;
	o->block_duration_ms = 2000; /* W writes span several windows */
}

static int write_seq(struct store *s, int seq, const struct pprof_profile *p,
		     struct kiln_error *err)
{
	char seqbuf[32];

	snprintf(seqbuf, sizeof(seqbuf), "%d", seq);
	struct label l[2] = {{"__name__", "soak"}, {"seq", seqbuf}};
	return store_write_profile(s, l, 2, p, seq_timestamp(seq), true, err);
}

static void write_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_line(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && fault_real_write(fd, line, (size_t)n) != n)
		_exit(VERDICT_HARNESS);
}

/* The writer process: never returns. Profiles are built before the fault is
 * armed so that only the store's own calls are counted. */
static void writer_main(const char *dir, const struct fault_plan *plan)
{
	char path[4096];
	struct store_options o;
	struct store *s = NULL;
	struct kiln_error err = {0};
	struct pprof_profile **profiles = calloc((size_t)plan->writes, sizeof(*profiles));
	int acked_fd, counts_fd;

	alarm(CHILD_TIMEOUT);
	snprintf(path, sizeof(path), "%s/acked.txt", dir);
	acked_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	snprintf(path, sizeof(path), "%s/counts.txt", dir);
	counts_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!profiles || acked_fd < 0 || counts_fd < 0)
		_exit(VERDICT_HARNESS);
	for (int i = 0; i < plan->writes; i++)
		if (!(profiles[i] = make_profile(SOAK_STACKS, i + 1, i)))
			_exit(VERDICT_HARNESS);
	snprintf(path, sizeof(path), "%s/store", dir);
	store_opts(&o, path);

	fault_arm(plan->op, plan->nth, plan->err, plan->persistent);
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "writer: store_open: %s\n", err.msg);
		goto out;
	}
	for (int i = 0; i < plan->writes; i++) {
		kiln_error_clear(&err);
		if (write_seq(s, i, profiles[i], &err) == 0)
			write_line(acked_fd, "%d\n", i);
		else
			fprintf(stderr, "writer: write %d: %s\n", i, err.msg);
		if (i == plan->writes / 2 || i == plan->writes - 1) {
			kiln_error_clear(&err);
			if (store_flush(s, &err))
				fprintf(stderr, "writer: flush after %d: %s\n", i, err.msg);
		}
	}
	if (!plan->crash)
		store_close(s);
out:
	fault_disarm();
	for (int i = 0; i < FAULT_N_OPS; i++)
		write_line(counts_fd, "%s %" PRIu64 "\n", fault_op_name(i), fault_count(i));
	write_line(counts_fd, "injected %" PRIu64 "\n", fault_injected());
	_exit(0);
}

struct check_state {
	int writes;
	int *seen; /* per seq: series found */
	int64_t total;
	bool corrupt;
};

static void check_series(void *ctx, const struct label *labels, size_t n_labels,
			 const struct store_point *points, size_t n_points)
{
	struct check_state *c = ctx;
	const char *seqs = NULL;
	char *end;

	for (size_t i = 0; i < n_labels; i++)
		if (!strcmp(labels[i].name, "seq"))
			seqs = labels[i].value;
	long seq = seqs ? strtol(seqs, &end, 10) : -1;
	if (!seqs || *end || seq < 0 || seq > c->writes) {
		fprintf(stderr, "check: a series with seq %s, never written\n",
			seqs ? seqs : "(none)");
		c->corrupt = true;
		return;
	}
	c->seen[seq]++;
	for (size_t i = 0; i < n_points; i++)
		c->total += points[i].value;
	if (n_points != 1 || points[0].timestamp_ms != seq_timestamp((int)seq) ||
	    points[0].value != seq_value((int)seq)) {
		fprintf(stderr,
			"check: seq %ld: %zu points, first (%" PRId64 ", %" PRId64
			"), want (%" PRId64 ", %" PRId64 ")\n",
			seq, n_points, n_points ? points[0].timestamp_ms : 0,
			n_points ? points[0].value : 0, seq_timestamp((int)seq),
			seq_value((int)seq));
		c->corrupt = true;
	}
}

/* The checker process: exits with an enum verdict. */
static void checker_main(const char *dir, int writes)
{
	char path[4096];
	struct store_options o;
	struct store *s = NULL;
	struct kiln_error err = {0};
	struct check_state c = {.writes = writes, .seen = calloc((size_t)writes + 1, sizeof(int))};
	struct store_selector sel = {SOAK_TYPE, NULL, 0, 0, INT64_MAX};
	struct store_pprof_result res = {0};
	struct buf merged;
	enum verdict v = VERDICT_OK;
	int seq, n_acked = 0;
	FILE *f;

	alarm(CHILD_TIMEOUT);
	buf_init(&merged);
	snprintf(path, sizeof(path), "%s/store", dir);
	store_opts(&o, path);
	if (!c.seen)
		_exit(VERDICT_HARNESS);
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "check: store_open after the run: %s\n", err.msg);
		_exit(VERDICT_OPEN_FAILED);
	}
	if (store_query_range(s, &sel, check_series, &c, &err)) {
		fprintf(stderr, "check: query_range: %s\n", err.msg);
		c.corrupt = true;
	}
	for (int i = 0; i <= writes; i++)
		if (c.seen[i] > 1) {
			fprintf(stderr, "check: seq %d appears in %d series\n", i, c.seen[i]);
			c.corrupt = true;
		}
	if (store_merge_pprof(s, &sel, false, &merged, &res, &err)) {
		fprintf(stderr, "check: merge: %s\n", err.msg);
		c.corrupt = true;
	} else if (res.total != c.total) {
		fprintf(stderr, "check: merge totals %" PRId64 ", the series %" PRId64 "\n",
			res.total, c.total);
		c.corrupt = true;
	}
	snprintf(path, sizeof(path), "%s/acked.txt", dir);
	if (!(f = fopen(path, "r")))
		_exit(VERDICT_HARNESS);
	while (fscanf(f, "%d", &seq) == 1) {
		n_acked++;
		if (seq < 0 || seq >= writes || !c.seen[seq]) {
			fprintf(stderr, "check: acknowledged seq %d is missing\n", seq);
			v = VERDICT_LOST;
		}
	}
	fclose(f);
	if (v == VERDICT_OK && c.corrupt)
		v = VERDICT_CORRUPT;
	if (v == VERDICT_OK) {
		struct pprof_profile *p = make_profile(SOAK_STACKS, writes + 1, writes);

		kiln_error_clear(&err);
		if (!p || write_seq(s, writes, p, &err)) {
			fprintf(stderr, "check: a write after recovery failed: %s\n", err.msg);
			v = VERDICT_WRITE_FAILED;
		}
		pprof_profile_free(p);
	}
	fprintf(stderr, "check: %d acknowledged, verdict %d\n", n_acked, v);
	store_close(s);
	buf_free(&merged);
	free(c.seen);
	_exit(v);
}

/* Runs fn in a child with stderr sent to log_path (NULL: inherited);
 * returns its wait status, or -1. */
static int run_child(const char *log_path, void (*fn)(const char *, const void *), const char *dir,
		     const void *arg)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (log_path) {
			int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);

			if (fd >= 0)
				dup2(fd, 2);
		}
		fn(dir, arg);
		_exit(VERDICT_HARNESS);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

static void writer_entry(const char *dir, const void *arg)
{
	writer_main(dir, arg);
}

static void checker_entry(const char *dir, const void *arg)
{
	checker_main(dir, *(const int *)arg);
}

/* What one run found. */
struct run_result {
	int writer_signal; /* 0 unless the writer died of a signal */
	int writer_exit;   /* its exit status otherwise: 0, or a sanitizer's report */
	int checker_signal;
	int verdict; /* enum verdict of the checker (when it exited) */
	uint64_t counts[FAULT_N_OPS];
	uint64_t injected;
};

static void read_counts(const char *dir, struct run_result *r)
{
	char path[4096], name[32];
	uint64_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/counts.txt", dir);
	if (!(f = fopen(path, "r")))
		return;
	while (fscanf(f, "%31s %" SCNu64, name, &n) == 2) {
		int op = fault_op_by_name(name);

		if (op >= 0)
			r->counts[op] = n;
		else if (!strcmp(name, "injected"))
			r->injected = n;
	}
	fclose(f);
}

static int one_run(const char *dir, const struct fault_plan *plan, bool quiet, struct run_result *r)
{
	char log_path[4096];
	int status;

	memset(r, 0, sizeof(*r));
	rm_rf(dir);
	if (mkdir(dir, 0700))
		return -errno;
	snprintf(log_path, sizeof(log_path), "%s/log.txt", dir);
	status = run_child(quiet ? log_path : NULL, writer_entry, dir, plan);
	if (status < 0)
		return -ECHILD;
	if (WIFSIGNALED(status))
		r->writer_signal = WTERMSIG(status);
	else
		r->writer_exit = WEXITSTATUS(status);
	read_counts(dir, r);
	status = run_child(quiet ? log_path : NULL, checker_entry, dir, &plan->writes);
	if (status < 0)
		return -ECHILD;
	if (WIFSIGNALED(status))
		r->checker_signal = WTERMSIG(status);
	else
		r->verdict = WEXITSTATUS(status);
	return 0;
}

static bool run_failed(const struct run_result *r)
{
	return r->writer_signal || r->writer_exit || r->checker_signal || r->verdict != VERDICT_OK;
}

static int parse_errno(const char *s)
{
	static const struct {
		const char *name;
		int err;
	} names[] = {{"EIO", EIO}, {"ENOSPC", ENOSPC}, {"ENOMEM", ENOMEM}, {"EDQUOT", EDQUOT}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i].name, s))
			return names[i].err;
	return 0;
}

/* "op" or "op:ERRNO" into plan->op and plan->err; -1 if unknown. */
static int parse_op_spec(const char *spec, struct fault_plan *plan)
{
	char name[64];
	const char *colon = strchr(spec, ':');
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
	int op;

	if (len >= sizeof(name))
		return -1;
	memcpy(name, spec, len);
	name[len] = 0;
	if ((op = fault_op_by_name(name)) < 0)
		return -1;
	plan->op = op;
	plan->err = colon ? parse_errno(colon + 1) : fault_op_default_errno(op);
	return plan->err ? 0 : -1;
}

static void describe_failure(const char *self, const char *spec, const struct fault_plan *p,
			     const struct run_result *r, const char *dir)
{
	char path[4096], line[512];
	FILE *f;

	printf("FAIL %s nth=%" PRIu64 " %s%s: writer %s%s, checker %s%s verdict %d\n", spec, p->nth,
	       p->persistent ? "persistent" : "transient", p->crash ? " crash" : "",
	       r->writer_signal ? "killed by " : "ok",
	       r->writer_signal ? strsignal(r->writer_signal) : "",
	       r->checker_signal ? "killed by " : "exited",
	       r->checker_signal ? strsignal(r->checker_signal) : "", r->verdict);
	printf("  reproduce: %s run --op %s --nth %" PRIu64 "%s%s --writes %d\n", self, spec,
	       p->nth, p->persistent ? " --persistent" : "", p->crash ? " --crash" : "", p->writes);
	snprintf(path, sizeof(path), "%s/log.txt", dir);
	if ((f = fopen(path, "r"))) {
		int n = 0;

		while (fgets(line, sizeof(line), f) && n++ < 12)
			printf("  | %s", line);
		fclose(f);
	}
}

struct op_row {
	unsigned runs, injected_runs, writer_crashes, checker_crashes, open_failed, lost, corrupt,
	    write_failed;
};

static int sweep(const char *self, const char *base, const char *ops, int max_runs, int writes)
{
	static const char default_ops[] = "write,write:ENOSPC,pwrite,pwrite:ENOSPC,fsync,fdatasync,"
					  "ftruncate,rename,open,malloc,calloc,realloc";
	char dir[4096], *list = strdup(ops ? ops : default_ops), *save = NULL;
	struct fault_plan calib = {.op = FAULT_WRITE, .err = EIO, .writes = writes};
	struct run_result cal, r;
	unsigned total_failed = 0, total_runs = 0;

	snprintf(dir, sizeof(dir), "%s/run", base);
	if (!list || one_run(dir, &calib, true, &cal) || run_failed(&cal)) {
		fprintf(stderr, "soak_store: the calibration run (no fault) failed\n");
		return 2;
	}
	printf("%-18s %7s %5s %8s %7s %7s %7s %5s %7s %7s\n", "op", "calls", "runs", "injected",
	       "crashW", "crashC", "reopen", "lost", "corrupt", "rewrite");
	for (char *spec = strtok_r(list, ",", &save); spec; spec = strtok_r(NULL, ",", &save)) {
		struct fault_plan plan = {.writes = writes};
		struct op_row row = {0};

		if (parse_op_spec(spec, &plan)) {
			fprintf(stderr, "soak_store: unknown op spec %s\n", spec);
			free(list);
			return 2;
		}
		uint64_t calls = cal.counts[plan.op];
		uint64_t points = calls < (uint64_t)max_runs ? calls : (uint64_t)max_runs;

		for (uint64_t k = 0; k < points; k++) {
			/* spread over 1..calls, both ends included */
			plan.nth = points > 1 ? 1 + k * (calls - 1) / (points - 1) : 1;
			for (int mode = 0; mode < 2; mode++) {
				plan.persistent = plan.crash = mode == 1;
				if (one_run(dir, &plan, true, &r)) {
					fprintf(stderr, "soak_store: cannot run in %s\n", dir);
					free(list);
					return 2;
				}
				row.runs++;
				row.injected_runs += r.injected > 0;
				row.writer_crashes += r.writer_signal || r.writer_exit;
				row.checker_crashes += r.checker_signal != 0;
				row.open_failed += r.verdict == VERDICT_OPEN_FAILED;
				row.lost += r.verdict == VERDICT_LOST;
				row.corrupt += r.verdict == VERDICT_CORRUPT;
				row.write_failed += r.verdict == VERDICT_WRITE_FAILED;
				if (run_failed(&r)) {
					total_failed++;
					describe_failure(self, spec, &plan, &r, dir);
				}
			}
		}
		total_runs += row.runs;
		printf("%-18s %7" PRIu64 " %5u %8u %7u %7u %7u %5u %7u %7u\n", spec, calls,
		       row.runs, row.injected_runs, row.writer_crashes, row.checker_crashes,
		       row.open_failed, row.lost, row.corrupt, row.write_failed);
		fflush(stdout);
	}
	rm_rf(dir);
	printf("SOAK faults runs=%u failed=%u\n", total_runs, total_failed);
	free(list);
	return total_failed ? 1 : 0;
}

struct populate_ctx {
	struct store *s;
	const struct pprof_profile *p;
	long next, n;
	atomic_long *cursor;
	int failed;
};

/* One populate writer: claims series numbers from the shared cursor. */
static void *populate_thread(void *arg)
{
	struct populate_ctx *c = arg;
	struct kiln_error err = {0};
	char node[32], series[32];

	for (long i; (i = atomic_fetch_add(c->cursor, 1)) < c->n;) {
		snprintf(node, sizeof(node), "node-%ld", i % 1000);
		snprintf(series, sizeof(series), "%ld", i);
		struct label l[3] = {{"__name__", "kiln_soak"}, {"node", node}, {"series", series}};

		kiln_error_clear(&err);
		if (store_write_profile(c->s, l, 3, c->p, 1000 + i % 60000, true, &err)) {
			fprintf(stderr, "populate: series %ld: %s\n", i, err.msg);
			c->failed = 1;
			break;
		}
	}
	return NULL;
}

static int populate(const char *dir, long n, int threads, bool crash)
{
	struct store_options o = {.path = dir};
	struct store *s = NULL;
	struct kiln_error err = {0};
	struct pprof_profile *p = make_profile(SOAK_STACKS, 1, 0);
	atomic_long cursor = 0;
	struct populate_ctx *ctx = calloc((size_t)threads, sizeof(*ctx));
	pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
	int rc = 1, started = 0;

	if (!p || !ctx || !tids)
		goto out;
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "populate: %s\n", err.msg);
		goto out;
	}
	for (; started < threads; started++) {
		ctx[started] = (struct populate_ctx){.s = s, .p = p, .n = n, .cursor = &cursor};
		if (pthread_create(&tids[started], NULL, populate_thread, &ctx[started]))
			break;
	}
	rc = 0;
	for (int i = 0; i < started; i++) {
		pthread_join(tids[i], NULL);
		rc |= ctx[i].failed;
	}
	if (crash)
		_exit(rc);
	store_close(s);
out:
	pprof_profile_free(p);
	free(ctx);
	free(tids);
	return rc;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: soak_store sweep [--ops SPEC,...] [--max-runs N] [--writes W] [--dir D]\n"
		"       soak_store run --op OP[:ERRNO] --nth N [--persistent] [--crash] [--writes "
		"W] [--dir D]\n"
		"       soak_store populate --dir D --series N [--threads T] [--crash]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"ops", required_argument, NULL, 'o'},
	    {"op", required_argument, NULL, 'p'},
	    {"max-runs", required_argument, NULL, 'm'},
	    {"writes", required_argument, NULL, 'w'},
	    {"dir", required_argument, NULL, 'd'},
	    {"nth", required_argument, NULL, 'n'},
	    {"persistent", no_argument, NULL, 'P'},
	    {"crash", no_argument, NULL, 'C'},
	    {"series", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	const char *ops = NULL, *op = NULL, *base = NULL;
	char tmpl[] = "/dev/shm/kiln-soak-store-XXXXXX", dir[4096];
	struct fault_plan plan = {.writes = 24};
	int max_runs = 30, threads = 16, c, rc;
	long series = 0;

	if (argc < 2) {
		usage();
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			ops = optarg;
			break;
		case 'p':
			op = optarg;
			break;
		case 'm':
			max_runs = atoi(optarg);
			break;
		case 'w':
			plan.writes = atoi(optarg);
			break;
		case 'd':
			base = optarg;
			break;
		case 'n':
			plan.nth = strtoull(optarg, NULL, 10);
			break;
		case 'P':
			plan.persistent = true;
			break;
		case 'C':
			plan.crash = true;
			break;
		case 's':
			series = atol(optarg);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		default:
			usage();
			return 2;
		}
	}
	if (plan.writes < 2 || max_runs < 1) {
		usage();
		return 2;
	}
	log_set_level(LOG_WARN);
	if (!strcmp(argv[1], "populate")) {
		if (!base || series < 1 || threads < 1) {
			usage();
			return 2;
		}
		return populate(base, series, threads, plan.crash);
	}
	if (!base && !(base = mkdtemp(tmpl)) &&
	    !(base = mkdtemp(strcpy(tmpl, "/tmp/kiln-soak-store-XXXXXX")))) {
		perror("mkdtemp");
		return 2;
	}
	mkdir(base, 0700);
	if (!strcmp(argv[1], "sweep")) {
		rc = sweep(argv[0], base, ops, max_runs, plan.writes);
	} else if (!strcmp(argv[1], "run") && op && !parse_op_spec(op, &plan)) {
		struct run_result r;

		snprintf(dir, sizeof(dir), "%s/run", base);
		if (one_run(dir, &plan, false, &r))
			return 2;
		printf("%s nth=%" PRIu64 ": %" PRIu64 " calls, %" PRIu64
		       " failed; writer %s, checker %s, verdict %d\n",
		       op, plan.nth, r.counts[plan.op], r.injected,
		       r.writer_signal ? strsignal(r.writer_signal) : "ok",
		       r.checker_signal ? strsignal(r.checker_signal) : "ok", r.verdict);
		rc = run_failed(&r) ? 1 : 0;
		rm_rf(dir);
	} else {
		usage();
		return 2;
	}
	rmdir(base);
	return rc;
}
