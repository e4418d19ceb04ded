/*
 * satadd.h — adding up profile values without wrapping.
 *
 * Values come from clients (pushed or scraped profiles) and are summed in
 * many places: per stack in a merge, per point of a range, into the nodes
 * and totals of a flame graph and top table. A signed overflow would be
 * undefined behaviour and, done with unsigned arithmetic, would wrap: two
 * samples of INT64_MAX would come back as -2. Every such sum goes through
 * sat_add_i64, which sticks at INT64_MAX / INT64_MIN instead, so a total is
 * never smaller than a part of it (for values of one sign).
 */
#ifndef KILN_COMMON_SATADD_H
#define KILN_COMMON_SATADD_H

#include <stdint.h>

/* a + b, clamped to [INT64_MIN, INT64_MAX]. */
static inline int64_t sat_add_i64(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* *acc += v, saturating. */
static inline void sat_acc_i64(int64_t *acc, int64_t v)
{
	*acc = sat_add_i64(*acc, v);
}

#endif
