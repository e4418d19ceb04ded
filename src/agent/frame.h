/*
 * frame.h — one sampled frame, resolved (frame.c): the mapping it falls in
 * and, where the agent itself names it, its function. The pprof builder
 * (profile.c) and the push sink's window capture (push_window.c) both
 * describe frames through it, so a frame reaches the server the same way
 * whichever path carries it.
 *
 * What the agent names itself: kernel frames (kallsyms, with
 * profile_env.ksyms), Python frames (python.h) and JIT code a perf map
 * names (perfmap.h). Native user frames stay addresses in their mapping,
 * for the server to symbolize. Everything a frame_desc points to belongs
 * to the profile_env or the proc_info it was resolved with and lives as
 * long as the window that holds them.
 */
#ifndef KILN_AGENT_FRAME_H
#define KILN_AGENT_FRAME_H

#include "agent/agent.h"
#include "pprof/pprof.h"

#include <stdbool.h>
#include <stdint.h>

enum frame_map_kind {
	FRAME_MAP_NONE,	  /* no mapping: an address outside every known one */
	FRAME_MAP_KERNEL, /* "[kernel.kallsyms]" (only with kernel names) */
	FRAME_MAP_PYTHON, /* "[python]": the range of the encoded frames */
	FRAME_MAP_JIT,	  /* "[jit]" over the anonymous mapping m */
	FRAME_MAP_USER,	  /* the file mapping m */
};

struct frame_desc {
	enum frame_map_kind map_kind;
	const struct proc_mapping *m; /* FRAME_MAP_USER and FRAME_MAP_JIT */
	uint64_t addr;		      /* the location's address */
	const char *name;	      /* function; NULL: none (an address only) */
	const char *file;	      /* with name; NULL: none */
	int64_t line;
	char kernel_file[160]; /* a kernel function's file: "[ext4]", "[kernel.kallsyms]" */
};

/* Resolves frame i of a stack (frames[0..n_kernel) kernel, leaf first,
 * then user, leaf first) of process p, as profile.c has always described
 * it: return addresses (every frame but each half's leaf) are looked up at
 * address - 1, so that a call at the very end of a function names its
 * caller. */
void frame_resolve(const struct profile_env *env, const struct proc_info *p, const uint64_t *frames,
		   size_t i, size_t n_kernel, struct frame_desc *out);

/* The pprof mapping of a resolved frame (false for FRAME_MAP_NONE), and
 * the ExecutableInfo that goes with it (zero for the kernel and Python). */
bool frame_mapping_desc(const struct frame_desc *f, struct pprof_mapping_desc *md,
			struct agent_exec_info *ei);

#endif
