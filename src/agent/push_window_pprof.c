/*
 * push_window_pprof.c — a captured window as WriteRaw's per-process
 * pprofs (push_window.h), for a server that answers UNIMPLEMENTED to
 * IngestService/Push after windows were already queued for it.
 *
 * Each profile has the shape profile.c gives the push sink's: sample types
 * samples/count and cpu/nanoseconds with period cpu/nanoseconds (off-CPU:
 * wallclock/nanoseconds, period samples/count 1), the window's time and
 * duration, thread_id and thread_name on every sample, and one
 * ExecutableInfo per mapping in mapping order.
 */
#include "agent/frame.h"
#include "agent/push_window.h"
#include "pprof/pprof.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The builder id of pr's mapping i (0-based), created with its executable
 * info on first use. 0 on out-of-memory. */
static uint64_t builder_mapping(struct pprof_builder *b, const struct push_window *pw,
				const struct push_proc *pr, uint32_t i, struct agent_exec_infos *ex)
{
	const struct push_mapping *m = &pw->mappings[pr->first_mapping + i];
	struct pprof_mapping_desc md = {
	    .memory_start = m->start,
	    .memory_limit = m->limit,
	    .file_offset = m->offset,
	    .filename = push_str(pw, m->filename),
	    .build_id = push_str(pw, m->build_id),
	    .has_functions = m->kind != FRAME_MAP_USER,
	    .has_filenames = m->kind == FRAME_MAP_PYTHON,
	    .has_line_numbers = m->kind == FRAME_MAP_PYTHON,
	};
	uint64_t id = pprof_builder_mapping(b, &md);
	struct agent_exec_info *ei;

	if (!id || id <= ex->n)
		return id;
	if (ex->n == ex->cap) {
		size_t cap = ex->cap ? ex->cap * 2 : 8;
		struct agent_exec_info *nv = realloc(ex->v, cap * sizeof(*nv));

		if (!nv)
			return 0;
		ex->v = nv;
		ex->cap = cap;
	}
	ei = &ex->v[ex->n++];
	memset(ei, 0, sizeof(*ei));
	ei->elf_type = m->elf_type;
	ei->has_load = m->has_load;
	ei->load_offset = m->load_offset;
	ei->load_vaddr = m->load_vaddr;
	return id;
}

uint64_t push_window_location(struct pprof_builder *b, const struct push_window *pw,
			      const struct push_proc *pr, const struct push_frame *f,
			      struct agent_exec_infos *ex)
{
	uint64_t mid = f->mapping ? builder_mapping(b, pw, pr, f->mapping - 1, ex) : 0;
	struct pprof_line_desc line = {.line = f->line};
	const char *name = push_str(pw, f->name);

	if (f->mapping && !mid)
		return 0;
	if (!f->name)
		return pprof_builder_location(b, mid, f->addr, NULL, 0);
	line.function_id =
	    pprof_builder_function(b, name, name, f->file ? push_str(pw, f->file) : NULL, 0);
	return line.function_id ? pprof_builder_location(b, mid, f->addr, &line, 1) : 0;
}

static int build_proc(struct pprof_builder *b, const struct push_window *pw,
		      const struct push_proc *pr, struct buf *out, struct agent_exec_infos *ex)
{
	uint64_t locs[PROFILER_MAX_FRAMES];
	int rc;

	if (pr->kind == AGENT_PROFILE_OFFCPU)
		rc = pprof_builder_add_sample_type(b, "wallclock", "nanoseconds") ||
		     pprof_builder_set_period(b, "samples", "count", 1);
	else
		rc = pprof_builder_add_sample_type(b, "samples", "count") ||
		     pprof_builder_add_sample_type(b, "cpu", "nanoseconds") ||
		     pprof_builder_set_period(b, "cpu", "nanoseconds", pw->period_ns);
	if (rc)
		return -ENOMEM;
	pprof_builder_set_time(b, pw->time_ns, pw->duration_ns);
	/* Every mapping in capture order: the executable's is mapping 1. */
	for (uint32_t i = 0; i < pr->n_mappings; i++)
		if (!builder_mapping(b, pw, pr, i, ex))
			return -ENOMEM;
	for (uint32_t si = 0; si < pr->n_samples; si++) {
		const struct push_sample *s = &pw->samples[pr->first_sample + si];
		struct pprof_label_desc labels[2];
		char tid[16];

		for (uint32_t fi = 0; fi < s->n_frames && fi < PROFILER_MAX_FRAMES; fi++) {
			locs[fi] =
			    push_window_location(b, pw, pr, &pw->frames[s->first_frame + fi], ex);
			if (!locs[fi])
				return -ENOMEM;
		}
		snprintf(tid, sizeof(tid), "%u", s->tid);
		labels[0] = (struct pprof_label_desc){.key = "thread_id", .str = tid};
		labels[1] = (struct pprof_label_desc){.key = "thread_name",
						      .str = push_str(pw, s->thread_name)};
		rc = pprof_builder_add_sample(b, locs, s->n_frames, s->values, labels, 2);
		if (rc)
			return rc;
	}
	return pprof_builder_encode(b, true, out);
}

int push_window_profiles(const struct push_window *pw, struct agent_profile **profiles,
			 struct buf **bufs, struct agent_exec_infos **execs,
			 struct agent_labels **labels)
{
	size_t n = pw->n_procs ? pw->n_procs : 1;
	struct agent_profile *pv = calloc(n, sizeof(*pv));
	struct buf *bv = calloc(n, sizeof(*bv));
	struct agent_exec_infos *ev = calloc(n, sizeof(*ev));
	struct agent_labels *lv = calloc(n, sizeof(*lv));
	struct pprof_builder *b = pprof_builder_new_sized(64);
	int rc = -ENOMEM;

	if (!pv || !bv || !ev || !lv || !b)
		goto fail;
	for (size_t i = 0; i < pw->n_procs; i++) {
		const struct push_proc *pr = &pw->procs[i];

		for (uint32_t j = 0; j < pr->n_labels; j++) {
			const struct push_label *l = &pw->labels[pr->first_label + j];

			if ((rc =
				 labels_set(&lv[i], push_str(pw, l->name), push_str(pw, l->value))))
				goto fail;
		}
		if ((rc = pprof_builder_reset(b, 16 + 4 * pr->n_samples)) ||
		    (rc = build_proc(b, pw, pr, &bv[i], &ev[i])))
			goto fail;
		pv[i] = (struct agent_profile){
		    .pid = pr->pid,
		    .comm = push_str(pw, pr->comm),
		    .labels = &lv[i],
		    .time_ns = pw->time_ns,
		    .duration_ns = pw->duration_ns,
		    .pprof = bv[i].data,
		    .pprof_len = bv[i].len,
		    .exec_info = ev[i].v,
		    .n_exec_info = ev[i].n,
		    .kind = pr->kind,
		};
	}
	pprof_builder_free(b);
	*profiles = pv;
	*bufs = bv;
	*execs = ev;
	*labels = lv;
	return 0;
fail:
	pprof_builder_free(b);
	push_window_profiles_free(pw, pv, bv, ev, lv);
	return rc < 0 ? rc : -ENOMEM;
}

void push_window_profiles_free(const struct push_window *pw, struct agent_profile *profiles,
			       struct buf *bufs, struct agent_exec_infos *execs,
			       struct agent_labels *labels)
{
	for (size_t i = 0; i < pw->n_procs; i++) {
		if (bufs)
			buf_free(&bufs[i]);
		if (execs)
			agent_exec_infos_free(&execs[i]);
		if (labels)
			labels_free(&labels[i]);
	}
	free(profiles);
	free(bufs);
	free(execs);
	free(labels);
}
