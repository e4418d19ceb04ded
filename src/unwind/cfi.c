/*
 * cfi.c — unwind rows from a file's DWARF call-frame information
 * (.eh_frame or .debug_frame), read and evaluated by elfutils' libdw.
 *
 * libdw answers "what are the unwind rules at pc X" (dwarf_cfi_addrframe),
 * with the range of pcs the answer holds for; it does not list the
 * functions a section describes. So the FDEs are listed here with
 * dwarf_next_cfi (decoding only their initial location and range, whose
 * pointer encoding the CIE's augmentation names), and each FDE's range is
 * walked row by row by asking libdw at the start of each row. Asking at
 * every row re-runs the FDE's instructions from its start, which is
 * quadratic in the rows of one FDE; FDEs are short (a handful of rows
 * each), so that is cheap next to reading the section, and it keeps libdw,
 * not Kiln, the one interpreter of CFI instructions.
 *
 * What libdw says is then cut down to what a row holds (unwind_row.h):
 *   CFA   DW_OP_bregx rsp/rbp + offset           -> CFA_SP / CFA_FP
 *         the lazy-binding PLT expression         -> CFA_PLT
 *           (breg7 8; breg16 0; lit15; and; litN; ge; lit3; shl; plus)
 *         a signal frame with breg7 160; deref    -> SIGNAL
 *   RA    undefined                               -> END (outermost frame)
 *         at CFA - 8                              -> (implied by every row)
 *   rbp   same value / at CFA + 8k / undefined    -> the rbp rule
 * Anything else becomes UNSUPPORTED, counted: the BPF walk stops there
 * with a reason instead of guessing.
 */
#include "unwind/unwind.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads one encoded pointer (DW_EH_PE_*) at *p, within end. Returns false
 * when it does not fit or uses an application the rows cannot resolve
 * (text-, data- or function-relative, indirect). */
static bool read_encoded(const struct cfi_section *s, uint8_t enc, const uint8_t **p,
			 const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	uint64_t v = 0, at = s->vaddr + (uint64_t)(q - (const uint8_t *)s->data->d_buf);
	size_t size;

	if (enc == DW_EH_PE_omit)
		return false;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		size = s->ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		size = 2;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		size = 4;
		break;
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		size = 8;
		break;
	default: /* uleb128/sleb128 pointers: not emitted for FDEs in practice */
		return false;
	}
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
		case 'P': {
			uint8_t penc;
			size_t size;

			if (!d || d >= end)
				return false;
			penc = *d++;
			switch (penc & 0x0f) {
			case DW_EH_PE_udata2:
			case DW_EH_PE_sdata2:
				size = 2;
				break;
			case DW_EH_PE_udata4:
			case DW_EH_PE_sdata4:
				size = 4;
				break;
			case DW_EH_PE_absptr:
			case DW_EH_PE_udata8:
			case DW_EH_PE_sdata8:
				size = 8;
				break;
			default:
				return false;
			}
			if ((size_t)(end - d) < size)
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

static bool op_is(const Dwarf_Op *op, uint8_t atom, uint64_t number)
{
	return op->atom == atom && op->number == number;
}

/* The PLT's CFA: rsp + 8, plus 8 more once past the entry's push. */
static bool cfa_is_plt(const Dwarf_Op *ops, size_t n, unsigned *threshold)
{
	if (n != 9)
		return false;
	if (!(ops[0].atom == DW_OP_breg7 && ops[0].number == 8) ||
	    !(ops[1].atom == DW_OP_breg16 && ops[1].number == 0) || ops[2].atom != DW_OP_lit15 ||
	    ops[3].atom != DW_OP_and || ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31 ||
	    ops[5].atom != DW_OP_ge || ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl ||
	    ops[8].atom != DW_OP_plus)
		return false;
	*threshold = ops[4].atom - DW_OP_lit0;
	return true;
}

/* A register's rule as an offset from the CFA: true with *off when the
 * register is saved at CFA + off. */
static bool saved_at_cfa(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
		*off = 0;
		return true;
	}
	if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/* The row rule of one libdw frame state. */
static uint32_t frame_rule(Dwarf_Frame *frame, bool signal, struct unwind_table_stats *st)
{
	Dwarf_Op ops_mem[3], *ops = NULL;
	size_t nops = 0;
	unsigned kind, rbp = UNWIND_RBP_SAME, threshold;
	int64_t cfa_off = 0, rbp_off = 0, ra_off;

	if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops == 0)
		goto unsupported;
	if (signal) {
		/* glibc's __restore_rt (and the kernel vDSO's): CFA is the
		 * saved rsp in the ucontext at rsp. */
		if (nops == 2 && op_is(&ops[0], DW_OP_breg7, UNWIND_SIGNAL_RSP_AT) &&
		    ops[1].atom == DW_OP_deref) {
			st->signal++;
			return UNWIND_RULE(UNWIND_SIGNAL, UNWIND_RBP_SAME, 0, 0);
		}
		goto unsupported;
	}
	if (nops == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == REG_RSP || ops[0].number == REG_RBP)) {
		kind = ops[0].number == REG_RSP ? UNWIND_CFA_SP : UNWIND_CFA_FP;
		cfa_off = (int64_t)ops[0].number2;
		if (cfa_off < 0 || cfa_off > UNWIND_OFF_MAX)
			goto unsupported;
	} else if (cfa_is_plt(ops, nops, &threshold)) {
		kind = UNWIND_CFA_PLT;
		cfa_off = threshold;
		st->plt++;
	} else {
		goto unsupported;
	}

	/* The return address: undefined marks the outermost frame. */
	if (dwarf_frame_register(frame, REG_RA, ops_mem, &ops, &nops) != 0)
		goto unsupported;
	if (nops == 0 && ops == ops_mem)
		return UNWIND_RULE(UNWIND_END, UNWIND_RBP_SAME, 0, 0);
	if (!saved_at_cfa(ops, nops, &ra_off) || ra_off != -8)
		goto unsupported;

	if (dwarf_frame_register(frame, REG_RBP, ops_mem, &ops, &nops) != 0)
		goto unsupported;
	if (nops == 0) {
		rbp = ops == NULL ? UNWIND_RBP_SAME : UNWIND_RBP_UNDEFINED;
	} else if (saved_at_cfa(ops, nops, &rbp_off) && rbp_off % 8 == 0 &&
		   rbp_off / 8 >= UNWIND_RBP_OFF_MIN && rbp_off / 8 <= UNWIND_RBP_OFF_MAX) {
		rbp = UNWIND_RBP_AT_CFA;
		rbp_off /= 8;
	} else {
		/* Kept in another register, or an expression: the caller's
		 * rbp is lost, which matters only if an rbp-based rule
		 * needs it further up. */
		rbp = UNWIND_RBP_UNDEFINED;
		rbp_off = 0;
	}
	return UNWIND_RULE(kind, rbp, rbp_off, cfa_off);
unsupported:
	st->unsupported++;
	return UNWIND_RULE(UNWIND_UNSUPPORTED, UNWIND_RBP_SAME, 0, 0);
}

/* The rows of one FDE's range [lo, hi), asked of libdw row by row. A row
 * takes at least one byte of CFI instructions, so an FDE of len bytes has
 * at most len rows: the bound keeps a corrupt FDE from running the
 * quadratic walk for long. Real FDEs stay far below FDE_MAX_ROWS; one
 * above it ends in an UNSUPPORTED row. */
#define FDE_MAX_ROWS 4096
static int fde_rows(Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, size_t len, struct unwind_table *t)
{
	uint64_t pc = lo;
	size_t rows = 0;
	int rc;

	while (pc < hi) {
		if (rows++ > len || rows > FDE_MAX_ROWS) {
			t->stats.unsupported++;
			rc = unwind_table_push(
			    t, (uint32_t)pc,
			    UNWIND_RULE(UNWIND_UNSUPPORTED, UNWIND_RBP_SAME, 0, 0));
			if (rc)
				return rc;
			break;
		}
		Dwarf_Frame *frame = NULL;
		Dwarf_Addr start, end;
		bool signal = false;
		uint32_t rule;

		if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) {
			t->stats.bad++;
			break;
		}
		if (dwarf_frame_info(frame, &start, &end, &signal) < 0) {
			free(frame);
			t->stats.bad++;
			break;
		}
		rule = frame_rule(frame, signal, &t->stats);
		free(frame);
		rc = unwind_table_push(t, (uint32_t)pc, rule);
		if (rc)
			return rc;
		if (end <= pc)
			break;
		pc = end;
	}
	return unwind_table_push(t, (uint32_t)hi, UNWIND_RULE(UNWIND_NONE, 0, 0, 0));
}

int unwind_cfi_rows(Elf *elf, bool eh_frame, struct unwind_table *t, struct kiln_error *err)
{
	const char *name = eh_frame ? ".eh_frame" : ".debug_frame";
	struct cfi_section s = {.eh_frame = eh_frame};
	Dwarf *dw = NULL;
	Dwarf_CFI *cfi;
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, name, &shdr);
	/* CIE offset -> its FDE encoding, for the few CIEs a file has. */
	struct cie_enc {
		Dwarf_Off off;
		uint8_t enc;
		bool ok;
		bool z; /* FDEs carry an augmentation length */
	} cies[256];
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
	if (eh_frame) {
		cfi = dwarf_getcfi_elf(elf);
	} else {
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		cfi = dw ? dwarf_getcfi(dw) : NULL;
	}
	if (!cfi) {
		if (dw)
			dwarf_end(dw);
		return kiln_error_set(err, EINVAL, "%s: libdw cannot read it: %s", name,
				      dwarf_errmsg(-1));
	}

	for (;;) {
		Dwarf_CFI_Entry entry;
		Dwarf_Off here = off;
		const struct cie_enc *cie = NULL;
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
			if (ncies < sizeof(cies) / sizeof(cies[0])) {
				cies[ncies].off = here;
				cies[ncies].z =
				    entry.cie.augmentation && entry.cie.augmentation[0] == 'z';
				cies[ncies].ok =
				    cie_fde_encoding(&entry.cie, &cies[ncies].enc) &&
				    cfi_instructions_ok(entry.cie.initial_instructions,
							entry.cie.initial_instructions_end);
				ncies++;
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
			    !skip_bytes(&p, entry.fde.end, auglen) ||
			    !cfi_instructions_ok(p, entry.fde.end)) {
				t->stats.bad++;
				continue;
			}
		} else if (!cfi_instructions_ok(p, entry.fde.end)) {
			t->stats.bad++;
			continue;
		}
		/* Rows hold 32-bit pcs: a file's code lies below 4 GiB. */
		if (lo > UINT32_MAX || range > UINT32_MAX - lo) {
			t->stats.bad++;
			continue;
		}
		rc = fde_rows(cfi, lo, lo + range, (size_t)(entry.fde.end - entry.fde.start), t);
		if (rc)
			break;
		fdes++;
	}
	t->stats.fdes += fdes;
	if (rc)
		kiln_error_set(err, -rc, "%s: out of memory for the unwind rows", name);
	if (eh_frame)
		dwarf_cfi_end(cfi); /* one from dwarf_getcfi_elf is the caller's */
	if (dw)
		dwarf_end(dw);
	return rc < 0 ? rc : (int)fdes;
}
