/*
 * gopclntab.c — unwind rows from Go's own function table, .gopclntab.
 *
 * Go emits no .eh_frame; what its runtime unwinds with is the pclntab: a
 * header, a sorted function table (functab) of (entry, _func offset)
 * pairs, one _func record per function, and varint-coded "pc-value"
 * tables. One of those per function, pcsp, says for every pc how many
 * bytes the function has pushed since its entry (the SP delta); the
 * return address sits at SP + delta, so on x86-64 the caller's SP (the
 * CFA) is SP + delta + 8. Each run of one delta becomes one CFA_SP row;
 * a NONE row ends each function (the alignment padding before the next
 * belongs to no one). The functions that start a goroutine's or a
 * thread's stack (runtime.goexit, runtime.mstart, the rt0 entry points)
 * get END rows, matched by name because funcID values change between Go
 * releases.
 *
 * Layouts read (little-endian, 64-bit only):
 *
 *   header   magic u32, 0, 0, minLC u8, ptrSize u8, then uintptr words:
 *            1.16/1.17 (0xfffffffa): nfunc nfiles funcname cu filetab
 *                                    pctab pcln
 *            1.18/1.19 (0xfffffff0), 1.20+ (0xfffffff1): nfunc nfiles
 *                                    textStart funcname cu filetab pctab pcln
 *            (the last five are offsets from the header's start)
 *   functab  at pcln: nfunc (entry, funcoff) pairs and one more entry
 *            (the end of the last function); uintptr absolute entries in
 *            1.16, u32 offsets from textStart in 1.18+; funcoff is from pcln
 *   _func    entry (uintptr in 1.16, u32 entryoff in 1.18+), nameoff i32,
 *            args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset (u32
 *            each), [startLine i32 in 1.20+], funcID, flag, pad, nfuncdata
 *            (u8 each); pcsp is an offset into pctab, nameoff into funcname
 *   pcvalue  pairs of uvarints: a zigzag value delta (the value starts at
 *            -1) and a pc delta in units of minLC; the value holds from the
 *            pc before the pc delta up to the pc after it; a zero value
 *            delta anywhere but at the function's entry ends the table
 *
 * The bytes are untrusted (any file the agent sees mapped, fuzzing):
 * every read is bounds-checked against the table's length, and the
 * decoding work is bounded by it (each pc-value step consumes at least
 * two bytes, and all steps together may not exceed a budget proportional
 * to the length, which a table that shares one pcsp among many functions
 * could otherwise multiply). A broken header or function table fails the
 * whole call; one function's broken record is skipped and counted.
 */
#include "unwind/unwind.h"

#include <errno.h>
#include <libelf.h>
#include <string.h>

#define GO116_MAGIC 0xfffffffau
#define GO118_MAGIC 0xfffffff0u
#define GO120_MAGIC 0xfffffff1u

/* The functions that begin a stack: nothing above them is a caller. */
static const char *const stack_roots[] = {
    "runtime.goexit",	/* every goroutine's */
    "runtime.mstart",	/* every thread's */
    "runtime.mstart0",	/* what that calls, and its ABI wrapper */
    "runtime.rt0_go",	/* the main thread's */
    "_rt0_amd64_linux", /* the ELF entry point */
    "_rt0_amd64",
};

/* One parsed header; every offset is checked to lie within data[0..len). */
struct pclntab {
	const uint8_t *data;
	size_t len;
	uint32_t magic;
	uint64_t nfunc;
	uint64_t text_start; /* 1.18+: base of entry offsets */
	size_t funcname_off, pctab_off, pcln_off;
	size_t field_size;   /* of a functab field and of _func.entry: 8 (1.16)
			      * or 4 (1.18+) */
	size_t func_size;    /* bytes of a _func record up to nfuncdata */
	uint64_t steps_left; /* pc-value decoding budget */
};

static bool in_bounds(size_t len, uint64_t off, uint64_t n)
{
	return off <= len && n <= len - off;
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* Reads the header of p->data into p. 0 or a negative errno with err set. */
static int parse_header(struct pclntab *p, uint64_t text_vaddr, struct kiln_error *err)
{
	static const char *const names[] = {"funcnameOffset", "cuOffset", "filetabOffset",
					    "pctabOffset", "pclnOffset"};
	const uint8_t *d = p->data;
	size_t words, first_off, hdr_size;
	uint64_t offs[5], functab_max;

	if (p->len < 8)
		return kiln_error_set(err, EINVAL, "pclntab: truncated header: %zu bytes, need 8",
				      p->len);
	p->magic = get_u32(d);
	if (p->magic != GO116_MAGIC && p->magic != GO118_MAGIC && p->magic != GO120_MAGIC)
		return kiln_error_set(err, ENOEXEC,
				      "pclntab: unknown magic 0x%08x at offset 0 (Go 1.16+ tables "
				      "start 0xfffffffa, 0xfffffff0 or 0xfffffff1)",
				      p->magic);
	if (d[4] != 0 || d[5] != 0)
		return kiln_error_set(err, EINVAL,
				      "pclntab: header padding at offset 4 is 0x%02x%02x, not zero",
				      d[4], d[5]);
	if (d[6] != 1 || d[7] != 8)
		return kiln_error_set(err, ENOTSUP,
				      "pclntab: minLC %u and ptrSize %u at offset 6: not an x86-64 "
				      "table (want 1 and 8)",
				      d[6], d[7]);
	words = p->magic == GO116_MAGIC ? 7 : 8;
	hdr_size = 8 + words * 8;
	if (p->len < hdr_size)
		return kiln_error_set(
		    err, EINVAL, "pclntab: truncated header: %zu bytes, need %zu for magic 0x%08x",
		    p->len, hdr_size, p->magic);
	p->nfunc = get_u64(d + 8);
	first_off = p->magic == GO116_MAGIC ? 2 : 3;
	p->text_start = p->magic == GO116_MAGIC ? 0 : get_u64(d + 24);
	for (size_t i = 0; i < 5; i++) {
		size_t at = 8 + (first_off + i) * 8;

		offs[i] = get_u64(d + at);
		if (offs[i] < hdr_size || offs[i] > p->len)
			return kiln_error_set(
			    err, EINVAL,
			    "pclntab: %s 0x%llx (header offset %zu) is outside the "
			    "table's %zu bytes",
			    names[i], (unsigned long long)offs[i], at, p->len);
	}
	p->funcname_off = offs[0];
	p->pctab_off = offs[3];
	p->pcln_off = offs[4];
	if (p->magic == GO116_MAGIC) {
		p->field_size = 8;
		p->func_size = 8 + 8 * 4 + 4;
	} else {
		p->field_size = 4;
		p->func_size = 4 + 8 * 4 + (p->magic == GO120_MAGIC ? 4 : 0) + 4;
	}
	/* The functab (2 * nfunc + 1 fields) must fit after pclnOffset. */
	functab_max = (p->len - p->pcln_off) / p->field_size;
	if (functab_max == 0 || p->nfunc > (functab_max - 1) / 2)
		return kiln_error_set(
		    err, EINVAL,
		    "pclntab: nfunc %llu (header offset 8) does not fit: the "
		    "function table at 0x%zx has room for %llu entries",
		    (unsigned long long)p->nfunc, p->pcln_off,
		    (unsigned long long)(functab_max ? (functab_max - 1) / 2 : 0));
	/* 1.18+: entries are offsets from textStart, which the linker writes
	 * even in PIE (the dynamic relocation repeats it). A zero textStart
	 * is an unrelocated table: text_vaddr stands in. With external
	 * linking, C start-up code comes first in .text, so textStart may lie
	 * above text_vaddr but never below. */
	if (p->magic != GO116_MAGIC) {
		if (p->text_start == 0)
			p->text_start = text_vaddr;
		else if (p->text_start < text_vaddr)
			return kiln_error_set(
			    err, EINVAL,
			    "pclntab: textStart 0x%llx (header offset 24) lies below "
			    "the text section at 0x%llx",
			    (unsigned long long)p->text_start, (unsigned long long)text_vaddr);
	}
	p->steps_left = (uint64_t)p->len;
	return 0;
}

/* The entry pc of functab slot i (i <= nfunc). */
static uint64_t functab_pc(const struct pclntab *p, uint64_t i)
{
	const uint8_t *f = p->data + p->pcln_off + 2 * i * p->field_size;

	if (p->field_size == 8)
		return get_u64(f);
	return p->text_start + get_u32(f);
}

static uint64_t functab_funcoff(const struct pclntab *p, uint64_t i)
{
	const uint8_t *f = p->data + p->pcln_off + (2 * i + 1) * p->field_size;

	return p->field_size == 8 ? get_u64(f) : get_u32(f);
}

/* Whether the NUL-terminated name at funcname + nameoff is a stack root. */
static bool is_stack_root(const struct pclntab *p, int32_t nameoff)
{
	uint64_t at;
	size_t room;

	if (nameoff <= 0)
		return false;
	at = (uint64_t)p->funcname_off + (uint64_t)nameoff;
	if (at >= p->len)
		return false;
	room = p->len - at;
	for (size_t i = 0; i < sizeof(stack_roots) / sizeof(stack_roots[0]); i++) {
		size_t n = strlen(stack_roots[i]) + 1; /* with the NUL */

		if (n <= room && memcmp(p->data + at, stack_roots[i], n) == 0)
			return true;
	}
	return false;
}

/* A uvarint of at most 5 bytes (Go's own reader keeps 32 bits). */
static int read_uvarint(const struct pclntab *p, size_t *pos, uint32_t *out)
{
	uint32_t v = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*pos >= p->len)
			return -1;
		b = p->data[(*pos)++];
		v |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

static uint32_t sp_delta_rule(int64_t delta, uint64_t *unsupported)
{
	if (delta < 0 || delta > UNWIND_OFF_MAX - 8) {
		(*unsupported)++;
		return UNWIND_RULE(UNWIND_UNSUPPORTED, UNWIND_RBP_SAME, 0, 0);
	}
	return UNWIND_RULE(UNWIND_CFA_SP, UNWIND_RBP_SAME, 0, delta + 8);
}

/* Pushes the rows of one function [entry, next) from its pcsp table at
 * pctab + pcsp. Returns 0, 1 if the record is malformed (nothing pushed),
 * -ENOMEM, or -E2BIG when the table-wide step budget ran out. */
static int function_rows(struct pclntab *p, uint64_t entry, uint64_t next, uint32_t pcsp,
			 struct unwind_table *t)
{
	size_t start_n = t->n, pos;
	uint64_t pc = entry, unsupported = 0;
	int64_t val = -1;
	int rc;

	if (pcsp == 0 || (uint64_t)p->pctab_off + pcsp >= p->len)
		return 1;
	pos = p->pctab_off + pcsp;
	for (;;) {
		uint32_t uv, pcdelta;
		int64_t vdelta;

		if (p->steps_left == 0)
			return -E2BIG;
		p->steps_left--;
		if (read_uvarint(p, &pos, &uv) != 0)
			goto bad;
		if (uv == 0 && pc != entry)
			break;
		vdelta = (uv & 1) ? -(int64_t)(uv >> 1) - 1 : (int64_t)(uv >> 1);
		if (read_uvarint(p, &pos, &pcdelta) != 0)
			goto bad;
		val += vdelta;
		/* |val| grows by < 2^31 a step, and steps are bounded by the
		 * table's length: no overflow, but nonsense past this. */
		if (val < INT32_MIN || val > INT32_MAX)
			goto bad;
		if (pcdelta == 0)
			continue;
		if (pcdelta > next - pc)
			goto bad; /* the table runs past the function's end */
		rc = unwind_table_push(t, (uint32_t)pc, sp_delta_rule(val, &unsupported));
		if (rc)
			return rc;
		pc += pcdelta;
	}
	if (pc == entry)
		goto bad; /* an empty table covers nothing */
	rc = unwind_table_push(t, (uint32_t)pc, UNWIND_RULE(UNWIND_NONE, 0, 0, 0));
	if (rc)
		return rc;
	t->stats.unsupported += unsupported;
	return 0;
bad:
	t->n = start_n;
	return 1;
}

/* Records that t holds gopclntab rows (source names are static strings). */
static void add_source(struct unwind_table *t)
{
	static const char *const joined[][2] = {
	    {"eh_frame", "eh_frame+gopclntab"},
	    {"debug_frame", "debug_frame+gopclntab"},
	    {"eh_frame+debug_frame", "eh_frame+debug_frame+gopclntab"},
	};

	if (!t->source) {
		t->source = "gopclntab";
		return;
	}
	if (strstr(t->source, "gopclntab"))
		return;
	for (size_t i = 0; i < sizeof(joined) / sizeof(joined[0]); i++) {
		if (strcmp(t->source, joined[i][0]) == 0) {
			t->source = joined[i][1];
			return;
		}
	}
}

int unwind_gopclntab_rows(const uint8_t *data, size_t len, uint64_t text_vaddr,
			  struct unwind_table *t, struct kiln_error *err)
{
	struct pclntab p = {.data = data, .len = len};
	struct unwind_table_stats saved_stats = t->stats;
	const char *saved_source = t->source;
	size_t saved_n = t->n;
	uint64_t read = 0, bad = 0;
	int rc;

	if (!data)
		p.len = 0;
	rc = parse_header(&p, text_vaddr, err);
	if (rc)
		return rc;
	for (uint64_t i = 0; i < p.nfunc; i++) {
		uint64_t entry = functab_pc(&p, i), next = functab_pc(&p, i + 1);
		uint64_t funcoff = functab_funcoff(&p, i), fo = (uint64_t)p.pcln_off + funcoff;
		size_t functab_at = p.pcln_off + 2 * i * p.field_size;
		uint64_t rec_entry;
		int32_t nameoff;
		uint32_t pcsp;

		/* The order of the functab is what every lookup relies on: a
		 * table out of order is not Go's. */
		if (next <= entry) {
			rc = kiln_error_set(
			    err, EINVAL,
			    "pclntab: function table entry %llu at offset 0x%zx: pcs "
			    "0x%llx..0x%llx out of order",
			    (unsigned long long)i, functab_at, (unsigned long long)entry,
			    (unsigned long long)next);
			goto fail;
		}
		if (i == 0 && p.magic == GO116_MAGIC && entry < text_vaddr) {
			rc = kiln_error_set(err, EINVAL,
					    "pclntab: first function at 0x%llx (offset 0x%zx) lies "
					    "below the text section at 0x%llx",
					    (unsigned long long)entry, functab_at,
					    (unsigned long long)text_vaddr);
			goto fail;
		}
		if (next > UINT32_MAX) {
			/* Rows hold 32-bit pcs; no x86-64 Go binary is there. */
			bad += p.nfunc - i;
			break;
		}
		if (funcoff > p.len || !in_bounds(p.len, fo, p.func_size)) {
			bad++;
			continue;
		}
		rec_entry = p.field_size == 8 ? get_u64(data + fo) : get_u32(data + fo);
		if (p.field_size == 4)
			rec_entry += p.text_start;
		if (rec_entry != entry) {
			bad++; /* the record is another function's, or garbage */
			continue;
		}
		nameoff = (int32_t)get_u32(data + fo + p.field_size);
		pcsp = get_u32(data + fo + p.field_size + 12);
		if (is_stack_root(&p, nameoff)) {
			/* Over the whole range: the runtime's own tables say
			 * these frames have no caller. */
			rc =
			    unwind_table_push(t, (uint32_t)entry, UNWIND_RULE(UNWIND_END, 0, 0, 0));
			if (!rc)
				rc = unwind_table_push(t, (uint32_t)next,
						       UNWIND_RULE(UNWIND_NONE, 0, 0, 0));
		} else {
			rc = function_rows(&p, entry, next, pcsp, t);
		}
		if (rc == 1) {
			bad++;
			continue;
		}
		if (rc == -E2BIG) {
			rc =
			    kiln_error_set(err, EINVAL,
					   "pclntab: pc-value tables decode to more than %zu steps "
					   "(function %llu, pcsp 0x%x): tables shared or looping",
					   len, (unsigned long long)i, pcsp);
			goto fail;
		}
		if (rc) {
			rc = kiln_error_set(err, -rc, "pclntab: out of memory for rows");
			goto fail;
		}
		read++;
	}
	if (read == 0 && bad > 0) {
		rc = kiln_error_set(err, EINVAL,
				    "pclntab: none of its %llu functions is readable (first record "
				    "at offset 0x%zx)",
				    (unsigned long long)p.nfunc, p.pcln_off);
		goto fail;
	}
	t->stats.fdes += read;
	t->stats.bad += bad;
	add_source(t);
	return read > INT32_MAX ? INT32_MAX : (int)read;
fail:
	t->n = saved_n;
	t->stats = saved_stats;
	t->source = saved_source;
	return rc;
}

/* --- finding the table in an ELF file ------------------------------------ */

/* What unwind_gopclntab_elf looks for in the section headers. */
struct go_elf {
	Elf_Scn *pcln_scn;   /* .gopclntab, or .data.rel.ro.gopclntab (PIE) */
	Elf_Scn *relro_scn;  /* .data.rel.ro: where external PIE links keep it */
	Elf_Scn *symtab_scn; /* SHT_SYMTAB */
	uint64_t text_addr;  /* .text */
	bool have_text;
};

/* The bytes of a section as loaded, or NULL (NOBITS, compressed, empty). */
static const uint8_t *section_bytes(Elf_Scn *scn, size_t *len)
{
	GElf_Shdr sh;
	Elf_Data *d;

	if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || (sh.sh_flags & SHF_COMPRESSED))
		return NULL;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size == 0)
		return NULL;
	*len = d->d_size;
	return d->d_buf;
}

/* The value of each named symbol in .symtab (0 where absent). */
static void find_symbols(Elf *elf, Elf_Scn *symtab, const char *const *names, uint64_t *values,
			 size_t n)
{
	GElf_Shdr sh;
	Elf_Data *d;
	size_t count;

	memset(values, 0, n * sizeof(*values));
	if (!symtab || !gelf_getshdr(symtab, &sh) || sh.sh_entsize == 0)
		return;
	d = elf_getdata(symtab, NULL);
	if (!d)
		return;
	count = d->d_size / sh.sh_entsize;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_name == 0)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name)
			continue;
		for (size_t k = 0; k < n; k++)
			if (values[k] == 0 && strcmp(name, names[k]) == 0)
				values[k] = sym.st_value;
	}
}

/* The section holding vaddr, with bytes, and the offset of vaddr in it. */
static const uint8_t *bytes_at(Elf *elf, uint64_t vaddr, size_t *len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const uint8_t *b;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || vaddr < sh.sh_addr ||
		    vaddr - sh.sh_addr >= sh.sh_size)
			continue;
		b = section_bytes(scn, &n);
		if (!b || vaddr - sh.sh_addr >= n)
			return NULL;
		*len = n - (vaddr - sh.sh_addr);
		return b + (vaddr - sh.sh_addr);
	}
	return NULL;
}

/* A stripped external PIE link leaves the table somewhere in .data.rel.ro
 * with no name: tries the 8-aligned spots that start like a header, at
 * most SCAN_TRIES of them (a crafted section full of headers must not make
 * the work quadratic). Returns what unwind_gopclntab_rows returned for the
 * first that parses, or -ENOENT. */
#define SCAN_TRIES 8

static int scan_for_table(Elf_Scn *scn, uint64_t text_vaddr, struct unwind_table *t)
{
	GElf_Shdr sh;
	const uint8_t *b;
	size_t len;
	int tries = 0;

	if (!scn || !gelf_getshdr(scn, &sh) || !(b = section_bytes(scn, &len)))
		return -ENOENT;
	for (size_t off = (8 - sh.sh_addr % 8) % 8; off + 8 <= len && tries < SCAN_TRIES;
	     off += 8) {
		struct kiln_error ignored = {0};
		uint32_t magic = get_u32(b + off);
		int rc;

		if ((magic != GO116_MAGIC && magic != GO118_MAGIC && magic != GO120_MAGIC) ||
		    memcmp(b + off + 4, "\0\0\1\10", 4) != 0)
			continue;
		tries++;
		rc = unwind_gopclntab_rows(b + off, len - off, text_vaddr, t, &ignored);
		if (rc > 0)
			return rc;
	}
	return -ENOENT;
}

int unwind_gopclntab_elf(Elf *elf, struct unwind_table *t, struct kiln_error *err)
{
	static const char *const syms[] = {"runtime.pclntab", "runtime.epclntab", "runtime.text"};
	struct go_elf g = {0};
	uint64_t values[3], text_vaddr;
	GElf_Ehdr eh;
	size_t shstrndx, len = 0;
	const uint8_t *bytes = NULL;
	Elf_Scn *scn = NULL;
	int rc;

	if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return kiln_error_set(err, EINVAL, "gopclntab: not a readable ELF file: %s",
				      elf_errmsg(-1));
	if (eh.e_machine != EM_X86_64)
		return kiln_error_set(err, ENOTSUP,
				      "gopclntab: machine %u: only x86-64 Go tables are read",
				      eh.e_machine);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			g.symtab_scn = scn;
			continue;
		}
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".data.rel.ro.gopclntab") == 0)
			g.pcln_scn = scn;
		else if (strcmp(name, ".data.rel.ro") == 0)
			g.relro_scn = scn;
		else if (strcmp(name, ".text") == 0 && !g.have_text) {
			g.text_addr = sh.sh_addr;
			g.have_text = true;
		}
	}
	/* runtime.text is where Go's code starts; .text may begin with C
	 * start-up code when the link was external. */
	find_symbols(elf, g.symtab_scn, syms, values, 3);
	text_vaddr = values[2] ? values[2] : g.text_addr;

	if (g.pcln_scn) {
		bytes = section_bytes(g.pcln_scn, &len);
		if (!bytes)
			return kiln_error_set(err, EINVAL, "gopclntab: the section has no bytes");
	} else if (values[0]) {
		bytes = bytes_at(elf, values[0], &len);
		if (!bytes)
			return kiln_error_set(
			    err, EINVAL,
			    "gopclntab: runtime.pclntab at 0x%llx is in no section "
			    "with bytes",
			    (unsigned long long)values[0]);
		if (values[1] > values[0] && values[1] - values[0] < len)
			len = values[1] - values[0];
	} else {
		rc = scan_for_table(g.relro_scn, text_vaddr, t);
		if (rc == -ENOENT)
			return kiln_error_set(err, ENOENT,
					      "gopclntab: no .gopclntab section, runtime.pclntab "
					      "symbol or table in .data.rel.ro");
		return rc;
	}
	return unwind_gopclntab_rows(bytes, len, text_vaddr, t, err);
}
