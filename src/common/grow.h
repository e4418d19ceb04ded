/*
 * grow.h — growing a heap array by doubling, the one way every module
 * makes room in an array it appends to.
 *
 * An array is a pointer (owned by the caller, freed with free()) and its
 * capacity in elements; the count of elements in use is the caller's. When
 * more room is needed the capacity doubles (starting at first), so n
 * appends cost O(n) copies in all. On failure nothing changes: the array,
 * its elements and its capacity are as they were, and the caller still
 * owns (and frees) the array.
 */
#ifndef KILN_COMMON_GROW_H
#define KILN_COMMON_GROW_H

#include <stddef.h>

/* Makes room for need elements of elem bytes in the array *arrp points to
 * (a T ** passed as void *), of capacity *cap: 0 (room there, *arrp and
 * *cap updated if it moved) or -ENOMEM (also when the size overflows). */
int grow_array(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

/* grow_array for an array arr (a T *) and its capacity cap (a size_t). */
#define GROW_ARRAY(arr, cap, need, first)                                                          \
	grow_array(&(arr), &(cap), (need), sizeof(*(arr)), (first))

#endif
