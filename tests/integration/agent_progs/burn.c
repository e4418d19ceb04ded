/*
 * burn.c — a CPU burner with a known profile, for the agent's tests.
 *
 * Usage: burn SECONDS [THREADS]. Each thread runs burn_caller() until the
 * process has used SECONDS of CPU time per thread; burn_caller calls
 * burn_two (twice the work) and burn_one (the work), so a correct profile
 * shows burn_two : burn_one = 2 : 1, both under burn_caller. Prints the
 * process's total CPU seconds at exit. Built with -O0 -fno-omit-frame-pointer:
 * gcc 12 gives leaf functions no frame at -O1 even with
 * -fno-omit-frame-pointer, which would hide burn_caller from a frame-pointer
 * unwinder.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 200000

static volatile unsigned long sink;

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

/* The amount of work varies from call to call so that the workload has no
 * period for the sampling clock to alias with; the 2:1 ratio holds for
 * every call. */
__attribute__((noinline)) void burn_caller(unsigned *seed)
{
	unsigned long n = UNIT / 2 + (unsigned long)rand_r(seed) % UNIT;

	burn_two(n);
	burn_one(n);
}

static double target;

static void *thread_main(void *arg)
{
	unsigned seed = (unsigned)(unsigned long)arg;

	while (cpu_seconds(CLOCK_THREAD_CPUTIME_ID) < target)
		burn_caller(&seed);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tids[64];

	target = argc > 1 ? atof(argv[1]) : 3.0;
	if (threads < 1 || threads > 64)
		threads = 1;
	for (int i = 1; i < threads; i++)
		pthread_create(&tids[i], NULL, thread_main, (void *)(unsigned long)(i + 1));
	thread_main((void *)1ul);
	for (int i = 1; i < threads; i++)
		pthread_join(tids[i], NULL);
	printf("%.3f\n", cpu_seconds(CLOCK_PROCESS_CPUTIME_ID));
	return 0;
}
