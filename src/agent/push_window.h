/*
 * push_window.h — one agent window as the push sink queues it
 * (push_window.c): every process's samples with their stacks resolved
 * (frame.h) and copied, so that the sender thread can turn it into
 * IngestService/Push rows (sink_stream.c) or, for a server without that
 * service, into WriteRaw's per-process pprofs (push_window_pprof.c), after
 * the window and its process entries are gone.
 *
 * This is what lets the push path skip the pprof per process per window:
 * the capture copies each sample's frames as (mapping, address, function)
 * records and hashes its stack's content once; the Push encoder then
 * describes a stack only the first time a session sees its hash.
 *
 * Strings (labels, paths, build IDs, function and thread names) live once
 * each in one pool and are referred to by offset (0 is ""). One allocation
 * per array; push_window_free frees them all. Not thread-safe: the sampler
 * thread captures, the sender thread reads after the queue hands it over.
 */
#ifndef KILN_AGENT_PUSH_WINDOW_H
#define KILN_AGENT_PUSH_WINDOW_H

#include "agent/agent.h"
#include "pprof/pprof.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

struct push_label {
	uint32_t name, value; /* string offsets */
};

/* A mapping some frame of the process falls in (frame.h's kinds). */
struct push_mapping {
	uint64_t start, limit, offset;
	uint32_t filename, build_id; /* string offsets */
	uint8_t kind;		     /* enum frame_map_kind, never FRAME_MAP_NONE */
	bool has_load;
	uint16_t elf_type;
	uint64_t load_offset, load_vaddr;
	uint64_t hash; /* of everything above but the executable info */
};

struct push_frame {
	uint64_t addr;
	uint32_t mapping;    /* index in the process's mappings + 1; 0: none */
	uint32_t name, file; /* string offsets; name 0: an address only */
	int64_t line;
};

/* One (thread, stack) of a process with what it counted. */
struct push_sample {
	uint32_t tid, thread_name; /* thread_name: string offset */
	uint32_t first_frame, n_frames;
	int64_t values[2];   /* CPU: samples, nanoseconds; off-CPU: nanoseconds */
	XXH128_hash_t stack; /* content hash of the frames (mappings, addresses, functions) */
};

/* One process's profile of one kind. */
struct push_proc {
	uint32_t pid;
	enum agent_profile_kind kind;
	uint32_t comm;			    /* string offset */
	uint32_t first_label, n_labels;	    /* series labels, sorted, without __name__ */
	uint32_t first_mapping, n_mappings; /* the executable's first, when sampled */
	uint32_t first_sample, n_samples;
};

struct push_window {
	int64_t time_ns, duration_ns; /* window start (wall clock) and length */
	int64_t period_ns;	      /* CPU samples' period: 1e9 / frequency */
	struct push_proc *procs;
	struct push_label *labels;
	struct push_mapping *mappings;
	struct push_frame *frames;
	struct push_sample *samples;
	char *strings;
	size_t n_procs, n_labels, n_mappings, n_frames, n_samples, strings_len;
	size_t cap_procs, cap_labels, cap_mappings, cap_frames, cap_samples, cap_strings;
	struct htab *string_index; /* during capture only */
};

/* Captures every process of w that has samples (CPU, then off-CPU
 * profiles), resolving frames with env; series labels come from each
 * proc_info's series (agent.c sets them before). Offers the files of
 * user mappings to env->uploader when set. 0, or -ENOMEM (*out NULL). */
int push_window_capture(const struct profile_env *env, const struct window *w,
			struct push_window **out);
void push_window_free(struct push_window *pw); /* NULL-safe */
/* The memory pw holds, for the push queue's byte bound. */
size_t push_window_bytes(const struct push_window *pw);

static inline const char *push_str(const struct push_window *pw, uint32_t off)
{
	return pw->strings + off;
}

/* WriteRaw's view of pw (push_window_pprof.c): one gzipped pprof per
 * process profile, shaped exactly as profile.c builds them for the push
 * (sample types, period, thread labels, mappings with the executable
 * first, and their ExecutableInfo). profiles[i] points into bufs[i],
 * execs[i] and pw; the caller frees those with push_window_profiles_free.
 * 0 or -ENOMEM. */
int push_window_profiles(const struct push_window *pw, struct agent_profile **profiles,
			 struct buf **bufs, struct agent_exec_infos **execs,
			 struct agent_labels **labels);
/* The builder location of frame f of process pr: its mapping created on
 * first use, with its ExecutableInfo appended to ex (ex->v[i] describes
 * mapping id i + 1, so b's mappings must all come through here). 0 on
 * out-of-memory. */
uint64_t push_window_location(struct pprof_builder *b, const struct push_window *pw,
			      const struct push_proc *pr, const struct push_frame *f,
			      struct agent_exec_infos *ex);
void push_window_profiles_free(const struct push_window *pw, struct agent_profile *profiles,
			       struct buf *bufs, struct agent_exec_infos *execs,
			       struct agent_labels *labels);

#endif
