/*
 * dwarf_line.c — .debug_line programs (DWARF 2 to 5), decoded lazily.
 *
 * Reading a CU's table runs its program once without keeping rows: it
 * validates the program as libdw would and notes each sequence (start
 * offset, lowest and highest address, index of its first row, whether its
 * addresses never decrease) and, in such sorted sequences, the machine's
 * state every KDW_CKPT_EVERY rows. A lookup then runs again only the
 * sequences that may hold the answer, a sorted one from its last
 * checkpoint at or below the address up to the first row above it: a few
 * rows, no row array (libdw mallocs a 40-byte record per row and qsorts
 * them; a per-CU array of our own was still a fifth of a cold run).
 *
 * The results must be libdw's (the symbolizer's answers did not change when
 * this reader replaced it), so the decoding follows what libdw 0.188 does
 * where the standard leaves room: file index 0 is "???" before DWARF 5 and
 * the first file entry in DWARF 5; a relative file name is joined with its
 * directory, and before DWARF 5 directory 0 is DW_AT_comp_dir while other
 * directories are taken as written (not joined with comp_dir); rows sort by
 * address, an end_sequence row before others at the same address, else in
 * program order; the last row is marked end_sequence; values that do not
 * fit libdw's row fields (line, column, op_index, isa) make the table
 * invalid. Where libdw rejects a table, so does this reader (the caller
 * then asks libdw, which gives its own answer). DW_LNE_define_file is left
 * to libdw (-ENOTSUP); DW_FORM_strx in a v5 entry is read through the CU's
 * DW_AT_str_offsets_base.
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
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

static int bad(struct kiln_error *e, uint64_t off, const char *what)
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
		return bad(e, u->offset, "truncated unit length");
	if (len == 0xffffffff)
		return kiln_error_set(e, ENOTSUP, ".debug_line+0x%llx: 64-bit DWARF",
				      (unsigned long long)u->offset);
	if (len > (uint64_t)(c->end - c->p))
		return bad(e, u->offset, "unit length past the end of the section");
	c->end = c->p + len;
	h->unit_end = (uint64_t)(c->end - sec);
	h->version = (uint16_t)kdw_fixed(c, 2);
	if (c->bad || h->version < 2 || h->version > 5)
		return bad(e, u->offset + 4, "unsupported line table version");
	if (h->version >= 5) {
		uint8_t asz = kdw_u8(c), seg = kdw_u8(c);

		if (c->bad || asz != u->addr_size || seg != 0)
			return bad(e, u->offset + 6, "address size differs from the unit's");
	}
	hlen = kdw_fixed(c, 4);
	if (c->bad || hlen > (uint64_t)(c->end - c->p))
		return bad(e, OFF(c), "header length past the unit");
	h->prog_start = OFF(c) + hlen;
	h->min_inst_len = kdw_u8(c);
	h->max_ops = h->version >= 4 ? kdw_u8(c) : 1;
	h->default_is_stmt = kdw_u8(c);
	h->line_base = (int8_t)kdw_u8(c);
	h->line_range = kdw_u8(c);
	h->opcode_base = kdw_u8(c);
	if (c->bad || h->max_ops == 0 || h->opcode_base == 0)
		return bad(e, OFF(c), "truncated or invalid header");
	h->std_lengths = c->p;
	kdw_skip(c, h->opcode_base - 1u);
	if (c->bad || OFF(c) > h->prog_start)
		return bad(e, OFF(c), "standard opcode lengths past the header");
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
		return bad(e, OFF(c), "too many entry formats");
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
		return bad(e, OFF(c), "truncated entry formats");
	if (nfmt == 0 ? count != 0 : (path < 0 || (files && dir < 0)))
		return bad(e, OFF(c), "entry format without a path or directory index");
	if (nfmt && count > (uint64_t)(c->end - c->p) / nfmt)
		return bad(e, OFF(c), "entry count larger than the header");
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
					return bad(e, (uint64_t)(at - u->secs->p[KDW_LINE]),
						   "unreadable entry path");
			} else if (i == dir) {
				if (!entry_udata(c, fmt[i].form, &d))
					return bad(e, (uint64_t)(at - u->secs->p[KDW_LINE]),
						   "unreadable directory index");
			} else if (!kdw_form_skip(c, fmt[i].form, u->addr_size, 5)) {
				return bad(e, (uint64_t)(at - u->secs->p[KDW_LINE]),
					   "unknown form in an entry");
			}
		}
		if (c->bad)
			return bad(e, OFF(c), "truncated entries");
		(*names)[k] = name;
		if (files) {
			if (d > UINT32_MAX)
				return bad(e, OFF(c), "directory index out of range");
			(*dirs)[k] = (uint32_t)d;
		}
	}
	return 0;
}

#define NO_DIR UINT32_MAX

static int read_files(const struct kdw_line_unit *u, struct kdw_cur *c,
		      const struct kdw_line_hdr *h, struct arena *arena, struct kdw_lines *out,
		      struct kiln_error *e)
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
			return bad(e, OFF(c), "unterminated include directories");
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
				return bad(e, OFF(&scan), "truncated file entry");
			nfiles++;
		}
		if (scan.p >= scan.end)
			return bad(e, OFF(&scan), "unterminated file entries");
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
				return bad(e, OFF(c), "file entry's directory index out of range");
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
				return bad(e, OFF(c), "file entry's directory index out of range");
			out->files[i] = (struct kdw_file){fnames[i], fdirs[i]};
		}
	}
	if (c->bad || OFF(c) != h->prog_start)
		return bad(e, OFF(c), "file table does not end where the header does");
	out->joined = arena_calloc(arena, out->nfiles, sizeof(*out->joined));
	return out->joined ? 0 : -ENOMEM;
}

struct state {
	uint64_t addr;
	int64_t line;
	uint32_t file, op_index, column, isa;
	uint8_t is_stmt;
};

static void state_reset(struct state *s, const struct kdw_line_hdr *h)
{
	*s = (struct state){.file = 1, .line = 1, .is_stmt = h->default_is_stmt};
}

static void advance(struct state *s, const struct kdw_line_hdr *h, uint32_t adv)
{
	s->addr += (uint64_t)h->min_inst_len * ((s->op_index + (uint64_t)adv) / h->max_ops);
	s->op_index = (uint32_t)((s->op_index + (uint64_t)adv) % h->max_ops);
}

#define KDW_CKPT_EVERY 8

/* Where a run stops and what it does with each row. */
struct run {
	/* scan: note sequences and checkpoints (growable arrays) and the
	 * last row */
	bool scan;
	struct kdw_seq *seqs;
	size_t nseqs, cap;
	struct kdw_ckpt *ckpts;
	size_t nckpts, ckcap;
	uint32_t seq_rows;
	uint64_t prev_addr;
	/* find: the row libdw's sort puts last among those <= target */
	uint64_t target;
	bool sorted; /* the sequence run is sorted: stop above target */
	bool found, found_end;
	struct kdw_row best;
	uint32_t best_index;
	/* both */
	uint32_t index; /* program-order index of the next row */
	uint64_t last_addr;
	uint32_t last_index;
	bool last_end, any;
};

/* libdw sorts rows by address, an end_sequence row before other rows at
 * the same address, then in program order: is (a, a_end, ai) after
 * (b, b_end, bi)? */
static bool sorts_after(uint64_t a, bool a_end, uint32_t ai, uint64_t b, bool b_end, uint32_t bi)
{
	if (a != b)
		return a > b;
	if (a_end != b_end)
		return b_end;
	return ai > bi;
}

static void row(struct run *r, const struct state *s, bool end)
{
	uint32_t idx = r->index++;

	if (!r->any || sorts_after(s->addr, end, idx, r->last_addr, r->last_end, r->last_index)) {
		r->last_addr = s->addr;
		r->last_end = end;
		r->last_index = idx;
	}
	r->any = true;
	if (!r->scan) {
		if (s->addr <= r->target &&
		    (!r->found ||
		     sorts_after(s->addr, end, idx, r->best.addr, r->found_end, r->best_index))) {
			r->found = true;
			r->found_end = end;
			r->best = (struct kdw_row){s->addr, (int32_t)s->line, s->file};
			r->best_index = idx;
		}
		return;
	}
	struct kdw_seq *q = &r->seqs[r->nseqs - 1]; /* opened by run_program */

	if (r->seq_rows++ && s->addr < r->prev_addr)
		q->sorted = false;
	r->prev_addr = s->addr;
	if (s->addr < q->lo)
		q->lo = s->addr;
	if (s->addr > q->hi)
		q->hi = s->addr;
}

/* Runs the program from offset from (a sequence start) to the end of the
 * unit (scan) or to the end of that sequence (find). */
static int run_program(const struct kdw_line_hdr *h, uint64_t from, const struct state *init,
		       struct run *r, struct kiln_error *e)
{
	const uint8_t *sec = h->secs->p[KDW_LINE];
	struct kdw_cur c = {sec + from, sec + h->unit_end, false};
	struct state s;

	if (init)
		s = *init;
	else
		state_reset(&s, h);
	uint64_t seq_off = from;
	bool seq_open = false;

	while (c.p < c.end) {
		const uint8_t *op_at = c.p;
		uint8_t op = kdw_u8(&c);
		bool emit = false, end = false;

		if (op >= h->opcode_base) {
			if (h->line_range == 0)
				return bad(e, (uint64_t)(op_at - sec),
					   "special opcode with line_range 0");
			s.line += h->line_base + (op - h->opcode_base) % h->line_range;
			advance(&s, h, (uint32_t)((op - h->opcode_base) / h->line_range));
			emit = true;
		} else if (op == 0) {
			uint64_t len = kdw_uleb(&c);
			uint8_t sub;

			if (c.bad || len == 0 || len > (uint64_t)(c.end - c.p))
				return bad(e, (uint64_t)(op_at - sec),
					   "extended opcode past the end");
			sub = kdw_u8(&c);
			switch (sub) {
			case DW_LNE_end_sequence:
				emit = end = true;
				break;
			case DW_LNE_set_address:
				s.op_index = 0;
				s.addr = kdw_fixed(&c, h->addr_size);
				break;
			case DW_LNE_define_file:
				return kiln_error_set(e, ENOTSUP,
						      ".debug_line+0x%llx: DW_LNE_define_file",
						      (unsigned long long)(op_at - sec));
			case DW_LNE_set_discriminator:
				kdw_uleb(&c);
				break;
			default:
				kdw_skip(&c, len - 1);
				break;
			}
		} else if (op <= DW_LNS_set_isa) {
			static const uint8_t nargs[] = {0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};

			/* libdw rejects tables whose header disagrees. */
			if (h->std_lengths[op - 1] != nargs[op])
				return bad(e, (uint64_t)(op_at - sec),
					   "standard opcode with an unexpected operand count");
			switch (op) {
			case DW_LNS_copy:
				emit = true;
				break;
			case DW_LNS_advance_pc:
				advance(&s, h, (uint32_t)kdw_uleb(&c));
				break;
			case DW_LNS_advance_line:
				s.line += (int32_t)kdw_sleb(&c);
				break;
			case DW_LNS_set_file:
				s.file = (uint32_t)kdw_uleb(&c);
				break;
			case DW_LNS_set_column:
				s.column = (uint32_t)kdw_uleb(&c);
				break;
			case DW_LNS_negate_stmt:
				s.is_stmt = 1 - s.is_stmt;
				break;
			case DW_LNS_const_add_pc:
				if (h->line_range == 0)
					return bad(e, (uint64_t)(op_at - sec),
						   "const_add_pc with line_range 0");
				advance(&s, h, (uint32_t)((255 - h->opcode_base) / h->line_range));
				break;
			case DW_LNS_fixed_advance_pc:
				s.addr += kdw_fixed(&c, 2);
				s.op_index = 0;
				break;
			case DW_LNS_set_isa:
				s.isa = (uint32_t)kdw_uleb(&c);
				break;
			default: /* basic_block, prologue_end, epilogue_begin */
				break;
			}
		} else {
			for (int k = h->std_lengths[op - 1]; k > 0; k--)
				kdw_uleb(&c);
		}
		if (c.bad)
			return bad(e, (uint64_t)(op_at - sec), "truncated opcode");
		if (!emit)
			continue;
		/* libdw keeps these in narrower fields and rejects the table
		 * when a value does not fit. */
		if (s.line != (int32_t)s.line || s.column > 0xffff || s.op_index > 0xff ||
		    s.isa > 0xff || r->index == UINT32_MAX - 1)
			return bad(e, (uint64_t)(op_at - sec), "row value out of range");
		if (r->scan && !seq_open) { /* a sequence's first row */
			if (r->nseqs == r->cap) {
				size_t ncap = r->cap ? r->cap * 2 : 16;
				void *p = realloc(r->seqs, ncap * sizeof(*r->seqs));

				if (!p)
					return -ENOMEM;
				r->seqs = p;
				r->cap = ncap;
			}
			r->seqs[r->nseqs++] = (struct kdw_seq){
			    .lo = s.addr,
			    .hi = s.addr,
			    .off = seq_off,
			    .first = r->index,
			    .ck = (uint32_t)r->nckpts,
			    .sorted = true,
			};
			r->seq_rows = 0;
			seq_open = true;
		}
		if (!r->scan && r->sorted && s.addr > r->target)
			return 0; /* the rest of a sorted sequence is above too */
		if (r->scan && !end && r->seq_rows % KDW_CKPT_EVERY == KDW_CKPT_EVERY - 1) {
			if (r->nckpts == r->ckcap) {
				size_t ncap = r->ckcap ? r->ckcap * 2 : 64;
				void *p = realloc(r->ckpts, ncap * sizeof(*r->ckpts));

				if (!p)
					return -ENOMEM;
				r->ckpts = p;
				r->ckcap = ncap;
			}
			r->ckpts[r->nckpts++] = (struct kdw_ckpt){(uint64_t)(c.p - sec),
								  s.addr,
								  s.line,
								  s.file,
								  s.op_index,
								  s.column,
								  s.isa,
								  r->index,
								  s.is_stmt};
			r->seqs[r->nseqs - 1].nck++;
		}
		row(r, &s, end);
		if (end) {
			if (!r->scan)
				return 0;
			state_reset(&s, h);
			seq_off = (uint64_t)(c.p - sec);
			seq_open = false;
		}
	}
	return 0;
}

static int seq_cmp(const void *a, const void *b)
{
	const struct kdw_seq *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

int kdw_lines_read(const struct kdw_line_unit *u, struct arena *arena, struct kdw_lines *out,
		   struct kiln_error *e)
{
	const uint8_t *sec = u->secs->p[KDW_LINE];
	struct kdw_line_hdr *h;
	struct kdw_cur c;
	struct run r = {.scan = true};
	int rc;

	memset(out, 0, sizeof(*out));
	if (u->offset >= u->secs->size[KDW_LINE])
		return kiln_error_set(e, EINVAL, ".debug_line: offset 0x%llx past the end (0x%zx)",
				      (unsigned long long)u->offset, u->secs->size[KDW_LINE]);
	if (u->addr_size != 4 && u->addr_size != 8)
		return kiln_error_set(e, EINVAL, ".debug_line+0x%llx: address size %u",
				      (unsigned long long)u->offset, u->addr_size);
	h = arena_calloc(arena, 1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->secs = u->secs;
	h->addr_size = u->addr_size;
	c = (struct kdw_cur){sec + u->offset, sec + u->secs->size[KDW_LINE], false};
	rc = read_header(u, &c, h, e);
	if (rc == 0)
		rc = read_files(u, &c, h, arena, out, e);
	if (rc == 0)
		rc = run_program(h, h->prog_start, NULL, &r, e);
	if (rc == 0 && r.nseqs) {
		out->seqs = arena_alloc(arena, r.nseqs * sizeof(*out->seqs));
		out->pmax = arena_alloc(arena, r.nseqs * sizeof(*out->pmax));
		out->ckpts = arena_alloc(arena, (r.nckpts ? r.nckpts : 1) * sizeof(*out->ckpts));
		if (!out->seqs || !out->pmax || !out->ckpts) {
			rc = -ENOMEM;
		} else {
			if (r.nckpts)
				memcpy(out->ckpts, r.ckpts, r.nckpts * sizeof(*out->ckpts));
			memcpy(out->seqs, r.seqs, r.nseqs * sizeof(*out->seqs));
			qsort(out->seqs, r.nseqs, sizeof(*out->seqs), seq_cmp);
			for (size_t i = 0; i < r.nseqs; i++)
				out->pmax[i] = i && out->pmax[i - 1] > out->seqs[i].hi
						   ? out->pmax[i - 1]
						   : out->seqs[i].hi;
			out->nseqs = r.nseqs;
		}
	}
	free(r.seqs);
	free(r.ckpts);
	if (rc < 0)
		return rc;
	out->hdr = h;
	out->has_rows = r.any;
	out->last_addr = r.last_addr;
	out->last_index = r.last_index;
	out->last_end = r.last_end;
	return 0;
}

/* Runs sequence q for a lookup: a sorted one from its last checkpoint at
 * or below the target (that row is a candidate: rows before it sort
 * before it) up to the first row above the target; others whole. */
static int run_seq(const struct kdw_lines *l, const struct kdw_seq *q, struct run *r)
{
	size_t lo = 0, hi = q->sorted ? q->nck : 0;
	const struct kdw_ckpt *k;
	struct state s;

	r->sorted = q->sorted;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->ckpts[q->ck + mid].addr <= r->target)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		r->index = q->first;
		return run_program(l->hdr, q->off, NULL, r, NULL);
	}
	k = &l->ckpts[q->ck + lo - 1];
	s = (struct state){k->addr, k->line, k->file, k->op_index, k->column, k->isa, k->is_stmt};
	r->index = k->index;
	row(r, &s, false);
	return run_program(l->hdr, k->off, &s, r, NULL);
}

bool kdw_lines_find(const struct kdw_lines *l, uint64_t addr, struct kdw_row *out)
{
	size_t lo = 0, hi = l->nseqs;
	struct run r = {.target = addr};

	/* Sequences starting at or below addr, from the highest start down,
	 * while one may still hold a row sorting after the best so far. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->seqs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j-- > 0;) {
		const struct kdw_seq *q = &l->seqs[j];

		if (r.found && l->pmax[j] < r.best.addr)
			break;
		if (r.found && (q->hi < addr ? q->hi : addr) < r.best.addr)
			continue;
		if (run_seq(l, q, &r) < 0)
			return false; /* cannot happen: the scan ran the same bytes */
	}
	/* dwarf_getsrc_die: nothing for an end_sequence row, and libdw marks
	 * the row it sorts last as one. */
	if (!r.found || r.found_end ||
	    (r.best.addr == l->last_addr && r.best_index == l->last_index))
		return false;
	*out = r.best;
	return true;
}

const char *kdw_lines_file(struct kdw_lines *l, uint64_t idx, struct arena *arena)
{
	const struct kdw_file *f;
	const char *dir;
	size_t dl, nl;
	char *s;

	if (idx >= l->nfiles)
		return NULL;
	if (l->joined[idx])
		return l->joined[idx];
	f = &l->files[idx];
	dir = f->dir == NO_DIR ? NULL : l->dirs[f->dir];
	if (f->name[0] == '/' || !dir) {
		l->joined[idx] = f->name;
		return f->name;
	}
	dl = strlen(dir);
	nl = strlen(f->name);
	s = arena_alloc(arena, dl + nl + 2);
	if (!s)
		return NULL;
	memcpy(s, dir, dl);
	s[dl] = '/';
	memcpy(s + dl + 1, f->name, nl + 1);
	l->joined[idx] = s;
	return s;
}
