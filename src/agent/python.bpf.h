/* SPDX-License-Identifier: GPL-2.0 */
/*
 * python.bpf.h — the Python half of the BPF user-stack walk (unwind.bpf.h):
 * the frames a CPython interpreter runs, read from its own structures
 * while the thread is stopped in the sample, never from a stack copy.
 *
 * Maps, written by user space only (python.c):
 *   python_procs    pid -> struct python_proc: where _PyRuntime and
 *                   _PyEval_EvalFrameDefault are, the version's offsets
 * and by the walk itself:
 *   python_tstates  tid -> the thread's PyThreadState (LRU), checked on
 *                   every use against the thread's id, so that a thread
 *                   state freed and reused for another thread is found
 *                   again rather than trusted
 *
 * How the two walks meet: python_begin finds the sampled thread's thread
 * state (native_thread_id == tid from 3.11; before, thread_id ==
 * pthread_self(), the thread's fs base, read from the task) and its
 * innermost frame. The native walk goes on as before; each native frame
 * inside _PyEval_EvalFrameDefault is replaced by the Python frames that
 * call of the eval loop runs, one per bpf_loop iteration (python_emit):
 * exactly one before 3.11 (one call per frame object), up to the entry
 * frame in 3.11 (is_entry) and up to the frame owned by the C stack in
 * 3.12+. So a C function calling back into Python (sorted's key=) sits
 * between the Python frames of the two eval calls, as it does at run time.
 */
#ifndef KILN_AGENT_PYTHON_BPF_H
#define KILN_AGENT_PYTHON_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct python_proc);
} python_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} python_tstates SEC(".maps");

/* The bytes of a frame read at once: every field the walk needs is in
 * the first 112 (3.9's f_lasti is the farthest, at 104). */
#define PYTHON_FRAME_READ 112
/* Thread states looked at to find the sampled thread's. */
#define PYTHON_MAX_THREADS 64

/* One CPU's Python walk (per-CPU, as struct unwind_walk and for the same
 * reason: the verifier sees map contents as plain numbers). */
struct python_walk {
	struct python_proc p;
	__u64 frame;   /* the next frame to emit (0: none left) */
	__u64 tstate;  /* the thread-state search: the one to look at next */
	__u64 want;    /* the id searched for */
	__u64 found;   /* the sampled thread's state (0: not found) */
	__u8 active;   /* the sample's process is a known CPython */
	__u8 in_group; /* emitting the frames of one eval call */
	__u8 python;   /* the sample's process is in python_procs */
	__u8 pad[5];
	__u32 chain_at, chain_room, chain_n; /* python_chain's output */
	__u32 pad2;
	__u8 buf[PYTHON_FRAME_READ];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct python_walk);
} python_walks SEC(".maps");

static __always_inline void python_fail(__u32 why)
{
	if (why < PYTHON_FAIL_NR)
		stat_inc(STAT_PY_FAIL_FIRST + why);
}

static __always_inline int read_user_u64(__u64 addr, __u64 *out)
{
	return bpf_probe_read_user(out, sizeof(*out), (const void *)addr) ? -1 : 0;
}

/* The field at off of the frame in pw->buf (the offset is the process's,
 * a number to the verifier: masked and bounded where it indexes). */
static __always_inline __u64 frame_u64(struct python_walk *pw, __u32 off)
{
	__u64 v;

	asm volatile("" : "+r"(off));
	if (off > PYTHON_FRAME_READ - 8)
		return 0;
	__builtin_memcpy(&v, &pw->buf[off], 8);
	return v;
}

static __always_inline __u8 frame_u8(struct python_walk *pw, __u32 off)
{
	asm volatile("" : "+r"(off));
	if (off > PYTHON_FRAME_READ - 1)
		return 0;
	return pw->buf[off];
}

/* The sample value (PYFRAME_MAKE) of the frame in pw->buf. */
static __always_inline __u64 python_frame_value(struct python_walk *pw)
{
	__u64 code = frame_u64(pw, pw->p.off.frame_code), at, base;
	__u32 idx;
	__s32 lasti;

	if (pw->p.layout == PYTHON_LAYOUT_FRAME_OBJECT) {
		lasti = (__s32)frame_u64(pw, pw->p.off.frame_instr);
		idx = lasti < 0 ? 0 : (__u32)lasti;
		if (pw->p.version == 0x0309) /* a byte offset there */
			idx /= 2;
	} else {
		at = frame_u64(pw, pw->p.off.frame_instr);
		base = code + pw->p.off.code_adaptive;
		idx = at >= base && at - base < 2ull * PYFRAME_INSTR_MAX ? (__u32)((at - base) / 2)
									 : PYFRAME_INSTR_MAX;
	}
	return PYFRAME_MAKE(code, idx);
}

/* One thread state of the search (a bpf_loop callback). */
static long python_tstate_probe(__u32 i, void *ctx)
{
	struct python_walk *pw;
	__u32 zero = 0;
	__u64 id, next;
	__u16 id_off;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	if (!pw || !pw->tstate)
		return 1;
	id_off = pw->p.version >= 0x030b ? pw->p.off.tstate_native_thread_id
					 : pw->p.off.tstate_thread_id;
	if (read_user_u64(pw->tstate + id_off, &id) ||
	    read_user_u64(pw->tstate + pw->p.off.tstate_next, &next))
		return 1;
	if (id == pw->want) {
		pw->found = pw->tstate;
		return 1;
	}
	pw->tstate = next;
	return 0;
}

/* The sampled thread's PyThreadState, or 0. */
static __always_inline __u64 python_thread_state(struct python_walk *pw, __u32 tid)
{
	__u64 *cached = bpf_map_lookup_elem(&python_tstates, &tid);
	__u64 interp, id, fsbase;
	__u16 id_off;

	if (pw->p.version >= 0x030b) {
		pw->want = tid;
		id_off = pw->p.off.tstate_native_thread_id;
	} else {
		/* glibc's pthread_self() is the thread's TCB, which x86-64
		 * addresses through fs: the fs base saved in the task. */
		if (!pw->p.fsbase_off)
			return 0;
		if (bpf_probe_read_kernel(
			&fsbase, sizeof(fsbase),
			(const void *)(bpf_get_current_task() + pw->p.fsbase_off)))
			return 0;
		pw->want = fsbase;
		id_off = pw->p.off.tstate_thread_id;
	}
	if (cached && *cached && !read_user_u64(*cached + id_off, &id) && id == pw->want)
		return *cached;
	if (read_user_u64(pw->p.runtime + pw->p.off.runtime_interp_head, &interp) || !interp ||
	    read_user_u64(interp + pw->p.off.interp_tstate_head, &pw->tstate))
		return 0;
	pw->found = 0;
	bpf_loop(PYTHON_MAX_THREADS, python_tstate_probe, NULL, 0);
	if (pw->found)
		bpf_map_update_elem(&python_tstates, &tid, &pw->found, BPF_ANY);
	return pw->found;
}

/* The three entry points below are global functions: the verifier checks
 * each once, on its own, rather than within every state of the native
 * step that calls them (which would add to the agent's start-up). */

/* Before the native walk: is pid a CPython process, and where is the
 * sampled thread's innermost Python frame. */
static __always_inline int python_start(__u32 pid, __u32 tid, bool count)
{
	struct python_proc *p = bpf_map_lookup_elem(&python_procs, &pid);
	struct python_walk *pw;
	__u32 zero = 0;
	__u64 tstate, frame;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	if (!pw)
		return 0;
	pw->active = 0;
	pw->in_group = 0;
	pw->frame = 0;
	pw->python = p != NULL;
	if (!p)
		return 0;
	__builtin_memcpy(&pw->p, p, sizeof(pw->p));
	if (count)
		stat_inc(STAT_PY_WALKS);
	tstate = python_thread_state(pw, tid);
	if (!tstate) {
		python_fail(PYTHON_FAIL_NO_THREAD_STATE);
		return 0;
	}
	if (read_user_u64(tstate + pw->p.off.tstate_frame, &frame)) {
		python_fail(PYTHON_FAIL_READ_FAULT);
		return 0;
	}
	if (frame &&
	    (pw->p.layout == PYTHON_LAYOUT_IS_ENTRY ||
	     pw->p.layout == PYTHON_LAYOUT_CSTACK_OWNER) &&
	    read_user_u64(frame + pw->p.off.cframe_current_frame, &frame)) {
		python_fail(PYTHON_FAIL_READ_FAULT);
		return 0;
	}
	pw->frame = frame;
	pw->active = 1;
	return 1;
}

__noinline int python_begin(__u32 pid, __u32 tid)
{
	return python_start(pid, tid, true);
}

/* Whether the last walk was of a CPython process's stack. */
static __always_inline bool python_walked(void)
{
	struct python_walk *pw;
	__u32 zero = 0;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	return pw && pw->python;
}

/* Called for each native frame at lookup_pc: true if it is a call of the
 * eval loop that Python frames replace (they come in the next steps). */
__noinline int python_eval_call(__u64 lookup_pc)
{
	struct python_walk *pw;
	__u32 zero = 0;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	if (!pw || !pw->active || lookup_pc < pw->p.eval_start || lookup_pc >= pw->p.eval_end)
		return 0;
	if (!pw->frame) {
		python_fail(PYTHON_FAIL_NO_FRAME);
		return 0;
	}
	pw->in_group = 1;
	return 1;
}

/* One step of an eval call's Python frames into the sample (scratch) and
 * the walk (walks): 0 when there is none to take (the native walk goes
 * on), 1 when this step took one, 2 when the walk must stop (its status
 * set). */
__noinline int python_emit(void)
{
	struct python_walk *pw;
	struct unwind_walk *w;
	struct sample_event *e;
	__u32 zero = 0;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	if (!pw || !pw->in_group)
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	w = bpf_map_lookup_elem(&walks, &zero);
	if (!e || !w)
		return 0;
	if (!pw->frame) {
		pw->in_group = 0;
		return 0;
	}
	if (bpf_probe_read_user(pw->buf, PYTHON_FRAME_READ, (const void *)pw->frame)) {
		python_fail(PYTHON_FAIL_READ_FAULT);
		pw->in_group = 0;
		pw->active = 0;
		return 0;
	}
	if (pw->p.layout >= PYTHON_LAYOUT_CSTACK_OWNER &&
	    frame_u8(pw, pw->p.off.frame_owner) == PYTHON_FRAME_OWNED_BY_CSTACK) {
		/* the end of this eval call's frames */
		pw->frame = frame_u64(pw, pw->p.off.frame_back);
		pw->in_group = 0;
		return 1;
	}
	if (w->n >= PROFILER_MAX_USER_FRAMES) {
		python_fail(PYTHON_FAIL_DEPTH);
		w->status = UNWIND_STATUS_DEPTH;
		return 2;
	}
	put_frame(e, w->base + w->n, python_frame_value(pw));
	w->n++;
	stat_inc(STAT_PY_FRAMES);
	if (pw->p.layout == PYTHON_LAYOUT_FRAME_OBJECT ||
	    (pw->p.layout == PYTHON_LAYOUT_IS_ENTRY && frame_u8(pw, pw->p.off.frame_owner)))
		pw->in_group = 0;
	pw->frame = frame_u64(pw, pw->p.off.frame_back);
	return 1;
}

/* ---- the whole chain, for a sample user space walks again ------------------ */

/* One step of python_chain: one frame (or an eval call's end) into
 * frames[pw->chain_at + pw->chain_n]. */
static long python_chain_step(__u32 i, void *ctx)
{
	struct python_walk *pw;
	struct sample_event *e;
	__u32 zero = 0;
	bool end = false;

	pw = bpf_map_lookup_elem(&python_walks, &zero);
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!pw || !e || !pw->frame)
		return 1;
	if (pw->chain_n + 2 > pw->chain_room) {
		python_fail(PYTHON_FAIL_DEPTH);
		return 1;
	}
	if (bpf_probe_read_user(pw->buf, PYTHON_FRAME_READ, (const void *)pw->frame)) {
		python_fail(PYTHON_FAIL_READ_FAULT);
		return 1;
	}
	if (pw->p.layout >= PYTHON_LAYOUT_CSTACK_OWNER &&
	    frame_u8(pw, pw->p.off.frame_owner) == PYTHON_FRAME_OWNED_BY_CSTACK) {
		end = true;
	} else {
		put_frame(e, pw->chain_at + pw->chain_n, python_frame_value(pw));
		pw->chain_n++;
		stat_inc(STAT_PY_FRAMES);
		end =
		    pw->p.layout == PYTHON_LAYOUT_FRAME_OBJECT ||
		    (pw->p.layout == PYTHON_LAYOUT_IS_ENTRY && frame_u8(pw, pw->p.off.frame_owner));
	}
	if (end && pw->chain_n) {
		put_frame(e, pw->chain_at + pw->chain_n, PYFRAME_GROUP_END);
		pw->chain_n++;
	}
	pw->frame = frame_u64(pw, pw->p.off.frame_back);
	return 0;
}

/* For a sample whose native frames user space walks again from its stack
 * copy (no tables yet): every Python frame of the sampled thread, innermost
 * first, each eval call's followed by PYFRAME_GROUP_END,
 * written into scratch's frames[at...] (at most room of them), for user
 * space to put in place of the eval loop's native frames
 * (python_interleave). The number written; 0 for a process not in
 * python_procs. */
__noinline int python_chain(__u32 pid, __u32 tid, __u32 at, __u32 room)
{
	struct python_walk *pw;
	__u32 zero = 0;

	if (!python_start(pid, tid, false))
		return 0;
	pw = bpf_map_lookup_elem(&python_walks, &zero);
	if (!pw)
		return 0;
	pw->chain_at = at;
	pw->chain_room = room;
	pw->chain_n = 0;
	bpf_loop(2 * PROFILER_MAX_USER_FRAMES, python_chain_step, NULL, 0);
	pw->active = 0;
	return pw->chain_n;
}

#endif
