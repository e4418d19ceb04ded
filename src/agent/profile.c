/*
 * profile.c — one process's window as a pprof profile.
 *
 * Shape (what Parca's agent sends, so the server and `go tool pprof` read
 * it as a CPU profile): sample types samples/count and cpu/nanoseconds,
 * period cpu/nanoseconds = 1e9 / frequency, time = window start, duration =
 * window length. Each sample is one (thread, stack) with its count; stacks
 * are leaf first: kernel frames, then user frames.
 *
 * Off-CPU profiles (--off-cpu-threshold) have the shape of Parca's agent's:
 * one sample type, wallclock/nanoseconds (the time each stack spent off
 * CPU), period type samples/count, period 1 (each sample is one recorded
 * wait), built from the window's off-CPU table with the same frames,
 * mappings and labels.
 *
 * Kernel frames are symbolized here (the layout is only known on this
 * host): one "[kernel.kallsyms]" mapping, a function per symbol whose file
 * name is the module ("[ext4]") or "[kernel.kallsyms]". Return addresses
 * (every frame but the leaf) are looked up at address - 1 so that a call
 * at the very end of a function is attributed to its caller.
 *
 * User frames are left as addresses with the exact mapping (start, limit,
 * file offset, path, build ID) so that the server, or `go tool pprof
 * -symbolize=local` on the same host, can symbolize them from the binary.
 *
 * Python frames (python.h) carry their names too, under one "[python]"
 * mapping with has_functions: function = qualified name, file = the .py
 * file, with the line of the instruction the frame was at.
 * Frames in JIT code that the process's perf map names (perfmap.h) are the
 * exception: no binary describes them, so they carry their function (file:
 * the perf map's path) under a "[jit]" mapping marked has_functions.
 */
#include "agent/agent.h"
#include "agent/frame.h"
#include "agent/python.h"
#include "common/htab.h"
#include "pprof/pprof.h"

#include <libdeflate.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int profile_series_labels(const struct profile_env *env, const struct proc_info *p,
			  struct agent_labels *out)
{
	int rc = 0;

	if (env->host_labels)
		rc = labels_copy(out, env->host_labels);
	if (!rc)
		rc = labels_copy(out, &p->labels);
	return rc;
}

void agent_exec_infos_free(struct agent_exec_infos *e)
{
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* Records the executable info of mapping id mid if it is new (ids are
 * handed out in order, so a new one is n + 1). 0 or -ENOMEM. */
static int exec_info_note(struct agent_exec_infos *e, uint64_t mid, const struct proc_mapping *m)
{
	struct agent_exec_info *ei;

	if (!e || mid <= e->n)
		return 0;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 8;
		struct agent_exec_info *nv = realloc(e->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		e->v = nv;
		e->cap = cap;
	}
	ei = &e->v[e->n++];
	memset(ei, 0, sizeof(*ei));
	if (m) {
		ei->mapping = m;
		ei->elf_type = m->elf_type;
		ei->has_load = m->has_load;
		ei->load_offset = m->load_offset;
		ei->load_vaddr = m->load_vaddr;
	}
	return 0;
}

/* The "[python]" mapping, created on first use. */
static uint64_t python_mapping(struct pprof_builder *b, struct agent_exec_infos *exec,
			       uint64_t *pymapping)
{
	struct pprof_mapping_desc pm = {.filename = "[python]",
					.memory_start = PYFRAME_TAG,
					.memory_limit = PYFRAME_TAG << 1,
					.has_functions = true,
					.has_filenames = true,
					.has_line_numbers = true};

	if (*pymapping)
		return *pymapping;
	*pymapping = pprof_builder_mapping(b, &pm);
	if (*pymapping && exec_info_note(exec, *pymapping, NULL) != 0)
		*pymapping = 0;
	return *pymapping;
}

static uint64_t user_mapping(struct pprof_builder *b, const struct proc_mapping *m,
			     struct agent_exec_infos *exec)
{
	struct pprof_mapping_desc md = {0};
	uint64_t mid;

	md.memory_start = m->start;
	md.memory_limit = m->limit;
	md.file_offset = m->offset;
	md.filename = pprof_mapping_filename(m->path);
	md.build_id = m->build_id;
	mid = pprof_builder_mapping(b, &md);
	if (mid && exec_info_note(exec, mid, m) != 0)
		return 0;
	return mid;
}

/* The location of frame i of a stack of process p (frame.h), its mapping
 * created on first use (the kernel's is kmapping, made up front). 0 on
 * out-of-memory. */
static uint64_t frame_location(struct pprof_builder *b, const struct profile_env *env,
			       const struct proc_info *p, const uint64_t *frames, size_t i,
			       size_t n_kernel, uint64_t kmapping, uint64_t *pymapping,
			       struct agent_exec_infos *exec)
{
	struct pprof_line_desc line = {0};
	struct pprof_mapping_desc md;
	struct agent_exec_info ei;
	struct frame_desc f;
	uint64_t mid = 0;

	frame_resolve(env, p, frames, i, n_kernel, &f);
	switch (f.map_kind) {
	case FRAME_MAP_NONE:
		break;
	case FRAME_MAP_KERNEL:
		mid = kmapping;
		break;
	case FRAME_MAP_PYTHON:
		mid = python_mapping(b, exec, pymapping);
		break;
	case FRAME_MAP_USER:
		mid = user_mapping(b, f.m, exec);
		break;
	case FRAME_MAP_JIT:
		frame_mapping_desc(&f, &md, &ei);
		mid = pprof_builder_mapping(b, &md);
		if (mid && exec_info_note(exec, mid, f.m) != 0)
			mid = 0;
		break;
	}
	if (f.map_kind != FRAME_MAP_NONE && !mid)
		return 0;
	if (!f.name)
		return pprof_builder_location(b, mid, f.addr, NULL, 0);
	line.function_id = pprof_builder_function(b, f.name, f.name, f.file, 0);
	line.line = f.line;
	if (!line.function_id)
		return 0;
	return pprof_builder_location(b, mid, f.addr, &line, 1);
}

/* The same bytes as pprof_builder_encode(b, true, out) (one gzip member,
 * libdeflate level 1), with env's compressor and scratch buffer when set;
 * level 0 (stored blocks) up to env->stored_max bytes with gz_store. */
static int encode_gzip(const struct profile_env *env, struct pprof_builder *b, struct buf *out)
{
	struct libdeflate_compressor *gz = env->gz;
	size_t bound, got;
	int rc;

	if (!env->gz || !env->scratch)
		return pprof_builder_encode(b, true, out);
	buf_reset(env->scratch);
	rc = pprof_builder_encode(b, false, env->scratch);
	if (rc)
		return rc;
	if (env->gz_store && env->scratch->len <= env->stored_max)
		gz = env->gz_store;
	bound = libdeflate_gzip_compress_bound(gz, env->scratch->len);
	if (buf_reserve(out, bound + 1))
		return -ENOMEM;
	got = libdeflate_gzip_compress(gz, env->scratch->data, env->scratch->len,
				       out->data + out->len, bound);
	if (!got)
		return -EIO;
	out->len += got;
	return 0;
}

/* A builder with the sample types, period, time and duration of w's
 * profiles: env's kept builder, emptied, or a new one (sized for hint)
 * without. NULL on out-of-memory. Give it back with builder_done. */
static struct pprof_builder *builder_start(const struct profile_env *env, const struct window *w,
					   size_t hint, int64_t period, bool offcpu)
{
	struct pprof_builder *b = env->builder;
	int rc;

	if (b ? pprof_builder_reset(b, hint) != 0 : !(b = pprof_builder_new_sized(hint)))
		return NULL;
	if (offcpu)
		rc = pprof_builder_add_sample_type(b, "wallclock", "nanoseconds") ||
		     pprof_builder_set_period(b, "samples", "count", 1);
	else
		rc = pprof_builder_add_sample_type(b, "samples", "count") ||
		     pprof_builder_add_sample_type(b, "cpu", "nanoseconds") ||
		     pprof_builder_set_period(b, "cpu", "nanoseconds", period);
	if (rc) {
		if (b != env->builder)
			pprof_builder_free(b);
		return NULL;
	}
	pprof_builder_set_time(b, w->start_wall_ns, (int64_t)(w->end_mono_ns - w->start_mono_ns));
	return b;
}

/* Frees b unless it is env's kept builder (which the next builder_start
 * empties). */
static void builder_done(const struct profile_env *env, struct pprof_builder *b)
{
	if (b != env->builder)
		pprof_builder_free(b);
}

static int64_t period_ns(const struct profile_env *env)
{
	return (int64_t)(1000000000ull / (env->frequency_hz ? env->frequency_hz : 1));
}

/* The "[kernel.kallsyms]" mapping (the kernel half of the address space:
 * kernel frames are never normalized through it, they carry their names),
 * or 0 without kernel names; *kmapping is set on the first call only. */
static int kernel_mapping(struct pprof_builder *b, const struct profile_env *env,
			  struct agent_exec_infos *exec, uint64_t *kmapping)
{
	struct pprof_mapping_desc km = {.filename = "[kernel.kallsyms]",
					.memory_start = 0x8000000000000000ull,
					.memory_limit = UINT64_MAX,
					.has_functions = true};

	if (!env->ksyms || *kmapping)
		return 0;
	*kmapping = pprof_builder_mapping(b, &km);
	if (!*kmapping || exec_info_note(exec, *kmapping, NULL) != 0)
		return -ENOMEM;
	return 0;
}

/* pprof tools treat mapping 1 as "the binary": make it the executable's
 * first code mapping when there is one. */
static int executable_mapping(struct pprof_builder *b, const struct proc_info *p,
			      struct agent_exec_infos *exec)
{
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct proc_mapping *m = &p->maps.v[i];

		if (p->executable[0] && strcmp(m->path, p->executable) == 0)
			return user_mapping(b, m, exec) ? 0 : -ENOMEM;
	}
	return 0;
}

/* Adds the samples of one process's window to b (its off-CPU ones with
 * offcpu): thread_id and thread_name, then series_labels (if any) on every
 * sample. */
static int add_process_samples(struct pprof_builder *b, const struct profile_env *env,
			       const struct window_proc *wp,
			       const struct agent_labels *series_labels, uint64_t kmapping,
			       struct agent_exec_infos *exec, bool offcpu)
{
	const struct htab *stacks = offcpu ? wp->offcpu : wp->stacks;
	uint64_t locs[PROFILER_MAX_FRAMES];
	size_t nlab = 2 + (series_labels ? series_labels->n : 0), iter = 0, klen;
	struct pprof_label_desc labels[64];
	int64_t period = period_ns(env);
	uint64_t pymapping = 0;
	const void *key;
	uint64_t count;
	int rc;

	if (nlab > sizeof(labels) / sizeof(labels[0]))
		nlab = sizeof(labels) / sizeof(labels[0]);
	/* Series labels go after the per-sample ones; names never clash
	 * (thread_* are not series label names). */
	for (size_t i = 2; i < nlab; i++) {
		labels[i].key = series_labels->v[i - 2].name;
		labels[i].str = series_labels->v[i - 2].value;
	}
	while (stacks && htab_next(stacks, &iter, &key, &klen, &count)) {
		const struct window_stack_key *k = key;
		const uint64_t *frames = (const uint64_t *)((const char *)key + sizeof(*k));
		size_t nf = (size_t)k->n_kernel + k->n_user;
		int64_t values[2] = {(int64_t)count, (int64_t)count * period};

		if (offcpu) /* count is the index of the stack's totals */
			values[0] = (int64_t)wp->offcpu_totals[count].ns;
		char tid[16];

		for (size_t i = 0; i < nf; i++) {
			locs[i] = frame_location(b, env, wp->info, frames, i, k->n_kernel, kmapping,
						 &pymapping, exec);
			if (!locs[i])
				return -ENOMEM;
		}
		snprintf(tid, sizeof(tid), "%u", k->tid);
		labels[0] = (struct pprof_label_desc){.key = "thread_id", .str = tid};
		labels[1] = (struct pprof_label_desc){.key = "thread_name", .str = k->thread_comm};
		rc = pprof_builder_add_sample(b, locs, nf, values, labels, nlab);
		if (rc)
			return rc;
	}
	return 0;
}

static int build_process(const struct profile_env *env, const struct window *w,
			 const struct window_proc *wp, const struct agent_labels *series_labels,
			 struct buf *out, struct agent_exec_infos *exec, bool offcpu,
			 struct kiln_error *err)
{
	const struct htab *stacks = offcpu ? wp->offcpu : wp->stacks;
	/* Sized for this process's stacks: most processes have a handful, and
	 * a default-sized builder costs more to set up than to fill. */
	struct pprof_builder *b = builder_start(env, w, 16 + 4 * (stacks ? htab_count(stacks) : 0),
						period_ns(env), offcpu);
	uint64_t kmapping = 0;
	int rc = -ENOMEM;

	if (!b)
		goto fail;
	rc = executable_mapping(b, wp->info, exec);
	if (!rc)
		rc = kernel_mapping(b, env, exec, &kmapping);
	if (!rc)
		rc = add_process_samples(b, env, wp, series_labels, kmapping, exec, offcpu);
	if (!rc)
		rc = encode_gzip(env, b, out);
	if (rc)
		goto fail;
	builder_done(env, b);
	return 0;
fail:
	builder_done(env, b);
	if (rc == 0)
		rc = -ENOMEM;
	return kiln_error_set(err, -rc, "pid %u: building %s profile: %s", wp->info->pid,
			      offcpu ? "off-CPU" : "CPU", strerror(-rc));
}

int profile_build(const struct profile_env *env, const struct window *w,
		  const struct window_proc *wp, const struct agent_labels *series_labels,
		  struct buf *out, struct agent_exec_infos *exec, struct kiln_error *err)
{
	return build_process(env, w, wp, series_labels, out, exec, false, err);
}

int profile_build_offcpu(const struct profile_env *env, const struct window *w,
			 const struct window_proc *wp, const struct agent_labels *series_labels,
			 struct buf *out, struct agent_exec_infos *exec, struct kiln_error *err)
{
	return build_process(env, w, wp, series_labels, out, exec, true, err);
}

static int build_window(const struct profile_env *env, const struct window *w,
			const struct agent_labels *const *series_labels, struct buf *out,
			bool offcpu, struct kiln_error *err)
{
	size_t stacks = 0;
	struct pprof_builder *b;
	uint64_t kmapping = 0;
	int rc = -ENOMEM;

	for (size_t i = 0; i < w->n; i++) {
		const struct htab *h = offcpu ? w->procs[i].offcpu : w->procs[i].stacks;

		stacks += h ? htab_count(h) : 0;
	}
	b = builder_start(env, w, 16 + 4 * stacks, period_ns(env), offcpu);
	if (!b)
		goto fail;
	rc = kernel_mapping(b, env, NULL, &kmapping);
	for (size_t i = 0; !rc && i < w->n; i++)
		rc = add_process_samples(b, env, &w->procs[i], series_labels[i], kmapping, NULL,
					 offcpu);
	if (!rc)
		rc = encode_gzip(env, b, out);
	if (rc)
		goto fail;
	builder_done(env, b);
	return 0;
fail:
	builder_done(env, b);
	if (rc == 0)
		rc = -ENOMEM;
	return kiln_error_set(err, -rc, "window of %zu processes: building %s profile: %s", w->n,
			      offcpu ? "off-CPU" : "CPU", strerror(-rc));
}

int profile_build_window(const struct profile_env *env, const struct window *w,
			 const struct agent_labels *const *series_labels, struct buf *out,
			 struct kiln_error *err)
{
	return build_window(env, w, series_labels, out, false, err);
}

int profile_build_offcpu_window(const struct profile_env *env, const struct window *w,
				const struct agent_labels *const *series_labels, struct buf *out,
				struct kiln_error *err)
{
	return build_window(env, w, series_labels, out, true, err);
}
