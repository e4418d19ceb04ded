/*
 * dwarf_line.c — .debug_line programs (DWARF 2 to 5).
 *
 * Reading a CU's table runs its program once, validating it as libdw
 * would, into two arrays in the reader's arena: row addresses and (line,
 * file, end_sequence), in libdw's order, the addresses (32-bit offsets
 * from the unit's lowest, 16 to a cache line) with search levels in front
 * (kdw_keys32_*, keysearch.h) so that a lookup on a table long out of
 * cache takes two or three misses. The rows are noted in program order in
 * a scratch array reused from one CU to the next and sized once per
 * program; laid out sequence by sequence (by lowest address) they are
 * almost always in libdw's order already, which the run notes as it goes
 * (the rows kept are then compacted in place), and a merge sort makes them
 * otherwise. (libdw mallocs a 40-byte record per row and qsorts them.
 * Keeping every row costs memory that keeping the machine's state every
 * few rows and re-running the program per lookup would not, but in huge
 * pages fresh memory is cheap, and the arrays are faster both to build and
 * to search.) The unit's header and file tables are read first, by
 * dwarf_line_header.c.
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
#include "symbols/dwarf_line_header.h"
#include "symbols/dwarf_reader.h"

#define KDW_ROW_END  0x80000000u /* in kdw_row_info.file */
#define KDW_ROW_FILE 0x7fffffffu /* file indexes from here on are clamped */

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
	if (h->max_ops == 1) { /* not VLIW: no division (op_index stays 0) */
		s->addr += (uint64_t)h->min_inst_len * adv;
		return;
	}
	s->addr += (uint64_t)h->min_inst_len * ((s->op_index + (uint64_t)adv) / h->max_ops);
	s->op_index = (uint32_t)((s->op_index + (uint64_t)adv) % h->max_ops);
}

/* A row in program order, as the scan notes it. */
struct srow {
	uint64_t addr;
	int32_t line;
	uint32_t file; /* KDW_ROW_END set: an end_sequence row */
};

/* One sequence: rows[first .. first + n). */
struct sseq {
	uint64_t lo;
	uint32_t first, n;
};

/* The line and operation advance of each special opcode of h, without a
 * division per opcode: units share their header's parameters, so the
 * table is made again only when they change. */
static const struct kdw_special *specials(struct kdw_line_scratch *sc, const struct kdw_line_hdr *h)
{
	if (!sc->special_valid || sc->special_base != h->opcode_base ||
	    sc->special_line_base != h->line_base || sc->special_range != h->line_range) {
		for (unsigned op = h->opcode_base; op < 256; op++) {
			sc->special[op].dline =
			    (int16_t)(h->line_base + (int)((op - h->opcode_base) % h->line_range));
			sc->special[op].adv = (uint8_t)((op - h->opcode_base) / h->line_range);
		}
		sc->special_base = h->opcode_base;
		sc->special_line_base = h->line_base;
		sc->special_range = h->line_range;
		sc->special_valid = true;
	}
	return sc->special;
}

#define MAX_PRESIZED_ROWS ((size_t)4 << 20)

/* Runs the whole program once, validating it as libdw does and noting
 * every row (program order) and sequence into sc. bad_std: the standard
 * opcodes whose operand count in the header is not the standard's (libdw
 * rejects a table using one). plain, a constant: the header is the usual
 * one (special opcodes, no VLIW, standard operand counts) and the program
 * short enough for the row array sized up front, so that the loop has
 * none of the checks these need (the function is made twice). */
static inline __attribute__((always_inline)) int
run_program_as(const struct kdw_line_hdr *h, struct kdw_line_scratch *sc, uint32_t bad_std,
	       const bool plain, size_t *nrows, size_t *nseqs, bool *ordered, struct kiln_error *e)
{
	const uint8_t *sec = h->secs->p[KDW_LINE];
	struct kdw_cur c = {sec + h->prog_start, sec + h->unit_end, false};
	const struct kdw_special *sp = h->line_range ? specials(sc, h) : NULL;
	struct state s;
	size_t n = 0, nq = 0, presize;
	bool seq_open = false;
	/* The column or isa does not fit libdw's row fields (checked where
	 * they are set, not per row; op_index stays below max_ops <= 255). */
	bool wide = false;
	uint64_t seq_lo = 0; /* the open sequence's lowest address */
	/* The rows ascend as written (and so do the sequences): noted here
	 * rather than in a pass of order_rows over every row. */
	uint64_t prev_addr = 0;
	bool ascending = true;

	/* Every row takes at least one opcode byte: the row array is sized
	 * once per program for that many (not grown row by row: each realloc
	 * that moves a large array faults its pages in again), up to 4M rows
	 * so that a forged program's length reserves no gigabytes. */
	presize = (size_t)(c.end - c.p);
	if (presize > MAX_PRESIZED_ROWS)
		presize = MAX_PRESIZED_ROWS;
	if (!kdw_grow(&sc->rows, &sc->cap_rows, presize, sizeof(*sc->rows), 256, false))
		return -ENOMEM;
	state_reset(&s, h);
	while (c.p < c.end) {
		const uint8_t *op_at = c.p;
		uint8_t op = kdw_u8(&c);
		bool end = false;

		if (op >= h->opcode_base) {
			if (!plain && !sp)
				return kdw_line_bad(e, (uint64_t)(op_at - sec),
						    "special opcode with line_range 0");
			s.line += sp[op].dline;
			if (plain)
				s.addr += (uint64_t)h->min_inst_len * sp[op].adv;
			else
				advance(&s, h, sp[op].adv);
		} else if (op == 0) {
			uint64_t len = kdw_uleb(&c);
			uint8_t sub;

			if (c.bad || len == 0 || len > (uint64_t)(c.end - c.p))
				return kdw_line_bad(e, (uint64_t)(op_at - sec),
						    "extended opcode past the end");
			sub = kdw_u8(&c);
			switch (sub) {
			case DW_LNE_end_sequence:
				end = true;
				break;
			case DW_LNE_set_address:
				s.op_index = 0;
				s.addr = kdw_fixed(&c, h->addr_size);
				continue;
			case DW_LNE_define_file:
				return kiln_error_set(e, ENOTSUP,
						      ".debug_line+0x%llx: DW_LNE_define_file",
						      (unsigned long long)(op_at - sec));
			case DW_LNE_set_discriminator:
				kdw_uleb(&c);
				continue;
			default:
				kdw_skip(&c, len - 1);
				continue;
			}
		} else if (op <= DW_LNS_set_isa) {
			/* libdw rejects tables whose header disagrees. */
			if (!plain && (bad_std & (1u << op)))
				return kdw_line_bad(
				    e, (uint64_t)(op_at - sec),
				    "standard opcode with an unexpected operand count");
			switch (op) {
			case DW_LNS_copy:
				break;
			case DW_LNS_advance_pc:
				advance(&s, h, (uint32_t)kdw_uleb(&c));
				continue;
			case DW_LNS_advance_line:
				s.line += (int32_t)kdw_sleb(&c);
				continue;
			case DW_LNS_set_file:
				s.file = (uint32_t)kdw_uleb(&c);
				continue;
			case DW_LNS_set_column:
				s.column = (uint32_t)kdw_uleb(&c);
				wide = s.column > 0xffff || s.isa > 0xff;
				continue;
			case DW_LNS_negate_stmt:
				s.is_stmt = 1 - s.is_stmt;
				continue;
			case DW_LNS_const_add_pc:
				if (!plain && !sp)
					return kdw_line_bad(e, (uint64_t)(op_at - sec),
							    "const_add_pc with line_range 0");
				advance(&s, h, sp[255].adv);
				continue;
			case DW_LNS_fixed_advance_pc:
				s.addr += kdw_fixed(&c, 2);
				s.op_index = 0;
				continue;
			case DW_LNS_set_isa:
				s.isa = (uint32_t)kdw_uleb(&c);
				wide = s.column > 0xffff || s.isa > 0xff;
				continue;
			default: /* basic_block, prologue_end, epilogue_begin */
				continue;
			}
		} else {
			for (int k = h->std_lengths[op - 1]; k > 0; k--)
				kdw_uleb(&c);
			continue;
		}
		/* A row: a special opcode, DW_LNS_copy or end_sequence. */
		if (c.bad)
			return kdw_line_bad(e, (uint64_t)(op_at - sec), "truncated opcode");
		/* libdw keeps these in narrower fields and rejects the table
		 * when a value does not fit. */
		if (s.line != (int32_t)s.line || wide || (!plain && n >= UINT32_MAX - 1))
			return kdw_line_bad(e, (uint64_t)(op_at - sec), "row value out of range");
		if (!seq_open) {
			if (!kdw_grow(&sc->seqs, &sc->cap_seqs, nq + 1, sizeof(*sc->seqs), 256,
				      false))
				return -ENOMEM;
			sc->seqs[nq++] = (struct sseq){s.addr, (uint32_t)n, 0};
			seq_open = true;
			seq_lo = s.addr;
		}
		if (!plain && n == sc->cap_rows &&
		    !kdw_grow(&sc->rows, &sc->cap_rows, n + 1, sizeof(*sc->rows), 256, false))
			return -ENOMEM;
		/* A file index past KDW_ROW_FILE names no file either way. */
		sc->rows[n++] = (struct srow){s.addr, (int32_t)s.line,
					      (s.file < KDW_ROW_FILE ? s.file : KDW_ROW_FILE) |
						  (end ? KDW_ROW_END : 0)};
		if (s.addr < seq_lo)
			seq_lo = s.addr;
		ascending &= prev_addr <= s.addr;
		prev_addr = s.addr;
		if (end) {
			sc->seqs[nq - 1].lo = seq_lo;
			state_reset(&s, h);
			seq_open = false;
			wide = false;
		}
	}
	if (c.bad)
		return kdw_line_bad(e, (uint64_t)(c.p - sec), "truncated opcode");
	if (seq_open)
		sc->seqs[nq - 1].lo = seq_lo;
	/* Sequences are contiguous in program order. */
	for (size_t q = 0; q < nq; q++)
		sc->seqs[q].n =
		    (uint32_t)((q + 1 < nq ? sc->seqs[q + 1].first : n) - sc->seqs[q].first);
	*nrows = n;
	*nseqs = nq;
	*ordered = ascending;
	return 0;
}

static int run_program(const struct kdw_line_hdr *h, struct kdw_line_scratch *sc, size_t *nrows,
		       size_t *nseqs, bool *ordered, struct kiln_error *e)
{
	static const uint8_t nargs[] = {0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
	uint32_t bad_std = 0;

	for (unsigned op = 1; op <= DW_LNS_set_isa && op < h->opcode_base; op++)
		if (h->std_lengths[op - 1] != nargs[op])
			bad_std |= 1u << op;
	/* (In plain programs n stays below the row array's size, 4M.) */
	if (h->line_range && h->max_ops == 1 && !bad_std &&
	    h->unit_end - h->prog_start <= MAX_PRESIZED_ROWS)
		return run_program_as(h, sc, 0, true, nrows, nseqs, ordered, e);
	return run_program_as(h, sc, bad_std, false, nrows, nseqs, ordered, e);
}

/* libdw's order of rows: by address, an end_sequence row before other
 * rows at the same address, then program order (index). */
static bool row_before(const struct srow *a, uint32_t ai, const struct srow *b, uint32_t bi)
{
	if (a->addr != b->addr)
		return a->addr < b->addr;
	if ((a->file & KDW_ROW_END) != (b->file & KDW_ROW_END))
		return a->file & KDW_ROW_END;
	return ai < bi;
}

static int sseq_cmp(const void *x, const void *y)
{
	const struct sseq *a = x, *b = y;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->first < b->first ? -1 : a->first > b->first;
}

/* Bottom-up stable merge sort of the program-order indexes idx[0..n) by
 * row_before, with tmp as the buffer; returns the sorted array. */
static uint32_t *sort_rows(const struct srow *rows, uint32_t *idx, uint32_t *tmp, size_t n)
{
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = row_before(&rows[idx[j]], idx[j], &rows[idx[i]], idx[i])
					       ? idx[j++]
					       : idx[i++];
			while (i < mid)
				tmp[k++] = idx[i++];
			while (j < hi)
				tmp[k++] = idx[j++];
		}
		uint32_t *t = idx;
		idx = tmp;
		tmp = t;
	}
	return idx;
}

/* A 64-byte aligned block of n bytes from arena. */
static void *alloc_lines(struct arena *arena, size_t n)
{
	uint8_t *p = arena_alloc(arena, n + 48); /* the arena aligns to 16 */

	return p ? p + ((64 - (uintptr_t)p % 64) % 64) : NULL;
}

/* Copies the k rows kept (ascending) into out's arrays (in arena, one
 * block): the addresses as sorted keys with their search levels, then info
 * from a line of its own; compact (see struct kdw_lines) when the rows
 * span less than 4 GiB and their lines and files fit 31 bits. */
static int rows_out(const struct srow *kept, size_t k, struct arena *arena, struct kdw_lines *out)
{
	uint32_t max_file = 0, max_line = 0, file_bits = 0;
	bool wide = k && kept[k - 1].addr - kept[0].addr > UINT32_MAX;
	size_t bytes;
	uint8_t *block;

	for (size_t i = 0; i < k && !wide; i++) {
		max_file |= kept[i].file & ~KDW_ROW_END;
		wide = kept[i].line < 0;
		max_line |= (uint32_t)kept[i].line;
	}
	while (file_bits < 31 && max_file >> file_bits)
		file_bits++;
	wide = wide || file_bits > 30 || (uint64_t)max_line << (file_bits + 1) > UINT32_MAX;
	bytes =
	    wide ? kdw_keys64_words(k) * sizeof(uint64_t) : kdw_keys32_words(k) * sizeof(uint32_t);
	block = alloc_lines(arena, bytes + (k ? k : 1) *
					       (wide ? sizeof(*out->info) : sizeof(*out->info32)));
	if (!block)
		return -ENOMEM;
	out->wide = wide;
	out->file_bits = (uint8_t)file_bits;
	out->base = k ? kept[0].addr : 0;
	if (wide) {
		out->keys64 = kdw_keys64_at((uint64_t *)block, k);
		out->info = (struct kdw_row_info *)(block + bytes);
		for (size_t i = 0; i < k; i++) {
			out->keys64[i] = kept[i].addr;
			out->info[i] = (struct kdw_row_info){kept[i].line, kept[i].file};
		}
		kdw_keys64_finish(out->keys64, k);
	} else {
		out->keys32 = kdw_keys32_at((uint32_t *)block, k);
		out->info32 = (uint32_t *)(block + bytes);
		for (size_t i = 0; i < k; i++) {
			out->keys32[i] = (uint32_t)(kept[i].addr - out->base);
			out->info32[i] = (uint32_t)kept[i].line << (file_bits + 1) |
					 (kept[i].file & ~KDW_ROW_END) << 1 |
					 !!(kept[i].file & KDW_ROW_END);
		}
		kdw_keys32_finish(out->keys32, k);
	}
	out->nrows = k;
	return 0;
}

/* The rows order_rows keeps of rows[0 .. n) when they ascend as written
 * (see there), in place at the front; returns how many. */
static size_t fold_rows(struct srow *rows, size_t n)
{
	size_t k = 0;

	for (size_t i = 0, j; i < n; i = j) {
		struct srow best = rows[i];

		/* Of a run at one address, the last row unless it ends a
		 * sequence and an earlier one does not. */
		for (j = i + 1; j < n && rows[j].addr == best.addr; j++)
			if (!(rows[j].file & KDW_ROW_END) || (best.file & KDW_ROW_END))
				best = rows[j];
		if (j < n && k && rows[k - 1].file == best.file && rows[k - 1].line == best.line)
			continue;
		rows[k++] = best;
	}
	rows[k - 1].file |= KDW_ROW_END;
	return k;
}

/* The rows libdw's lookup can return, in its order, into out's arrays (in
 * arena). libdw sorts rows by address, an end_sequence row before others at
 * the same address, then in program order; its lookup returns the last row
 * at or below an address, so of the rows at one address only the one
 * sorted last counts: the non-end_sequence row written last, else the
 * end_sequence row written last. A row that repeats the line and file of
 * the one kept before it (neither ending a sequence) answers as that one
 * does and goes too: a third to a half of the rows (gcc writes several per
 * address: views, is_stmt changes). The last row stays, as libdw marks it
 * as ending a sequence. Laid out sequence by sequence (by lowest address),
 * the addresses almost always ascend already (ordered: run_program saw
 * them ascend as written, and the rows kept are then taken in one tight
 * pass); they are merge sorted otherwise. */
static int order_rows(struct kdw_line_scratch *sc, size_t n, size_t nq, bool ordered,
		      struct arena *arena, struct kdw_lines *out)
{
	struct srow *rows = sc->rows, *kept = sc->rows;
	uint32_t *order = NULL, *idx = NULL;
	size_t k = 0;
	bool ascending = true;

	if (ordered) {
		/* The usual case: rows ascending as written, program order is
		 * libdw's, and the rows kept overwrite the ones read. */
		k = fold_rows(rows, n);
		return rows_out(rows, k, arena, out);
	}
	if (nq > 1)
		qsort(sc->seqs, nq, sizeof(*sc->seqs), sseq_cmp);
	/* Usually the sequences are already in address order (one per unit,
	 * mostly) and so are their rows: then the program order is libdw's
	 * and no index array is needed (idx stays NULL). */
	for (size_t q = 1; q < nq && ascending; q++)
		ascending = sc->seqs[q].first > sc->seqs[q - 1].first;
	for (size_t i = 1; i < n && ascending; i++)
		ascending = rows[i - 1].addr <= rows[i].addr;
	if (!ascending) {
		ascending = true;
		if (!kdw_grow(&sc->order, &sc->cap_order, 2 * n, sizeof(*sc->order), 256, false))
			return -ENOMEM;
		order = sc->order;
		for (size_t q = 0; q < nq; q++)
			for (uint32_t i = sc->seqs[q].first; i < sc->seqs[q].first + sc->seqs[q].n;
			     i++) {
				if (k && rows[order[k - 1]].addr > rows[i].addr)
					ascending = false;
				order[k++] = i;
			}
		idx = ascending ? order : sort_rows(rows, order, order + n, n);
	}
	/* In program order the rows kept overwrite the scanned ones (the
	 * k-th kept row is written after rows[0 .. k] were read); sorted
	 * through idx, they go to a scratch array of their own. */
	if (idx) {
		if (!kdw_grow(&sc->kept, &sc->cap_kept, n, sizeof(*sc->kept), 256, false))
			return -ENOMEM;
		kept = sc->kept;
	}
	k = 0;
	for (size_t i = 0, j; i < n; i = j) {
		uint32_t best = idx ? idx[i] : (uint32_t)i;
		uint64_t at = rows[best].addr;

		/* The run of rows at this address: [i, j). */
		for (j = i + 1; j < n; j++) {
			uint32_t r = idx ? idx[j] : (uint32_t)j;

			if (rows[r].addr != at)
				break;
			if (!row_before(&rows[r], r, &rows[best], best))
				best = r;
		}

		const struct srow r = rows[best];

		if (j < n && k && kept[k - 1].file == r.file && kept[k - 1].line == r.line)
			continue;
		kept[k++] = r;
	}
	kept[k - 1].file |= KDW_ROW_END;
	return rows_out(kept, k, arena, out);
}

int kdw_lines_read(const struct kdw_line_unit *u, struct arena *arena,
		   struct kdw_line_scratch *scratch, struct kdw_lines *out, struct kiln_error *e)
{
	struct kdw_line_scratch own = {0};
	struct kdw_line_scratch *sc = scratch ? scratch : &own;
	struct kdw_line_hdr h = {0};
	struct kdw_cur c;
	size_t n = 0, nq = 0;
	bool ordered = false;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = kdw_line_begin(u, &h, &c, e);
	if (rc == 0)
		rc = kdw_line_files(u, &c, &h, arena, out, e);
	if (rc == 0)
		rc = run_program(&h, sc, &n, &nq, &ordered, e);
	if (rc == 0 && n)
		rc = order_rows(sc, n, nq, ordered, arena, out);
	if (rc == -ENOMEM)
		kiln_error_set(e, ENOMEM, ".debug_line+0x%llx: out of memory",
			       (unsigned long long)u->offset);
	kdw_line_scratch_free(&own);
	return rc;
}

/* What kdw_lines_find answers for addr over rows[0 .. n) that ascend as
 * written (order_rows' usual case), without the table: of the run of rows
 * at the highest address at or below addr, the row order_rows keeps (the
 * last one not ending a sequence, else the last one); none when that ends
 * a sequence or the run is the last (marked so). The rows order_rows drops
 * for repeating the line and file before them answer the same. */
static bool match_row(const struct srow *rows, size_t n, size_t *from, uint64_t addr,
		      struct kdw_row *out)
{
	size_t lo = *from, hi, step = 1, j, best;

	/* lo: the first row above addr. The addresses ascend, and so every
	 * row before *from (the last answer's) is at or below addr: gallop
	 * from there, then halve (a unit with many addresses steps a few
	 * rows each time; a binary search per address over the whole table
	 * was a twentieth of a cold pass, mostly mispredicted branches). */
	while (lo + step <= n && rows[lo + step - 1].addr <= addr) {
		lo += step;
		step *= 2;
	}
	hi = lo + step - 1 < n ? lo + step - 1 : n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (rows[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*from = lo;
	if (lo == 0 || lo == n)
		return false;
	j = lo - 1;
	best = j;
	/* Back over the run: the last row not ending a sequence, if any. */
	for (size_t k = j + 1; k-- > 0 && rows[k].addr == rows[j].addr;)
		if (!(rows[k].file & KDW_ROW_END)) {
			best = k;
			break;
		}
	if (rows[best].file & KDW_ROW_END)
		return false;
	*out = (struct kdw_row){rows[best].addr, rows[best].line, rows[best].file};
	return true;
}

#define MATCH_MAX_SEQS 16 /* more sequences out of order: the table is built */

/* match_row when the rows do not ascend as written but each of the nq
 * sequences does (a unit with .text.unlikely or .text.startup parts first,
 * mostly 2 to 4 sequences): the highest row address at or below addr over
 * all sequences, and of the rows there (in program order, as order_rows
 * takes them) the one order_rows keeps; none when that ends a sequence or
 * the address is the highest of all (the last run, marked). False with
 * nothing answered when the sequences are too many or one does not
 * ascend: the caller builds the table. */
static bool match_unordered(const struct kdw_line_scratch *sc, size_t nq, const uint64_t *want,
			    size_t nwant, struct kdw_row *rows, bool *found)
{
	const struct srow *r = sc->rows;
	uint64_t top = 0;

	if (nq > MATCH_MAX_SEQS)
		return false;
	for (size_t q = 0; q < nq; q++) {
		const struct sseq *s = &sc->seqs[q];

		for (uint32_t i = s->first + 1; i < s->first + s->n; i++)
			if (r[i].addr < r[i - 1].addr)
				return false;
		if (s->n && r[s->first + s->n - 1].addr > top)
			top = r[s->first + s->n - 1].addr;
	}
	for (size_t w = 0; w < nwant; w++) {
		size_t last[MATCH_MAX_SEQS]; /* per sequence: its last row at or below */
		uint64_t at = 0;
		bool any = false;
		const struct srow *best = NULL;

		for (size_t q = 0; q < nq; q++) {
			const struct sseq *s = &sc->seqs[q];
			size_t lo = s->first, hi = (size_t)s->first + s->n;

			while (lo < hi) { /* the first row above */
				size_t mid = lo + (hi - lo) / 2;

				if (r[mid].addr <= want[w])
					lo = mid + 1;
				else
					hi = mid;
			}
			last[q] = lo; /* one past; == s->first: none */
			if (lo > s->first && (!any || r[lo - 1].addr > at)) {
				at = r[lo - 1].addr;
				any = true;
			}
		}
		found[w] = false;
		if (!any || at == top)
			continue;
		/* The rows at that address, in program order: the last one
		 * not ending a sequence, else the last one. */
		for (size_t q = 0; q < nq; q++) {
			size_t i = last[q];

			while (i > sc->seqs[q].first && r[i - 1].addr == at)
				i--;
			for (; i < last[q]; i++)
				if (!best || !(r[i].file & KDW_ROW_END) ||
				    (best->file & KDW_ROW_END))
					best = &r[i];
		}
		if (!best || (best->file & KDW_ROW_END))
			continue;
		rows[w] = (struct kdw_row){best->addr, best->line, best->file};
		found[w] = true;
	}
	return true;
}

int kdw_lines_match(const struct kdw_line_unit *u, struct arena *arena,
		    struct kdw_line_scratch *scratch, const struct kdw_lines *names,
		    const uint64_t *want, size_t nwant, struct kdw_row *rows, bool *found,
		    struct kdw_lines *out, bool *complete, struct kiln_error *e)
{
	struct kdw_line_scratch own = {0};
	struct kdw_line_hdr h = {0};
	struct kdw_cur c;
	size_t n = 0, nq = 0;
	bool ordered = false;
	int rc;

	if (!scratch)
		scratch = &own;
	memset(out, 0, sizeof(*out));
	*complete = false;
	rc = kdw_line_begin(u, &h, &c, e);
	if (rc == 0 && names) {
		/* Read before (and checked then): only the rows are new. */
		*out = *names;
		out->keys32 = NULL;
		out->info32 = NULL;
		out->nrows = 0;
	} else if (rc == 0) {
		rc = kdw_line_files(u, &c, &h, arena, out, e);
	}
	if (rc == 0)
		rc = run_program(&h, scratch, &n, &nq, &ordered, e);
	if (rc == 0 && n && !ordered && !match_unordered(scratch, nq, want, nwant, rows, found)) {
		rc = order_rows(scratch, n, nq, false, arena, out);
		*complete = rc == 0;
		for (size_t i = 0; rc == 0 && i < nwant; i++)
			found[i] = kdw_lines_find(out, want[i], &rows[i]);
	} else if (rc == 0 && !ordered) {
		*complete = false;
	} else if (rc == 0) {
		size_t from = 0;

		*complete = n == 0; /* a table without rows is whole as it is */
		for (size_t i = 0; i < nwant; i++)
			found[i] = match_row(scratch->rows, n, &from, want[i], &rows[i]);
	}
	if (rc == -ENOMEM)
		kiln_error_set(e, ENOMEM, ".debug_line+0x%llx: out of memory",
			       (unsigned long long)u->offset);
	kdw_line_scratch_free(&own);
	return rc;
}

void kdw_line_scratch_free(struct kdw_line_scratch *sc)
{
	free(sc->rows);
	free(sc->seqs);
	free(sc->order);
	free(sc->kept);
	memset(sc, 0, sizeof(*sc));
}

bool kdw_lines_find(const struct kdw_lines *l, uint64_t addr, struct kdw_row *out)
{
	struct kdw_row_info info;
	size_t lo;

	/* dwarf_getsrc_die: the last row at or below addr, unless it ends a
	 * sequence. An offset past 32 bits is above every key (the clamp). */
	if (l->wide) {
		lo = kdw_keys64_find(l->keys64, l->nrows, addr, l->info, sizeof(*l->info));
	} else {
		uint64_t off = addr - l->base;

		if (addr < l->base)
			return false;
		lo = kdw_keys32_find(l->keys32, l->nrows, off > UINT32_MAX ? UINT32_MAX : off,
				     l->info32, sizeof(*l->info32));
	}
	if (lo == SIZE_MAX)
		return false;
	info = kdw_lines_info(l, lo);
	if (info.file & KDW_ROW_END)
		return false;
	*out = (struct kdw_row){kdw_lines_addr(l, lo), info.line, info.file & ~KDW_ROW_END};
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
