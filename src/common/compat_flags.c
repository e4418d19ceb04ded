/*
 * compat_flags.c — Parca's flags that Kiln accepts (see compat_flags.h).
 */
#include "common/compat_flags.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

struct option *compat_options(const struct option *base, const struct compat_flag *flags, size_t n,
			      int first_val)
{
	size_t nbase = 0;
	struct option *o;

	while (base[nbase].name)
		nbase++;
	o = calloc(nbase + n + 1, sizeof(*o));
	if (!o)
		return NULL;
	memcpy(o, base, nbase * sizeof(*o));
	for (size_t i = 0; i < n; i++)
		o[nbase + i] =
		    (struct option){flags[i].name, flags[i].has_arg, NULL, first_val + (int)i};
	return o;
}

void compat_flag_seen(const char *prog, const struct compat_flag *f, const char *value)
{
	log_info("%s: --%s%s%s is accepted for Parca compatibility: %s", prog, f->name,
		 value ? "=" : "", value ? value : "", f->note);
}
