/*
 * test_offcpu.c — the user-space half of off-CPU profiling: window
 * aggregation (durations and counts summed per stack, apart from CPU
 * stacks), the off-CPU pprof shape (Parca's wallclock/nanoseconds with
 * period type samples/count), the window layout's off-CPU profile, the
 * local store's *.offcpu.pb.gz names, and the kallsyms matcher that finds
 * finish_task_switch's name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/htab.h"
#include "pprof/pprof.h"

/* A process with one code mapping at 0x400000, not in any cache. */
static struct proc_info *fake_proc(uint32_t pid)
{
	struct proc_info *p = calloc(1, sizeof(*p));
	char num[16];

	assert_non_null(p);
	p->pid = pid;
	strcpy(p->comm, "app");
	p->executable = strdup("/usr/bin/app");
	p->maps.v = calloc(1, sizeof(*p->maps.v));
	p->maps.v[0] = (struct proc_mapping){.start = 0x400000,
					     .limit = 0x500000,
					     .exec = true,
					     .path = strdup("/usr/bin/app"),
					     .build_id = strdup("")};
	p->maps.n = p->maps.cap = 1;
	snprintf(num, sizeof(num), "%u", pid);
	labels_set(&p->labels, "pid", num);
	return p;
}

static void event(struct sample_event *e, uint32_t kind, uint64_t leaf, uint64_t off_ns)
{
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->pid = 42;
	e->tid = 43;
	strcpy(e->thread_comm, "worker");
	e->n_user = 2;
	e->frames[0] = leaf;
	e->frames[1] = 0x402000;
	e->off_cpu_ns = off_ns;
}

/* Sums of the decoded profile's samples by leaf address (the first
 * location's), over sample index vi. */
static int64_t sum_for_leaf(const struct pprof_profile *prof, uint64_t leaf, size_t vi)
{
	const pprof_msg *msg = pprof_profile_msg(prof);
	int64_t sum = 0;

	for (size_t i = 0; i < msg->n_sample; i++) {
		const pprof_sample_msg *s = msg->sample[i];

		for (size_t l = 0; l < msg->n_location; l++)
			if (msg->location[l]->id == s->location_id[0] &&
			    msg->location[l]->address == leaf)
				sum += s->value[vi];
	}
	return sum;
}

static void test_offcpu_window_and_profile(void **state)
{
	struct proc_info *p = fake_proc(42);
	struct window *w = window_new(1000, 1000 + 2000000000ull, 1700000000000000000ll);
	struct agent_labels host = {0}, series = {0};
	struct profile_env env = {.frequency_hz = 19, .host_labels = &host};
	struct agent_exec_infos exec = {0};
	struct pprof_profile *prof = NULL;
	struct kiln_error err = {0};
	struct sample_event e;
	struct buf out = {0};
	const pprof_msg *msg;

	(void)state;
	/* The same stack blocked three times and ran once: the CPU sample
	 * stays a CPU sample, the waits add up. */
	event(&e, PROFILER_EVENT_OFFCPU, 0x401000, 5000000);
	assert_int_equal(window_add(w, p, &e), 0);
	event(&e, PROFILER_EVENT_OFFCPU, 0x401000, 7000000);
	assert_int_equal(window_add(w, p, &e), 0);
	event(&e, PROFILER_EVENT_OFFCPU, 0x403000, 11000000);
	assert_int_equal(window_add(w, p, &e), 0);
	event(&e, PROFILER_EVENT_SAMPLE, 0x401000, 0);
	assert_int_equal(window_add(w, p, &e), 0);
	assert_int_equal(w->n, 1);
	assert_int_equal(w->samples, 1);
	assert_int_equal(w->offcpu_samples, 3);
	assert_int_equal(w->procs[0].samples, 1);
	assert_int_equal(w->procs[0].offcpu_samples, 3);
	assert_int_equal(htab_count(w->procs[0].stacks), 1);
	assert_int_equal(w->procs[0].n_offcpu, 2);
	assert_int_equal(w->procs[0].offcpu_totals[0].count, 2);
	assert_int_equal(w->procs[0].offcpu_totals[0].ns, 12000000);
	assert_int_equal(w->procs[0].offcpu_totals[1].count, 1);
	assert_int_equal(w->procs[0].offcpu_totals[1].ns, 11000000);

	assert_int_equal(profile_series_labels(&env, p, &series), 0);
	assert_int_equal(profile_build_offcpu(&env, w, &w->procs[0], &series, &out, &exec, &err),
			 0);
	assert_int_equal(exec.n, 1);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
	msg = pprof_profile_msg(prof);
	assert_int_equal(msg->n_sample_type, 1);
	assert_string_equal(pprof_string(prof, msg->sample_type[0]->type), "wallclock");
	assert_string_equal(pprof_string(prof, msg->sample_type[0]->unit), "nanoseconds");
	assert_non_null(msg->period_type);
	assert_string_equal(pprof_string(prof, msg->period_type->type), "samples");
	assert_string_equal(pprof_string(prof, msg->period_type->unit), "count");
	assert_int_equal(msg->period, 1);
	assert_int_equal(msg->duration_nanos, 2000000000ll);
	assert_int_equal(msg->n_sample, 2);
	assert_int_equal(sum_for_leaf(prof, 0x401000, 0), 12000000);
	assert_int_equal(sum_for_leaf(prof, 0x403000, 0), 11000000);
	pprof_profile_free(prof);
	prof = NULL;

	/* The CPU profile of the same window has the CPU sample only. */
	buf_reset(&out);
	agent_exec_infos_free(&exec);
	assert_int_equal(profile_build(&env, w, &w->procs[0], &series, &out, &exec, &err), 0);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
	msg = pprof_profile_msg(prof);
	assert_int_equal(msg->n_sample_type, 2);
	assert_int_equal(msg->n_sample, 1);
	assert_int_equal(msg->sample[0]->value[0], 1);
	pprof_profile_free(prof);
	prof = NULL;

	/* The window layout: every process's waits, with their labels. */
	{
		const struct agent_labels *sl[1] = {&series};
		bool pid = false;

		buf_reset(&out);
		assert_int_equal(profile_build_offcpu_window(&env, w, sl, &out, &err), 0);
		assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
		msg = pprof_profile_msg(prof);
		assert_string_equal(pprof_string(prof, msg->sample_type[0]->type), "wallclock");
		assert_int_equal(msg->n_sample, 2);
		for (size_t j = 0; j < msg->sample[0]->n_label; j++)
			pid |=
			    strcmp(pprof_string(prof, msg->sample[0]->label[j]->key), "pid") == 0 &&
			    strcmp(pprof_string(prof, msg->sample[0]->label[j]->str), "42") == 0;
		assert_true(pid);
		pprof_profile_free(prof);
	}
	agent_exec_infos_free(&exec);
	buf_free(&out);
	labels_free(&series);
	labels_free(&host);
	window_free(w);
}

/* A process with off-CPU samples only has no CPU stacks: the agent builds
 * no CPU profile for it (agent.c checks the counts), and the off-CPU one
 * is whole. */
static void test_offcpu_only_process(void **state)
{
	struct proc_info *p = fake_proc(7);
	struct window *w = window_new(0, 1000000000ull, 0);
	struct profile_env env = {.frequency_hz = 19};
	struct pprof_profile *prof = NULL;
	struct kiln_error err = {0};
	struct sample_event e;
	struct buf out = {0};

	(void)state;
	event(&e, PROFILER_EVENT_OFFCPU, 0x401000, 3);
	assert_int_equal(window_add(w, p, &e), 0);
	assert_int_equal(w->samples, 0);
	assert_int_equal(w->procs[0].samples, 0);
	assert_int_equal(profile_build_offcpu(&env, w, &w->procs[0], NULL, &out, NULL, &err), 0);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
	assert_int_equal(pprof_profile_msg(prof)->n_sample, 1);
	assert_int_equal(pprof_profile_msg(prof)->sample[0]->value[0], 3);
	pprof_profile_free(prof);
	buf_free(&out);
	window_free(w);
}

static void test_offcpu_local_names(void **state)
{
	char dir[] = "/tmp/kiln-test-offcpu.XXXXXX", path[256];
	struct agent_labels none = {0};
	struct agent_profile p[2] = {
	    {.pid = 42,
	     .comm = "app",
	     .labels = &none,
	     .pprof = (const uint8_t *)"cpu",
	     .pprof_len = 3},
	    {.pid = 42,
	     .comm = "app",
	     .labels = &none,
	     .pprof = (const uint8_t *)"off",
	     .pprof_len = 3,
	     .kind = AGENT_PROFILE_OFFCPU},
	};
	struct agent_sink *sink = NULL;
	struct kiln_error err = {0};
	struct stat st;

	(void)state;
	p[0].time_ns = p[1].time_ns = 1763883000ll * 1000000000ll; /* 2025-11-23T07:30:00Z */
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sink_local_new(dir, true, &sink, &err), 0);
	assert_int_equal(sink->write_window(sink, p, 2, &err), 2);
	assert_int_equal(sink->write_window(sink, &p[1], 1, &err), 1);
	sink->close(sink);
	snprintf(path, sizeof(path), "%s/20251123T073000Z_42_app.pb.gz", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/20251123T073000Z_42_app.offcpu.pb.gz", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/20251123T073000Z_42_app_2.offcpu.pb.gz", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(unlink(path), 0);

	/* The window layout: TIME.offcpu.pb.gz beside TIME.pb.gz. */
	assert_int_equal(sink_local_new(dir, false, &sink, &err), 0);
	assert_int_equal(sink->write_window(sink, p, 2, &err), 2);
	sink->close(sink);
	snprintf(path, sizeof(path), "%s/20251123T073000Z.pb.gz", dir);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/20251123T073000Z.offcpu.pb.gz", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_offcpu_kallsyms_match(void **state)
{
	static const struct {
		const char *line;
		int rc;
		const char *name;
	} cases[] = {
	    {"ffffffff813a2380 t finish_task_switch.isra.0\n", 1, "finish_task_switch.isra.0"},
	    {"ffffffff813a2380 T finish_task_switch\n", 1, "finish_task_switch"},
	    {"0000000000000000 t finish_task_switch.constprop.0", 1,
	     "finish_task_switch.constprop.0"},
	    {"ffffffff813a2370 t __pfx_finish_task_switch.isra.0\n", 0, NULL},
	    {"ffffffff813a2380 t finish_task_switch_hook\n", 0, NULL},
	    {"ffffffffc0a01000 t finish_task_switch\t[some_module]\n", 0, NULL},
	    {"ffffffff81000000 D finish_task_switch\n", 0, NULL},
	    {"ffffffff813a2380 t finish_task_switch.\n", -EINVAL, NULL},
	    {"not a kallsyms line\n", -EINVAL, NULL},
	    {"ffffffff813a2380 t \n", -EINVAL, NULL},
	    {"ffffffff813a2380\n", -EINVAL, NULL},
	    {"", -EINVAL, NULL},
	};
	char name[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc =
		    offcpu_kallsyms_match(cases[i].line, strlen(cases[i].line), name, sizeof(name));

		if (rc != cases[i].rc)
			fail_msg("\"%s\": %d, expected %d", cases[i].line, rc, cases[i].rc);
		if (rc == 1)
			assert_string_equal(name, cases[i].name);
	}
	/* A name longer than the buffer is an error, not a cut name. */
	assert_int_equal(
	    offcpu_kallsyms_match("ffffffff813a2380 t finish_task_switch.isra.0", 44, name, 10),
	    -ENAMETOOLONG);
}

static void test_offcpu_find_resume_symbol(void **state)
{
	char path[] = "/tmp/kiln-test-kallsyms.XXXXXX", name[64];
	struct kiln_error err = {0};
	int fd = mkstemp(path);
	const char *text = "ffffffff81000000 T _text\n"
			   "ffffffff813a2370 t __pfx_finish_task_switch.isra.0\n"
			   "ffffffff813a2380 t finish_task_switch.isra.0\n"
			   "ffffffffc0a01000 t helper\t[mod]\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(offcpu_find_resume_symbol(path, name, sizeof(name), &err), 0);
	assert_string_equal(name, "finish_task_switch.isra.0");
	/* No such symbol: ENOENT, saying what was looked for. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, text, 25), 25);
	close(fd);
	assert_int_equal(offcpu_find_resume_symbol(path, name, sizeof(name), &err), -ENOENT);
	assert_non_null(strstr(err.msg, "finish_task_switch"));
	/* Garbage: EINVAL naming the line. */
	kiln_error_clear(&err);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "garbage\n", 8), 8);
	close(fd);
	assert_int_equal(offcpu_find_resume_symbol(path, name, sizeof(name), &err), -EINVAL);
	assert_non_null(strstr(err.msg, ":1:"));
	unlink(path);
	assert_int_equal(offcpu_find_resume_symbol(path, name, sizeof(name), &err), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_offcpu_window_and_profile),
	    cmocka_unit_test(test_offcpu_only_process),
	    cmocka_unit_test(test_offcpu_local_names),
	    cmocka_unit_test(test_offcpu_kallsyms_match),
	    cmocka_unit_test(test_offcpu_find_resume_symbol),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
