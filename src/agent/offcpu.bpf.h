/* SPDX-License-Identifier: GPL-2.0 */
/*
 * offcpu.bpf.h — the off-CPU half of profiler.bpf.c: where threads block,
 * and for how long.
 *
 * Two programs, loaded only with --off-cpu-threshold (their autoload is off
 * otherwise, so the default agent pays nothing per context switch):
 *
 *   offcpu_switch   raw tracepoint sched_switch; current is the task going
 *                   off CPU. A random share of switch-outs (offcpu_sample_max
 *                   out of 2^32) is noted in offcpu_slots: (tid, ktime) in
 *                   slot tid mod OFFCPU_SLOTS.
 *   offcpu_resume_* where a task runs again: current is the resumed task,
 *                   still inside the call that blocked it, so its kernel
 *                   and user stacks are the ones it blocked in. A noted
 *                   task away for offcpu_threshold_ns or more is sampled
 *                   there: one PROFILER_EVENT_OFFCPU record whose
 *                   off_cpu_ns is the time it was away, walked like a CPU
 *                   sample. Two ways in, whichever the kernel has
 *                   (offcpu.c): the sched_exit_tp raw tracepoint at the end
 *                   of __schedule (Linux 6.16+), else a kprobe on
 *                   finish_task_switch (its symbol may carry a suffix such
 *                   as .isra.0: user space finds it in /proc/kallsyms).
 *
 * Why a direct-mapped array rather than a hash map keyed by tid: the
 * verifier inlines an array lookup (an index and a bounds check), where a
 * hash map's update and delete on every noted switch cost several times
 * the rest of the program; at 100k switches a second that difference is
 * most of the probes' cost. A switch-out not drawn costs a random number
 * and a per-CPU counter; a resume not noted, one load and a compare. The
 * price: two threads off CPU at once whose tids are equal modulo
 * OFFCPU_SLOTS share a slot, and the later note replaces the earlier
 * (counted: STAT_OFFCPU_DROP_SLOT_TAKEN); tids are handed out in order,
 * so this needs 64k threads created between the two. Why not fentry on
 * finish_task_switch: it would make libbpf parse the kernel's BTF at
 * start-up (see profiler.bpf.c), and kernels without kprobes (this
 * project's test machines: CONFIG_KPROBES off) may refuse tracing
 * programs too; a raw tracepoint needs neither.
 *
 * A task switched out to die (TASK_DEAD) never resumes and is not noted,
 * so exits do not leave notes behind.
 */
#ifndef KILN_AGENT_OFFCPU_BPF_H
#define KILN_AGENT_OFFCPU_BPF_H

/* Set by user space before load. offcpu_sample_max: a switch-out is noted
 * when a random 32-bit number is below it (2^32: every one). */
const volatile __u64 offcpu_threshold_ns = 0;
const volatile __u64 offcpu_sample_max = 0;

struct offcpu_slot {
	__u32 tid; /* 0: free */
	__u32 pad;
	__u64 start_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OFFCPU_SLOTS); /* 1 when off-CPU is off */
	__type(key, __u32);
	__type(value, struct offcpu_slot);
} offcpu_slots SEC(".maps");

/* The task state a dying task leaves the CPU in (include/linux/sched.h). */
#define OFFCPU_TASK_DEAD 0x80

SEC("raw_tp/sched_switch")
int offcpu_switch(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), idx;
	struct offcpu_slot *slot;

	/* args: preempt, prev, next, prev_state (Linux 5.18+ order). */
	if (tid == 0 || (ctx->args[3] & OFFCPU_TASK_DEAD))
		return 0;
	stat_inc(STAT_OFFCPU_SWITCHES);
	if ((__u64)bpf_get_prandom_u32() >= offcpu_sample_max)
		return 0;
	idx = tid & (OFFCPU_SLOTS - 1);
	slot = bpf_map_lookup_elem(&offcpu_slots, &idx);
	if (!slot)
		return 0;
	if (slot->tid && slot->tid != tid)
		stat_inc(STAT_OFFCPU_DROP_SLOT_TAKEN);
	slot->start_ns = bpf_ktime_get_ns();
	slot->tid = tid;
	stat_inc(STAT_OFFCPU_RECORDED);
	return 0;
}

/* The task current runs again: sample it if it was noted and away long
 * enough. kskip: see submit_stacks. */
static __always_inline int offcpu_resumed(void *ctx, __u64 kskip)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, zero = 0, idx = tid & (OFFCPU_SLOTS - 1);
	struct offcpu_slot *slot = bpf_map_lookup_elem(&offcpu_slots, &idx);
	struct sample_event *e;
	__u64 start, now, away;
	__u32 *busy;

	if (!slot || slot->tid != tid || tid == 0)
		return 0;
	start = slot->start_ns;
	slot->tid = 0;
	now = bpf_ktime_get_ns();
	away = now - start;
	if (away < offcpu_threshold_ns) {
		stat_inc(STAT_OFFCPU_SHORT);
		return 0;
	}
#if defined(__TARGET_ARCH_x86)
	{
		/* A kernel thread's waits (workers idling between jobs) are
		 * not what anyone profiles: no user registers, no sample. */
		struct x86_regs regs;

		if (!user_regs(NULL, &regs)) {
			stat_inc(STAT_OFFCPU_KERNEL_THREAD);
			return 0;
		}
	}
#endif
	busy = bpf_map_lookup_elem(&offcpu_busy, &zero);
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e || !busy)
		return 0;
	*busy = 1;
	e->kind = PROFILER_EVENT_OFFCPU;
	e->pid = pid;
	e->tid = tid;
	e->ktime_ns = now;
	e->off_cpu_ns = away;
	if (submit_stacks(ctx, NULL, e, pid, kskip))
		stat_inc(STAT_OFFCPU_DROP_RINGBUF_FULL);
	else
		stat_inc(STAT_OFFCPU_SAMPLES);
	*busy = 0;
	return 0;
}

/* Linux 6.16+: the end of __schedule, in the task that runs on (the
 * resumed one after a switch). A plain raw tracepoint: no kprobe support
 * or BTF needed. */
SEC("raw_tp/sched_exit_tp")
int offcpu_resume_tp(void *ctx)
{
	/* The kernel's walk starts in this program, then bpf_trace_run1
	 * (the tracepoint's static call lands there directly): two frames
	 * left out, so that stacks start at __schedule. */
	return offcpu_resumed(ctx, 2);
}

/* Older kernels: a kprobe on finish_task_switch, attached by the name
 * /proc/kallsyms gives it (offcpu.c). */
SEC("kprobe")
int offcpu_resume_kprobe(struct pt_regs *ctx)
{
	return offcpu_resumed(ctx, 0); /* the walk starts at the probed pc */
}

#endif
