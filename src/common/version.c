/*
 * version.c — the one place the build's version is compiled in.
 *
 * KILN_VERSION comes from the Makefile (-DKILN_VERSION="..." on this file
 * only); builds that do not set it (fuzz targets, a compiler run by hand)
 * report "unknown".
 */
#include "common/version.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

const char *kiln_version(void)
{
	return KILN_VERSION;
}
