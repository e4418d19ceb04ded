/* Test program for tests/integration/symbols_agent_e2e.sh: known functions
 * whose frames must come back from the server named, with file and line.
 * inlined_mix is always inlined into outer_function (one location, two
 * lines); lib_spin (a C++ function behind it) lives in libkspin.so. VARIANT only makes each build's GNU
 * build ID differ. Runs for argv[1] seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT "plain"
#endif

double lib_spin(long n);
volatile unsigned long sink;
const char *variant = VARIANT;

/* Called last so that outer_function is no leaf and keeps a frame pointer
 * (gcc sets up none in leaf functions), so its caller shows in stacks. */
__attribute__((noinline)) void publish(unsigned long v)
{
	sink = v;
	__asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) unsigned long inlined_mix(unsigned long x)
{
	/* BEGIN inlined_mix */
	for (int i = 0; i < 64; i++)
		x = (x * 6364136223846793005ul + 1442695040888963407ul) ^ (x >> 17);
	return x;
	/* END inlined_mix */
}

__attribute__((noinline)) unsigned long outer_function(unsigned long n)
{
	/* BEGIN outer_function */
	unsigned long acc = 0;

	for (unsigned long i = 0; i < n; i++)
		acc += inlined_mix(i ^ acc);
	publish(acc);
	return acc;
	/* END outer_function */
}

int main(int argc, char **argv)
{
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 1);

	/* BEGIN main */
	while (time(NULL) < end) {
		outer_function(20000);
		lib_spin(200000);
	}
	/* END main */
	printf("%s %lu\n", variant, sink);
	return 0;
}
