/*
 * mapping_name.c — the filename Kiln writes for a mapping (pprof.h): the
 * agent names mappings from /proc/PID/maps and perf mmap records, whose
 * names for anonymous memory Go's pprof does not know.
 */
#include "pprof/pprof.h"

#include <string.h>

const char *pprof_mapping_filename(const char *path)
{
	if (!path || !path[0] || strcmp(path, "//anon") == 0 ||
	    strncmp(path, "/anon_hugepage", 14) == 0)
		return "[anon]";
	return path;
}
