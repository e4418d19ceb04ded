/*
 * test_duration.c — the one duration grammar (common/duration.h): every
 * spelling the flags and the scrape config document, compound terms,
 * fractions, bare seconds only where asked, and errors (garbage, sign,
 * overflow, sub-millisecond for the millisecond form).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "common/duration.h"

static int64_t ms_of(const char *s, unsigned flags)
{
	int64_t v = -42;
	assert_int_equal(duration_parse_ms(s, flags, &v), 0);
	return v;
}

static int64_t ns_of(const char *s, unsigned flags)
{
	int64_t v = -42;
	assert_int_equal(duration_parse_ns(s, flags, &v), 0);
	return v;
}

static void test_units(void **state)
{
	assert_int_equal(ns_of("7ns", 0), 7);
	assert_int_equal(ns_of("250us", 0), 250000);
	assert_int_equal(ns_of("250\xc2\xb5s", 0), 250000); /* µs */
	assert_int_equal(ms_of("500ms", 0), 500);
	assert_int_equal(ms_of("10s", 0), 10000);
	assert_int_equal(ms_of("2m", 0), 120000);
	assert_int_equal(ms_of("12h", 0), 12 * 3600000LL);
	assert_int_equal(ms_of("15d", 0), 15 * 86400000LL);
	assert_int_equal(ms_of("2w", 0), 14 * 86400000LL);
	assert_int_equal(ms_of("1y", 0), 365 * 86400000LL);
	assert_int_equal(ms_of("0", 0), 0);
	assert_int_equal(ns_of("0", 0), 0);
	assert_int_equal(ms_of("0s", 0), 0);
}

static void test_compound_and_fractions(void **state)
{
	assert_int_equal(ms_of("1h30m", 0), 5400000);
	assert_int_equal(ms_of("30m1h", 0), 5400000); /* any order, as before */
	assert_int_equal(ms_of("1m30s500ms", 0), 90500);
	assert_int_equal(ms_of("1.5h", 0), 5400000);
	assert_int_equal(ms_of("0.5s", 0), 500);
	assert_int_equal(ns_of("1.000000001s", 0), 1000000001);
	/* digits past what a nanosecond can show are read and dropped */
	assert_int_equal(ns_of("1.00000000099999999999s", 0), 1000000000);
}

static void test_bare_seconds_only_when_asked(void **state)
{
	int64_t v;
	assert_int_equal(ns_of("10", DURATION_BARE_SECONDS), 10000000000LL);
	assert_int_equal(ns_of("0.25", DURATION_BARE_SECONDS), 250000000);
	assert_int_equal(duration_parse_ms("10", 0, &v), -EINVAL);
	assert_int_equal(duration_parse_ns("10", 0, &v), -EINVAL);
	/* a bare number is the whole string, never a term among others */
	assert_int_equal(duration_parse_ns("1m30", DURATION_BARE_SECONDS, &v), -EINVAL);
}

static void test_garbage(void **state)
{
	const char *bad[] = {"",    "s",   "-1s",   "+1s", "1 s", " 1s",   "1s ", "1x",
			     "1.s", ".5s", "1..5s", "ms",  "1sm", "1e3ms", "inf", "0x10s"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int64_t v = 7;
		assert_int_equal(duration_parse_ms(bad[i], DURATION_BARE_SECONDS, &v), -EINVAL);
		assert_int_equal(duration_parse_ns(bad[i], DURATION_BARE_SECONDS, &v), -EINVAL);
		assert_int_equal(v, 7); /* untouched on error */
	}
	int64_t v;
	assert_int_equal(duration_parse_ms(NULL, 0, &v), -EINVAL);
	/* the millisecond form takes whole milliseconds only */
	assert_int_equal(duration_parse_ms("1500us", 0, &v), -EINVAL);
	assert_int_equal(ms_of("2000us", 0), 2);
}

static void test_range(void **state)
{
	int64_t v;
	assert_int_equal(duration_parse_ms("6666666666y", 0, &v), -ERANGE);
	assert_int_equal(duration_parse_ms("99999999999999999999ms", 0, &v), -ERANGE);
	assert_int_equal(duration_parse_ms("999999999999999999999999999999999999999999s", 0, &v),
			 -ERANGE);
	assert_int_equal(ms_of("9223372036854775s", 0), 9223372036854775000LL);
	/* nanoseconds stop at 292 years */
	assert_int_equal(ns_of("292y", 0), 292 * 365 * 86400LL * 1000000000LL);
	assert_int_equal(duration_parse_ns("293y", 0, &v), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_units),
	    cmocka_unit_test(test_compound_and_fractions),
	    cmocka_unit_test(test_bare_seconds_only_when_asked),
	    cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
