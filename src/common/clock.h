/*
 * clock.h — the process's clock readings, in one place.
 *
 * Monotonic time (CLOCK_MONOTONIC) is for deadlines, timeouts and
 * durations: it never jumps when the wall clock is set. Realtime
 * (CLOCK_REALTIME) is for timestamps that leave the process (profile
 * times, query ranges) and is in Unix epoch units. Thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID, user + system) is what a loaded machine does
 * not inflate, for costs reported in metrics and Server-Timing.
 *
 * All return signed 64-bit counts (int64_t nanoseconds cover 292 years),
 * so that differences can be negative without casts. clock_gettime cannot
 * fail for these clocks on Linux; no error is reported.
 */
#ifndef KILN_COMMON_CLOCK_H
#define KILN_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on clock id. */
static inline int64_t clock_read_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t mono_ns(void)
{
	return clock_read_ns(CLOCK_MONOTONIC);
}

static inline int64_t mono_us(void)
{
	return mono_ns() / 1000;
}

static inline int64_t mono_ms(void)
{
	return mono_ns() / 1000000;
}

static inline int64_t realtime_ns(void)
{
	return clock_read_ns(CLOCK_REALTIME);
}

static inline int64_t realtime_ms(void)
{
	return realtime_ns() / 1000000;
}

/* CPU time of the calling thread, user + system (page faults included). */
static inline int64_t thread_cpu_ns(void)
{
	return clock_read_ns(CLOCK_THREAD_CPUTIME_ID);
}

#endif
