/*
 * test_worker.c — the long-lived worker thread (common/worker.h): jobs run
 * on the worker's thread one after another, worker_wait returns only once
 * the job has, a job may change how long the thread spins after it, and
 * worker_free stops a thread that sleeps or spins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/worker.h"

struct job {
	struct worker *w;
	pthread_t ran_on;
	atomic_int runs;
	unsigned spin_after_us; /* set from inside the job when non-zero */
	unsigned sleep_us;	/* how long the job takes */
};

static void sleep_us(unsigned us)
{
	struct timespec t = {us / 1000000, (long)(us % 1000000) * 1000};

	nanosleep(&t, NULL);
}

static void run_job(void *arg)
{
	struct job *j = arg;

	j->ran_on = pthread_self();
	sleep_us(j->sleep_us);
	if (j->spin_after_us)
		worker_spin_after(j->w, j->spin_after_us);
	atomic_fetch_add(&j->runs, 1);
}

static void test_jobs_run_on_the_worker(void **state)
{
	struct worker *w = worker_new();
	struct job j = {.w = w, .sleep_us = 20000};

	(void)state;
	assert_non_null(w);
	atomic_init(&j.runs, 0);
	/* A job that takes a while: worker_wait returns after it. */
	worker_run(w, run_job, &j, 0);
	worker_wait(w);
	assert_int_equal(atomic_load(&j.runs), 1);
	assert_false(pthread_equal(j.ran_on, pthread_self()));
	/* One after another on the same thread, sleeping and spinning
	 * between them (spin after worker_run's word, or the job's). */
	for (int i = 0; i < 50; i++) {
		pthread_t first = j.ran_on;

		j.sleep_us = (unsigned)(i % 3) * 100;
		j.spin_after_us = i % 2 ? 2000 : 0;
		worker_run(w, run_job, &j, i % 4 ? 0 : 5000);
		worker_wait(w);
		assert_int_equal(atomic_load(&j.runs), 2 + i);
		assert_true(pthread_equal(j.ran_on, first));
		if (i % 5 == 0)
			sleep_us(3000); /* the thread goes to sleep meanwhile */
	}
	/* Waiting again for a job already waited for returns at once. */
	worker_wait(w);
	worker_free(w);
}

static void test_free_while_spinning_or_busy(void **state)
{
	struct worker *w = worker_new();
	struct job j = {.w = w, .sleep_us = 10000};

	(void)state;
	assert_non_null(w);
	atomic_init(&j.runs, 0);
	/* Freed while the job runs: it finishes first. */
	worker_run(w, run_job, &j, 1000000);
	worker_free(w);
	assert_int_equal(atomic_load(&j.runs), 1);
	/* Freed while it spins for a next job (for up to a second): the
	 * spinning thread sees the stop. */
	w = worker_new();
	assert_non_null(w);
	j.w = w;
	j.sleep_us = 0;
	worker_run(w, run_job, &j, 1000000);
	worker_wait(w);
	worker_free(w);
	assert_int_equal(atomic_load(&j.runs), 2);
	worker_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jobs_run_on_the_worker),
	    cmocka_unit_test(test_free_while_spinning_or_busy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
