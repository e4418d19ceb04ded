/*
 * test_cfi.c — unwind tables from DWARF CFI (.eh_frame, .debug_frame)
 * checked three ways.
 *
 * 1. Against libdw, pc by pc, on real binaries: libc, ld.so, python3.11,
 *    programs built here (C++ with exceptions; C with and without frame
 *    pointers) and this test program. At every byte from the first FDE
 *    to past the last row (random pcs when that is above 4 MiB, plus the
 *    FDE starts, the rows' edges and the gaps either way), libdw's own
 *    rules (dwarf_cfi_addrframe) are evaluated numerically, on made-up
 *    register values and memory, next to what the table's row says a
 *    walk computes: the CFA, where the return address is, where the
 *    caller's rbp is. That compares meanings, not encodings: a PLT row
 *    must give libdw's CFA at all sixteen pc alignments, an UNSUPPORTED
 *    row must stand for rules no row can hold, a pc outside every FDE
 *    must have no row (or a NONE row).
 * 2. On this process's own live stack: from a qsort comparator (glibc's
 *    msort, no frame pointers), a deep recursion through a shared object
 *    built without frame pointers (tests/unwind/progs/cfi/frames.c; one of
 *    its functions keeps data in rbp) and a signal handler (glibc's
 *    __restore_rt), the BPF walk of src/agent/unwind.bpf.h redone in C
 *    over tables built per mapped file must give the same frames as
 *    glibc's backtrace() (libgcc's unwinder, an implementation of its
 *    own) and end at an END row in _start.
 * 3. Edge cases: CFI only in .debug_frame, CFI only in a separate debug
 *    file found by build ID, truncated and damaged ELF images (read next
 *    to a guard page: errors, never crashes), unwind_table_find on tiny
 *    tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "unwind/unwind.h"
#include "unwind_test_util.h"

#define DWREG_RBP 6
#define DWREG_RSP 7
#define DWREG_RA  16

struct live_maps;

struct cfi_env {
	char dir[64];
	char root[PATH_MAX];
	void *frames_so; /* dlopen of libframes.so */
	int (*frames_small)(int n, int (*cb)(void *), void *arg);
	struct live_maps *maps; /* this process's code mappings, read once */
};

static int setup(void **state)
{
	struct cfi_env *env = calloc(1, sizeof(*env));
	const char *root = getenv("KILN_ROOT");
	char cmd[2 * PATH_MAX];
	void *warm[4];

	if (!env)
		return -1;
	/* absolute: the build below runs in the temporary directory */
	if (!realpath(root ? root : ".", env->root)) {
		free(env);
		return -1;
	}
	snprintf(env->dir, sizeof(env->dir), "/tmp/kiln-cfi-XXXXXX");
	if (!mkdtemp(env->dir)) {
		free(env);
		return -1;
	}
	elf_version(EV_CURRENT);
	/* frames.c four ways, throw.cc once (and run: it must catch),
	 * shapes.s into a shared object, and a
	 * stripped copy of the .debug_frame-only program whose CFI then
	 * lives only in its separate debug file, laid out by build ID. */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; S=%s/tests/unwind/progs/cfi; "
		 "gcc -O2 -fomit-frame-pointer -DFRAMES_MAIN -o frames_omit $S/frames.c; "
		 "gcc -O2 -fno-omit-frame-pointer -DFRAMES_MAIN -o frames_fp $S/frames.c; "
		 "gcc -O2 -fomit-frame-pointer -shared -fPIC -o libframes.so $S/frames.c; "
		 "g++ -O2 -fomit-frame-pointer -o throw $S/throw.cc; "
		 "gcc -shared -nostdlib -o libshapes.so $S/shapes.s; "
		 "./throw | grep -q 'caught: thrown at depth 3'; "
		 "gcc -O2 -g -fno-asynchronous-unwind-tables -Wl,--build-id -DFRAMES_MAIN "
		 "-o frames_dbg $S/frames.c; "
		 "objcopy --only-keep-debug frames_dbg frames_dbg.debug; "
		 "objcopy --strip-all frames_dbg frames_stripped; "
		 "id=$(readelf -n frames_dbg | sed -n 's/.*Build ID: *//p'); "
		 "d=debug/.build-id/$(echo $id | cut -c1-2); mkdir -p $d; "
		 "cp frames_dbg.debug $d/$(echo $id | cut -c3-).debug",
		 env->dir, env->root);
	if (run(cmd)) {
		free(env);
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "%s/libframes.so", env->dir);
	env->frames_so = dlopen(cmd, RTLD_NOW);
	if (!env->frames_so) {
		print_error("dlopen %s: %s\n", cmd, dlerror());
		free(env);
		return -1;
	}
	*(void **)&env->frames_small = dlsym(env->frames_so, "frames_small");
	/* backtrace() loads libgcc_s on first use: before maps are read. */
	backtrace(warm, 4);
	*state = env;
	return 0;
}

static void live_maps_free(struct live_maps *maps);

static int teardown(void **state)
{
	struct cfi_env *env = *state;
	char cmd[256];

	if (!env)
		return 0;
	live_maps_free(env->maps);
	dlclose(env->frames_so);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", env->dir);
	(void)!system(cmd);
	free(env);
	return 0;
}

/* ---- small helpers ------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* An opened ELF file; elf NULL when the path does not exist. */
struct elf_file {
	int fd;
	Elf *elf;
};

static void elf_file_open(const char *path, struct elf_file *f)
{
	f->fd = open(path, O_RDONLY);
	if (f->fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	if (!f->elf)
		fail_msg("elf_begin %s: %s", path, elf_errmsg(-1));
}

static void elf_file_close(struct elf_file *f)
{
	elf_end(f->elf);
	close(f->fd);
}

/* A section by name: its data (borrowed from elf) and header, or NULL. */
static Elf_Data *section_data(Elf *elf, const char *name, GElf_Shdr *shdr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *n;

		if (!gelf_getshdr(scn, shdr) || shdr->sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, shdr->sh_name);
		if (n && strcmp(n, name) == 0)
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

static void build_table(const char *path, const char *debug_dir, struct unwind_table *t)
{
	struct kiln_error err = {0};
	int fd = open(path, O_RDONLY), rc;

	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	rc = unwind_table_build(fd, debug_dir, t, &err);
	close(fd);
	if (rc != 0)
		fail_msg("unwind_table_build %s: %d %s", path, rc, err.msg);
}

/* A growable list of pcs. */
struct pc_list {
	uint64_t *v;
	size_t n, cap;
};

static void pc_add(struct pc_list *l, uint64_t pc)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		assert_non_null(l->v);
	}
	l->v[l->n++] = pc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* ---- libdw's rules, evaluated ------------------------------------------- */

/* Made-up registers (DWARF numbers 0-16; 16 is rip, the pc itself) and
 * memory (a hash of the address, so that different addresses read
 * differently) on which a frame's rules are evaluated. */
struct probe {
	uint64_t reg[17];
	uint64_t salt;
};

static void probe_init(struct probe *p, uint64_t pc, unsigned which)
{
	uint64_t s = mix64(pc * 8 + which);

	for (int i = 0; i < 17; i++)
		p->reg[i] = mix64(s + (uint64_t)i);
	p->reg[DWREG_RSP] = 0x7ffd00000000ull + (mix64(s ^ 0x11) & 0xfffffff8ull);
	p->reg[DWREG_RBP] = 0x7ffd00000000ull + (mix64(s ^ 0x22) & 0xfffffff8ull);
	p->reg[DWREG_RA] = pc;
	p->salt = mix64(s ^ 0x33);
}

static uint64_t probe_mem(const struct probe *p, uint64_t addr)
{
	return mix64(addr ^ p->salt);
}

/* Runs a DWARF expression (libdw's Dwarf_Op form) on p: true with the
 * value left on top. cfa is what DW_OP_call_frame_cfa pushes (NULL: not
 * known). False for an operation outside the arithmetic CFI uses. */
static bool eval_expr(const Dwarf_Op *ops, size_t n, const struct probe *p, const uint64_t *cfa,
		      uint64_t *out)
{
	uint64_t st[16], a, b;
	size_t sp = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t atom = ops[i].atom;

		if (sp >= 15)
			return false;
		if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31) {
			st[sp++] = atom - DW_OP_lit0;
			continue;
		}
		if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31) {
			if (atom - DW_OP_breg0 > 16)
				return false;
			st[sp++] = p->reg[atom - DW_OP_breg0] + ops[i].number;
			continue;
		}
		switch (atom) {
		case DW_OP_bregx:
			if (ops[i].number > 16)
				return false;
			st[sp++] = p->reg[ops[i].number] + ops[i].number2;
			continue;
		case DW_OP_const1u:
		case DW_OP_const1s:
		case DW_OP_const2u:
		case DW_OP_const2s:
		case DW_OP_const4u:
		case DW_OP_const4s:
		case DW_OP_const8u:
		case DW_OP_const8s:
		case DW_OP_constu:
		case DW_OP_consts:
			st[sp++] = ops[i].number;
			continue;
		case DW_OP_call_frame_cfa:
			if (!cfa)
				return false;
			st[sp++] = *cfa;
			continue;
		case DW_OP_nop:
			continue;
		}
		if (sp < 1)
			return false;
		switch (atom) {
		case DW_OP_dup:
			st[sp] = st[sp - 1];
			sp++;
			continue;
		case DW_OP_drop:
			sp--;
			continue;
		case DW_OP_deref:
			st[sp - 1] = probe_mem(p, st[sp - 1]);
			continue;
		case DW_OP_plus_uconst:
			st[sp - 1] += ops[i].number;
			continue;
		case DW_OP_neg:
			st[sp - 1] = -st[sp - 1];
			continue;
		case DW_OP_not:
			st[sp - 1] = ~st[sp - 1];
			continue;
		}
		if (sp < 2)
			return false;
		b = st[sp - 1];
		a = st[sp - 2];
		if (atom == DW_OP_over) {
			st[sp++] = a;
			continue;
		}
		if (atom == DW_OP_swap) {
			st[sp - 1] = a;
			st[sp - 2] = b;
			continue;
		}
		sp--;
		switch (atom) {
		case DW_OP_plus:
			a += b;
			break;
		case DW_OP_minus:
			a -= b;
			break;
		case DW_OP_mul:
			a *= b;
			break;
		case DW_OP_and:
			a &= b;
			break;
		case DW_OP_or:
			a |= b;
			break;
		case DW_OP_xor:
			a ^= b;
			break;
		case DW_OP_shl:
			a = b < 64 ? a << b : 0;
			break;
		case DW_OP_shr:
			a = b < 64 ? a >> b : 0;
			break;
		case DW_OP_shra:
			a = (uint64_t)((int64_t)a >> (b < 63 ? b : 63));
			break;
		/* DWARF's comparisons are signed. */
		case DW_OP_ge:
			a = (int64_t)a >= (int64_t)b;
			break;
		case DW_OP_gt:
			a = (int64_t)a > (int64_t)b;
			break;
		case DW_OP_le:
			a = (int64_t)a <= (int64_t)b;
			break;
		case DW_OP_lt:
			a = (int64_t)a < (int64_t)b;
			break;
		case DW_OP_eq:
			a = a == b;
			break;
		case DW_OP_ne:
			a = a != b;
			break;
		default:
			return false;
		}
		st[sp - 1] = a;
	}
	if (sp == 0)
		return false;
	*out = st[sp - 1];
	return true;
}

/* The CFA libdw's frame gives on p, or false. */
static bool frame_cfa(Dwarf_Frame *f, const struct probe *p, uint64_t *cfa)
{
	Dwarf_Op *ops = NULL;
	size_t n = 0;

	return dwarf_frame_cfa(f, &ops, &n) == 0 && n > 0 && eval_expr(ops, n, p, NULL, cfa);
}

/* Where the caller's value of a register is, by libdw's rule. */
struct reg_loc {
	enum { LOC_UNDEFINED, LOC_VALUE, LOC_AT, LOC_UNKNOWN } kind;
	uint64_t v; /* the value (LOC_VALUE) or the address holding it (LOC_AT) */
};

static struct reg_loc frame_register(Dwarf_Frame *f, int regno, const struct probe *p,
				     const uint64_t *cfa)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;
	struct reg_loc l = {LOC_UNKNOWN, 0};

	if (dwarf_frame_register(f, regno, mem, &ops, &n) != 0)
		return l;
	if (n == 0) {
		/* ops NULL: same value; ops_mem: undefined */
		l.kind = ops == NULL ? LOC_VALUE : LOC_UNDEFINED;
		l.v = p->reg[regno];
		return l;
	}
	if (n == 1 && (ops[0].atom == DW_OP_regx ||
		       (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31))) {
		uint64_t r = ops[0].atom == DW_OP_regx ? ops[0].number
						       : (uint64_t)(ops[0].atom - DW_OP_reg0);

		if (r <= 16) {
			l.kind = LOC_VALUE;
			l.v = p->reg[r];
		}
		return l;
	}
	if (ops[n - 1].atom == DW_OP_stack_value) {
		if (eval_expr(ops, n - 1, p, cfa, &l.v))
			l.kind = LOC_VALUE;
		return l;
	}
	if (eval_expr(ops, n, p, cfa, &l.v))
		l.kind = LOC_AT;
	return l;
}

/* True when libdw's rules at a signal frame are the trampoline's: CFA,
 * rip and rbp from the ucontext at rsp. */
static bool is_signal_shape(Dwarf_Frame *f, const struct probe *p)
{
	uint64_t cfa, rsp = p->reg[DWREG_RSP];
	struct reg_loc ra, bp;

	if (!frame_cfa(f, p, &cfa) || cfa != probe_mem(p, rsp + UNWIND_SIGNAL_RSP_AT))
		return false;
	ra = frame_register(f, DWREG_RA, p, &cfa);
	bp = frame_register(f, DWREG_RBP, p, &cfa);
	return ra.kind == LOC_AT && ra.v == rsp + UNWIND_SIGNAL_RIP_AT && bp.kind == LOC_AT &&
	       bp.v == rsp + UNWIND_SIGNAL_RBP_AT;
}

/* The CFA of the PLT row with this threshold (unwind_row.h). */
static uint64_t plt_cfa(const struct probe *p, unsigned threshold)
{
	return p->reg[DWREG_RSP] + 8 + ((p->reg[DWREG_RA] & 15) >= threshold ? 8 : 0);
}

/* True when libdw's CFA is the PLT row's with this threshold at every
 * pc alignment of the 16-byte entry holding pc. */
static bool cfa_is_plt(Dwarf_Frame *f, uint64_t pc, unsigned threshold)
{
	for (unsigned j = 0; j < 16; j++) {
		struct probe p;
		uint64_t cfa;

		probe_init(&p, pc, 0);
		p.reg[DWREG_RA] = (pc & ~15ull) | j;
		if (!frame_cfa(f, &p, &cfa) || cfa != plt_cfa(&p, threshold))
			return false;
	}
	return true;
}

/* What row libdw's rules could have been, or NULL when no row holds them
 * (the check of an UNSUPPORTED row). */
static const char *expressible(Dwarf_Frame *f, uint64_t pc, bool signal)
{
	static char as[96];
	struct probe p[2];
	uint64_t cfa[2];
	struct reg_loc ra[2];

	for (unsigned k = 0; k < 2; k++)
		probe_init(&p[k], pc, k);
	if (signal)
		return is_signal_shape(f, &p[0]) && is_signal_shape(f, &p[1]) ? "a SIGNAL row"
									      : NULL;
	if (!frame_cfa(f, &p[0], &cfa[0]) || !frame_cfa(f, &p[1], &cfa[1]))
		return NULL;
	for (unsigned k = 0; k < 2; k++)
		ra[k] = frame_register(f, DWREG_RA, &p[k], &cfa[k]);
	if (ra[0].kind == LOC_UNDEFINED && ra[1].kind == LOC_UNDEFINED)
		snprintf(as, sizeof(as), "an END row (return address undefined)");
	else if (ra[0].kind != LOC_AT || ra[0].v != cfa[0] - 8 || ra[1].kind != LOC_AT ||
		 ra[1].v != cfa[1] - 8)
		return NULL;
	else
		snprintf(as, sizeof(as), "a row with the return address at CFA-8");
	for (int reg = DWREG_RBP; reg <= DWREG_RSP; reg++) {
		uint64_t d0 = cfa[0] - p[0].reg[reg], d1 = cfa[1] - p[1].reg[reg];

		if (d0 == d1 && d0 <= UNWIND_OFF_MAX)
			return as;
	}
	for (unsigned t = 0; t < 32; t++)
		if (cfa_is_plt(f, pc, t))
			return as;
	return NULL;
}

/* True when an rbp rule the table calls UNDEFINED is one a row holds:
 * the same value, or saved at CFA + 8k. */
static bool rbp_expressible(struct reg_loc bp, const struct probe *p, uint64_t cfa)
{
	int64_t d = (int64_t)(bp.v - cfa);

	if (bp.kind == LOC_VALUE)
		return bp.v == p->reg[DWREG_RBP];
	return bp.kind == LOC_AT && d % 8 == 0 && d / 8 >= UNWIND_RBP_OFF_MIN &&
	       d / 8 <= UNWIND_RBP_OFF_MAX;
}

/* Whether a table row means what libdw's frame at pc says; if not, why. */
static bool row_agrees(Dwarf_Frame *f, uint32_t rule, uint64_t pc, char *why, size_t len)
{
	unsigned kind = UNWIND_RULE_KIND(rule), off = UNWIND_RULE_OFF(rule);
	int rbp_off = UNWIND_RULE_RBP_OFF(rule);
	bool signal = false;
	Dwarf_Addr start, end;

	if (dwarf_frame_info(f, &start, &end, &signal) < 0) {
		snprintf(why, len, "libdw: dwarf_frame_info: %s", dwarf_errmsg(-1));
		return false;
	}
	if (kind == UNWIND_UNSUPPORTED) {
		const char *as = expressible(f, pc, signal);

		if (as)
			snprintf(why, len, "UNSUPPORTED, but libdw's rules fit %s", as);
		return as == NULL;
	}
	if (kind == UNWIND_NONE || kind > UNWIND_UNSUPPORTED) {
		snprintf(why, len, "%s where libdw has an FDE", kind_name(kind));
		return false;
	}
	if (signal != (kind == UNWIND_SIGNAL)) {
		snprintf(why, len, "%s, but libdw says %sa signal frame", kind_name(kind),
			 signal ? "" : "not ");
		return false;
	}
	for (unsigned k = 0; k < 2; k++) {
		struct probe p;
		uint64_t cfa = 0, want;
		bool have_cfa;
		struct reg_loc ra, bp;

		probe_init(&p, pc, k);
		have_cfa = frame_cfa(f, &p, &cfa);
		if (kind == UNWIND_SIGNAL) {
			if (!is_signal_shape(f, &p)) {
				snprintf(why, len,
					 "SIGNAL, but libdw's rules are not the trampoline's");
				return false;
			}
			continue;
		}
		ra = frame_register(f, DWREG_RA, &p, have_cfa ? &cfa : NULL);
		if (kind == UNWIND_END) {
			if (ra.kind != LOC_UNDEFINED) {
				snprintf(why, len, "END, but libdw's return address is defined");
				return false;
			}
			continue;
		}
		if (kind == UNWIND_CFA_SP)
			want = p.reg[DWREG_RSP] + off;
		else if (kind == UNWIND_CFA_FP)
			want = p.reg[DWREG_RBP] + off;
		else
			want = plt_cfa(&p, off);
		if (!have_cfa || cfa != want) {
			snprintf(why, len, "%s %u, but libdw's CFA is %s", kind_name(kind), off,
				 have_cfa ? "another" : "not arithmetic");
			return false;
		}
		if (kind == UNWIND_CFA_PLT && k == 0 && !cfa_is_plt(f, pc, off)) {
			snprintf(why, len,
				 "CFA_PLT %u, but libdw's CFA differs at another alignment", off);
			return false;
		}
		if (ra.kind != LOC_AT || ra.v != cfa - 8) {
			snprintf(why, len, "%s, but libdw's return address is not at CFA-8",
				 kind_name(kind));
			return false;
		}
		bp = frame_register(f, DWREG_RBP, &p, &cfa);
		switch (UNWIND_RULE_RBP(rule)) {
		case UNWIND_RBP_SAME:
			if (bp.kind == LOC_VALUE && bp.v == p.reg[DWREG_RBP])
				continue;
			break;
		case UNWIND_RBP_AT_CFA:
			if (bp.kind == LOC_AT && bp.v == cfa + 8 * (int64_t)rbp_off)
				continue;
			break;
		case UNWIND_RBP_UNDEFINED:
			if (!rbp_expressible(bp, &p, cfa))
				continue;
			break;
		}
		if (bp.kind == LOC_AT)
			snprintf(why, len,
				 "%s %u: rbp rule %u (%d), libdw's rbp is at CFA%+" PRId64,
				 kind_name(kind), off, UNWIND_RULE_RBP(rule), rbp_off,
				 (int64_t)(bp.v - cfa));
		else
			snprintf(why, len, "%s %u: rbp rule %u (%d), libdw's rbp is %s",
				 kind_name(kind), off, UNWIND_RULE_RBP(rule), rbp_off,
				 bp.kind == LOC_UNDEFINED   ? "undefined"
				 : bp.kind != LOC_VALUE	    ? "not arithmetic"
				 : bp.v == p.reg[DWREG_RBP] ? "the same value"
							    : "another value");
		return false;
	}
	return true;
}

/* ---- one file's table against libdw -------------------------------------- */

/* libdw's CFI of a file: .eh_frame first, then .debug_frame (of the file
 * or of its separate debug file), the order unwind_table_build layers
 * them in. */
struct cfi_ref {
	struct elf_file file, debug;
	bool has_debug;
	Dwarf_CFI *eh;
	Dwarf *dw;
	Dwarf_CFI *dbg;
};

static void cfi_ref_open(struct cfi_ref *r, const char *path, const char *debug_path)
{
	memset(r, 0, sizeof(*r));
	elf_file_open(path, &r->file);
	r->eh = dwarf_getcfi_elf(r->file.elf);
	if (debug_path) {
		elf_file_open(debug_path, &r->debug);
		r->has_debug = true;
	}
	r->dw = dwarf_begin_elf(debug_path ? r->debug.elf : r->file.elf, DWARF_C_READ, NULL);
	r->dbg = r->dw ? dwarf_getcfi(r->dw) : NULL;
	assert_true(r->eh || r->dbg);
}

static void cfi_ref_close(struct cfi_ref *r)
{
	if (r->eh)
		dwarf_cfi_end(r->eh);
	if (r->dw)
		dwarf_end(r->dw);
	if (r->has_debug)
		elf_file_close(&r->debug);
	elf_file_close(&r->file);
}

/* libdw's frame at pc (malloc'd), or NULL when no FDE covers pc. */
static Dwarf_Frame *cfi_ref_frame(const struct cfi_ref *r, uint64_t pc)
{
	Dwarf_Frame *f = NULL;

	if (r->eh && dwarf_cfi_addrframe(r->eh, pc, &f) == 0)
		return f;
	if (r->dbg && dwarf_cfi_addrframe(r->dbg, pc, &f) == 0)
		return f;
	return NULL;
}

/* FDE starts from .eh_frame_hdr's search table (GNU ld writes it as
 * pcrel sdata4 pointer, udata4 count, datarel sdata4 pairs). */
static void eh_frame_hdr_starts(Elf *elf, struct pc_list *out)
{
	GElf_Shdr sh;
	Elf_Data *d = section_data(elf, ".eh_frame_hdr", &sh);
	const uint8_t *h;
	uint32_t count;

	if (!d)
		return;
	h = d->d_buf;
	assert_true(d->d_size >= 12);
	assert_int_equal(h[0], 1);
	assert_int_equal(h[1], DW_EH_PE_pcrel | DW_EH_PE_sdata4);
	assert_int_equal(h[2], DW_EH_PE_udata4);
	assert_int_equal(h[3], DW_EH_PE_datarel | DW_EH_PE_sdata4);
	memcpy(&count, h + 8, 4);
	assert_true(12 + (uint64_t)count * 8 <= d->d_size);
	for (uint32_t i = 0; i < count; i++) {
		int32_t init;

		memcpy(&init, h + 12 + 8 * (size_t)i, 4);
		pc_add(out, sh.sh_addr + (uint64_t)(int64_t)init);
	}
}

/* FDE starts from .debug_frame (absolute 8-byte initial locations). */
static void debug_frame_starts(Elf *elf, struct pc_list *out)
{
	GElf_Shdr sh;
	Elf_Data *d = section_data(elf, ".debug_frame", &sh);
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;

	if (!d)
		return;
	while (dwarf_next_cfi((const unsigned char *)elf_getident(elf, NULL), d, false, off, &next,
			      &e) == 0) {
		uint64_t init;

		if (!dwarf_cfi_cie_p(&e) && e.fde.end - e.fde.start >= 16) {
			memcpy(&init, e.fde.start, 8);
			pc_add(out, init);
		}
		off = next;
	}
}

/* The pcs to compare, each once: around each of libdw's rows from each
 * FDE start up to the next (the row start, the byte after, the last
 * byte, a random byte), the first pc after the rows and a random pc of
 * the gap before the next FDE; each table row's start and its
 * neighbours; and every byte from the first FDE to past the last row
 * (random pcs there instead when that span is above 4 MiB). */
static void sample_pcs(const struct cfi_ref *r, const struct unwind_table *t, struct pc_list *pcs)
{
	struct pc_list starts = {0};
	uint64_t seed = 0x5eed, lo, hi;

	eh_frame_hdr_starts(r->file.elf, &starts);
	debug_frame_starts(r->has_debug ? r->debug.elf : r->file.elf, &starts);
	assert_true(starts.n > 0);
	qsort(starts.v, starts.n, sizeof(*starts.v), cmp_u64);
	for (size_t i = 0; i < starts.n; i++) {
		uint64_t pc = starts.v[i];
		uint64_t limit = i + 1 < starts.n ? starts.v[i + 1] : UINT64_MAX;

		for (int rows = 0; rows < 100000 && pc < limit; rows++) {
			Dwarf_Frame *f = cfi_ref_frame(r, pc);
			Dwarf_Addr s, e;

			if (!f) {
				pc_add(pcs, pc);
				if (limit != UINT64_MAX)
					pc_add(pcs, pc + mix64(seed++) % (limit - pc));
				break;
			}
			assert_true(dwarf_frame_info(f, &s, &e, NULL) >= 0);
			free(f);
			if (e <= pc)
				break;
			pc_add(pcs, pc);
			pc_add(pcs, pc + 1);
			pc_add(pcs, e - 1);
			pc_add(pcs, pc + mix64(seed++) % (e - pc));
			pc = e;
		}
	}
	for (size_t i = 0; i < t->n; i++) {
		pc_add(pcs, t->rows[i].pc);
		pc_add(pcs, t->rows[i].pc + 1ull);
		if (t->rows[i].pc > 0)
			pc_add(pcs, t->rows[i].pc - 1ull);
	}
	lo = starts.v[0] > 64 ? starts.v[0] - 64 : 0;
	hi = (t->n ? t->rows[t->n - 1].pc : starts.v[starts.n - 1]) + 64ull;
	if (hi - lo <= 4096 * 1024) {
		for (uint64_t pc = lo; pc < hi; pc++)
			pc_add(pcs, pc);
	} else {
		for (size_t i = 0; i < 4 * starts.n; i++)
			pc_add(pcs, lo + mix64(seed++) % (hi - lo));
	}
	free(starts.v);
	/* each pc once */
	qsort(pcs->v, pcs->n, sizeof(*pcs->v), cmp_u64);
	for (size_t i = 0, out = 0; i < pcs->n; i++) {
		if (out == 0 || pcs->v[out - 1] != pcs->v[i])
			pcs->v[out++] = pcs->v[i];
		if (i + 1 == pcs->n)
			pcs->n = out;
	}
}

struct compare_stats {
	size_t pcs, outside, mismatches;
	size_t kinds[UNWIND_UNSUPPORTED + 1];
	size_t rbp_undefined; /* of the arithmetic rows' pcs */
};

/* Compares the table of path (built with debug_dir) with libdw's CFI
 * (debug_path: where .debug_frame is, if not in path) at every sampled
 * pc; prints the counts, fails on any mismatch. */
static void compare_file(const char *what, const char *path, const char *debug_path,
			 const char *debug_dir, struct compare_stats *st)
{
	struct unwind_table t;
	struct cfi_ref r;
	struct pc_list pcs = {0};

	memset(st, 0, sizeof(*st));
	build_table(path, debug_dir, &t);
	cfi_ref_open(&r, path, debug_path);
	sample_pcs(&r, &t, &pcs);
	for (size_t i = 0; i < pcs.n; i++) {
		uint64_t pc = pcs.v[i];
		const struct unwind_row *row;
		Dwarf_Frame *f;
		unsigned kind;
		char why[256];

		assert_true(pc <= UINT32_MAX);
		row = unwind_table_find(&t, (uint32_t)pc);
		kind = row ? UNWIND_RULE_KIND(row->rule) : UNWIND_NONE;
		f = cfi_ref_frame(&r, pc);
		st->pcs++;
		if (!f) {
			st->outside++;
			if (kind == UNWIND_NONE)
				continue;
			snprintf(why, sizeof(why), "%s row where libdw has no FDE",
				 kind_name(kind));
		} else {
			bool ok = row && row_agrees(f, row->rule, pc, why, sizeof(why));

			free(f);
			if (!row)
				snprintf(why, sizeof(why), "no row where libdw has an FDE");
			if (ok) {
				st->kinds[kind]++;
				if (kind >= UNWIND_CFA_SP && kind <= UNWIND_CFA_PLT &&
				    UNWIND_RULE_RBP(row->rule) == UNWIND_RBP_UNDEFINED)
					st->rbp_undefined++;
				continue;
			}
		}
		if (st->mismatches++ < 20)
			print_error("%s: pc 0x%" PRIx64 " (row at 0x%x): %s\n", what, pc,
				    row ? row->pc : 0, why);
	}
	print_message("%s: %zu pcs compared with libdw, %zu mismatches: CFA_SP %zu, CFA_FP %zu, "
		      "CFA_PLT %zu, SIGNAL %zu, END %zu, UNSUPPORTED %zu (rbp undefined %zu), "
		      "outside any FDE %zu; table %zu rows from %s, %" PRIu64 " FDEs\n",
		      what, st->pcs, st->mismatches, st->kinds[UNWIND_CFA_SP],
		      st->kinds[UNWIND_CFA_FP], st->kinds[UNWIND_CFA_PLT], st->kinds[UNWIND_SIGNAL],
		      st->kinds[UNWIND_END], st->kinds[UNWIND_UNSUPPORTED], st->rbp_undefined,
		      st->outside, t.n, t.source, t.stats.fdes);
	assert_int_equal(st->mismatches, 0);
	assert_int_equal(t.stats.bad, 0);
	assert_true(st->kinds[UNWIND_CFA_SP] > 0);
	free(pcs.v);
	cfi_ref_close(&r);
	unwind_table_free(&t);
}

static void test_libc(void **state)
{
	struct compare_stats st;

	compare_file("libc", "/lib/x86_64-linux-gnu/libc.so.6", NULL, NULL, &st);
	assert_true(st.pcs > 20000);
	/* __restore_rt (SIGNAL), libc's PLT (CFA_PLT) */
	assert_true(st.kinds[UNWIND_SIGNAL] > 0);
	assert_true(st.kinds[UNWIND_CFA_PLT] > 0);
	assert_true(st.kinds[UNWIND_CFA_FP] > 0);
}

static void test_ld_so(void **state)
{
	struct compare_stats st;

	/* Its entry code has no FDE (no END row); _dl_runtime_resolve's CFA
	 * is rbx-based (UNSUPPORTED rows). */
	compare_file("ld.so", "/lib64/ld-linux-x86-64.so.2", NULL, NULL, &st);
	assert_true(st.pcs > 20000);
	assert_true(st.kinds[UNWIND_UNSUPPORTED] > 0);
}

static void test_python(void **state)
{
	struct compare_stats st;

	if (access("/usr/bin/python3.11", R_OK) != 0) {
		print_message("no /usr/bin/python3.11: skipped\n");
		skip();
	}
	compare_file("python3.11", "/usr/bin/python3.11", NULL, NULL, &st);
	assert_true(st.pcs > 20000);
	assert_true(st.kinds[UNWIND_END] > 0);
}

/* A program built here: path under the test directory. */
static void compare_built(const struct cfi_env *env, const char *name, struct compare_stats *st)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", env->dir, name);
	compare_file(name, path, NULL, NULL, st);
	assert_true(st->kinds[UNWIND_END] > 0 || strstr(name, ".so"));
	assert_true(st->kinds[UNWIND_CFA_PLT] > 0);
}

static void test_cxx_exceptions(void **state)
{
	struct compare_stats st;

	compare_built(*state, "throw", &st);
}

static void test_c_programs(void **state)
{
	struct compare_stats st;

	/* alloca makes an rbp-based frame even without frame pointers */
	compare_built(*state, "frames_omit", &st);
	assert_true(st.kinds[UNWIND_CFA_FP] > 0);
	compare_built(*state, "frames_fp", &st);
	assert_true(st.kinds[UNWIND_CFA_FP] > st.kinds[UNWIND_CFA_SP] / 4);
	compare_built(*state, "libframes.so", &st);
}

static void test_self(void **state)
{
	struct compare_stats st;
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	assert_true(n > 0);
	path[n] = '\0';
	compare_file("test_cfi", path, NULL, NULL, &st);
	assert_true(st.kinds[UNWIND_CFA_FP] > 0);
	assert_true(st.kinds[UNWIND_END] > 0);
}

/* The kinds and rbp rules of the rows over a function of path, as bit
 * masks (1 << kind, 1 << rbp rule). */
static void rows_over(const struct unwind_table *t, const char *path, const char *name,
		      unsigned *kinds, unsigned *rbps)
{
	struct elf_file f;
	uint64_t addr, size;

	elf_file_open(path, &f);
	symbol(f.elf, name, &addr, &size);
	elf_file_close(&f);
	*kinds = *rbps = 0;
	for (uint64_t pc = addr; pc < addr + size; pc++) {
		const struct unwind_row *row = unwind_table_find(t, (uint32_t)pc);

		assert_non_null(row);
		*kinds |= 1u << UNWIND_RULE_KIND(row->rule);
		*rbps |= 1u << UNWIND_RULE_RBP(row->rule);
	}
}

static void test_hand_written_cfi(void **state)
{
	const struct cfi_env *env = *state;
	static const struct {
		const char *name;
		unsigned kind, rbp; /* a row of this kind (and rbp rule) is there */
	} want[] = {
	    {"shape_rbp_in_register", UNWIND_CFA_SP, UNWIND_RBP_UNDEFINED},
	    {"shape_rbp_undefined", UNWIND_CFA_SP, UNWIND_RBP_UNDEFINED},
	    {"shape_rbp_far", UNWIND_CFA_SP, UNWIND_RBP_UNDEFINED},
	    {"shape_rbp_value", UNWIND_CFA_SP, UNWIND_RBP_UNDEFINED},
	    {"shape_cfa_rbx", UNWIND_UNSUPPORTED, UNWIND_RBP_SAME},
	    {"shape_cfa_far", UNWIND_UNSUPPORTED, UNWIND_RBP_SAME},
	    {"shape_ra_in_register", UNWIND_UNSUPPORTED, UNWIND_RBP_SAME},
	    {"shape_outermost", UNWIND_END, UNWIND_RBP_SAME},
	    {"shape_signal_ordinary", UNWIND_UNSUPPORTED, UNWIND_RBP_SAME},
	};
	struct compare_stats st;
	struct unwind_table t;
	char path[256];

	snprintf(path, sizeof(path), "%s/libshapes.so", env->dir);
	compare_file("shapes.s", path, NULL, NULL, &st);
	build_table(path, NULL, &t);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		unsigned kinds, rbps;

		rows_over(&t, path, want[i].name, &kinds, &rbps);
		if (!(kinds & (1u << want[i].kind)) || !(rbps & (1u << want[i].rbp)))
			fail_msg("%s: no %s row with rbp rule %u (kinds 0x%x, rbp rules 0x%x)",
				 want[i].name, kind_name(want[i].kind), want[i].rbp, kinds, rbps);
	}
	assert_int_equal(t.stats.unsupported, 4);
	unwind_table_free(&t);
}

/* ---- the live stack ------------------------------------------------------- */

/* An executable file mapping of this process and its table, built when
 * a walk first enters it. */
struct live_mapping {
	uint64_t start, end, offset;
	char path[512];
	bool built, ok;
	uint64_t bias;
	struct unwind_table table;
};

struct live_maps {
	struct live_mapping *m;
	size_t n;
};

static void live_maps_free(struct live_maps *maps)
{
	if (!maps)
		return;
	for (size_t i = 0; i < maps->n; i++)
		unwind_table_free(&maps->m[i].table);
	free(maps->m);
	free(maps);
}

static struct live_maps *live_maps_read(void)
{
	struct live_maps *maps = calloc(1, sizeof(*maps));
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	size_t cap = 0;

	assert_non_null(maps);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		struct live_mapping m = {0};
		char perms[8], path[512] = "";

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %511s", &m.start,
			   &m.end, perms, &m.offset, path) < 4)
			continue;
		if (!strchr(perms, 'x') || (path[0] != '/' && strcmp(path, "[vdso]") != 0))
			continue;
		snprintf(m.path, sizeof(m.path), "%s", path);
		if (maps->n == cap) {
			cap = cap ? cap * 2 : 64;
			maps->m = realloc(maps->m, cap * sizeof(*maps->m));
			assert_non_null(maps->m);
		}
		maps->m[maps->n++] = m;
	}
	fclose(f);
	return maps;
}

/* The bias of mapping m of elf: the PT_LOAD holding its file offset, as
 * the agent finds it (src/agent/unwinder.c). */
static bool elf_bias(Elf *elf, const struct live_mapping *m, uint64_t *bias)
{
	size_t nph = 0;

	if (elf_getphdrnum(elf, &nph) != 0)
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (m->offset >= ph.p_offset && m->offset < ph.p_offset + ph.p_filesz) {
			*bias = m->start - m->offset + ph.p_offset - ph.p_vaddr;
			return true;
		}
	}
	return false;
}

static void live_mapping_build(struct live_mapping *m)
{
	struct kiln_error err = {0};
	Elf *elf;
	int rc;

	m->built = true;
	if (strcmp(m->path, "[vdso]") == 0) {
		void *image = (void *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);

		rc = unwind_table_build_mem(image, m->end - m->start, &m->table, &err);
		elf = elf_memory(image, m->end - m->start);
		m->ok = rc == 0 && elf && elf_bias(elf, m, &m->bias);
		elf_end(elf);
	} else {
		int fd = open(m->path, O_RDONLY);

		assert_true(fd >= 0);
		rc = unwind_table_build(fd, NULL, &m->table, &err);
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		m->ok = rc == 0 && elf && elf_bias(elf, m, &m->bias);
		elf_end(elf);
		close(fd);
	}
	if (!m->ok)
		print_error("%s: no table: %d %s\n", m->path, rc, err.msg);
}

static struct live_mapping *live_find(const struct live_maps *maps, uint64_t pc)
{
	for (size_t i = 0; i < maps->n; i++)
		if (pc >= maps->m[i].start && pc < maps->m[i].end)
			return &maps->m[i];
	return NULL;
}

/* Reads the process's own memory as bpf_probe_read_user would: a bad
 * address is an error, not a crash (and not an ASan report). */
static bool read_user(uint64_t addr, void *out, size_t len)
{
	struct iovec local = {out, len}, remote = {(void *)(uintptr_t)addr, len};

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len;
}

enum walk_stop {
	WALK_END,     /* an END row: the stack is complete */
	WALK_PC_ZERO, /* a zero return address */
	WALK_NO_MAPPING,
	WALK_NO_TABLE, /* or a CFA_FP row with rbp unknown, as the BPF says */
	WALK_UNSUPPORTED,
	WALK_BAD_FRAME, /* a CFA at or below rsp */
	WALK_READ_FAULT,
	WALK_DEPTH,
	WALK_FP_FALLBACK, /* a NONE row or no row: the BPF steps by rbp there */
};

static const char *const walk_stop_names[] = {
    "END",	 "PC_ZERO",    "NO_MAPPING", "NO_TABLE",    "UNSUPPORTED",
    "BAD_FRAME", "READ_FAULT", "DEPTH",	     "FP_FALLBACK",
};

#define LIVE_MAX_FRAMES 256

/* One captured stack: the walk's frames and backtrace()'s. */
struct live_stack {
	struct live_maps *maps;
	uint64_t pc, sp, bp; /* the registers at the capture */
	uint64_t caller;     /* the capturing function's return address */
	uint64_t frames[LIVE_MAX_FRAMES];
	size_t n;
	enum walk_stop stop;
	struct live_mapping *last; /* the mapping of the last frame */
	size_t signal_frames;	   /* SIGNAL rows the walk went through */
	void *bt[LIVE_MAX_FRAMES];
	int nbt;
	unsigned calls; /* of the qsort comparator */
	bool done;
};

/* src/agent/unwind.bpf.h's unwind_step, in C over this process: frames
 * from the interrupted registers until a row says END. Unlike the BPF
 * walk it does not step by rbp where tables say nothing: that is a stop
 * here (WALK_FP_FALLBACK), since every file on this stack has CFI. */
static void live_walk(struct live_stack *s)
{
	uint64_t pc = s->pc, sp = s->sp, bp = s->bp;
	bool exact = true, bp_valid = true;

	s->n = 0;
	for (;;) {
		struct live_mapping *m;
		const struct unwind_row *row;
		uint64_t lookup, rel, cfa, ra;
		uint32_t rule;

		if (pc == 0) {
			s->stop = WALK_PC_ZERO;
			return;
		}
		if (s->n == LIVE_MAX_FRAMES) {
			s->stop = WALK_DEPTH;
			return;
		}
		lookup = exact ? pc : pc - 1;
		m = live_find(s->maps, lookup);
		if (!m) {
			s->stop = WALK_NO_MAPPING;
			return;
		}
		s->frames[s->n++] = pc;
		s->last = m;
		if (!m->built)
			live_mapping_build(m);
		if (!m->ok) {
			s->stop = WALK_NO_TABLE;
			return;
		}
		rel = lookup - m->bias;
		row = rel > UINT32_MAX ? NULL : unwind_table_find(&m->table, (uint32_t)rel);
		if (!row) {
			s->stop = WALK_FP_FALLBACK;
			return;
		}
		rule = row->rule;
		switch (UNWIND_RULE_KIND(rule)) {
		case UNWIND_CFA_SP:
			cfa = sp + UNWIND_RULE_OFF(rule);
			break;
		case UNWIND_CFA_FP:
			if (!bp_valid) {
				s->stop = WALK_NO_TABLE;
				return;
			}
			cfa = bp + UNWIND_RULE_OFF(rule);
			break;
		case UNWIND_CFA_PLT:
			cfa = sp + 8 + ((pc & 15) >= UNWIND_RULE_OFF(rule) ? 8 : 0);
			break;
		case UNWIND_SIGNAL: {
			uint64_t regs[2];

			if (!read_user(sp + UNWIND_SIGNAL_RSP_AT, regs, sizeof(regs)) ||
			    !read_user(sp + UNWIND_SIGNAL_RBP_AT, &bp, sizeof(bp))) {
				s->stop = WALK_READ_FAULT;
				return;
			}
			sp = regs[0];
			pc = regs[1];
			bp_valid = true;
			exact = true;
			s->signal_frames++;
			continue;
		}
		case UNWIND_END:
			s->stop = WALK_END;
			return;
		case UNWIND_NONE:
			s->stop = WALK_FP_FALLBACK;
			return;
		default:
			s->stop = WALK_UNSUPPORTED;
			return;
		}
		if (cfa <= sp) {
			s->stop = WALK_BAD_FRAME;
			return;
		}
		if (!read_user(cfa - 8, &ra, sizeof(ra))) {
			s->stop = WALK_READ_FAULT;
			return;
		}
		switch (UNWIND_RULE_RBP(rule)) {
		case UNWIND_RBP_AT_CFA:
			if (!read_user(cfa + 8 * (int64_t)UNWIND_RULE_RBP_OFF(rule), &bp,
				       sizeof(bp))) {
				s->stop = WALK_READ_FAULT;
				return;
			}
			bp_valid = true;
			break;
		case UNWIND_RBP_UNDEFINED:
			bp_valid = false;
			break;
		}
		sp = cfa;
		pc = ra;
		exact = false;
	}
}

/* Takes this function's registers (rip just after the lea, with the rsp
 * and rbp that hold there), then backtrace() and the walk, both before
 * returning: the walk reads this frame's return address slot, which the
 * next call would overwrite. */
static __attribute__((noinline)) void live_capture(struct live_stack *s)
{
	uint64_t pc, sp, bp;

	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2"
			 : "=r"(pc), "=r"(sp), "=r"(bp));
	s->pc = pc;
	s->sp = sp;
	s->bp = bp;
	s->caller = (uint64_t)(uintptr_t)__builtin_return_address(0);
	s->nbt = backtrace(s->bt, LIVE_MAX_FRAMES);
	live_walk(s);
	s->done = true;
}

static void print_frame(const char *what, size_t i, uint64_t pc)
{
	Dl_info info;

	if (dladdr((void *)(uintptr_t)pc, &info) && info.dli_fname)
		print_error(
		    "  %s[%zu] 0x%" PRIx64 " %s+0x%" PRIx64 " (%s)\n", what, i, pc,
		    info.dli_sname ? info.dli_sname : "?",
		    pc - (uint64_t)(uintptr_t)(info.dli_saddr ? info.dli_saddr : info.dli_fbase),
		    info.dli_fname);
	else
		print_error("  %s[%zu] 0x%" PRIx64 "\n", what, i, pc);
}

/* The walk against backtrace(): the walk's frame 1 is the capturing
 * function's return address; backtrace() has one frame more above it
 * when ASan's interceptor stands in between. From there on every frame
 * must be the same, and the walk must end at an END row in _start. The
 * stack must pass through each file of through (path suffixes, NULL
 * ended). Returns the number of frames compared. */
static size_t live_check(const char *what, const struct live_stack *s, size_t min_frames,
			 const char *const *through)
{
	size_t skip = 0, compared = 0;
	bool same;
	uint64_t start, size, rel;
	struct elf_file self;

	assert_true(s->done);
	while (skip < 3 && skip < (size_t)s->nbt && (uint64_t)(uintptr_t)s->bt[skip] != s->caller)
		skip++;
	same = s->n >= 2 && s->frames[1] == s->caller && skip < 3 && s->stop == WALK_END &&
	       s->n - 1 == (size_t)s->nbt - skip;
	for (size_t i = 1; same && i < s->n; i++)
		same = s->frames[i] == (uint64_t)(uintptr_t)s->bt[skip + i - 1];
	if (!same) {
		print_error("%s: the walk (%zu frames, stopped: %s) and backtrace() (%d frames, "
			    "skipping %zu) differ\n",
			    what, s->n, walk_stop_names[s->stop], s->nbt, skip);
		for (size_t i = 0; i < s->n; i++)
			print_frame("walk", i, s->frames[i]);
		for (int i = 0; i < s->nbt; i++)
			print_frame("backtrace", (size_t)i, (uint64_t)(uintptr_t)s->bt[i]);
		fail_msg("%s: walk and backtrace() differ", what);
	}
	compared = s->n - 1;
	/* The last frame is _start's, in this program. */
	elf_file_open("/proc/self/exe", &self);
	symbol(self.elf, "_start", &start, &size);
	elf_file_close(&self);
	rel = s->frames[s->n - 1] - 1 - s->last->bias;
	if (rel < start || rel >= start + size)
		fail_msg("%s: the walk ended at 0x%" PRIx64 " in %s, not in _start", what, rel,
			 s->last->path);
	for (; *through; through++) {
		size_t in = 0, len = strlen(*through);

		for (size_t i = 0; i < s->n; i++) {
			const struct live_mapping *m =
			    live_find(s->maps, i == 0 ? s->frames[i] : s->frames[i] - 1);
			size_t plen = strlen(m->path);

			in += plen >= len && strcmp(m->path + plen - len, *through) == 0;
		}
		if (in == 0)
			fail_msg("%s: no frame in %s", what, *through);
	}
	print_message("%s: %zu frames, the same as backtrace()'s, ending at an END row in "
		      "_start\n",
		      what, compared);
	assert_true(compared >= min_frames);
	return compared;
}

static struct live_maps *env_maps(struct cfi_env *env)
{
	if (!env->maps)
		env->maps = live_maps_read();
	return env->maps;
}

/* The stack the qsort comparator and the signal handler capture: they
 * take no argument to find it by. volatile: without it the compiler
 * drops the store before raise(), which it does not see call the
 * handler. */
static struct live_stack *volatile live_current;

static int compare_capturing(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	/* Not at the first calls: ASan's qsort interceptor runs the
	 * comparator over the array once before glibc sorts it. */
	if (live_current && !live_current->done && ++live_current->calls == 120)
		live_capture(live_current);
	return (x > y) - (x < y);
}

static void sort_capturing(struct live_stack *s)
{
	int v[100];

	for (int i = 0; i < 100; i++)
		v[i] = (i * 53) % 100;
	live_current = s;
	qsort(v, 100, sizeof(v[0]), compare_capturing);
	live_current = NULL;
	for (int i = 0; i < 100; i++)
		assert_int_equal(v[i], i);
}

static void test_live_qsort(void **state)
{
	struct live_stack *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->maps = env_maps(*state);
	sort_capturing(s);
	live_check("qsort comparator", s, 6, (const char *const[]){"/libc.so.6", NULL});
	free(s);
}

static int capture_cb(void *arg)
{
	live_capture(arg);
	return 1;
}

static int sort_cb(void *arg)
{
	sort_capturing(arg);
	return 1;
}

static void on_signal(int sig)
{
	if (live_current && !live_current->done)
		live_capture(live_current);
}

static int raise_cb(void *arg)
{
	live_current = arg;
	raise(SIGUSR1);
	live_current = NULL;
	return 1;
}

static void test_live_recursion(void **state)
{
	struct cfi_env *env = *state;
	int (*const cbs[])(void *) = {capture_cb, sort_cb, raise_cb};
	const char *const names[] = {"recursion without frame pointers",
				     "recursion, then qsort comparator", "recursion, then signal"};
	const char *const frames_only[] = {"/libframes.so", NULL};
	const char *const with_libc[] = {"/libframes.so", "/libc.so.6", NULL};
	const char *const *through[] = {frames_only, with_libc, with_libc};
	struct sigaction sa = {.sa_handler = on_signal}, old;
	size_t total = 0;

	assert_non_null(env->frames_small);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	for (size_t i = 0; i < sizeof(cbs) / sizeof(cbs[0]); i++) {
		struct live_stack *s = calloc(1, sizeof(*s));

		assert_non_null(s);
		s->maps = env_maps(env);
		assert_true(env->frames_small(40, cbs[i], s) > 0);
		/* 40 levels of frames.c, each shape ten times */
		total += live_check(names[i], s, 40, through[i]);
		/* glibc's __restore_rt, as a SIGNAL row */
		assert_int_equal(s->signal_frames, cbs[i] == raise_cb ? 1 : 0);
		free(s);
	}
	sigaction(SIGUSR1, &old, NULL);
	print_message("live stacks: %zu frames compared in all\n", total);
}

/* ---- edge cases ------------------------------------------------------------- */

/* The row of the named function of frames.c, from a symbol of elf_path. */
static const struct unwind_row *row_of(const struct unwind_table *t, const char *elf_path,
				       const char *name)
{
	struct elf_file f;
	uint64_t addr, size;

	elf_file_open(elf_path, &f);
	symbol(f.elf, name, &addr, &size);
	elf_file_close(&f);
	return unwind_table_find(t, (uint32_t)addr + 8);
}

static void test_debug_frame_only(void **state)
{
	const struct cfi_env *env = *state;
	struct compare_stats st;
	struct unwind_table t;
	char path[256];

	snprintf(path, sizeof(path), "%s/frames_dbg", env->dir);
	compare_file("frames_dbg", path, NULL, NULL, &st);
	/* frames.c's own code is described in .debug_frame only */
	build_table(path, NULL, &t);
	assert_string_equal(t.source, "eh_frame+debug_frame");
	assert_int_equal(UNWIND_RULE_KIND(row_of(&t, path, "frames_large")->rule), UNWIND_CFA_SP);
	assert_int_equal(UNWIND_RULE_OFF(row_of(&t, path, "frames_large")->rule), 5024);
	unwind_table_free(&t);
}

static void test_separate_debug_file(void **state)
{
	const struct cfi_env *env = *state;
	struct compare_stats st;
	struct unwind_table t;
	char path[256], debug[256], dir[256], full[256];

	snprintf(path, sizeof(path), "%s/frames_stripped", env->dir);
	snprintf(debug, sizeof(debug), "%s/frames_dbg.debug", env->dir);
	snprintf(dir, sizeof(dir), "%s/debug", env->dir);
	snprintf(full, sizeof(full), "%s/frames_dbg", env->dir);
	/* Without the debug file the stripped program's functions have no
	 * rows; with it they have the .debug_frame's. */
	build_table(path, NULL, &t);
	assert_string_equal(t.source, "eh_frame");
	assert_int_equal(UNWIND_RULE_KIND(row_of(&t, full, "frames_large")->rule), UNWIND_NONE);
	unwind_table_free(&t);
	build_table(path, dir, &t);
	assert_string_equal(t.source, "eh_frame+debug_frame");
	assert_int_equal(UNWIND_RULE_KIND(row_of(&t, full, "frames_large")->rule), UNWIND_CFA_SP);
	unwind_table_free(&t);
	compare_file("frames_stripped + debug file", path, debug, dir, &st);
}

/* An image placed to end exactly at a PROT_NONE page: libelf or libdw
 * reading one byte past it crashes the test. */
struct guarded {
	uint8_t *map;
	size_t maplen;
	uint8_t *image;
};

static void guarded_new(struct guarded *g, const void *bytes, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + page - 1) / page * page;

	g->maplen = body + page;
	g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g->map != MAP_FAILED);
	assert_int_equal(mprotect(g->map + body, page, PROT_NONE), 0);
	g->image = g->map + body - len;
	memcpy(g->image, bytes, len);
}

static void guarded_free(struct guarded *g)
{
	munmap(g->map, g->maplen);
}

/* Builds from an image; checks the contract either way: on error no rows
 * and a message, on success sorted rows of valid kinds. */
static int build_image(const void *bytes, size_t len, struct unwind_table *t)
{
	struct kiln_error err = {0};
	struct guarded g;
	int rc;

	unwind_table_init(t);
	guarded_new(&g, bytes, len);
	rc = unwind_table_build_mem(g.image, len, t, &err);
	guarded_free(&g);
	if (rc < 0) {
		assert_int_equal(t->n, 0);
		assert_null(t->rows);
		assert_true(err.msg[0] != '\0');
		return rc;
	}
	assert_int_equal(rc, 0);
	for (size_t i = 0; i < t->n; i++) {
		assert_true(UNWIND_RULE_KIND(t->rows[i].rule) <= UNWIND_UNSUPPORTED);
		assert_true(i == 0 || t->rows[i].pc > t->rows[i - 1].pc);
	}
	return rc;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	b = malloc((size_t)n);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void test_bad_images(void **state)
{
	const struct cfi_env *env = *state;
	struct unwind_table t, whole;
	struct kiln_error err = {0};
	uint8_t junk[4096], *b, *m;
	size_t len, rejected = 0, built = 0;
	uint64_t seed = 7;
	char path[256];
	GElf_Ehdr ehdr;
	GElf_Shdr sh;
	Elf_Data *eh;
	Elf *elf;
	size_t eh_off, eh_len, sh_off, sh_len;

	/* Nothing, a cut magic, junk, an ELF magic in front of junk. */
	assert_true(unwind_table_build_mem(NULL, 0, &t, &err) < 0);
	assert_true(build_image(ELFMAG, 3, &t) < 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)mix64(seed++);
	assert_true(build_image(junk, sizeof(junk), &t) < 0);
	memcpy(junk, ELFMAG, SELFMAG);
	junk[EI_CLASS] = ELFCLASS64;
	junk[EI_DATA] = ELFDATA2LSB;
	junk[EI_VERSION] = EV_CURRENT;
	assert_true(build_image(junk, sizeof(junk), &t) < 0);

	/* The whole shared object builds as from its file. */
	snprintf(path, sizeof(path), "%s/libframes.so", env->dir);
	b = read_file(path, &len);
	build_table(path, NULL, &whole);
	assert_int_equal(build_image(b, len, &t), 0);
	assert_int_equal(t.n, whole.n);
	assert_memory_equal(t.rows, whole.rows, t.n * sizeof(*t.rows));
	unwind_table_free(&t);
	unwind_table_free(&whole);

	/* Another machine: refused by name. */
	m = malloc(len);
	assert_non_null(m);
	memcpy(m, b, len);
	m[18] = EM_AARCH64;
	m[19] = 0;
	assert_int_equal(build_image(m, len, &t), -ENOTSUP);

	/* Every truncation (in steps): the section headers are at the end,
	 * so each one is an error. */
	for (size_t cut = 0; cut < len; cut += len / 251 + 1) {
		assert_true(build_image(b, cut, &t) < 0);
		rejected++;
	}

	/* Flipped bits in .eh_frame and .eh_frame_hdr (two rounds in three)
	 * or in the ELF header and section headers: any answer, no crash. */
	elf = elf_memory((char *)b, len);
	assert_non_null(elf);
	assert_non_null(gelf_getehdr(elf, &ehdr));
	sh_off = ehdr.e_shoff;
	sh_len = (size_t)ehdr.e_shnum * ehdr.e_shentsize;
	assert_true(sh_off + sh_len <= len);
	eh = section_data(elf, ".eh_frame", &sh);
	assert_non_null(eh);
	eh_off = sh.sh_offset;
	eh_len = sh.sh_size;
	assert_non_null(section_data(elf, ".eh_frame_hdr", &sh));
	assert_true(sh.sh_offset + sh.sh_size <= eh_off);
	eh_len += eh_off - sh.sh_offset;
	eh_off = sh.sh_offset;
	elf_end(elf);
	for (int round = 0; round < 600; round++) {
		memcpy(m, b, len);
		for (int k = 0; k < 1 + round % 6; k++) {
			uint64_t r = mix64(seed++);
			size_t at;

			if (round % 3)
				at = eh_off + r % eh_len;
			else if (r & 1)
				at = (r >> 1) % sizeof(Elf64_Ehdr);
			else
				at = sh_off + (r >> 1) % sh_len;

			m[at] ^= (uint8_t)(1u << ((r >> 40) & 7));
		}
		if (build_image(m, len, &t) < 0) {
			rejected++;
		} else {
			built++;
			unwind_table_free(&t);
		}
	}
	print_message("bad images: %zu rejected, %zu built from damaged bytes\n", rejected, built);
	free(m);
	free(b);
}

static void test_vdso(void **state)
{
	struct unwind_table t;
	const void *image = (const void *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
	struct live_maps *maps;
	const struct live_mapping *m = NULL;

	if (!image)
		skip();
	maps = env_maps(*state);
	for (size_t i = 0; i < maps->n; i++)
		if (strcmp(maps->m[i].path, "[vdso]") == 0)
			m = &maps->m[i];
	assert_non_null(m);
	assert_int_equal(m->start, (uint64_t)(uintptr_t)image);
	unwind_table_init(&t);
	assert_int_equal(build_image(image, m->end - m->start, &t), 0);
	print_message("vdso: %zu rows from %s\n", t.n, t.source);
	assert_true(t.n > 0);
	unwind_table_free(&t);
}

static void test_find_tiny_tables(void **state)
{
	struct unwind_table t;

	unwind_table_init(&t);
	assert_null(unwind_table_find(&t, 0));
	assert_null(unwind_table_find(&t, UINT32_MAX));
	unwind_table_finish(&t);
	assert_int_equal(t.n, 0);
	assert_null(unwind_table_find(&t, 0x1000));

	assert_int_equal(unwind_table_push(&t, 0x1000, UNWIND_RULE(UNWIND_CFA_SP, 0, 0, 8)), 0);
	unwind_table_finish(&t);
	assert_int_equal(t.n, 1);
	assert_null(unwind_table_find(&t, 0));
	assert_null(unwind_table_find(&t, 0xfff));
	assert_ptr_equal(unwind_table_find(&t, 0x1000), &t.rows[0]);
	assert_ptr_equal(unwind_table_find(&t, UINT32_MAX), &t.rows[0]);
	unwind_table_free(&t);

	/* A row at pc 0, and one at the top of the range. */
	assert_int_equal(unwind_table_push(&t, UINT32_MAX, UNWIND_RULE(UNWIND_END, 0, 0, 0)), 0);
	assert_int_equal(unwind_table_push(&t, 0, UNWIND_RULE(UNWIND_CFA_SP, 0, 0, 8)), 0);
	unwind_table_finish(&t);
	assert_int_equal(t.n, 2);
	assert_ptr_equal(unwind_table_find(&t, 0), &t.rows[0]);
	assert_ptr_equal(unwind_table_find(&t, UINT32_MAX - 1), &t.rows[0]);
	assert_ptr_equal(unwind_table_find(&t, UINT32_MAX), &t.rows[1]);
	unwind_table_free(&t);

	/* Only NONE rows: nothing is left (a leading NONE says nothing). */
	assert_int_equal(unwind_table_push(&t, 0x10, UNWIND_RULE(UNWIND_NONE, 0, 0, 0)), 0);
	unwind_table_finish(&t);
	assert_int_equal(t.n, 0);
	assert_null(unwind_table_find(&t, 0x10));
	unwind_table_free(&t);

	/* One pc twice: the first pushed wins, except a NONE. */
	assert_int_equal(unwind_table_push(&t, 0x20, UNWIND_RULE(UNWIND_CFA_SP, 0, 0, 16)), 0);
	assert_int_equal(unwind_table_push(&t, 0x20, UNWIND_RULE(UNWIND_CFA_SP, 0, 0, 24)), 0);
	assert_int_equal(unwind_table_push(&t, 0x30, UNWIND_RULE(UNWIND_NONE, 0, 0, 0)), 0);
	assert_int_equal(unwind_table_push(&t, 0x30, UNWIND_RULE(UNWIND_CFA_FP, 0, 0, 16)), 0);
	unwind_table_finish(&t);
	assert_int_equal(t.n, 2);
	assert_int_equal(UNWIND_RULE_OFF(unwind_table_find(&t, 0x2f)->rule), 16);
	assert_int_equal(UNWIND_RULE_KIND(unwind_table_find(&t, 0x30)->rule), UNWIND_CFA_FP);
	unwind_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_libc),
	    cmocka_unit_test(test_ld_so),
	    cmocka_unit_test(test_python),
	    cmocka_unit_test(test_cxx_exceptions),
	    cmocka_unit_test(test_c_programs),
	    cmocka_unit_test(test_self),
	    cmocka_unit_test(test_hand_written_cfi),
	    cmocka_unit_test(test_live_qsort),
	    cmocka_unit_test(test_live_recursion),
	    cmocka_unit_test(test_debug_frame_only),
	    cmocka_unit_test(test_separate_debug_file),
	    cmocka_unit_test(test_bad_images),
	    cmocka_unit_test(test_vdso),
	    cmocka_unit_test(test_find_tiny_tables),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
