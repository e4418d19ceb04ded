/*
 * test_push_window.c — the push sink's window capture (push_window.c) and
 * its stream encoding (sink_stream.c): frames resolved as profile.c does,
 * one hash per stack content whatever the thread, a second window of the
 * same stacks describes none of them again, and the WriteRaw fallback
 * gives the same samples and mappings as the agent's own pprof.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "agent/push_window.h"
#include "agent/sink_stream.h"
#include "common/arena.h"
#include "common/ingest_proto.h"
#include "pprof/pprof.h"

#include <stdlib.h>
#include <string.h>

struct fixture {
	struct proc_info *p;
	struct window *w;
	struct agent_labels host;
	struct profile_env env;
};

static void add(struct window *w, struct proc_info *p, uint32_t tid, const char *comm,
		uint64_t leaf, int times)
{
	struct sample_event e;

	memset(&e, 0, sizeof(e));
	e.kind = PROFILER_EVENT_SAMPLE;
	e.pid = p->pid;
	e.tid = tid;
	strcpy(e.thread_comm, comm);
	e.n_user = 2;
	e.frames[0] = leaf;
	e.frames[1] = 0x402000;
	for (int i = 0; i < times; i++)
		assert_int_equal(window_add(w, p, &e), 0);
}

static struct window *new_window(struct proc_info *p)
{
	struct window *w = window_new(1000, 1000 + 10000000000ull, 1700000000000000000ll);

	assert_non_null(w);
	add(w, p, 43, "worker", 0x401000, 3);
	add(w, p, 44, "other", 0x401000, 2); /* the same stack, another thread */
	add(w, p, 43, "worker", 0x403000, 1);
	return w;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct proc_info *p = calloc(1, sizeof(*p));

	p->pid = 42;
	strcpy(p->comm, "app");
	p->executable = strdup("/usr/bin/app");
	p->maps.v = calloc(1, sizeof(*p->maps.v));
	p->maps.v[0] = (struct proc_mapping){.start = 0x400000,
					     .limit = 0x500000,
					     .offset = 0x1000,
					     .exec = true,
					     .path = strdup("/usr/bin/app"),
					     .build_id = strdup("abcd"),
					     .elf_type = 3,
					     .has_load = true,
					     .load_offset = 0x1000,
					     .load_vaddr = 0x1000};
	p->maps.n = p->maps.cap = 1;
	labels_set(&p->labels, "pid", "42");
	labels_set(&p->labels, "comm", "app");
	labels_set(&f->host, "node", "n1");
	f->env = (struct profile_env){.frequency_hz = 19, .host_labels = &f->host};
	assert_int_equal(profile_series_labels(&f->env, p, &p->series), 0);
	p->series_ok = true;
	f->p = p;
	f->w = new_window(p);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	window_free(f->w);
	labels_free(&f->host);
	*state = NULL;
	free(f);
	return 0;
}

static void test_capture_resolves_and_hashes(void **state)
{
	struct fixture *f = *state;
	struct push_window *pw = NULL;
	const struct push_sample *s[3];
	const struct push_proc *pr;

	assert_int_equal(push_window_capture(&f->env, f->w, &pw), 0);
	assert_int_equal(pw->n_procs, 1);
	pr = &pw->procs[0];
	assert_int_equal(pr->pid, 42);
	assert_int_equal(pr->kind, AGENT_PROFILE_CPU);
	assert_int_equal(pr->n_samples, 3);
	assert_int_equal(pr->n_mappings, 1); /* the executable's, used by every frame */
	assert_string_equal(push_str(pw, pw->mappings[0].filename), "/usr/bin/app");
	assert_string_equal(push_str(pw, pw->mappings[0].build_id), "abcd");
	assert_int_equal(pw->mappings[0].load_offset, 0x1000);
	assert_int_equal(pr->n_labels, 3);
	assert_int_equal(pw->time_ns, 1700000000000000000ll);
	assert_int_equal(pw->period_ns, 1000000000 / 19);
	for (int i = 0; i < 3; i++)
		s[i] = &pw->samples[pr->first_sample + (uint32_t)i];
	for (int i = 0; i < 3; i++) {
		const struct push_frame *fr = &pw->frames[s[i]->first_frame];

		assert_int_equal(s[i]->n_frames, 2);
		assert_int_equal(fr[0].mapping, 1);
		/* The leaf is exact; the caller is looked up inside its call. */
		assert_true(fr[0].addr == 0x401000 || fr[0].addr == 0x403000);
		assert_int_equal(fr[1].addr, 0x402000 - 1);
		assert_int_equal(s[i]->values[1], s[i]->values[0] * pw->period_ns);
	}
	/* Two threads of one stack: one hash; another stack: another. */
	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++) {
			bool same_stack = pw->frames[s[i]->first_frame].addr ==
					  pw->frames[s[j]->first_frame].addr;

			assert_int_equal(memcmp(&s[i]->stack, &s[j]->stack, sizeof(s[i]->stack)) ==
					     0,
					 same_stack);
		}
	push_window_free(pw);
}

/* Decodes req; returns its one window's StackDefs count and row count. */
static void decode(const struct buf *req, size_t *n_stack_defs, size_t *n_rows, size_t *n_series)
{
	struct arena *a = arena_new(4096);
	struct kiln_error err = {0};
	struct ingest_push push;

	assert_int_equal(ingest_push_decode(req->data, req->len, a, &push, &err), 0);
	assert_int_equal(push.n_windows, 1);
	*n_stack_defs = push.windows[0].n_stacks;
	*n_series = push.windows[0].n_series;
	*n_rows = 0;
	for (size_t i = 0; i < push.windows[0].n_rows; i++) {
		const struct ingest_series_rows *r = &push.windows[0].rows[i];
		const uint8_t *p = r->rows;
		uint64_t ref = 0;
		int64_t v;

		while (ingest_rows_next(&p, r->rows + r->len, &ref, &v) == 1)
			(*n_rows)++;
	}
	arena_free(a);
}

static void test_second_window_describes_nothing(void **state)
{
	struct fixture *f = *state;
	struct stream_client *sc = stream_client_new();
	struct push_window *pw = NULL, *pw2 = NULL;
	struct window *w2 = new_window(f->p);
	struct buf req = {0}, req2 = {0};
	size_t rows, rows2, defs, defs2, series, series2, n;

	assert_non_null(sc);
	assert_int_equal(push_window_capture(&f->env, f->w, &pw), 0);
	assert_int_equal(stream_client_encode_window(sc, pw, 1, &req, &n), 0);
	assert_int_equal(n, 6); /* 3 (thread, stack) rows in each of 2 series */
	decode(&req, &defs, &rows, &series);
	assert_int_equal(defs, 1);
	assert_int_equal(series, 2);
	assert_int_equal(rows, 6);

	assert_int_equal(push_window_capture(&f->env, w2, &pw2), 0);
	assert_int_equal(stream_client_encode_window(sc, pw2, 2, &req2, &n), 0);
	decode(&req2, &defs2, &rows2, &series2);
	assert_int_equal(defs2, 0);
	assert_int_equal(series2, 0);
	assert_int_equal(rows2, 6);
	assert_true(req2.len < req.len / 4);

	/* A new session describes everything again. */
	stream_client_reset(sc);
	assert_int_equal(stream_client_encode_window(sc, pw2, 2, &req2, &n), 0);
	decode(&req2, &defs2, &rows2, &series2);
	assert_int_equal(defs2, 1);
	assert_int_equal(series2, 2);
	window_free(w2);
	push_window_free(pw);
	push_window_free(pw2);
	buf_free(&req);
	buf_free(&req2);
	stream_client_free(sc);
}

static void test_writeraw_fallback_matches_profile(void **state)
{
	struct fixture *f = *state;
	struct push_window *pw = NULL;
	struct agent_profile *profiles;
	struct agent_exec_infos *execs, exec = {0};
	struct agent_labels *labels;
	struct buf *bufs, own = {0};
	struct pprof_profile *a = NULL, *b = NULL;
	struct kiln_error err = {0};
	const pprof_msg *ma, *mb;
	int64_t sa = 0, sb = 0;

	assert_int_equal(push_window_capture(&f->env, f->w, &pw), 0);
	assert_int_equal(push_window_profiles(pw, &profiles, &bufs, &execs, &labels), 0);
	assert_int_equal(profile_build(&f->env, f->w, &f->w->procs[0], NULL, &own, &exec, &err), 0);
	assert_int_equal(profiles[0].pid, 42);
	assert_string_equal(labels_get(profiles[0].labels, "node"), "n1");
	assert_int_equal(profiles[0].n_exec_info, exec.n);
	assert_int_equal(profiles[0].exec_info[0].load_vaddr, exec.v[0].load_vaddr);
	assert_int_equal(pprof_decode(profiles[0].pprof, profiles[0].pprof_len, NULL, &a, &err), 0);
	assert_int_equal(pprof_decode(own.data, own.len, NULL, &b, &err), 0);
	ma = pprof_profile_msg(a);
	mb = pprof_profile_msg(b);
	assert_int_equal(ma->n_sample, mb->n_sample);
	assert_int_equal(ma->n_mapping, mb->n_mapping);
	assert_int_equal(ma->n_location, mb->n_location);
	assert_int_equal(ma->period, mb->period);
	assert_int_equal(ma->time_nanos, mb->time_nanos);
	for (size_t i = 0; i < ma->n_sample; i++) {
		sa += ma->sample[i]->value[1];
		sb += mb->sample[i]->value[1];
		assert_int_equal(ma->sample[i]->n_label, 2); /* thread_id, thread_name */
	}
	assert_int_equal(sa, sb);
	pprof_profile_free(a);
	pprof_profile_free(b);
	buf_free(&own);
	agent_exec_infos_free(&exec);
	push_window_profiles_free(pw, profiles, bufs, execs, labels);
	push_window_free(pw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_capture_resolves_and_hashes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_window_describes_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_writeraw_fallback_matches_profile, setup,
					    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
