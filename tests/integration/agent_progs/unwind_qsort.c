/* unwind_qsort: hot paths reached through libc without frame pointers:
 * a qsort comparator (called from glibc's msort) and memcpy/memmove
 * loops. agent_unwind builds it with and without frame pointers. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
static volatile unsigned sink;
__attribute__((noinline)) int cmp_ints(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	for (int i = 0; i < 20; i++) {
		x = x * 2654435761u + 1;
		y = y * 2654435761u + 1;
	}
	sink = x ^ y;
	return (*(const unsigned *)a > *(const unsigned *)b) -
	       (*(const unsigned *)a < *(const unsigned *)b);
}
__attribute__((noinline)) void sort_round(unsigned *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (unsigned)rand();
	qsort(v, n, sizeof(*v), cmp_ints);
}
__attribute__((noinline)) void copy_round(char *a, char *b, size_t n)
{
	for (int i = 0; i < 50; i++) {
		memcpy(b, a, n);
		memmove(a + 1, b, n - 1);
	}
}
int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5;
	static unsigned v[100000];
	static char a[1 << 20], b[1 << 20];
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		sort_round(v, 100000);
		copy_round(a, b, sizeof(a));
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("%u\n", sink);
	return 0;
}
