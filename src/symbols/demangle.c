/*
 * demangle.c — display names for C++ and Rust symbols via libiberty.
 *
 * libiberty's cplus_demangle recognizes Itanium C++ (_Z...) and Rust (legacy
 * _ZN...17h<hash>E and v0 _R...) with DMGL_AUTO; it returns NULL for plain C
 * names, which callers then show as they are.
 */
#include <libiberty/demangle.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/symbols.h"

char *symbols_demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}

char *symbols_format_unresolved(char *buf, size_t size, const char *path, uint64_t addr)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : (path && *path ? path : "unknown");
	snprintf(buf, size, "[%s] +0x%llx", base, (unsigned long long)addr);
	return buf;
}
