/*
 * sampler.c — the user-space half of the BPF program: load, attach, poll.
 *
 * Steps, in libbpf-tools order: open the embedded skeleton, size the ring
 * buffer, load (the verifier runs here: "BPF refused"), open one
 * PERF_COUNT_SW_CPU_CLOCK event per online CPU with a fixed period of
 * 1e9/freq ns (exactly freq samples per second of CPU time, unlike the
 * adaptive frequency mode), attach the program to each, attach the exec
 * and exit raw tracepoints, and open the ring buffer. Each failure names
 * the step and what to do about it. A poll waits on the ring's epoll fd,
 * runs the before-consume hook (the agent drains the kernel's mmap
 * records there) and then consumes. sampler_symbolize runs the (never
 * attached) symbolize program to name kernel addresses. With off-CPU
 * sampling, its two programs are loaded too and attached last
 * (offcpu_attach); a kernel that refuses them leaves CPU sampling as is.
 */
#include "agent/agent.h"
#include "common/log.h"
#include "profiler.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct sampler {
	struct profiler_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	int *fds;
	int n_cpus;
	struct bpf_link *exec_link, *exit_link;
	struct bpf_link *offcpu_switch_link, *offcpu_resume_link; /* NULL: off */
	bool can_symbolize; /* the kernel has bpf_snprintf (5.13+) */
	sampler_record_fn fn;
	void *ctx;
	void (*before)(void *ctx); /* sampler_set_before_consume */
	void *before_ctx;
	/* The cap of the unwinder's row pool, in chunks (0: the unwinder is
	 * off). */
	uint32_t unwind_max_chunks;
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *text = NULL, *line, *save = NULL;

	if ((level == LIBBPF_DEBUG && !getenv("KILN_VERIFIER_STATS")) ||
	    log_get_level() > LOG_DEBUG)
		return 0;
	/* The verifier's log comes as one multi-line message: a line each. */
	if (vasprintf(&text, fmt, ap) < 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		log_debug("libbpf: %s", line);
	free(text);
	return 0;
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct sampler *s = ctx;

	s->fn(s->ctx, data, len);
	return 0;
}

static long perf_open(struct perf_event_attr *attr, int cpu)
{
	return syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static int perf_error(struct kiln_error *err, int e, int cpu)
{
	if (e == EACCES || e == EPERM)
		return kiln_error_set(err, e,
				      "perf events refused on cpu %d (%s): run as root and check "
				      "/proc/sys/kernel/perf_event_paranoid and seccomp",
				      cpu, strerror(e));
	return kiln_error_set(err, e,
			      "perf events unavailable on cpu %d (%s): the kernel needs "
			      "CONFIG_PERF_EVENTS and a cpu-clock software event",
			      cpu, strerror(e));
}

/* Online CPUs from /sys (e.g. "0-3,6"), as a bitmap of up to n entries. */
static int online_cpus(bool *online, int n)
{
	char text[1024], *p = text;
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int count = 0;

	if (!f)
		return -errno;
	if (!fgets(text, sizeof(text), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	memset(online, 0, (size_t)n * sizeof(*online));
	while (*p && *p != '\n') {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		for (long c = lo; c <= hi && c < n; c++) {
			online[c] = true;
			count++;
		}
		p = *end == ',' ? end + 1 : end;
		if (end == p && *p != ',')
			break;
	}
	return count;
}

/* Opens, sizes and loads the skeleton; unwind_rows sizes the cap of the
 * unwinder's row pool (whose chunks the unwinder adds). */
static int load_skeleton(struct sampler *s, size_t ringbuf_bytes, uint32_t unwind_rows,
			 const struct sampler_offcpu *offcpu, struct kiln_error *err)
{
	int rc;

	s->skel = profiler_bpf__open();
	if (!s->skel)
		return kiln_error_set(err, errno ? errno : EINVAL,
				      "opening the embedded BPF object failed: %s",
				      strerror(errno));
	rc = bpf_map__set_max_entries(s->skel->maps.events, (__u32)ringbuf_bytes);
	if (rc)
		return kiln_error_set(err, -rc, "ring buffer size %zu refused: %s", ringbuf_bytes,
				      strerror(-rc));
	s->skel->rodata->unwind_enabled = unwind_rows > 0;
	if (!unwind_rows)
		bpf_map__set_max_entries(s->skel->maps.unwind_procs, 1);
	if (offcpu && offcpu->threshold_ns) {
		double p = offcpu->probability < 0 ? 0 : offcpu->probability;

		s->skel->rodata->offcpu_threshold_ns = offcpu->threshold_ns;
		s->skel->rodata->offcpu_sample_max =
		    p >= 1 ? 1ull << 32 : (uint64_t)(p * 4294967296.0);
	} else {
		bpf_program__set_autoload(s->skel->progs.offcpu_switch, false);
		bpf_program__set_autoload(s->skel->progs.offcpu_resume_tp, false);
		bpf_program__set_autoload(s->skel->progs.offcpu_resume_kprobe, false);
		bpf_map__set_max_entries(s->skel->maps.offcpu_slots, 1);
	}
	/* The symbolize program needs bpf_snprintf; without it the agent
	 * falls back to reading /proc/kallsyms, so do not let it fail the
	 * whole load. */
	s->can_symbolize =
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_snprintf, NULL) == 1;
	if (!s->can_symbolize)
		bpf_program__set_autoload(s->skel->progs.symbolize, false);
	if (getenv("KILN_VERIFIER_STATS"))
		bpf_program__set_log_level(s->skel->progs.profile_cpu,
					   atoi(getenv("KILN_VERIFIER_STATS")));
	rc = profiler_bpf__load(s->skel);
	if (rc)
		return kiln_error_set(
		    err, -rc,
		    "BPF program refused by the kernel (%s): needs root with "
		    "CAP_BPF+CAP_PERFMON, a BTF kernel >= 5.8 and no lockdown "
		    "forbidding BPF; run with --log-level=debug for the verifier log",
		    strerror(-rc));
	s->unwind_max_chunks = (unwind_rows + UNWIND_CHUNK_ROWS - 1) / UNWIND_CHUNK_ROWS;
	if (s->unwind_max_chunks > UNWIND_MAX_CHUNKS)
		s->unwind_max_chunks = UNWIND_MAX_CHUNKS;
	return 0;
}

int sampler_open(unsigned freq, size_t ringbuf_bytes, uint32_t unwind_rows, sampler_record_fn fn,
		 void *ctx, struct sampler **out, struct kiln_error *err)
{
	return sampler_open_ex(freq, ringbuf_bytes, unwind_rows, NULL, fn, ctx, out, err);
}

int sampler_open_ex(unsigned freq, size_t ringbuf_bytes, uint32_t unwind_rows,
		    const struct sampler_offcpu *offcpu, sampler_record_fn fn, void *ctx,
		    struct sampler **out, struct kiln_error *err)
{
	struct perf_event_attr attr;
	struct sampler *s = calloc(1, sizeof(*s));
	int ncpu = libbpf_num_possible_cpus(), rc;
	bool *online = NULL;

	libbpf_set_print(libbpf_log);
	if (!s || ncpu <= 0)
		return kiln_error_set(err, ENOMEM, "sampler: out of memory");
	s->fn = fn;
	s->ctx = ctx;
	s->n_cpus = ncpu;
	s->links = calloc((size_t)ncpu, sizeof(*s->links));
	s->fds = malloc((size_t)ncpu * sizeof(*s->fds));
	online = calloc((size_t)ncpu, sizeof(*online));
	if (!s->links || !s->fds || !online) {
		rc = kiln_error_set(err, ENOMEM, "sampler: out of memory");
		goto fail;
	}
	for (int i = 0; i < ncpu; i++)
		s->fds[i] = -1;

	if (!ringbuf_bytes) {
		/* ~2.5 polls' worth of the worst case (full 254-frame stacks at
		 * 4x the frequency) per CPU, as a power of two, at least 256 KiB. */
		size_t want = (size_t)ncpu * (freq ? freq : 19) * SAMPLE_EVENT_STACK_OFFSET;

		/* With the unwinder, room for the stack copies of processes
		 * met for the first time, too. */
		ringbuf_bytes = unwind_rows ? 1024 * 1024 : 256 * 1024;
		while (ringbuf_bytes < want && ringbuf_bytes < (256u << 20))
			ringbuf_bytes <<= 1;
	}
	rc = load_skeleton(s, ringbuf_bytes, unwind_rows, offcpu, err);
	if (rc == -EACCES && unwind_rows) {
		/* A verifier that refuses the unwinder (an older kernel without
		 * bpf_loop or bpf_task_pt_regs) still takes the rest. */
		log_warn("the kernel refused the BPF stack unwinder (%s): falling back to frame "
			 "pointers; run with --log-level=debug for the verifier log",
			 err ? err->msg : "");
		if (err)
			kiln_error_clear(err);
		profiler_bpf__destroy(s->skel);
		s->skel = NULL;
		rc = load_skeleton(s, ringbuf_bytes, 0, offcpu, err);
	}
	if (rc && offcpu && offcpu->threshold_ns) {
		/* Off-CPU is an addition: a kernel that refuses its programs
		 * keeps CPU profiling. */
		log_warn("the kernel refused the off-CPU programs (%s): off-CPU profiling is off",
			 err ? err->msg : "");
		if (err)
			kiln_error_clear(err);
		profiler_bpf__destroy(s->skel);
		s->skel = NULL;
		offcpu = NULL;
		rc = load_skeleton(s, ringbuf_bytes, unwind_rows, NULL, err);
	}
	if (rc)
		goto fail;

	rc = online_cpus(online, ncpu);
	if (rc < 0) {
		rc = kiln_error_set(err, -rc, "/sys/devices/system/cpu/online: %s", strerror(-rc));
		goto fail;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = 1000000000ull / (freq ? freq : 19);
	for (int cpu = 0; cpu < ncpu; cpu++) {
		long fd;

		if (!online[cpu])
			continue;
		fd = perf_open(&attr, cpu);
		if (fd < 0) {
			if (errno == ENODEV) /* went offline since we looked */
				continue;
			rc = perf_error(err, errno, cpu);
			goto fail;
		}
		s->fds[cpu] = (int)fd;
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.profile_cpu, (int)fd);
		if (!s->links[cpu]) {
			rc = kiln_error_set(err, errno, "attaching BPF to perf event on cpu %d: %s",
					    cpu, strerror(errno));
			goto fail;
		}
		s->fds[cpu] = -1; /* the link owns (and closes) the event now */
	}
	s->exec_link = bpf_program__attach(s->skel->progs.handle_exec);
	if (!s->exec_link) {
		rc =
		    kiln_error_set(err, errno, "attaching to raw tracepoint sched_process_exec: %s",
				   strerror(errno));
		goto fail;
	}
	s->exit_link = bpf_program__attach(s->skel->progs.handle_exit);
	if (!s->exit_link) {
		rc =
		    kiln_error_set(err, errno, "attaching to raw tracepoint sched_process_exit: %s",
				   strerror(errno));
		goto fail;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_record, s, NULL);
	if (!s->rb) {
		rc = kiln_error_set(err, errno, "opening the BPF ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (offcpu && offcpu->threshold_ns) {
		struct kiln_error oerr = {0};

		struct offcpu_programs progs = {
		    .on_switch = s->skel->progs.offcpu_switch,
		    .resume_tp = s->skel->progs.offcpu_resume_tp,
		    .resume_kprobe = s->skel->progs.offcpu_resume_kprobe,
		};

		if (offcpu_attach(&progs, &s->offcpu_switch_link, &s->offcpu_resume_link, &oerr) !=
		    0)
			log_warn("off-CPU profiling is off: %s", oerr.msg);
	}
	free(online);
	*out = s;
	return 0;
fail:
	free(online);
	sampler_close(s);
	return rc < 0 ? rc : -rc;
}

void sampler_set_before_consume(struct sampler *s, void (*fn)(void *ctx), void *ctx)
{
	s->before = fn;
	s->before_ctx = ctx;
}

int sampler_poll(struct sampler *s, int timeout_ms)
{
	struct epoll_event ev;

	/* The BPF side wakes us only for a new process or a ring filling up
	 * (see profiler.bpf.c); a signal ends the wait early so that a stop
	 * is prompt. */
	if (epoll_wait(ring_buffer__epoll_fd(s->rb), &ev, 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return sampler_drain(s);
}

int sampler_drain(struct sampler *s)
{
	if (s->before)
		s->before(s->before_ctx);
	return ring_buffer__consume(s->rb);
}

bool sampler_offcpu_active(const struct sampler *s)
{
	return s->offcpu_resume_link != NULL;
}

int sampler_python_map_fd(struct sampler *s)
{
	return s->unwind_max_chunks ? bpf_map__fd(s->skel->maps.python_procs) : -1;
}

bool sampler_unwind_maps(struct sampler *s, struct sampler_unwind_maps *out)
{
	if (!s->unwind_max_chunks)
		return false;
	out->procs_fd = bpf_map__fd(s->skel->maps.unwind_procs);
	out->chunks_fd = bpf_map__fd(s->skel->maps.unwind_chunks);
	out->max_chunks = s->unwind_max_chunks;
	out->pool_gen = &s->skel->bss->unwind_pool_gen;
	return true;
}

bool sampler_can_symbolize(const struct sampler *s)
{
	return s->can_symbolize;
}

int sampler_symbolize(struct sampler *s, const uint64_t *addrs, size_t n,
		      const char (**names)[KSYM_NAME_LEN])
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	struct ksym_request *req = &s->skel->bss->ksym_req;

	if (!s->can_symbolize)
		return -EOPNOTSUPP;
	if (n > KSYM_BATCH)
		n = KSYM_BATCH;
	memcpy(req->addrs, addrs, n * sizeof(*addrs));
	req->n = (__u32)n;
	if (bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.symbolize), &opts) != 0)
		return -errno;
	*names = (const char(*)[KSYM_NAME_LEN])s->skel->bss->ksym_names;
	return (int)n;
}

/* out[k] = the sum over CPUs of slot k of a per-CPU array, k < n. */
static int sum_percpu(int fd, uint64_t *out, size_t n)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = calloc((size_t)ncpu, sizeof(*vals));

	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < n; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, vals) != 0)
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	free(vals);
	return 0;
}

int sampler_stats(struct sampler *s, uint64_t *out, size_t n)
{
	return sum_percpu(bpf_map__fd(s->skel->maps.stats), out, n < STAT_NR ? n : STAT_NR);
}

int sampler_walk_hist(struct sampler *s, uint64_t *out, size_t n)
{
	size_t all = WALK_HIST_NR * WALK_HIST_BUCKETS;

	return sum_percpu(bpf_map__fd(s->skel->maps.walk_hist), out, n < all ? n : all);
}

void sampler_stop(struct sampler *s)
{
	bpf_link__destroy(s->offcpu_switch_link);
	s->offcpu_switch_link = NULL;
	bpf_link__destroy(s->offcpu_resume_link);
	s->offcpu_resume_link = NULL;
	for (int i = 0; i < s->n_cpus; i++) {
		bpf_link__destroy(s->links[i]);
		s->links[i] = NULL;
	}
}

void sampler_close(struct sampler *s)
{
	if (!s)
		return;
	ring_buffer__free(s->rb);
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->offcpu_switch_link);
	bpf_link__destroy(s->offcpu_resume_link);
	for (int i = 0; s->links && i < s->n_cpus; i++)
		bpf_link__destroy(s->links[i]);
	for (int i = 0; s->fds && i < s->n_cpus; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	profiler_bpf__destroy(s->skel);
	free(s->links);
	free(s->fds);
	free(s);
}
