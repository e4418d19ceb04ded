/*
 * fuzz_unwind_cfi.c — arbitrary bytes as an ELF image for the unwind table
 * compiler (src/unwind: .eh_frame and .debug_frame through libdw, and
 * .gopclntab): it must not crash, hang or leak, and whatever table it
 * returns must be sorted with no two rows at one pc.
 */
#include <stdint.h>
#include <stdlib.h>

#include "unwind/unwind.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_table t;

	if (unwind_table_build_mem(data, size, &t, NULL) != 0)
		return 0;
	for (size_t i = 1; i < t.n; i++)
		if (t.rows[i - 1].pc >= t.rows[i].pc)
			abort();
	if (t.n)
		(void)unwind_table_find(&t, t.rows[t.n / 2].pc);
	unwind_table_free(&t);
	return 0;
}
