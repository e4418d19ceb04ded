/*
 * unwind.h — unwind tables: how to find each caller of x86-64 code without
 * frame pointers, compiled from a binary's own call-frame information.
 *
 * The agent's BPF program walks user stacks with these tables
 * (src/agent/profiler.bpf.c); this module only builds them, in user space,
 * from an ELF file:
 *
 *   cfi.c        .eh_frame / .debug_frame through elfutils' libdw: every
 *                FDE's rows, evaluated by libdw (dwarf_cfi_addrframe), cut
 *                down to the rules a row holds (unwind_row.h); PLT and
 *                signal-trampoline expressions recognised by shape
 *   gopclntab.c  Go's .gopclntab: the SP delta of each pc range (Go emits
 *                no .eh_frame); runtime.goexit and friends end the stack
 *   table.c      the growable row array, sort + merge of adjacent equal
 *                rows, and unwind_table_build, which picks the sources
 *
 * A table is a plain sorted array of struct unwind_row, one per file,
 * independent of where the file is mapped: the BPF side subtracts each
 * mapping's bias. Nothing here is per-process.
 *
 * Errors follow common/error.h: 0 or a negative errno, detail in err.
 */
#ifndef KILN_UNWIND_UNWIND_H
#define KILN_UNWIND_UNWIND_H

#include <gelf.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "unwind/unwind_row.h"

/* What a compiler met, for /metrics and tests. */
struct unwind_table_stats {
	uint64_t fdes;	      /* CFI entries (or Go functions) read */
	uint64_t unsupported; /* rows whose rule a row cannot hold */
	uint64_t plt;	      /* PLT expression rows */
	uint64_t signal;      /* signal trampoline rows */
	uint64_t bad;	      /* entries skipped as malformed */
};

/* An owned table: rows[0..n) sorted by pc once unwind_table_finish ran. */
struct unwind_table {
	struct unwind_row *rows;
	size_t n, cap;
	struct unwind_table_stats stats;
	/* Where the rows came from: "eh_frame", "debug_frame", "gopclntab",
	 * or a '+'-joined list of them. Static strings. */
	const char *source;
};

void unwind_table_init(struct unwind_table *t);
void unwind_table_free(struct unwind_table *t);
/* Appends a row (any order). 0 or -ENOMEM. */
int unwind_table_push(struct unwind_table *t, uint32_t pc, uint32_t rule);
/* Sorts by pc; where two sources give rows for the same pc the one pushed
 * first wins; drops rows that repeat the rule of the row before them. */
void unwind_table_finish(struct unwind_table *t);
/* The row that covers pc (the last with row.pc <= pc), or NULL. */
const struct unwind_row *unwind_table_find(const struct unwind_table *t, uint32_t pc);

/* Rows from the CFI of elf: eh_frame selects .eh_frame (else
 * .debug_frame). Appends to t. Returns the number of FDEs read, -ENOENT
 * when the section is absent, or another negative errno. */
int unwind_cfi_rows(Elf *elf, bool eh_frame, struct unwind_table *t, struct kiln_error *err);

/* Rows from a Go .gopclntab section: data/len are the section's bytes,
 * text_vaddr the address of the first byte of .text (Go 1.16/1.17 tables
 * hold absolute entry addresses; 1.18+ offsets from the text start the
 * header names, which text_vaddr cross-checks). Supports Go 1.16 and
 * later (magics 0xfffffffa, 0xfffffff0, 0xfffffff1). Appends to t.
 * Returns the number of functions read or a negative errno (-ENOEXEC for
 * an unknown magic, -EINVAL for a malformed table, naming the offset). */
int unwind_gopclntab_rows(const uint8_t *data, size_t len, uint64_t text_vaddr,
			  struct unwind_table *t, struct kiln_error *err);
/* The same from an ELF with a .gopclntab section (-ENOENT if none). */
int unwind_gopclntab_elf(Elf *elf, struct unwind_table *t, struct kiln_error *err);

/* The whole table of one file, from every source it has: .gopclntab,
 * then .eh_frame, then .debug_frame, then, unless the file's own
 * .debug_frame gave rows, the .debug_frame of its separate debug file
 * under debug_dir ("/usr/lib/debug" normally; NULL: skip) found by build
 * ID (each only where the sources before left pcs uncovered: a stripped
 * file keeps .eh_frame, which for code built without unwind tables holds
 * just the start-up code and the PLT). -ENOENT when no source gives a
 * row. */
int unwind_table_build(int fd, const char *debug_dir, struct unwind_table *t,
		       struct kiln_error *err);
/* The same for an ELF image in memory (the vDSO). */
int unwind_table_build_mem(const void *image, size_t len, struct unwind_table *t,
			   struct kiln_error *err);

/* ---- the paged layout (paged.c; unwind_row.h, "paged storage") ---- */

/* Rows [row, row + nrows) of a table, which hold the rows of its pages
 * [page, page + npages) (counted from the layout's page0). */
struct unwind_segment {
	uint32_t row, nrows;
	uint32_t page, npages;
};

/* An owned plan: where a table is cut. */
struct unwind_layout {
	uint32_t page0, npages; /* the table's pages: page numbers of pcs */
	struct unwind_segment *segs;
	size_t nsegs;
};

/* Cuts t (finished, n > 0) into segments of at most max_rows rows (at
 * least UNWIND_PAGE_ROWS_MAX) on page boundaries. 0, -EINVAL, -ENOMEM, or
 * -E2BIG when the page index itself would exceed max_rows. */
int unwind_layout_plan(const struct unwind_table *t, uint32_t max_rows, struct unwind_layout *l);
void unwind_layout_free(struct unwind_layout *l);
/* Fills pages[0..l->npages) for segments stored at slots seg_slot[i]
 * (segment i's rows copied there in order). */
void unwind_layout_pages(const struct unwind_table *t, const struct unwind_layout *l,
			 const uint32_t *seg_slot, struct unwind_page *pages);

/* A stored table: its page index at slot pages, and how to reach a slot
 * (NULL: not stored). */
struct unwind_paged {
	uint32_t pages, page0, npages;
	const struct unwind_row *(*slot)(void *ctx, uint32_t slot);
	void *ctx;
};
/* The rule of the row covering pc, or -1 (pc outside the table, or before
 * its first row), as the BPF walk finds it. */
int64_t unwind_paged_find(const struct unwind_paged *pt, uint32_t pc);

#endif
