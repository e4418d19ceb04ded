/*
 * dwarf_line_header.c — a .debug_line unit's header and file tables
 * (DWARF 2 to 5): what dwarf_line.c reads before it runs the unit's line
 * program.
 *
 * The header is checked as libdw checks it (unit length within the
 * section, versions 2 to 5, a v5 address size equal to the unit's,
 * standard opcode lengths within the header). The include directories and
 * file names come either as strings up to an empty one (before DWARF 5) or
 * as v5 entry formats; both give the same tables, laid out as libdw names
 * files (see dwarf_line.c): file 0 is "???" before DWARF 5 and the first
 * entry in DWARF 5, directory 0 is DW_AT_comp_dir before DWARF 5. The file
 * tables must end exactly where the header says the program begins.
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "symbols/dwarf_line_header.h"

int kdw_line_bad(struct kiln_error *e, uint64_t off, const char *what)
{
	return kiln_error_set(e, EINVAL, ".debug_line+0x%llx: %s", (unsigned long long)off, what);
}

#define OFF(c) ((uint64_t)((c)->p - u->secs->p[KDW_LINE]))

static int read_header(const struct kdw_line_unit *u, struct kdw_cur *c, struct kdw_line_hdr *h,
		       struct kiln_error *e)
{
	const uint8_t *sec = u->secs->p[KDW_LINE];
	uint64_t len, hlen;

	h->unit_start = u->offset;
	len = kdw_fixed(c, 4);
	if (c->bad)
		return kdw_line_bad(e, u->offset, "truncated unit length");
	if (len == 0xffffffff)
		return kiln_error_set(e, ENOTSUP, ".debug_line+0x%llx: 64-bit DWARF",
				      (unsigned long long)u->offset);
	if (len > (uint64_t)(c->end - c->p))
		return kdw_line_bad(e, u->offset, "unit length past the end of the section");
	c->end = c->p + len;
	h->unit_end = (uint64_t)(c->end - sec);
	h->version = (uint16_t)kdw_fixed(c, 2);
	if (c->bad || h->version < 2 || h->version > 5)
		return kdw_line_bad(e, u->offset + 4, "unsupported line table version");
	if (h->version >= 5) {
		uint8_t asz = kdw_u8(c), seg = kdw_u8(c);

		if (c->bad || asz != u->addr_size || seg != 0)
			return kdw_line_bad(e, u->offset + 6,
					    "address size differs from the unit's");
	}
	hlen = kdw_fixed(c, 4);
	if (c->bad || hlen > (uint64_t)(c->end - c->p))
		return kdw_line_bad(e, OFF(c), "header length past the unit");
	h->prog_start = OFF(c) + hlen;
	h->min_inst_len = kdw_u8(c);
	h->max_ops = h->version >= 4 ? kdw_u8(c) : 1;
	h->default_is_stmt = kdw_u8(c);
	h->line_base = (int8_t)kdw_u8(c);
	h->line_range = kdw_u8(c);
	h->opcode_base = kdw_u8(c);
	if (c->bad || h->max_ops == 0 || h->opcode_base == 0)
		return kdw_line_bad(e, OFF(c), "truncated or invalid header");
	h->std_lengths = c->p;
	kdw_skip(c, h->opcode_base - 1u);
	if (c->bad || OFF(c) > h->prog_start)
		return kdw_line_bad(e, OFF(c), "standard opcode lengths past the header");
	return 0;
}

/* A v5 entry's string attribute of form form. */
static const char *entry_string(const struct kdw_line_unit *u, struct kdw_cur *c, uint64_t form)
{
	uint64_t off;
	size_t n;

	switch (form) {
	case DW_FORM_string:
		return kdw_cstr(c);
	case DW_FORM_line_strp:
		off = kdw_fixed(c, 4);
		return c->bad ? NULL : kdw_str_at(u->secs, KDW_LINE_STR, off);
	case DW_FORM_strp:
		off = kdw_fixed(c, 4);
		return c->bad ? NULL : kdw_str_at(u->secs, KDW_STR, off);
	case DW_FORM_strx:
	case DW_FORM_strx1:
	case DW_FORM_strx2:
	case DW_FORM_strx3:
	case DW_FORM_strx4: {
		struct kdw_cur so;

		n = form == DW_FORM_strx1   ? 1
		    : form == DW_FORM_strx2 ? 2
		    : form == DW_FORM_strx3 ? 3
					    : 4;
		off = form == DW_FORM_strx ? kdw_uleb(c) : kdw_fixed(c, n);
		/* The 4-byte entry must lie inside .debug_str_offsets (which
		 * also rules out an absent section: no pointer arithmetic on
		 * NULL). */
		if (c->bad || off > (UINT64_MAX - u->str_offsets_base - 4) / 4 ||
		    u->str_offsets_base > UINT64_MAX - 4 ||
		    u->str_offsets_base + off * 4 + 4 > u->secs->size[KDW_STR_OFFSETS])
			return NULL;
		so.p = u->secs->p[KDW_STR_OFFSETS] + u->str_offsets_base + off * 4;
		so.end = u->secs->p[KDW_STR_OFFSETS] + u->secs->size[KDW_STR_OFFSETS];
		so.bad = false;
		off = kdw_fixed(&so, 4);
		return so.bad ? NULL : kdw_str_at(u->secs, KDW_STR, off);
	}
	default:
		return NULL;
	}
}

/* A v5 entry's unsigned attribute (the directory index). */
static bool entry_udata(struct kdw_cur *c, uint64_t form, uint64_t *v)
{
	switch (form) {
	case DW_FORM_data1:
		*v = kdw_fixed(c, 1);
		break;
	case DW_FORM_data2:
		*v = kdw_fixed(c, 2);
		break;
	case DW_FORM_data4:
		*v = kdw_fixed(c, 4);
		break;
	case DW_FORM_data8:
		*v = kdw_fixed(c, 8);
		break;
	case DW_FORM_udata:
		*v = kdw_uleb(c);
		break;
	default:
		return false;
	}
	return !c->bad;
}

struct entry_format {
	uint64_t type, form;
};

/* Reads a v5 entry-format list and its entries: directories (files ==
 * false: only the path) or files (path and directory index). */
static int read_v5_entries(const struct kdw_line_unit *u, struct kdw_cur *c, bool files,
			   struct arena *arena, const char ***names, uint32_t **dirs, size_t *n,
			   struct kiln_error *e)
{
	struct entry_format fmt[64];
	uint8_t nfmt = kdw_u8(c);
	int path = -1, dir = -1;
	uint64_t count;

	if (nfmt > sizeof(fmt) / sizeof(fmt[0]))
		return kdw_line_bad(e, OFF(c), "too many entry formats");
	for (int i = 0; i < nfmt; i++) {
		fmt[i].type = kdw_uleb(c);
		fmt[i].form = kdw_uleb(c);
		if (fmt[i].type == DW_LNCT_path)
			path = i;
		else if (fmt[i].type == DW_LNCT_directory_index)
			dir = i;
	}
	count = kdw_uleb(c);
	if (c->bad)
		return kdw_line_bad(e, OFF(c), "truncated entry formats");
	if (nfmt == 0 ? count != 0 : (path < 0 || (files && dir < 0)))
		return kdw_line_bad(e, OFF(c), "entry format without a path or directory index");
	if (nfmt && count > (uint64_t)(c->end - c->p) / nfmt)
		return kdw_line_bad(e, OFF(c), "entry count larger than the header");
	*n = count;
	*names = arena_alloc(arena, (count ? count : 1) * sizeof(**names));
	*dirs = files ? arena_alloc(arena, (count ? count : 1) * sizeof(**dirs)) : NULL;
	if (!*names || (files && !*dirs))
		return -ENOMEM;
	for (uint64_t k = 0; k < count; k++) {
		const char *name = NULL;
		uint64_t d = UINT64_MAX;

		for (int i = 0; i < nfmt; i++) {
			const uint8_t *at = c->p;

			if (i == path) {
				name = entry_string(u, c, fmt[i].form);
				if (!name)
					return kdw_line_bad(e,
							    (uint64_t)(at - u->secs->p[KDW_LINE]),
							    "unreadable entry path");
			} else if (i == dir) {
				if (!entry_udata(c, fmt[i].form, &d))
					return kdw_line_bad(e,
							    (uint64_t)(at - u->secs->p[KDW_LINE]),
							    "unreadable directory index");
			} else if (!kdw_form_skip(c, fmt[i].form, u->addr_size, 5)) {
				return kdw_line_bad(e, (uint64_t)(at - u->secs->p[KDW_LINE]),
						    "unknown form in an entry");
			}
		}
		if (c->bad)
			return kdw_line_bad(e, OFF(c), "truncated entries");
		(*names)[k] = name;
		if (files) {
			if (d > UINT32_MAX)
				return kdw_line_bad(e, OFF(c), "directory index out of range");
			(*dirs)[k] = (uint32_t)d;
		}
	}
	return 0;
}

int kdw_line_files(const struct kdw_line_unit *u, struct kdw_cur *c, const struct kdw_line_hdr *h,
		   struct arena *arena, struct kdw_lines *out, struct kiln_error *e)
{
	static const char unknown[] = "???";

	if (h->version < 5) {
		struct kdw_cur scan = *c;
		size_t ndirs = 1, nfiles = 1;

		/* Count, then fill: directories up to an empty string. */
		while (scan.p < scan.end && *scan.p)
			if (kdw_cstr(&scan))
				ndirs++;
		if (scan.bad || kdw_u8(&scan) != 0)
			return kdw_line_bad(e, OFF(c), "unterminated include directories");
		out->dirs = arena_alloc(arena, ndirs * sizeof(*out->dirs));
		if (!out->dirs)
			return -ENOMEM;
		out->dirs[0] = u->comp_dir;
		for (size_t i = 1; i < ndirs; i++)
			out->dirs[i] = kdw_cstr(c);
		kdw_u8(c);
		out->ndirs = ndirs;
		scan = *c;
		while (scan.p < scan.end && *scan.p) {
			kdw_cstr(&scan);
			kdw_uleb(&scan);
			kdw_uleb(&scan);
			kdw_uleb(&scan);
			if (scan.bad)
				return kdw_line_bad(e, OFF(&scan), "truncated file entry");
			nfiles++;
		}
		if (scan.p >= scan.end)
			return kdw_line_bad(e, OFF(&scan), "unterminated file entries");
		out->files = arena_alloc(arena, nfiles * sizeof(*out->files));
		if (!out->files)
			return -ENOMEM;
		out->files[0] = (struct kdw_file){unknown, NO_DIR};
		for (size_t i = 1; i < nfiles; i++) {
			const char *name = kdw_cstr(c);
			uint64_t d = kdw_uleb(c);

			kdw_uleb(c);
			kdw_uleb(c);
			if (d >= ndirs)
				return kdw_line_bad(e, OFF(c),
						    "file entry's directory index out of range");
			out->files[i] = (struct kdw_file){name, (uint32_t)d};
		}
		kdw_u8(c);
		out->nfiles = nfiles;
	} else {
		const char **dnames, **fnames;
		uint32_t *fdirs, *unused;
		size_t ndirs, nf;
		int rc;

		rc = read_v5_entries(u, c, false, arena, &dnames, &unused, &ndirs, e);
		if (rc < 0)
			return rc;
		out->dirs = dnames;
		out->ndirs = ndirs;
		rc = read_v5_entries(u, c, true, arena, &fnames, &fdirs, &nf, e);
		if (rc < 0)
			return rc;
		/* libdw: entry 0 takes the place of the "???" file; the
		 * others follow, so index i is entry i. */
		out->nfiles = nf ? nf : 1;
		out->files = arena_alloc(arena, out->nfiles * sizeof(*out->files));
		if (!out->files)
			return -ENOMEM;
		out->files[0] = (struct kdw_file){unknown, NO_DIR};
		for (size_t i = 0; i < nf; i++) {
			if (fdirs[i] >= ndirs)
				return kdw_line_bad(e, OFF(c),
						    "file entry's directory index out of range");
			out->files[i] = (struct kdw_file){fnames[i], fdirs[i]};
		}
	}
	if (c->bad || OFF(c) != h->prog_start)
		return kdw_line_bad(e, OFF(c), "file table does not end where the header does");
	out->joined = arena_calloc(arena, out->nfiles, sizeof(*out->joined));
	return out->joined ? 0 : -ENOMEM;
}

int kdw_line_begin(const struct kdw_line_unit *u, struct kdw_line_hdr *h, struct kdw_cur *c,
		   struct kiln_error *e)
{
	const uint8_t *sec = u->secs->p[KDW_LINE];

	if (u->offset >= u->secs->size[KDW_LINE])
		return kiln_error_set(e, EINVAL, ".debug_line: offset 0x%llx past the end (0x%zx)",
				      (unsigned long long)u->offset, u->secs->size[KDW_LINE]);
	if (u->addr_size != 4 && u->addr_size != 8)
		return kiln_error_set(e, EINVAL, ".debug_line+0x%llx: address size %u",
				      (unsigned long long)u->offset, u->addr_size);
	h->secs = u->secs;
	h->addr_size = u->addr_size;
	*c = (struct kdw_cur){sec + u->offset, sec + u->secs->size[KDW_LINE], false};
	return read_header(u, c, h, e);
}
