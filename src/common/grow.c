/*
 * grow.c — growing a heap array by doubling (see grow.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

int grow_array(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	void *arr, *p;
	size_t n;

	if (need <= *cap)
		return 0;
	n = *cap ? *cap : (first ? first : 1);
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -ENOMEM;
	memcpy(&arr, arrp, sizeof(arr));
	p = realloc(arr, n * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = n;
	return 0;
}
