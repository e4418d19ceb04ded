/*
 * dwarf_line_header.h — a .debug_line unit's header and file tables,
 * read by dwarf_line_header.c for the line programs of dwarf_line.c
 * (internal to src/symbols: the layer just below dwarf_line.c).
 */
#ifndef KILN_SYMBOLS_DWARF_LINE_HEADER_H
#define KILN_SYMBOLS_DWARF_LINE_HEADER_H

#include "symbols/dwarf_reader.h"

struct kdw_line_hdr {
	const struct kdw_sections *secs;
	uint8_t addr_size;
	uint64_t unit_start, unit_end, prog_start; /* offsets in .debug_line */
	uint16_t version;
	uint8_t min_inst_len, max_ops, default_is_stmt, line_range, opcode_base;
	int8_t line_base;
	const uint8_t *std_lengths; /* [opcode_base - 1], index opcode - 1 */
};

/* kdw_file.dir of a file without a directory (the "???" entry). */
#define NO_DIR UINT32_MAX

/* Sets e to ".debug_line+0xOFF: what"; returns -EINVAL. */
int kdw_line_bad(struct kiln_error *e, uint64_t off, const char *what);

/* Checks u and reads its program's header into *h, leaving *c after it:
 * 0, or -EINVAL / -ENOTSUP (64-bit DWARF) with e set. */
int kdw_line_begin(const struct kdw_line_unit *u, struct kdw_line_hdr *h, struct kdw_cur *c,
		   struct kiln_error *e);

/* Reads the directory and file tables at *c into out (allocated in
 * arena), leaving *c at the program: 0, -EINVAL with e set, or -ENOMEM. */
int kdw_line_files(const struct kdw_line_unit *u, struct kdw_cur *c, const struct kdw_line_hdr *h,
		   struct arena *arena, struct kdw_lines *out, struct kiln_error *e);

#endif
