/*
 * unwind_test_util.h — helpers shared by the unwind tests (test_cfi.c,
 * test_gopclntab.c): running a build command, a symbol's address, a row
 * kind's name. Include after cmocka.h and gelf.h.
 */
#ifndef KILN_TESTS_UNWIND_UTIL_H
#define KILN_TESTS_UNWIND_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/unwind.h"

/* Runs cmd with the shell; its exit status (printed when not 0). */
static inline int run(const char *cmd)
{
	int rc = system(cmd);

	if (rc != 0)
		print_error("command failed (status %d): %s\n", rc, cmd);
	return rc;
}

/* A defined symbol's value (and size, if asked) from .symtab; fails the
 * test if absent. */
static inline void symbol(Elf *elf, const char *name, uint64_t *value, uint64_t *size)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(d, (int)i, &sym))
				continue;
			n = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (n && strcmp(n, name) == 0 && sym.st_value != 0) {
				*value = sym.st_value;
				if (size)
					*size = sym.st_size;
				return;
			}
		}
	}
	fail_msg("no symbol %s", name);
}

static inline const char *kind_name(unsigned kind)
{
	static const char *const names[] = {"NONE",   "CFA_SP", "CFA_FP",     "CFA_PLT",
					    "SIGNAL", "END",	"UNSUPPORTED"};

	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

#endif
