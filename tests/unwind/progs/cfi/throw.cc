// throw.cc — a C++ program for test_cfi.c whose exception crosses three
// frames (level3 throws, level2 and level1 have objects to destroy on the
// way, main catches), built with -O2 -fomit-frame-pointer: its .eh_frame
// holds personality and LSDA pointers and landing pads.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

__attribute__((noinline)) static int level3(int n)
{
	if (n > 2)
		throw std::runtime_error("thrown at depth " + std::to_string(n));
	return n;
}

__attribute__((noinline)) static int level2(int n)
{
	std::string s(static_cast<size_t>(n) * 40, 'x');
	return level3(n + 1) + static_cast<int>(s.size());
}

__attribute__((noinline)) static int level1(int n)
{
	std::vector<int> v(static_cast<size_t>(n) * 100, n);
	return level2(n + 1) + static_cast<int>(v.size());
}

int main(int argc, char **)
{
	try {
		return level1(argc);
	} catch (const std::exception &e) {
		std::printf("caught: %s\n", e.what());
		return 0;
	}
}
