/*
 * push_window.c — capturing a window for the push sink (push_window.h).
 *
 * Per process and kind (CPU, off-CPU) with samples: its series labels, the
 * mappings its frames fall in (the executable's first, as profile.c puts
 * it), and per (thread, stack) the resolved frames and values. Frames are
 * resolved by frame.c exactly as profile.c resolves them for a pprof, and
 * every string they point to is copied: kernel and Python names live only
 * until the next window's cache trims.
 *
 * A stack's hash covers what the server stores of it (each frame's
 * mapping, address, function name, file and line), so the same stack gets
 * the same hash in every window whatever the process's other stacks.
 */
#include "agent/push_window.h"
#include "agent/frame.h"
#include "common/htab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grows array *v (element size sz) to hold one more than *n. */
static int grow(void *v, size_t *cap, size_t n, size_t sz)
{
	void **p = v, *nv;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 16;
	nv = realloc(*p, c * sz);
	if (!nv)
		return -ENOMEM;
	*p = nv;
	*cap = c;
	return 0;
}

#define PUSH_GROW(pw, field)                                                                       \
	grow(&(pw)->field, &(pw)->cap_##field, (pw)->n_##field, sizeof(*(pw)->field))

/* The offset of s in pw's pool, added if new; 0 for NULL or "". */
static int intern(struct push_window *pw, const char *s, uint32_t *off)
{
	size_t len = s ? strlen(s) : 0;
	uint64_t v = pw->strings_len;
	int rc;

	*off = 0;
	if (!len)
		return 0;
	rc = htab_intern(pw->string_index, s, len, &v);
	if (rc < 0)
		return rc;
	*off = (uint32_t)v;
	if (rc == 1)
		return 0;
	while (pw->strings_len + len + 1 > pw->cap_strings) {
		size_t cap = pw->cap_strings * 2;
		char *nv = realloc(pw->strings, cap);

		if (!nv)
			return -ENOMEM;
		pw->strings = nv;
		pw->cap_strings = cap;
	}
	memcpy(pw->strings + pw->strings_len, s, len + 1);
	pw->strings_len += len + 1;
	return 0;
}

static uint64_t mapping_hash(const struct push_window *pw, const struct push_mapping *m)
{
	XXH3_state_t st;
	uint64_t head[4] = {m->start, m->limit, m->offset, m->kind};
	const char *f = push_str(pw, m->filename), *b = push_str(pw, m->build_id);

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, head, sizeof(head));
	XXH3_64bits_update(&st, f, strlen(f) + 1);
	XXH3_64bits_update(&st, b, strlen(b) + 1);
	return XXH3_64bits_digest(&st);
}

/* The index + 1 of frame f's mapping among the process's (pr), added if
 * new; 0 for none. Offers a new file mapping's debug info. */
static int proc_mapping(struct push_window *pw, const struct profile_env *env,
			const struct proc_info *p, struct push_proc *pr, const struct frame_desc *f,
			uint32_t *idx)
{
	struct pprof_mapping_desc md;
	struct agent_exec_info ei;
	struct push_mapping *m;
	int rc;

	*idx = 0;
	if (!frame_mapping_desc(f, &md, &ei))
		return 0;
	/* A process's frames fall in a handful of mappings. */
	for (uint32_t i = 0; i < pr->n_mappings; i++) {
		m = &pw->mappings[pr->first_mapping + i];
		if (m->kind == f->map_kind && m->start == md.memory_start &&
		    m->limit == md.memory_limit && m->offset == md.file_offset &&
		    strcmp(push_str(pw, m->filename), md.filename) == 0) {
			*idx = i + 1;
			return 0;
		}
	}
	if ((rc = PUSH_GROW(pw, mappings)))
		return rc;
	m = &pw->mappings[pw->n_mappings];
	memset(m, 0, sizeof(*m));
	m->start = md.memory_start;
	m->limit = md.memory_limit;
	m->offset = md.file_offset;
	m->kind = (uint8_t)f->map_kind;
	m->elf_type = (uint16_t)ei.elf_type;
	m->has_load = ei.has_load;
	m->load_offset = ei.load_offset;
	m->load_vaddr = ei.load_vaddr;
	if ((rc = intern(pw, md.filename, &m->filename)) ||
	    (rc = intern(pw, md.build_id, &m->build_id)))
		return rc;
	m->hash = mapping_hash(pw, m);
	pw->n_mappings++;
	*idx = ++pr->n_mappings;
	if (env->uploader && f->map_kind == FRAME_MAP_USER && f->m->build_id[0] &&
	    f->m->path[0] == '/') {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%u/root%s",
			 env->proc_root ? env->proc_root : "/proc", p->pid, f->m->path);
		debuginfo_uploader_offer(env->uploader, f->m->build_id, path);
	}
	return 0;
}

/* pprof tools treat mapping 1 as "the binary": the executable's first code
 * mapping, when the process has one. */
static int executable_first(struct push_window *pw, const struct profile_env *env,
			    const struct proc_info *p, struct push_proc *pr)
{
	for (size_t i = 0; p->executable[0] && i < p->maps.n; i++) {
		const struct proc_mapping *m = &p->maps.v[i];

		if (strcmp(m->path, p->executable) == 0) {
			struct frame_desc f = {.map_kind = FRAME_MAP_USER, .m = m};
			uint32_t idx;

			return proc_mapping(pw, env, p, pr, &f, &idx);
		}
	}
	return 0;
}

static int add_sample(struct push_window *pw, const struct profile_env *env,
		      const struct proc_info *p, struct push_proc *pr,
		      const struct window_stack_key *k, const int64_t values[2])
{
	const uint64_t *frames = (const uint64_t *)(k + 1);
	size_t nf = (size_t)k->n_kernel + k->n_user;
	struct push_sample *s;
	XXH3_state_t st;
	int rc;

	if ((rc = PUSH_GROW(pw, samples)))
		return rc;
	s = &pw->samples[pw->n_samples];
	memset(s, 0, sizeof(*s));
	s->tid = k->tid;
	s->values[0] = values[0];
	s->values[1] = values[1];
	s->first_frame = (uint32_t)pw->n_frames;
	s->n_frames = (uint32_t)nf;
	if ((rc = intern(pw, k->thread_comm, &s->thread_name)))
		return rc;
	XXH3_128bits_reset(&st);
	for (size_t i = 0; i < nf; i++) {
		struct push_frame *pf;
		struct frame_desc f;
		uint64_t head[3];

		frame_resolve(env, p, frames, i, k->n_kernel, &f);
		if ((rc = PUSH_GROW(pw, frames)))
			return rc;
		pf = &pw->frames[pw->n_frames];
		memset(pf, 0, sizeof(*pf));
		pf->addr = f.addr;
		pf->line = f.line;
		if ((rc = proc_mapping(pw, env, p, pr, &f, &pf->mapping)) ||
		    (rc = intern(pw, f.name, &pf->name)) || (rc = intern(pw, f.file, &pf->file)))
			return rc;
		pw->n_frames++;
		head[0] = pf->addr;
		head[1] = pf->mapping ? pw->mappings[pr->first_mapping + pf->mapping - 1].hash : 0;
		head[2] = (uint64_t)pf->line;
		XXH3_128bits_update(&st, head, sizeof(head));
		if (pf->name) {
			const char *name = push_str(pw, pf->name), *file = push_str(pw, pf->file);

			XXH3_128bits_update(&st, name, strlen(name) + 1);
			XXH3_128bits_update(&st, file, strlen(file) + 1);
		}
		XXH3_128bits_update(&st, "|", 1); /* frame boundary */
	}
	s->stack = XXH3_128bits_digest(&st);
	pw->n_samples++;
	pr->n_samples++;
	return 0;
}

static int capture_proc(struct push_window *pw, const struct profile_env *env,
			const struct window_proc *wp, enum agent_profile_kind kind)
{
	const struct htab *stacks = kind == AGENT_PROFILE_OFFCPU ? wp->offcpu : wp->stacks;
	const struct proc_info *p = wp->info;
	struct push_proc *pr;
	size_t iter = 0, klen;
	const void *key;
	uint64_t count;
	int rc;

	if (!stacks || !htab_count(stacks))
		return 0;
	if ((rc = PUSH_GROW(pw, procs)))
		return rc;
	pr = &pw->procs[pw->n_procs++];
	memset(pr, 0, sizeof(*pr));
	pr->pid = p->pid;
	pr->kind = kind;
	pr->first_label = (uint32_t)pw->n_labels;
	pr->first_mapping = (uint32_t)pw->n_mappings;
	pr->first_sample = (uint32_t)pw->n_samples;
	if ((rc = intern(pw, p->comm, &pr->comm)))
		return rc;
	for (size_t i = 0; i < p->series.n; i++) {
		struct push_label *l;

		if ((rc = PUSH_GROW(pw, labels)))
			return rc;
		l = &pw->labels[pw->n_labels];
		if ((rc = intern(pw, p->series.v[i].name, &l->name)) ||
		    (rc = intern(pw, p->series.v[i].value, &l->value)))
			return rc;
		pw->n_labels++;
		pr->n_labels++;
	}
	if ((rc = executable_first(pw, env, p, pr)))
		return rc;
	while (htab_next(stacks, &iter, &key, &klen, &count)) {
		int64_t values[2] = {(int64_t)count, (int64_t)count * pw->period_ns};

		if (kind == AGENT_PROFILE_OFFCPU) /* count is the index of the stack's totals */
			values[0] = (int64_t)wp->offcpu_totals[count].ns, values[1] = 0;
		if ((rc = add_sample(pw, env, p, pr, key, values)))
			return rc;
	}
	return 0;
}

int push_window_capture(const struct profile_env *env, const struct window *w,
			struct push_window **out)
{
	struct push_window *pw = calloc(1, sizeof(*pw));
	int rc = -ENOMEM;

	*out = NULL;
	if (!pw)
		return -ENOMEM;
	pw->time_ns = w->start_wall_ns;
	pw->duration_ns = (int64_t)(w->end_mono_ns - w->start_mono_ns);
	pw->period_ns = (int64_t)(1000000000ull / (env->frequency_hz ? env->frequency_hz : 1));
	pw->cap_strings = 4096;
	pw->strings = malloc(pw->cap_strings);
	pw->string_index = htab_new(256);
	if (!pw->strings || !pw->string_index)
		goto fail;
	pw->strings[0] = '\0';
	pw->strings_len = 1;
	rc = 0;
	for (int kind = AGENT_PROFILE_CPU; kind <= AGENT_PROFILE_OFFCPU && !rc; kind++)
		for (size_t i = 0; i < w->n && !rc; i++)
			rc = capture_proc(pw, env, &w->procs[i], (enum agent_profile_kind)kind);
	if (rc)
		goto fail;
	htab_free(pw->string_index);
	pw->string_index = NULL;
	*out = pw;
	return 0;
fail:
	push_window_free(pw);
	return rc;
}

size_t push_window_bytes(const struct push_window *pw)
{
	return sizeof(*pw) + pw->cap_procs * sizeof(*pw->procs) +
	       pw->cap_labels * sizeof(*pw->labels) + pw->cap_mappings * sizeof(*pw->mappings) +
	       pw->cap_frames * sizeof(*pw->frames) + pw->cap_samples * sizeof(*pw->samples) +
	       pw->cap_strings;
}

void push_window_free(struct push_window *pw)
{
	if (!pw)
		return;
	free(pw->procs);
	free(pw->labels);
	free(pw->mappings);
	free(pw->frames);
	free(pw->samples);
	free(pw->strings);
	htab_free(pw->string_index);
	free(pw);
}
