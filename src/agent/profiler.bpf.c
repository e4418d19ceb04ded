// SPDX-License-Identifier: GPL-2.0
/*
 * profiler.bpf.c — the kernel half of kiln-agent (BPF CO-RE).
 *
 * profile_cpu runs on every PERF_COUNT_SW_CPU_CLOCK overflow (19 Hz per CPU
 * by default). It skips the idle task, walks the kernel and user stacks with
 * the kernel's frame-pointer unwinder (bpf_get_stack) into a per-CPU scratch
 * record and copies the used part into the ring buffer. Nothing is
 * aggregated here: user space owns windows, so a sample is never lost or
 * counted twice at a window boundary and no hash map can fill up. Every drop
 * is counted in the per-CPU stats array.
 *
 * handle_exec tells user space that a process replaced its image, so that
 * its cached mappings are re-read (and notes when, so that its first
 * sample wakes user space at once); handle_exit that it is gone, so that its
 * cache entry is dropped once no window needs it.
 *
 * offcpu.bpf.h adds the off-CPU programs (--off-cpu-threshold), which
 * share profile_cpu's stack walk (submit_stacks).
 *
 * symbolize is never attached: user space runs it (BPF_PROG_TEST_RUN) to
 * name the kernel addresses its profiles need, through the kernel's own
 * kallsyms lookup, instead of reading all of /proc/kallsyms.
 *
 * Nothing here reads a kernel structure, so there is nothing for CO-RE to
 * relocate and libbpf never has to load and parse the kernel's BTF (a 5 MB
 * parse that was a third of the agent's start-up): the object still runs
 * unchanged on any kernel with the helpers it calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profiler.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024); /* resized by user space before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_event);
} scratch SEC(".maps");

/* Processes sampled since their last exec: a sample of any other wakes user
 * space at once, so that it reads the new process's /proc entries while
 * the process still lives; other samples wait for the next drain. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} known_pids SEC(".maps");

/* When each process not sampled since exec'd (ktime ns). Its first sample
 * wakes user space at once only if the exec was recent: such a process may
 * live tens of milliseconds (a compiler, a script's command), and its maps
 * must be read before it exits. A process that was already running when
 * the agent started, or ran a while before its first sample, waits for the
 * next regular drain (2 s at most): the 200 long-running processes of a
 * busy host then cost no wakeup each. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} exec_times SEC(".maps");

#define YOUNG_NS (5ull * 1000000000)

/* When each process without unwind tables last woke user space to load
 * them: a sample of such a process wakes it again at most every
 * TABLE_WAKE_NS, so tables arrive within a few milliseconds of a process's
 * first samples (or of its exec) however user space's own bookkeeping
 * stands, and a process that cannot be loaded costs a wakeup a tenth of
 * a second at most. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} table_wakes SEC(".maps");

#define TABLE_WAKE_NS (100ull * 1000000)

static __always_inline void wake_for_tables(const struct sample_event *e, __u32 pid, __u64 *wakeup)
{
	__u64 *woke = bpf_map_lookup_elem(&table_wakes, &pid);

	if (!woke || e->ktime_ns - *woke > TABLE_WAKE_NS) {
		bpf_map_update_elem(&table_wakes, &pid, &e->ktime_ns, BPF_ANY);
		*wakeup = BPF_RB_FORCE_WAKEUP;
	}
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += n;
}

static __always_inline void stat_inc(__u32 idx)
{
	stat_add(idx, 1);
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WALK_HIST_NR *WALK_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} walk_hist SEC(".maps");

/* Counts v (in units) into histogram h's log-linear bucket. */
static __always_inline void walk_hist_add(__u32 h, __u64 v)
{
	__u32 b = (__u32)v, slot;
	__u64 *c;

	if (v >= WALK_HIST_LINEAR) {
		b = WALK_HIST_LINEAR;
		v /= WALK_HIST_LINEAR;
		for (int i = 0; i < WALK_HIST_BUCKETS - WALK_HIST_LINEAR - 1 && v > 1; i++) {
			v >>= 1;
			b++;
		}
	}
	slot = h * WALK_HIST_BUCKETS + b;
	c = bpf_map_lookup_elem(&walk_hist, &slot);
	if (c)
		*c += 1;
}

/* Set while this CPU's off-CPU program fills the per-CPU scratch record
 * and walk state: a CPU-clock sample may interrupt it there (the resume
 * tracepoint runs with interrupts on), and must then not reuse them
 * (profile_cpu skips it, counted as STAT_OFFCPU_NESTED). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_busy SEC(".maps");

/* Set by user space before load: walk user stacks with unwind tables. */
const volatile bool unwind_enabled = false;
/* Bumped by user space whenever row-pool slots become free for reuse
 * (unwind_pool.c): rules cached under an older value are not trusted. */
volatile __u32 unwind_pool_gen = 0;

#if defined(__TARGET_ARCH_x86)
#include "unwind.bpf.h"

/* The registers and the top of the user stack of a sample walked without
 * tables, for user space to walk again once they are loaded: a process's
 * first samples (before its tables exist) then come out as complete as
 * the rest, as do processes too short-lived to be loaded while sampled. */
static __always_inline void copy_user_stack(void *ctx, struct sample_event *e)
{
	struct x86_regs regs;
	__u32 len = 0;

	/* A copy is 8 KiB where a sample is ~200 bytes: only while the ring
	 * is mostly empty, so that copies never crowd out samples or the
	 * exec and exit events that share the ring. */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >
	    bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 8)
		return;
	if (!user_regs(ctx, &regs))
		return;
	e->user_regs[0] = regs.ip;
	e->user_regs[1] = regs.sp;
	e->user_regs[2] = regs.bp;
	for (__u32 i = 0; i < PROFILER_STACK_COPY / STACK_COPY_CHUNK; i++) {
		if (bpf_probe_read_user(&e->stack[i * STACK_COPY_CHUNK], STACK_COPY_CHUNK,
					(const void *)(regs.sp + len)))
			break;
		len += STACK_COPY_CHUNK;
	}
	e->stack_len = len;
}

/* A sample that carries its stack (walked again in user space) carries
 * its Python frames too, after the user frames at: the Python walk needs
 * no unwind tables (python.bpf.h, python_chain). */
static __always_inline __u8 python_held_chain(struct sample_event *e, __u32 pid, __u32 at)
{
	if (at >= PROFILER_MAX_FRAMES)
		return 0;
	return (__u8)python_chain(pid, (__u32)bpf_get_current_pid_tgid(), at,
				  PROFILER_MAX_FRAMES - at);
}

/* Its mappings are gone (exec, exit): no walk may use them from now on. */
static __always_inline void forget_unwind_proc(__u32 pid)
{
	bpf_map_delete_elem(&unwind_procs, &pid);
	bpf_map_delete_elem(&python_procs, &pid);
}
#else
static __always_inline void forget_unwind_proc(__u32 pid)
{
}

static __always_inline void copy_user_stack(void *ctx, struct sample_event *e)
{
}

static __always_inline long unwind_user(void *ctx, struct sample_event *e, __u32 pid, __u32 base)
{
	return -1;
}

static __always_inline bool python_walked(void)
{
	return false;
}

static __always_inline __u8 python_held_chain(struct sample_event *e, __u32 pid, __u32 at)
{
	return 0;
}
#endif

/* Fills e's kernel and user stacks (e's kind, ids, time and anything
 * kind-specific are set by the caller) and sends the used part of it to
 * user space. regs: the interrupted registers when ctx starts with them
 * (a perf event's), NULL where the user registers come from the task
 * (a tracepoint, a kprobe). kskip: kernel frames to leave out at the top
 * (the tracing machinery between the traced point and the program).
 * Returns what bpf_ringbuf_output returned: nonzero when the ring had no
 * room and the record is lost. */
static __always_inline long submit_stacks(void *ctx, void *regs, struct sample_event *e, __u32 pid,
					  __u64 kskip)
{
	__u64 wakeup = BPF_RB_NO_WAKEUP;
	long klen, ulen;
	__u64 size;

	e->cgroup_id = bpf_get_current_cgroup_id();
	e->stack_len = 0;
	bpf_get_current_comm(e->thread_comm, sizeof(e->thread_comm));

	klen = bpf_get_stack(ctx, e->frames, PROFILER_MAX_KERNEL_FRAMES * 8,
			     kskip & BPF_F_SKIP_FIELD_MASK);
	if (klen < 0) {
		stat_inc(STAT_KERNEL_STACK_ERR);
		klen = 0;
	}
	klen /= 8;
	if (klen > PROFILER_MAX_KERNEL_FRAMES)
		klen = PROFILER_MAX_KERNEL_FRAMES;
	if (unwind_enabled) {
		__u64 t0 = bpf_ktime_get_ns();

		ulen = unwind_user(regs, e, pid, (__u32)klen);
		if (ulen >= 0) {
			__u64 dt = bpf_ktime_get_ns() - t0;

			stat_inc(STAT_UNWIND_WALKS);
			stat_add(STAT_UNWIND_NS, dt);
			if (python_walked())
				stat_add(STAT_PY_NS, dt);
			stat_add(STAT_UNWIND_FRAMES, ulen);
			walk_hist_add(WALK_HIST_STACK, dt / WALK_HIST_STACK_UNIT_NS);
			if (ulen > 0)
				walk_hist_add(WALK_HIST_FRAME,
					      dt / (__u64)ulen / WALK_HIST_FRAME_UNIT_NS);
			/* Code whose table is not built yet: the stack goes to
			 * user space, which builds it and walks the copy. */
			if (e->user_status == UNWIND_STATUS_TABLE_PENDING) {
				copy_user_stack(regs, e);
				wake_for_tables(e, pid, &wakeup);
			}
		}
	} else {
		ulen = -1;
	}
	if (ulen < 0) {
		/* No tables for this process (yet): the kernel's frame-pointer
		 * walker. A kernel thread has no user stack: the walker returns
		 * no frames for it (not an error), so there is no need to look
		 * at the task's flags (which would take CO-RE, hence the
		 * kernel's BTF). */
		e->user_status = UNWIND_STATUS_NO_PROCESS;
		ulen = bpf_get_stack(ctx, &e->frames[klen], PROFILER_MAX_USER_FRAMES * 8,
				     BPF_F_USER_STACK);
		if (ulen < 0) {
			stat_inc(STAT_USER_STACK_ERR);
			ulen = 0;
		}
		ulen /= 8;
		if (unwind_enabled && ulen > 0) { /* a user process, not a kernel thread */
			copy_user_stack(regs, e);
			wake_for_tables(e, pid, &wakeup);
		}
	}
	if (ulen > PROFILER_MAX_USER_FRAMES)
		ulen = PROFILER_MAX_USER_FRAMES;
	e->n_kernel = klen;
	e->n_user = ulen;
	e->n_python = e->stack_len ? python_held_chain(e, pid, klen + ulen) : 0;

	size = SAMPLE_EVENT_HEADER_SIZE + (klen + ulen) * 8;
	if (e->stack_len)
		size = SAMPLE_EVENT_STACK_OFFSET + e->stack_len;
	if (size > sizeof(*e))
		size = sizeof(*e);
	/* User space sleeps until a window ends (or 2 s): it is woken only
	 * for a process that exec'd recently and has not been sampled since,
	 * or for a ring a quarter full, and then waits at least 20 ms before
	 * it can be woken again. */
	if (!bpf_map_lookup_elem(&known_pids, &pid)) {
		__u64 *exec_ns = bpf_map_lookup_elem(&exec_times, &pid);
		__u8 one = 1;

		bpf_map_update_elem(&known_pids, &pid, &one, BPF_ANY);
		if (exec_ns) {
			if (e->ktime_ns - *exec_ns < YOUNG_NS)
				wakeup = BPF_RB_FORCE_WAKEUP;
			bpf_map_delete_elem(&exec_times, &pid);
		}
	}
	if (wakeup != BPF_RB_FORCE_WAKEUP && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >
						 bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4)
		wakeup = BPF_RB_FORCE_WAKEUP;
	return bpf_ringbuf_output(&events, e, size, wakeup);
}

SEC("perf_event")
int profile_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, zero = 0;
	struct sample_event *e;

	__u32 *busy;

	if (tid == 0) { /* the idle task of this CPU */
		stat_inc(STAT_IDLE);
		return 0;
	}
	busy = bpf_map_lookup_elem(&offcpu_busy, &zero);
	if (busy && *busy) {
		stat_inc(STAT_OFFCPU_NESTED);
		return 0;
	}
	stat_inc(STAT_SAMPLES);
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	e->kind = PROFILER_EVENT_SAMPLE;
	e->pid = pid;
	e->tid = tid;
	e->ktime_ns = bpf_ktime_get_ns();
	e->off_cpu_ns = 0;
	if (submit_stacks(ctx, ctx, e, pid, 0))
		stat_inc(STAT_DROP_RINGBUF_FULL);
	return 0;
}

#include "offcpu.bpf.h"

/* Plain raw tracepoints: attached by name, with no tracefs mount and no
 * BTF; only the current task's ids are used, never the arguments. */
static __always_inline void send_process_event(__u32 kind, __u32 pid)
{
	struct exec_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(STAT_EXEC_DROPS);
		return;
	}
	e->kind = kind;
	e->pid = pid;
	e->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("raw_tp/sched_process_exec")
int handle_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns();

	bpf_map_delete_elem(&known_pids, &pid); /* a new image to read */
	forget_unwind_proc(pid);
	bpf_map_update_elem(&exec_times, &pid, &now, BPF_ANY);
	send_process_event(PROFILER_EVENT_EXEC, pid);
	return 0;
}

/* Only the thread group leader's exit ends a process for our purposes. */
SEC("raw_tp/sched_process_exit")
int handle_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;

	if ((__u32)id == pid) {
		bpf_map_delete_elem(&known_pids, &pid);
		bpf_map_delete_elem(&exec_times, &pid);
		forget_unwind_proc(pid);
		send_process_event(PROFILER_EVENT_EXIT, pid);
	}
	return 0;
}

/* Kernel symbolization on demand. User space writes up to KSYM_BATCH
 * addresses and their count into ksym_req (mmapped .bss) and runs this
 * program; the kernel's %pS ("name+0xoff/0xsize [module]", the same table
 * /proc/kallsyms prints, BPF programs included) fills ksym_names. */
struct ksym_request ksym_req;
char ksym_names[KSYM_BATCH][KSYM_NAME_LEN];

SEC("raw_tp")
int symbolize(void *ctx)
{
	__u32 n = ksym_req.n;

	for (__u32 i = 0; i < KSYM_BATCH; i++) {
		__u64 addr;

		if (i >= n)
			break;
		addr = ksym_req.addrs[i];
		bpf_snprintf(ksym_names[i], KSYM_NAME_LEN, "%pS", &addr, sizeof(addr));
	}
	return 0;
}
