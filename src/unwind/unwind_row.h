/*
 * unwind_row.h — one row of an unwind table, shared by the table compilers
 * (src/unwind, user space) and the BPF unwinder (src/agent/profiler.bpf.c).
 *
 * A table describes one executable file (x86-64): rows sorted by pc, each
 * valid from its pc (an ELF virtual address, the file's own p_vaddr space)
 * up to the next row's pc. A row says how to find the caller of code at
 * such a pc from three registers, rip, rsp and rbp:
 *
 *   CFA (the caller's rsp) = rsp + off      UNWIND_CFA_SP
 *                          = rbp + off      UNWIND_CFA_FP
 *                          = rsp + 8 + ((rip & 15) >= off ? 8 : 0)
 *                                           UNWIND_CFA_PLT (lazy-binding
 *                                           PLT entries: their CFI is a
 *                                           DWARF expression of this shape)
 *   return address         = *(CFA - 8)     always on x86-64; a rule that
 *                                           says otherwise is UNSUPPORTED
 *   caller's rbp           = rbp            UNWIND_RBP_SAME
 *                          = *(CFA + 8*rbp_off)  UNWIND_RBP_AT_CFA
 *                          unknown          UNWIND_RBP_UNDEFINED (an
 *                                           rbp-based rule above fails)
 *
 * and four kinds that are not arithmetic: END (the outermost frame: _start,
 * a thread's start, Go's runtime.goexit; the stack is complete here),
 * SIGNAL (a signal trampoline such as glibc's __restore_rt: the
 * interrupted registers are read from the ucontext at rsp), NONE (no
 * unwind information covers this pc: a gap between functions) and
 * UNSUPPORTED (CFI exists but expresses something a row cannot hold; the
 * compilers count these).
 *
 * Packed into 32 bits so that a row is 8 bytes:
 *   bits 0-3   kind (enum unwind_kind)
 *   bits 4-5   rbp rule (enum unwind_rbp)
 *   bits 6-13  rbp_off, signed, in 8-byte units (-128..127)
 *   bits 14-31 off, unsigned bytes (0..262143)
 *
 * Kept free of libc headers: the BPF side includes it after vmlinux.h.
 */
#ifndef KILN_UNWIND_ROW_H
#define KILN_UNWIND_ROW_H

enum unwind_kind {
	UNWIND_NONE = 0,
	UNWIND_CFA_SP = 1,
	UNWIND_CFA_FP = 2,
	UNWIND_CFA_PLT = 3,
	UNWIND_SIGNAL = 4,
	UNWIND_END = 5,
	UNWIND_UNSUPPORTED = 6,
};

enum unwind_rbp {
	UNWIND_RBP_SAME = 0,
	UNWIND_RBP_AT_CFA = 1,
	UNWIND_RBP_UNDEFINED = 2,
};

#define UNWIND_OFF_MAX	   262143
#define UNWIND_RBP_OFF_MIN (-128)
#define UNWIND_RBP_OFF_MAX 127

struct unwind_row {
	__u32 pc;   /* ELF virtual address where this row starts */
	__u32 rule; /* UNWIND_RULE(...) */
};

#define UNWIND_RULE(kind, rbp, rbp_off, off)                                                       \
	((__u32)(kind) | ((__u32)(rbp) << 4) | (((__u32)(rbp_off)&0xff) << 6) |                    \
	 ((__u32)(off) << 14))
#define UNWIND_RULE_KIND(r)    ((r)&0xf)
#define UNWIND_RULE_RBP(r)     (((r) >> 4) & 0x3)
#define UNWIND_RULE_RBP_OFF(r) ((int)(signed char)(((r) >> 6) & 0xff))
#define UNWIND_RULE_OFF(r)     ((r) >> 14)

/* The offsets in a signal frame (x86-64 rt_sigframe after the handler
 * returned into the trampoline: rsp points at the ucontext, whose
 * uc_mcontext starts 40 bytes in). */
#define UNWIND_SIGNAL_RBP_AT 120
#define UNWIND_SIGNAL_RSP_AT 160
#define UNWIND_SIGNAL_RIP_AT 168

/* ---- paged storage ----------------------------------------------------------
 *
 * In the kernel, every table's rows live in a pool of chunks (an array of
 * BPF arrays, each UNWIND_CHUNK_ROWS rows; a chunk is added when the pool
 * runs out, up to a cap). A row is named by its slot: chunk << 16 | index.
 * A table is cut at page boundaries (4 KiB of the file's address space)
 * into segments that each fit a chunk, and has a page index, also in the
 * pool: one struct unwind_page per page from its first row's page to its
 * last's, naming the slots of the rows that cover that page (the row in
 * force at the page's start, then the rows starting inside it). So a walk
 * finds a pc's row in a handful of rows instead of the whole table, and no
 * table needs contiguous memory.
 */
#define UNWIND_PAGE_SHIFT  12
#define UNWIND_CHUNK_SHIFT 16
#define UNWIND_CHUNK_ROWS  (1u << UNWIND_CHUNK_SHIFT)
#define UNWIND_MAX_CHUNKS  256
/* Rows of one page's range at most (a row per byte of the page, plus the
 * one in force at its start): the bound of the walk's search. */
#define UNWIND_PAGE_ROWS_MAX ((1u << UNWIND_PAGE_SHIFT) + 1)
#define UNWIND_PAGE_SEARCH   13 /* 2^13 > UNWIND_PAGE_ROWS_MAX */

/* One page's rows: slots [first, first + n), all in one chunk; n == 0:
 * no row covers the page. Stored in the pool as a row's 8 bytes. */
struct unwind_page {
	__u32 first;
	__u32 n;
};

#endif
