/*
 * version.h — the version every binary reports.
 *
 * The string is `git describe --tags --always --dirty` of the checkout the
 * binaries were built from (e.g. "0.1.0-123-gabc1234"), or "unknown" for a
 * build outside git (a source tarball). The Makefile passes it to
 * version.c alone, so a new commit recompiles one file and relinks.
 */
#ifndef KILN_COMMON_VERSION_H
#define KILN_COMMON_VERSION_H

/* The build's version: a static string, never NULL. */
const char *kiln_version(void);

#endif
