/*
 * dwarf_reader.h — a small DWARF reader for the symbolizer's cold path
 * (internal to src/symbols).
 *
 * libdw answers everything but builds a lot on the way (every DIE's
 * attributes through generic lookups, a malloc'd record per line row, a
 * qsort per line table): on a cold symbolization that touches most CUs of
 * a binary it was two thirds of the time (see docs/PERFORMANCE.md,
 * symbols). This reader decodes straight from the section bytes, per CU
 * and only when an address falls into that CU:
 *
 *   dwarf_form.c  the bottom: section bytes, a bounds-checked cursor,
 *                 strings and attribute forms (dwarf_form.h), which the
 *                 files below read through;
 *   keysearch.h   sorted keys with search levels (one search generated
 *                 for 32- and 64-bit keys), for line rows and, in the
 *                 symbolizer, CU index segments;
 *   dwarf_info.c  unit headers, .debug_aranges, a unit's line table; the
 *                 DIE layer below it (dwarf_die.h): dwarf_walk.c, a DIE
 *                 walk that reports DW_TAG_subprogram / inlined_subroutine
 *                 / entry_point DIEs with code; dwarf_die.c, their ranges
 *                 (low_pc/high_pc or DW_AT_ranges in .debug_ranges /
 *                 .debug_rnglists), their names through abstract_origin /
 *                 specification (also across CUs with DW_FORM_ref_addr),
 *                 strx/addrx/rnglistx through the CU's str_offsets/addr/
 *                 rnglists bases; dwarf_abbrev.c, abbreviation tables.
 *   dwarf_line.c  .debug_line programs, versions 2 to 5 (v5 directory and
 *                 file entry formats, DW_FORM_line_strp / strp / strx),
 *                 into one compact row array per CU (no per-row malloc),
 *                 sorted and searched the way libdw's dwarf_getsrc_die is,
 *                 so that answers are the same; dwarf_line_header.c, the
 *                 unit's header and directory and file tables.
 *
 * What it does not read — 64-bit DWARF, split DWARF (skeleton/.dwo units),
 * type units, dwz's alternate files (DW_FORM_GNU_ref_alt/strp_alt),
 * DW_LNE_define_file, relocatable (ET_REL) objects — makes the CU fail
 * with an error, and the symbolizer then uses libdw for that CU: the
 * reader is a fast path, libdw stays the reference.
 *
 * Every read is bounds-checked against its section; malformed input gives
 * an error naming the section and offset, never a read out of bounds.
 * Strings returned point into the section bytes (or into the reader's
 * arena for joined directory + file names) and live as long as the reader.
 *
 * A reader is for one thread at a time: it fills its caches as it reads.
 * Readers opened on the same section bytes with arenas of their own share
 * nothing they write, and may read on threads of their own.
 */
#ifndef KILN_SYMBOLS_DWARF_READER_H
#define KILN_SYMBOLS_DWARF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

struct arena;

#include "symbols/dwarf_form.h"
#include "symbols/keysearch.h"

/* --- line tables (dwarf_line.c) ------------------------------------------ */

struct kdw_row {
	uint64_t addr;
	int32_t line;
	uint32_t file;
};

struct kdw_file {
	const char *name; /* as in the header */
	uint32_t dir;	  /* index into dirs */
};

struct kdw_row_info {
	int32_t line;
	uint32_t file; /* the top bit: the row ends a sequence (libdw's end_sequence) */
};

struct kdw_lines {
	/* Every row, in the order libdw sorts them (by address, an
	 * end_sequence row before others at the same address, then program
	 * order). The addresses are sorted keys with their search levels
	 * (above), followed by the rows' info from a cache line of its own.
	 * Compact (as all but odd units are): 32-bit offsets from base
	 * (keys32) and info packed in 32 bits (info32: line << (file_bits +
	 * 1) | file << 1 | ends a sequence), 16 of each to a line; wide, when
	 * the rows span 4 GiB or more or their lines and files do not fit:
	 * the addresses themselves (keys64) and struct kdw_row_info. Read
	 * them through kdw_lines_addr and kdw_lines_info. (The fields a
	 * lookup reads come first, in 40 bytes: the symbolizer keeps a copy
	 * of this struct in one cache line with its own per-CU fields.) */
	union {
		uint32_t *keys32;
		uint64_t *keys64;
	};
	union {
		uint32_t *info32;
		struct kdw_row_info *info;
	};
	uint64_t base;
	size_t nrows;
	bool wide;
	uint8_t file_bits;
	/* The rest is for names, not read per lookup. */
	size_t nfiles;
	const char **joined;	/* files[i] as libdw names it, built on demand */
	struct kdw_file *files; /* index 0: "???" before v5 (files count from 1) */
	const char **dirs;	/* dirs[0]: comp_dir before v5, the first entry in v5 */
	size_t ndirs;
};

/* The address of row i (i < l->nrows). */
static inline uint64_t kdw_lines_addr(const struct kdw_lines *l, size_t i)
{
	return l->wide ? l->keys64[i] : l->base + l->keys32[i];
}

/* The info of row i (i < l->nrows), as wide tables hold it. */
static inline struct kdw_row_info kdw_lines_info(const struct kdw_lines *l, size_t i)
{
	uint32_t v;

	if (l->wide)
		return l->info[i];
	v = l->info32[i];
	return (struct kdw_row_info){(int32_t)(v >> (l->file_bits + 1)),
				     ((v >> 1) & ((1u << l->file_bits) - 1)) | (v & 1) << 31};
}

/* Growable arrays a reader reuses from one line program to the next. */
struct kdw_special {
	int16_t dline;
	uint8_t adv;
};

struct kdw_line_scratch {
	struct srow *rows;
	size_t cap_rows;
	struct sseq *seqs;
	size_t cap_seqs;
	uint32_t *order;
	size_t cap_order;
	struct srow *kept; /* the rows kept when rows are not in order */
	size_t cap_kept;
	/* Special opcodes' line and address advances for these parameters. */
	struct kdw_special special[256];
	uint8_t special_base, special_range;
	int8_t special_line_base;
	bool special_valid;
};

void kdw_line_scratch_free(struct kdw_line_scratch *sc);

/* What decoding a CU's line program needs from the CU. */
struct kdw_line_unit {
	const struct kdw_sections *secs;
	uint64_t offset; /* DW_AT_stmt_list */
	uint8_t addr_size;
	const char *comp_dir;	   /* DW_AT_comp_dir, NULL if none */
	uint64_t str_offsets_base; /* for DW_FORM_strx in v5 entry formats */
};

/* Reads the line program header at u->offset and runs the program once
 * (validating it as libdw would) into *out, memory from arena; scratch
 * (NULL: a temporary one) holds the rows meanwhile. Returns 0, -EINVAL
 * (malformed: e says what and where), -ENOTSUP (a feature left to libdw)
 * or -ENOMEM. */
int kdw_lines_read(const struct kdw_line_unit *u, struct arena *arena,
		   struct kdw_line_scratch *scratch, struct kdw_lines *out, struct kiln_error *e);

/* For a batch of ascending addresses want[0 .. nwant): what kdw_lines_find
 * would answer for each (found[i], rows[i]; rows[i].addr is only at or
 * below want[i]), from one run of the program that builds no table when
 * its rows ascend as written, as nearly all do (*complete false: out holds
 * the file names only, nrows 0); otherwise out is the whole table, as
 * kdw_lines_read makes it (*complete true). names: this unit's table (of
 * an earlier call) whose file names are taken instead of read again, or
 * NULL. scratch as for kdw_lines_read. Returns as kdw_lines_read. */
int kdw_lines_match(const struct kdw_line_unit *u, struct arena *arena,
		    struct kdw_line_scratch *scratch, const struct kdw_lines *names,
		    const uint64_t *want, size_t nwant, struct kdw_row *rows, bool *found,
		    struct kdw_lines *out, bool *complete, struct kiln_error *e);

/* The line and file of the row dwarf_getsrc_die would return for addr:
 * true and *row, or false. row->addr is at or below addr: that row's, or
 * of the row before it when that one has the same line and file (such
 * rows are not kept). */
bool kdw_lines_find(const struct kdw_lines *l, uint64_t addr, struct kdw_row *row);

/* The name libdw gives file index idx (dwarf_filesrc / dwarf_linesrc):
 * absolute names as they are, others prefixed with their directory and
 * "/". NULL when idx is out of range (or out of memory). */
const char *kdw_lines_file(struct kdw_lines *l, uint64_t idx, struct arena *arena);

/* --- units and DIEs (dwarf_info.c) ---------------------------------------- */

struct kdw_abbrevs;

struct kdw_cu {
	uint64_t offset;     /* of the unit header in .debug_info */
	uint64_t die_offset; /* of the unit DIE: the CU's key */
	uint64_t end;	     /* one past the unit */
	uint64_t abbrev_offset;
	uint16_t version;
	uint8_t unit_type, addr_size;
	bool supported; /* false: leave this unit to libdw */
	/* From the unit DIE, read on first use (base_read). */
	bool base_read, base_ok;
	uint64_t low_pc; /* base address of range lists: low_pc, entry_pc or 0 */
	uint64_t str_offsets_base, addr_base, rnglists_base;
	bool has_stmt_list;
	bool lang_c; /* DW_AT_language is a C: no functions inside structures */
	uint64_t stmt_list;
	const char *comp_dir;
	struct kdw_abbrevs *abbrevs;
	bool lines_read;
	struct kdw_lines *lines;      /* NULL: none, or unreadable (lines_err) */
	struct kdw_lines *line_names; /* kdw_cu_lines_match's: file names, no rows */
	int lines_err;
	void *user; /* the caller's (the symbolizer's CU index) */
};

struct kdw;

/* Reads the unit headers and .debug_aranges of secs (which must outlive
 * the reader). Its memory comes from arena (which must outlive it too), or
 * from an arena of its own when arena is NULL. Returns NULL on
 * out-of-memory or when .debug_info cannot be walked at all (e says why). */
struct kdw *kdw_open(const struct kdw_sections *secs, struct arena *arena, struct kiln_error *e);
void kdw_close(struct kdw *d);

/* A reader of src's sections and units, for another thread: the unit
 * headers are copied (not what src has read in the units since), memory as
 * for kdw_open. It has no address ranges: its units are reached by
 * kdw_cu_at. It reads only src's unit headers, which nothing changes after
 * kdw_open: another thread may read with src meanwhile. NULL on
 * out-of-memory. */
struct kdw *kdw_clone_units(const struct kdw *src, struct arena *arena, struct kiln_error *e);

/* A stream reader: one that reads .debug_info while another thread is
 * still inflating it, front to back (the section's bytes below an offset
 * the caller knows to be written). It reads .debug_aranges at once and
 * has no unit table: a unit is read when asked for by its offset, once all
 * of it is there, and a reference into another unit is an error (the
 * caller leaves that unit to a reader opened on the whole section). Its
 * address ranges are .debug_aranges' alone, not checked against the units
 * (kdw_open's reader does that): a caller keeping what it found must check
 * that the whole reader maps the same addresses to the same units (same
 * kdw_naranges, kdw_aranges_whole). NULL on out-of-memory. */
struct kdw *kdw_open_stream(const struct kdw_sections *secs, struct arena *arena,
			    struct kiln_error *e);

/* The offset of the unit that .debug_aranges names for addr in a stream
 * reader, or UINT64_MAX. */
uint64_t kdw_stream_unit_offset(const struct kdw *d, uint64_t addr);

/* A stream reader's unit at off, given that .debug_info's bytes below
 * avail are there: NULL with e unset when not all of the unit is there
 * yet; NULL with e set when there is no unit at off (or out of memory). */
struct kdw_cu *kdw_stream_unit(struct kdw *d, uint64_t off, size_t avail, struct kiln_error *e);

/* The unit whose header is at off in .debug_info (a reader opened by
 * kdw_open), or NULL. */
struct kdw_cu *kdw_unit_at(struct kdw *d, uint64_t off);

/* The number of address ranges (those .debug_aranges gave, and those
 * kdw_open added for units it names none for). */
size_t kdw_naranges(const struct kdw *d);

/* The unit .debug_aranges names for addr (its DIE offset is the key), or
 * NULL when no arange covers it. */
struct kdw_cu *kdw_cu_for_addr(struct kdw *d, uint64_t addr);

/* As kdw_cu_for_addr (the unit in *cu), returning a pointer the caller
 * may keep with the address range that matched (NULL at first; NULL
 * returned when no range covers addr): the symbolizer keeps its CU index
 * there, which saves it a cache miss on the unit per address. */
void **kdw_arange_user(struct kdw *d, uint64_t addr, struct kdw_cu **cu);

/* True when .debug_aranges was read whole (or is absent): every address
 * libdw's dwarf_addrdie would find a unit for, kdw_cu_for_addr finds too. */
bool kdw_aranges_whole(const struct kdw *d);

/* A function DIE with code, as the walk reports it. */
struct kdw_func {
	const char *name;	  /* DW_AT_name, through origin/specification */
	const char *linkage_name; /* DW_AT_linkage_name or MIPS_linkage_name, same */
	int64_t decl_line;	  /* 0 when none */
	bool inlined;		  /* DW_TAG_inlined_subroutine */
	bool has_call_file, has_call_line;
	uint64_t call_file, call_line;
};

struct kdw_walk_ops {
	void *ctx;
	/* A function DIE with at least one range: returns its node id (>= 0),
	 * or -1 to stop (out of memory). parent is the enclosing one's, -1. */
	int32_t (*func)(void *ctx, const struct kdw_func *fn, int32_t parent);
	/* One of its ranges [low, high), depth its nesting depth. */
	int (*range)(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth);
	/* Optional, ascending: the only addresses the caller asks about. A
	 * function none of whose ranges holds one of them is then treated as
	 * one without code: not reported, its subtree stepped over (so are
	 * the names of its abstract origin, most of a walk's cache misses).
	 * NULL: every function is reported. */
	const uint64_t *want;
	size_t nwant;
};

/* Walks cu's DIE tree the way the symbolizer's libdw index did: into
 * subprograms with code, lexical blocks, namespaces, modules, classes,
 * structures and unions (not a C unit's: C puts no functions there),
 * reporting functions with code and their ranges.
 * Returns 0, -EINVAL / -ENOTSUP (e says what and where: the caller falls
 * back to libdw) or -ENOMEM. */
int kdw_walk_cu(struct kdw *d, struct kdw_cu *cu, const struct kdw_walk_ops *ops,
		struct kiln_error *e);

/* The number of units, and the ordinal of cu among them (0 .. kdw_ncus):
 * for tables the caller keeps per unit. */
size_t kdw_ncus(const struct kdw *d);
size_t kdw_cu_ordinal(const struct kdw *d, const struct kdw_cu *cu);
/* The unit of ordinal i (< kdw_ncus): two readers opened on the same
 * sections number their units alike. */
struct kdw_cu *kdw_cu_at(struct kdw *d, size_t i);

/* kdw_lines_match for cu (its table kept when whole, its file names kept
 * otherwise, for the next batch); *names: what kdw_lines_file takes for
 * the rows' files. With the table kept already, kdw_lines_find answers.
 * Returns 0, or an error as kdw_cu_lines (e set). */
int kdw_cu_lines_match(struct kdw *d, struct kdw_cu *cu, const uint64_t *want, size_t nwant,
		       struct kdw_row *rows, bool *found, struct kdw_lines **names,
		       struct kiln_error *e);

/* cu's line table, decoded on first use and kept. Returns NULL with e set
 * when it cannot be read (no DW_AT_stmt_list: e->code ENOENT). */
struct kdw_lines *kdw_cu_lines(struct kdw *d, struct kdw_cu *cu, struct kiln_error *e);

/* The reader's arena (for kdw_lines_file). */
struct arena *kdw_arena(struct kdw *d);

#endif
