/*
 * test_gopclntab.c — unwind rows from Go's .gopclntab against the Go
 * linker's own .debug_frame, read independently with elfutils' libdw.
 *
 * The program tests/unwind/progs/gostack (frameless leaves, recursion, a
 * large frame, assembly with and without a frame, a goroutine) is built
 * here with the Go toolchain four ways: a plain executable (.gopclntab), an
 * internally linked PIE (.data.rel.ro.gopclntab), an externally linked PIE
 * (runtime.pclntab inside .data.rel.ro; C start-up code ahead of Go's in
 * .text) and a stripped copy of that one (found by scanning). At every
 * byte of Go's text that .debug_frame covers, the table's CFA must be the
 * .debug_frame's; the stack roots (runtime.goexit and friends) must be END.
 * The 1.16 and 1.20 layouts are checked on the real table rewritten into
 * them; malformed and mutated tables must give errors, never crashes
 * (under ASan), and leave the table as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/unwind.h"
#include "unwind_test_util.h"

struct go_env {
	char dir[64];
	char root[512];
};

/* One built program, opened. */
struct go_file {
	int fd;
	Elf *elf;
};

static int setup(void **state)
{
	struct go_env *env = calloc(1, sizeof(*env));
	const char *root = getenv("KILN_ROOT");
	char cmd[4096];

	if (!env)
		return -1;
	snprintf(env->root, sizeof(env->root), "%s", root ? root : ".");
	snprintf(env->dir, sizeof(env->dir), "/tmp/kiln-gopclntab-XXXXXX");
	if (!mkdtemp(env->dir))
		return -1;
	elf_version(EV_CURRENT);
	/* A private GOPATH and build cache, no network, no inherited flags. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s/tests/unwind/progs/gostack && export GOPATH=%s/gopath GOCACHE=%s/gocache "
		 "GOFLAGS= GOPROXY=off GO111MODULE=on CGO_ENABLED=1 && "
		 "go build -o %s/exe . && go build -buildmode=pie -o %s/pie . && "
		 "go build -buildmode=pie -ldflags=-linkmode=external -o %s/extpie . && "
		 "strip -o %s/extpie_stripped %s/extpie",
		 env->root, env->dir, env->dir, env->dir, env->dir, env->dir, env->dir, env->dir);
	if (run(cmd)) {
		free(env);
		return -1;
	}
	*state = env;
	return 0;
}

static int teardown(void **state)
{
	struct go_env *env = *state;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", env->dir);
	(void)!system(cmd);
	free(env);
	return 0;
}

static void open_file(const struct go_env *env, const char *name, struct go_file *f)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", env->dir, name);
	f->fd = open(path, O_RDONLY);
	assert_true(f->fd >= 0);
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(f->elf);
}

static void close_file(struct go_file *f)
{
	elf_end(f->elf);
	close(f->fd);
}

/* A section's bytes (borrowed from elf) and address. */
static const uint8_t *section(Elf *elf, const char *name, size_t *len, uint64_t *addr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, name) != 0)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		*len = d->d_size;
		*addr = sh.sh_addr;
		return d->d_buf;
	}
	fail_msg("no section %s", name);
	return NULL;
}

static void table_of(Elf *elf, struct unwind_table *t)
{
	struct kiln_error err = {0};
	int rc;

	unwind_table_init(t);
	rc = unwind_gopclntab_elf(elf, t, &err);
	if (rc <= 0)
		fail_msg("unwind_gopclntab_elf: %d %s", rc, err.msg);
	assert_int_equal((uint64_t)rc, t->stats.fdes);
	assert_int_equal(t->stats.bad, 0);
	assert_string_equal(t->source, "gopclntab");
	unwind_table_finish(t);
}

/* The CFA offset from rsp that .debug_frame gives at pc: 1 and *off, 0
 * where no FDE covers pc, -1 for a rule that is not rsp + offset. */
static int debug_frame_cfa(Dwarf_CFI *cfi, uint64_t pc, int64_t *off)
{
	Dwarf_Frame *frame;
	Dwarf_Op *ops;
	size_t nops;
	int rc = -1;

	if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0)
		return 0;
	if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1) {
		if (ops[0].atom == DW_OP_bregx && ops[0].number == 7) {
			*off = (int64_t)ops[0].number2;
			rc = 1;
		} else if (ops[0].atom == DW_OP_breg7) {
			*off = (int64_t)ops[0].number;
			rc = 1;
		}
	}
	free(frame);
	return rc;
}

/* Compares name's table with its .debug_frame at every byte of Go's text
 * (runtime.text .. runtime.etext). */
static void compare_with_debug_frame(const struct go_env *env, const char *name)
{
	struct go_file f;
	struct unwind_table t;
	uint64_t text, etext;
	size_t compared = 0, uncovered = 0, table_only = 0, ends = 0, too_big = 0, mismatches = 0;
	Dwarf *dw;
	Dwarf_CFI *cfi;

	open_file(env, name, &f);
	table_of(f.elf, &t);
	symbol(f.elf, "runtime.text", &text, NULL);
	symbol(f.elf, "runtime.etext", &etext, NULL);
	assert_true(etext > text);
	/* Go's .debug_frame is not .eh_frame: dwarf_getcfi_elf would not
	 * read it. */
	dw = dwarf_begin_elf(f.elf, DWARF_C_READ, NULL);
	if (!dw)
		fail_msg("%s: dwarf_begin_elf: %s", name, dwarf_errmsg(-1));
	cfi = dwarf_getcfi(dw);
	if (!cfi)
		fail_msg("%s: dwarf_getcfi: %s", name, dwarf_errmsg(-1));

	for (uint64_t pc = text; pc < etext; pc++) {
		const struct unwind_row *row = unwind_table_find(&t, (uint32_t)pc);
		unsigned kind = row ? UNWIND_RULE_KIND(row->rule) : UNWIND_NONE;
		unsigned off = row ? UNWIND_RULE_OFF(row->rule) : 0;
		int64_t want = 0;
		int have = debug_frame_cfa(cfi, pc, &want);

		if (kind == UNWIND_END) {
			ends++;
			continue;
		}
		if (have == 0) {
			uncovered++;
			if (kind != UNWIND_NONE)
				table_only++;
			continue;
		}
		compared++;
		if (have == 1 && kind == UNWIND_CFA_SP && (int64_t)off == want)
			continue;
		/* runtime.call* frames up to 1 GiB: beyond what a row holds. */
		if (have == 1 && kind == UNWIND_UNSUPPORTED && want > UNWIND_OFF_MAX) {
			too_big++;
			continue;
		}
		if (mismatches++ < 20)
			print_error("%s: pc 0x%llx: table %s %u, .debug_frame %s%lld\n", name,
				    (unsigned long long)pc, kind_name(kind), off,
				    have == 1 ? "rsp+" : "a rule not rsp+offset ", (long long)want);
	}
	print_message("%s: %zu pcs compared with .debug_frame, %zu mismatches, %zu UNSUPPORTED "
		      "where its CFA offset is above %d (as they should be); %zu in stack roots "
		      "(END), %zu not covered by .debug_frame (%zu of them with a table row); "
		      "%zu rows, %llu functions\n",
		      name, compared, mismatches, too_big, UNWIND_OFF_MAX, ends, uncovered,
		      table_only, t.n, (unsigned long long)t.stats.fdes);
	assert_int_equal(mismatches, 0);
	assert_true(too_big > 0);
	/* Most of Go's text is compared: .debug_frame covers every function. */
	assert_true(compared > (etext - text) * 3 / 4);
	assert_true(ends > 0);
	dwarf_end(dw);
	unwind_table_free(&t);
	close_file(&f);
}

static void test_exe_matches_debug_frame(void **state)
{
	compare_with_debug_frame(*state, "exe");
}

static void test_pie_matches_debug_frame(void **state)
{
	compare_with_debug_frame(*state, "pie");
}

static void test_external_pie_matches_debug_frame(void **state)
{
	const struct go_env *env = *state;
	struct go_file f;
	size_t len;
	uint64_t text_sec, text;

	/* The case the runtime.text symbol is there for: C code first. */
	open_file(env, "extpie", &f);
	section(f.elf, ".text", &len, &text_sec);
	symbol(f.elf, "runtime.text", &text, NULL);
	assert_true(text > text_sec);
	close_file(&f);
	compare_with_debug_frame(env, "extpie");
}

/* The stripped external PIE has neither a named section nor symbols: the
 * table is found in .data.rel.ro by its header, and gives the same rows
 * (the header's textStart stands in for runtime.text). */
static void test_stripped_found_by_scan(void **state)
{
	struct go_file a, b;
	struct unwind_table ta, tb;

	open_file(*state, "extpie", &a);
	open_file(*state, "extpie_stripped", &b);
	table_of(a.elf, &ta);
	table_of(b.elf, &tb);
	assert_int_equal(ta.n, tb.n);
	assert_memory_equal(ta.rows, tb.rows, ta.n * sizeof(*ta.rows));
	unwind_table_free(&ta);
	unwind_table_free(&tb);
	close_file(&a);
	close_file(&b);
}

/* Asserts that every pc of [lo, hi) has a row of this kind (and offset,
 * for CFA_SP). */
static void assert_range(const struct unwind_table *t, const char *what, uint64_t lo, uint64_t hi,
			 unsigned kind, unsigned off)
{
	assert_true(hi > lo);
	for (uint64_t pc = lo; pc < hi; pc++) {
		const struct unwind_row *row = unwind_table_find(t, (uint32_t)pc);

		if (!row || UNWIND_RULE_KIND(row->rule) != kind ||
		    (kind == UNWIND_CFA_SP && UNWIND_RULE_OFF(row->rule) != off))
			fail_msg("%s at 0x%llx: %s %u, want %s %u", what, (unsigned long long)pc,
				 row ? kind_name(UNWIND_RULE_KIND(row->rule)) : "(no row)",
				 row ? UNWIND_RULE_OFF(row->rule) : 0, kind_name(kind), off);
	}
}

static void test_stack_roots_and_leaves(void **state)
{
	static const char *const roots[] = {"runtime.goexit.abi0", "runtime.mstart.abi0",
					    "runtime.rt0_go.abi0", "_rt0_amd64_linux"};
	struct go_file f;
	struct unwind_table t;
	uint64_t addr, size, max_off = 0;

	open_file(*state, "exe", &f);
	table_of(f.elf, &t);
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		symbol(f.elf, roots[i], &addr, &size);
		assert_range(&t, roots[i], addr, addr + size, UNWIND_END, 0);
	}
	/* Frameless leaves: the return address stays at rsp throughout. */
	symbol(f.elf, "main.leafAdd", &addr, &size);
	assert_range(&t, "main.leafAdd", addr, addr + size, UNWIND_CFA_SP, 8);
	symbol(f.elf, "main.asmAdd.abi0", &addr, &size);
	assert_range(&t, "main.asmAdd", addr, addr + size, UNWIND_CFA_SP, 8);
	/* The assembly function's frame: 24 bytes, the frame pointer's slot,
	 * the return address. */
	symbol(f.elf, "main.asmFrame.abi0", &addr, &size);
	assert_range(&t, "main.asmFrame entry", addr, addr + 1, UNWIND_CFA_SP, 8);
	for (uint64_t pc = addr; pc < addr + size; pc++)
		if (UNWIND_RULE_OFF(unwind_table_find(&t, (uint32_t)pc)->rule) > max_off)
			max_off = UNWIND_RULE_OFF(unwind_table_find(&t, (uint32_t)pc)->rule);
	assert_int_equal(max_off, 24 + 8 + 8);
	/* After the last function: no row says anything. */
	symbol(f.elf, "runtime.etext", &addr, NULL);
	assert_int_equal(UNWIND_RULE_KIND(unwind_table_find(&t, (uint32_t)addr)->rule),
			 UNWIND_NONE);
	/* runtime.call* with frames beyond what a row holds. */
	assert_true(t.stats.unsupported > 0);
	unwind_table_free(&t);
	close_file(&f);
}

/* --- other layouts, rewritten from the real 1.18 table ------------------ */

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* The table in the 1.20 layout: magic 0xfffffff1, _func gains startLine
 * after cuOffset. Returns a malloc'd copy. */
static uint8_t *to_go120(const uint8_t *src, size_t len, size_t *out_len)
{
	uint64_t nfunc = rd64(src + 8), pcln = rd64(src + 64);
	size_t ftab = (2 * nfunc + 1) * 4, w;
	uint8_t *out = calloc(1, len + nfunc * 4 + 64);

	assert_non_null(out);
	memcpy(out, src, pcln + ftab);
	wr32(out, 0xfffffff1u);
	w = pcln + ftab;
	for (uint64_t i = 0; i < nfunc; i++) {
		const uint8_t *fn = src + pcln + rd32(src + pcln + (2 * i + 1) * 4);
		size_t trail = (rd32(fn + 28) + fn[39]) * 4;

		wr32(out + pcln + (2 * i + 1) * 4, (uint32_t)(w - pcln));
		memcpy(out + w, fn, 36);
		wr32(out + w + 36, 1000 + (uint32_t)i); /* startLine */
		memcpy(out + w + 40, fn + 36, 4 + trail);
		w += 44 + trail;
	}
	*out_len = w;
	return out;
}

/* The table in the 1.16 layout: magic 0xfffffffa, no textStart in the
 * header, uintptr absolute entries in the functab and _func (no pcdata or
 * funcdata arrays: nothing here reads them). */
static uint8_t *to_go116(const uint8_t *src, size_t len, size_t *out_len)
{
	uint64_t nfunc = rd64(src + 8), text = rd64(src + 24), pcln = rd64(src + 64);
	size_t ftab = (2 * nfunc + 1) * 8, w;
	uint8_t *out = calloc(1, pcln + ftab + nfunc * 48);

	assert_non_null(out);
	memcpy(out, src, pcln);
	wr32(out, 0xfffffffau);
	wr64(out + 16, rd64(src + 16)); /* nfiles */
	for (int k = 0; k < 5; k++)	/* funcname cu filetab pctab pcln */
		wr64(out + 24 + 8 * k, rd64(src + 32 + 8 * k));
	w = pcln + ftab;
	for (uint64_t i = 0; i <= nfunc; i++)
		wr64(out + pcln + 2 * i * 8, text + rd32(src + pcln + 2 * i * 4));
	for (uint64_t i = 0; i < nfunc; i++) {
		const uint8_t *fn = src + pcln + rd32(src + pcln + (2 * i + 1) * 4);

		wr64(out + pcln + (2 * i + 1) * 8, w - pcln);
		wr64(out + w, text + rd32(fn));
		memcpy(out + w + 8, fn + 4, 36);
		wr32(out + w + 8 + 24, 0); /* npcdata */
		out[w + 8 + 35] = 0;	   /* nfuncdata */
		w += 48;
	}
	(void)len;
	*out_len = w;
	return out;
}

static void test_go116_and_go120_layouts(void **state)
{
	struct go_file f;
	struct unwind_table want, got;
	struct kiln_error err = {0};
	const uint8_t *pcln;
	uint8_t *(*convert[])(const uint8_t *, size_t, size_t *) = {to_go120, to_go116};
	size_t len;
	uint64_t addr, text;
	int rc;

	open_file(*state, "exe", &f);
	pcln = section(f.elf, ".gopclntab", &len, &addr);
	symbol(f.elf, "runtime.text", &text, NULL);
	unwind_table_init(&want);
	assert_true(unwind_gopclntab_rows(pcln, len, text, &want, &err) > 0);
	unwind_table_finish(&want);
	for (size_t k = 0; k < 2; k++) {
		size_t n;
		uint8_t *b = convert[k](pcln, len, &n);

		unwind_table_init(&got);
		rc = unwind_gopclntab_rows(b, n, text, &got, &err);
		if (rc <= 0)
			fail_msg("layout %zu: %d %s", k, rc, err.msg);
		assert_int_equal(got.stats.fdes, want.stats.fdes);
		assert_int_equal(got.stats.unsupported, want.stats.unsupported);
		unwind_table_finish(&got);
		assert_int_equal(got.n, want.n);
		assert_memory_equal(got.rows, want.rows, want.n * sizeof(*want.rows));
		unwind_table_free(&got);
		free(b);
	}
	unwind_table_free(&want);
	close_file(&f);
}

/* --- malformed tables ---------------------------------------------------- */

/* Runs the parser on b and checks the failure contract: the code, a
 * message naming what is wrong, and t as it was. */
static void expect_error(const uint8_t *b, size_t len, uint64_t text, int code, const char *in_msg)
{
	struct unwind_table t;
	struct kiln_error err = {0};
	int rc;

	unwind_table_init(&t);
	assert_int_equal(unwind_table_push(&t, 0x10, UNWIND_RULE(UNWIND_END, 0, 0, 0)), 0);
	rc = unwind_gopclntab_rows(b, len, text, &t, &err);
	if (rc != code || !strstr(err.msg, in_msg))
		fail_msg("want %d with \"%s\", got %d \"%s\"", code, in_msg, rc, err.msg);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.stats.fdes + t.stats.bad + t.stats.unsupported, 0);
	assert_null(t.source);
	unwind_table_free(&t);
}

static void test_malformed_tables(void **state)
{
	struct go_file f;
	const uint8_t *pcln;
	uint8_t *b;
	size_t len;
	uint64_t addr, text;

	open_file(*state, "exe", &f);
	pcln = section(f.elf, ".gopclntab", &len, &addr);
	symbol(f.elf, "runtime.text", &text, NULL);
	b = malloc(len);
	assert_non_null(b);

	expect_error(NULL, 0, text, -EINVAL, "truncated header");
	expect_error(pcln, 7, text, -EINVAL, "truncated header");
	expect_error(pcln, 40, text, -EINVAL, "truncated header");
#define RESET() memcpy(b, pcln, len)
	RESET();
	wr32(b, 0xfffffffbu); /* Go 1.2-1.15 */
	expect_error(b, len, text, -ENOEXEC, "unknown magic 0xfffffffb");
	RESET();
	wr32(b, 0xf0ffffffu); /* big-endian */
	expect_error(b, len, text, -ENOEXEC, "unknown magic");
	RESET();
	b[7] = 4;
	expect_error(b, len, text, -ENOTSUP, "ptrSize 4");
	RESET();
	b[6] = 4; /* arm64 */
	expect_error(b, len, text, -ENOTSUP, "minLC 4");
	RESET();
	b[5] = 1;
	expect_error(b, len, text, -EINVAL, "padding");
	RESET();
	wr64(b + 56, len + 1);
	expect_error(b, len, text, -EINVAL, "pctabOffset");
	RESET();
	wr64(b + 64, UINT64_MAX);
	expect_error(b, len, text, -EINVAL, "pclnOffset");
	RESET();
	wr64(b + 32, 3);
	expect_error(b, len, text, -EINVAL, "funcnameOffset");
	RESET();
	wr64(b + 8, UINT64_MAX);
	expect_error(b, len, text, -EINVAL, "nfunc");
	RESET();
	wr64(b + 8, 1ull << 62);
	expect_error(b, len, text, -EINVAL, "nfunc");
	RESET();
	wr64(b + 8, len / 8);
	expect_error(b, len, text, -EINVAL, "nfunc");
	/* The table cut where the function table ends. */
	expect_error(pcln, rd64(pcln + 64) + 8, text, -EINVAL, "nfunc");
	RESET();
	wr64(b + 24, text - 0x1000);
	expect_error(b, len, text, -EINVAL, "textStart");
	RESET();
	{
		/* Function 5 starting before function 4. */
		uint64_t at = rd64(b + 64) + 2 * 5 * 4;

		wr32(b + at, rd32(b + at - 8) - 1);
		expect_error(b, len, text, -EINVAL, "out of order");
	}
	RESET();
	{
		/* Every function's record out of reach: nothing readable. */
		uint64_t pclnoff = rd64(b + 64), nfunc = rd64(b + 8);

		for (uint64_t i = 0; i < nfunc; i++)
			wr32(b + pclnoff + (2 * i + 1) * 4, 0xfffffff0u);
		expect_error(b, len, text, -EINVAL, "none of its");
	}
	RESET();
	{
		/* One function's pcsp past the end: that function is bad. */
		struct unwind_table t;
		struct kiln_error err = {0};
		uint64_t pclnoff = rd64(b + 64);
		uint8_t *fn = b + pclnoff + rd32(b + pclnoff + 3 * 4);

		wr32(fn + 16, 0x7fffffff);
		unwind_table_init(&t);
		assert_true(unwind_gopclntab_rows(b, len, text, &t, &err) > 0);
		assert_int_equal(t.stats.bad, 1);
		unwind_table_free(&t);
	}
#undef RESET
	free(b);
	close_file(&f);
}

/* Every prefix length (in steps) and thousands of random byte changes:
 * any answer but a crash, a leak or a hang, and t unchanged on error. */
static void test_mutated_tables(void **state)
{
	struct go_file f;
	const uint8_t *pcln;
	uint8_t *b;
	size_t len, errors = 0, ok = 0;
	uint64_t addr, text, seed = 0x9e3779b97f4a7c15ull;

	open_file(*state, "exe", &f);
	pcln = section(f.elf, ".gopclntab", &len, &addr);
	symbol(f.elf, "runtime.text", &text, NULL);
	b = malloc(len);
	assert_non_null(b);
	for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
		struct unwind_table t;
		struct kiln_error err = {0};
		int rc;

		unwind_table_init(&t);
		rc = unwind_gopclntab_rows(pcln, cut, text, &t, &err);
		if (rc < 0) {
			assert_int_equal(t.n, 0);
			errors++;
		} else {
			ok++;
		}
		unwind_table_free(&t);
	}
	for (int round = 0; round < 300; round++) {
		struct unwind_table t;
		struct kiln_error err = {0};
		int rc;

		memcpy(b, pcln, len);
		for (int k = 0; k < 1 + round % 8; k++) {
			size_t at;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			/* Mostly the header and functab, where damage matters. */
			at = (seed >> 33) % (round % 3 ? 4096 : len);
			b[at] ^= (uint8_t)(1u << ((seed >> 20) & 7));
		}
		unwind_table_init(&t);
		rc = unwind_gopclntab_rows(b, len, text, &t, &err);
		if (rc < 0) {
			assert_int_equal(t.n, 0);
			assert_true(err.msg[0] != '\0');
			errors++;
		} else {
			ok++;
		}
		unwind_table_finish(&t);
		unwind_table_free(&t);
	}
	print_message("mutations: %zu parsed, %zu rejected\n", ok, errors);
	free(b);
	close_file(&f);
}

static void test_no_table_and_sources(void **state)
{
	struct go_file f;
	struct unwind_table t;
	struct kiln_error err = {0};
	const uint8_t *pcln;
	size_t len;
	uint64_t addr, text;
	int fd;
	Elf *elf;

	/* This test program is C: no Go table anywhere. */
	fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	unwind_table_init(&t);
	assert_int_equal(unwind_gopclntab_elf(elf, &t, &err), -ENOENT);
	assert_int_equal(t.n, 0);
	elf_end(elf);
	close(fd);

	/* A table whose rows join an earlier source's. */
	open_file(*state, "exe", &f);
	pcln = section(f.elf, ".gopclntab", &len, &addr);
	symbol(f.elf, "runtime.text", &text, NULL);
	t.source = "eh_frame";
	assert_true(unwind_gopclntab_rows(pcln, len, text, &t, &err) > 0);
	assert_string_equal(t.source, "eh_frame+gopclntab");
	unwind_table_free(&t);
	close_file(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exe_matches_debug_frame),
	    cmocka_unit_test(test_pie_matches_debug_frame),
	    cmocka_unit_test(test_external_pie_matches_debug_frame),
	    cmocka_unit_test(test_stripped_found_by_scan),
	    cmocka_unit_test(test_stack_roots_and_leaves),
	    cmocka_unit_test(test_go116_and_go120_layouts),
	    cmocka_unit_test(test_malformed_tables),
	    cmocka_unit_test(test_mutated_tables),
	    cmocka_unit_test(test_no_table_and_sources),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
