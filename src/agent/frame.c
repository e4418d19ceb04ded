/*
 * frame.c — resolving one sampled frame (frame.h).
 *
 * Kernel frames carry their names (the layout is only known on this host)
 * under one "[kernel.kallsyms]" mapping over the kernel half of the address
 * space; a function's file is its module ("[ext4]") or
 * "[kernel.kallsyms]". Python frames carry theirs under "[python]", the
 * range of the encoded frames (python_frames.h), which no native address
 * reaches. A frame in JIT code that the process's perf map names carries
 * its function under "[jit]" (no binary describes it). Everything else is
 * an address in the file mapping that holds it, or in none.
 */
#include "agent/frame.h"
#include "agent/python.h"

#include <stdio.h>
#include <string.h>

static void kernel_frame(const struct profile_env *env, uint64_t addr, bool leaf,
			 struct frame_desc *out)
{
	const char *name, *module;

	/* Without kernel names there is no kernel mapping either: the
	 * address is all a reader could use. */
	out->map_kind = env->ksyms ? FRAME_MAP_KERNEL : FRAME_MAP_NONE;
	if (!env->ksyms ||
	    !ksym_cache_lookup(env->ksyms, ksym_frame_addr(addr, leaf), &name, &module))
		return;
	snprintf(out->kernel_file, sizeof(out->kernel_file), "[%s]",
		 module[0] ? module : "kernel.kallsyms");
	out->name = name;
	out->file = out->kernel_file;
}

void frame_resolve(const struct profile_env *env, const struct proc_info *p, const uint64_t *frames,
		   size_t i, size_t n_kernel, struct frame_desc *out)
{
	uint64_t addr = frames[i];
	const struct proc_mapping *m;

	memset(out, 0, sizeof(*out));
	out->addr = addr;
	if (i < n_kernel) {
		kernel_frame(env, addr, i == 0, out);
		return;
	}
	if (PYFRAME_IS(addr)) {
		out->map_kind = FRAME_MAP_PYTHON;
		if (!python_frame_name(env->python, p->pid, addr, &out->name, &out->file,
				       &out->line))
			out->name = out->file = NULL;
		return;
	}
	/* Every frame but the leaf is a return address, the instruction after
	 * a call: inside the call, symbolizers name the call site's line and
	 * inline chain, not the next instruction's (which may belong to
	 * another inlined function, or to the next function after a noreturn
	 * call). */
	if (i != n_kernel && addr > 0)
		addr--;
	out->addr = addr;
	m = procmaps_find(&p->maps, addr);
	if (p->perfmap && perfmap_jit_region(m)) {
		const char *file = NULL, *name = perfmap_proc_lookup(p, addr, &file);

		if (name) {
			out->map_kind = m ? FRAME_MAP_JIT : FRAME_MAP_NONE;
			out->m = m;
			out->name = name;
			out->file = file;
			return;
		}
	}
	out->map_kind = m ? FRAME_MAP_USER : FRAME_MAP_NONE;
	out->m = m;
}

bool frame_mapping_desc(const struct frame_desc *f, struct pprof_mapping_desc *md,
			struct agent_exec_info *ei)
{
	memset(md, 0, sizeof(*md));
	memset(ei, 0, sizeof(*ei));
	switch (f->map_kind) {
	case FRAME_MAP_NONE:
		return false;
	case FRAME_MAP_KERNEL:
		md->filename = "[kernel.kallsyms]";
		md->memory_start = 0x8000000000000000ull;
		md->memory_limit = UINT64_MAX;
		md->has_functions = true;
		return true;
	case FRAME_MAP_PYTHON:
		md->filename = "[python]";
		md->memory_start = PYFRAME_TAG;
		md->memory_limit = PYFRAME_TAG << 1;
		md->has_functions = md->has_filenames = md->has_line_numbers = true;
		return true;
	case FRAME_MAP_JIT:
		md->memory_start = f->m->start;
		md->memory_limit = f->m->limit;
		md->filename = "[jit]";
		md->has_functions = true;
		break;
	case FRAME_MAP_USER:
		md->memory_start = f->m->start;
		md->memory_limit = f->m->limit;
		md->file_offset = f->m->offset;
		md->filename = pprof_mapping_filename(f->m->path);
		md->build_id = f->m->build_id;
		break;
	}
	ei->mapping = f->m;
	ei->elf_type = f->m->elf_type;
	ei->has_load = f->m->has_load;
	ei->load_offset = f->m->load_offset;
	ei->load_vaddr = f->m->load_vaddr;
	return true;
}
