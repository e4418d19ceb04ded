/*
 * test_clock.c — the clock readings of common/clock.h: each unit is the
 * nanosecond reading scaled down, monotonic readings never go back, and
 * realtime is Unix epoch time (checked against time(2)).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "common/clock.h"

static void test_mono_never_goes_back(void **state)
{
	int64_t prev = mono_ns();
	for (int i = 0; i < 10000; i++) {
		int64_t now = mono_ns();
		assert_true(now >= prev);
		prev = now;
	}
}

/* A coarser reading taken between two finer ones lies between them. */
static void test_units_agree(void **state)
{
	int64_t a = mono_ns(), us = mono_us(), ms = mono_ms(), b = mono_ns();
	assert_true(us >= a / 1000 && us <= b / 1000);
	assert_true(ms >= a / 1000000 && ms <= b / 1000000);

	a = realtime_ns();
	ms = realtime_ms();
	b = realtime_ns();
	assert_true(ms >= a / 1000000 && ms <= b / 1000000);
}

static void test_realtime_is_epoch(void **state)
{
	time_t before = time(NULL);
	int64_t s = realtime_ms() / 1000;
	time_t after = time(NULL);
	/* time(2) may truncate a tick behind clock_gettime's reading. */
	assert_true(s >= (int64_t)before - 1 && s <= (int64_t)after + 1);
	assert_true(s > 1500000000); /* after 2017: not a monotonic count */
}

static void test_thread_cpu_counts_work(void **state)
{
	int64_t before = thread_cpu_ns();
	volatile uint64_t x = 0;
	/* Work until the thread's CPU clock moves: it must, or it is not
	 * counting this thread's time at all. */
	while (thread_cpu_ns() == before)
		x++;
	assert_true(thread_cpu_ns() > before);
	assert_true(clock_read_ns(CLOCK_THREAD_CPUTIME_ID) > before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mono_never_goes_back),
	    cmocka_unit_test(test_units_agree),
	    cmocka_unit_test(test_realtime_is_epoch),
	    cmocka_unit_test(test_thread_cpu_counts_work),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
