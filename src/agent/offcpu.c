/*
 * offcpu.c — attaching the off-CPU programs (offcpu.bpf.h) to the kernel.
 *
 * offcpu_switch goes on the sched_switch raw tracepoint, by name. The
 * resume program must run in the task that runs again, before it leaves
 * the kernel: first choice, the sched_exit_tp raw tracepoint at the end
 * of __schedule (Linux 6.16+; nothing but the tracepoint's name needed).
 * Older kernels get a kprobe on finish_task_switch, a static function the
 * compiler may have cloned under another name: "finish_task_switch" on
 * some kernels, "finish_task_switch.isra.0" on others. The plain name is
 * tried first; when the kernel has no such symbol, /proc/kallsyms is read
 * for a text symbol named finish_task_switch.SUFFIX. A kernel with
 * neither (or without kprobes: CONFIG_KPROBES off) cannot say when a task
 * runs again: off-CPU profiling stays off (the caller warns once, /metrics
 * shows kiln_agent_off_cpu_enabled 0, and CPU profiling goes on), rather
 * than sampling at some other point where the stacks would not be the
 * ones the task blocked in.
 *
 * The resume probe is attached before the switch tracepoint, so that no
 * task is ever noted as switched out with nobody to take it off the map.
 */
#include "agent/agent.h"
#include "common/log.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESUME_FUNC "finish_task_switch"

/* Attaches the kprobe flavour of the resume program to finish_task_switch
 * under the name this kernel has for it. */
static struct bpf_link *attach_resume_kprobe(struct bpf_program *prog, char *name, size_t namesz,
					     struct kiln_error *err)
{
	struct bpf_link *link = bpf_program__attach_kprobe(prog, false, RESUME_FUNC);
	int rc;

	snprintf(name, namesz, "%s", RESUME_FUNC);
	if (link)
		return link;
	rc = offcpu_find_resume_symbol("/proc/kallsyms", name, namesz, err);
	if (rc)
		return NULL;
	link = bpf_program__attach_kprobe(prog, false, name);
	if (!link)
		kiln_error_set(err, errno, "kprobe on %s: %s", name, strerror(errno));
	return link;
}

int offcpu_attach(const struct offcpu_programs *progs, struct bpf_link **switch_link,
		  struct bpf_link **resume_link, struct kiln_error *err)
{
	char name[128];
	int rc;

	*resume_link = bpf_program__attach(progs->resume_tp);
	if (*resume_link) {
		snprintf(name, sizeof(name), "the sched_exit_tp tracepoint");
	} else {
		struct kiln_error kerr = {0};
		int tp_errno = errno;

		*resume_link =
		    attach_resume_kprobe(progs->resume_kprobe, name, sizeof(name), &kerr);
		if (!*resume_link)
			return kiln_error_set(err, ENOENT,
					      "no point where a task resumes is known: no "
					      "sched_exit_tp tracepoint (%s; Linux 6.16+) and no "
					      "kprobe on %s (%s)",
					      strerror(tp_errno), RESUME_FUNC, kerr.msg);
	}
	*switch_link = bpf_program__attach(progs->on_switch);
	if (!*switch_link) {
		rc = errno;
		bpf_link__destroy(*resume_link);
		*resume_link = NULL;
		return kiln_error_set(err, rc, "attaching to raw tracepoint sched_switch: %s",
				      strerror(rc));
	}
	log_debug("off-CPU: tasks resume at %s", name);
	return 0;
}
