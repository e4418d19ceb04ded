/* unwind_cxx: C++ with exceptions, built -O2 -fomit-frame-pointer: a hot
 * std::sort with a lambda comparator, and throws that unwind through three
 * frames (libgcc and libstdc++ walk .eh_frame too, so the agent's tables
 * must agree with what the program itself relies on). */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

static volatile unsigned sink;

__attribute__((noinline)) static unsigned mix(unsigned x)
{
	for (int i = 0; i < 16; i++)
		x = x * 2654435761u + 1;
	return x;
}

__attribute__((noinline)) static void sort_values(std::vector<unsigned> &v)
{
	std::sort(v.begin(), v.end(), [](unsigned a, unsigned b) { return mix(a) < mix(b); });
}

__attribute__((noinline)) static void thrower(int n)
{
	if (n % 7 == 0)
		throw std::runtime_error("seven");
	sink = sink + n;
}

__attribute__((noinline)) static void middle(int n)
{
	std::vector<int> keep(8, n); /* a destructor on the unwind path */
	thrower(n);
	sink = sink + keep[0];
}

__attribute__((noinline)) static void catcher(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		try {
			middle(i);
		} catch (const std::exception &e) {
			sink = sink + e.what()[0];
		}
	}
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	auto t0 = std::chrono::steady_clock::now();
	std::vector<unsigned> v(50000);
	while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs) {
		for (auto &x : v)
			x = (unsigned)rand();
		sort_values(v);
		catcher(2000);
	}
	printf("%u\n", sink);
	return 0;
}
