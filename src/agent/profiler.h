/*
 * profiler.h — the records and counters shared by profiler.bpf.c and the
 * user-space agent (the libbpf-tools trio: NAME.bpf.c, NAME.h, user files).
 *
 * The BPF program writes one struct sample_event per CPU-clock sample into a
 * BPF ring buffer; user space aggregates them (see docs/ARCHITECTURE.md for
 * why a ring buffer rather than count maps). The frames array holds the
 * kernel frames first (n_kernel), then the user frames (n_user), leaf first
 * in both; only the used part of the array is submitted, so a typical record
 * is ~200 bytes. An exec event tells user space to re-read a process's
 * mappings; an exit event lets it forget the process. Per-CPU counters count every sample seen and every one dropped.
 * An off-CPU event (--off-cpu-threshold) is a sample_event of its own kind
 * whose off_cpu_ns says how long the thread waited in those stacks.
 *
 * Kept free of kernel and libc headers so both sides can include it: types
 * come from vmlinux.h on the BPF side and from <linux/types.h> in user space.
 */
#ifndef KILN_AGENT_PROFILER_H
#define KILN_AGENT_PROFILER_H

#define PROFILER_MAX_KERNEL_FRAMES 127
#define PROFILER_MAX_USER_FRAMES   127
#define PROFILER_MAX_FRAMES	   (PROFILER_MAX_KERNEL_FRAMES + PROFILER_MAX_USER_FRAMES)
#define PROFILER_COMM_LEN	   16
/* The user stack a sample of a process without tables carries (as perf
 * --call-graph dwarf does for every sample), copied in STACK_COPY_CHUNK
 * pieces up to the first that cannot be read (the top of the stack). */
#define PROFILER_STACK_COPY 8192
#define STACK_COPY_CHUNK    1024

#include "agent/python_frames.h"
#include "unwind/unwind_row.h"

enum profiler_event_kind {
	PROFILER_EVENT_SAMPLE = 1,
	PROFILER_EVENT_EXEC = 2,
	PROFILER_EVENT_EXIT = 3,
	/* A sample_event taken when a thread ran again after off_cpu_ns off
	 * CPU (--off-cpu-threshold), with the stacks it blocked in. */
	PROFILER_EVENT_OFFCPU = 4,
};

/* Slots for threads noted as switched out (offcpu.bpf.h), a power of two:
 * a thread's slot is its tid modulo this. */
#define OFFCPU_SLOTS 65536

/* Index into the per-CPU stats array. */
enum profiler_stat {
	STAT_SAMPLES = 0,	/* every sample of a non-idle task */
	STAT_IDLE,		/* samples of pid 0, skipped on purpose */
	STAT_DROP_RINGBUF_FULL, /* ring buffer had no room: lost */
	STAT_KERNEL_STACK_ERR,	/* kernel stack unreadable (sample kept, no frames) */
	STAT_USER_STACK_ERR,	/* user stack unreadable (sample kept, no frames) */
	STAT_EXEC_DROPS,	/* exec/exit notification lost (cache may be stale) */
	STAT_UNWIND_WALKS,	/* user stacks walked with tables */
	STAT_UNWIND_NS,		/* time those walks took (ns) */
	STAT_UNWIND_FRAMES,	/* frames those walks emitted */
	/* Off-CPU (offcpu.bpf.h): */
	STAT_OFFCPU_SWITCHES,	       /* switch-outs seen */
	STAT_OFFCPU_RECORDED,	       /* switch-outs drawn and noted */
	STAT_OFFCPU_SHORT,	       /* noted, back before the threshold */
	STAT_OFFCPU_SAMPLES,	       /* off-CPU samples sent */
	STAT_OFFCPU_DROP_SLOT_TAKEN,   /* a note replaced by another tid's */
	STAT_OFFCPU_DROP_RINGBUF_FULL, /* sample lost: ring buffer full */
	STAT_OFFCPU_KERNEL_THREAD,     /* a kernel thread's wait: skipped */
	STAT_OFFCPU_NESTED,	       /* CPU samples that interrupted an off-CPU
					* walk on their CPU: not taken */
	STAT_PY_WALKS,		       /* walks of a CPython process's stack */
	STAT_PY_NS,		       /* time those walks took (ns) */
	STAT_PY_FRAMES,		       /* Python frames emitted */
	STAT_PY_FAIL_FIRST,	       /* + enum python_fail: Python walks that failed */
	STAT_NR = STAT_PY_FAIL_FIRST + PYTHON_FAIL_NR,
};

/* Histograms of the BPF walk's time (walk_hist, per CPU): per stack and
 * per frame, so that medians can be read, not only means (a mean follows
 * the few walks a busy host's cache misses or a descheduled vCPU
 * stretch). Log-linear buckets: WALK_HIST_LINEAR of one unit each, then
 * one per doubling; the last is open. Slot = histogram * WALK_HIST_BUCKETS
 * + bucket. */
#define WALK_HIST_LINEAR	64
#define WALK_HIST_BUCKETS	80
#define WALK_HIST_STACK		0
#define WALK_HIST_FRAME		1
#define WALK_HIST_NR		2
#define WALK_HIST_STACK_UNIT_NS 128
#define WALK_HIST_FRAME_UNIT_NS 8

/* How a sample's user stack ended (sample_event.user_status). COMPLETE
 * is the only whole stack: the walk reached the outermost frame (an END
 * row: _start, a thread's start, Go's runtime.goexit). Every other value
 * says why the frames stop where they do. */
enum unwind_status {
	UNWIND_STATUS_COMPLETE = 0,
	UNWIND_STATUS_NO_PROCESS,    /* no tables loaded for the process yet:
				    * frame-pointer walk (bpf_get_stack) */
	UNWIND_STATUS_NO_MAPPING,    /* a pc in no known code mapping */
	UNWIND_STATUS_NO_TABLE,	     /* code without a table and no usable
				    * frame pointer */
	UNWIND_STATUS_TABLE_MISS,    /* a pc the table does not cover */
	UNWIND_STATUS_UNSUPPORTED,   /* a CFI rule a row cannot hold */
	UNWIND_STATUS_READ_FAULT,    /* the stack could not be read */
	UNWIND_STATUS_DEPTH,	     /* PROFILER_MAX_USER_FRAMES reached */
	UNWIND_STATUS_BAD_FRAME,     /* a CFA that does not move up the stack */
	UNWIND_STATUS_NO_USER,	     /* a kernel thread: no user stack */
	UNWIND_STATUS_TABLE_PENDING, /* code whose table is not built yet
				      * (walked on by frame pointer): the
				      * sample carries its stack, walked again
				      * in user space once it is */
	UNWIND_STATUS_NR,
};

/* Where one code mapping of a process is and which table describes it:
 * the table's page index at pool slot pages, for pages [page0, page0 +
 * npages) of the file's addresses (the mapping's addresses minus bias;
 * unwind_row.h, "paged storage"). npages == 0: code with no table (JIT,
 * anonymous, a file without CFI, or the table memory spent): the walk
 * tries the frame pointer there. */
struct unwind_mapping {
	__u64 start, end;
	__u64 bias;
	__u32 pages, page0, npages, pad;
};
/* pages of a mapping whose table is not built yet (npages == 0): tables
 * are built for the code samples meet, not for everything a process
 * maps. */
#define UNWIND_PAGES_PENDING 0xffffffffu

/* The code mappings of one process, sorted by start (unwind_procs). */
#define UNWIND_MAX_MAPPINGS 120
struct unwind_proc {
	__u32 n;
	__u32 pad;
	struct unwind_mapping m[UNWIND_MAX_MAPPINGS];
};

struct sample_event {
	__u32 kind; /* PROFILER_EVENT_SAMPLE or PROFILER_EVENT_OFFCPU */
	__u32 pid;  /* thread group id */
	__u32 tid;
	__u16 n_kernel;
	__u16 n_user;
	__u8 user_status; /* enum unwind_status */
	/* With stack_len > 0: Python frames (python_frames.h, each eval
	 * call's ended by PYFRAME_GROUP_END) after the user frames, for
	 * user space to interleave with the native frames it walks. */
	__u8 n_python;
	/* Bytes of user stack copied into stack[] (0: none): only for a
	 * process without tables yet, so that user space can walk it once
	 * they are loaded (see PROFILER_STACK_COPY). */
	__u16 stack_len;
	__u32 pad2;
	__u64 ktime_ns; /* CLOCK_MONOTONIC */
	__u64 cgroup_id;
	/* PROFILER_EVENT_OFFCPU: how long the thread was off CPU (ns). */
	__u64 off_cpu_ns;
	/* This thread's name; the process's (group leader's) when tid == pid.
	 * User space takes the process name from /proc/PID/stat. */
	char thread_comm[PROFILER_COMM_LEN];
	/* The interrupted user registers (rip, rsp, rbp) when stack_len > 0. */
	__u64 user_regs[3];
	__u64 frames[PROFILER_MAX_FRAMES];
	/* With stack_len > 0 the record is the whole struct up to
	 * stack[stack_len]; else it ends after the used frames. */
	__u8 stack[PROFILER_STACK_COPY];
};

#define SAMPLE_EVENT_HEADER_SIZE                                                                   \
	(sizeof(struct sample_event) - 8 * PROFILER_MAX_FRAMES - PROFILER_STACK_COPY)
#define SAMPLE_EVENT_STACK_OFFSET (sizeof(struct sample_event) - PROFILER_STACK_COPY)

/* Also used for PROFILER_EVENT_EXIT (the thread group leader exited). */
struct exec_event {
	__u32 kind; /* PROFILER_EVENT_EXEC or PROFILER_EVENT_EXIT */
	__u32 pid;
	__u64 ktime_ns;
};

/* The symbolize program's input (see profiler.bpf.c). */
#define KSYM_BATCH    32
#define KSYM_NAME_LEN 256
struct ksym_request {
	__u32 n;
	__u32 pad;
	__u64 addrs[KSYM_BATCH];
};

#endif
