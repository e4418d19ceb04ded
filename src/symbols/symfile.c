/*
 * symfile.c — one object's state (see symfile.h): freeing it, its
 * helpers' readers, opening Kiln's reader on its sections, and whether its
 * memory goes in huge pages. Opening an object is the batch layer's
 * (stream_batch.c: symfile_open), as the batch that opens a file starts
 * answering while it inflates.
 */
#include <elfutils/libdw.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/htab.h"
#include "common/log.h"
#include "common/worker.h"
#include "symbols/symfile.h"

/* Worker i of s, started on first use; NULL when no thread can be had. */
struct worker *symbolizer_worker(struct symbolizer *s, size_t i)
{
	if (!s->workers[i])
		s->workers[i] = worker_new();
	return s->workers[i];
}

void symfile_free(struct symfile *f)
{
	if (!f)
		return;
	kdw_close(f->kdw);
	batch_helpers_free(f);
	if (f->dwarf)
		dwarf_end(f->dwarf);
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	htab_free(f->cus); /* the indexes live in the arena */
	cu_scratch_free(&f->scratch);
	free(f->aranges);
	rcache_free(&f->results);
	htab_free(f->names);
	arena_free(f->arena);
	for (size_t i = 0; i < f->ninflated; i++)
		munmap(f->inflated[i].p, f->inflated[i].size);
	free(f->inflated);
	free(f->path);
	free(f->obj_build_id);
	free(f->obj_path);
	free(f);
}

void batch_helper_free(struct batch_helper *h)
{
	kdw_close(h->kdw);
	cu_scratch_free(&h->scratch);
	htab_free(h->names);
	arena_free(h->arena);
}

void batch_helpers_free(struct symfile *f)
{
	for (size_t i = 0; f->helpers && i < BATCH_MAX_THREADS - 1; i++)
		batch_helper_free(&f->helpers[i]);
	free(f->helpers);
	if (f->early)
		batch_helper_free(f->early);
	free(f->early);
	if (f->back)
		batch_helper_free(f->back);
	free(f->back);
}

/* Opens Kiln's DWARF reader on the (inflated) debug sections: with none
 * (see inflate_sections), libdw alone answers. */
void symfile_open_reader(struct symfile *f)
{
	struct kiln_error e = {0};

	if (!inflate_sections(f->elf, NULL, &f->secs))
		return;
	f->kdw = kdw_open(&f->secs, f->arena, &e);
	if (!f->kdw)
		log_debug("symbolizer: %s: DWARF reader: %s; libdw only", f->path, e.msg);
}

/* Bytes of DWARF (info, abbrev, line; inflated) and symbol tables from
 * which a file's memory is taken in huge pages: a fresh 4 KiB page costs
 * microseconds in a VM whose page tables the hypervisor shadows, and such a
 * file fills thousands of them (the symbol table, the reader's and the
 * index's data, the result cache). */
#define LARGE_FILE ((size_t)512 << 10)

bool symfile_large(Elf *elf)
{
	size_t shstrndx, bytes = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			bytes += sh.sh_size;
			continue;
		}
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name ||
		    (strcmp(name, ".debug_info") != 0 && strcmp(name, ".debug_line") != 0 &&
		     strcmp(name, ".debug_abbrev") != 0))
			continue;
		/* Inflated size, bounded as inflate_start bounds it. */
		if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			bytes += ch.ch_size / 1032 <= sh.sh_size ? ch.ch_size : sh.sh_size;
		else
			bytes += sh.sh_size;
	}
	return bytes >= LARGE_FILE;
}
