/*
 * test_symbols.c — the symbolizer against binutils' addr2line on programs
 * compiled here with gcc -g -O2: a function with code inlined into it, a
 * shared library, PIE and non-PIE executables, a stripped copy with its
 * debuginfo in the store, and C++ names. Address normalization is checked
 * on a running process's real mappings (/proc/PID/maps) against nm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "symbols/debuginfo.h"
#include "symbols/symbols.h"

static char dir[64];

static const char lib_src[] = "#include <math.h>\n"
			      "volatile double lib_sink;\n"
			      "__attribute__((noinline)) double lib_work(int n)\n"
			      "{\n"
			      "\tdouble acc = 0;\n"
			      "\tfor (int i = 1; i <= n; i++)\n"
			      "\t\tacc += sqrt((double)i) / (i + 1);\n"
			      "\tlib_sink = acc;\n"
			      "\treturn acc;\n"
			      "}\n";

static const char main_src[] =
    "#include <stdio.h>\n"
    "#include <unistd.h>\n"
    "double lib_work(int n);\n"
    "volatile long sink;\n"
    "static inline __attribute__((always_inline)) long inlined_square(long x)\n"
    "{\n"
    "\tlong r = x * x;\n"
    "\tsink += r;\n"
    "\treturn r + 1;\n"
    "}\n"
    "__attribute__((noinline)) long outer_function(long n)\n"
    "{\n"
    "\tlong acc = 0;\n"
    "\tfor (long i = 0; i < n; i++)\n"
    "\t\tacc += inlined_square(i ^ acc);\n"
    "\treturn acc;\n"
    "}\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "\tprintf(\"%p %p\\n\", (void *)outer_function, (void *)lib_work);\n"
    "\tfflush(stdout);\n"
    "\tlong r = outer_function(argc * 1000) + (long)lib_work(argc * 100);\n"
    "\tif (argc > 1)\n"
    "\t\tpause();\n"
    "\treturn (int)(r & 1);\n"
    "}\n";

static const char cpp_src[] =
    "namespace kiln { namespace test {\n"
    "template <typename T> struct Box { T v; __attribute__((noipa)) T twice(T x); };\n"
    "template <typename T> T Box<T>::twice(T x) { return v + x * 2; }\n"
    "} }\n"
    "int main(int argc, char **) { kiln::test::Box<long> b{argc}; return (int)b.twice(argc); }\n";

static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kiln-symbols-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	write_file("lib.c", lib_src);
	write_file("main.c", main_src);
	write_file("box.cc", cpp_src);
	sh("cd %s && gcc -g -O2 -fPIC -shared -o libwork.so lib.c -lm", dir);
	sh("cd %s && gcc -g -O2 -pie -fPIE -o main_pie main.c -L. -lwork -Wl,-rpath,%s "
	   "-Wl,--build-id",
	   dir, dir);
	sh("cd %s && gcc -g -O2 -no-pie -fno-PIE -o main_nopie main.c -L. -lwork -Wl,-rpath,%s "
	   "-Wl,--build-id",
	   dir, dir);
	sh("cd %s && objcopy --only-keep-debug main_pie main_pie.debug && strip -o main_stripped "
	   "main_pie",
	   dir);
	/* Separate debug files of the others (normalization through them). */
	sh("cd %s && objcopy --only-keep-debug main_nopie main_nopie.debug && "
	   "objcopy --only-keep-debug libwork.so libwork.so.debug",
	   dir);
	sh("cd %s && g++ -g -O2 -o box box.cc", dir);
	/* A CU with code but no subprogram DIEs (assembly, as in libc). */
	write_file("asm_main.c", "int asm_add(int, int);\n"
				 "int main(int argc, char **argv) { return asm_add(argc, 1); }\n");
	write_file("asm_add.S", ".text\n.globl asm_add\n.type asm_add, @function\nasm_add:\n"
				"\tmov %edi, %eax\n\tadd %esi, %eax\n\tret\n"
				".size asm_add, .-asm_add\n"
				".section .note.GNU-stack,\"\",@progbits\n");
	sh("cd %s && gcc -g -O2 -o asm_prog asm_main.c asm_add.S", dir);
	/* No GNU build ID: known by the hash of .text. */
	sh("cd %s && gcc -g -O2 -o main_noid main.c -L. -lwork -Wl,-rpath,%s -Wl,--build-id=none "
	   "&& strip -o main_noid_stripped main_noid && "
	   "gcc -g -O0 -o main_noid_other main.c -L. -lwork -Wl,--build-id=none && "
	   "objcopy --only-keep-debug main_noid main_noid.debug",
	   dir, dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", dir);
	return 0;
}

/* Instruction addresses of one function, from objdump, within the
 * symbol's size as nm -S reports it: the padding after a function belongs to
 * no function (addr2line would name the symbol before it; Kiln does not). */
static size_t function_addrs(const char *bin, const char *func, uint64_t *out, size_t max)
{
	char cmd[1024], line[512];
	unsigned long long start = 0, size = 0;
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S %s/%s | awk '$4 == \"%s\" {print $1, $2}'", dir, bin,
		 func);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	assert_int_equal(sscanf(line, "%llx %llx", &start, &size), 2);

	snprintf(cmd, sizeof(cmd),
		 "objdump -d --no-show-raw-insn %s/%s | awk '/<%s>:/,/^$/' | grep -oE '^ "
		 "+[0-9a-f]+:' | tr -d ' :'",
		 dir, bin, func);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (n < max && fgets(line, sizeof(line), p)) {
		uint64_t a = strtoull(line, NULL, 16);

		if (a >= start && a < start + size)
			out[n++] = a;
	}
	pclose(p);
	return n;
}

struct a2l_frame {
	char func[256], file[512];
	long line;
};

/* addr2line -i -f for one address: frames innermost first. */
static size_t addr2line(const char *bin, uint64_t addr, struct a2l_frame *fr, size_t max)
{
	char cmd[1024], l1[256], l2[512];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "addr2line -i -f -e %s/%s 0x%llx", dir, bin,
		 (unsigned long long)addr);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (n < max && fgets(l1, sizeof(l1), p) && fgets(l2, sizeof(l2), p)) {
		char *colon;

		l1[strcspn(l1, "\n")] = '\0';
		l2[strcspn(l2, " \n")] = '\0'; /* drops " (discriminator N)" */
		colon = strrchr(l2, ':');
		assert_non_null(colon);
		*colon = '\0';
		snprintf(fr[n].func, sizeof(fr[n].func), "%s", l1);
		snprintf(fr[n].file, sizeof(fr[n].file), "%s", l2);
		fr[n].line = colon[1] == '?' ? 0 : atol(colon + 1);
		n++;
	}
	pclose(p);
	return n;
}

/* Compares every instruction of func in bin with addr2line; returns how
 * many addresses had inlined frames. */
static size_t compare_function(struct symbolizer *s, const struct symbols_object *obj,
			       const char *bin, const char *func)
{
	uint64_t addrs[512];
	size_t n = function_addrs(bin, func, addrs, 512), inlined = 0;

	assert_true(n > 3);
	for (size_t i = 0; i < n; i++) {
		struct a2l_frame want[SYMBOLS_MAX_FRAMES];
		struct symbols_location got;
		size_t nwant = addr2line(bin, addrs[i], want, SYMBOLS_MAX_FRAMES);

		assert_int_equal(symbolizer_resolve(s, obj, addrs[i], &got, NULL), 0);
		if (got.nframes != nwant)
			fail_msg("%s 0x%llx: %zu frames, addr2line %zu", bin,
				 (unsigned long long)addrs[i], got.nframes, nwant);
		for (size_t j = 0; j < nwant; j++) {
			const struct symbols_frame *f = &got.frames[j];

			if (strcmp(f->function, want[j].func) != 0 || !f->file ||
			    strcmp(f->file, want[j].file) != 0 || f->line != want[j].line)
				fail_msg("%s 0x%llx frame %zu: %s %s:%lld, addr2line %s %s:%ld",
					 bin, (unsigned long long)addrs[i], j, f->function,
					 f->file ? f->file : "?", (long long)f->line, want[j].func,
					 want[j].file, want[j].line);
		}
		if (nwant > 1)
			inlined++;
	}
	return inlined;
}

static void path_of(char *out, size_t n, const char *bin)
{
	snprintf(out, n, "%s/%s", dir, bin);
}

static void test_matches_addr2line_pie_nopie_shared(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	char p1[256], p2[256], p3[256];

	(void)state;
	path_of(p1, sizeof(p1), "main_pie");
	path_of(p2, sizeof(p2), "main_nopie");
	path_of(p3, sizeof(p3), "libwork.so");
	struct symbols_object pie = {NULL, p1}, nopie = {NULL, p2}, lib = {NULL, p3};
	assert_true(compare_function(s, &pie, "main_pie", "outer_function") > 0);
	compare_function(s, &pie, "main_pie", "main");
	assert_true(compare_function(s, &nopie, "main_nopie", "outer_function") > 0);
	compare_function(s, &lib, "libwork.so", "lib_work");
	symbolizer_free(s);
}

/* Compressed DWARF (SHF_COMPRESSED, as in Debian's debug packages), which
 * the symbolizer inflates itself: the same answers as addr2line. */
static void test_compressed_debug_sections(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	char p[256];

	(void)state;
	sh("cd %s && objcopy --compress-debug-sections=zlib main_pie main_pie_z && "
	   "readelf -SW main_pie_z | grep -q 'debug_info .* C '",
	   dir);
	path_of(p, sizeof(p), "main_pie_z");
	struct symbols_object obj = {NULL, p};
	assert_true(compare_function(s, &obj, "main_pie_z", "outer_function") > 0);
	compare_function(s, &obj, "main_pie_z", "main");
	symbolizer_free(s);
}

static void test_inlined_frame_order(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	uint64_t addrs[512];
	char p[256];
	bool seen = false;

	(void)state;
	path_of(p, sizeof(p), "main_pie");
	struct symbols_object obj = {NULL, p};
	size_t n = function_addrs("main_pie", "outer_function", addrs, 512);
	for (size_t i = 0; i < n; i++) {
		struct symbols_location loc;

		assert_int_equal(symbolizer_resolve(s, &obj, addrs[i], &loc, NULL), 0);
		assert_true(loc.nframes >= 1);
		assert_string_equal(loc.frames[loc.nframes - 1].function, "outer_function");
		if (loc.nframes == 2) {
			assert_string_equal(loc.frames[0].function, "inlined_square");
			assert_int_equal(loc.frames[1].line, 15); /* the call site */
			assert_int_equal(loc.frames[0].start_line, 5);
			seen = true;
		}
	}
	assert_true(seen);
	symbolizer_free(s);
}

/* nm's value of a symbol. */
static uint64_t nm_value(const char *bin, const char *sym)
{
	char cmd[512], line[256] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s/%s | awk '$3 == \"%s\" {print $1}'", dir, bin, sym);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	return strtoull(line, NULL, 16);
}

/* Runs bin, reads the runtime addresses it prints and its mappings, and
 * checks that normalizing them gives nm's values. */
static void check_normalize(const char *bin, bool pie)
{
	char cmd[256], maps[64], line[512], exe[256], lib[256];
	uint64_t a_outer = 0, a_lib = 0, got;
	int pipefd[2];
	pid_t pid;
	FILE *f;
	int found = 0;

	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* A failed assertion leaves the parent without its kill(). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		snprintf(cmd, sizeof(cmd), "%s/%s", dir, bin);
		execl(cmd, cmd, "wait", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	f = fdopen(pipefd[0], "r");
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_int_equal(
	    sscanf(line, "%llx %llx", (unsigned long long *)&a_outer, (unsigned long long *)&a_lib),
	    2);
	path_of(exe, sizeof(exe), bin);
	path_of(lib, sizeof(lib), "libwork.so");
	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, limit, off;
		char path[300] = "";
		struct elfinfo info;

		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %299s", &start, &limit, &off, path) <
		    3)
			continue;
		uint64_t want_addr = strcmp(path, exe) == 0   ? a_outer
				     : strcmp(path, lib) == 0 ? a_lib
							      : 0;
		if (!want_addr || want_addr < start || want_addr >= limit)
			continue;
		assert_int_equal(elfinfo_read_file(path, &info, NULL), 0);
		assert_int_equal(symbols_normalize(&info, want_addr, start, limit, off, &got), 0);
		if (want_addr == a_outer)
			assert_int_equal(got, nm_value(bin, "outer_function"));
		else
			assert_int_equal(got, nm_value("libwork.so", "lib_work"));
		/* The same from executable_info alone (what the agent sends:
		 * ELF type and the executable PT_LOAD this mapping maps). */
		const struct elfinfo_load *seg = NULL;
		uint64_t got_exec = 0;

		for (size_t i = 0; i < info.nloads; i++)
			if ((info.loads[i].flags & 1 /* PF_X */) &&
			    off >= (info.loads[i].offset & ~4095ull) &&
			    off < info.loads[i].offset + info.loads[i].filesz)
				seg = &info.loads[i];
		assert_non_null(seg);
		assert_int_equal(symbols_normalize_exec(info.type, seg->offset, seg->vaddr,
							want_addr, start, limit, off, &got_exec),
				 0);
		assert_int_equal(got_exec, got);
		/* The same through the separate debug file (its program headers
		 * lost the file offsets), as when only debuginfo is at hand. */
		char dbg[320];
		uint64_t got_dbg = 0;

		snprintf(dbg, sizeof(dbg), "%s.debug", path);
		assert_int_equal(elfinfo_read_file(dbg, &info, NULL), 0);
		assert_int_equal(symbols_normalize(&info, want_addr, start, limit, off, &got_dbg),
				 0);
		assert_int_equal(got_dbg, got);
		found++;
	}
	fclose(f);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* A non-PIE executable's &lib_work is its canonical PLT entry, in the
	 * executable: only the PIE run proves the shared library case. */
	assert_int_equal(found, pie ? 2 : 1);
}

static void test_normalize_pie(void **state)
{
	(void)state;
	check_normalize("main_pie", true);
}

static void test_normalize_nopie(void **state)
{
	(void)state;
	check_normalize("main_nopie", false);
}

static void test_normalize_outside_mapping(void **state)
{
	struct elfinfo info;
	char p[256];
	uint64_t v;

	(void)state;
	path_of(p, sizeof(p), "main_pie");
	assert_int_equal(elfinfo_read_file(p, &info, NULL), 0);
	assert_int_equal(symbols_normalize(&info, 0x500, 0x1000, 0x2000, 0, &v), -ERANGE);
	assert_int_equal(symbols_normalize_exec(3, 0, 0, 0x500, 0x1000, 0x2000, 0, &v), -ERANGE);
	assert_int_equal(
	    symbols_normalize_exec(1 /* ET_REL */, 0, 0, 0x1500, 0x1000, 0x2000, 0, &v), -EINVAL);
}

/* symbolizer_normalize_mapping: a mapping without addresses needs no file;
 * an address outside its mapping is no failure; a path naming a FIFO (no
 * writer: opening it for reading would block) or a device is refused at
 * once with a message saying so. */
static void test_normalize_mapping_and_unreadable_paths(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	struct symbols_location loc;
	struct kiln_error e = {0};
	struct elfinfo info;
	char p[256], fifo[256];
	uint64_t v;

	(void)state;
	path_of(p, sizeof(p), "main_pie");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	struct symbols_object none = {NULL, "/nonexistent/kiln"}, pie = {NULL, p},
			      pipe_obj = {NULL, fifo}, dev = {NULL, "/dev/zero"};

	assert_int_equal(symbolizer_normalize_mapping(s, &none, 0x1234, 0, 0, 0, &v, NULL), 0);
	assert_int_equal(v, 0x1234);
	assert_int_equal(symbolizer_normalize_mapping(s, &pie, 0x500, 0x1000, 0x2000, 0, &v, NULL),
			 0);
	assert_int_equal(v, 0x500);
	assert_int_equal(symbolizer_normalize_mapping(s, &none, 0x1500, 0x1000, 0x2000, 0, &v, &e),
			 -ENOENT);

	kiln_error_clear(&e);
	assert_int_equal(elfinfo_read_file(fifo, &info, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "not a regular file"));
	kiln_error_clear(&e);
	assert_int_equal(symbolizer_resolve(s, &pipe_obj, 0x1000, &loc, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "not a regular file"));
	kiln_error_clear(&e);
	assert_int_equal(symbolizer_normalize_mapping(s, &dev, 0x1500, 0x1000, 0x2000, 0, &v, &e),
			 -ENOENT);
	assert_non_null(strstr(e.msg, "/dev/zero: not a regular file"));
	unlink(fifo);
	symbolizer_free(s);
}

/* The build ID and load segments readelf reports. */
static void test_elfinfo_matches_readelf(void **state)
{
	char cmd[512], line[256] = "", p[256];
	struct elfinfo info, dbg;
	FILE *f;

	(void)state;
	path_of(p, sizeof(p), "main_pie");
	assert_int_equal(elfinfo_read_file(p, &info, NULL), 0);
	snprintf(cmd, sizeof(cmd), "readelf -n %s | awk '/Build ID/ {print $3}'", p);
	f = popen(cmd, "r");
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	line[strcspn(line, "\n")] = '\0';
	assert_string_equal(info.build_id, line);
	snprintf(cmd, sizeof(cmd), "readelf -lW %s | grep -c ' LOAD '", p);
	f = popen(cmd, "r");
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	assert_int_equal(info.nloads, (size_t)atoi(line));
	assert_int_equal(info.type, 3 /* ET_DYN */);
	assert_true(info.has_symtab && info.has_debug_info);

	path_of(p, sizeof(p), "main_pie.debug");
	assert_int_equal(elfinfo_read_file(p, &dbg, NULL), 0);
	assert_string_equal(dbg.build_id, info.build_id);
	assert_true(dbg.has_debug_info);
	path_of(p, sizeof(p), "main_stripped");
	assert_int_equal(elfinfo_read_file(p, &dbg, NULL), 0);
	assert_false(dbg.has_symtab || dbg.has_debug_info);
	path_of(p, sizeof(p), "main_nopie");
	assert_int_equal(elfinfo_read_file(p, &dbg, NULL), 0);
	assert_int_equal(dbg.type, 2 /* ET_EXEC */);
}

static void test_stripped_unresolved_then_debuginfo(void **state)
{
	char p[256], dbgpath[256], store_dir[256], label[128];
	struct elfinfo info;
	struct symbols_location loc;
	struct kiln_error e = {0};
	struct buf data;
	uint64_t addr = nm_value("main_pie", "outer_function");

	(void)state;
	path_of(p, sizeof(p), "main_stripped");
	assert_int_equal(elfinfo_read_file(p, &info, NULL), 0);

	/* Without debuginfo: an unresolved frame, shown as [binary] +0x... */
	struct symbolizer *s = symbolizer_new(NULL);
	struct symbols_object obj = {info.build_id, p};
	assert_int_equal(symbolizer_resolve(s, &obj, addr, &loc, NULL), 0);
	assert_int_equal(loc.nframes, 0);
	symbols_format_unresolved(label, sizeof(label), p, addr);
	char want[128];
	snprintf(want, sizeof(want), "[main_stripped] +0x%llx", (unsigned long long)addr);
	assert_string_equal(label, want);
	symbolizer_free(s);

	/* With the debug file uploaded to the store: names and lines. */
	path_of(store_dir, sizeof(store_dir), "store");
	const char *const local_dirs[] = {store_dir, NULL};
	struct debuginfo_config dc = {.storage_path = store_dir, .local_dirs = local_dirs};
	struct debuginfo_store *d = debuginfo_store_new(&dc, &e);
	assert_non_null(d);
	path_of(dbgpath, sizeof(dbgpath), "main_pie.debug");
	buf_init(&data);
	assert_int_equal(buf_read_file(&data, dbgpath, 1 << 26), 0);
	assert_int_equal(debuginfo_store_put(d, info.build_id, data.data, data.len, &e), 0);
	assert_true(debuginfo_store_has(d, info.build_id));
	s = symbolizer_new(&(struct symbolizer_config){.debuginfo = d});
	assert_int_equal(symbolizer_resolve(s, &obj, addr, &loc, NULL), 0);
	assert_int_equal(loc.nframes, 1);
	assert_string_equal(loc.frames[0].function, "outer_function");
	assert_int_equal(loc.frames[0].line, 12);
	assert_non_null(strstr(loc.frames[0].file, "main.c"));
	symbolizer_free(s);

	/* Bad uploads are refused with a reason. */
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, "00112233", data.data, data.len, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "mismatch"));
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, info.build_id, "hello", 5, &e), -EINVAL);
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, "../../etc", "x", 1, &e), -EINVAL);
	debuginfo_store_free(d);

	dc.max_upload_bytes = 100;
	d = debuginfo_store_new(&dc, &e);
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, info.build_id, data.data, data.len, &e), -EFBIG);
	debuginfo_store_free(d);
	buf_free(&data);
}

/* Answers of one batch, kept by index. */
struct batch_got {
	struct symbols_location loc[16];
	int calls[16];
};

static void batch_keep(void *ctx, size_t i, const struct symbols_location *loc)
{
	struct batch_got *g = ctx;

	assert_true(i < 16);
	g->loc[i] = *loc;
	g->calls[i]++;
}

/* symbolizer_resolve_batch: each address answered once, as
 * symbolizer_resolve answers it, whatever the order and repeats; an
 * object that cannot be found answers none. */
/* The edges of a batch, in a symbolizer whose batches stay on one thread
 * when small (config NULL) or always take helpers (threads). */
static void batch_edges(const struct symbolizer_config *config)
{
	struct symbolizer *s = symbolizer_new(config), *one = symbolizer_new(NULL);
	uint64_t f = nm_value("main_pie", "outer_function"), m = nm_value("main_pie", "main");
	/* Descending, a repeat, an address in no function, main's. */
	uint64_t addrs[] = {f + 9, f + 4, f + 9, 0x10, m, f};
	size_t n = sizeof(addrs) / sizeof(addrs[0]);
	struct batch_got *g = calloc(1, sizeof(*g));
	char p[256];

	assert_non_null(g);
	path_of(p, sizeof(p), "main_pie");
	struct symbols_object obj = {NULL, p}, missing = {NULL, "/nonexistent/prog"};

	assert_int_equal(symbolizer_resolve_batch(s, &obj, addrs, 0, batch_keep, g, NULL), 0);
	assert_int_equal(symbolizer_resolve_batch(s, &missing, addrs, n, batch_keep, g, NULL),
			 -ENOENT);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(g->calls[i], 0);
	/* One address first (cached), then all of them. */
	assert_int_equal(symbolizer_resolve_batch(s, &obj, addrs + 4, 1, batch_keep, g, NULL), 0);
	assert_int_equal(g->calls[0], 1);
	memset(g, 0, sizeof(*g));
	assert_int_equal(symbolizer_resolve_batch(s, &obj, addrs, n, batch_keep, g, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		struct symbols_location want;

		assert_int_equal(g->calls[i], 1);
		assert_int_equal(symbolizer_resolve(one, &obj, addrs[i], &want, NULL), 0);
		assert_int_equal(g->loc[i].nframes, want.nframes);
		for (size_t k = 0; k < want.nframes; k++) {
			assert_string_equal(g->loc[i].frames[k].function, want.frames[k].function);
			assert_int_equal(g->loc[i].frames[k].line, want.frames[k].line);
		}
	}
	assert_int_equal(g->loc[3].nframes, 0); /* 0x10: no function */
	assert_string_equal(g->loc[5].frames[g->loc[5].nframes - 1].function, "outer_function");
	assert_string_equal(g->loc[4].frames[0].function, "main");
	free(g);
	symbolizer_free(s);
	symbolizer_free(one);
}

static void test_batch_edges(void **state)
{
	(void)state;
	batch_edges(NULL);
	batch_edges(&(struct symbolizer_config){.batch_threads = 3, .batch_threads_always = true});
}

static void test_cpp_demangled(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	struct symbols_location loc;
	char p[256];
	uint64_t addr = nm_value("box", "_ZN4kiln4test3BoxIlE5twiceEl");

	(void)state;
	path_of(p, sizeof(p), "box");
	struct symbols_object obj = {NULL, p};
	assert_int_equal(symbolizer_resolve(s, &obj, addr, &loc, NULL), 0);
	assert_int_equal(loc.nframes, 1);
	assert_string_equal(loc.frames[0].system_name, "_ZN4kiln4test3BoxIlE5twiceEl");
	assert_string_equal(loc.frames[0].function, "kiln::test::Box<long>::twice(long)");
	symbolizer_free(s);

	char *d = symbols_demangle("_RNvCs1234_7mycrate3foo");
	assert_non_null(d);
	assert_string_equal(d, "mycrate::foo");
	free(d);
	assert_null(symbols_demangle("plain_c"));
}

/* kilnctl debuginfo extract's core: the extracted file keeps the build ID,
 * is smaller than the binary, and symbolizes exactly like the original
 * (checked against addr2line on the original, and binutils reads it too). */
static void test_extract_debuginfo(void **state)
{
	char in[256], out[256], cmd[600];
	struct elfinfo a, b;
	struct kiln_error e = {0};
	struct symbolizer *s = symbolizer_new(NULL);

	(void)state;
	path_of(in, sizeof(in), "main_pie");
	path_of(out, sizeof(out), "main_pie.extracted");
	assert_int_equal(symbols_extract_debuginfo(in, out, &e), 0);
	assert_int_equal(elfinfo_read_file(in, &a, NULL), 0);
	assert_int_equal(elfinfo_read_file(out, &b, NULL), 0);
	assert_string_equal(a.build_id, b.build_id);
	assert_true(b.has_symtab && b.has_debug_info);
	snprintf(cmd, sizeof(cmd), "test $(stat -c %%s %s) -lt $(stat -c %%s %s)", out, in);
	sh("%s", cmd);
	sh("readelf -SW %s | grep -q ' .text .*NOBITS'", out);
	sh("addr2line -f -e %s 0x%llx | grep -q outer_function", out,
	   (unsigned long long)nm_value("main_pie", "outer_function"));
	struct symbols_object obj = {NULL, out};
	assert_true(compare_function(s, &obj, "main_pie", "outer_function") > 0);
	symbolizer_free(s);

	kiln_error_clear(&e);
	path_of(in, sizeof(in), "main.c");
	assert_int_equal(symbols_extract_debuginfo(in, out, &e), -ENOEXEC);
	assert_non_null(strstr(e.msg, "main.c"));
}

/* Reads the first line of a shell command's output into out. */
static void sh_read(char *out, size_t n, const char *cmd)
{
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	assert_non_null(fgets(out, (int)n, p));
	pclose(p);
	out[strcspn(out, " \n")] = '\0';
}

static void test_hash_id_without_build_id(void **state)
{
	char p[256], q[256], cmd[1024], want[64], store_dir[256];
	struct elfinfo a, b;
	struct kiln_error e = {0};
	struct buf data;
	struct symbols_location loc;
	uint64_t addr = nm_value("main_noid", "outer_function");

	(void)state;
	path_of(p, sizeof(p), "main_noid");
	sh("! readelf -n %s | grep -q 'Build ID'", p);
	/* The ID is XXH64 of .text, as xxhsum (the xxHash CLI) prints it. */
	snprintf(
	    cmd, sizeof(cmd),
	    "objcopy -O binary --only-section=.text %s %s.text && xxhsum -H1 %s.text 2>/dev/null",
	    p, p, p);
	sh_read(want, sizeof(want), cmd);
	assert_int_equal(strlen(want), 16);
	assert_int_equal(elfinfo_read_file(p, &a, NULL), 0);
	assert_true(a.build_id_is_hash);
	assert_string_equal(a.build_id, want);
	/* Stripping keeps .text, so the stripped copy has the same ID. */
	path_of(q, sizeof(q), "main_noid_stripped");
	assert_int_equal(elfinfo_read_file(q, &b, NULL), 0);
	assert_string_equal(b.build_id, want);
	/* A different build does not. */
	path_of(q, sizeof(q), "main_noid_other");
	assert_int_equal(elfinfo_read_file(q, &b, NULL), 0);
	assert_true(b.build_id_is_hash);
	assert_string_not_equal(b.build_id, want);
	/* A separate debug file has no .text bytes: no ID. */
	path_of(q, sizeof(q), "main_noid.debug");
	assert_int_equal(elfinfo_read_file(q, &b, NULL), 0);
	assert_string_equal(b.build_id, "");

	/* The extract keeps .text (so the ID can be checked) and the debug
	 * sections; the store accepts it under the hash ID, and refuses a
	 * different build or a file without .text under it. */
	path_of(q, sizeof(q), "main_noid.extracted");
	assert_int_equal(symbols_extract_debuginfo(p, q, &e), 0);
	assert_int_equal(elfinfo_read_file(q, &b, NULL), 0);
	assert_string_equal(b.build_id, want);
	assert_true(b.has_symtab && b.has_debug_info);
	path_of(store_dir, sizeof(store_dir), "store_noid");
	const char *const local_dirs[] = {store_dir, NULL};
	struct debuginfo_config dc = {.storage_path = store_dir, .local_dirs = local_dirs};
	struct debuginfo_store *d = debuginfo_store_new(&dc, &e);
	assert_non_null(d);
	buf_init(&data);
	path_of(q, sizeof(q), "main_noid_other");
	assert_int_equal(buf_read_file(&data, q, 1 << 26), 0);
	assert_int_equal(debuginfo_store_put(d, want, data.data, data.len, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "mismatch"));
	buf_free(&data);
	buf_init(&data);
	path_of(q, sizeof(q), "main_noid.debug");
	assert_int_equal(buf_read_file(&data, q, 1 << 26), 0);
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, want, data.data, data.len, &e), -EINVAL);
	buf_free(&data);
	buf_init(&data);
	path_of(q, sizeof(q), "main_noid.extracted");
	assert_int_equal(buf_read_file(&data, q, 1 << 26), 0);
	kiln_error_clear(&e);
	assert_int_equal(debuginfo_store_put(d, want, data.data, data.len, &e), 0);
	buf_free(&data);

	/* The stripped binary, known by the hash ID, symbolizes through it. */
	path_of(q, sizeof(q), "main_noid_stripped");
	struct symbolizer *s = symbolizer_new(&(struct symbolizer_config){.debuginfo = d});
	struct symbols_object obj = {want, q};
	assert_int_equal(symbolizer_resolve(s, &obj, addr, &loc, NULL), 0);
	assert_true(loc.nframes >= 1);
	assert_string_equal(loc.frames[0].function, "outer_function");
	assert_non_null(loc.frames[0].file);
	symbolizer_free(s);
	debuginfo_store_free(d);
}

static void test_assembly_cu(void **state)
{
	struct symbolizer *s = symbolizer_new(NULL);
	struct symbols_location loc;
	char p[256];

	(void)state;
	path_of(p, sizeof(p), "asm_prog");
	struct symbols_object obj = {NULL, p};
	/* Its CU has lines but no function DIEs: name from .symtab, place
	 * from the line table. */
	assert_int_equal(
	    symbolizer_resolve(s, &obj, nm_value("asm_prog", "asm_add") + 2, &loc, NULL), 0);
	assert_int_equal(loc.nframes, 1);
	assert_string_equal(loc.frames[0].function, "asm_add");
	assert_non_null(loc.frames[0].file);
	assert_non_null(strstr(loc.frames[0].file, "asm_add.S"));
	assert_int_equal(loc.frames[0].line, 6);
	/* And the C CU beside it. */
	assert_int_equal(symbolizer_resolve(s, &obj, nm_value("asm_prog", "main"), &loc, NULL), 0);
	assert_true(loc.nframes >= 1);
	assert_string_equal(loc.frames[loc.nframes - 1].function, "main");
	assert_non_null(strstr(loc.frames[loc.nframes - 1].file, "asm_main.c"));
	symbolizer_free(s);
}

static void test_garbage_is_not_elf(void **state)
{
	struct elfinfo info;
	char junk[256];

	(void)state;
	memset(junk, 0x7f, sizeof(junk));
	assert_int_equal(elfinfo_read_mem(junk, sizeof(junk), &info, NULL), -ENOEXEC);
	assert_false(symbols_build_id_valid("abc"));
	assert_false(symbols_build_id_valid("../ab"));
	assert_true(symbols_build_id_valid("ABcd01"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches_addr2line_pie_nopie_shared),
	    cmocka_unit_test(test_inlined_frame_order),
	    cmocka_unit_test(test_batch_edges),
	    cmocka_unit_test(test_compressed_debug_sections),
	    cmocka_unit_test(test_assembly_cu),
	    cmocka_unit_test(test_normalize_pie),
	    cmocka_unit_test(test_normalize_nopie),
	    cmocka_unit_test(test_normalize_outside_mapping),
	    cmocka_unit_test(test_normalize_mapping_and_unreadable_paths),
	    cmocka_unit_test(test_elfinfo_matches_readelf),
	    cmocka_unit_test(test_stripped_unresolved_then_debuginfo),
	    cmocka_unit_test(test_cpp_demangled),
	    cmocka_unit_test(test_extract_debuginfo),
	    cmocka_unit_test(test_garbage_is_not_elf),
	    cmocka_unit_test(test_hash_id_without_build_id),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
