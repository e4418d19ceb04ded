/*
 * main.c — kiln-agent's entry point: flags, sinks, signals, then agent_run.
 *
 * Flag names follow Parca's agent where one exists. Everything else lives
 * in the agent module (agent.h).
 */
#include "common/duration.h"
#include "agent/agent.h"
#include "client/client.h"
#include "common/compat_flags.h"
#include "common/log.h"
#include "common/version.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

enum {
	OPT_NODE = 256,
	OPT_LOG_LEVEL,
	OPT_HTTP_ADDRESS,
	OPT_DURATION,
	OPT_FREQUENCY,
	OPT_LOCAL_STORE,
	OPT_LOCAL_LAYOUT,
	OPT_EXTERNAL_LABELS,
	OPT_REMOTE_ADDRESS,
	OPT_REMOTE_INSECURE,
	OPT_REMOTE_SKIP_VERIFY,
	OPT_REMOTE_TOKEN,
	OPT_REMOTE_TOKEN_FILE,
	OPT_REMOTE_TLS_CA,
	OPT_REMOTE_TLS_CERT,
	OPT_REMOTE_TLS_KEY,
	OPT_REMOTE_BUFFER,
	OPT_REMOTE_PROTOCOL,
	OPT_DEBUGINFO_DISABLE,
	OPT_DEBUGINFO_PARALLEL,
	OPT_DEBUGINFO_TIMEOUT,
	OPT_DEBUGINFO_RATE,
	OPT_DEBUGINFO_TEMP_DIR,
	OPT_DEBUGINFO_STRIP,
	OPT_UNWIND_BYTES,
	OPT_DEBUGINFO_DIRS,
	OPT_PERF_MAP_BYTES,
	OPT_VERSION,
	OPT_PYTHON_FRAMES,
	OPT_OFFCPU_THRESHOLD,
	OPT_OFFCPU_PROBABILITY,
	OPT_LOG_FORMAT,
	OPT_PARCA = 2000, /* + index into parca_flags */
};

/* Parca agent flags with no Kiln equivalent (compat_flags.h). */
static const struct compat_flag parca_flags[] = {
    {"config-path", required_argument,
     "relabeling on the agent is not supported yet; the agent's labels (comm, pid, "
     "cgroup...) are sample labels the server can select on"},
    {"otlp-address", required_argument, "Kiln exports no traces of its own"},
    {"otlp-exporter", required_argument, "Kiln exports no traces of its own"},
    {"analytics-opt-out", optional_argument, "Kiln sends no analytics"},
    {"telemetry-disable-panic-reporting", optional_argument, "Kiln reports nothing home"},
    {"remote-store-batch-write-interval", required_argument,
     "Kiln sends each window when it ends (--profiling-duration)"},
    {"remote-store-rpc-unary-timeout", required_argument,
     "Kiln retries each window with backoff until --remote-store-buffer-bytes fill"},
    {"debuginfo-upload-cache-duration", required_argument,
     "Kiln asks the server about each build ID once per run"},
    {"metadata-container-runtime-socket-path", required_argument,
     "Kiln labels containers from their cgroups, without the runtime's socket"},
    {"metadata-disable-caching", optional_argument, "Kiln caches process metadata per pid"},
    {"bpf-verbose-logging", optional_argument,
     "Kiln prints the verifier's log with --log-level=debug when a program is refused"},
    {"bpf-events-buffer-size", required_argument,
     "Kiln sizes its ring buffer from the number of CPUs and the frequency"},
    {"verbose-bpf-logging", optional_argument,
     "Kiln prints the verifier's log with --log-level=debug when a program is refused"},
    {"enable-oom-prof", optional_argument, "Kiln has no OOM profiler"},
    {"instrument-cuda-launch", optional_argument, "Kiln does not trace CUDA launches"},
    {"collect-custom-labels", optional_argument, "Kiln does not read custom labels"},
};

/* --off-cpu-threshold without a value, and --off-cpu-probability's default. */
#define OFFCPU_DEFAULT_THRESHOLD_NS 1000000ull
#define OFFCPU_DEFAULT_PROBABILITY  0.1

static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"node", required_argument, NULL, OPT_NODE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"http-address", required_argument, NULL, OPT_HTTP_ADDRESS},
    {"profiling-duration", required_argument, NULL, OPT_DURATION},
    {"profiling-cpu-sampling-frequency", required_argument, NULL, OPT_FREQUENCY},
    {"local-store-directory", required_argument, NULL, OPT_LOCAL_STORE},
    {"local-store-layout", required_argument, NULL, OPT_LOCAL_LAYOUT},
    {"metadata-external-labels", required_argument, NULL, OPT_EXTERNAL_LABELS},
    {"remote-store-address", required_argument, NULL, OPT_REMOTE_ADDRESS},
    {"store-address", required_argument, NULL, OPT_REMOTE_ADDRESS},
    {"remote-store-insecure", no_argument, NULL, OPT_REMOTE_INSECURE},
    {"insecure", no_argument, NULL, OPT_REMOTE_INSECURE},
    {"remote-store-insecure-skip-verify", no_argument, NULL, OPT_REMOTE_SKIP_VERIFY},
    {"insecure-skip-verify", no_argument, NULL, OPT_REMOTE_SKIP_VERIFY},
    {"remote-store-bearer-token", required_argument, NULL, OPT_REMOTE_TOKEN},
    {"bearer-token", required_argument, NULL, OPT_REMOTE_TOKEN},
    {"remote-store-bearer-token-file", required_argument, NULL, OPT_REMOTE_TOKEN_FILE},
    {"bearer-token-file", required_argument, NULL, OPT_REMOTE_TOKEN_FILE},
    {"remote-store-tls-ca-file", required_argument, NULL, OPT_REMOTE_TLS_CA},
    {"remote-store-tls-cert-file", required_argument, NULL, OPT_REMOTE_TLS_CERT},
    {"remote-store-tls-key-file", required_argument, NULL, OPT_REMOTE_TLS_KEY},
    {"remote-store-buffer-bytes", required_argument, NULL, OPT_REMOTE_BUFFER},
    {"remote-store-protocol", required_argument, NULL, OPT_REMOTE_PROTOCOL},
    {"debuginfo-upload-disable", no_argument, NULL, OPT_DEBUGINFO_DISABLE},
    {"debuginfo-upload-max-parallel", required_argument, NULL, OPT_DEBUGINFO_PARALLEL},
    {"debuginfo-upload-timeout-duration", required_argument, NULL, OPT_DEBUGINFO_TIMEOUT},
    {"debuginfo-upload-max-bytes-per-second", required_argument, NULL, OPT_DEBUGINFO_RATE},
    {"debuginfo-temp-dir", required_argument, NULL, OPT_DEBUGINFO_TEMP_DIR},
    {"debuginfo-strip", optional_argument, NULL, OPT_DEBUGINFO_STRIP},
    {"unwind-table-max-bytes", required_argument, NULL, OPT_UNWIND_BYTES},
    {"debuginfo-directories", required_argument, NULL, OPT_DEBUGINFO_DIRS},
    {"off-cpu-threshold", optional_argument, NULL, OPT_OFFCPU_THRESHOLD},
    {"off-cpu-probability", required_argument, NULL, OPT_OFFCPU_PROBABILITY},
    {"python-frames", optional_argument, NULL, OPT_PYTHON_FRAMES},
    {"perf-map-max-bytes", required_argument, NULL, OPT_PERF_MAP_BYTES},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: kiln-agent [FLAGS]\n"
	    "\n"
	    "Whole-system CPU profiler: samples every process's user and kernel stacks\n"
	    "with eBPF and writes labelled pprof profiles every window (one per process).\n"
	    "Needs root and a kernel with BTF.\n"
	    "\n"
	    "Flags:\n"
	    "  -h, --help                              show this help\n"
	    "      --version                           print the version and exit\n"
	    "      --node=NAME                         node label (default: the hostname)\n"
	    "      --log-level=LEVEL                   debug, info, warn, error (default: info)\n"
	    "      --log-format=FORMAT                 text, logfmt or json (default: text)\n"
	    "      --http-address=HOST:PORT            /metrics listener, \"\" to disable\n"
	    "                                          (default: 127.0.0.1:7071)\n"
	    "      --profiling-duration=DURATION       window length, e.g. 10s, 500ms, 1m\n"
	    "                                          (default: 10s)\n"
	    "      --profiling-cpu-sampling-frequency=HZ\n"
	    "                                          samples per second per CPU (default: 19)\n"
	    "      --local-store-directory=DIR         write gzipped pprof files to DIR\n"
	    "                                          (default: none)\n"
	    "      --local-store-layout=LAYOUT         window: one file per window, TIME.pb.gz,\n"
	    "                                          every process in it (pid, comm, ...\n"
	    "                                          as sample labels); process: one file\n"
	    "                                          per process per window,\n"
	    "                                          TIME_PID_COMM.pb.gz (default: process)\n"
	    "      --metadata-external-labels=K=V,...  labels added to every profile\n"
	    "                                          (default: none)\n"
	    "      --remote-store-address=HOST:PORT    push each window to this server with\n"
	    "                                          WriteRaw (alias --store-address;\n"
	    "                                          default: none)\n"
	    "      --remote-store-insecure             cleartext HTTP/2, no TLS (alias\n"
	    "                                          --insecure; default: false)\n"
	    "      --remote-store-insecure-skip-verify TLS without certificate checks (alias\n"
	    "                                          --insecure-skip-verify; default: false)\n"
	    "      --remote-store-bearer-token=TOKEN   sent as authorization: Bearer TOKEN\n"
	    "                                          (alias --bearer-token; default: none)\n"
	    "      --remote-store-bearer-token-file=FILE\n"
	    "                                          read the token from FILE (alias\n"
	    "                                          --bearer-token-file; default: none)\n"
	    "      --remote-store-tls-ca-file=FILE     check the server's certificate with\n"
	    "                                          these CAs (PEM) instead of the\n"
	    "                                          system's (default: none)\n"
	    "      --remote-store-tls-cert-file=FILE   this agent's certificate (PEM) for a\n"
	    "      --remote-store-tls-key-file=FILE    server that requires one (kiln\n"
	    "                                          --tls-client-ca-file; default: none)\n"
	    "      --remote-store-buffer-bytes=N       windows kept in memory while the\n"
	    "                                          server is down or slow; the oldest\n"
	    "                                          are dropped (and counted) beyond it\n"
	    "                                          (default: 67108864)\n"
	    "      --remote-store-protocol=P           auto: Kiln's streaming ingest\n"
	    "                                          (rows by stack id, each stack sent\n"
	    "                                          once) when the server has it, else\n"
	    "                                          WriteRaw; stream; writeraw\n"
	    "                                          (default: auto)\n"
	    "      --debuginfo-upload-disable          do not upload debuginfo of profiled\n"
	    "                                          binaries to the remote store\n"
	    "                                          (default: false: upload what the\n"
	    "                                          server asks for)\n"
	    "      --debuginfo-upload-max-parallel=N   concurrent uploads (default: 2)\n"
	    "      --debuginfo-upload-timeout-duration=DURATION\n"
	    "                                          per upload call (default: 2m)\n"
	    "      --debuginfo-upload-max-bytes-per-second=N\n"
	    "                                          bandwidth per upload, 0 = unlimited\n"
	    "                                          (default: 0)\n"
	    "      --debuginfo-temp-dir=DIR            where debug parts are extracted\n"
	    "                                          (default: /tmp)\n"
	    "      --debuginfo-strip[=BOOL]            upload only the debug parts of a\n"
	    "                                          binary; false: the whole file\n"
	    "                                          (default: true)\n"
	    "      --unwind-table-max-bytes=N          kernel memory for the unwind tables\n"
	    "                                          that walk user stacks without frame\n"
	    "                                          pointers (.eh_frame, .gopclntab);\n"
	    "                                          taken in 512 KiB chunks as tables\n"
	    "                                          are built; when full, unused tables\n"
	    "                                          are evicted, and code whose table\n"
	    "                                          does not fit is walked by frame\n"
	    "                                          pointers (counted in /metrics);\n"
	    "                                          0: frame pointers only (default:\n"
	    "                                          33554432, at most 134217728)\n"
	    "      --debuginfo-directories=DIR         where separate debug files are found\n"
	    "                                          by build ID, for binaries with no\n"
	    "                                          unwind information of their own\n"
	    "                                          (default: /usr/lib/debug)\n"
	    "      --off-cpu-threshold[=DURATION]      also profile where threads block: a\n"
	    "                                          thread off CPU for DURATION or more\n"
	    "                                          gives an off-CPU sample worth the time\n"
	    "                                          it was away, in the stack it blocked\n"
	    "                                          in (profile type parca_agent:wallclock:\n"
	    "                                          nanoseconds:samples:count; local files\n"
	    "                                          *.offcpu.pb.gz); bare: 1ms\n"
	    "                                          (default: 0, off)\n"
	    "      --off-cpu-probability=P             the share of switch-outs (0..1) that\n"
	    "                                          are timed, bounding the cost per\n"
	    "                                          context switch; totals are then about\n"
	    "                                          P times the true off-CPU time\n"
	    "                                          (OpenTelemetry's and Parca's\n"
	    "                                          --off-cpu-threshold) (default: 0.1)\n"
	    "      --python-frames[=BOOL]              name the Python functions CPython\n"
	    "                                          3.9-3.13 processes run, read from the\n"
	    "                                          interpreter in the kernel, in place\n"
	    "                                          of its eval loop's native frames\n"
	    "                                          (needs the unwind tables; other\n"
	    "                                          versions keep native frames, counted\n"
	    "                                          in /metrics) (default: true)\n"
	    "      --perf-map-max-bytes=N              memory for the names of JIT code read\n"
	    "                                          from perf maps (/tmp/perf-PID.map:\n"
	    "                                          node --perf-basic-prof, Java, .NET\n"
	    "                                          DOTNET_PerfMapEnabled=1, ...), all\n"
	    "                                          processes together (16 MiB at most\n"
	    "                                          each); 0: perf maps are not read\n"
	    "                                          (default: 67108864)\n"
	    "\n"
	    "At least one of --local-store-directory and --remote-store-address is needed.\n");
}

/* A duration flag (common/duration.h; a bare number is seconds) into an
 * unsigned nanosecond field: 0 or a negative errno. */
static int parse_duration(const char *s, uint64_t *out)
{
	int64_t ns;
	int rc = duration_parse_ns(s, DURATION_BARE_SECONDS, &ns);

	if (rc == 0)
		*out = (uint64_t)ns;
	return rc;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "kiln-agent: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct agent_config cfg = {.frequency_hz = 19,
				   .unwind_table_bytes = 32u << 20,
				   .perf_map_max_bytes = PERFMAP_DEFAULT_MAX_BYTES,
				   .debug_dir = "/usr/lib/debug",
				   .offcpu_probability = OFFCPU_DEFAULT_PROBABILITY,
				   .python_frames = true,
				   .duration_ns = 10ull * 1000000000,
				   .http_address = "127.0.0.1:7071",
				   .proc_root = "/proc"};
	static struct agent_metrics metrics;
	struct metrics_server *http = NULL;
	struct agent_sink *sinks[4];
	struct sink_remote_config remote = {0};
	struct debuginfo_uploader_config dcfg = {0};
	bool debuginfo_disable = false;
	uint64_t ns;
	const char *local_dir = NULL, *token_file = NULL;
	bool local_per_process = true;
	char token[4096];
	struct kiln_error err = {0};
	char host[HOST_NAME_MAX + 1] = "";
	struct sigaction sa;
	int opt, rc;
	/* Static: reachable at every exit, not a leak. */
	static struct option *all_options;
	const size_t n_compat = sizeof(parca_flags) / sizeof(parca_flags[0]);
	int seen[32], n_seen = 0;
	char *seen_value[32];

	opterr = 0;
	all_options = compat_options(long_options, parca_flags, n_compat, OPT_PARCA);
	if (!all_options)
		die("%s", "out of memory");
	while ((opt = getopt_long(argc, argv, "h", all_options, NULL)) != -1) {
		char *end;
		long v;

		if (opt >= OPT_PARCA && opt < OPT_PARCA + (int)n_compat) {
			if (n_seen < 32) {
				seen_value[n_seen] = optarg;
				seen[n_seen++] = opt - OPT_PARCA;
			}
			continue;
		}
		switch (opt) {
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("kiln-agent %s\n", kiln_version());
			return 0;
		case OPT_NODE:
			cfg.node = optarg;
			break;
		case OPT_LOG_LEVEL:
			if (log_set_level_name(optarg) != 0)
				die("--log-level=%s: expected debug, info, warn or error", optarg);
			break;
		case OPT_LOG_FORMAT:
			if (log_set_format_name(optarg) != 0)
				die("--log-format=%s: expected text, logfmt or json", optarg);
			break;
		case OPT_HTTP_ADDRESS:
			cfg.http_address = optarg;
			break;
		case OPT_DURATION:
			if (parse_duration(optarg, &cfg.duration_ns) != 0 ||
			    cfg.duration_ns < 100000000ull)
				die("--profiling-duration=%s: expected a duration of at least "
				    "100ms, like 10s",
				    optarg);
			break;
		case OPT_FREQUENCY:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > 10000)
				die("--profiling-cpu-sampling-frequency=%s: expected 1..10000 Hz",
				    optarg);
			cfg.frequency_hz = (unsigned)v;
			break;
		case OPT_LOCAL_STORE:
			local_dir = optarg;
			break;
		case OPT_LOCAL_LAYOUT:
			if (strcmp(optarg, "window") != 0 && strcmp(optarg, "process") != 0)
				die("--local-store-layout=%s: expected window or process", optarg);
			local_per_process = strcmp(optarg, "process") == 0;
			break;
		case OPT_REMOTE_ADDRESS:
			remote.address = optarg;
			break;
		case OPT_REMOTE_INSECURE:
			remote.insecure = true;
			break;
		case OPT_REMOTE_SKIP_VERIFY:
			remote.insecure_skip_verify = true;
			break;
		case OPT_REMOTE_TOKEN:
			remote.bearer_token = optarg;
			break;
		case OPT_REMOTE_TLS_CA:
			remote.tls.ca_file = optarg;
			break;
		case OPT_REMOTE_TLS_CERT:
			remote.tls.cert_file = optarg;
			break;
		case OPT_REMOTE_TLS_KEY:
			remote.tls.key_file = optarg;
			break;
		case OPT_REMOTE_TOKEN_FILE:
			token_file = optarg;
			break;
		case OPT_REMOTE_BUFFER:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 1)
				die("--remote-store-buffer-bytes=%s: expected a positive number",
				    optarg);
			remote.buffer_bytes = (size_t)v;
			break;
		case OPT_REMOTE_PROTOCOL:
			if (strcmp(optarg, "auto") == 0)
				remote.protocol = SINK_PROTOCOL_AUTO;
			else if (strcmp(optarg, "stream") == 0)
				remote.protocol = SINK_PROTOCOL_STREAM;
			else if (strcmp(optarg, "writeraw") == 0)
				remote.protocol = SINK_PROTOCOL_WRITERAW;
			else
				die("--remote-store-protocol=%s: expected auto, stream or writeraw",
				    optarg);
			break;
		case OPT_DEBUGINFO_DISABLE:
			debuginfo_disable = true;
			break;
		case OPT_UNWIND_BYTES:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 ||
			    v > (long)UNWIND_MAX_CHUNKS * UNWIND_CHUNK_ROWS *
				    (long)sizeof(struct unwind_row))
				die("--unwind-table-max-bytes=%s: expected a number of bytes from "
				    "0 to 134217728",
				    optarg);
			cfg.unwind_table_bytes = (size_t)v;
			break;
		case OPT_OFFCPU_THRESHOLD:
			cfg.offcpu_threshold_ns = OFFCPU_DEFAULT_THRESHOLD_NS;
			if (optarg && (parse_duration(optarg, &cfg.offcpu_threshold_ns) != 0 ||
				       cfg.offcpu_threshold_ns > 3600ull * 1000000000))
				die("--off-cpu-threshold=%s: expected a duration up to 1h, like "
				    "1ms or 500us (0: off)",
				    optarg);
			break;
		case OPT_OFFCPU_PROBABILITY: {
			double p;

			errno = 0;
			p = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(p > 0 && p <= 1))
				die("--off-cpu-probability=%s: expected a number above 0, up to 1",
				    optarg);
			cfg.offcpu_probability = p;
			break;
		}
		case OPT_PERF_MAP_BYTES:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 || v > (1l << 32))
				die("--perf-map-max-bytes=%s: expected a number of bytes from 0 to "
				    "4294967296",
				    optarg);
			cfg.perf_map_max_bytes = (size_t)v;
			break;
		case OPT_DEBUGINFO_DIRS:
			cfg.debug_dir = optarg[0] ? optarg : NULL;
			break;
		case OPT_DEBUGINFO_PARALLEL:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > 16)
				die("--debuginfo-upload-max-parallel=%s: expected 1..16", optarg);
			dcfg.max_parallel = (size_t)v;
			break;
		case OPT_DEBUGINFO_TIMEOUT:
			if (parse_duration(optarg, &ns) != 0 || ns < 1000000000ull ||
			    ns > 3600ull * 1000000000)
				die("--debuginfo-upload-timeout-duration=%s: expected 1s..1h",
				    optarg);
			dcfg.timeout_ms = (int)(ns / 1000000);
			break;
		case OPT_DEBUGINFO_RATE:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0)
				die("--debuginfo-upload-max-bytes-per-second=%s: expected a number",
				    optarg);
			dcfg.max_bytes_per_second = (uint64_t)v;
			break;
		case OPT_DEBUGINFO_TEMP_DIR:
			dcfg.temp_dir = optarg;
			break;
		case OPT_DEBUGINFO_STRIP:
			if (!optarg || strcmp(optarg, "true") == 0)
				dcfg.no_strip = false;
			else if (strcmp(optarg, "false") == 0)
				dcfg.no_strip = true;
			else
				die("--debuginfo-strip=%s: expected true or false", optarg);
			break;
		case OPT_PYTHON_FRAMES:
			if (!optarg || strcmp(optarg, "true") == 0)
				cfg.python_frames = true;
			else if (strcmp(optarg, "false") == 0)
				cfg.python_frames = false;
			else
				die("--python-frames=%s: expected true or false", optarg);
			break;
		case OPT_EXTERNAL_LABELS:
			if (labels_parse_list(&cfg.external, optarg, &err) != 0)
				die("--metadata-external-labels: %s", err.msg);
			break;
		default:
			if (optopt)
				fprintf(stderr, "kiln-agent: flag -%c: unknown (see --help)\n",
					optopt);
			else
				fprintf(stderr,
					"kiln-agent: %s: unknown flag or missing value "
					"(see --help)\n",
					argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc)
		die("unexpected argument \"%s\" (see --help)", argv[optind]);
	for (int i = 0; i < n_seen; i++)
		compat_flag_seen("kiln-agent", &parca_flags[seen[i]], seen_value[i]);
	if (!local_dir && !remote.address)
		die("%s", "nothing to write to: give --local-store-directory=DIR or "
			  "--remote-store-address=HOST:PORT");
	if (!remote.tls.cert_file != !remote.tls.key_file)
		die("%s",
		    "--remote-store-tls-cert-file and --remote-store-tls-key-file go together");
	if (remote.insecure && (remote.tls.ca_file || remote.tls.cert_file))
		die("%s",
		    "--remote-store-insecure is cleartext: it cannot use the TLS files given");
	if (token_file) {
		struct kiln_error terr = {0};

		if (bearer_token_read_file(token_file, token, sizeof(token), &terr) < 0)
			die("--remote-store-bearer-token-file: %s", terr.msg);
		remote.bearer_token = token;
	}
	if (!cfg.node) {
		gethostname(host, sizeof(host) - 1);
		cfg.node = host;
	}

	if (agent_preflight(&err) != 0) {
		fprintf(stderr, "kiln-agent: %s\n", err.msg);
		return 1;
	}
	if (local_dir) {
		if (sink_local_new(local_dir, local_per_process, &sinks[cfg.n_sinks], &err) != 0) {
			fprintf(stderr, "kiln-agent: %s\n", err.msg);
			rc = 1;
			goto out;
		}
		sinks[cfg.n_sinks++]->metrics = &metrics;
	}
	if (remote.address) {
		if (sink_remote_new(&remote, &metrics, &sinks[cfg.n_sinks], &err) != 0) {
			fprintf(stderr, "kiln-agent: %s\n", err.msg);
			rc = 1;
			goto out;
		}
		cfg.n_sinks++;
		if (!debuginfo_disable) {
			dcfg.address = remote.address;
			dcfg.insecure = remote.insecure;
			dcfg.insecure_skip_verify = remote.insecure_skip_verify;
			dcfg.bearer_token = remote.bearer_token;
			dcfg.tls = remote.tls;
			cfg.uploader = debuginfo_uploader_new(&dcfg, &metrics, &err);
			if (!cfg.uploader) {
				fprintf(stderr, "kiln-agent: %s\n", err.msg);
				rc = 1;
				goto out;
			}
		}
	}
	cfg.sinks = sinks;

	/* Every window builds and frees a few hundred small profiles: keep the
	 * freed memory in the heap instead of returning it (trim) and faulting
	 * it in again next window, and keep mid-sized blocks off mmap (each
	 * munmap is a TLB shootdown on every CPU). Peak RSS is unchanged. */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	/* The push sender and the debuginfo workers allocate little and
	 * seldom: sharing two arenas instead of one each (kept by glibc
	 * with its free space for the life of the thread) cut the pushing
	 * agent's RSS by ~5 MB. */
	mallopt(M_ARENA_MAX, 2);
	/* The process cache keeps each live process's /proc/PID/maps open
	 * (within half this limit): allow up to 64k where the hard limit
	 * lets us. */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 &&
		    rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: the poll returns at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg.http_address[0] && metrics_server_start(cfg.http_address, &metrics, &http, &err)) {
		fprintf(stderr, "kiln-agent: %s\n", err.msg);
		rc = 1;
		goto out;
	}
	rc = agent_run(&cfg, &metrics, &stop_requested, &err);
	if (rc) {
		fprintf(stderr, "kiln-agent: %s\n", err.msg);
		rc = 1;
	}
out:
	metrics_server_stop(http);
	debuginfo_uploader_free(cfg.uploader);
	for (size_t i = 0; i < cfg.n_sinks; i++)
		sinks[i]->close(sinks[i]);
	labels_free(&cfg.external);
	return rc;
}
