/* SPDX-License-Identifier: GPL-2.0 */
/*
 * unwind.bpf.h — the BPF user-stack unwinder of profiler.bpf.c (x86-64).
 *
 * Walks the interrupted thread's user stack with the unwind tables user
 * space compiled from each binary's .eh_frame/.debug_frame/.gopclntab
 * (src/unwind, src/agent/unwinder.c), so that code built without frame
 * pointers (most of a distro) keeps its callers.
 *
 * Maps, all written by user space only:
 *   unwind_procs  pid -> the process's code mappings, sorted (struct
 *                 unwind_proc); a process not in it is walked with the
 *                 kernel's frame-pointer walker as before, and its first
 *                 sample wakes user space to load it
 *   unwind_chunks the row pool: an array of arrays (chunks), each one
 *                 element of UNWIND_CHUNK_ROWS rows, added by user space
 *                 as tables arrive; a table is a page
 *                 index plus rows, both in the pool (unwind_row.h, "paged
 *                 storage"), so a step searches one page's few rows
 *
 * One step per bpf_loop iteration: find the mapping of pc (binary search
 * over at most UNWIND_MAX_MAPPINGS), then the row of pc - bias (this
 * CPU's rule cache, else its page's entry and a binary search over that
 * page's rows; a return address is looked up at pc - 1, since a call may
 * be the last instruction of a function), compute the CFA,
 * read the return address at CFA - 8 and, if the row says so, the
 * caller's rbp. Code with no table (JIT, anonymous) is stepped with the
 * frame pointer. A frame is emitted only once its pc is inside a known
 * code mapping (the leaf excepted), so a wrong step ends the stack rather
 * than adding a made-up frame; the reason the walk ended goes into the
 * sample (enum unwind_status).
 */
#ifndef KILN_AGENT_UNWIND_BPF_H
#define KILN_AGENT_UNWIND_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct unwind_proc);
} unwind_procs SEC(".maps");

/* A chunk is one array element holding all its rows, so that one lookup
 * gives the step a pointer to every row and the search reads them
 * directly rather than through a lookup per probe. */
struct unwind_chunk_rows {
	struct unwind_row r[UNWIND_CHUNK_ROWS];
};

struct unwind_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	/* a size, not a type: BTF of the inner map's value is not needed */
	__uint(value_size, sizeof(struct unwind_chunk_rows));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, UNWIND_MAX_CHUNKS);
	__type(key, __u32);
	__array(values, struct unwind_chunk);
} unwind_chunks SEC(".maps");

/* Each CPU's cache of rules found, keyed by table and pc: the frames of a
 * host's hot paths recur sample after sample, and one cache line costs
 * less than a page index and a search through rows that are rarely still
 * in the CPU's caches at 19 Hz. Direct-mapped; an entry of an older pool
 * generation (unwind_pool_gen) misses. */
#define RULE_CACHE_SLOTS 1024
#define RULE_CACHE_MISS	 0xffffffffu /* a cached "no row covers pc" */

struct rule_cache_entry {
	__u64 key; /* the table's page-index slot << 32 | pc relative to the file */
	__u32 rule;
	__u32 gen;
};

struct rule_cache {
	struct rule_cache_entry e[RULE_CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rule_cache);
} rule_caches SEC(".maps");

/* The interrupted registers, laid out as x86-64's struct pt_regs (a
 * stable layout: it is the kernel's entry-code frame). Declared here
 * rather than taken from vmlinux.h so that reading it needs no CO-RE
 * relocation, hence no kernel BTF in libbpf (see profiler.bpf.c). */
struct x86_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* The walk's registers and progress. It lives in a per-CPU map, not on the
 * stack: the verifier tracks the exact value of stack slots, and would
 * check the step once per combination of flag values (a fifth of a
 * second at load); a map value's contents are just numbers to it. */
#define STACK_CHUNK 256

struct unwind_walk {
	__u64 pc, sp, bp;
	__u32 base; /* index of the first user frame in the sample */
	__u32 n;    /* user frames emitted */
	__u8 status;
	__u8 bp_valid;
	__u8 exact;   /* pc is an interrupted pc, not a return address */
	__u8 pending; /* the walk met code whose table is not built yet */
	__u32 gen;    /* unwind_pool_gen when the walk began */
	/* the mapping search (mapping_probe), and the mapping last found */
	__u64 key;
	__u32 lo, hi, last;
	/* A copy of the stack from stack_at: most frames are far smaller
	 * than it, so one read serves several steps. */
	__u64 stack_at;
	__u32 stack_len; /* bytes of the copy that hold the stack */
	__u8 stack[STACK_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_walk);
} walks SEC(".maps");

/* What the step needs that is not a number: the process's mappings. */
struct unwind_ctx {
	const struct unwind_proc *proc;
};

/* Reads the user word at addr: from the stack copy when it holds it,
 * else through a new copy starting there. A copy stops at the end of its
 * page: the page holding addr is mapped (or the read fails anyway), the
 * next may not be (the top of a stack), and a read that faults costs far
 * more than a second copy. 0 or -1. */
static __always_inline int read_word(struct unwind_walk *w, __u64 addr, __u64 *out)
{
	__u64 off = addr - w->stack_at;
	__u32 len;

	if (addr & 7) /* the stack keeps words aligned; anything else, alone */
		return bpf_probe_read_user(out, 8, (const void *)addr) ? -1 : 0;
	if (addr < w->stack_at || off + 8 > w->stack_len) {
		/* A frame's saved rbp sits just below its return address,
		 * which is read first: start the copy below it when that is
		 * in the same page. */
		__u64 at = (addr & 4095) >= 16 ? addr - 16 : addr;
		long err;

		len = 4096 - (__u32)(at & 4095);
		if (len > STACK_CHUNK)
			len = STACK_CHUNK;
		asm volatile("" : "+r"(len));
		if (len < 8 || len > STACK_CHUNK)
			return -1;
		err = bpf_probe_read_user(w->stack, len, (const void *)at);
		if (err != 0) {
			w->stack_len = 0;
			return -1;
		}
		w->stack_at = at;
		w->stack_len = len;
		off = addr - at;
	}
	off &= STACK_CHUNK - 8;
	*out = *(__u64 *)&w->stack[off];
	return 0;
}

/* The user registers of the interrupted thread: from the sample when it
 * interrupted user code, else from the entry frame at the top of the
 * task's kernel stack. ctx NULL (a program whose context holds no
 * registers): from the task. False for a kernel thread (no user mode). */
static __always_inline bool user_regs(void *ctx, struct x86_regs *out)
{
	const struct x86_regs *r = ctx; /* bpf_perf_event_data starts with the regs */
	struct task_struct *task;
	long tr;

	if (r && (r->cs & 3) == 3) {
		out->ip = r->ip;
		out->sp = r->sp;
		out->bp = r->bp;
		return true;
	}
	task = bpf_get_current_task_btf();
	tr = bpf_task_pt_regs(task);
	if (!tr || bpf_probe_read_kernel(out, sizeof(*out), (const void *)tr))
		return false;
	return (out->cs & 3) == 3 && out->ip != 0;
}

/* &p->m[idx], or NULL past the end (bound checked on the register that
 * indexes, as in put_frame). */
static __always_inline const struct unwind_mapping *mapping_at(const struct unwind_proc *p,
							       __u32 idx)
{
	asm volatile("" : "+r"(idx));
	if (idx >= UNWIND_MAX_MAPPINGS)
		return NULL;
	return &p->m[idx];
}

/* The two binary searches are global functions: the verifier checks a
 * global function once, on its own, instead of at every call in every
 * state of the walk (as bpf_loop callbacks or inlined loops would be),
 * which keeps loading the program cheap (the agent's start-up counts). */

/* One probe of the mapping search (a bpf_loop callback): its state is in
 * the per-CPU walk, so that the verifier checks the probe once rather than
 * every path through eight unrolled probes. */
static long mapping_probe(__u32 i, void *ctx)
{
	const struct unwind_proc *p = ((struct unwind_ctx *)ctx)->proc;
	struct unwind_walk *w;
	__u32 zero = 0, mid;

	w = bpf_map_lookup_elem(&walks, &zero);
	if (!w || !p || w->lo >= w->hi)
		return 1;
	mid = w->lo + (w->hi - w->lo) / 2;
	asm volatile("" : "+r"(mid));
	if (mid >= UNWIND_MAX_MAPPINGS)
		return 1;
	if (p->m[mid].start <= w->key)
		w->lo = mid + 1;
	else
		w->hi = mid;
	return 0;
}

/* The index of the mapping holding pc, or -1. */
static __always_inline int find_mapping(struct unwind_ctx *c, struct unwind_walk *w, __u64 pc)
{
	__u32 mid = w->last;

	/* Most steps stay in the mapping of the step before (a library's
	 * functions calling each other): one comparison instead of a search. */
	asm volatile("" : "+r"(mid));
	if (mid < UNWIND_MAX_MAPPINGS && c->proc->m[mid].start <= pc && pc < c->proc->m[mid].end)
		return (int)mid;
	w->key = pc;
	w->lo = 0;
	w->hi = c->proc->n < UNWIND_MAX_MAPPINGS ? c->proc->n : UNWIND_MAX_MAPPINGS;
	bpf_loop(8, mapping_probe, c, 0); /* 2^8 > UNWIND_MAX_MAPPINGS */
	mid = w->lo - 1;
	asm volatile("" : "+r"(mid));
	if (w->lo == 0 || mid >= UNWIND_MAX_MAPPINGS || pc >= c->proc->m[mid].end)
		return -1;
	w->last = mid;
	return (int)mid;
}

/* The rule of the row covering pc in the table whose page index is at
 * slot pages (pages [page0, page0 + npages)), or -1 when pc lies outside
 * it or before its first row. unwind_paged_find (src/unwind/paged.c) is
 * the same search in user space. */
__noinline __s64 unwind_find_rule(__u32 pages, __u32 page0, __u32 npages, __u32 pc)
{
	__u32 page = pc >> UNWIND_PAGE_SHIFT, slot, chunk, n, first, base, zero = 0;
	const struct unwind_chunk_rows *c;
	const struct unwind_row *r;
	void *inner;

	if (page < page0 || page - page0 >= npages)
		return -1;
	slot = pages + (page - page0);
	chunk = slot >> UNWIND_CHUNK_SHIFT;
	inner = bpf_map_lookup_elem(&unwind_chunks, &chunk);
	if (!inner)
		return -1;
	c = bpf_map_lookup_elem(inner, &zero);
	if (!c)
		return -1;
	/* the page's entry (struct unwind_page: first, n) */
	r = &c->r[slot & (UNWIND_CHUNK_ROWS - 1)];
	first = r->pc;
	n = r->rule;
	if (n == 0 || n > UNWIND_PAGE_ROWS_MAX)
		return -1;
	if (first >> UNWIND_CHUNK_SHIFT != chunk) {
		chunk = first >> UNWIND_CHUNK_SHIFT;
		inner = bpf_map_lookup_elem(&unwind_chunks, &chunk);
		if (!inner)
			return -1;
		c = bpf_map_lookup_elem(inner, &zero);
		if (!c)
			return -1;
	}
	/* The last row at or before pc, searched without a branch on the
	 * rows' contents (a take of 0 or 1 scales the step), so that the
	 * verifier follows one path per probe rather than two. */
	base = first & (UNWIND_CHUNK_ROWS - 1);
	for (int i = 0; i < UNWIND_PAGE_SEARCH && n > 1; i++) {
		__u32 half = n / 2;
		__u32 at = c->r[(base + half) & (UNWIND_CHUNK_ROWS - 1)].pc;
		__u32 take = (__u32)(((__u64)pc - (__u64)at) >> 63) ^ 1;

		asm volatile("" : "+r"(take));
		base += half * take;
		n -= half;
	}
	r = &c->r[base & (UNWIND_CHUNK_ROWS - 1)];
	return r->pc <= pc ? (__s64)r->rule : -1;
}

/* unwind_find_rule through this CPU's rule cache. */
static __always_inline __s64 find_rule_cached(struct unwind_walk *w, const struct unwind_mapping *m,
					      __u32 rel)
{
	__u64 key = (__u64)m->pages << 32 | rel;
	__u32 zero = 0, idx = (__u32)((key * 0x9e3779b97f4a7c15ull) >> 54);
	struct rule_cache_entry *ce;
	struct rule_cache *rc;
	__s64 found;

	rc = bpf_map_lookup_elem(&rule_caches, &zero);
	if (!rc)
		return unwind_find_rule(m->pages, m->page0, m->npages, rel);
	ce = &rc->e[idx & (RULE_CACHE_SLOTS - 1)];
	if (ce->key == key && ce->gen == w->gen)
		return ce->rule == RULE_CACHE_MISS ? -1 : (__s64)ce->rule;
	found = unwind_find_rule(m->pages, m->page0, m->npages, rel);
	ce->key = key;
	ce->gen = w->gen;
	ce->rule = found < 0 ? RULE_CACHE_MISS : (__u32)found;
	return found;
}

/* One step with the frame pointer: rbp points at the saved rbp, with the
 * return address above it. 0 to go on, 1 to stop (status set). */
static __always_inline long step_frame_pointer(struct unwind_walk *w, __u8 why)
{
	__u64 pair[2];

	if (!w->bp_valid || w->bp <= w->sp) {
		w->status = why;
		return 1;
	}
	if (bpf_probe_read_user(pair, sizeof(pair), (const void *)w->bp)) {
		w->status = UNWIND_STATUS_READ_FAULT;
		return 1;
	}
	w->sp = w->bp + 16;
	w->bp = pair[0];
	w->pc = pair[1];
	w->exact = 0;
	return 0;
}

/* e->frames[idx] = pc, with the bound check where the verifier sees it
 * (the compiler would otherwise check one copy of idx and index with
 * another). */
static __always_inline void put_frame(struct sample_event *e, __u32 idx, __u64 pc)
{
	asm volatile("" : "+r"(idx));
	if (idx < PROFILER_MAX_FRAMES)
		e->frames[idx] = pc;
}

#include "python.bpf.h"

static long unwind_step(__u32 i, void *ctx)
{
	const struct unwind_proc *proc = ((struct unwind_ctx *)ctx)->proc;
	const struct unwind_mapping *m;
	struct unwind_walk *w;
	struct sample_event *e;
	__u32 zero = 0, idx, rule = 0;
	__u64 lookup_pc, cfa, ra, rel;
	__s64 found;
	int mi;

	e = bpf_map_lookup_elem(&scratch, &zero);
	w = bpf_map_lookup_elem(&walks, &zero);
	if (!e || !w || !proc)
		return 1;
	/* The Python frames of the eval call the last step left, if any,
	 * before the next native frame. */
	switch (python_emit()) {
	case 1:
		return 0;
	case 2:
		return 1;
	default:
		break;
	}
	if (w->pc == 0) { /* the conventional end of a stack */
		w->status = UNWIND_STATUS_COMPLETE;
		return 1;
	}
	if (w->n >= PROFILER_MAX_USER_FRAMES) {
		w->status = UNWIND_STATUS_DEPTH;
		return 1;
	}
	idx = w->base + w->n;
	if (idx >= PROFILER_MAX_FRAMES)
		return 1;
	lookup_pc = w->exact ? w->pc : w->pc - 1;
	mi = find_mapping(ctx, w, lookup_pc);
	m = mapping_at(proc, (__u32)mi);
	if (mi < 0 || !m) {
		/* The leaf is what the CPU ran: keep it even where no
		 * mapping is known yet (new code; user space re-reads). */
		if (w->n == 0) {
			put_frame(e, idx, w->pc);
			w->n = 1;
		}
		w->status = UNWIND_STATUS_NO_MAPPING;
		return 1;
	}
	if (!python_eval_call(lookup_pc)) {
		put_frame(e, idx, w->pc);
		w->n++;
	}
	if (m->npages == 0) {
		/* No table built yet: on by frame pointer for now (as good
		 * as perf -g), and the sample is marked so that it carries
		 * its stack to user space, which builds the table and walks
		 * the copy again. */
		if (m->pages == UNWIND_PAGES_PENDING)
			w->pending = 1;
		return step_frame_pointer(w, UNWIND_STATUS_NO_TABLE);
	}
	rel = lookup_pc - m->bias;
	found = rel > 0xffffffffull ? -1 : find_rule_cached(w, m, (__u32)rel);

	if (found < 0)
		return step_frame_pointer(w, UNWIND_STATUS_TABLE_MISS);
	rule = (__u32)found;

	switch (UNWIND_RULE_KIND(rule)) {
	case UNWIND_CFA_SP:
		cfa = w->sp + UNWIND_RULE_OFF(rule);
		break;
	case UNWIND_CFA_FP:
		if (!w->bp_valid) {
			w->status = UNWIND_STATUS_NO_TABLE;
			return 1;
		}
		cfa = w->bp + UNWIND_RULE_OFF(rule);
		break;
	case UNWIND_CFA_PLT:
		cfa = w->sp + 8 + ((w->pc & 15) >= UNWIND_RULE_OFF(rule) ? 8 : 0);
		break;
	case UNWIND_SIGNAL: {
		__u64 regs[2];

		/* The interrupted rip and rsp, then rbp, from the ucontext. */
		if (bpf_probe_read_user(regs, sizeof(regs),
					(const void *)(w->sp + UNWIND_SIGNAL_RSP_AT)) ||
		    bpf_probe_read_user(&w->bp, sizeof(w->bp),
					(const void *)(w->sp + UNWIND_SIGNAL_RBP_AT))) {
			w->status = UNWIND_STATUS_READ_FAULT;
			return 1;
		}
		w->sp = regs[0];
		w->pc = regs[1];
		w->bp_valid = 1;
		w->exact = 1; /* an interrupted pc, not a return address */
		return 0;
	}
	case UNWIND_END:
		w->status = UNWIND_STATUS_COMPLETE;
		return 1;
	case UNWIND_NONE:
		return step_frame_pointer(w, UNWIND_STATUS_TABLE_MISS);
	default:
		w->status = UNWIND_STATUS_UNSUPPORTED;
		return 1;
	}
	if (cfa <= w->sp) {
		w->status = UNWIND_STATUS_BAD_FRAME;
		return 1;
	}
	if (read_word(w, cfa - 8, &ra)) {
		w->status = UNWIND_STATUS_READ_FAULT;
		return 1;
	}
	switch (UNWIND_RULE_RBP(rule)) {
	case UNWIND_RBP_AT_CFA:
		if (read_word(w, cfa + 8 * (__s64)UNWIND_RULE_RBP_OFF(rule), &w->bp)) {
			w->status = UNWIND_STATUS_READ_FAULT;
			return 1;
		}
		w->bp_valid = 1;
		break;
	case UNWIND_RBP_UNDEFINED:
		w->bp_valid = 0;
		break;
	default:
		break;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact = 0;
	return 0;
}

/* Walks the current thread's user stack into e->frames[base...] with the
 * process's tables. Returns the number of frames, or -1 when the process
 * has no tables (the caller falls back to the frame-pointer walker). */
static __always_inline long unwind_user(void *ctx, struct sample_event *e, __u32 pid, __u32 base)
{
	struct unwind_ctx c;
	struct unwind_walk *w;
	struct x86_regs regs;
	__u32 zero = 0;

	c.proc = bpf_map_lookup_elem(&unwind_procs, &pid);
	w = bpf_map_lookup_elem(&walks, &zero);
	if (!c.proc || !w)
		return -1;
	if (!user_regs(ctx, &regs)) {
		e->user_status = UNWIND_STATUS_NO_USER;
		return 0;
	}
	w->pc = regs.ip;
	w->sp = regs.sp;
	w->bp = regs.bp;
	w->base = base;
	w->n = 0;
	w->last = UNWIND_MAX_MAPPINGS; /* none */
	w->stack_at = 0;
	w->stack_len = 0;
	w->bp_valid = 1;
	w->exact = 1;
	w->pending = 0;
	w->gen = unwind_pool_gen;
	w->status = UNWIND_STATUS_DEPTH;
	python_begin(pid, (__u32)bpf_get_current_pid_tgid());
	/* Python frames take steps of their own (and the end of each eval
	 * call one more): room for both; w->n bounds the frames. */
	bpf_loop(2 * (PROFILER_MAX_USER_FRAMES + 1), unwind_step, &c, 0);
	e->user_status = w->pending ? UNWIND_STATUS_TABLE_PENDING : w->status;
	return w->n;
}

#endif
