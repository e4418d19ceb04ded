/*
 * frames.c — C code for test_cfi.c with the frame shapes unwind tables must
 * describe: a small frame, a frame of several kilobytes, an alloca frame
 * (rbp-based CFA even under -fomit-frame-pointer), and a function that
 * keeps so many values across its call that it spills rbp as an ordinary
 * callee-saved register. They call each other in a cycle, so a recursion
 * of depth n passes through every shape.
 *
 * Built at test time several ways (see test_cfi.c): as a program (with
 * FRAMES_MAIN) with and without frame pointers and with its CFI only in
 * .debug_frame, and as a shared object without frame pointers that the
 * test loads, so that its own stack passes through these frames.
 */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*frames_callback)(void *arg);

int frames_small(int n, frames_callback cb, void *arg);
int frames_large(int n, frames_callback cb, void *arg);
int frames_alloca(int n, frames_callback cb, void *arg);
int frames_pressure(int n, frames_callback cb, void *arg);

/* One level of the cycle: n == 0 ends it in cb(arg). */
static int frames_next(int n, frames_callback cb, void *arg)
{
	switch (n % 4) {
	case 0:
		return n ? frames_small(n - 1, cb, arg) : cb(arg);
	case 1:
		return frames_large(n - 1, cb, arg);
	case 2:
		return frames_alloca(n - 1, cb, arg);
	default:
		return frames_pressure(n - 1, cb, arg);
	}
}

__attribute__((noinline)) int frames_small(int n, frames_callback cb, void *arg)
{
	volatile int buf[6];
	int r;

	buf[0] = n;
	r = frames_next(n, cb, arg);
	buf[1] = r;
	return buf[0] + buf[1];
}

__attribute__((noinline)) int frames_large(int n, frames_callback cb, void *arg)
{
	volatile char buf[5000];
	int r;

	buf[0] = (char)n;
	buf[4999] = 1;
	r = frames_next(n, cb, arg);
	buf[2500] = (char)r;
	return r + buf[0] + buf[4999];
}

__attribute__((noinline)) int frames_alloca(int n, frames_callback cb, void *arg)
{
	volatile char *buf = alloca(16 + (size_t)(n % 5) * 24);
	int r;

	buf[0] = (char)n;
	r = frames_next(n, cb, arg);
	buf[1] = (char)r;
	return r + buf[0];
}

__attribute__((noinline)) int frames_pressure(int n, frames_callback cb, void *arg)
{
	volatile long seed = n;
	long a = seed * 3, b = seed * 5, c = seed * 7, d = seed * 11, e = seed * 13, f = seed * 17;
	int r = frames_next(n, cb, arg);

	return (int)(r + a * b + c * d + e * f + (a ^ c) + (b ^ d) + (e ^ f));
}

static int frames_compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Sorts a small array with qsort and returns its median. */
int frames_sort(int n)
{
	int v[64];

	for (int i = 0; i < 64; i++)
		v[i] = (i * 37 + n) % 64;
	qsort(v, 64, sizeof(v[0]), frames_compare);
	return v[32];
}

#ifdef FRAMES_MAIN
static int frames_print(void *arg)
{
	return printf("%d\n", frames_sort(*(int *)arg));
}

int main(int argc, char **argv)
{
	int n = argc + 16;

	return frames_small(n, frames_print, &n) > 0 ? 0 : 1;
}
#endif
