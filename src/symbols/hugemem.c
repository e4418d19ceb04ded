/*
 * hugemem.c — fresh memory for the symbolizer's big tables, populated at
 * once and in 2 MiB pages (see hugemem.h). The bottom of the symbolizer's
 * object layers: it calls only the kernel.
 */
#include <stdint.h>
#include <sys/mman.h>

#include "symbols/hugemem.h"

/* Memory in 2 MiB pages, populated unless populate is false (then see
 * hugemem_populate): faulting in megabytes page by page cost as much as
 * inflating them (in a VM, a page fault is a hypercall), and a TLB miss on
 * a 4 KiB page is what reading scattered DWARF costs most (each CU's DIEs,
 * abbreviations and line program sit on pages of their own). *size is
 * rounded up; unmap with munmap(p, *size). */
void *hugemem_alloc(size_t *size, bool populate)
{
	size_t huge = (size_t)2 << 20, n = (*size + huge - 1) & ~(huge - 1);
	uint8_t *p =
	    mmap(NULL, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + n < p + n + huge)
		munmap(a + n, (size_t)(p + n + huge - (a + n)));
	madvise(a, n, MADV_HUGEPAGE);
	if (populate)
		madvise(a, n, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */);
	*size = n;
	return a;
}

/* Fresh memory, populated; in huge pages from 2 MiB on (size must then be a
 * multiple of 2 MiB, as munmap(p, size) has to free it whole). */
void *hugemem_alloc_big(size_t size)
{
	void *p;

	if (size >= (2u << 20) && size % (2u << 20) == 0)
		return hugemem_alloc(&size, true);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, size, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */);
	return p;
}

/* Faults in the pages of p[0 .. n) at once. */
void hugemem_populate(void *p, size_t n)
{
	uintptr_t page = 4096, lo = (uintptr_t)p & ~(page - 1),
		  hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);

	madvise((void *)lo, hi - lo, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */);
}
