/*
 * compat_flags.h — flags of Parca's binaries that Kiln's accept, so that a
 * unit file or Helm chart written for Parca starts Kiln unchanged.
 *
 * Each binary lists the Parca flags it has no equivalent for, with one
 * sentence saying what Kiln does instead; such a flag is accepted (with or
 * without a value, as Parca's flag library allows for booleans) and that
 * sentence is logged once at start. Flags Kiln does implement under the
 * same name are in the binary's own option table, not here.
 */
#ifndef KILN_COMMON_COMPAT_FLAGS_H
#define KILN_COMMON_COMPAT_FLAGS_H

#include <getopt.h>
#include <stddef.h>

struct compat_flag {
	const char *name; /* without the leading "--" */
	int has_arg;	  /* required_argument, or optional_argument for booleans */
	const char *note; /* what Kiln does instead */
};

/* A getopt_long table: base (up to its all-zero terminator), then one entry
 * per compat flag with val = first_val + its index, then a terminator.
 * malloc'd (the caller frees it); NULL on out-of-memory. */
struct option *compat_options(const struct option *base, const struct compat_flag *flags, size_t n,
			      int first_val);

/* Logs "--NAME[=VALUE] is accepted for Parca compatibility: NOTE". */
void compat_flag_seen(const char *prog, const struct compat_flag *f, const char *value);

#endif
