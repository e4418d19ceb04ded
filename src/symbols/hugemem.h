/*
 * hugemem.h — fresh memory for the symbolizer's big tables (inflated
 * debug sections, the result cache): mapped, populated at once rather than
 * page by page, and in 2 MiB pages when large. Internal to src/symbols.
 */
#ifndef KILN_SYMBOLS_HUGEMEM_H
#define KILN_SYMBOLS_HUGEMEM_H

#include <stdbool.h>
#include <stddef.h>

/* *size bytes in 2 MiB pages (*size rounded up to whole pages), populated
 * unless populate is false (then see hugemem_populate). Unmap with
 * munmap(p, *size). NULL when out of memory. */
void *hugemem_alloc(size_t *size, bool populate);

/* size bytes, populated; in huge pages from 2 MiB on (size must then be a
 * multiple of 2 MiB, as munmap(p, size) has to free it whole). */
void *hugemem_alloc_big(size_t size);

/* Faults in the pages of p[0 .. n) at once. */
void hugemem_populate(void *p, size_t n);

#endif
