/*
 * test_arena_huge.c — arenas in huge pages (arena_new_huge): small and big
 * allocations, alignment, zeroing, contents kept across new chunks; big
 * blocks that share their chunk (arena_alloc_shared).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/arena.h"

static void test_huge_arena(void **state)
{
	struct arena *a = arena_new_huge();
	unsigned char *small[4096], *big[6];
	size_t big_size[6] = {600 << 10, 2 << 20, (2 << 20) + 1, 5 << 20, 1, 3 << 20};

	(void)state;
	assert_non_null(a);
	/* Small blocks (more than one 2 MiB chunk of them) and big ones
	 * (chunks of their own) in between. */
	for (size_t i = 0; i < 4096; i++) {
		size_t n = 1 + i % 1000;

		small[i] = arena_alloc(a, n);
		assert_non_null(small[i]);
		assert_int_equal((uintptr_t)small[i] % 16, 0);
		memset(small[i], (int)(i & 0xff), n);
		if (i % 700 == 0) {
			size_t k = i / 700;

			big[k] = arena_calloc(a, 1, big_size[k]);
			assert_non_null(big[k]);
			assert_int_equal((uintptr_t)big[k] % 16, 0);
			for (size_t j = 0; j < big_size[k]; j += 4093)
				assert_int_equal(big[k][j], 0);
			memset(big[k], 0xa0 + (int)k, big_size[k]);
		}
	}
	for (size_t i = 0; i < 4096; i++)
		for (size_t j = 0; j < 1 + i % 1000; j++)
			assert_int_equal(small[i][j], i & 0xff);
	for (size_t k = 0; k < 6; k++) {
		assert_int_equal(big[k][0], 0xa0 + k);
		assert_int_equal(big[k][big_size[k] - 1], 0xa0 + k);
	}
	assert_true(arena_used(a) >= (600u << 10) + (2u << 20) + (5u << 20));
	assert_non_null(arena_strdup(a, "kiln"));
	arena_free(a);
}

/* A big block from arena_alloc_shared leaves room in its chunk: the small
 * blocks after it (up to a chunk's worth) come from the same mapping, and
 * nothing overlaps. */
static void test_huge_arena_shared(void **state)
{
	struct arena *a = arena_new_huge();
	size_t big_size = (1 << 20) + (8 << 10), n = 0;
	unsigned char *big, *small[1500];

	(void)state;
	assert_non_null(a);
	big = arena_alloc_shared(a, big_size);
	assert_non_null(big);
	assert_int_equal((uintptr_t)big % 16, 0);
	memset(big, 0x5a, big_size);
	for (size_t i = 0; i < 1500; i++) { /* 1500 KiB: fits after the block */
		small[i] = arena_alloc(a, 1024);
		assert_non_null(small[i]);
		memset(small[i], (int)(i & 0xff), 1024);
		/* Within 4 MiB of the block: its chunk, not a new mapping. */
		if (small[i] > big && small[i] < big + (4 << 20))
			n++;
	}
	assert_int_equal(n, 1500);
	for (size_t i = 0; i < big_size; i += 4093)
		assert_int_equal(big[i], 0x5a);
	for (size_t i = 0; i < 1500; i++)
		assert_int_equal(small[i][1023], i & 0xff);
	/* A second one that does not fit what is left: a chunk of its own
	 * with room after it. */
	assert_non_null(arena_alloc_shared(a, 3 << 20));
	assert_non_null(arena_alloc(a, 100));
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_huge_arena),
	    cmocka_unit_test(test_huge_arena_shared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
