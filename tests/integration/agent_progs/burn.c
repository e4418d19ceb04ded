/*
 * burn.c — a CPU burner with a known profile, for the agent's tests.
 *
 * Usage: burn SECONDS [THREADS]. Each thread runs burn_caller() until it has
 * used SECONDS of CPU time; burn_caller calls burn_two (twice the loop
 * iterations) and burn_one (the iterations), alternating in slices of about
 * a millisecond, so a correct profile shows burn_two : burn_one = 2 : 1,
 * both under burn_caller. The work is fixed per call, not per wall-clock
 * second, so the ratio holds however loaded the machine is; and each thread
 * also measures the CPU time it spent in each function (its own thread CPU
 * clock around every call), so that a test can compare the samples with
 * what the functions really used rather than with the nominal 2:1.
 *
 * Prints one line at exit: the process's CPU seconds, then the CPU seconds
 * spent in burn_two and in burn_one (summed over threads).
 *
 * burn SECONDS 1 FORKS (FORKS > 0) instead forks FORKS children one after
 * another, without exec, each burning SECONDS on one thread before it
 * exits: the shape of a shell's subshells or a forking server's workers.
 * It prints "forked PID" for each, then the line above for itself.
 *
 * Built with -O0 -fno-omit-frame-pointer: gcc 12 gives leaf functions no
 * frame at -O1 even with -fno-omit-frame-pointer, which would hide
 * burn_caller from a frame-pointer unwinder.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNIT 200000

/* -DVARIANT=N builds a copy with a different build ID. */
#ifndef VARIANT
#define VARIANT 0
#endif

static volatile unsigned long sink = VARIANT;

static double cpu_seconds(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void burn_two(unsigned long n)
{
	unsigned long x = sink;

	for (unsigned long i = 0; i < 2 * n; i++)
		x = x * 6364136223846793005ul + i;
	sink = x;
}

__attribute__((noinline)) void burn_one(unsigned long n)
{
	unsigned long x = sink;

	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005ul + i;
	sink = x;
}

struct thread_arg {
	unsigned seed;
	double two, one; /* CPU seconds measured in each function */
};

/* The amount of work varies from call to call so that the workload has no
 * period for the sampling clock to alias with; the 2:1 ratio holds for
 * every call. */
__attribute__((noinline)) void burn_caller(struct thread_arg *t)
{
	unsigned long n = UNIT / 2 + (unsigned long)rand_r(&t->seed) % UNIT;
	double t0, t1, t2;

	t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
	burn_two(n);
	t1 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
	burn_one(n);
	t2 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
	t->two += t1 - t0;
	t->one += t2 - t1;
}

static double target;

static void *thread_main(void *arg)
{
	struct thread_arg *t = arg;

	while (cpu_seconds(CLOCK_THREAD_CPUTIME_ID) < target)
		burn_caller(t);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	struct thread_arg args[64] = {{0}};
	pthread_t tids[64];
	double two = 0, one = 0;

	int forks = argc > 3 ? atoi(argv[3]) : 0;

	target = argc > 1 ? atof(argv[1]) : 3.0;
	if (threads < 1 || threads > 64)
		threads = 1;
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			args[0].seed = (unsigned)i + 1;
			target += cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
			thread_main(&args[0]);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, NULL, 0) != pid)
			return 1;
		printf("forked %d\n", (int)pid);
	}
	if (forks > 0) {
		printf("%.3f 0 0\n", cpu_seconds(CLOCK_PROCESS_CPUTIME_ID));
		return 0;
	}
	for (int i = 0; i < threads; i++)
		args[i].seed = (unsigned)i + 1;
	for (int i = 1; i < threads; i++)
		pthread_create(&tids[i], NULL, thread_main, &args[i]);
	thread_main(&args[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(tids[i], NULL);
	for (int i = 0; i < threads; i++) {
		two += args[i].two;
		one += args[i].one;
	}
	printf("%.3f %.3f %.3f\n", cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), two, one);
	return 0;
}
