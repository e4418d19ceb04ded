/*
 * cfi.c — unwind rows from a file's DWARF call-frame information
 * (.eh_frame or .debug_frame).
 *
 * The section's entries are listed with elfutils' dwarf_next_cfi (CIEs
 * with their factors and augmentation, FDEs as raw bytes); each FDE's
 * initial location and range are decoded here (their pointer encoding
 * is the CIE's 'R'), and its instructions run once, front to back, by a
 * small interpreter that tracks only what a row holds: the CFA rule, the
 * return address and rbp. A row is pushed at every advance.
 *
 * Why not libdw's own evaluator (dwarf_cfi_addrframe, one call per row):
 * each call re-runs the FDE from its start and allocates a frame, so an
 * FDE of n rows costs n^2 steps, an order of magnitude more than this one
 * pass on a large binary; the agent builds a table for every
 * executable a host runs, on the thread that drains samples. libdw stays the reference: test_cfi compares
 * every row with its answers on libc, ld.so, python3, C++ and the tests'
 * own programs.
 *
 * Instructions are decoded first (cfi_instructions_ok), so the interpreter
 * never reads out of bounds, and an entry naming a register no x86-64
 * CFI names is skipped (libdw, asked about it, would size a register array
 * by it: gigabytes for one hostile instruction).
 *
 * What the state becomes in a row (unwind_row.h):
 *   CFA   rsp/rbp + offset                        -> CFA_SP / CFA_FP
 *         the lazy-binding PLT expression         -> CFA_PLT
 *           (breg7 8; breg16 0; lit15; and; litN; ge; lit3; shl; plus)
 *         a signal frame ('S') with breg7 160; deref -> SIGNAL
 *   RA    undefined                               -> END (outermost frame)
 *         at CFA - 8                              -> (implied by every row)
 *   rbp   same value / at CFA + 8k / other        -> the rbp rule
 * Anything else becomes UNSUPPORTED, counted: the BPF walk stops there
 * with a reason instead of guessing.
 */
#include "unwind/unwind.h"

#include <dwarf.h>
#include <elfutils/libdw.h> /* dwarf_next_cfi: the section's entries */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CIE_MAX 256 /* CIEs kept per section; FDEs of others are skipped */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA	16

/* A CFI section as read from the file. */
struct cfi_section {
	Elf_Data *data;
	uint64_t vaddr; /* sh_addr: pc-relative pointers are relative to it */
	bool eh_frame;
	unsigned char ident[EI_NIDENT];
};

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *shdr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, shdr) || shdr->sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, shdr->sh_name);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* The bytes of a pointer in encoding enc (DW_EH_PE_*), or 0 for one of
 * variable length (uleb128/sleb128: not emitted for FDEs in practice). */
static size_t encoded_size(uint8_t enc, bool elf32)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		return elf32 ? 4 : 8;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return 2;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return 4;
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return 8;
	default:
		return 0;
	}
}

/* Reads one encoded pointer (DW_EH_PE_*) at *p, within end. Returns false
 * when it does not fit or uses an application the rows cannot resolve
 * (text-, data- or function-relative, indirect). */
static bool read_encoded(const struct cfi_section *s, uint8_t enc, const uint8_t **p,
			 const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	uint64_t v = 0, at = s->vaddr + (uint64_t)(q - (const uint8_t *)s->data->d_buf);
	size_t size = encoded_size(enc, s->ident[EI_CLASS] == ELFCLASS32);

	if (enc == DW_EH_PE_omit || size == 0)
		return false;
	if ((size_t)(end - q) < size)
		return false;
	/* Little-endian only: x86-64 is the one target of the rows. */
	for (size_t i = 0; i < size; i++)
		v |= (uint64_t)q[i] << (8 * i);
	if ((enc & 0x0f) == DW_EH_PE_sdata2)
		v = (uint64_t)(int64_t)(int16_t)v;
	else if ((enc & 0x0f) == DW_EH_PE_sdata4)
		v = (uint64_t)(int64_t)(int32_t)v;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		v += at;
		break;
	default:
		return false;
	}
	if (enc & DW_EH_PE_indirect)
		return false;
	*p = q + size;
	*out = v;
	return true;
}

/* The FDE pointer encoding a CIE's augmentation names ('R'); absptr when
 * it names none. False for an augmentation it cannot step through. */
static bool cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	const char *aug = cie->augmentation;
	const uint8_t *d = cie->augmentation_data;
	const uint8_t *end = d ? d + cie->augmentation_data_size : NULL;

	*enc = DW_EH_PE_absptr;
	if (!aug || aug[0] != 'z')
		return aug == NULL || aug[0] == '\0';
	for (aug++; *aug; aug++) {
		switch (*aug) {
		case 'R':
			if (!d || d >= end)
				return false;
			*enc = *d++;
			break;
		case 'L':
			if (!d || d >= end)
				return false;
			d++;
			break;
		case 'P': { /* a personality routine pointer: stepped over */
			size_t size;

			if (!d || d >= end)
				return false;
			size = encoded_size(*d++, false);
			if (size == 0 || (size_t)(end - d) < size)
				return false;
			d += size;
			break;
		}
		case 'S': /* signal frame: libdw reports it per frame */
		case 'B':
		case 'G':
			break;
		default:
			return false;
		}
	}
	return true;
}

/* ---- a pre-check of CFI instructions ------------------------------------- */

/* libdw sizes a frame's register array by the largest register number an
 * instruction names, so one hostile DW_CFA_offset_extended naming register
 * 2^30 costs gigabytes. The agent reads every executable users run, so
 * each CIE's and FDE's instructions are decoded here first (operands
 * only, no state) and refused when they name a register no x86-64 CFI
 * names, or do not decode. */
#define CFI_MAX_REGNO 128

static bool skip_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		if (shift < 64)
			r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (v)
				*v = r;
			return true;
		}
	}
	return false;
}

static bool skip_bytes(const uint8_t **p, const uint8_t *end, uint64_t n)
{
	if ((uint64_t)(end - *p) < n)
		return false;
	*p += n;
	return true;
}

static bool reg_ok(const uint8_t **p, const uint8_t *end)
{
	uint64_t reg;

	return skip_uleb(p, end, &reg) && reg < CFI_MAX_REGNO;
}

/* True when every instruction in [p, end) decodes and names only
 * registers below CFI_MAX_REGNO. */
static bool cfi_instructions_ok(const uint8_t *p, const uint8_t *end)
{
	uint64_t len;

	while (p < end) {
		uint8_t op = *p++;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			continue;
		case DW_CFA_offset:
			if (!skip_uleb(&p, end, NULL))
				return false;
			continue;
		case DW_CFA_restore:
			continue;
		}
		switch (op) {
		case DW_CFA_nop:
		case DW_CFA_remember_state:
		case DW_CFA_restore_state:
		case DW_CFA_GNU_window_save:
			break;
		case DW_CFA_advance_loc1:
			if (!skip_bytes(&p, end, 1))
				return false;
			break;
		case DW_CFA_advance_loc2:
			if (!skip_bytes(&p, end, 2))
				return false;
			break;
		case DW_CFA_advance_loc4:
			if (!skip_bytes(&p, end, 4))
				return false;
			break;
		case DW_CFA_def_cfa_offset:
		case DW_CFA_def_cfa_offset_sf:
		case DW_CFA_GNU_args_size:
			if (!skip_uleb(&p, end, NULL))
				return false;
			break;
		case DW_CFA_restore_extended:
		case DW_CFA_undefined:
		case DW_CFA_same_value:
		case DW_CFA_def_cfa_register:
			if (!reg_ok(&p, end))
				return false;
			break;
		case DW_CFA_offset_extended:
		case DW_CFA_offset_extended_sf:
		case DW_CFA_def_cfa:
		case DW_CFA_def_cfa_sf:
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
		case DW_CFA_GNU_negative_offset_extended:
			if (!reg_ok(&p, end) || !skip_uleb(&p, end, NULL))
				return false;
			break;
		case DW_CFA_register:
			if (!reg_ok(&p, end) || !reg_ok(&p, end))
				return false;
			break;
		case DW_CFA_def_cfa_expression:
			if (!skip_uleb(&p, end, &len) || !skip_bytes(&p, end, len))
				return false;
			break;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			if (!reg_ok(&p, end) || !skip_uleb(&p, end, &len) ||
			    !skip_bytes(&p, end, len))
				return false;
			break;
		default: /* DW_CFA_set_loc and vendor opcodes: not in x86-64 output */
			return false;
		}
	}
	return true;
}

/* ---- the CFI interpreter ------------------------------------------------ */

/* The rule of one register, as the instructions leave it. */
enum reg_kind {
	REG_SAME,      /* unspecified or same_value: the caller's value */
	REG_UNDEFINED, /* undefined: not recoverable (RA: outermost frame) */
	REG_AT_CFA,    /* offset(N): saved at CFA + N */
	REG_OTHER,     /* val_offset, register, expression: not held by a row */
};

struct reg_rule {
	uint8_t kind;
	int64_t off;
};

/* The state a row is made from: the CFA rule and the rules of the two
 * registers a row holds (the return address and rbp). */
struct cfi_state {
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *cfa_expr; /* DW_CFA_def_cfa_expression, else NULL */
	uint64_t cfa_expr_len;
	struct reg_rule ra, rbp;
};

#define CFI_STACK_MAX 16 /* remember_state depth; GCC nests one or two */

struct cie_info {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	bool signal; /* 'S': the frame of a signal trampoline */
	struct cfi_state initial;
};

static bool read_sleb(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*p >= end)
			return false;
		b = *(*p)++;
		if (shift < 64)
			r |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		r |= ~0ull << shift;
	*v = (int64_t)r;
	return true;
}

static struct reg_rule *state_reg(struct cfi_state *st, const struct cie_info *cie, uint64_t reg)
{
	if (reg == cie->ra_reg)
		return &st->ra;
	if (reg == REG_RBP)
		return &st->rbp;
	return NULL; /* a register no row holds */
}

static void set_reg(struct cfi_state *st, const struct cie_info *cie, uint64_t reg, uint8_t kind,
		    int64_t off)
{
	struct reg_rule *r = state_reg(st, cie, reg);

	if (r)
		*r = (struct reg_rule){kind, off};
}

/* DW_CFA_restore: the rule the CIE's initial instructions left. */
static void restore_reg(struct cfi_state *st, const struct cie_info *cie, uint64_t reg)
{
	struct reg_rule *r = state_reg(st, cie, reg);

	if (r)
		*r = *state_reg((struct cfi_state *)&cie->initial, cie, reg);
}

/* Whether expr is the lazy-binding PLT's CFA: breg7 8; breg16 0; lit15;
 * and; litN; ge; lit3; shl; plus (rsp + 8, and 8 more past the push). */
static bool expr_is_plt(const uint8_t *e, uint64_t len, unsigned *threshold)
{
	static const uint8_t head[] = {DW_OP_breg7, 8, DW_OP_breg16, 0, DW_OP_lit15, DW_OP_and};
	static const uint8_t tail[] = {DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus};

	if (len != sizeof(head) + 1 + sizeof(tail) || memcmp(e, head, sizeof(head)) != 0 ||
	    memcmp(e + sizeof(head) + 1, tail, sizeof(tail)) != 0)
		return false;
	if (e[sizeof(head)] < DW_OP_lit0 || e[sizeof(head)] > DW_OP_lit31)
		return false;
	*threshold = e[sizeof(head)] - DW_OP_lit0;
	return true;
}

/* The row rule of a state (see the file-top table). */
static uint32_t state_rule(const struct cfi_state *st, const struct cie_info *cie,
			   struct unwind_table_stats *stats)
{
	static const uint8_t sigframe[] = {DW_OP_breg7, 0xa0, 0x01, DW_OP_deref}; /* rsp+160 */
	unsigned kind, rbp = UNWIND_RBP_SAME, threshold;
	int64_t cfa_off = st->cfa_off, rbp_off = 0;

	if (cie->signal) {
		if (st->cfa_expr && st->cfa_expr_len == sizeof(sigframe) &&
		    memcmp(st->cfa_expr, sigframe, sizeof(sigframe)) == 0) {
			stats->signal++;
			return UNWIND_RULE(UNWIND_SIGNAL, UNWIND_RBP_SAME, 0, 0);
		}
		goto unsupported;
	}
	if (st->cfa_expr) {
		if (!expr_is_plt(st->cfa_expr, st->cfa_expr_len, &threshold))
			goto unsupported;
		kind = UNWIND_CFA_PLT;
		cfa_off = threshold;
		stats->plt++;
	} else if (st->cfa_reg == REG_RSP || st->cfa_reg == REG_RBP) {
		kind = st->cfa_reg == REG_RSP ? UNWIND_CFA_SP : UNWIND_CFA_FP;
		if (cfa_off < 0 || cfa_off > UNWIND_OFF_MAX)
			goto unsupported;
	} else {
		goto unsupported;
	}
	if (st->ra.kind == REG_UNDEFINED)
		return UNWIND_RULE(UNWIND_END, UNWIND_RBP_SAME, 0, 0);
	if (st->ra.kind != REG_AT_CFA || st->ra.off != -8)
		goto unsupported;
	switch (st->rbp.kind) {
	case REG_SAME:
		break;
	case REG_AT_CFA:
		if (st->rbp.off % 8 == 0 && st->rbp.off / 8 >= UNWIND_RBP_OFF_MIN &&
		    st->rbp.off / 8 <= UNWIND_RBP_OFF_MAX) {
			rbp = UNWIND_RBP_AT_CFA;
			rbp_off = st->rbp.off / 8;
			break;
		}
		/* saved where a row cannot say */
		__attribute__((fallthrough));
	default:
		/* The caller's rbp is lost, which matters only if an
		 * rbp-based rule needs it further up. */
		rbp = UNWIND_RBP_UNDEFINED;
	}
	return UNWIND_RULE(kind, rbp, rbp_off, cfa_off);
unsupported:
	stats->unsupported++;
	return UNWIND_RULE(UNWIND_UNSUPPORTED, UNWIND_RBP_SAME, 0, 0);
}

/* Runs the instructions [p, end) from *st. With emit (an FDE's), pushes a
 * row at each location the rules hold from, starting at *loc, until hi;
 * without (a CIE's initial instructions), only updates *st. The
 * instructions passed cfi_instructions_ok: every operand is in bounds. */
static int cfi_execute(const uint8_t *p, const uint8_t *end, const struct cie_info *cie,
		       struct cfi_state *st, uint64_t loc, uint64_t hi, bool emit,
		       struct unwind_table *t)
{
	struct cfi_state stack[CFI_STACK_MAX];
	size_t depth = 0;
	uint64_t row_loc = loc, reg = 0, u = 0;
	int64_t off = 0;
	int rc;

	while (p < end) {
		uint8_t op = *p++;
		uint64_t advance = 0;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			advance = (op & 0x3f) * cie->code_align;
			goto advance;
		case DW_CFA_offset:
			skip_uleb(&p, end, &u);
			set_reg(st, cie, op & 0x3f, REG_AT_CFA, (int64_t)u * cie->data_align);
			continue;
		case DW_CFA_restore:
			restore_reg(st, cie, op & 0x3f);
			continue;
		}
		switch (op) {
		case DW_CFA_advance_loc1:
			advance = p[0] * cie->code_align;
			p += 1;
			goto advance;
		case DW_CFA_advance_loc2:
			advance = (uint64_t)(p[0] | p[1] << 8) * cie->code_align;
			p += 2;
			goto advance;
		case DW_CFA_advance_loc4:
			advance = (uint64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
					     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24) *
				  cie->code_align;
			p += 4;
			goto advance;
		case DW_CFA_offset_extended:
			skip_uleb(&p, end, &reg);
			skip_uleb(&p, end, &u);
			set_reg(st, cie, reg, REG_AT_CFA, (int64_t)u * cie->data_align);
			break;
		case DW_CFA_offset_extended_sf:
			skip_uleb(&p, end, &reg);
			read_sleb(&p, end, &off);
			set_reg(st, cie, reg, REG_AT_CFA, off * cie->data_align);
			break;
		case DW_CFA_GNU_negative_offset_extended:
			skip_uleb(&p, end, &reg);
			skip_uleb(&p, end, &u);
			set_reg(st, cie, reg, REG_AT_CFA, -(int64_t)u * cie->data_align);
			break;
		case DW_CFA_restore_extended:
			skip_uleb(&p, end, &reg);
			restore_reg(st, cie, reg);
			break;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			skip_uleb(&p, end, &reg);
			set_reg(st, cie, reg, op == DW_CFA_undefined ? REG_UNDEFINED : REG_SAME, 0);
			break;
		case DW_CFA_register:
		case DW_CFA_val_offset:
			skip_uleb(&p, end, &reg);
			skip_uleb(&p, end, NULL);
			set_reg(st, cie, reg, REG_OTHER, 0);
			break;
		case DW_CFA_val_offset_sf:
			skip_uleb(&p, end, &reg);
			read_sleb(&p, end, &off);
			set_reg(st, cie, reg, REG_OTHER, 0);
			break;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			skip_uleb(&p, end, &reg);
			skip_uleb(&p, end, &u);
			p += u;
			set_reg(st, cie, reg, REG_OTHER, 0);
			break;
		case DW_CFA_def_cfa:
			skip_uleb(&p, end, &st->cfa_reg);
			skip_uleb(&p, end, &u);
			st->cfa_off = (int64_t)u;
			st->cfa_expr = NULL;
			break;
		case DW_CFA_def_cfa_sf:
			skip_uleb(&p, end, &st->cfa_reg);
			read_sleb(&p, end, &off);
			st->cfa_off = off * cie->data_align;
			st->cfa_expr = NULL;
			break;
		case DW_CFA_def_cfa_register:
			skip_uleb(&p, end, &st->cfa_reg);
			st->cfa_expr = NULL;
			break;
		case DW_CFA_def_cfa_offset:
			skip_uleb(&p, end, &u);
			st->cfa_off = (int64_t)u;
			break;
		case DW_CFA_def_cfa_offset_sf:
			read_sleb(&p, end, &off);
			st->cfa_off = off * cie->data_align;
			break;
		case DW_CFA_def_cfa_expression:
			skip_uleb(&p, end, &u);
			st->cfa_expr = p;
			st->cfa_expr_len = u;
			p += u;
			break;
		case DW_CFA_remember_state:
			/* The CFA is saved too, as GCC's output expects (and
			 * libgcc's unwinder does). */
			if (depth == CFI_STACK_MAX)
				goto untrusted;
			stack[depth++] = *st;
			break;
		case DW_CFA_restore_state:
			if (depth == 0)
				goto untrusted;
			*st = stack[--depth];
			break;
		case DW_CFA_GNU_args_size:
			skip_uleb(&p, end, NULL);
			break;
		default: /* nop, GNU_window_save */
			break;
		}
		continue;
advance:
		if (!emit)
			continue;
		if (loc + advance > hi || loc + advance < loc)
			advance = hi - loc; /* past the FDE's range: the rest is noise */
		if (advance == 0)
			continue;
		rc = unwind_table_push(t, (uint32_t)row_loc, state_rule(st, cie, &t->stats));
		if (rc)
			return rc;
		loc += advance;
		row_loc = loc;
		if (loc >= hi)
			return 0;
	}
	if (emit && row_loc < hi)
		return unwind_table_push(t, (uint32_t)row_loc, state_rule(st, cie, &t->stats));
	return 0;
untrusted:
	/* An unbalanced state stack: the rest of the entry is not trusted. */
	if (!emit)
		return -EINVAL;
	t->stats.unsupported++;
	return unwind_table_push(t, (uint32_t)row_loc,
				 UNWIND_RULE(UNWIND_UNSUPPORTED, UNWIND_RBP_SAME, 0, 0));
}

/* A CIE's factors and initial state. False when they cannot be had. */
static bool cie_init(const Dwarf_CIE *c, struct cie_info *ci)
{
	memset(ci, 0, sizeof(*ci));
	ci->code_align = c->code_alignment_factor;
	ci->data_align = c->data_alignment_factor;
	ci->ra_reg = c->return_address_register;
	ci->signal =
	    c->augmentation && c->augmentation[0] == 'z' && strchr(c->augmentation, 'S') != NULL;
	if (ci->ra_reg != REG_RA || ci->code_align == 0)
		return false;
	ci->initial.cfa_reg = REG_RSP;
	ci->initial.ra = (struct reg_rule){REG_SAME, 0};
	ci->initial.rbp = (struct reg_rule){REG_SAME, 0};
	return cfi_execute(c->initial_instructions, c->initial_instructions_end, ci, &ci->initial,
			   0, 0, false, NULL) == 0;
}

/* The rows of one FDE's range [lo, hi), then a NONE row at hi (the next
 * FDE's first row replaces it where they touch). */
static int fde_rows(const struct cie_info *cie, const uint8_t *p, const uint8_t *end, uint64_t lo,
		    uint64_t hi, struct unwind_table *t)
{
	struct cfi_state st = cie->initial;
	int rc = cfi_execute(p, end, cie, &st, lo, hi, true, t);

	if (rc)
		return rc;
	return unwind_table_push(t, (uint32_t)hi, UNWIND_RULE(UNWIND_NONE, 0, 0, 0));
}

int unwind_cfi_rows(Elf *elf, bool eh_frame, struct unwind_table *t, struct kiln_error *err)
{
	const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
	struct cfi_section s = {.eh_frame = eh_frame};
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, name, &shdr);
	/* The CIEs met so far: a file has a handful. */
	struct cie_slot {
		Dwarf_Off off;
		uint8_t enc;
		bool ok;
		bool z; /* FDEs carry an augmentation length */
		struct cie_info info;
	} *cies = NULL;
	size_t ncies = 0;
	Dwarf_Off off = 0, next;
	size_t fdes = 0;
	int rc = 0;

	if (!scn)
		return -ENOENT;
	s.data = elf_getdata(scn, NULL);
	s.vaddr = shdr.sh_addr;
	if (!s.data || !s.data->d_buf || s.data->d_size == 0)
		return -ENOENT;
	if (!gelf_getehdr(elf, &(GElf_Ehdr){0}))
		return kiln_error_set(err, EINVAL, "not an ELF file");
	memcpy(s.ident, elf_getident(elf, NULL), EI_NIDENT);
	if (s.ident[EI_DATA] != ELFDATA2LSB)
		return kiln_error_set(err, ENOTSUP, "%s: big-endian CFI is not supported", name);
	cies = calloc(CIE_MAX, sizeof(*cies));
	if (!cies)
		return kiln_error_set(err, ENOMEM, "out of memory");

	for (;;) {
		Dwarf_CFI_Entry entry;
		Dwarf_Off here = off;
		const struct cie_slot *cie = NULL;
		const uint8_t *p;
		uint64_t lo, range;
		int r = dwarf_next_cfi(s.ident, s.data, eh_frame, off, &next, &entry);

		if (r == 1) /* the end */
			break;
		if (r != 0 || next <= off) {
			t->stats.bad++;
			break;
		}
		off = next;
		if (dwarf_cfi_cie_p(&entry)) {
			if (ncies < CIE_MAX) {
				struct cie_slot *c = &cies[ncies++];

				c->off = here;
				c->z = entry.cie.augmentation && entry.cie.augmentation[0] == 'z';
				c->ok = cie_fde_encoding(&entry.cie, &c->enc) &&
					cfi_instructions_ok(entry.cie.initial_instructions,
							    entry.cie.initial_instructions_end) &&
					cie_init(&entry.cie, &c->info);
			}
			continue;
		}
		/* Every producer writes an FDE's CIE before it. */
		for (size_t i = 0; i < ncies; i++)
			if (cies[i].off == entry.fde.CIE_pointer)
				cie = &cies[i];
		p = entry.fde.start;
		if (!cie || !cie->ok ||
		    !read_encoded(&s, eh_frame ? cie->enc : DW_EH_PE_absptr, &p, entry.fde.end,
				  &lo) ||
		    !read_encoded(&s, eh_frame ? cie->enc & 0x0f : DW_EH_PE_absptr, &p,
				  entry.fde.end, &range)) {
			t->stats.bad++;
			continue;
		}
		if (range == 0)
			continue;
		/* The instructions follow the augmentation data ('z': its
		 * length first). */
		if (cie->z) {
			uint64_t auglen;

			if (!skip_uleb(&p, entry.fde.end, &auglen) ||
			    !skip_bytes(&p, entry.fde.end, auglen)) {
				t->stats.bad++;
				continue;
			}
		}
		if (!cfi_instructions_ok(p, entry.fde.end)) {
			t->stats.bad++;
			continue;
		}
		/* Rows hold 32-bit pcs: a file's code lies below 4 GiB. */
		if (lo > UINT32_MAX || range > UINT32_MAX - lo) {
			t->stats.bad++;
			continue;
		}
		rc = fde_rows(&cie->info, p, entry.fde.end, lo, lo + range, t);
		if (rc)
			break;
		fdes++;
	}
	free(cies);
	t->stats.fdes += fdes;
	if (rc)
		return kiln_error_set(err, -rc, "%s: out of memory for the unwind rows", name);
	return (int)fdes;
}
