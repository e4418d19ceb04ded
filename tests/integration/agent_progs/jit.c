/*
 * jit.c — spends CPU in code it wrote into anonymous memory, the way a JIT
 * does, for the agent's test of how it names such mappings.
 *
 * Usage: jit SECONDS. Maps an anonymous executable page, writes an x86-64
 * countdown loop into it and calls it until SECONDS of wall time have
 * passed. Exits 2 when the page cannot be mapped (e.g. a W^X policy).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv)
{
	/* mov rcx, 10000000; 1: dec rcx; jnz 1b; ret */
	static const uint8_t code[] = {0x48, 0xb9, 0x80, 0x96, 0x98, 0x00, 0x00, 0x00,
				       0x00, 0x00, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
	double seconds = argc > 1 ? atof(argv[1]) : 2;
	struct timespec t0, t;
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED)
		return 2;
	memcpy(page, code, sizeof(code));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		((void (*)(void))page)();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return 0;
}
