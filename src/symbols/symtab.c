/*
 * symtab.c — an object's function symbols (STT_FUNC / STT_GNU_IFUNC of
 * .symtab, else .dynsym), sorted for a binary search, and the display
 * names (demangled, interned) of what the object answers. Part of the
 * object layer (symfile.h); the last resort of resolve.c.
 */
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/htab.h"
#include "symbols/symfile.h"

static int fsym_cmp(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Prefer the sized (and global) symbol among aliases: sorted first. */
	return x->size > y->size ? -1 : x->size < y->size;
}

/* Loads STT_FUNC symbols of one symbol table section (into the arena:
 * malloc'd megabytes were fresh pages, a fault each). */
static int load_symtab(struct symfile *f, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL), *strs = NULL;
	Elf_Scn *strscn = elf_getscn(f->elf, sh->sh_link);
	GElf_Shdr strsh;
	const char *strbase = NULL;
	size_t n, strsize = 0;
	struct fsym *syms;
	bool sym64;

	if (!data || sh->sh_entsize == 0 || sh->sh_type == SHT_NOBITS)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	if (n > data->d_size / gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT))
		n = data->d_size / gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT);
	if (f->nsyms + n == 0)
		return 0;
	syms = arena_alloc(f->arena, (f->nsyms + n) * sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	if (f->nsyms)
		memcpy(syms, f->syms, f->nsyms * sizeof(*syms));
	f->syms = syms;
	/* A string table whose last byte is NUL terminates every name in it:
	 * names are then taken without elf_strptr's per-call checks. */
	if (strscn && gelf_getshdr(strscn, &strsh) && strsh.sh_type == SHT_STRTAB &&
	    (strs = elf_getdata(strscn, NULL)) != NULL && strs->d_buf && strs->d_size &&
	    strs->d_off == 0 && strs->d_size == strsh.sh_size &&
	    ((const char *)strs->d_buf)[strs->d_size - 1] == '\0') {
		strbase = strs->d_buf;
		strsize = strs->d_size;
	}
	/* Native 64-bit data is an array of Elf64_Sym as libelf hands it. */
	sym64 = gelf_getclass(f->elf) == ELFCLASS64 && data->d_type == ELF_T_SYM &&
		((uintptr_t)data->d_buf % _Alignof(Elf64_Sym)) == 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (sym64)
			sym = ((const Elf64_Sym *)data->d_buf)[i];
		else if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value == 0)
			continue;
		if (strbase)
			name = sym.st_name < strsize ? strbase + sym.st_name : NULL;
		else
			name = elf_strptr(f->elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		f->syms[f->nsyms++] = (struct fsym){sym.st_value, sym.st_size, name};
	}
	return 0;
}

/* Stable bottom-up merge sort of syms[0..n) by fsym_cmp (what glibc's
 * qsort does, so aliases keep the order they had), with tmp[0..n). */
static void sort_syms(struct fsym *syms, struct fsym *tmp, size_t n)
{
	struct fsym *src = syms, *dst = tmp;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = fsym_cmp(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct fsym *t = src;
		src = dst;
		dst = t;
	}
	if (src != syms)
		memcpy(syms, src, n * sizeof(*syms));
}

int symtab_load(struct symfile *f)
{
	Elf_Scn *scn = NULL, *dynsym = NULL;
	GElf_Shdr dynsh;
	bool have_symtab = false;
	int rc;

	while ((scn = elf_nextscn(f->elf, scn)) != NULL) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			rc = load_symtab(f, scn, &sh);
			if (rc < 0)
				return rc;
			have_symtab = true;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dynsh = sh;
		}
	}
	if (!have_symtab && dynsym) {
		rc = load_symtab(f, dynsym, &dynsh);
		if (rc < 0)
			return rc;
	}
	if (f->nsyms > 1) {
		bool sorted = true;

		for (size_t i = 1; i < f->nsyms && sorted; i++)
			sorted = fsym_cmp(&f->syms[i - 1], &f->syms[i]) <= 0;
		if (!sorted) {
			struct fsym *tmp = arena_alloc(f->arena, f->nsyms * sizeof(*tmp));

			if (!tmp)
				return -ENOMEM;
			sort_syms(f->syms, tmp, f->nsyms);
		}
	}
	return 0;
}

/* Display name for a raw name: demangled and interned in names (copies in
 * arena), or raw itself. */
const char *symtab_intern(struct htab *names, struct arena *arena, const char *raw)
{
	uint64_t v;
	size_t len;
	char *dem, *copy;

	if (!raw || raw[0] != '_' || (raw[1] != 'Z' && raw[1] != 'R'))
		return raw;
	len = strlen(raw);
	if (htab_get(names, raw, len, &v))
		return (const char *)(uintptr_t)v;
	dem = symbols_demangle(raw);
	copy = dem ? arena_strdup(arena, dem) : NULL;
	free(dem);
	if (!copy)
		return raw;
	htab_put(names, raw, len, (uint64_t)(uintptr_t)copy);
	return copy;
}

const char *symtab_name(struct symfile *f, const char *raw)
{
	return symtab_intern(f->names, f->arena, raw);
}

const struct fsym *symtab_lookup(const struct symfile *f, uint64_t addr)
{
	size_t lo = 0, hi = f->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo is the first symbol above addr; walk back over aliases at the
	 * same address to the one sorted first (largest size). */
	if (lo == 0)
		return NULL;
	size_t i = lo - 1;
	while (i > 0 && f->syms[i - 1].addr == f->syms[i].addr)
		i--;
	const struct fsym *s = &f->syms[i];
	if (s->size ? addr - s->addr < s->size : (lo < f->nsyms || addr - s->addr < 4096))
		return s;
	return NULL;
}
