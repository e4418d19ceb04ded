/*
 * test_dwarf_reader.c — Kiln's own DWARF reader (src/symbols/dwarf_*.c)
 * must give exactly what libdw gives: every frame of every sampled address
 * (function, raw name, file, line, declaration line, inline chain) compared
 * between a symbolizer using the reader and one with libdw_only, on real
 * binaries: glibc's debug file from libc6-dbg (compressed DWARF 5), this
 * test program (Kiln's own code, gcc -O2 -g), and a C++ program with
 * templates, lambdas, namespaces and nested inlining compiled here by g++
 * (DWARF 5 and 4, compressed sections) and clang++ (DWARF 5 with strx /
 * addrx / rnglistx forms, and DWARF 4; with -gdwarf-aranges, as the CU
 * lookup goes through .debug_aranges; and without it, against libdw on the
 * same program built with it). The symbolizer's CU counters show
 * that the reader, not libdw, did the work. The innermost file:line of the
 * C++ program is also checked against elfutils' eu-addr2line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/symbols.h"

static char dir[64];

static const char cpp_src[] =
    "#include <algorithm>\n"
    "#include <map>\n"
    "#include <string>\n"
    "#include <vector>\n"
    "namespace kiln_test {\n"
    "template <typename T> struct Acc {\n"
    "\tT total{};\n"
    "\tinline void add(T v) { total += v * v; }\n"
    "\ttemplate <typename F> T fold(const std::vector<T> &xs, F f)\n"
    "\t{\n"
    "\t\tfor (const T &x : xs)\n"
    "\t\t\tadd(f(x));\n"
    "\t\treturn total;\n"
    "\t}\n"
    "};\n"
    "static inline __attribute__((always_inline)) long leaf(long x) { return x * 3 + 1; }\n"
    "static inline __attribute__((always_inline)) long mid(long x) { return leaf(x) ^ leaf(x + "
    "1); }\n"
    "__attribute__((noinline)) long outer(long n)\n"
    "{\n"
    "\tlong r = 0;\n"
    "\tfor (long i = 0; i < n; i++)\n"
    "\t\tr += mid(i);\n"
    "\treturn r;\n"
    "}\n"
    "class Shape {\n"
    "public:\n"
    "\tvirtual ~Shape() {}\n"
    "\tvirtual double area() const = 0;\n"
    "};\n"
    "class Sq : public Shape {\n"
    "\tdouble s;\n"
    "public:\n"
    "\texplicit Sq(double v) : s(v) {}\n"
    "\tdouble area() const override { return s * s; }\n"
    "};\n"
    "} // namespace kiln_test\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "\tstd::vector<long> v;\n"
    "\tfor (int i = 0; i < argc * 1000; i++)\n"
    "\t\tv.push_back((i * 7919) % 1000);\n"
    "\tstd::sort(v.begin(), v.end());\n"
    "\tkiln_test::Acc<long> a;\n"
    "\tlong t = a.fold(v, [&](long x) { return x + argc; });\n"
    "\tstd::map<std::string, long> m;\n"
    "\tm[argv[0]] = t + kiln_test::outer(argc * 100);\n"
    "\tkiln_test::Sq sq(argc);\n"
    "\tkiln_test::Shape *sh = &sq;\n"
    "\treturn (int)(m.size() + sh->area() + v[0]);\n"
    "}\n";

static int run(const char *cmd)
{
	int rc = system(cmd);

	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
	return rc;
}

/* Two C files whose functions gcc -flto inlines into each other. */
static const char lto_a_src[] = "#include <stdio.h>\n"
				"struct pt { int x, y; };\n"
				"static inline int sq(int v) { return v * v; }\n"
				"int dist(struct pt a, struct pt b);\n"
				"int scale(int v) { return sq(v) + 1; }\n"
				"int main(int argc, char **argv)\n"
				"{\n"
				"\tstruct pt p = {argc, 2}, q = {3, argc};\n"
				"\tprintf(\"%d %d %s\\n\", dist(p, q), scale(argc), argv[0]);\n"
				"\treturn 0;\n"
				"}\n";
static const char lto_b_src[] = "struct pt { int x, y; };\n"
				"int scale(int v);\n"
				"static inline int add(int a, int b) { return scale(a) + b; }\n"
				"int dist(struct pt a, struct pt b)\n"
				"{\n"
				"\tint dx = a.x - b.x, dy = a.y - b.y;\n"
				"\treturn add(dx * dx, dy * dy);\n"
				"}\n";

static int write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

static int setup(void **state)
{
	char cmd[1024];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kiln-dwreader-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	if (write_file("prog.cc", cpp_src) < 0 || write_file("lto_a.c", lto_a_src) < 0 ||
	    write_file("lto_b.c", lto_b_src) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cd %s && g++ -O2 -g -o cpp_gcc5 prog.cc && g++ -O2 -gdwarf-4 -o cpp_gcc4 prog.cc "
		 "&& g++ -O2 -g -gz=zlib -o cpp_gccz prog.cc && "
		 "clang++ -O2 -g -gdwarf-aranges -o cpp_clang5 prog.cc && "
		 "clang++ -O2 -gdwarf-4 -gdwarf-aranges -o cpp_clang4 prog.cc && "
		 "clang++ -O2 -g -o cpp_clang5_noaranges prog.cc && "
		 "gcc -O2 -g -flto -o c_gcc_lto lto_a.c lto_b.c && "
		 "gcc -O2 -g -gz=zlib -flto -o c_gcc_lto_z lto_a.c lto_b.c && "
		 "gcc -O2 -g -c -o mix_a.o lto_a.c && clang -O2 -g -c -o mix_b.o lto_b.c && "
		 "clang -O2 -g -gdwarf-aranges -c -o mix_b_ar.o lto_b.c && "
		 "gcc -gz=zlib -o c_mixed_z mix_a.o mix_b.o && "
		 "gcc -gz=zlib -o c_mixed_z_ref mix_a.o mix_b_ar.o",
		 dir);
	return run(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Addresses inside the function symbols of path: every byte of each
 * function (step 1) or every step-th byte. */
static uint64_t *sample(const char *path, unsigned step, size_t max, size_t *n)
{
	char cmd[512], line[512];
	uint64_t *out = NULL;
	size_t cap = 0;
	FILE *p;

	*n = 0;
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return NULL;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a, sz;
		char type;

		if (sscanf(line, "%llx %llx %c", &a, &sz, &type) != 3 || !strchr("tTwWiI", type) ||
		    sz == 0)
			continue;
		for (unsigned long long off = 0; off < sz && *n < max; off += step) {
			if (*n == cap) {
				cap = cap ? cap * 2 : 4096;
				out = realloc(out, cap * sizeof(*out));
				assert_non_null(out);
			}
			out[(*n)++] = a + off;
		}
	}
	pclose(p);
	return out;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_location(const struct symbols_location *a, const struct symbols_location *b)
{
	bool same = a->nframes == b->nframes;

	for (size_t k = 0; same && k < a->nframes; k++) {
		const struct symbols_frame *x = &a->frames[k], *y = &b->frames[k];

		same = same_str(x->function, y->function) &&
		       same_str(x->system_name, y->system_name) && same_str(x->file, y->file) &&
		       x->line == y->line && x->start_line == y->start_line;
	}
	return same;
}

/* Prints the first few differences (*bad counts them). */
static void report(const char *path, const char *how, uint64_t addr,
		   const struct symbols_location *a, const struct symbols_location *b, size_t *bad)
{
	if ((*bad)++ >= 5)
		return;
	fprintf(stderr, "%s %#" PRIx64 ": %s %zu frames, libdw %zu\n", path, addr, how, a->nframes,
		b->nframes);
	for (size_t k = 0; k < a->nframes || k < b->nframes; k++)
		fprintf(stderr, "  %s %s:%lld | %s %s:%lld\n",
			k < a->nframes && a->frames[k].system_name ? a->frames[k].system_name : "-",
			k < a->nframes && a->frames[k].file ? a->frames[k].file : "-",
			k < a->nframes ? (long long)a->frames[k].line : 0,
			k < b->nframes && b->frames[k].system_name ? b->frames[k].system_name : "-",
			k < b->nframes && b->frames[k].file ? b->frames[k].file : "-",
			k < b->nframes ? (long long)b->frames[k].line : 0);
}

/* Checks a batch's answers against libdw's, as they come. */
struct batch_check {
	const char *path;
	struct symbolizer *ref;
	const struct symbols_object *ref_obj;
	const uint64_t *addrs;
	size_t n, bad, emitted;
	unsigned char *seen; /* [n]: each address answered once */
};

static void batch_emit(void *ctx, size_t i, const struct symbols_location *loc)
{
	struct batch_check *bc = ctx;
	struct symbols_location b;

	assert_true(i < bc->n);
	assert_int_equal(bc->seen[i], 0);
	bc->seen[i] = 1;
	bc->emitted++;
	assert_int_equal(symbolizer_resolve(bc->ref, bc->ref_obj, bc->addrs[i], &b, NULL), 0);
	if (!same_location(loc, &b))
		report(bc->path, "batch", bc->addrs[i], loc, &b, &bc->bad);
}

/* symbolizer_resolve_batch over addrs[0..n) in a symbolizer (whose
 * batches of any size take `threads` threads) that first answered every
 * third of them in a batch of their own (so that the second batch meets cached answers, walks
 * units again for the rest, and its helper threads read with the readers
 * of the first); returns the number of answers that differ from libdw's
 * (ref). stream: how the first batch, which opens the file, reads the units
 * of a compressed .debug_info as it inflates (*stream_cus: how many it
 * read). */
static size_t compare_batch(const char *path, struct symbolizer *ref,
			    const struct symbols_object *ref_obj, const uint64_t *addrs, size_t n,
			    unsigned threads, enum symbolizer_stream_test stream,
			    size_t *stream_cus)
{
	struct symbolizer *s = symbolizer_new(&(struct symbolizer_config){
	    .batch_threads = threads, .batch_threads_always = true, .stream_test = stream});
	size_t unused_reader, unused_libdw;
	struct symbols_object obj = {NULL, path};
	uint64_t *third = malloc((n / 3 + 1) * sizeof(*third));
	struct batch_check bc = {path, ref, ref_obj, third, 0, 0, 0, calloc(n + 1, 1)};
	size_t bad;

	assert_non_null(s);
	assert_non_null(third);
	assert_non_null(bc.seen);
	for (size_t i = 0; i < n; i += 3)
		third[bc.n++] = addrs[i];
	assert_int_equal(symbolizer_resolve_batch(s, &obj, third, bc.n, batch_emit, &bc, NULL), 0);
	assert_int_equal(bc.emitted, bc.n);
	bad = bc.bad;
	memset(bc.seen, 0, n + 1);
	bc = (struct batch_check){path, ref, ref_obj, addrs, n, 0, 0, bc.seen};
	assert_int_equal(symbolizer_resolve_batch(s, &obj, addrs, n, batch_emit, &bc, NULL), 0);
	assert_int_equal(bc.emitted, n);
	if (stream_cus)
		symbolizer_dwarf_stats(s, &unused_reader, stream_cus, &unused_libdw);
	free(bc.seen);
	free(third);
	symbolizer_free(s);
	return bad + bc.bad;
}

/* Resolves every address with the reader (in path), address by address
 * and in batches, and with libdw alone (in ref_path, normally the same
 * file); returns the number of answers that differ (printing the first
 * few). */
static size_t compare2(const char *path, const char *ref_path, const uint64_t *addrs, size_t n,
		       size_t *reader_cus, size_t *stream_cus)
{
	struct symbolizer_config libdw_cfg = {.libdw_only = true};
	struct symbolizer *fast = symbolizer_new(NULL), *ref = symbolizer_new(&libdw_cfg);
	struct symbols_object obj = {NULL, path}, ref_obj = {NULL, ref_path};
	size_t bad = 0, frames = 0, libdw_cus, unused, batch_bad, front_cus, back_cus;

	assert_non_null(fast);
	assert_non_null(ref);
	for (size_t i = 0; i < n; i++) {
		struct symbols_location a, b;

		assert_int_equal(symbolizer_resolve(fast, &obj, addrs[i], &a, NULL), 0);
		assert_int_equal(symbolizer_resolve(ref, &ref_obj, addrs[i], &b, NULL), 0);
		frames += a.nframes;
		if (!same_location(&a, &b))
			report(path, "reader", addrs[i], &a, &b, &bad);
	}
	/* One thread, the three of a larger machine, and on a compressed
	 * file the first batch's units read (all of them) by the calling
	 * thread with the stream reader as they inflate, or by the inflating
	 * thread with its reader once the section is whole. */
	batch_bad =
	    compare_batch(path, ref, &ref_obj, addrs, n, 1, 0, NULL) +
	    compare_batch(path, ref, &ref_obj, addrs, n, 3, 0, NULL) +
	    compare_batch(path, ref, &ref_obj, addrs, n, 2, SYMBOLIZER_STREAM_FRONT, &front_cus) +
	    compare_batch(path, ref, &ref_obj, addrs, n, 2, SYMBOLIZER_STREAM_BACK, &back_cus);
	*stream_cus = front_cus < back_cus ? front_cus : back_cus;
	symbolizer_dwarf_stats(fast, reader_cus, NULL, &libdw_cus);
	fprintf(stderr,
		"%s: %zu addresses, %zu frames, %zu differ (%zu in batches); reader %zu CUs "
		"(as .debug_info inflates: %zu at the front, %zu at the back), libdw %zu\n",
		path, n, frames, bad, batch_bad, *reader_cus, front_cus, back_cus, libdw_cus);
	/* Every CU these compilers write is one the reader supports. */
	assert_int_equal(libdw_cus, 0);
	symbolizer_dwarf_stats(ref, &unused, NULL, &libdw_cus);
	assert_int_equal(unused, 0);
	symbolizer_free(fast);
	symbolizer_free(ref);
	return bad + batch_bad;
}

static size_t compare(const char *path, const uint64_t *addrs, size_t n, size_t *reader_cus,
		      size_t *stream_cus)
{
	return compare2(path, path, addrs, n, reader_cus, stream_cus);
}

/* compressed: path's DWARF is (the batch that opens it then reads units as
 * .debug_info inflates, at either end). */
static void check_binary(const char *path, unsigned step, size_t max, bool compressed)
{
	size_t n, cus, streamed;
	uint64_t *addrs = sample(path, step, max, &n);

	assert_non_null(addrs);
	assert_true(n > 100);
	assert_int_equal(compare(path, addrs, n, &cus, &streamed), 0);
	assert_true(cus > 0);
	if (compressed)
		assert_true(streamed > 0);
	else
		assert_int_equal(streamed, 0);
	free(addrs);
}

static void test_cpp_programs(void **state)
{
	static const char *const progs[] = {"cpp_gcc5", "cpp_gcc4", "cpp_gccz", "cpp_clang5",
					    "cpp_clang4"};
	char path[256];

	(void)state;
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, progs[i]);
		/* every byte of every function */
		check_binary(path, 1, 200000, strcmp(progs[i], "cpp_gccz") == 0);
	}
}

/* gcc's link-time optimization writes a function inlined from another
 * file as DIEs referring, with DW_FORM_ref_addr, to that file's abstract
 * instance in another unit: the reader decodes that unit's abbreviations
 * too (and keeps them) while it walks the one holding the code. */
static void check_lto_program(const char *name)
{
	char path[256];
	size_t n, cus, streamed, cross = 0;
	uint64_t *addrs;
	struct symbolizer *s = symbolizer_new(NULL);
	struct symbols_object obj = {NULL, path};

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	addrs = sample(path, 1, 200000, &n);
	assert_non_null(addrs);
	assert_true(n > 20);
	assert_int_equal(compare(path, addrs, n, &cus, &streamed), 0);
	assert_true(cus > 0);
	/* dist() of lto_b.c inlined into main() of lto_a.c */
	for (size_t i = 0; i < n; i++) {
		struct symbols_location loc;

		assert_int_equal(symbolizer_resolve(s, &obj, addrs[i], &loc, NULL), 0);
		for (size_t k = 0; k + 1 < loc.nframes; k++)
			cross += loc.frames[k].file && loc.frames[k + 1].file &&
				 strstr(loc.frames[k].file, "lto_b.c") &&
				 strstr(loc.frames[k + 1].file, "lto_a.c");
	}
	assert_true(cross > 0);
	symbolizer_free(s);
	free(addrs);
}

/* Also compressed: the stream reader cannot follow a reference into
 * another unit (it reads units as they inflate), and leaves such units to
 * the batch. */
static void test_lto_program(void **state)
{
	(void)state;
	check_lto_program("c_gcc_lto");
	check_lto_program("c_gcc_lto_z");
}

/* Every address in program name (more than min of them) resolved with the
 * reader, against libdw on ref (the same code, built so that libdw finds
 * all of it); *cus and *streamed as compare2's. */
static void check_with_ref(const char *name, const char *ref_name, size_t min, size_t *cus,
			   size_t *streamed)
{
	char path[256], ref[256];
	size_t n;
	uint64_t *addrs;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(ref, sizeof(ref), "%s/%s", dir, ref_name);
	addrs = sample(path, 1, 200000, &n);
	assert_non_null(addrs);
	assert_true(n > min);
	assert_int_equal(compare2(path, ref, addrs, n, cus, streamed), 0);
	free(addrs);
}

/* A compressed program whose .debug_aranges names one unit (gcc's) and
 * not the other (clang's): the batch that opens it reads gcc's unit as it
 * inflates, and keeps those answers only once the reader on the whole
 * section, which also places clang's unit, maps them the same way. */
static void test_mixed_aranges(void **state)
{
	size_t cus, streamed;

	(void)state;
	check_with_ref("c_mixed_z", "c_mixed_z_ref", 20, &cus, &streamed);
	assert_int_equal(cus, 2);
	assert_true(streamed > 0);
}

/* clang writes no .debug_aranges by default: libdw's CU lookup
 * (dwarf_addrdie) then finds nothing and only symbol-table names were
 * left. The reader takes such units' ranges from their unit DIE: the
 * answers equal libdw's on the same program built with -gdwarf-aranges
 * (the code is the same, only that section differs). */
static void test_without_aranges(void **state)
{
	size_t cus, streamed;

	(void)state;
	check_with_ref("cpp_clang5_noaranges", "cpp_clang5", 100, &cus, &streamed);
	assert_true(cus > 0);
}

static void test_this_program(void **state)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	(void)state;
	assert_true(n > 0);
	path[n] = '\0';
	check_binary(path, 7, 60000, false);
}

/* glibc's detached debug file (libc6-dbg), found by libc's build ID. */
static void test_libc_debug_file(void **state)
{
	char cmd[512], id[128] = "", path[512];
	FILE *p;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "readelf -n \"$(ldd /bin/true | awk '/libc.so/ {print $3}')\" | "
		 "awk '/Build ID/ {print $3}'");
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(id, sizeof(id), p));
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	assert_true(strlen(id) > 2);
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	if (access(path, R_OK) != 0)
		fail_msg("%s missing: install libc6-dbg (scripts/packages.txt)", path);
	check_binary(path, 13, 60000, true);
}

/* The innermost frame's line agrees with elfutils' eu-addr2line. */
static void test_matches_eu_addr2line(void **state)
{
	char path[256], in[256], cmd[768];
	size_t n, checked = 0;
	uint64_t *addrs;
	struct symbolizer *s = symbolizer_new(NULL);
	FILE *f, *p;

	(void)state;
	snprintf(path, sizeof(path), "%s/cpp_gcc5", dir);
	addrs = sample(path, 3, 20000, &n);
	assert_non_null(addrs);
	snprintf(in, sizeof(in), "%s/addrs", dir);
	f = fopen(in, "w");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%#" PRIx64 "\n", addrs[i]);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "eu-addr2line -e %s < %s", path, in);
	p = popen(cmd, "r");
	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		char line[4096], *colon;
		struct symbols_object obj = {NULL, path};
		struct symbols_location loc;

		assert_non_null(fgets(line, sizeof(line), p));
		line[strcspn(line, "\n")] = '\0';
		assert_int_equal(symbolizer_resolve(s, &obj, addrs[i], &loc, NULL), 0);
		colon = strchr(line, ':'); /* FILE:LINE[:COLUMN] */
		if (!colon || strncmp(line, "??", 2) == 0 || loc.nframes == 0 ||
		    !loc.frames[0].file)
			continue;
		*colon = '\0';
		assert_string_equal(loc.frames[0].file, line);
		assert_int_equal(loc.frames[0].line, strtoll(colon + 1, NULL, 10));
		checked++;
	}
	pclose(p);
	assert_true(checked > n / 2);
	free(addrs);
	symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpp_programs),    cmocka_unit_test(test_matches_eu_addr2line),
	    cmocka_unit_test(test_without_aranges), cmocka_unit_test(test_this_program),
	    cmocka_unit_test(test_libc_debug_file), cmocka_unit_test(test_lto_program),
	    cmocka_unit_test(test_mixed_aranges),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
