/*
 * metrics.c — the agent's own Prometheus /metrics (libmicrohttpd).
 *
 * The counters live in struct agent_metrics, written by the main loop with
 * relaxed atomics; the HTTP thread only reads them, so there is no lock.
 * Names follow Prometheus conventions (kiln_agent_*_total for counters).
 */
#include "agent/agent.h"
#include "common/process_metrics.h"
#include "common/version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metrics_server {
	struct MHD_Daemon *daemon;
	struct agent_metrics *m;
};

#define LOAD(f) ((unsigned long long)atomic_load_explicit(&m->f, memory_order_relaxed))

/* The unwinder: how user stacks ended, and the tables behind them. */
/* The lower bound of bucket b of a walk histogram, in units. */
static uint64_t walk_bucket_low(unsigned b)
{
	if (b < WALK_HIST_LINEAR)
		return b;
	return (uint64_t)WALK_HIST_LINEAR << (b - WALK_HIST_LINEAR);
}

/* The median of histogram h in ns (0 when empty), interpolated inside its
 * bucket; the open last bucket counts as its lower bound. */
static double walk_hist_median(const struct agent_metrics *m, unsigned h, double unit_ns)
{
	uint64_t c[WALK_HIST_BUCKETS], total = 0, seen = 0;

	for (unsigned b = 0; b < WALK_HIST_BUCKETS; b++)
		total += c[b] = LOAD(unwind_walk_hist[h * WALK_HIST_BUCKETS + b]);
	if (total == 0)
		return 0;
	for (unsigned b = 0; b < WALK_HIST_BUCKETS; b++) {
		double lo = (double)walk_bucket_low(b), hi;

		if (seen + c[b] < (total + 1) / 2) {
			seen += c[b];
			continue;
		}
		hi = b + 1 < WALK_HIST_BUCKETS ? (double)walk_bucket_low(b + 1) : lo;
		return unit_ns *
		       (lo + (hi - lo) * ((double)((total + 1) / 2 - seen) - 0.5) / (double)c[b]);
	}
	return 0;
}

/* The per-stack walk times as a Prometheus histogram (bounds: doublings
 * of 256 ns, each a bucket boundary of walk_hist) and the medians per
 * stack and per frame as gauges. */
static int render_walk_hist(const struct agent_metrics *m, struct buf *out)
{
	const unsigned unit = WALK_HIST_STACK_UNIT_NS;
	uint64_t cum = 0;
	unsigned b = 0;
	int rc = buf_printf(out, "# HELP kiln_agent_unwind_walk_duration_seconds BPF user-stack "
				 "walk time per stack.\n"
				 "# TYPE kiln_agent_unwind_walk_duration_seconds histogram\n");

	for (uint64_t le = 256; le <= 1048576 && b < WALK_HIST_BUCKETS; le *= 2) {
		for (; b < WALK_HIST_BUCKETS && walk_bucket_low(b) * unit < le; b++)
			cum += LOAD(unwind_walk_hist[WALK_HIST_STACK * WALK_HIST_BUCKETS + b]);
		if (b == WALK_HIST_BUCKETS)
			break;
		rc |= buf_printf(out,
				 "kiln_agent_unwind_walk_duration_seconds_bucket{le=\"%g\"} %llu\n",
				 (double)le / 1e9, (unsigned long long)cum);
	}
	for (; b < WALK_HIST_BUCKETS; b++)
		cum += LOAD(unwind_walk_hist[WALK_HIST_STACK * WALK_HIST_BUCKETS + b]);
	rc |= buf_printf(
	    out,
	    "kiln_agent_unwind_walk_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "kiln_agent_unwind_walk_duration_seconds_count %llu\n"
	    "kiln_agent_unwind_walk_duration_seconds_sum %.9f\n"
	    "# HELP kiln_agent_unwind_walk_median_seconds Median BPF user-stack walk time per "
	    "stack.\n"
	    "# TYPE kiln_agent_unwind_walk_median_seconds gauge\n"
	    "kiln_agent_unwind_walk_median_seconds %.9f\n"
	    "# HELP kiln_agent_unwind_frame_median_seconds Median BPF user-stack walk time per "
	    "frame (each walk's time over its frames).\n"
	    "# TYPE kiln_agent_unwind_frame_median_seconds gauge\n"
	    "kiln_agent_unwind_frame_median_seconds %.9f\n",
	    (unsigned long long)cum, (unsigned long long)cum, (double)LOAD(unwind_walk_ns) / 1e9,
	    walk_hist_median(m, WALK_HIST_STACK, WALK_HIST_STACK_UNIT_NS) / 1e9,
	    walk_hist_median(m, WALK_HIST_FRAME, WALK_HIST_FRAME_UNIT_NS) / 1e9);
	return rc;
}

static int render_unwind(const struct agent_metrics *m, struct buf *out)
{
	static const char *const reasons[UNWIND_STATUS_NR] = {
	    [UNWIND_STATUS_COMPLETE] = "complete",
	    [UNWIND_STATUS_NO_PROCESS] = "no_process_tables",
	    [UNWIND_STATUS_NO_MAPPING] = "no_mapping",
	    [UNWIND_STATUS_NO_TABLE] = "no_table",
	    [UNWIND_STATUS_TABLE_MISS] = "table_miss",
	    [UNWIND_STATUS_UNSUPPORTED] = "unsupported_rule",
	    [UNWIND_STATUS_READ_FAULT] = "read_fault",
	    [UNWIND_STATUS_DEPTH] = "depth_limit",
	    [UNWIND_STATUS_BAD_FRAME] = "bad_frame",
	    [UNWIND_STATUS_NO_USER] = "kernel_thread",
	    [UNWIND_STATUS_TABLE_PENDING] = "table_pending",
	};
	int rc = buf_printf(out, "# HELP kiln_agent_user_stacks_total Samples by how their user "
				 "stack ended: complete (reached the outermost frame) or why "
				 "not.\n"
				 "# TYPE kiln_agent_user_stacks_total counter\n");

	for (int i = 0; i < UNWIND_STATUS_NR; i++)
		rc |= buf_printf(out, "kiln_agent_user_stacks_total{result=\"%s\"} %llu\n",
				 reasons[i], LOAD(unwind_status[i]));
	rc |= buf_printf(
	    out,
	    "# HELP kiln_agent_unwind_walks_total User stacks the BPF program walked with "
	    "unwind tables.\n"
	    "# TYPE kiln_agent_unwind_walks_total counter\n"
	    "kiln_agent_unwind_walks_total %llu\n"
	    "# HELP kiln_agent_unwind_walk_seconds_total Time the BPF program spent in those "
	    "walks.\n"
	    "# TYPE kiln_agent_unwind_walk_seconds_total counter\n"
	    "kiln_agent_unwind_walk_seconds_total %.9f\n"
	    "# HELP kiln_agent_unwind_walk_frames_total User frames those walks emitted.\n"
	    "# TYPE kiln_agent_unwind_walk_frames_total counter\n"
	    "kiln_agent_unwind_walk_frames_total %llu\n"
	    "# HELP kiln_agent_unwind_rewalked_total Samples taken before their process's "
	    "tables were loaded, walked afterwards from the copy of the stack they carry.\n"
	    "# TYPE kiln_agent_unwind_rewalked_total counter\n"
	    "kiln_agent_unwind_rewalked_total %llu\n"
	    "# HELP kiln_agent_unwind_tables Executables whose unwind table is in the kernel.\n"
	    "# TYPE kiln_agent_unwind_tables gauge\n"
	    "kiln_agent_unwind_tables %llu\n"
	    "# HELP kiln_agent_unwind_processes Processes whose mappings the unwinder knows.\n"
	    "# TYPE kiln_agent_unwind_processes gauge\n"
	    "kiln_agent_unwind_processes %llu\n"
	    "# HELP kiln_agent_unwind_table_bytes Bytes of unwind rows (and page indexes) "
	    "the tables hold in the kernel's row pool.\n"
	    "# TYPE kiln_agent_unwind_table_bytes gauge\n"
	    "kiln_agent_unwind_table_bytes %llu\n"
	    "# HELP kiln_agent_unwind_table_max_bytes The cap of the row pool "
	    "(--unwind-table-max-bytes).\n"
	    "# TYPE kiln_agent_unwind_table_max_bytes gauge\n"
	    "kiln_agent_unwind_table_max_bytes %llu\n"
	    "# HELP kiln_agent_unwind_table_builds_total Unwind tables built from executables.\n"
	    "# TYPE kiln_agent_unwind_table_builds_total counter\n"
	    "kiln_agent_unwind_table_builds_total %llu\n"
	    "# HELP kiln_agent_unwind_table_build_seconds_total Time spent building them.\n"
	    "# TYPE kiln_agent_unwind_table_build_seconds_total counter\n"
	    "kiln_agent_unwind_table_build_seconds_total %.6f\n"
	    "# HELP kiln_agent_unwind_table_failures_total Executables left without a table "
	    "(no CFI, unreadable, over the budget): their code is walked by frame pointers.\n"
	    "# TYPE kiln_agent_unwind_table_failures_total counter\n"
	    "kiln_agent_unwind_table_failures_total %llu\n"
	    "# HELP kiln_agent_unwind_tables_over_budget_total Tables that did not fit "
	    "--unwind-table-max-bytes.\n"
	    "# TYPE kiln_agent_unwind_tables_over_budget_total counter\n"
	    "kiln_agent_unwind_tables_over_budget_total %llu\n"
	    "# HELP kiln_agent_unwind_tables_evicted_total Unused tables dropped to make room.\n"
	    "# TYPE kiln_agent_unwind_tables_evicted_total counter\n"
	    "kiln_agent_unwind_tables_evicted_total %llu\n"
	    "# HELP kiln_agent_unwind_process_loads_total Processes whose mappings were "
	    "(re)loaded.\n"
	    "# TYPE kiln_agent_unwind_process_loads_total counter\n"
	    "kiln_agent_unwind_process_loads_total %llu\n"
	    "# HELP kiln_agent_unwind_mappings_dropped_total Code mappings beyond the "
	    "per-process limit.\n"
	    "# TYPE kiln_agent_unwind_mappings_dropped_total counter\n"
	    "kiln_agent_unwind_mappings_dropped_total %llu\n"
	    "# HELP kiln_agent_unwind_map_bytes Kernel memory the unwind tables' row pool "
	    "holds: its chunks, added as tables arrive, up to kiln_agent_unwind_table_max_bytes.\n"
	    "# TYPE kiln_agent_unwind_map_bytes gauge\n"
	    "kiln_agent_unwind_map_bytes %llu\n",
	    LOAD(unwind_walks), (double)LOAD(unwind_walk_ns) / 1e9, LOAD(unwind_walk_frames),
	    LOAD(unwind_rewalked), LOAD(unwind_tables), LOAD(unwind_processes),
	    LOAD(unwind_table_bytes), LOAD(unwind_table_bytes_max), LOAD(unwind_table_builds),
	    (double)LOAD(unwind_table_build_ns) / 1e9, LOAD(unwind_table_failures),
	    LOAD(unwind_tables_over_budget), LOAD(unwind_tables_evicted),
	    LOAD(unwind_process_loads), LOAD(unwind_mappings_dropped), LOAD(unwind_map_bytes));
	rc |= render_walk_hist(m, out);
	return rc;
}

/* Off-CPU sampling (--off-cpu-threshold): what the probes saw, noted and
 * sent, and what was lost. */
static int render_offcpu(const struct agent_metrics *m, struct buf *out)
{
	return buf_printf(
	    out,
	    "# HELP kiln_agent_off_cpu_enabled 1 when off-CPU probes are attached.\n"
	    "# TYPE kiln_agent_off_cpu_enabled gauge\n"
	    "kiln_agent_off_cpu_enabled %llu\n"
	    "# HELP kiln_agent_off_cpu_switches_total Context switches away from a task "
	    "(switch-outs) the probe saw.\n"
	    "# TYPE kiln_agent_off_cpu_switches_total counter\n"
	    "kiln_agent_off_cpu_switches_total %llu\n"
	    "# HELP kiln_agent_off_cpu_switches_recorded_total Switch-outs drawn "
	    "(--off-cpu-probability) and noted until the task runs again.\n"
	    "# TYPE kiln_agent_off_cpu_switches_recorded_total counter\n"
	    "kiln_agent_off_cpu_switches_recorded_total %llu\n"
	    "# HELP kiln_agent_off_cpu_short_total Noted tasks back on CPU before "
	    "--off-cpu-threshold: no sample.\n"
	    "# TYPE kiln_agent_off_cpu_short_total counter\n"
	    "kiln_agent_off_cpu_short_total %llu\n"
	    "# HELP kiln_agent_off_cpu_kernel_samples_total Off-CPU samples the BPF program "
	    "sent.\n"
	    "# TYPE kiln_agent_off_cpu_kernel_samples_total counter\n"
	    "kiln_agent_off_cpu_kernel_samples_total %llu\n"
	    "# HELP kiln_agent_off_cpu_samples_total Off-CPU samples received and put in "
	    "profiles.\n"
	    "# TYPE kiln_agent_off_cpu_samples_total counter\n"
	    "kiln_agent_off_cpu_samples_total %llu\n"
	    "# HELP kiln_agent_off_cpu_profiles_total Off-CPU profiles built.\n"
	    "# TYPE kiln_agent_off_cpu_profiles_total counter\n"
	    "kiln_agent_off_cpu_profiles_total %llu\n"
	    "# HELP kiln_agent_off_cpu_dropped_total Off-CPU waits lost or skipped, by "
	    "reason: slot_taken (a thread's note replaced by another's with the same slot), "
	    "ringbuf_full (the sample found no room), kernel_thread (a kernel thread's "
	    "wait, skipped on purpose).\n"
	    "# TYPE kiln_agent_off_cpu_dropped_total counter\n"
	    "kiln_agent_off_cpu_dropped_total{reason=\"slot_taken\"} %llu\n"
	    "kiln_agent_off_cpu_dropped_total{reason=\"ringbuf_full\"} %llu\n"
	    "kiln_agent_off_cpu_dropped_total{reason=\"kernel_thread\"} %llu\n",
	    LOAD(offcpu_enabled), LOAD(offcpu_switches), LOAD(offcpu_recorded), LOAD(offcpu_short),
	    LOAD(offcpu_kernel_samples), LOAD(offcpu_samples), LOAD(offcpu_profiles),
	    LOAD(offcpu_drops_slot_taken), LOAD(offcpu_drops_ringbuf), LOAD(offcpu_kernel_threads));
}

/* Python frames (python.c): what was walked, what failed and why. */
static int render_python(const struct agent_metrics *m, struct buf *out)
{
	static const char *const reasons[PYTHON_FAIL_NR] = {
	    [PYTHON_FAIL_NO_THREAD_STATE] = "no_thread_state",
	    [PYTHON_FAIL_READ_FAULT] = "read_fault",
	    [PYTHON_FAIL_NO_FRAME] = "no_frame",
	    [PYTHON_FAIL_DEPTH] = "depth",
	};
	int rc = buf_printf(
	    out,
	    "# HELP kiln_agent_python_processes_total CPython processes whose frames the BPF "
	    "program walks.\n"
	    "# TYPE kiln_agent_python_processes_total counter\n"
	    "kiln_agent_python_processes_total %llu\n"
	    "# HELP kiln_agent_python_walks_total Samples of those processes walked.\n"
	    "# TYPE kiln_agent_python_walks_total counter\n"
	    "kiln_agent_python_walks_total %llu\n"
	    "# HELP kiln_agent_python_walk_seconds_total Time the BPF program spent in those "
	    "walks (native and Python frames).\n"
	    "# TYPE kiln_agent_python_walk_seconds_total counter\n"
	    "kiln_agent_python_walk_seconds_total %.9f\n"
	    "# HELP kiln_agent_python_frames_total Python frames emitted.\n"
	    "# TYPE kiln_agent_python_frames_total counter\n"
	    "kiln_agent_python_frames_total %llu\n"
	    "# HELP kiln_agent_python_code_unreadable_total Code objects that could not be "
	    "read (their frames stay unnamed).\n"
	    "# TYPE kiln_agent_python_code_unreadable_total counter\n"
	    "kiln_agent_python_code_unreadable_total %llu\n"
	    "# HELP kiln_agent_python_walk_failures_total Python walks that stopped, by "
	    "reason; unsupported_version counts processes left with native frames.\n"
	    "# TYPE kiln_agent_python_walk_failures_total counter\n"
	    "kiln_agent_python_walk_failures_total{reason=\"unsupported_version\"} %llu\n",
	    LOAD(python_processes), LOAD(python_walks), (double)LOAD(python_walk_ns) / 1e9,
	    LOAD(python_kernel_frames), LOAD(python_code_unreadable), LOAD(python_unsupported));

	for (int i = 0; i < PYTHON_FAIL_NR; i++)
		rc |= buf_printf(out, "kiln_agent_python_walk_failures_total{reason=\"%s\"} %llu\n",
				 reasons[i], LOAD(python_fail[i]));
	return rc;
}

int metrics_render(const struct agent_metrics *m, struct buf *out)
{
	int rc = 0;

	rc |= buf_printf(out,
			 "# HELP kiln_agent_build_info Always 1; the version kiln-agent was "
			 "built from.\n"
			 "# TYPE kiln_agent_build_info gauge\n"
			 "kiln_agent_build_info{version=\"%s\"} 1\n",
			 kiln_version());
	rc |= buf_printf(out,
			 "# HELP kiln_agent_samples_total CPU samples received from the kernel.\n"
			 "# TYPE kiln_agent_samples_total counter\n"
			 "kiln_agent_samples_total %llu\n",
			 LOAD(samples));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_kernel_samples_total CPU samples taken by the BPF "
			 "program (idle excluded), delivered or not.\n"
			 "# TYPE kiln_agent_kernel_samples_total counter\n"
			 "kiln_agent_kernel_samples_total %llu\n",
			 LOAD(kernel_samples));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_dropped_samples_total Samples lost, by reason.\n"
			 "# TYPE kiln_agent_dropped_samples_total counter\n"
			 "kiln_agent_dropped_samples_total{reason=\"ringbuf_full\"} %llu\n"
			 "kiln_agent_dropped_samples_total{reason=\"out_of_memory\"} %llu\n"
			 "kiln_agent_dropped_samples_total{reason=\"off_cpu_walk\"} %llu\n",
			 LOAD(drops_ringbuf), LOAD(drops_oom), LOAD(offcpu_nested));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_stack_errors_total Samples kept without a stack "
			 "that could not be read.\n"
			 "# TYPE kiln_agent_stack_errors_total counter\n"
			 "kiln_agent_stack_errors_total{stack=\"kernel\"} %llu\n"
			 "kiln_agent_stack_errors_total{stack=\"user\"} %llu\n",
			 LOAD(kernel_stack_errors), LOAD(user_stack_errors));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_exec_events_total Processes seen calling exec.\n"
			 "# TYPE kiln_agent_exec_events_total counter\n"
			 "kiln_agent_exec_events_total %llu\n"
			 "# HELP kiln_agent_exit_events_total Processes seen exiting.\n"
			 "# TYPE kiln_agent_exit_events_total counter\n"
			 "kiln_agent_exit_events_total %llu\n"
			 "# HELP kiln_agent_mmap_records_lost_total Kernel mmap records lost to "
			 "a full ring (a process gone before it was read may then keep bare "
			 "addresses).\n"
			 "# TYPE kiln_agent_mmap_records_lost_total counter\n"
			 "kiln_agent_mmap_records_lost_total %llu\n",
			 LOAD(exec_events), LOAD(exit_events), LOAD(mmap_records_lost));
	rc |=
	    buf_printf(out,
		       "# HELP kiln_agent_profiles_written_total Profiles handed to sinks "
		       "successfully.\n"
		       "# TYPE kiln_agent_profiles_written_total counter\n"
		       "kiln_agent_profiles_written_total %llu\n"
		       "# HELP kiln_agent_profiles_failed_total Profiles a sink failed to write.\n"
		       "# TYPE kiln_agent_profiles_failed_total counter\n"
		       "kiln_agent_profiles_failed_total %llu\n"
		       "# HELP kiln_agent_profiles_dropped_total Profiles a sink dropped "
		       "(buffer full).\n"
		       "# TYPE kiln_agent_profiles_dropped_total counter\n"
		       "kiln_agent_profiles_dropped_total %llu\n",
		       LOAD(profiles_written), LOAD(profiles_failed), LOAD(profiles_dropped));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_debuginfo_uploads_total Debuginfo upload outcomes "
			 "per build ID attempt.\n"
			 "# TYPE kiln_agent_debuginfo_uploads_total counter\n"
			 "kiln_agent_debuginfo_uploads_total{result=\"uploaded\"} %llu\n"
			 "kiln_agent_debuginfo_uploads_total{result=\"not_wanted\"} %llu\n"
			 "kiln_agent_debuginfo_uploads_total{result=\"failed\"} %llu\n"
			 "kiln_agent_debuginfo_uploads_total{result=\"no_symbols\"} %llu\n",
			 LOAD(debuginfo_uploaded), LOAD(debuginfo_not_wanted),
			 LOAD(debuginfo_failed), LOAD(debuginfo_no_symbols));
	rc |= buf_printf(out,
			 "# HELP kiln_agent_windows_total Profiling windows completed.\n"
			 "# TYPE kiln_agent_windows_total counter\n"
			 "kiln_agent_windows_total %llu\n"
			 "# HELP kiln_agent_window_read_seconds Time to turn the last window "
			 "into profiles.\n"
			 "# TYPE kiln_agent_window_read_seconds gauge\n"
			 "kiln_agent_window_read_seconds %.6f\n"
			 "# HELP kiln_agent_window_read_seconds_total Time spent turning windows "
			 "into profiles.\n"
			 "# TYPE kiln_agent_window_read_seconds_total counter\n"
			 "kiln_agent_window_read_seconds_total %.6f\n",
			 LOAD(windows), (double)LOAD(window_read_ns_last) / 1e9,
			 (double)LOAD(window_read_ns_total) / 1e9);
	rc |= buf_printf(out,
			 "# HELP kiln_agent_processes_tracked Processes in the agent's cache.\n"
			 "# TYPE kiln_agent_processes_tracked gauge\n"
			 "kiln_agent_processes_tracked %llu\n",
			 LOAD(processes_tracked));
	rc |= render_unwind(m, out);
	rc |= render_offcpu(m, out);
	rc |= render_python(m, out);
	rc |= perfmap_metrics_render(&m->perfmap, out);
	rc |= process_metrics_render(out);
	return rc ? -ENOMEM : 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **req)
{
	struct metrics_server *s = cls;
	struct MHD_Response *resp;
	unsigned status = MHD_HTTP_OK;
	const char *ctype = "text/plain; version=0.0.4; charset=utf-8";
	enum MHD_Result ret;
	struct buf body;

	buf_init(&body);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		buf_append_str(&body, "method not allowed\n");
	} else if (strcmp(url, "/metrics") == 0) {
		if (metrics_render(s->m, &body) != 0) {
			status = MHD_HTTP_INTERNAL_SERVER_ERROR;
			buf_reset(&body);
		}
	} else if (strcmp(url, "/healthy") == 0 || strcmp(url, "/ready") == 0) {
		buf_append_str(&body, "ok\n");
	} else {
		status = MHD_HTTP_NOT_FOUND;
		buf_append_str(&body, "not found: try /metrics\n");
	}
	resp = MHD_create_response_from_buffer(body.len, body.data, MHD_RESPMEM_MUST_COPY);
	buf_free(&body);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", ctype);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

int metrics_server_start(const char *addr, struct agent_metrics *m, struct metrics_server **out,
			 struct kiln_error *err)
{
	struct metrics_server *s;
	struct addrinfo hints = {0}, *ai = NULL;
	const char *colon = strrchr(addr, ':');
	char host[256];
	int rc;

	if (!colon || colon - addr >= (long)sizeof(host) || !colon[1])
		return kiln_error_set(err, EINVAL, "--http-address \"%s\": expected host:port",
				      addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	if (host[0] == '[') { /* [::1]:7071 */
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
	if (rc != 0)
		return kiln_error_set(err, EINVAL, "--http-address \"%s\": %s", addr,
				      gai_strerror(rc));
	s = calloc(1, sizeof(*s));
	if (!s) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	s->m = m;
	/* poll, not select: the process cache may hold more than FD_SETSIZE
	 * descriptors, and select cannot watch a socket numbered above it. */
	s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
					 (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				     0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
				     ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, 16U,
				     MHD_OPTION_CONNECTION_TIMEOUT, 10U, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!s->daemon) {
		free(s);
		return kiln_error_set(err, EADDRINUSE,
				      "--http-address %s: cannot listen (in use or not a local "
				      "address)",
				      addr);
	}
	*out = s;
	return 0;
}

void metrics_server_stop(struct metrics_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	free(s);
}
