/*
 * duration.h — the one duration grammar of Kiln's flags and config files.
 *
 * Prometheus's spelling, as Parca's and Prometheus's own flags and scrape
 * configs write it: one or more terms, each a number and a unit, summed.
 *
 *   duration = "0" | term { term }
 *   term     = digits [ "." digits ] unit
 *   unit     = "ns" | "us" | "µs" | "ms" | "s" | "m" | "h" | "d" | "w" | "y"
 *
 * e.g. "10s", "500ms", "1h30m", "1.5h", "15d". d is 24 h, w 7 d, y 365 d.
 * Terms may come in any order and repeat ("30m1h" is 90 minutes).
 * A number without a unit is an error, except "0", and except for a flag
 * that documents plain seconds (DURATION_BARE_SECONDS): then one bare
 * number ("10", "0.5") is seconds. No sign, no spaces.
 *
 * Errors: -EINVAL for anything outside the grammar (or, for the
 * millisecond form, a duration finer than a millisecond: "1500us"),
 * -ERANGE when the total does not fit the result's int64_t. Nothing is
 * written to *out on error. Callers name the flag in their message.
 */
#ifndef KILN_COMMON_DURATION_H
#define KILN_COMMON_DURATION_H

#include <stdint.h>

/* A bare number is seconds. */
#define DURATION_BARE_SECONDS 1u

/* s -> nanoseconds. */
int duration_parse_ns(const char *s, unsigned flags, int64_t *out);
/* s -> milliseconds (whole milliseconds only). */
int duration_parse_ms(const char *s, unsigned flags, int64_t *out);

#endif
