/*
 * python_frames.h — what the kernel and user halves of the Python frame
 * walk share (profiler.bpf.c / python.bpf.h and python*.c): the per-process
 * entry user space writes, the encoding of a Python frame in a sample's
 * frames[] array, and the counters of the walk.
 *
 * A Python frame is one u64 among the user frames, told apart from native
 * addresses by bit 62 (user addresses stay below 2^57, kernel ones have
 * bit 63 set): the code object's address (8-byte aligned, below 2^47,
 * stored shifted right by 3) and the index of the instruction the frame
 * is at, in 2-byte code units from the start of the bytecode (the line
 * comes from it). An index that does not fit is stored as the largest.
 *
 * Kept free of kernel and libc headers, as profiler.h.
 */
#ifndef KILN_AGENT_PYTHON_FRAMES_H
#define KILN_AGENT_PYTHON_FRAMES_H

#define PYFRAME_TAG	   (1ull << 62)
#define PYFRAME_CODE_BITS  44
#define PYFRAME_CODE_MASK  ((1ull << PYFRAME_CODE_BITS) - 1)
#define PYFRAME_INSTR_BITS 18
#define PYFRAME_INSTR_MAX  ((1u << PYFRAME_INSTR_BITS) - 1)

#define PYFRAME_IS(f)	 (((f) >> 62) == 1)
#define PYFRAME_CODE(f)	 (((f)&PYFRAME_CODE_MASK) << 3)
#define PYFRAME_INSTR(f) ((__u32)(((f) >> PYFRAME_CODE_BITS) & PYFRAME_INSTR_MAX))
#define PYFRAME_MAKE(code, instr)                                                                  \
	(PYFRAME_TAG |                                                                             \
	 ((__u64)((instr) > PYFRAME_INSTR_MAX ? PYFRAME_INSTR_MAX : (instr))                       \
	  << PYFRAME_CODE_BITS) |                                                                  \
	 (((code) >> 3) & PYFRAME_CODE_MASK))

/* In a sample's Python chain (python_chain, for samples whose stack user
 * space walks again): the end of one eval call's Python frames. Code
 * address 0 is never a code object's. */
#define PYFRAME_GROUP_END PYFRAME_TAG

/* How an interpreter's frames are chained (python_proc.layout). */
enum python_layout {
	/* 3.9, 3.10: PyFrameObject chain from tstate->frame; one
	 * _PyEval_EvalFrameDefault call per Python frame */
	PYTHON_LAYOUT_FRAME_OBJECT = 1,
	/* 3.11: _PyInterpreterFrame chain from tstate->cframe->current_frame;
	 * an eval call runs frames up to and including one marked is_entry */
	PYTHON_LAYOUT_IS_ENTRY = 2,
	/* 3.12: the same from cframe, an eval call's frames end at a frame
	 * owned by the C stack (FRAME_OWNED_BY_CSTACK, not a Python frame) */
	PYTHON_LAYOUT_CSTACK_OWNER = 3,
	/* 3.13: as 3.12, from tstate->current_frame (no cframe) */
	PYTHON_LAYOUT_CSTACK_OWNER_DIRECT = 4,
};
#define PYTHON_FRAME_OWNED_BY_CSTACK 3

/* Structure offsets of one CPython version (bytes); 0xffff: no field. */
struct python_offsets {
	__u16 runtime_interp_head;     /* _PyRuntimeState.interpreters.head */
	__u16 interp_tstate_head;      /* PyInterpreterState: first thread state */
	__u16 tstate_next;	       /* PyThreadState.next */
	__u16 tstate_thread_id;	       /* .thread_id: pthread_self() */
	__u16 tstate_native_thread_id; /* .native_thread_id: gettid() (3.11+) */
	__u16 tstate_frame;	       /* .frame, .cframe or .current_frame */
	__u16 cframe_current_frame;    /* _PyCFrame.current_frame (3.11, 3.12) */
	__u16 frame_back;	       /* f_back / previous */
	__u16 frame_code;	       /* f_code / f_executable */
	__u16 frame_instr;	       /* f_lasti / prev_instr / instr_ptr */
	__u16 frame_owner;	       /* is_entry (3.11) / owner (3.12+) */
	__u16 code_adaptive;	       /* PyCodeObject.co_code_adaptive (3.11+) */
	/* read by user space only, to name frames */
	__u16 code_name, code_qualname, code_filename, code_firstlineno, code_linetable;
	__u16 unicode_state, unicode_length, unicode_ascii_size, unicode_compact_size;
	__u16 bytes_size, bytes_sval;
	__u16 pad;
};

/* One CPython process (python_procs, pid -> this). */
struct python_proc {
	__u64 runtime;		    /* address of _PyRuntime */
	__u64 eval_start, eval_end; /* _PyEval_EvalFrameDefault's code */
	/* Offset of thread.fsbase in the kernel's task_struct, for 3.9 and
	 * 3.10 whose thread states only know pthread_self() (0: unknown) */
	__u32 fsbase_off;
	__u16 version; /* 0x030b: 3.11 */
	__u8 layout;   /* enum python_layout */
	__u8 pad;
	struct python_offsets off;
};

/* Why a Python walk gave no (or fewer) Python frames: the kernel counts
 * them per reason (stats, PY_STAT_FAIL_BASE + reason). */
enum python_fail {
	PYTHON_FAIL_NO_THREAD_STATE = 0, /* the sampled thread's not found */
	PYTHON_FAIL_READ_FAULT,		 /* interpreter memory unreadable */
	PYTHON_FAIL_NO_FRAME,		 /* an eval loop with no frame left */
	PYTHON_FAIL_DEPTH,		 /* frames past the sample's bound */
	PYTHON_FAIL_NR,
};

#endif
