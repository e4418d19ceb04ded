/*
 * test_perfmap.c — unit tests for the perf-map parser and table
 * (src/agent/perfmap.c): the line format and what it rejects, later
 * entries winning, a file fed as it grows (partial lines, over-long
 * lines), the per-table and shared caps; and for the reader
 * (perfmap_reader.c): which mappings count as JIT code, and reading a
 * process's file in a fake /proc (only the appended part, a replaced or
 * shrunk file from scratch, names kept when it vanishes, symlinks, FIFOs
 * and foreign files refused, paths resolved inside the process's root).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/perfmap.h"

static size_t feed_str(struct perfmap *pm, const char *s, struct perfmap_feed_stats *st)
{
	return perfmap_feed(pm, s, strlen(s), st);
}

static void test_parse_line_formats(void **state)
{
	struct perfmap_line l;
	const char *why = NULL;
	/* Node, with a name holding blanks and a colon. */
	const char *node = "7f0ab67c6180 2c4 JS:*kilnHotArith /tmp/hot.js:1:22";
	/* HotSpot's Compiler.perfmap writes 0x prefixes; .NET upper case. */
	const char *java = "0x00007f1234560000 0x1a0 java.lang.String::hashCode()\r";
	const char *dotnet = "7F1234560000 1A0 [OptimizedTier1] Program::Main()";

	(void)state;
	assert_true(perfmap_parse_line(node, strlen(node), &l, &why));
	assert_int_equal(l.start, 0x7f0ab67c6180ull);
	assert_int_equal(l.size, 0x2c4);
	assert_int_equal(l.name_len, strlen("JS:*kilnHotArith /tmp/hot.js:1:22"));
	assert_memory_equal(l.name, "JS:*kilnHotArith /tmp/hot.js:1:22", l.name_len);
	assert_true(perfmap_parse_line(java, strlen(java), &l, &why));
	assert_int_equal(l.start, 0x7f1234560000ull);
	assert_int_equal(l.size, 0x1a0);
	assert_int_equal(l.name_len, strlen("java.lang.String::hashCode()")); /* no \r */
	assert_true(perfmap_parse_line(dotnet, strlen(dotnet), &l, &why));
	assert_int_equal(l.start, 0x7f1234560000ull);
	assert_memory_equal(l.name, "[OptimizedTier1] Program::Main()", l.name_len);
}

static void test_parse_line_rejects_garbage(void **state)
{
	static const struct {
		const char *line, *why;
	} bad[] = {
	    {"", "start is not a hex number"},
	    {"hello world", "start is not a hex number"},
	    {"1000", "no blank after start"},
	    {"1000x 10 f", "no blank after start"},
	    {"1000 zz f", "size is not a hex number"},
	    {"1000 10", "no blank after size"},
	    {"1000 10 ", "no name"},
	    {"1000 0 f", "size is zero"},
	    {"ffffffffffffffff 2 f", "start + size wraps around"},
	    {"10000000000000000 2 f", "start is not a hex number"}, /* 17 digits */
	    {"1000 10 a\x01b", "name is not printable UTF-8"},
	    {"1000 10 \xc3(", "name is not printable UTF-8"},
	    {"1000 10 \xed\xa0\x80", "name is not printable UTF-8"}, /* surrogate */
	    {"1000 10 \xc0\xaf", "name is not printable UTF-8"},     /* overlong */
	};
	struct perfmap_line l;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		if (perfmap_parse_line(bad[i].line, strlen(bad[i].line), &l, &why))
			fail_msg("accepted \"%s\"", bad[i].line);
		assert_string_equal(why, bad[i].why);
	}
	/* A name with a NUL inside is garbage too. */
	{
		const char nul[] = "1000 10 a\0b";
		const char *why = NULL;

		assert_false(perfmap_parse_line(nul, sizeof(nul) - 1, &l, &why));
	}
	/* UTF-8 names are fine. */
	{
		const char *ok = "1000 10 \xc3\xa9t\xc3\xa9 \xf0\x9f\x94\xa5";
		const char *why = NULL;

		assert_true(perfmap_parse_line(ok, strlen(ok), &l, &why));
	}
}

static void test_lookup_and_later_wins(void **state)
{
	struct perfmap_feed_stats st = {0};
	struct perfmap *pm = perfmap_new(NULL);

	(void)state;
	assert_non_null(pm);
	assert_null(perfmap_lookup(pm, 0x1000));
	feed_str(pm,
		 "3000 100 gamma\n"
		 "1000 100 alpha\n"
		 "2000 80 beta\n",
		 &st);
	assert_int_equal(st.symbols_added, 3);
	assert_int_equal(perfmap_count(pm), 3);
	assert_string_equal(perfmap_lookup(pm, 0x1000), "alpha");
	assert_string_equal(perfmap_lookup(pm, 0x10ff), "alpha");
	assert_null(perfmap_lookup(pm, 0x1100));
	assert_null(perfmap_lookup(pm, 0xfff));
	assert_string_equal(perfmap_lookup(pm, 0x207f), "beta");
	assert_null(perfmap_lookup(pm, 0x2080));
	assert_string_equal(perfmap_lookup(pm, 0x3050), "gamma");
	/* Code replaced at the same address: the later line wins, and the
	 * table does not grow. */
	feed_str(pm, "1000 40 alpha2\n", &st);
	assert_int_equal(perfmap_count(pm), 3);
	assert_string_equal(perfmap_lookup(pm, 0x1000), "alpha2");
	assert_null(perfmap_lookup(pm, 0x1050)); /* the new code is shorter */
	/* New code over part of older code, at another start: it wins where
	 * it lies, the older one still names the rest. */
	feed_str(pm, "3080 100 delta\n", &st);
	assert_string_equal(perfmap_lookup(pm, 0x3050), "gamma");
	assert_string_equal(perfmap_lookup(pm, 0x3090), "delta");
	assert_string_equal(perfmap_lookup(pm, 0x3170), "delta");
	/* An older, larger entry under a newer small one inside it. */
	feed_str(pm, "8000 1000 big\n8100 10 small\n", &st);
	assert_string_equal(perfmap_lookup(pm, 0x8105), "small");
	assert_string_equal(perfmap_lookup(pm, 0x8200), "big");
	assert_string_equal(perfmap_lookup(pm, 0x80ff), "big");
	/* ... and the other way round: a later big one hides an older small
	 * one. */
	feed_str(pm, "a100 10 small2\na000 1000 big2\n", &st);
	assert_string_equal(perfmap_lookup(pm, 0xa105), "big2");
	assert_int_equal(st.lines_rejected, 0);
	perfmap_free(pm);
}

static void test_feed_as_file_grows(void **state)
{
	struct perfmap_feed_stats st = {0};
	struct perfmap *pm = perfmap_new(NULL);
	const char *part1 = "1000 10 one\n2000 10 tw";
	size_t used;

	(void)state;
	/* A line still being written is left for the next feed. */
	used = feed_str(pm, part1, &st);
	assert_int_equal(used, strlen("1000 10 one\n"));
	assert_int_equal(perfmap_count(pm), 1);
	used = feed_str(pm, "2000 10 two\n", &st);
	assert_int_equal(used, strlen("2000 10 two\n"));
	assert_string_equal(perfmap_lookup(pm, 0x2000), "two");
	/* Garbage is counted, the first one described, good lines around it
	 * kept; blank lines are harmless. */
	feed_str(pm, "garbage\n\n3000 10 three\n4000 zz four\n", &st);
	assert_int_equal(st.lines_rejected, 2);
	assert_string_equal(perfmap_first_error(pm), "line 3: start is not a hex number");
	assert_string_equal(perfmap_lookup(pm, 0x3000), "three");
	assert_int_equal(perfmap_count(pm), 3);
	/* Cleared (the file was replaced): empty, numbering from 1 again. */
	perfmap_clear(pm);
	assert_int_equal(perfmap_count(pm), 0);
	assert_int_equal(perfmap_bytes(pm), 0);
	assert_string_equal(perfmap_first_error(pm), "");
	feed_str(pm, "x\n", &st);
	assert_string_equal(perfmap_first_error(pm), "line 1: start is not a hex number");
	perfmap_free(pm);
}

static void test_feed_over_long_line(void **state)
{
	struct perfmap_feed_stats st = {0};
	struct perfmap *pm = perfmap_new(NULL);
	size_t n = PERFMAP_LINE_MAX + 100, used;
	char *junk = malloc(n);

	(void)state;
	assert_non_null(junk);
	memset(junk, 'a', n);
	/* No newline in sight and longer than any line: consumed as one
	 * rejected line, and its rest skipped up to its newline. */
	used = perfmap_feed(pm, junk, n, &st);
	assert_int_equal(used, n);
	assert_int_equal(st.lines_rejected, 1);
	used = feed_str(pm, "aaaa 10 not-a-line\n5000 10 five\n", &st);
	assert_int_equal(used, strlen("aaaa 10 not-a-line\n5000 10 five\n"));
	assert_int_equal(st.lines_rejected, 1);
	assert_null(perfmap_lookup(pm, 0xaaaa));
	assert_string_equal(perfmap_lookup(pm, 0x5000), "five");
	/* A complete line that is too long is rejected too. */
	memcpy(junk, "6000 10 ", 8);
	junk[n - 1] = '\n';
	used = perfmap_feed(pm, junk, n, &st);
	assert_int_equal(used, n);
	assert_int_equal(st.lines_rejected, 2);
	assert_null(perfmap_lookup(pm, 0x6000));
	free(junk);
	perfmap_free(pm);
}

static void test_caps_drop_and_count(void **state)
{
	struct perfmap_budget budget = {.limit = 4096};
	struct perfmap_feed_stats st = {0};
	struct perfmap *a = perfmap_new(&budget), *b = perfmap_new(&budget);
	char line[64];
	size_t added_a;

	(void)state;
	/* The shared budget fills up: later lines are dropped, counted, and
	 * what is loaded stays. */
	for (unsigned i = 0; i < 200; i++) {
		snprintf(line, sizeof(line), "%x 10 fn_%u\n", 0x10000 + i * 0x10, i);
		feed_str(a, line, &st);
	}
	added_a = st.symbols_added;
	assert_true(added_a > 10 && added_a < 200);
	assert_int_equal(st.symbols_added + st.symbols_dropped, 200);
	assert_true(budget.used <= budget.limit);
	assert_int_equal(budget.used, perfmap_bytes(a));
	assert_string_equal(perfmap_lookup(a, 0x10000), "fn_0");
	/* Another table gets nothing while the first holds the budget ... */
	feed_str(b, "1000 10 other\n", &st);
	assert_null(perfmap_lookup(b, 0x1000));
	/* ... and what the first gives back is free again. */
	perfmap_free(a);
	assert_int_equal(budget.used, perfmap_bytes(b));
	feed_str(b, "1000 10 other\n", &st);
	assert_string_equal(perfmap_lookup(b, 0x1000), "other");
	perfmap_free(b);
	assert_int_equal(budget.used, 0);
}

static void test_per_table_cap(void **state)
{
	struct perfmap_budget budget = {.limit = SIZE_MAX / 2};
	struct perfmap_feed_stats st = {0};
	struct perfmap *pm = perfmap_new(&budget);
	size_t len = 0, cap = 64u << 20;
	char *text = malloc(cap);
	unsigned i = 0;

	(void)state;
	assert_non_null(text);
	/* More than PERFMAP_PROC_MAX_BYTES of valid lines. */
	while (len + 300 < cap) {
		len += (size_t)snprintf(text + len, cap - len, "%x 10 %0200u\n",
					0x100000 + i * 0x10, i);
		i++;
	}
	assert_int_equal(perfmap_feed(pm, text, len, &st), len);
	assert_true(st.symbols_dropped > 0);
	assert_true(perfmap_bytes(pm) <= PERFMAP_PROC_MAX_BYTES);
	assert_int_equal(budget.used, perfmap_bytes(pm));
	assert_int_equal(st.symbols_added + st.symbols_dropped, i);
	free(text);
	perfmap_free(pm);
	assert_int_equal(budget.used, 0);
}

static void test_jit_regions(void **state)
{
	struct proc_mapping anon = {.path = ""}, file = {.path = "/usr/bin/node"},
			    memfd = {.path = "/memfd:doublemapper (deleted)"},
			    vdso = {.path = "[vdso]"}, named = {.path = "[anon:v8]"};

	(void)state;
	assert_true(perfmap_jit_region(NULL));
	assert_true(perfmap_jit_region(&anon));
	assert_true(perfmap_jit_region(&memfd));
	assert_true(perfmap_jit_region(&named));
	assert_false(perfmap_jit_region(&file));
	assert_false(perfmap_jit_region(&vdso));
}

static void write_file(const char *path, const char *text, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A fake /proc with pid 4242 (7 in its own namespace) whose root is
 * dir/root; a sample with one user frame in no mapping (JIT code). */
struct reader_fixture {
	char dir[64], proc[96], map[160], tmp[128];
	struct perfmap_metrics m;
	struct perfmap_registry *r;
	struct proc_info *p;
	struct sample_event *e;
	uint64_t now;
};

static void fixture_read(struct reader_fixture *f)
{
	/* Past any back-off (a minute at most). */
	f->now += 100ull * 1000000000;
	perfmap_note_sample(f->r, f->p, f->e, f->now);
}

static const char *name_at(struct reader_fixture *f, uint64_t addr)
{
	const char *file = NULL, *name = perfmap_proc_lookup(f->p, addr, &file);

	if (name)
		assert_string_equal(file, "/tmp/perf-7.map");
	return name;
}

static unsigned long long failures(struct reader_fixture *f, enum perfmap_failure why)
{
	return (unsigned long long)atomic_load(&f->m.failures[why]);
}

static void test_reader_follows_the_file(void **state)
{
	struct reader_fixture f = {0};
	char path[256], status[128];

	(void)state;
	snprintf(f.dir, sizeof(f.dir), "/tmp/kiln-perfmap-XXXXXX");
	assert_non_null(mkdtemp(f.dir));
	snprintf(f.proc, sizeof(f.proc), "%s/proc", f.dir);
	assert_int_equal(mkdir(f.proc, 0755), 0);
	snprintf(path, sizeof(path), "%s/4242", f.proc);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/4242/status", f.proc);
	snprintf(status, sizeof(status), "Name:\tjit\nUid:\t%u\t%u\t%u\t%u\nNSpid:\t4242\t7\n",
		 getuid(), getuid(), getuid(), getuid());
	write_file(path, status, O_TRUNC);
	snprintf(path, sizeof(path), "%s/root", f.dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(f.tmp, sizeof(f.tmp), "%s/root/tmp", f.dir);
	assert_int_equal(mkdir(f.tmp, 0755), 0);
	snprintf(path, sizeof(path), "%s/4242/root", f.proc);
	snprintf(status, sizeof(status), "%s/root", f.dir);
	assert_int_equal(symlink(status, path), 0);
	snprintf(f.map, sizeof(f.map), "%s/perf-7.map", f.tmp);

	f.r = perfmap_registry_new(f.proc, 1 << 20, &f.m);
	f.p = calloc(1, sizeof(*f.p));
	f.e = calloc(1, sizeof(*f.e));
	assert_non_null(f.r);
	assert_non_null(f.p);
	assert_non_null(f.e);
	f.p->pid = 4242;
	f.p->cached = true;
	f.e->pid = 4242;
	f.e->n_user = 1;
	f.e->frames[0] = 0x7f0000001000ull;

	/* No file yet: counted, nothing named. */
	fixture_read(&f);
	assert_int_equal(failures(&f, PERFMAP_FAIL_NOT_FOUND), 1);
	assert_null(name_at(&f, 0x7f0000001000ull));
	/* The file, as the runtime writes it: a last line not finished. */
	write_file(f.map, "7f0000001000 100 first\n7f0000002000 100 sec", O_TRUNC);
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "first");
	assert_null(name_at(&f, 0x7f0000002000ull));
	/* Not again within a second of a read ... */
	write_file(f.map, "ond\n", O_APPEND);
	perfmap_note_sample(f.r, f.p, f.e, f.now + 500000000);
	assert_null(name_at(&f, 0x7f0000002000ull));
	/* ... then the appended part, the unfinished line whole. */
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000002000ull), "second");
	assert_int_equal(atomic_load(&f.m.symbols), 2);
	/* Shorter than what was read (truncated and rewritten): from
	 * scratch. */
	write_file(f.map, "7f0000001000 80 short\n", O_TRUNC);
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "short");
	assert_null(name_at(&f, 0x7f0000002000ull));
	/* Replaced by another file (another inode) of the same size or
	 * more: from scratch too. */
	snprintf(path, sizeof(path), "%s/new", f.tmp);
	write_file(path, "7f0000001000 80 renamed\n7f0000004000 10 four\n", O_TRUNC);
	assert_int_equal(rename(path, f.map), 0);
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "renamed");
	assert_string_equal(name_at(&f, 0x7f0000004000ull), "four");
	assert_int_equal(atomic_load(&f.m.symbols), 2);
	/* Gone: the names stay (the code may still run). */
	assert_int_equal(unlink(f.map), 0);
	fixture_read(&f);
	assert_int_equal(failures(&f, PERFMAP_FAIL_NOT_FOUND), 2);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "renamed");
	/* A symlink, even to a perf map the process could read: refused. */
	snprintf(path, sizeof(path), "%s/other", f.tmp);
	write_file(path, "7f0000001000 80 via_link\n", O_TRUNC);
	assert_int_equal(symlink(path, f.map), 0);
	fixture_read(&f);
	assert_int_equal(failures(&f, PERFMAP_FAIL_SYMLINK), 1);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "renamed");
	assert_int_equal(unlink(f.map), 0);
	assert_int_equal(unlink(path), 0);
	/* A FIFO: refused without blocking (no writer ever comes). */
	assert_int_equal(mkfifo(f.map, 0600), 0);
	fixture_read(&f);
	assert_int_equal(failures(&f, PERFMAP_FAIL_NOT_REGULAR), 1);
	assert_int_equal(unlink(f.map), 0);
	/* Another user's file. */
	if (getuid() == 0) {
		write_file(f.map, "7f0000001000 80 foreign\n", O_TRUNC);
		assert_int_equal(chown(f.map, 65534, 65534), 0);
		fixture_read(&f);
		assert_int_equal(failures(&f, PERFMAP_FAIL_OWNER), 1);
		assert_string_equal(name_at(&f, 0x7f0000001010ull), "renamed");
		assert_int_equal(unlink(f.map), 0);
	}
	/* The process's /tmp is an absolute symlink: it is followed inside
	 * the process's root, never on the host. */
	assert_int_equal(rmdir(f.tmp), 0);
	snprintf(path, sizeof(path), "%s/root/elsewhere", f.dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(symlink("/elsewhere", f.tmp), 0);
	snprintf(path, sizeof(path), "%s/root/elsewhere/perf-7.map", f.dir);
	write_file(path, "7f0000001000 80 inside_root\n", O_TRUNC);
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "inside_root");

	/* An exited process is not read again (its pid may be another's). */
	f.p->exited_ns = f.now;
	write_file(path, "7f0000001000 80 later\n", O_TRUNC);
	fixture_read(&f);
	assert_string_equal(name_at(&f, 0x7f0000001010ull), "inside_root");

	proc_info_free(f.p);
	assert_int_equal(atomic_load(&f.m.symbols), 0);
	assert_int_equal(atomic_load(&f.m.bytes), 0);
	perfmap_registry_free(f.r);
	free(f.e);
	snprintf(path, sizeof(path), "rm -rf '%s'", f.dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_line_formats),
	    cmocka_unit_test(test_parse_line_rejects_garbage),
	    cmocka_unit_test(test_lookup_and_later_wins),
	    cmocka_unit_test(test_feed_as_file_grows),
	    cmocka_unit_test(test_feed_over_long_line),
	    cmocka_unit_test(test_caps_drop_and_count),
	    cmocka_unit_test(test_per_table_cap),
	    cmocka_unit_test(test_jit_regions),
	    cmocka_unit_test(test_reader_follows_the_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
