/*
 * symburn.c — CPU in known places, for `kilnctl pprof symbolize`'s test.
 *
 * Usage: symburn SECONDS. Until the process has used SECONDS of CPU time,
 * main calls, in turn:
 *   - spin_outer, a loop whose body is mix(), inlined (always_inline, so
 *     also at -O0: DWARF describes it as an inlined subroutine);
 *   - sort_round, which qsorts an array of ints: libc's msort_with_tmp
 *     (a static function, named only by libc's separate debug file) and
 *     cmp_ints, called back from it;
 *   - copy_round, which memcpys a large buffer: libc's memmove variant
 *     for this CPU (a local symbol, also only in the debug file).
 *
 * Built with -O0 -g -fno-omit-frame-pointer like the agent's other test
 * programs; -DVARIANT=N gives a copy with another build ID.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 0
#endif

#define N_INTS	   4096
#define COPY_BYTES (8 << 20)

static volatile unsigned long sink = VARIANT;
static int ints[N_INTS];
static char *copy_from, *copy_to;

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x, unsigned long i)
{
	return x * 6364136223846793005ul + i;
}

__attribute__((noinline)) void spin_outer(unsigned long n)
{
	unsigned long x = sink;

	for (unsigned long i = 0; i < n; i++)
		x = mix(x, i);
	sink = x;
}

__attribute__((noinline)) int cmp_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

__attribute__((noinline)) void sort_round(unsigned *seed)
{
	for (int i = 0; i < N_INTS; i++)
		ints[i] = rand_r(seed);
	qsort(ints, N_INTS, sizeof(ints[0]), cmp_ints);
	sink += (unsigned long)ints[0];
}

__attribute__((noinline)) void copy_round(void)
{
	memcpy(copy_to, copy_from, COPY_BYTES);
	sink += (unsigned long)copy_to[sink % COPY_BYTES];
}

int main(int argc, char **argv)
{
	double until = argc > 1 ? atof(argv[1]) : 3.0;
	unsigned seed = 1;

	copy_from = calloc(1, COPY_BYTES);
	copy_to = calloc(1, COPY_BYTES);
	if (!copy_from || !copy_to)
		return 1;
	while (cpu_seconds() < until) {
		spin_outer(2000000);
		for (int i = 0; i < 8; i++)
			sort_round(&seed);
		for (int i = 0; i < 8; i++)
			copy_round();
	}
	free(copy_from);
	free(copy_to);
	return 0;
}
