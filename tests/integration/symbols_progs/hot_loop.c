/* Test program for tests/integration/symbols_debuginfod*.sh: hot_loop (not
 * inlined) with mix inlined into it, so a symbolized address has a function,
 * an inlined frame and a line. VARIANT only makes builds differ. */
#include <stdio.h>

#ifndef VARIANT
#define VARIANT ""
#endif

volatile long sink;
static inline __attribute__((always_inline)) long mix(long x)
{
	sink += x * 7;
	return sink ^ x;
}
__attribute__((noinline)) long hot_loop(long n)
{
	long acc = 0;
	for (long i = 0; i < n; i++)
		acc += mix(i + acc);
	return acc;
}
int main(int argc, char **argv)
{
	printf("%s%ld\n", VARIANT, hot_loop(argc * 1000));
	return 0;
}
