/*
 * scrape_driver.c — runs the scrape manager alone, for the pull-mode
 * integration tests and the scrape benchmark (no server or store needed).
 *
 *   scrape_driver --config FILE [--out DIR] [--duration SEC] [--max-body N]
 *                 [--status FILE] [--status-every SEC] [--warmup SEC]
 *
 * With --out, every ingested profile is written as
 * DIR/ingest-NAME-PORT-TIMEMS-{delta,gauge}.pb.gz and every raw response body
 * as DIR/raw-NAME-PORT-TIMEMS.pb.gz (TIMEMS = the profile's time), so that a
 * test can compare both with `go tool pprof`. Without --out the ingest
 * callback only counts (the benchmark's "ingest" is then free). --status
 * rewrites FILE every 500 ms with one line per target:
 * "job<TAB>url<TAB>name<TAB>health<TAB>scrapes_ok<TAB>last_error" (every
 * --status-every seconds instead, and at exit; the benchmark asks for
 * rarely, as copying 2,000 targets' status holds the manager's status lock
 * the scheduler also needs). malloc is tuned as in the server (src/server/
 * main.c), so that the benchmark measures what the server runs. SIGHUP
 * reloads the config (a bad one is reported and the old one kept). The
 * last line on stdout is the stats. --warmup SEC leaves the first SEC seconds
 * out of the counters and CPU times (the stats are then the difference from
 * a snapshot taken at SEC, window_ns how long that was), as the benchmark
 * measures the server after its warm-up: in the first interval every
 * cumulative unit's first scrape only becomes a baseline, cheaper than a
 * delta.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "scrape/scrape.h"

static volatile sig_atomic_t got_hup, got_term;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
}

struct driver {
	const char *out;
	atomic_ulong ingested;
};

static const char *label(const struct label *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, name) == 0)
			return l[i].value;
	return "";
}

static const char *port_of(const char *instance)
{
	const char *c = strrchr(instance, ':');
	return c ? c + 1 : instance;
}

static int ingest(void *ctx, const struct label *labels, size_t n, const struct pprof_profile *p,
		  int64_t ts, bool delta, struct kiln_error *err)
{
	struct driver *d = ctx;
	atomic_fetch_add(&d->ingested, 1);
	if (!d->out)
		return 0;
	char path[4096];
	struct buf b;
	snprintf(path, sizeof(path), "%s/ingest-%s-%s-%lld-%s.pb.gz", d->out,
		 label(labels, n, "__name__"), port_of(label(labels, n, "instance")), (long long)ts,
		 delta ? "delta" : "gauge");
	buf_init(&b);
	int rc = pprof_encode(pprof_profile_msg(p), true, &b);
	if (rc == 0)
		rc = buf_write_file(&b, path);
	buf_free(&b);
	if (rc < 0)
		return kiln_error_set(err, -rc, "%s: %s", path, strerror(-rc));
	return 0;
}

static void on_body(void *ctx, const struct label *labels, size_t n, const void *body, size_t len)
{
	struct driver *d = ctx;
	struct pprof_profile *p;
	if (!d->out || pprof_decode(body, len, NULL, &p, NULL) < 0)
		return;
	int64_t ts = pprof_profile_msg(p)->time_nanos / 1000000;
	pprof_profile_free(p);
	char path[4096];
	struct buf b = {.data = (uint8_t *)body, .len = len, .cap = len};
	snprintf(path, sizeof(path), "%s/raw-%s-%s-%lld.pb.gz", d->out,
		 label(labels, n, "__name__"), port_of(label(labels, n, "instance")),
		 (long long)ts);
	buf_write_file(&b, path);
}

static void write_status(struct scrape_manager *m, const char *path)
{
	struct scrape_target_info *t;
	size_t n;
	char tmp[4096];
	if (scrape_manager_targets(m, &t, &n) < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f) {
		for (size_t i = 0; i < n; i++) {
			const char *name = scrape_labels_get(&t[i].labels, "__name__");
			if (!name)
				name = scrape_labels_get(&t[i].discovered, "__name__");
			fprintf(f, "%s\t%s\t%s\t%s\t%lld\t%s\n", t[i].job, t[i].url,
				name ? name : "",
				t[i].active ? scrape_health_name(t[i].health) : "dropped",
				(long long)t[i].last_scrape_ms, t[i].last_error);
		}
		fclose(f);
		rename(tmp, path);
	}
	scrape_targets_free(t, n);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"out", required_argument, NULL, 'o'},
	    {"duration", required_argument, NULL, 'd'},
	    {"max-body", required_argument, NULL, 'm'},
	    {"status", required_argument, NULL, 's'},
	    {"status-every", required_argument, NULL, 'e'},
	    {"warmup", required_argument, NULL, 'w'},
	    {NULL, 0, NULL, 0},
	};
	double status_every = 0.5, last_status = 0;
	const char *config = NULL, *status = NULL;
	struct driver d = {0};
	double duration = 0, warmup = 0;
	size_t max_body = 0;
	struct scrape_stats st0 = {0};
	struct timespec warm_at = {0};
	bool warm = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			d.out = optarg;
			break;
		case 'd':
			duration = atof(optarg);
			break;
		case 'm':
			max_body = strtoull(optarg, NULL, 10);
			break;
		case 's':
			status = optarg;
			break;
		case 'e':
			status_every = atof(optarg);
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!config) {
		fprintf(stderr, "usage: scrape_driver --config FILE [--out DIR] [--duration SEC] "
				"[--max-body N] [--status FILE] [--warmup SEC]\n");
		return 2;
	}
	/* As the server does (src/server/main.c): keep freed heap and big
	 * blocks mapped instead of faulting them in again for every profile. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	log_set_level_name(getenv("KILN_LOG_LEVEL") ? getenv("KILN_LOG_LEVEL") : "info");
	struct kiln_error err = {0};
	struct scrape_config *cfg;
	if (scrape_config_load_file(config, &cfg, &err) < 0) {
		fprintf(stderr, "scrape_driver: %s\n", err.msg);
		return 1;
	}
	struct scrape_manager_options mo = {
	    .ingest = ingest,
	    .ingest_ctx = &d,
	    .max_body_bytes = max_body,
	    .on_body = on_body,
	    .on_body_ctx = &d,
	};
	struct scrape_manager *m;
	if (scrape_manager_new(&mo, cfg, &m, &err) < 0) {
		fprintf(stderr, "scrape_driver: %s\n", err.msg);
		scrape_config_free(cfg);
		return 1;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("ready\n");
	fflush(stdout);

	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		usleep(100000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9;
		if (got_term || (duration > 0 && el >= duration))
			break;
		if (!warm && warmup > 0 && el >= warmup) {
			scrape_manager_get_stats(m, &st0);
			warm_at = now;
			warm = true;
		}
		if (got_hup) {
			got_hup = 0;
			kiln_error_clear(&err);
			if (scrape_config_load_file(config, &cfg, &err) < 0) {
				log_error("reload failed, keeping the old config: %s", err.msg);
			} else if (scrape_manager_apply(m, cfg, &err) < 0) {
				log_error("reload failed, keeping the old config: %s", err.msg);
				scrape_config_free(cfg);
			} else {
				log_info("reloaded %s", config);
			}
		}
		if (status && el - last_status >= status_every) {
			write_status(m, status);
			last_status = el;
		}
	}
	struct scrape_stats st;
	scrape_manager_get_stats(m, &st);
	if (!warm)
		warm_at = start;
	clock_gettime(CLOCK_MONOTONIC, &now);
	uint64_t window_ns = (uint64_t)((now.tv_sec - warm_at.tv_sec) * 1000000000LL +
					(now.tv_nsec - warm_at.tv_nsec));
	st.scrapes -= st0.scrapes;
	st.scrape_errors -= st0.scrape_errors;
	st.profiles_ingested -= st0.profiles_ingested;
	st.ingest_errors -= st0.ingest_errors;
	st.bytes_fetched -= st0.bytes_fetched;
	st.scheduler_cpu_ns -= st0.scheduler_cpu_ns;
	st.decode_cpu_ns -= st0.decode_cpu_ns;
	st.delta_cpu_ns -= st0.delta_cpu_ns;
	st.ingest_cpu_ns -= st0.ingest_cpu_ns;
	st.callback_cpu_ns -= st0.callback_cpu_ns;
	st.ingest_lag_ns_total -= st0.ingest_lag_ns_total;
	if (status)
		write_status(m, status);
	scrape_manager_free(m);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("scrapes=%llu errors=%llu ingested=%lu bytes=%llu scheduler_cpu_ns=%llu "
	       "decode_cpu_ns=%llu delta_cpu_ns=%llu ingest_cpu_ns=%llu callback_cpu_ns=%llu "
	       "lag_avg_ns=%llu lag_max_ns=%llu maxrss_kb=%ld window_ns=%llu\n",
	       (unsigned long long)st.scrapes, (unsigned long long)st.scrape_errors,
	       (unsigned long)atomic_load(&d.ingested), (unsigned long long)st.bytes_fetched,
	       (unsigned long long)st.scheduler_cpu_ns, (unsigned long long)st.decode_cpu_ns,
	       (unsigned long long)st.delta_cpu_ns, (unsigned long long)st.ingest_cpu_ns,
	       (unsigned long long)st.callback_cpu_ns,
	       (unsigned long long)(st.profiles_ingested + st.ingest_errors
					? st.ingest_lag_ns_total /
					      (st.profiles_ingested + st.ingest_errors)
					: 0),
	       (unsigned long long)st.ingest_lag_ns_max, ru.ru_maxrss,
	       (unsigned long long)window_ns);
	return 0;
}
