/*
 * duration.c — parsing the duration grammar of duration.h.
 *
 * The sum is kept in 128 bits of nanoseconds, so that the millisecond
 * form reaches int64_t's full range of milliseconds (2.9e8 years) while
 * the nanosecond form stops at 292 years; each checks its own range.
 */
#include "common/duration.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef __int128 i128;

#define NS_PER_S 1000000000LL

static const struct {
	const char *name;
	int64_t ns;
} units[] = {
    /* longest spellings first: "ms" before "m", "µs" before nothing */
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* µs */
    {"ms", 1000000},
    {"s", NS_PER_S},
    {"m", 60 * NS_PER_S},
    {"h", 3600 * NS_PER_S},
    {"d", 86400 * NS_PER_S},
    {"w", 7 * 86400 * NS_PER_S},
    {"y", 365 * 86400 * NS_PER_S},
};

/* Above any int64_t count of milliseconds in nanoseconds (9.2e24). */
#define LIMIT ((i128)1 << 100)

/* Reads digits [ "." digits ] at *p: the whole part into *whole and the
 * fraction as num / den. false if there is no digit before the point or
 * the whole part is past LIMIT (then *range is set). */
static bool read_number(const char **p, i128 *whole, i128 *num, i128 *den, bool *range)
{
	const char *q = *p;

	*whole = 0;
	*num = 0;
	*den = 1;
	if (*q < '0' || *q > '9')
		return false;
	for (; *q >= '0' && *q <= '9'; q++) {
		*whole = *whole * 10 + (*q - '0');
		if (*whole > LIMIT) {
			*range = true;
			return false;
		}
	}
	if (*q == '.') {
		q++;
		if (*q < '0' || *q > '9')
			return false;
		/* Digits past the 18th cannot change a nanosecond count of a
		 * year by a whole nanosecond: read, not counted. */
		for (int n = 0; *q >= '0' && *q <= '9'; q++, n++)
			if (n < 18) {
				*num = *num * 10 + (*q - '0');
				*den *= 10;
			}
	}
	*p = q;
	return true;
}

static int parse(const char *s, unsigned flags, i128 *total_ns)
{
	const char *p = s;
	i128 total = 0;
	bool range = false;

	if (!s || !*s)
		return -EINVAL;
	if (strcmp(s, "0") == 0) {
		*total_ns = 0;
		return 0;
	}
	while (*p) {
		i128 whole, num, den;
		if (!read_number(&p, &whole, &num, &den, &range))
			return range ? -ERANGE : -EINVAL;
		int64_t unit = 0;
		size_t unit_len = 0;
		if (!*p && p == s + strspn(s, "0123456789.") && (flags & DURATION_BARE_SECONDS)) {
			unit = NS_PER_S; /* the whole string was one bare number */
		} else {
			for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
				size_t l = strlen(units[i].name);
				if (l > unit_len && strncmp(p, units[i].name, l) == 0) {
					unit = units[i].ns;
					unit_len = l;
				}
			}
			if (!unit_len)
				return -EINVAL;
		}
		if (whole > LIMIT / unit)
			return -ERANGE;
		total += whole * unit + num * unit / den;
		if (total > LIMIT)
			return -ERANGE;
		p += unit_len;
	}
	*total_ns = total;
	return 0;
}

int duration_parse_ns(const char *s, unsigned flags, int64_t *out)
{
	i128 ns;
	int rc = parse(s, flags, &ns);

	if (rc)
		return rc;
	if (ns > INT64_MAX)
		return -ERANGE;
	*out = (int64_t)ns;
	return 0;
}

int duration_parse_ms(const char *s, unsigned flags, int64_t *out)
{
	i128 ns;
	int rc = parse(s, flags, &ns);

	if (rc)
		return rc;
	if (ns % 1000000)
		return -EINVAL;
	if (ns / 1000000 > INT64_MAX)
		return -ERANGE;
	*out = (int64_t)(ns / 1000000);
	return 0;
}
