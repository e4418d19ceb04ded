/* libkspin.so for tests/integration/symbols_agent_e2e.sh. */
volatile double lib_sink;

/* Keeps lib_spin from being a leaf (see publish in prog.c). */
__attribute__((noinline)) void lib_publish(double v)
{
	lib_sink = v;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) double lib_spin(long n)
{
	/* BEGIN lib_spin */
	double acc = 0;

	for (long i = 1; i <= n; i++)
		acc += (double)i / (double)(i + 1);
	lib_publish(acc);
	return acc;
	/* END lib_spin */
}
