/*
 * fuzz_gopclntab.c — arbitrary bytes as a Go pclntab (gopclntab.c), read
 * with two text addresses (unknown, and the usual non-PIE one). Nothing may
 * crash, read out of bounds, leak or hang; a rejected table must say why
 * and leave the table as it was; an accepted one must count what it read.
 * Inputs that start like an ELF file are also read as one
 * (unwind_gopclntab_elf: the section, symbol and .data.rel.ro routes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/unwind.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rows(const uint8_t *data, size_t size, uint64_t text_vaddr)
{
	struct unwind_table t;
	struct kiln_error err = {0};
	int rc;

	unwind_table_init(&t);
	rc = unwind_gopclntab_rows(data, size, text_vaddr, &t, &err);
	if (rc < 0) {
		if (t.n != 0 || t.source || err.msg[0] == '\0' || err.code != rc)
			abort();
	} else {
		if ((uint64_t)rc != t.stats.fdes || (rc > 0 && strcmp(t.source, "gopclntab") != 0))
			abort();
		for (size_t i = 0; i < t.n; i++)
			if (UNWIND_RULE_KIND(t.rows[i].rule) > UNWIND_UNSUPPORTED)
				abort();
		unwind_table_finish(&t);
		for (size_t i = 1; i < t.n; i++)
			if (t.rows[i].pc <= t.rows[i - 1].pc)
				abort();
		if (t.n > 0 && unwind_table_find(&t, t.rows[t.n - 1].pc) != &t.rows[t.n - 1])
			abort();
	}
	unwind_table_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_rows(data, size, 0);
	check_rows(data, size, 0x401000);
	if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) {
		char *copy = malloc(size);
		struct unwind_table t;
		struct kiln_error err = {0};
		Elf *elf;

		if (!copy)
			return 0;
		memcpy(copy, data, size);
		elf_version(EV_CURRENT);
		elf = elf_memory(copy, size);
		if (elf) {
			unwind_table_init(&t);
			if (unwind_gopclntab_elf(elf, &t, &err) < 0 && t.n != 0)
				abort();
			unwind_table_free(&t);
			elf_end(elf);
		}
		free(copy);
	}
	return 0;
}
