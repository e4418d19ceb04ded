// libkspin.so for tests/integration/symbols_agent_e2e.sh: C++, so that its
// frame must come back demangled ("kspin::Spinner::run(long)"), the
// mangled name kept as the function's system name.
namespace kspin {

volatile double lib_sink;

// Keeps run() from being a leaf (see publish in prog.c).
__attribute__((noinline)) void lib_publish(double v)
{
	lib_sink = v;
	__asm__ volatile("" ::: "memory");
}

struct Spinner {
	static double run(long n);
};

__attribute__((noinline)) double Spinner::run(long n)
{
	/* BEGIN kspin::Spinner::run */
	double acc = 0;

	for (long i = 1; i <= n; i++)
		acc += (double)i / (double)(i + 1);
	lib_publish(acc);
	return acc;
	/* END kspin::Spinner::run */
}

} // namespace kspin

extern "C" double lib_spin(long n)
{
	return kspin::Spinner::run(n);
}
