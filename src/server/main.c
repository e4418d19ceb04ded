/*
 * main.c — `kiln`, the server: flags (Parca's names), signals, run.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/duration.h"
#include "common/compat_flags.h"
#include "common/log.h"
#include "common/version.h"
#include "server/server.h"

/* The only global: the running server, for the signal handler. */
static struct server *running;

static void on_signal(int sig)
{
	if (running && sig == SIGHUP)
		server_request_reload(running);
	else if (running)
		server_stop(running);
}

static void usage(FILE *f, const struct server_config *d)
{
	fprintf(
	    f,
	    "Usage: kiln [flags]\n"
	    "\n"
	    "Continuous profiling server: Parca-compatible gRPC and an HTTP/JSON API on one port.\n"
	    "\n"
	    "Flags:\n"
	    "  --http-address=ADDR          listen address, gRPC and HTTP (default \"%s\")\n"
	    "  --storage-path=DIR           where profiles are stored (default \"%s\")\n"
	    "  --storage-retention=DUR      delete data older than this, e.g. 15d, 12h, 30m;\n"
	    "                               0 keeps everything (default \"15d\")\n"
	    "  --storage=BACKEND            embedded (files under --storage-path; default) or\n"
	    "                               clickhouse: several kiln servers share one\n"
	    "                               ClickHouse (docs/SCALE-OUT.md)\n"
	    "  --clickhouse-url=URL         its HTTP interface, e.g. http://HOST:8123\n"
	    "  --clickhouse-database=NAME   database of Kiln's tables, created if missing\n"
	    "                               (default \"kiln\")\n"
	    "  --clickhouse-user=NAME       (default \"default\")\n"
	    "  --clickhouse-password-file=FILE  the password: FILE's first line (default none)\n"
	    "  --config-path=FILE           scrape configuration (pull mode; default none)\n"
	    "  --cors-allowed-origins=LIST  comma-separated origins allowed by CORS, or \"*\"\n"
	    "                               for browsers' gRPC-Web/Connect calls (default none)\n"
	    "  --log-level=LEVEL            debug, info, warn or error (default \"info\")\n"
	    "  --log-format=FORMAT          text, logfmt or json (default \"text\")\n"
	    "  --grpc-max-message-size=N    largest request or response message, bytes, or\n"
	    "                               with KiB/MiB/GiB suffix; also bounds HTTP request\n"
	    "                               bodies (default 64MiB)\n"
	    "  --max-profile-size=N         largest decompressed pprof accepted (default 256MiB)\n"
	    "  --ui-path=DIR                built web UI to serve at / (default: the first of\n"
	    "                               <exe>/../ui, <exe>/../../ui and\n"
	    "                               <exe>/../share/kiln/ui that exists)\n"
	    "  --tls-cert-file=FILE         serve TLS with this certificate chain (PEM)\n"
	    "  --tls-key-file=FILE          and this private key (PEM)\n"
	    "  --tls-client-ca-file=FILE    require client certificates (mTLS) signed by\n"
	    "                               these CAs (PEM); with TLS only\n"
	    "  --tls-client-auth=MODE       require (default) or optional: clients without\n"
	    "                               a certificate are served too (browsers; tokens\n"
	    "                               still apply); one they present must verify\n"
	    "  --debuginfod-upstream-servers=URLS  debuginfod servers to fetch missing\n"
	    "                               debuginfo from by build ID, comma-separated or\n"
	    "                               repeated (default none)\n"
	    "  --debuginfod-http-request-timeout=DUR  per debuginfod request (default 30s)\n"
	    "  --debuginfod-negative-cache-ttl=DUR  how long a build ID the upstreams did\n"
	    "                               not have is not asked for again (default 10m)\n"
	    "  --ingest-max-future-skew=DUR how far past the server's clock a pushed\n"
	    "                               profile's time may lie (default 1h); earlier\n"
	    "                               than 2000-01-01 is always refused\n"
	    "  --symbols-local-dir=DIRS     directories with debug files or binaries by\n"
	    "                               build ID (DIR/.build-id/xx/rest.debug or\n"
	    "                               DIR/.build-id/xx/rest), comma-separated or\n"
	    "                               repeated, e.g. /usr/lib/debug (default none).\n"
	    "                               The server never opens the file a profile's\n"
	    "                               mapping names\n"
	    "  --auth-tokens-file=FILE      bearer tokens with a role each, one \"ROLE TOKEN\"\n"
	    "                               per line (ROLE: read, write or admin); every\n"
	    "                               request but /healthy, /ready and the UI's files\n"
	    "                               then needs one. SIGHUP rereads it. See\n"
	    "                               docs/SECURITY.md (default none: allowed only on\n"
	    "                               a loopback --http-address)\n"
	    "  --auth-disable               serve without tokens on a non-loopback address\n"
	    "                               (anyone who connects may read, write, delete)\n"
	    "  --auth-metrics-open          /metrics without a token (default: read role)\n"
	    "  --disable-stream-ingest      answer IngestService/Push (the agents' streaming\n"
	    "                               protocol) with UNIMPLEMENTED: agents use WriteRaw\n"
	    "  --max-connections=N          client connections at once; when full, the one\n"
	    "                               idle the longest is closed to make room (default %d)\n"
	    "  --max-connections-per-client=N  connections one client address may hold;\n"
	    "                               0 = no limit (default %d)\n"
	    "  --handshake-timeout=DUR      TLS handshake, protocol detection and the HTTP/2\n"
	    "                               preface and SETTINGS, from the accept (default %ds)\n"
	    "  --request-header-timeout=DUR a whole HTTP/1.1 request header, from the accept\n"
	    "                               or the end of the previous request (default %ds)\n"
	    "  --request-body-min-rate=N    bytes/s a request body must average once that\n"
	    "                               time has passed; 0 = no minimum (default %zu)\n"
	    "  --connection-idle-timeout=DUR  an HTTP/2 connection with no stream open is\n"
	    "                               closed after this; PINGs do not count (default %ds)\n"
	    "  --max-request-header-size=N  HTTP/1.1 request line and headers (default %zuKiB)\n"
	    "  --max-inflight-request-bytes=N  request bodies held at once, server-wide;\n"
	    "                               past it RESOURCE_EXHAUSTED or 503 (default %lluMiB)\n"
	    "  --ingest-max-series-per-request=N  series in one WriteRaw (default %zu)\n"
	    "  --ingest-max-labels-per-series=N  labels besides __name__ (default %zu)\n"
	    "  --ingest-max-label-size=N    bytes of a label name or value (default %zu)\n"
	    "  --ingest-max-stack-depth=N   locations in one pushed sample's stack\n"
	    "                               (default %zu)\n"
	    "  --ingest-max-sample-types=N  sample types in one pushed profile (default %zu)\n"
	    "  --version                    print the version and exit\n"
	    "  --help                       this text\n",
	    d->http_address, d->storage_path, d->max_connections, d->max_connections_per_client,
	    d->handshake_timeout_s, d->header_timeout_s, d->body_min_rate, d->idle_timeout_s,
	    d->max_header_bytes >> 10, (unsigned long long)(d->max_inflight_request_bytes >> 20),
	    d->ingest_max_series, d->ingest_max_labels, d->ingest_max_label_bytes,
	    d->ingest_max_stack_depth, d->ingest_max_sample_types);
}

/* A count flag: 0..max. */
static int parse_count(const char *s, long max, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* "4194304", "4MiB", "64MB", "1GiB", "512KiB". */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -EINVAL;
	unsigned long long mul = 1;
	if (!*end || strcmp(end, "B") == 0)
		mul = 1;
	else if (strcmp(end, "KiB") == 0 || strcmp(end, "KB") == 0 || strcmp(end, "k") == 0)
		mul = 1ULL << 10;
	else if (strcmp(end, "MiB") == 0 || strcmp(end, "MB") == 0 || strcmp(end, "M") == 0)
		mul = 1ULL << 20;
	else if (strcmp(end, "GiB") == 0 || strcmp(end, "GB") == 0 || strcmp(end, "G") == 0)
		mul = 1ULL << 30;
	else
		return -EINVAL;
	if (v == 0 || v > SIZE_MAX / mul || v * mul > (1ULL << 31))
		return -ERANGE; /* the gRPC length prefix is 32-bit; stay well inside */
	*out = (size_t)(v * mul);
	return 0;
}

/* The default UI directory: next to the binary's build tree (build/bin/..
 * /ui, `make install`'s PREFIX/ui) or where the package puts it
 * (/usr/bin/../share/kiln/ui). */
static char *default_ui_path(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	static const char *const rel[] = {"/../ui", "/../../ui", "/../share/kiln/ui"};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 16], real[PATH_MAX];
		snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
		struct stat st;
		if (stat(cand, &st) == 0 && S_ISDIR(st.st_mode) && realpath(cand, real))
			return strdup(real);
	}
	return NULL;
}

/* The first line of path, without its newline, into *out (malloc'ed; kept
 * until exit). Prints the error and returns -1 on failure. */
static int read_password_file(const char *path, const char **out)
{
	char line[1024];
	FILE *f = fopen(path, "re");

	if (!f) {
		fprintf(stderr, "kiln: --clickhouse-password-file=%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (!(*out = strdup(line))) {
		fprintf(stderr, "kiln: out of memory\n");
		return -1;
	}
	return 0;
}

enum {
	OPT_HTTP = 1000,
	OPT_STORAGE,
	OPT_RETENTION,
	OPT_CONFIG,
	OPT_CORS,
	OPT_LOG,
	OPT_LOG_FORMAT,
	OPT_GRPC_MAX,
	OPT_PROFILE_MAX,
	OPT_UI,
	OPT_CERT,
	OPT_KEY,
	OPT_CLIENT_CA,
	OPT_CLIENT_AUTH,
	OPT_DEBUGINFOD,
	OPT_DEBUGINFOD_TIMEOUT,
	OPT_DEBUGINFOD_NEGATIVE_TTL,
	OPT_SYMBOLS_LOCAL_DIR,
	OPT_INGEST_MAX_FUTURE_SKEW,
	OPT_AUTH_TOKENS_FILE,
	OPT_AUTH_DISABLE,
	OPT_AUTH_METRICS_OPEN,
	OPT_HELP,
	OPT_VERSION,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_CONNECTIONS_PER_CLIENT,
	OPT_HANDSHAKE_TIMEOUT,
	OPT_HEADER_TIMEOUT,
	OPT_BODY_MIN_RATE,
	OPT_IDLE_TIMEOUT,
	OPT_MAX_HEADER_SIZE,
	OPT_MAX_INFLIGHT,
	OPT_INGEST_MAX_SERIES,
	OPT_INGEST_MAX_LABELS,
	OPT_INGEST_MAX_LABEL_SIZE,
	OPT_INGEST_MAX_STACK_DEPTH,
	OPT_INGEST_MAX_SAMPLE_TYPES,
	OPT_STORAGE_BACKEND,
	OPT_CLICKHOUSE_URL,
	OPT_CLICKHOUSE_DATABASE,
	OPT_CLICKHOUSE_USER,
	OPT_CLICKHOUSE_PASSWORD_FILE,
	OPT_DISABLE_STREAM_INGEST,
};

/* Parca server flags with no Kiln equivalent (compat_flags.h); --port and
 * --storage-tsdb-retention-time, Parca's older names, are real aliases. */
enum { OPT_PARCA = 2000 };
static const struct compat_flag parca_flags[] = {
    {"enable-persistence", optional_argument, "Kiln always persists profiles to --storage-path"},
    {"storage-enable-wal", optional_argument, "Kiln always writes and fsyncs a write-ahead log"},
    {"storage-active-memory", required_argument,
     "Kiln cuts its in-memory head into blocks by time, not by size"},
    {"storage-snapshot-trigger-size", required_argument,
     "Kiln's store takes no snapshots: the WAL and blocks are its state (docs/STORAGE.md)"},
    {"storage-row-group-size", required_argument, "Kiln's blocks have no row groups"},
    {"storage-index-on-disk", optional_argument, "Kiln's postings index is always on disk"},
    {"storage-granule-size", required_argument, "Kiln's blocks have no granules"},
    {"path-prefix", required_argument,
     "Kiln serves its UI and API at the root; strip the prefix in a reverse proxy"},
    {"mode", required_argument,
     "Kiln always runs every component (scraping stores into this server)"},
    {"otlp-address", required_argument, "Kiln exports no traces of its own"},
    {"symbolizer-demangle-mode", required_argument, "Kiln demangles C++ names fully"},
    {"symbolizer-number-of-tries", required_argument,
     "Kiln symbolizes an address again whenever new debuginfo arrives"},
    {"metastore", required_argument, "Kiln's metastore is its own, on disk"},
    {"profile-share-server", required_argument, "Kiln does not upload shared profiles"},
    {"experimental-arrow", optional_argument, "Kiln answers flame graphs as a tree"},
    {"store-address", required_argument,
     "only for Parca's scraper-only mode, which Kiln does not have"},
    {"bearer-token", required_argument, "only for Parca's scraper-only mode"},
    {"bearer-token-file", required_argument, "only for Parca's scraper-only mode"},
    {"insecure", optional_argument, "only for Parca's scraper-only mode"},
    {"insecure-skip-verify", optional_argument, "only for Parca's scraper-only mode"},
};

int main(int argc, char **argv)
{
	struct server_config cfg, defaults;
	struct kiln_error err = {0};
	char *ui_default = NULL;
	static const char *upstreams[33]; /* NULL-terminated */
	static const char *local_dirs[33];
	size_t n_upstreams = 0, n_local_dirs = 0;
	struct server *s = NULL;
	int rc;

	/* A query allocates tens of MiB of short-lived arrays (the flame graph of
	 * a 100k-node profile: ~40 MiB). Handed back to the kernel after each
	 * query, they are faulted in again page by page by the next one, which
	 * costs several times the query's own work (most of all in a VM). Big
	 * blocks come from the heap instead of mmap and freed heap is kept, so
	 * repeated queries reuse memory that is already mapped. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	server_config_defaults(&cfg);
	defaults = cfg;
	static const struct option opts[] = {
	    {"http-address", required_argument, NULL, OPT_HTTP},
	    {"storage-path", required_argument, NULL, OPT_STORAGE},
	    {"storage-retention", required_argument, NULL, OPT_RETENTION},
	    {"config-path", required_argument, NULL, OPT_CONFIG},
	    {"cors-allowed-origins", required_argument, NULL, OPT_CORS},
	    {"log-level", required_argument, NULL, OPT_LOG},
	    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
	    {"port", required_argument, NULL, OPT_HTTP},
	    {"storage-tsdb-retention-time", required_argument, NULL, OPT_RETENTION},
	    {"grpc-max-message-size", required_argument, NULL, OPT_GRPC_MAX},
	    {"max-profile-size", required_argument, NULL, OPT_PROFILE_MAX},
	    {"ui-path", required_argument, NULL, OPT_UI},
	    {"tls-cert-file", required_argument, NULL, OPT_CERT},
	    {"tls-key-file", required_argument, NULL, OPT_KEY},
	    {"tls-client-ca-file", required_argument, NULL, OPT_CLIENT_CA},
	    {"tls-client-auth", required_argument, NULL, OPT_CLIENT_AUTH},
	    {"debuginfod-upstream-servers", required_argument, NULL, OPT_DEBUGINFOD},
	    {"debuginfod-http-request-timeout", required_argument, NULL, OPT_DEBUGINFOD_TIMEOUT},
	    {"debuginfod-negative-cache-ttl", required_argument, NULL, OPT_DEBUGINFOD_NEGATIVE_TTL},
	    {"symbols-local-dir", required_argument, NULL, OPT_SYMBOLS_LOCAL_DIR},
	    {"ingest-max-future-skew", required_argument, NULL, OPT_INGEST_MAX_FUTURE_SKEW},
	    {"auth-tokens-file", required_argument, NULL, OPT_AUTH_TOKENS_FILE},
	    {"auth-disable", no_argument, NULL, OPT_AUTH_DISABLE},
	    {"auth-metrics-open", no_argument, NULL, OPT_AUTH_METRICS_OPEN},
	    {"disable-stream-ingest", no_argument, NULL, OPT_DISABLE_STREAM_INGEST},
	    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
	    {"max-connections-per-client", required_argument, NULL, OPT_MAX_CONNECTIONS_PER_CLIENT},
	    {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT},
	    {"request-header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
	    {"request-body-min-rate", required_argument, NULL, OPT_BODY_MIN_RATE},
	    {"connection-idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
	    {"max-request-header-size", required_argument, NULL, OPT_MAX_HEADER_SIZE},
	    {"max-inflight-request-bytes", required_argument, NULL, OPT_MAX_INFLIGHT},
	    {"ingest-max-series-per-request", required_argument, NULL, OPT_INGEST_MAX_SERIES},
	    {"ingest-max-labels-per-series", required_argument, NULL, OPT_INGEST_MAX_LABELS},
	    {"ingest-max-label-size", required_argument, NULL, OPT_INGEST_MAX_LABEL_SIZE},
	    {"ingest-max-stack-depth", required_argument, NULL, OPT_INGEST_MAX_STACK_DEPTH},
	    {"ingest-max-sample-types", required_argument, NULL, OPT_INGEST_MAX_SAMPLE_TYPES},
	    {"storage", required_argument, NULL, OPT_STORAGE_BACKEND},
	    {"clickhouse-url", required_argument, NULL, OPT_CLICKHOUSE_URL},
	    {"clickhouse-database", required_argument, NULL, OPT_CLICKHOUSE_DATABASE},
	    {"clickhouse-user", required_argument, NULL, OPT_CLICKHOUSE_USER},
	    {"clickhouse-password-file", required_argument, NULL, OPT_CLICKHOUSE_PASSWORD_FILE},
	    {"help", no_argument, NULL, OPT_HELP},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {NULL, 0, NULL, 0},
	};
	const size_t n_compat = sizeof(parca_flags) / sizeof(parca_flags[0]);
	/* Static: the early returns below leave it reachable, not leaked. */
	static struct option *all_opts;
	int o, seen[32], n_seen = 0;
	char *seen_value[32];

	all_opts = compat_options(opts, parca_flags, n_compat, OPT_PARCA);
	if (!all_opts) {
		fprintf(stderr, "kiln: out of memory\n");
		return 1;
	}
	while ((o = getopt_long(argc, argv, "h", all_opts, NULL)) != -1) {
		if (o >= OPT_PARCA && o < OPT_PARCA + (int)n_compat) {
			if (n_seen < 32) {
				seen_value[n_seen] = optarg;
				seen[n_seen++] = o - OPT_PARCA;
			}
			continue;
		}
		switch (o) {
		case OPT_HTTP:
			cfg.http_address = optarg;
			break;
		case OPT_STORAGE:
			cfg.storage_path = optarg;
			break;
		case OPT_RETENTION:
			if (duration_parse_ms(optarg, 0, &cfg.retention_ms)) {
				fprintf(
				    stderr,
				    "kiln: --storage-retention=%s: expected a duration like 15d, "
				    "12h, 30m or 0\n",
				    optarg);
				return 2;
			}
			break;
		case OPT_CONFIG:
			cfg.config_path = optarg;
			break;
		case OPT_CORS:
			cfg.cors_origins = optarg;
			break;
		case OPT_LOG:
			if (log_set_level_name(optarg)) {
				fprintf(
				    stderr,
				    "kiln: --log-level=%s: expected debug, info, warn or error\n",
				    optarg);
				return 2;
			}
			break;
		case OPT_GRPC_MAX:
			if (parse_size(optarg, &cfg.grpc_max_msg_bytes)) {
				fprintf(
				    stderr,
				    "kiln: --grpc-max-message-size=%s: expected bytes (1..2GiB), "
				    "e.g. 4194304 or 4MiB\n",
				    optarg);
				return 2;
			}
			break;
		case OPT_PROFILE_MAX:
			if (parse_size(optarg, &cfg.max_profile_inflate)) {
				fprintf(
				    stderr,
				    "kiln: --max-profile-size=%s: expected bytes, e.g. 256MiB\n",
				    optarg);
				return 2;
			}
			break;
		case OPT_UI:
			cfg.ui_path = optarg;
			break;
		case OPT_CERT:
			cfg.tls_cert_file = optarg;
			break;
		case OPT_KEY:
			cfg.tls_key_file = optarg;
			break;
		case OPT_CLIENT_CA:
			cfg.tls_client_ca_file = optarg;
			break;
		case OPT_CLIENT_AUTH:
			if (strcmp(optarg, "require") != 0 && strcmp(optarg, "optional") != 0) {
				fprintf(
				    stderr,
				    "kiln: --tls-client-auth=%s: expected require or optional\n",
				    optarg);
				return 2;
			}
			cfg.tls_client_auth_optional = strcmp(optarg, "optional") == 0;
			break;
		case OPT_DEBUGINFOD:
			/* Comma-separated, and repeatable. */
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				if (n_upstreams + 1 >= sizeof(upstreams) / sizeof(upstreams[0])) {
					fprintf(stderr,
						"kiln: too many --debuginfod-upstream-servers\n");
					return 2;
				}
				upstreams[n_upstreams++] = tok;
			}
			cfg.debuginfod_upstreams = upstreams;
			break;
		case OPT_DEBUGINFOD_TIMEOUT: {
			int64_t ms;
			if (duration_parse_ms(optarg, 0, &ms) || ms < 1000) {
				fprintf(stderr,
					"kiln: --debuginfod-http-request-timeout=%s: expected a "
					"duration "
					">= 1s, e.g. 30s or 5m\n",
					optarg);
				return 2;
			}
			cfg.debuginfod_timeout_s = (int)(ms / 1000);
			break;
		}
		case OPT_DEBUGINFOD_NEGATIVE_TTL: {
			int64_t ms;
			if (duration_parse_ms(optarg, 0, &ms) || ms < 1000 ||
			    ms > INT32_MAX * 1000ll) {
				fprintf(stderr,
					"kiln: --debuginfod-negative-cache-ttl=%s: expected a "
					"duration >= 1s, e.g. 10m\n",
					optarg);
				return 2;
			}
			cfg.debuginfod_negative_ttl_s = (int)(ms / 1000);
			break;
		}
		case OPT_MAX_CONNECTIONS:
			if (parse_count(optarg, 1000000, &cfg.max_connections) ||
			    cfg.max_connections < 1) {
				fprintf(stderr, "kiln: --max-connections=%s: expected 1..1000000\n",
					optarg);
				return 2;
			}
			break;
		case OPT_MAX_CONNECTIONS_PER_CLIENT:
			if (parse_count(optarg, 1000000, &cfg.max_connections_per_client)) {
				fprintf(stderr,
					"kiln: --max-connections-per-client=%s: expected 0 (no "
					"limit) ..1000000\n",
					optarg);
				return 2;
			}
			break;
		case OPT_HANDSHAKE_TIMEOUT:
		case OPT_HEADER_TIMEOUT:
		case OPT_IDLE_TIMEOUT: {
			int64_t ms = 0;
			if (duration_parse_ms(optarg, 0, &ms) || ms < 1000 ||
			    ms > 24 * 3600 * 1000LL) {
				fprintf(stderr,
					"kiln: --%s=%s: expected a duration from 1s to 24h, e.g. "
					"10s\n",
					o == OPT_HANDSHAKE_TIMEOUT ? "handshake-timeout"
					: o == OPT_HEADER_TIMEOUT  ? "request-header-timeout"
								   : "connection-idle-timeout",
					optarg);
				return 2;
			}
			*(o == OPT_HANDSHAKE_TIMEOUT ? &cfg.handshake_timeout_s
			  : o == OPT_HEADER_TIMEOUT  ? &cfg.header_timeout_s
						     : &cfg.idle_timeout_s) = (int)(ms / 1000);
			break;
		}
		case OPT_BODY_MIN_RATE:
			if (strcmp(optarg, "0") == 0) {
				cfg.body_min_rate = 0;
			} else if (parse_size(optarg, &cfg.body_min_rate)) {
				fprintf(stderr,
					"kiln: --request-body-min-rate=%s: expected bytes per "
					"second, e.g. 4KiB, or 0\n",
					optarg);
				return 2;
			}
			break;
		case OPT_MAX_HEADER_SIZE:
			if (parse_size(optarg, &cfg.max_header_bytes) ||
			    cfg.max_header_bytes < 1024 || cfg.max_header_bytes > (1u << 20)) {
				fprintf(stderr,
					"kiln: --max-request-header-size=%s: expected 1KiB..1MiB\n",
					optarg);
				return 2;
			}
			break;
		case OPT_MAX_INFLIGHT: {
			size_t v = 0;
			if (parse_size(optarg, &v)) {
				fprintf(stderr,
					"kiln: --max-inflight-request-bytes=%s: expected bytes, "
					"e.g. 256MiB (at most 2GiB)\n",
					optarg);
				return 2;
			}
			cfg.max_inflight_request_bytes = v;
			break;
		}
		case OPT_INGEST_MAX_SERIES:
		case OPT_INGEST_MAX_LABELS:
		case OPT_INGEST_MAX_LABEL_SIZE:
		case OPT_INGEST_MAX_STACK_DEPTH:
		case OPT_INGEST_MAX_SAMPLE_TYPES: {
			int v = 0;
			const char *name =
			    o == OPT_INGEST_MAX_SERIES	      ? "ingest-max-series-per-request"
			    : o == OPT_INGEST_MAX_LABELS      ? "ingest-max-labels-per-series"
			    : o == OPT_INGEST_MAX_LABEL_SIZE  ? "ingest-max-label-size"
			    : o == OPT_INGEST_MAX_STACK_DEPTH ? "ingest-max-stack-depth"
							      : "ingest-max-sample-types";
			if (parse_count(optarg, 10000000, &v) || v < 1) {
				fprintf(stderr,
					"kiln: --%s=%s: expected a count from 1 to 10000000\n",
					name, optarg);
				return 2;
			}
			*(o == OPT_INGEST_MAX_SERIES	    ? &cfg.ingest_max_series
			  : o == OPT_INGEST_MAX_LABELS	    ? &cfg.ingest_max_labels
			  : o == OPT_INGEST_MAX_LABEL_SIZE  ? &cfg.ingest_max_label_bytes
			  : o == OPT_INGEST_MAX_STACK_DEPTH ? &cfg.ingest_max_stack_depth
							    : &cfg.ingest_max_sample_types) =
			    (size_t)v;
			break;
		}
		case OPT_INGEST_MAX_FUTURE_SKEW:
			if (duration_parse_ms(optarg, 0, &cfg.ingest_max_future_skew_ms) ||
			    cfg.ingest_max_future_skew_ms < 1000) {
				fprintf(stderr,
					"kiln: --ingest-max-future-skew=%s: expected a duration >= "
					"1s, e.g. 1h or 5m\n",
					optarg);
				return 2;
			}
			break;
		case OPT_SYMBOLS_LOCAL_DIR:
			/* Comma-separated, and repeatable; each must be a directory. */
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				struct stat st;

				errno = 0;
				if (stat(tok, &st) != 0 || !S_ISDIR(st.st_mode)) {
					fprintf(stderr, "kiln: --symbols-local-dir=%s: %s\n", tok,
						errno ? strerror(errno) : "not a directory");
					return 2;
				}
				if (n_local_dirs + 1 >=
				    sizeof(local_dirs) / sizeof(local_dirs[0])) {
					fprintf(stderr, "kiln: too many --symbols-local-dir\n");
					return 2;
				}
				local_dirs[n_local_dirs++] = tok;
			}
			cfg.symbols_local_dirs = local_dirs;
			break;
		case OPT_AUTH_TOKENS_FILE:
			cfg.auth_tokens_file = optarg;
			break;
		case OPT_AUTH_DISABLE:
			cfg.auth_disable = true;
			break;
		case OPT_AUTH_METRICS_OPEN:
			cfg.auth_metrics_open = true;
			break;
		case OPT_DISABLE_STREAM_INGEST:
			cfg.stream_ingest_disabled = true;
			break;
		case OPT_HELP:
		case 'h':
			usage(stdout, &defaults);
			return 0;
		case OPT_LOG_FORMAT:
			if (log_set_format_name(optarg) < 0) {
				fprintf(stderr,
					"kiln: --log-format=%s: expected text, logfmt or json\n",
					optarg);
				return 2;
			}
			break;
		case OPT_VERSION:
			printf("kiln %s\n", kiln_version());
			return 0;
		case OPT_STORAGE_BACKEND:
			if (strcmp(optarg, "embedded") && strcmp(optarg, "clickhouse")) {
				fprintf(stderr,
					"kiln: --storage=%s: expected embedded or clickhouse\n",
					optarg);
				return 2;
			}
			cfg.storage_clickhouse = strcmp(optarg, "clickhouse") == 0;
			break;
		case OPT_CLICKHOUSE_URL:
			cfg.clickhouse_url = optarg;
			break;
		case OPT_CLICKHOUSE_DATABASE:
			cfg.clickhouse_database = optarg;
			break;
		case OPT_CLICKHOUSE_USER:
			cfg.clickhouse_user = optarg;
			break;
		case OPT_CLICKHOUSE_PASSWORD_FILE:
			if (read_password_file(optarg, &cfg.clickhouse_password))
				return 2;
			break;
		default:
			usage(stderr, &defaults);
			return 2;
		}
	}
	for (int i = 0; i < n_seen; i++)
		compat_flag_seen("kiln", &parca_flags[seen[i]], seen_value[i]);
	if (optind < argc) {
		fprintf(stderr, "kiln: unexpected argument \"%s\" (see --help)\n", argv[optind]);
		return 2;
	}
	if (!cfg.tls_cert_file != !cfg.tls_key_file) {
		fprintf(stderr, "kiln: --tls-cert-file and --tls-key-file go together\n");
		return 2;
	}
	if (cfg.tls_client_ca_file && !cfg.tls_cert_file) {
		fprintf(stderr, "kiln: --tls-client-ca-file needs TLS: pass --tls-cert-file and "
				"--tls-key-file too\n");
		return 2;
	}
	if (!cfg.ui_path)
		cfg.ui_path = ui_default = default_ui_path();

	/* Signals: stop gracefully on the first; SIGHUP rereads the tokens file
	 * and the scrape config; SIGPIPE never kills us. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = server_new(&cfg, &s, &err);
	if (rc) {
		log_error("cannot start: %s", err.msg);
		free(ui_default);
		return 1;
	}
	running = s;
	server_run(s);
	running = NULL;
	server_free(s);
	log_info("stopped");
	free(ui_default);
	return 0;
}
