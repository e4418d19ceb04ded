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
 * its cached mappings are re-read; handle_exit that it is gone, so that its
 * cache entry is dropped once no window needs it.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

SEC("perf_event")
int profile_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, zero = 0;
	struct task_struct *task;
	struct sample_event *e;
	long klen, ulen;
	__u64 size;

	if (tid == 0) { /* the idle task of this CPU */
		stat_inc(STAT_IDLE);
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
	e->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->thread_comm, sizeof(e->thread_comm));
	task = (struct task_struct *)bpf_get_current_task();
	BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);

	klen = bpf_get_stack(ctx, e->frames, PROFILER_MAX_KERNEL_FRAMES * 8, 0);
	if (klen < 0) {
		stat_inc(STAT_KERNEL_STACK_ERR);
		klen = 0;
	}
	klen /= 8;
	if (klen > PROFILER_MAX_KERNEL_FRAMES)
		klen = PROFILER_MAX_KERNEL_FRAMES;
	ulen = 0;
	/* Kernel threads have no user stack; that is not an error. */
	if (!(BPF_CORE_READ(task, flags) & 0x00200000 /* PF_KTHREAD */)) {
		ulen = bpf_get_stack(ctx, &e->frames[klen], PROFILER_MAX_USER_FRAMES * 8,
				     BPF_F_USER_STACK);
		if (ulen < 0) {
			stat_inc(STAT_USER_STACK_ERR);
			ulen = 0;
		}
		ulen /= 8;
		if (ulen > PROFILER_MAX_USER_FRAMES)
			ulen = PROFILER_MAX_USER_FRAMES;
	}
	e->n_kernel = klen;
	e->n_user = ulen;

	size = SAMPLE_EVENT_HEADER_SIZE + (klen + ulen) * 8;
	if (size > sizeof(*e))
		size = sizeof(*e);
	/* No wakeup: user space drains the ring on a 250 ms timer, which costs
	 * 4 wakeups a second instead of one per sample. */
	if (bpf_ringbuf_output(&events, e, size, BPF_RB_NO_WAKEUP))
		stat_inc(STAT_DROP_RINGBUF_FULL);
	return 0;
}

/* A BTF raw tracepoint: needs no tracefs mount, only the kernel's BTF. */
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

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	send_process_event(PROFILER_EVENT_EXEC, bpf_get_current_pid_tgid() >> 32);
	return 0;
}

/* Only the thread group leader's exit ends a process for our purposes. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();

	if ((__u32)id == id >> 32)
		send_process_event(PROFILER_EVENT_EXIT, id >> 32);
	return 0;
}
