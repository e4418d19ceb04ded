/*
 * test_agent.c — unit tests for the agent's pure parts: /proc/PID/maps
 * parsing, cgroup -> labels, label lists, kallsyms lookup, kernel names on
 * demand (and the BPF symbolizer against /proc/kallsyms), build-ID
 * reading, the kernel's mmap records and what they give a process gone
 * before it was read, and a window turned into a pprof profile.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "pprof/pprof.h"

#include <libdeflate.h>

static const char maps_text[] =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234    /usr/bin/my app\n"
    "55d0c0a02000-55d0c0a08000 r-xp 00002000 fd:01 1234    /usr/bin/my app\n"
    "55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0       [heap]\n"
    "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
    "7f1234500000-7f1234528000 r--p 00000000 fd:01 99      /usr/lib/libc.so.6\n"
    "7f1234528000-7f123467d000 r-xp 00028000 fd:01 99      /usr/lib/libc.so.6 (deleted)\n"
    "7ffd1b3f0000-7ffd1b3f2000 r-xp 00000000 00:00 0       [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]\n";

static void test_procmaps_keeps_code_mappings(void **state)
{
	struct proc_maps m = {0};
	const struct proc_mapping *e;

	(void)state;
	assert_int_equal(procmaps_parse(maps_text, strlen(maps_text), &m, NULL), 0);
	assert_int_equal(m.n, 5);
	assert_string_equal(m.v[0].path, "/usr/bin/my app");
	assert_int_equal(m.v[0].start, 0x55d0c0a02000ull);
	assert_int_equal(m.v[0].limit, 0x55d0c0a08000ull);
	assert_int_equal(m.v[0].offset, 0x2000);
	assert_int_equal(m.v[0].inode, 1234);
	assert_int_equal(m.v[0].dev_major, 0xfd);
	assert_string_equal(m.v[1].path, ""); /* anonymous JIT-style code */
	assert_string_equal(m.v[2].path, "/usr/lib/libc.so.6 (deleted)");
	assert_string_equal(m.v[3].path, "[vdso]");
	assert_string_equal(m.v[4].path, "[vsyscall]");

	e = procmaps_find(&m, 0x7f1234530000ull);
	assert_non_null(e);
	assert_int_equal(e->offset, 0x28000);
	assert_null(procmaps_find(&m, 0x55d0c0a01000ull)); /* not code */
	assert_null(procmaps_find(&m, 0x55d0c0a08000ull)); /* limit is exclusive */
	assert_non_null(procmaps_find(&m, 0xffffffffff600100ull));
	procmaps_free(&m);
}

static void test_procmaps_rejects_garbage(void **state)
{
	struct proc_maps m = {0};
	struct kiln_error err = {0};
	const char bad[] = "55d0c0a00000-55d0c0a02000 r-xp 0 fd:01 1 /a\nnot a maps line\n";

	(void)state;
	assert_int_equal(procmaps_parse(bad, strlen(bad), &m, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 2"));
	procmaps_free(&m);
	/* A line cut short (no inode) is not a maps line either. */
	kiln_error_clear(&err);
	assert_int_equal(procmaps_parse("1000-2000 r-xp 0 fd:01\n", 23, &m, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 1"));
	procmaps_free(&m);
}

/* Our own maps, as the kernel prints them: the code of this function is
 * in a mapping of this executable. */
static void test_procmaps_of_self(void **state)
{
	struct proc_maps m = {0};
	struct buf b;
	const struct proc_mapping *e;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	(void)state;
	assert_true(n > 0);
	exe[n] = '\0';
	buf_init(&b);
	assert_int_equal(buf_read_file(&b, "/proc/self/maps", 64 << 20), 0);
	assert_int_equal(procmaps_parse((const char *)b.data, b.len, &m, NULL), 0);
	e = procmaps_find(&m, (uint64_t)(uintptr_t)&test_procmaps_of_self);
	assert_non_null(e);
	assert_string_equal(e->path, exe);
	assert_true(e->inode != 0);
	procmaps_free(&m);
	buf_free(&b);
}

/* PROCMAP_QUERY gives the code mappings the text gives, field for field
 * ([vsyscall] aside: not a VMA of the process; the cache adds it). The
 * test kernel has the ioctl (6.11+); an older one must say so. */
static void test_procmaps_query_matches_text(void **state)
{
	struct proc_maps q = {0}, t = {0};
	struct buf b;
	size_t j = 0;
	int fd;

	(void)state;
	buf_init(&b);
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(procmaps_query(fd, &q), 0);
	/* One address: code here, none on the stack. */
	assert_int_equal(procmaps_query_addr(fd, (uint64_t)(uintptr_t)&test_procmaps_of_self), 0);
	assert_int_equal(procmaps_query_addr(fd, (uint64_t)(uintptr_t)&fd), -ENOENT);
	close(fd);
	assert_int_equal(buf_read_file(&b, "/proc/self/maps", 64 << 20), 0);
	assert_int_equal(procmaps_parse((const char *)b.data, b.len, &t, NULL), 0);
	assert_true(q.n >= 2);
	for (size_t i = 0; i < t.n; i++) {
		if (strcmp(t.v[i].path, "[vsyscall]") == 0)
			continue;
		assert_true(j < q.n);
		assert_int_equal(q.v[j].start, t.v[i].start);
		assert_int_equal(q.v[j].limit, t.v[i].limit);
		assert_int_equal(q.v[j].offset, t.v[i].offset);
		assert_int_equal(q.v[j].inode, t.v[i].inode);
		assert_int_equal(q.v[j].dev_major, t.v[i].dev_major);
		assert_int_equal(q.v[j].dev_minor, t.v[i].dev_minor);
		assert_string_equal(q.v[j].path, t.v[i].path);
		j++;
	}
	assert_int_equal(j, q.n);
	procmaps_free(&q);
	procmaps_free(&t);
	buf_free(&b);
}

static void test_cgroup_path_choice(void **state)
{
	char out[256];

	(void)state;
	/* Pure v2. */
	assert_int_equal(
	    cgroup_path_from_proc("0::/system.slice/nginx.service\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/system.slice/nginx.service");
	/* Hybrid: v2 at the root, the systemd hierarchy knows the unit. */
	assert_int_equal(cgroup_path_from_proc("4:memory:/user.slice\n"
					       "1:name=systemd:/system.slice/cron.service\n"
					       "0::/\n",
					       out, sizeof(out)),
			 0);
	assert_string_equal(out, "/system.slice/cron.service");
	/* v1 only: the first non-root controller path. */
	assert_int_equal(
	    cgroup_path_from_proc("3:cpuset:/\n2:cpu,cpuacct:/docker/abc\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/docker/abc");
	assert_int_equal(cgroup_path_from_proc("0::/\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/");
	/* A ':' inside the path survives. */
	assert_int_equal(cgroup_path_from_proc("0::/a:b\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/a:b");
}

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void expect_derive(const char *path, const char *unit, const char *id)
{
	char u[256], c[80];

	cgroup_derive(path, u, sizeof(u), c, sizeof(c));
	assert_string_equal(u, unit);
	assert_string_equal(c, id);
}

static void test_cgroup_derive_patterns(void **state)
{
	(void)state;
	expect_derive("/system.slice/nginx.service", "nginx.service", "");
	expect_derive("/user.slice/user-1000.slice/session-2.scope", "session-2.scope", "");
	expect_derive("/docker/" ID64, "", ID64);
	expect_derive("/system.slice/docker-" ID64 ".scope", "docker-" ID64 ".scope", ID64);
	expect_derive("/kubepods/burstable/pod1234-5678/" ID64, "", ID64);
	expect_derive("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12.slice/"
		      "cri-containerd-" ID64 ".scope",
		      "cri-containerd-" ID64 ".scope", ID64);
	expect_derive("/kubepods.slice/kubepods-pod1.slice/crio-" ID64 ".scope",
		      "crio-" ID64 ".scope", ID64);
	expect_derive("/machine.slice/libpod-" ID64 ".scope/container", "libpod-" ID64 ".scope",
		      ID64);
	expect_derive("/", "", "");
	expect_derive("/docker/0123", "", ""); /* too short to be an id */
}

static void test_labels_set_sorted_and_parse(void **state)
{
	struct agent_labels l = {0};
	struct kiln_error err = {0};

	(void)state;
	assert_int_equal(labels_parse_list(&l, "zone=a,env=prod, team=kiln", &err), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.v[0].name, "env");
	assert_string_equal(l.v[2].name, "zone");
	assert_int_equal(labels_set(&l, "env", "dev"), 0);
	assert_string_equal(labels_get(&l, "env"), "dev");
	assert_int_equal(labels_set(&l, "env", ""), 0); /* empty removes */
	assert_null(labels_get(&l, "env"));
	assert_int_equal(l.n, 2);
	assert_int_equal(labels_parse_list(&l, "9x=1", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "9x"));
	kiln_error_clear(&err);
	assert_int_equal(labels_parse_list(&l, "novalue", &err), -EINVAL);
	assert_false(agent_label_name_valid("__name__"));
	assert_true(agent_label_name_valid("_ok1"));
	labels_free(&l);
}

static void test_kallsyms_lookup_with_modules(void **state)
{
	char path[] = "/tmp/kiln-kallsyms-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct kallsyms *k = NULL;
	struct kiln_error err = {0};
	const char *name, *module;
	uint64_t start;

	(void)state;
	fprintf(f, "ffffffff81000000 T _stext\n"
		   "ffffffff81000100 t do_one\n"
		   "ffffffff81000200 D some_data\n"
		   "ffffffff81000300 W weak_fn\n"
		   "ffffffffc0001000 t ext4_read\t[ext4]\n"
		   "ffffffffc0002000 t nf_hook\t[nf_tables]\n");
	fclose(f);
	assert_int_equal(kallsyms_load(path, &k, &err), 0);
	assert_int_equal(kallsyms_count(k), 5); /* data symbols skipped */
	assert_true(kallsyms_lookup(k, 0xffffffff81000150ull, &name, &module, &start));
	assert_string_equal(name, "do_one");
	assert_string_equal(module, "");
	assert_int_equal(start, 0xffffffff81000100ull);
	/* Past a data symbol, the text symbol before it still owns the address. */
	assert_true(kallsyms_lookup(k, 0xffffffff81000250ull, &name, &module, NULL));
	assert_string_equal(name, "do_one");
	assert_true(kallsyms_lookup(k, 0xffffffffc0001010ull, &name, &module, NULL));
	assert_string_equal(name, "ext4_read");
	assert_string_equal(module, "ext4");
	assert_true(kallsyms_lookup(k, 0xffffffffc0002001ull, &name, &module, NULL));
	assert_string_equal(module, "nf_tables");
	assert_false(kallsyms_lookup(k, 0xffffffff80000000ull, &name, &module, NULL));
	kallsyms_free(k);

	/* kptr_restrict: every address reads 0. */
	f = fopen(path, "w");
	fprintf(f, "0000000000000000 T _stext\n0000000000000000 t do_one\n");
	fclose(f);
	assert_int_equal(kallsyms_load(path, &k, &err), -EPERM);
	assert_non_null(strstr(err.msg, "kptr_restrict"));

	/* Bigger than one read, last line without a newline: every line is
	 * seen once, whichever read it straddles. */
	f = fopen(path, "w");
	for (unsigned i = 0; i < 40000; i++)
		fprintf(f, "%016llx T function_number_%u%s", 0xffffffff81000000ull + 16ull * i, i,
			i + 1 < 40000 ? "\n" : "");
	fclose(f);
	assert_int_equal(kallsyms_load(path, &k, &err), 0);
	assert_int_equal(kallsyms_count(k), 40000);
	for (unsigned i = 0; i < 40000; i += 997) {
		char want[64];

		snprintf(want, sizeof(want), "function_number_%u", i);
		assert_true(kallsyms_lookup(k, 0xffffffff81000000ull + 16ull * i + 3, &name,
					    &module, NULL));
		assert_string_equal(name, want);
	}
	assert_true(
	    kallsyms_lookup(k, 0xffffffff81000000ull + 16ull * 39999, &name, &module, NULL));
	assert_string_equal(name, "function_number_39999");
	kallsyms_free(k);
	unlink(path);
}

static void test_ksym_parse_forms(void **state)
{
	char name[KSYM_NAME_LEN], module[64];

	(void)state;
	assert_true(ksym_parse("vfs_read+0x1a/0x40", name, sizeof(name), module, sizeof(module)));
	assert_string_equal(name, "vfs_read");
	assert_string_equal(module, "");
	assert_true(ksym_parse("ext4_file_read_iter+0x0/0x100 [ext4]", name, sizeof(name), module,
			       sizeof(module)));
	assert_string_equal(name, "ext4_file_read_iter");
	assert_string_equal(module, "ext4");
	assert_true(ksym_parse("bpf_prog_6deef7357e7b4530_sd_fw+0x10/0x80 [bpf]", name,
			       sizeof(name), module, sizeof(module)));
	assert_string_equal(name, "bpf_prog_6deef7357e7b4530_sd_fw");
	assert_string_equal(module, "bpf");
	assert_true(ksym_parse("copy_page.constprop.0+0x3/0x9", name, sizeof(name), module,
			       sizeof(module)));
	assert_string_equal(name, "copy_page.constprop.0");
	/* No symbol: the kernel prints the bare address. */
	assert_false(ksym_parse("0xffffffffc0123456", name, sizeof(name), module, sizeof(module)));
	/* Cut short by the buffer: nothing is trusted. */
	assert_false(
	    ksym_parse("ext4_read+0x0/0x10 [ex", name, sizeof(name), module, sizeof(module)));
	assert_false(ksym_parse("some_very_long_na", name, sizeof(name), module, sizeof(module)));
	assert_false(ksym_parse("vfs_read+0x1a/0x40", name, 4, module, sizeof(module)));
}

/* A stand-in for the BPF symbolize program: names every address below
 * 0xffffffffc0000000 "fn_<hex>" in the core kernel and the rest as module
 * code, leaves 0xffffffffffff0000 and above unnamed, and counts calls. */
struct fake_ksyms {
	int calls;
	size_t asked;
	char names[KSYM_BATCH][KSYM_NAME_LEN];
};

static int fake_batch(void *ctx, const uint64_t *addrs, size_t n,
		      const char (**names)[KSYM_NAME_LEN])
{
	struct fake_ksyms *f = ctx;

	assert_true(n >= 1 && n <= KSYM_BATCH);
	f->calls++;
	f->asked += n;
	for (size_t i = 0; i < n; i++) {
		if (addrs[i] >= 0xffffffffffff0000ull)
			snprintf(f->names[i], KSYM_NAME_LEN, "0x%llx",
				 (unsigned long long)addrs[i]);
		else if (addrs[i] >= 0xffffffffc0000000ull)
			snprintf(f->names[i], KSYM_NAME_LEN, "mod_%llx+0x0/0x1 [mymod]",
				 (unsigned long long)addrs[i]);
		else
			snprintf(f->names[i], KSYM_NAME_LEN, "fn_%llx+0x2/0x10",
				 (unsigned long long)addrs[i]);
	}
	*names = (const char(*)[KSYM_NAME_LEN])f->names;
	return (int)n;
}

static void test_ksym_cache_names_on_demand(void **state)
{
	struct fake_ksyms fake = {0};
	struct ksym_cache *c = ksym_cache_new(fake_batch, &fake);
	const char *name, *module;
	char want[64];

	(void)state;
	assert_non_null(c);
	/* 70 distinct addresses, each wanted twice: three batched calls. */
	for (int round = 0; round < 2; round++)
		for (uint64_t i = 0; i < 70; i++)
			assert_int_equal(ksym_cache_want(c, 0xffffffff81000000ull + i * 16), 0);
	assert_int_equal(ksym_cache_want(c, 0xffffffffc0001000ull), 0);
	assert_int_equal(ksym_cache_want(c, 0xffffffffffff1234ull), 0);
	assert_int_equal(ksym_cache_resolve(c), 0);
	assert_int_equal(fake.calls, 3);
	assert_int_equal(fake.asked, 72);
	assert_int_equal(ksym_cache_count(c), 72);
	assert_true(ksym_cache_lookup(c, 0xffffffff81000000ull + 69 * 16, &name, &module));
	snprintf(want, sizeof(want), "fn_%llx", 0xffffffff81000000ull + 69 * 16);
	assert_string_equal(name, want);
	assert_string_equal(module, "");
	assert_true(ksym_cache_lookup(c, 0xffffffffc0001000ull, &name, &module));
	assert_string_equal(module, "mymod");
	assert_false(ksym_cache_lookup(c, 0xffffffffffff1234ull, &name, &module)); /* no symbol */
	assert_false(ksym_cache_lookup(c, 0xffffffff90000000ull, &name, &module)); /* not asked */
	/* Known addresses are not asked again; nothing new: no call. */
	assert_int_equal(ksym_cache_want(c, 0xffffffff81000000ull), 0);
	assert_int_equal(ksym_cache_want(c, 0xffffffffffff1234ull), 0);
	assert_int_equal(ksym_cache_resolve(c), 0);
	assert_int_equal(fake.calls, 3);
	/* After a clear, names are asked for again. */
	ksym_cache_clear(c);
	assert_false(ksym_cache_lookup(c, 0xffffffff81000000ull, &name, &module));
	assert_int_equal(ksym_cache_want(c, 0xffffffff81000000ull), 0);
	assert_int_equal(ksym_cache_resolve(c), 0);
	assert_int_equal(fake.calls, 4);
	assert_true(ksym_cache_lookup(c, 0xffffffff81000000ull, &name, &module));
	ksym_cache_free(c);
}

/* The fallback: the same cache answering from a /proc/kallsyms table. */
static void test_ksym_cache_from_table(void **state)
{
	char path[] = "/tmp/kiln-kallsyms-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct kallsyms *k = NULL;
	struct kiln_error err = {0};
	struct ksym_cache *c = ksym_cache_new(NULL, NULL);
	const char *name, *module;

	(void)state;
	fprintf(f, "ffffffff81000000 T _stext\nffffffff81000100 t do_one\n"
		   "ffffffffc0001000 t ext4_read\t[ext4]\n");
	fclose(f);
	assert_int_equal(kallsyms_load(path, &k, &err), 0);
	unlink(path);
	ksym_cache_set_table(c, k);
	assert_int_equal(ksym_cache_want(c, 0xffffffff81000150ull), 0);
	assert_int_equal(ksym_cache_want(c, 0xffffffffc0001010ull), 0);
	assert_int_equal(ksym_cache_want(c, 0xffffffff80000000ull), 0);
	assert_int_equal(ksym_cache_resolve(c), 0);
	assert_true(ksym_cache_lookup(c, 0xffffffff81000150ull, &name, &module));
	assert_string_equal(name, "do_one");
	assert_true(ksym_cache_lookup(c, 0xffffffffc0001010ull, &name, &module));
	assert_string_equal(name, "ext4_read");
	assert_string_equal(module, "ext4");
	assert_false(ksym_cache_lookup(c, 0xffffffff80000000ull, &name, &module));
	ksym_cache_free(c);
}

/* Whether /proc/kallsyms lists name (in module, "" for the core kernel)
 * at addr: aliases share addresses, so any of them is a right answer. */
static bool kallsyms_has(uint64_t addr, const char *name, const char *module)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[1024];
	bool found = false;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, sym[512], mod[512] = "";

		if (sscanf(line, "%llx %c %511s [%511[^]]]", &a, &type, sym, mod) >= 3 && a == addr)
			found = strcmp(sym, name) == 0 && strcmp(mod, module) == 0;
	}
	fclose(f);
	return found;
}

/* The real thing (root, as the integration tests): the BPF symbolize
 * program names addresses as /proc/kallsyms lists them, module code
 * included, with the offset into the function. */
static void test_sampler_symbolize_matches_kallsyms(void **state)
{
	struct kiln_error err = {0};
	struct sampler *s = NULL;
	const char(*names)[KSYM_NAME_LEN];
	uint64_t addrs[KSYM_BATCH];
	char name[KSYM_NAME_LEN], module[KSYM_NAME_LEN], line[1024];
	size_t n = 0, nmod = 0;
	FILE *f;

	(void)state;
	/* Every 2000th text symbol (the core kernel and, if loaded, modules),
	 * asked about 1 byte in, as a return address would be. */
	f = fopen("/proc/kallsyms", "re");
	assert_non_null(f);
	for (size_t i = 0; n < KSYM_BATCH && fgets(line, sizeof(line), f); i++) {
		unsigned long long a;
		char type, sym[512], mod[512] = "";

		if (sscanf(line, "%llx %c %511s [%511[^]]]", &a, &type, sym, mod) < 3 || !a ||
		    (type != 't' && type != 'T'))
			continue;
		if (i % 2000 == 0 || (mod[0] && nmod < 4 && strcmp(mod, "bpf") != 0)) {
			nmod += mod[0] != '\0';
			addrs[n++] = a + 1;
		}
	}
	fclose(f);
	assert_true(n >= 8);
	assert_int_equal(sampler_open(19, 0, 0, NULL, NULL, &s, &err), 0);
	assert_true(sampler_can_symbolize(s));
	assert_int_equal(sampler_symbolize(s, addrs, n, &names), (int)n);
	for (size_t i = 0; i < n; i++) {
		assert_true(ksym_parse(names[i], name, sizeof(name), module, sizeof(module)));
		assert_non_null(strstr(names[i], "+0x1/"));
		if (!kallsyms_has(addrs[i] - 1, name, module))
			fail_msg("%s is not what /proc/kallsyms lists at %llx", names[i],
				 (unsigned long long)addrs[i] - 1);
	}
	sampler_close(s);
}

/* The build ID of our own executable, read from memory through the loader's
 * program headers: an independent path from buildid.c's libelf reading. */
static int find_note(struct dl_phdr_info *info, size_t size, void *data)
{
	char *hex = data;

	(void)size;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0; /* not the main program */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end;

		if (ph->p_type != PT_NOTE)
			continue;
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*nh);
			const unsigned char *desc =
			    (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);

			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0) {
				for (unsigned j = 0; j < nh->n_descsz; j++)
					sprintf(hex + 2 * j, "%02x", desc[j]);
				return 1;
			}
			p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

/* The load bias of the main program (the first object dl_iterate_phdr
 * reports). */
static int main_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(uint64_t *)arg = info->dlpi_addr;
	return 1;
}

static void test_buildid_matches_loaded_note(void **state)
{
	char want[256] = "", got[256] = "";
	struct buildid_cache *c = buildid_cache_new();

	(void)state;
	assert_int_equal(dl_iterate_phdr(find_note, want), 1);
	assert_true(strlen(want) >= 16);
	assert_int_equal(buildid_read_file("/proc/self/exe", got, sizeof(got)), 0);
	assert_string_equal(got, want);
	assert_string_equal(buildid_cache_get(c, "/proc/self/exe"), want);
	assert_string_equal(buildid_cache_get(c, "/proc/self/exe"), want); /* cached */
	assert_string_equal(buildid_cache_get(c, "/nonexistent/file"), "");
	assert_int_equal(buildid_read_file("/proc/self/cmdline", got, sizeof(got)), -ENOEXEC);
	buildid_cache_free(c);
}

/* Appends one ELF note (name "GNU") with descsz bytes 0x11, 0x12, ...
 * to buf at *off, padded to align. */
static void put_note(unsigned char *buf, size_t *off, uint32_t type, uint32_t descsz, size_t align)
{
	Elf64_Nhdr nh = {.n_namesz = 4, .n_descsz = descsz, .n_type = type};

	memcpy(buf + *off, &nh, sizeof(nh));
	*off += sizeof(nh);
	memcpy(buf + *off, "GNU", 4);
	*off += (4 + align - 1) & ~(align - 1);
	for (uint32_t i = 0; i < descsz; i++)
		buf[*off + i] = (unsigned char)(0x11 + i);
	*off += (descsz + align - 1) & ~(align - 1);
}

/* Fills e_ident of a little-endian ELF header of class cls (ELFCLASS32/64). */
static void set_ident(unsigned char *ident, unsigned char cls)
{
	memcpy(ident, ELFMAG, SELFMAG);
	ident[EI_CLASS] = cls;
	ident[EI_DATA] = ELFDATA2LSB;
	ident[EI_VERSION] = EV_CURRENT;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* Hand-made ELF files for each way to the build ID: a 32-bit PT_NOTE, a
 * 64-bit 8-aligned PT_NOTE behind another note, and a note only in the
 * section headers (libelf's part). The ID is bytes 0x11, 0x12, ... */
static void test_buildid_synthetic_elves(void **state)
{
	static const char want20[] = "1112131415161718191a1b1c1d1e1f2021222324";
	char path[] = "/tmp/kiln-elf-XXXXXX", got[256];
	unsigned char buf[1024];
	struct buildid_cache *c = buildid_cache_new();
	const struct elf_facts *f;
	size_t off;
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	/* ELF32: header, PT_LOAD (R X) and PT_NOTE, then the note. */
	{
		Elf32_Ehdr eh = {.e_type = ET_DYN,
				 .e_machine = EM_386,
				 .e_version = EV_CURRENT,
				 .e_phoff = sizeof(Elf32_Ehdr),
				 .e_ehsize = sizeof(Elf32_Ehdr),
				 .e_phentsize = sizeof(Elf32_Phdr),
				 .e_phnum = 2};
		Elf32_Phdr ph[2] = {
		    {.p_type = PT_LOAD,
		     .p_offset = 0,
		     .p_vaddr = 0x8048000,
		     .p_filesz = 0x200,
		     .p_flags = PF_R | PF_X,
		     .p_align = 0x1000},
		    {.p_type = PT_NOTE, .p_offset = 0x100, .p_filesz = 0, .p_align = 4}};

		memset(buf, 0, sizeof(buf));
		set_ident(eh.e_ident, ELFCLASS32);
		off = 0x100;
		put_note(buf, &off, NT_GNU_BUILD_ID, 20, 4);
		ph[1].p_filesz = off - 0x100;
		memcpy(buf, &eh, sizeof(eh));
		memcpy(buf + sizeof(eh), ph, sizeof(ph));
		write_bytes(path, buf, 0x200);
		assert_int_equal(buildid_read_file(path, got, sizeof(got)), 0);
		assert_string_equal(got, want20);
		f = buildid_cache_facts_mapped(c, path, 1, 2, 3);
		assert_string_equal(f->build_id, want20);
		assert_int_equal(f->type, ET_DYN);
		assert_int_equal(f->nloads, 1);
		assert_int_equal(f->loads[0].vaddr, 0x8048000);
		assert_int_equal(f->loads[0].flags, PF_R | PF_X);
	}
	/* ELF64: an 8-aligned PT_NOTE whose first note is another one. */
	{
		Elf64_Ehdr eh = {.e_type = ET_EXEC,
				 .e_machine = EM_X86_64,
				 .e_version = EV_CURRENT,
				 .e_phoff = sizeof(Elf64_Ehdr),
				 .e_ehsize = sizeof(Elf64_Ehdr),
				 .e_phentsize = sizeof(Elf64_Phdr),
				 .e_phnum = 1};
		Elf64_Phdr ph = {.p_type = PT_NOTE, .p_offset = 0x100, .p_align = 8};

		memset(buf, 0, sizeof(buf));
		set_ident(eh.e_ident, ELFCLASS64);
		off = 0x100;
		put_note(buf, &off, NT_GNU_PROPERTY_TYPE_0, 12, 8);
		put_note(buf, &off, NT_GNU_BUILD_ID, 8, 8);
		ph.p_filesz = off - 0x100;
		memcpy(buf, &eh, sizeof(eh));
		memcpy(buf + sizeof(eh), &ph, sizeof(ph));
		write_bytes(path, buf, 0x200);
		assert_int_equal(buildid_read_file(path, got, sizeof(got)), 0);
		assert_string_equal(got, "1112131415161718");
	}
	/* ELF64 with the note in a section only: no program headers at all. */
	{
		Elf64_Ehdr eh = {.e_type = ET_REL,
				 .e_machine = EM_X86_64,
				 .e_version = EV_CURRENT,
				 .e_shoff = 0x200,
				 .e_ehsize = sizeof(Elf64_Ehdr),
				 .e_shentsize = sizeof(Elf64_Shdr),
				 .e_shnum = 2};
		Elf64_Shdr sh[2] = {{0},
				    {.sh_type = SHT_NOTE, .sh_offset = 0x100, .sh_addralign = 4}};

		memset(buf, 0, sizeof(buf));
		set_ident(eh.e_ident, ELFCLASS64);
		off = 0x100;
		put_note(buf, &off, NT_GNU_BUILD_ID, 20, 4);
		sh[1].sh_size = off - 0x100;
		memcpy(buf, &eh, sizeof(eh));
		memcpy(buf + 0x200, sh, sizeof(sh));
		write_bytes(path, buf, 0x200 + sizeof(sh));
		assert_int_equal(buildid_read_file(path, got, sizeof(got)), 0);
		assert_string_equal(got, want20);
	}
	/* Not ELF; ELF without any build ID. */
	write_bytes(path, "#!/bin/sh\n", 10);
	assert_int_equal(buildid_read_file(path, got, sizeof(got)), -ENOEXEC);
	{
		Elf64_Ehdr eh = {
		    .e_type = ET_EXEC, .e_version = EV_CURRENT, .e_ehsize = sizeof(Elf64_Ehdr)};

		set_ident(eh.e_ident, ELFCLASS64);
		write_bytes(path, &eh, sizeof(eh));
		assert_int_equal(buildid_read_file(path, got, sizeof(got)), -ENOENT);
	}
	unlink(path);
	buildid_cache_free(c);
}

/* The load segment a mapping maps, as executable_info reports it. */
static void test_elf_facts_load_for(void **state)
{
	/* Debian gcc 12 PIE layout: R, R E, R, RW. */
	struct elf_facts pie = {.type = ET_DYN,
				.nloads = 4,
				.loads = {{0x0, 0x0, 0x798, PF_R},
					  {0x1000, 0x1000, 0x601, PF_R | PF_X},
					  {0x2000, 0x2000, 0x1cc, PF_R},
					  {0x2dd0, 0x3dd0, 0x278, PF_R | PF_W}}};
	/* Old single-text layout: code from file offset 0; two code segments. */
	struct elf_facts old = {.type = ET_EXEC,
				.nloads = 3,
				.loads = {{0x0, 0x400000, 0x5000, PF_R | PF_X},
					  {0x5e10, 0x605e10, 0x300, PF_R | PF_W},
					  {0x7000, 0x807000, 0x2000, PF_R | PF_X}}};
	struct elf_facts data_only = {.type = ET_DYN, .nloads = 1, .loads = {{0, 0, 0x100, PF_R}}};
	uint64_t off = 0, vaddr = 0;

	(void)state;
	assert_true(elf_facts_load_for(&pie, 0x1000, &off, &vaddr));
	assert_int_equal(off, 0x1000);
	assert_int_equal(vaddr, 0x1000);
	/* No code segment holds offset 0 here: the first code segment. */
	assert_true(elf_facts_load_for(&pie, 0x0, &off, &vaddr));
	assert_int_equal(off, 0x1000);
	assert_true(elf_facts_load_for(&old, 0x0, &off, &vaddr));
	assert_int_equal(off, 0x0);
	assert_int_equal(vaddr, 0x400000);
	assert_true(elf_facts_load_for(&old, 0x7000, &off, &vaddr));
	assert_int_equal(off, 0x7000);
	assert_int_equal(vaddr, 0x807000);
	assert_false(elf_facts_load_for(&data_only, 0, &off, &vaddr));
	assert_false(elf_facts_load_for(NULL, 0, &off, &vaddr));
}

static void test_proc_info_of_self(void **state)
{
	struct buildid_cache *c = buildid_cache_new();
	struct proc_info *p = proc_info_read("/proc", (uint32_t)getpid(), NULL, false, c);
	const struct proc_mapping *m;
	char pid[16];

	(void)state;
	assert_non_null(p);
	snprintf(pid, sizeof(pid), "%d", getpid());
	assert_string_equal(labels_get(&p->labels, "pid"), pid);
	assert_string_equal(labels_get(&p->labels, "comm"), "test_agent");
	assert_non_null(labels_get(&p->labels, "cgroup"));
	assert_true(p->maps_ok);
	m = procmaps_find(&p->maps, (uint64_t)(uintptr_t)&test_proc_info_of_self);
	assert_non_null(m);
	assert_string_equal(m->path, p->executable);
	assert_true(strlen(m->build_id) >= 16);
	assert_true(p->start_time > 0);
	/* executable_info: normalizing a code address through the mapping and
	 * its load segment gives the link-time address (address minus the
	 * load bias the dynamic linker reports). */
	{
		uint64_t addr = (uint64_t)(uintptr_t)&test_proc_info_of_self, bias = 0;
		uint64_t file_off = addr - m->start + m->offset;

		assert_true(m->elf_type == ET_DYN || m->elf_type == ET_EXEC);
		assert_true(m->has_load);
		assert_int_equal(dl_iterate_phdr(main_bias, &bias), 1);
		assert_int_equal(file_off - m->load_offset + m->load_vaddr, addr - bias);
	}
	proc_info_free(p);

	/* The name: a main thread's sample wins over /proc (which may show a
	 * later exec); another thread's name stands in only when /proc is
	 * gone (pid 0x7ffffff0 does not exist). */
	p = proc_info_read("/proc", (uint32_t)getpid(), "worker", false, c);
	assert_string_equal(p->comm, "test_agent");
	proc_info_free(p);
	p = proc_info_read("/proc", (uint32_t)getpid(), "bash", true, c);
	assert_string_equal(p->comm, "bash");
	proc_info_free(p);
	p = proc_info_read("/proc", 0x7ffffff0u, "worker", false, c);
	assert_non_null(p);
	assert_string_equal(p->comm, "worker");
	assert_string_equal(labels_get(&p->labels, "comm"), "worker");
	proc_info_free(p);
	buildid_cache_free(c);
}

/* A cached entry learns its code mappings one frame address at a time
 * (PROCMAP_QUERY): a function's address brings in the executable's
 * mapping with its build ID; a stack address leaves a gap and no mapping,
 * and a second address in that gap asks nothing more. */
/* A PERF_RECORD_MMAP2 as the kernel writes it (name padded to 8 bytes);
 * returns its size. */
static size_t mmap2_record(uint8_t *buf, uint32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
			   uint32_t maj, uint32_t min, uint64_t ino, uint32_t prot,
			   const char *name)
{
	struct perf_event_header h = {.type = PERF_RECORD_MMAP2};
	size_t nlen = strlen(name) + 1, off = sizeof(h);
	uint32_t u32[2];
	uint64_t u64[3];

	memset(buf, 0, 512);
	u32[0] = pid;
	u32[1] = pid;
	memcpy(buf + off, u32, 8), off += 8;
	u64[0] = addr, u64[1] = len, u64[2] = pgoff;
	memcpy(buf + off, u64, 24), off += 24;
	u32[0] = maj, u32[1] = min;
	memcpy(buf + off, u32, 8), off += 8;
	u64[0] = ino, u64[1] = 0;
	memcpy(buf + off, u64, 16), off += 16;
	u32[0] = prot, u32[1] = MAP_PRIVATE;
	memcpy(buf + off, u32, 8), off += 8;
	memcpy(buf + off, name, nlen);
	off += (nlen + 7) & ~(size_t)7;
	h.size = (uint16_t)off;
	memcpy(buf, &h, sizeof(h));
	return off;
}

static size_t comm_record(uint8_t *buf, uint32_t pid, bool exec, const char *name)
{
	struct perf_event_header h = {.type = PERF_RECORD_COMM,
				      .misc = exec ? PERF_RECORD_MISC_COMM_EXEC : 0};
	size_t off = sizeof(h);

	memset(buf, 0, 512);
	memcpy(buf + off, &pid, 4);
	memcpy(buf + off + 4, &pid, 4);
	off += 8;
	snprintf((char *)buf + off, 16, "%s", name);
	off += 16;
	h.size = (uint16_t)off;
	memcpy(buf, &h, sizeof(h));
	return off;
}

static size_t fork_record(uint8_t *buf, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid)
{
	struct perf_event_header h = {.type = PERF_RECORD_FORK};
	uint32_t ids[4] = {pid, ppid, tid, ptid};
	uint64_t time = 12345;
	size_t off = sizeof(h);

	memset(buf, 0, 512);
	memcpy(buf + off, ids, sizeof(ids));
	off += sizeof(ids);
	memcpy(buf + off, &time, sizeof(time));
	off += sizeof(time);
	h.size = (uint16_t)off;
	memcpy(buf, &h, sizeof(h));
	return off;
}

static void test_mmap_record_parse(void **state)
{
	uint8_t rec[512];
	struct mmap_event e;
	size_t n;

	(void)state;
	n = mmap2_record(rec, 42, 0x5000, 0x3000, 0x1000, 8, 1, 777, PROT_READ | PROT_EXEC,
			 "/usr/bin/cc1");
	assert_int_equal(mmap_record_parse(rec, n, &e), 1);
	assert_false(e.exec);
	assert_int_equal(e.pid, 42);
	assert_int_equal(e.m.start, 0x5000);
	assert_int_equal(e.m.limit, 0x8000);
	assert_int_equal(e.m.offset, 0x1000);
	assert_int_equal(e.m.dev_major, 8);
	assert_int_equal(e.m.dev_minor, 1);
	assert_int_equal(e.m.inode, 777);
	assert_string_equal(e.m.path, "/usr/bin/cc1");
	/* data mappings and zero lengths say nothing about code */
	n = mmap2_record(rec, 42, 0x5000, 0x3000, 0, 8, 1, 777, PROT_READ | PROT_WRITE, "/x");
	assert_int_equal(mmap_record_parse(rec, n, &e), 0);
	n = mmap2_record(rec, 42, 0x5000, 0, 0, 8, 1, 777, PROT_EXEC, "/x");
	assert_int_equal(mmap_record_parse(rec, n, &e), 0);
	n = comm_record(rec, 43, true, "as");
	assert_int_equal(mmap_record_parse(rec, n, &e), 1);
	assert_true(e.exec);
	assert_int_equal(e.pid, 43);
	n = comm_record(rec, 43, false, "renamed");
	assert_int_equal(mmap_record_parse(rec, n, &e), 0);
	/* malformed: shorter than its header says, a header claiming less
	 * than itself, a name without its NUL, an MMAP2 too short for its
	 * body; other record types are not ours */
	n = mmap2_record(rec, 42, 0x5000, 0x3000, 0, 8, 1, 777, PROT_EXEC, "/usr/bin/cc1");
	assert_int_equal(mmap_record_parse(rec, n - 8, &e), -EINVAL);
	assert_int_equal(mmap_record_parse(rec, 4, &e), -EINVAL);
	memset(rec + n - 8, 'x', 8);
	assert_int_equal(mmap_record_parse(rec, n, &e), -EINVAL);
	((struct perf_event_header *)rec)->size = sizeof(struct perf_event_header) + 20;
	assert_int_equal(mmap_record_parse(rec, n, &e), -EINVAL);
	((struct perf_event_header *)rec)->size = 2;
	assert_int_equal(mmap_record_parse(rec, n, &e), -EINVAL);
	n = comm_record(rec, 43, true, "as");
	((struct perf_event_header *)rec)->type = PERF_RECORD_EXIT;
	assert_int_equal(mmap_record_parse(rec, n, &e), 0);
	/* a new process says its parent; a new thread is not a process; a
	 * fork record too short for its ids is malformed */
	n = fork_record(rec, 100, 42, 100, 42);
	assert_int_equal(mmap_record_parse(rec, n, &e), 1);
	assert_int_equal(e.pid, 100);
	assert_int_equal(e.parent, 42);
	assert_false(e.exec);
	n = fork_record(rec, 42, 42, 101, 42);
	assert_int_equal(mmap_record_parse(rec, n, &e), 0);
	n = fork_record(rec, 100, 42, 100, 42);
	((struct perf_event_header *)rec)->size = sizeof(struct perf_event_header) + 12;
	assert_int_equal(mmap_record_parse(rec, n, &e), -EINVAL);
}

static void note(struct proc_cache *c, const uint8_t *rec, size_t n, uint64_t now)
{
	struct mmap_event e;

	assert_int_equal(mmap_record_parse(rec, n, &e), 1);
	proc_cache_note(c, &e, now);
}

/* A process gone before its first reading (reaped: /proc has nothing) is
 * described by what the mmap records said since its exec: the first code
 * mapping after the exec is the executable, a mapping laid over another
 * replaces it, build IDs come from the host's file when it is the mapped
 * inode, a mapping noted after the reading is learned on demand, and
 * notes expire. */
static void test_proc_cache_notes_for_gone_process(void **state)
{
	struct proc_cache *c = proc_cache_new("/proc");
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint8_t rec[512];
	struct stat st;
	struct proc_info *p;
	const struct proc_mapping *m;
	pid_t pid = fork();
	size_t n;

	(void)state;
	assert_non_null(c);
	assert_true(len > 0);
	exe[len] = '\0';
	assert_int_equal(stat(exe, &st), 0);
	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);

	n = mmap2_record(rec, (uint32_t)pid, 0x1000, 0x1000, 0, 8, 1, 5, PROT_EXEC, "/old/image");
	note(c, rec, n, 100);
	n = comm_record(rec, (uint32_t)pid, true, "child");
	note(c, rec, n, 200);
	n = mmap2_record(rec, (uint32_t)pid, 0x400000, 0x10000, 0x2000, major(st.st_dev),
			 minor(st.st_dev), st.st_ino, PROT_READ | PROT_EXEC, exe);
	note(c, rec, n, 300);
	n = mmap2_record(rec, (uint32_t)pid, 0x7f0000000000, 0x20000, 0, 8, 1, 99,
			 PROT_READ | PROT_EXEC, "/lib/ld.so");
	note(c, rec, n, 300);
	/* ld.so places a segment over part of its first mapping */
	n = mmap2_record(rec, (uint32_t)pid, 0x7f0000010000, 0x8000, 0x10000, 8, 1, 99,
			 PROT_READ | PROT_EXEC, "/lib/ld.so");
	note(c, rec, n, 300);

	p = proc_cache_get(c, (uint32_t)pid, "child", true, 400);
	assert_non_null(p);
	assert_true(p->gone);
	assert_string_equal(p->executable, exe);
	assert_null(procmaps_find(&p->maps, 0x1000)); /* before the exec */
	m = procmaps_find(&p->maps, 0x400100);
	assert_non_null(m);
	assert_string_equal(m->path, exe);
	assert_int_equal(m->offset, 0x2000);
	assert_true(m->build_id[0] != '\0'); /* the host file is the mapped inode */
	assert_true(m->elf_type != 0);
	m = procmaps_find(&p->maps, 0x7f0000012000);
	assert_non_null(m);
	assert_int_equal(m->start, 0x7f0000010000);
	assert_int_equal(m->limit, 0x7f0000018000);
	assert_int_equal(m->offset, 0x10000);
	assert_string_equal(m->build_id, "");	     /* inode 99 is not /lib/ld.so's */
	m = procmaps_find(&p->maps, 0x7f0000001000); /* below the new one: kept */
	assert_non_null(m);
	assert_int_equal(m->start, 0x7f0000000000);
	assert_int_equal(m->limit, 0x7f0000010000);
	assert_int_equal(m->offset, 0);
	m = procmaps_find(&p->maps, 0x7f0000019000); /* above it: kept, offset moved */
	assert_non_null(m);
	assert_int_equal(m->start, 0x7f0000018000);
	assert_int_equal(m->limit, 0x7f0000020000);
	assert_int_equal(m->offset, 0x18000);

	/* a library mapped after the reading (dlopen), asked for by a frame */
	n = mmap2_record(rec, (uint32_t)pid, 0x7e0000000000, 0x1000, 0, 8, 1, 7, PROT_EXEC,
			 "/lib/plugin.so");
	note(c, rec, n, 500);
	proc_cache_resolve(c, p, 0x7e0000000800, 600, 1000000000ull);
	assert_non_null(procmaps_find(&p->maps, 0x7e0000000800));

	/* notes expire: a reading after that finds nothing */
	proc_cache_forget(c, (uint32_t)pid);
	proc_cache_expire_notes(c, 300 + 11000000000ull);
	p = proc_cache_get(c, (uint32_t)pid, "child", true, 11000000500ull);
	assert_non_null(p);
	assert_false(p->gone);
	assert_null(procmaps_find(&p->maps, 0x400100));
	proc_cache_free(c);
}

static int forked_child_code(int x)
{
	return x * 3 + 1;
}

/* A child forked without exec runs its parent's code: gone before its
 * first reading, it takes the executable and the mappings of its parent
 * (this process, alive), build IDs included, also for an address first
 * asked for later (a library). A fork record that comes after the child's
 * own exec records (another CPU's ring) leaves them alone. */
static void test_proc_cache_forked_child_takes_parent_code(void **state)
{
	struct proc_cache *c = proc_cache_new("/proc");
	int (*volatile libc_fn)(const char *) = puts;
	uint64_t own = (uint64_t)(uintptr_t)forked_child_code, lib = (uint64_t)(uintptr_t)libc_fn;
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint8_t rec[512];
	struct proc_info *p, *self;
	const struct proc_mapping *m;
	pid_t kid[2];
	size_t n;

	(void)state;
	assert_non_null(c);
	assert_true(len > 0);
	exe[len] = '\0';
	for (int i = 0; i < 2; i++) {
		kid[i] = fork();
		if (kid[i] == 0)
			_exit(forked_child_code(i) & 0);
		assert_true(kid[i] > 0);
		assert_int_equal(waitpid(kid[i], NULL, 0), kid[i]);
	}
	n = fork_record(rec, (uint32_t)kid[0], (uint32_t)getpid(), (uint32_t)kid[0],
			(uint32_t)getpid());
	note(c, rec, n, 100);
	p = proc_cache_get(c, (uint32_t)kid[0], "test_agent", true, 200);
	assert_non_null(p);
	assert_true(p->gone);
	assert_string_equal(p->executable, exe);
	self = proc_cache_get(c, (uint32_t)getpid(), NULL, false, 200);
	assert_non_null(self);
	assert_non_null(labels_get(&p->labels, "cgroup"));
	assert_string_equal(labels_get(&p->labels, "cgroup"), labels_get(&self->labels, "cgroup"));
	proc_cache_resolve(c, p, own, 200, 1000000000ull);
	m = procmaps_find(&p->maps, own);
	assert_non_null(m);
	assert_string_equal(m->path, exe);
	assert_true(m->build_id[0] != '\0');
	proc_cache_resolve(c, p, lib, 200, 1000000000ull);
	m = procmaps_find(&p->maps, lib);
	assert_non_null(m);
	assert_non_null(strstr(m->path, ".so")); /* libc, or ASan's interceptor */

	/* kid[1] "exec'd" /bin/true (its records drained first), then its
	 * fork record: it keeps its own code, not this process's */
	n = comm_record(rec, (uint32_t)kid[1], true, "true");
	note(c, rec, n, 100);
	n = mmap2_record(rec, (uint32_t)kid[1], 0x500000, 0x1000, 0, 8, 1, 5, PROT_EXEC,
			 "/bin/true");
	note(c, rec, n, 100);
	n = fork_record(rec, (uint32_t)kid[1], (uint32_t)getpid(), (uint32_t)kid[1],
			(uint32_t)getpid());
	note(c, rec, n, 100);
	p = proc_cache_get(c, (uint32_t)kid[1], "true", true, 200);
	assert_non_null(p);
	assert_string_equal(p->executable, "/bin/true");
	proc_cache_resolve(c, p, own, 200, 1000000000ull);
	assert_null(procmaps_find(&p->maps, own));
	proc_cache_free(c);
}

static void test_proc_cache_resolves_lazily(void **state)
{
	struct proc_cache *c = proc_cache_new("/proc");
	struct proc_info *p;
	const struct proc_mapping *m;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint64_t code = (uint64_t)(uintptr_t)&test_proc_cache_resolves_lazily, stack;
	size_t before;
	int local = 0;

	(void)state;
	assert_non_null(c);
	assert_true(n > 0);
	exe[n] = '\0';
	p = proc_cache_get(c, (uint32_t)getpid(), "t", true, 1000);
	assert_non_null(p);
	assert_true(p->lazy);
	assert_null(procmaps_find(&p->maps, code));
	proc_cache_resolve(c, p, code, 2000, 1000000000ull);
	m = procmaps_find(&p->maps, code);
	assert_non_null(m);
	assert_string_equal(m->path, exe);
	assert_true(m->inode != 0);
	assert_true(m->elf_type != 0);
	stack = (uint64_t)(uintptr_t)&local;
	before = p->maps.n;
	proc_cache_resolve(c, p, stack, 3000, 1000000000ull);
	assert_null(procmaps_find(&p->maps, stack));
	assert_non_null(procmaps_find(&p->gaps, stack));
	assert_int_equal(p->gaps.n, 1);
	proc_cache_resolve(c, p, stack + 64, 4000, 1000000000ull);
	assert_int_equal(p->gaps.n, 1);
	assert_int_equal(p->maps.n, before);
	proc_cache_free(c);
}

/* A lazy entry keeps its /proc/PID/maps open, and that fd answers for the
 * process it was opened on only: after the process execs, a query on it
 * fails (ESRCH) instead of describing the new image, so no pid check is
 * needed before asking again. An exit closes it. */
static void test_proc_cache_keeps_maps_fd(void **state)
{
	struct proc_cache *c = proc_cache_new("/proc");
	uint64_t code = (uint64_t)(uintptr_t)&test_proc_cache_keeps_maps_fd;
	struct proc_mapping m;
	struct proc_info *p;
	char name[4096], exe[256], path[64];
	int go[2], status;
	pid_t child;

	(void)state;
	assert_non_null(c);
	assert_int_equal(pipe(go), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char b;

		close(go[1]);
		if (read(go[0], &b, 1) == 1)
			execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(1);
	}
	close(go[0]);
	/* A name from the thread itself: no /proc/PID/stat, the fd kept at
	 * once stands for the start time. Without one, stat is read and the
	 * fd opened at the first frame. */
	p = proc_cache_get(c, (uint32_t)getpid(), "self", false, 1000);
	assert_non_null(p);
	assert_false(p->has_maps_fd);
	assert_true(p->start_time != 0);
	p = proc_cache_get(c, (uint32_t)child, "t", true, 1000);
	assert_non_null(p);
	assert_true(p->has_maps_fd);
	assert_int_equal(p->start_time, 0);
	proc_cache_resolve(c, p, code, 2000, 1000000000ull);
	assert_non_null(procmaps_find(&p->maps, code));
	assert_true(p->has_maps_fd);
	assert_int_equal(procmaps_query_at(p->maps_fd, code, &m, name, sizeof(name)), 0);
	/* The child execs sleep: wait until its exe says so. */
	assert_int_equal(write(go[1], "x", 1), 1);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)child);
	for (int i = 0; i < 500; i++) {
		ssize_t n = readlink(path, exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = '\0';
		if (strstr(exe, "sleep"))
			break;
		usleep(10000);
	}
	assert_non_null(strstr(exe, "sleep"));
	assert_int_equal(procmaps_query_at(p->maps_fd, code, &m, name, sizeof(name)), -ESRCH);
	proc_cache_mark_exited(c, (uint32_t)child, 3000);
	assert_false(p->has_maps_fd);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	close(go[1]);
	proc_cache_free(c);
}

static void test_window_becomes_profile(void **state)
{
	struct proc_info *p = calloc(1, sizeof(*p));
	struct window *w = window_new(1000, 1000 + 10000000000ull, 1700000000000000000ll);
	struct sample_event e;
	struct agent_labels host = {0}, series = {0};
	struct profile_env env = {.frequency_hz = 19, .host_labels = &host};
	struct pprof_profile *prof = NULL;
	struct kiln_error err = {0};
	const pprof_msg *msg;
	struct buf out = {0};
	struct agent_exec_infos exec = {0};

	(void)state;
	p->pid = 42;
	strcpy(p->comm, "app");
	p->executable = strdup("/usr/bin/app");
	p->maps.v = calloc(1, sizeof(*p->maps.v));
	p->maps.v[0] = (struct proc_mapping){.start = 0x400000,
					     .limit = 0x500000,
					     .offset = 0x1000,
					     .exec = true,
					     .path = strdup("/usr/bin/app"),
					     .build_id = strdup("abcd"),
					     .elf_type = 3,
					     .has_load = true,
					     .load_offset = 0x1000,
					     .load_vaddr = 0x1000};
	p->maps.n = p->maps.cap = 1;
	labels_set(&p->labels, "pid", "42");
	labels_set(&p->labels, "comm", "app");
	labels_set(&host, "node", "n1");

	memset(&e, 0, sizeof(e));
	e.kind = PROFILER_EVENT_SAMPLE;
	e.pid = 42;
	e.tid = 43;
	strcpy(e.thread_comm, "worker");
	e.n_user = 2;
	e.frames[0] = 0x401000;
	e.frames[1] = 0x402000;
	for (int i = 0; i < 3; i++)
		assert_int_equal(window_add(w, p, &e), 0);
	e.frames[0] = 0x403000;
	assert_int_equal(window_add(w, p, &e), 0);
	assert_int_equal(w->n, 1);
	assert_int_equal(w->samples, 4);
	assert_int_equal(p->refs, 1);

	assert_int_equal(profile_series_labels(&env, p, &series), 0);
	assert_string_equal(labels_get(&series, "node"), "n1");
	assert_int_equal(profile_build(&env, w, &w->procs[0], &series, &out, &exec, &err), 0);
	/* A shared compressor and scratch buffer give the very same bytes. */
	{
		struct buf again = {0}, scratch = {0};
		struct agent_exec_infos exec2 = {0};

		env.gz = libdeflate_alloc_compressor(1);
		env.scratch = &scratch;
		for (int round = 0; round < 2; round++) {
			buf_reset(&again);
			assert_int_equal(
			    profile_build(&env, w, &w->procs[0], &series, &again, &exec2, &err), 0);
			assert_int_equal(again.len, out.len);
			assert_memory_equal(again.data, out.data, out.len);
			agent_exec_infos_free(&exec2);
		}
		/* Up to stored_max bytes: stored deflate blocks (BTYPE 00 in
		 * the first block header, after the 10-byte gzip header), the
		 * same profile; above, compressed. */
		env.gz_store = libdeflate_alloc_compressor(0);
		env.stored_max = 4096;
		buf_reset(&again);
		assert_int_equal(
		    profile_build(&env, w, &w->procs[0], &series, &again, &exec2, &err), 0);
		agent_exec_infos_free(&exec2);
		assert_true(again.len > out.len);
		assert_int_equal(again.data[10] & 6, 0);
		assert_int_not_equal(out.data[10] & 6, 0);
		{
			struct pprof_profile *p1 = NULL, *p2 = NULL;
			struct buf e1 = {0}, e2 = {0};

			assert_int_equal(pprof_decode(again.data, again.len, NULL, &p1, &err), 0);
			assert_int_equal(pprof_decode(out.data, out.len, NULL, &p2, &err), 0);
			assert_int_equal(pprof_encode(pprof_profile_msg(p1), false, &e1), 0);
			assert_int_equal(pprof_encode(pprof_profile_msg(p2), false, &e2), 0);
			assert_int_equal(e1.len, e2.len);
			assert_memory_equal(e1.data, e2.data, e1.len);
			buf_free(&e1);
			buf_free(&e2);
			pprof_profile_free(p1);
			pprof_profile_free(p2);
		}
		env.stored_max = 10;
		buf_reset(&again);
		assert_int_equal(
		    profile_build(&env, w, &w->procs[0], &series, &again, &exec2, &err), 0);
		agent_exec_infos_free(&exec2);
		assert_int_equal(again.len, out.len);
		/* A kept builder, reused profile after profile, gives the same
		 * bytes too (and the same executable infos). */
		env.builder = pprof_builder_new_sized(16);
		assert_non_null(env.builder);
		for (int round = 0; round < 3; round++) {
			buf_reset(&again);
			assert_int_equal(
			    profile_build(&env, w, &w->procs[0], &series, &again, &exec2, &err), 0);
			assert_int_equal(again.len, out.len);
			assert_memory_equal(again.data, out.data, out.len);
			assert_int_equal(exec2.n, exec.n);
			agent_exec_infos_free(&exec2);
		}
		pprof_builder_free(env.builder);
		env.builder = NULL;
		libdeflate_free_compressor(env.gz_store);
		env.gz_store = NULL;
		libdeflate_free_compressor(env.gz);
		env.gz = NULL;
		env.scratch = NULL;
		buf_free(&again);
		buf_free(&scratch);
	}
	/* One executable_info per mapping, in mapping order. */
	assert_int_equal(exec.n, 1);
	assert_int_equal(exec.v[0].elf_type, 3);
	assert_true(exec.v[0].has_load);
	assert_int_equal(exec.v[0].load_offset, 0x1000);
	assert_int_equal(exec.v[0].load_vaddr, 0x1000);
	agent_exec_infos_free(&exec);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
	msg = pprof_profile_msg(prof);
	assert_int_equal(msg->n_sample_type, 2);
	assert_string_equal(pprof_string(prof, msg->sample_type[0]->type), "samples");
	assert_string_equal(pprof_string(prof, msg->sample_type[1]->unit), "nanoseconds");
	assert_int_equal(msg->period, 1000000000 / 19);
	assert_int_equal(msg->duration_nanos, 10000000000ll);
	assert_int_equal(msg->time_nanos, 1700000000000000000ll);
	assert_int_equal(msg->n_sample, 2);
	assert_int_equal(msg->n_mapping, 1);
	assert_string_equal(pprof_string(prof, msg->mapping[0]->build_id), "abcd");
	assert_int_equal(msg->mapping[0]->memory_start, 0x400000);
	assert_int_equal(msg->mapping[0]->file_offset, 0x1000);
	for (size_t i = 0; i < msg->n_sample; i++) {
		const pprof_sample_msg *s = msg->sample[i];
		bool tid = false, comm = false, node = false;

		assert_int_equal(s->n_location_id, 2);
		assert_int_equal(s->value[1], s->value[0] * (1000000000 / 19));
		assert_true(s->value[0] == 3 || s->value[0] == 1);
		for (size_t j = 0; j < s->n_label; j++) {
			const char *k = pprof_string(prof, s->label[j]->key);
			const char *v = pprof_string(prof, s->label[j]->str);

			tid |= strcmp(k, "thread_id") == 0 && strcmp(v, "43") == 0;
			comm |= strcmp(k, "comm") == 0 && strcmp(v, "app") == 0;
			node |= strcmp(k, "node") == 0 && strcmp(v, "n1") == 0;
		}
		assert_true(tid && comm && node);
	}
	pprof_profile_free(prof);
	buf_free(&out);
	labels_free(&series);
	labels_free(&host);
	window_free(w); /* releases p; p is not cached, so it is freed */
}

/* A process with one code mapping at base, for window tests. */
static struct proc_info *fake_proc(uint32_t pid, const char *comm, uint64_t base)
{
	struct proc_info *p = calloc(1, sizeof(*p));
	char num[16];

	assert_non_null(p);
	p->pid = pid;
	snprintf(p->comm, sizeof(p->comm), "%s", comm);
	p->executable = strdup("/usr/bin/app");
	p->maps.v = calloc(1, sizeof(*p->maps.v));
	p->maps.v[0] = (struct proc_mapping){.start = base,
					     .limit = base + 0x100000,
					     .exec = true,
					     .path = strdup("/usr/bin/app"),
					     .build_id = strdup("")};
	p->maps.n = p->maps.cap = 1;
	snprintf(num, sizeof(num), "%u", pid);
	labels_set(&p->labels, "pid", num);
	labels_set(&p->labels, "comm", comm);
	return p;
}

/* The local store's default layout: one profile per window whose samples
 * carry their process's series labels, each process's frames in its own
 * mapping (the same file at different addresses stays two mappings). */
static void test_window_profile_holds_every_process(void **state)
{
	struct proc_info *a = fake_proc(100, "alpha", 0x400000),
			 *b = fake_proc(200, "beta", 0x800000);
	struct window *w = window_new(0, 5000000000ull, 1700000000000000000ll);
	struct agent_labels host = {0}, series[2] = {{0}};
	const struct agent_labels *series_p[2] = {&series[0], &series[1]};
	struct profile_env env = {.frequency_hz = 19, .host_labels = &host};
	struct pprof_profile *prof = NULL;
	struct kiln_error err = {0};
	struct sample_event e;
	const pprof_msg *msg;
	struct buf out = {0};
	uint64_t per_pid[2] = {0, 0};

	(void)state;
	labels_set(&host, "node", "n1");
	memset(&e, 0, sizeof(e));
	e.kind = PROFILER_EVENT_SAMPLE;
	e.n_user = 1;
	e.pid = e.tid = 100;
	e.frames[0] = 0x401000;
	for (int i = 0; i < 3; i++)
		assert_int_equal(window_add(w, a, &e), 0);
	e.pid = e.tid = 200;
	e.frames[0] = 0x801000;
	for (int i = 0; i < 5; i++)
		assert_int_equal(window_add(w, b, &e), 0);
	assert_int_equal(w->n, 2);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(profile_series_labels(&env, w->procs[i].info, &series[i]), 0);
	assert_int_equal(profile_build_window(&env, w, series_p, &out, &err), 0);

	assert_int_equal(pprof_decode(out.data, out.len, NULL, &prof, &err), 0);
	msg = pprof_profile_msg(prof);
	assert_int_equal(msg->n_sample, 2);
	assert_int_equal(msg->n_mapping, 2);
	assert_int_equal(msg->time_nanos, 1700000000000000000ll);
	assert_int_equal(msg->duration_nanos, 5000000000ll);
	for (size_t i = 0; i < msg->n_sample; i++) {
		const pprof_sample_msg *s = msg->sample[i];
		const char *pid = NULL, *comm = NULL, *node = NULL;

		for (size_t j = 0; j < s->n_label; j++) {
			const char *k = pprof_string(prof, s->label[j]->key);
			const char *v = pprof_string(prof, s->label[j]->str);

			if (strcmp(k, "pid") == 0)
				pid = v;
			else if (strcmp(k, "comm") == 0)
				comm = v;
			else if (strcmp(k, "node") == 0)
				node = v;
		}
		assert_non_null(pid);
		assert_non_null(comm);
		assert_non_null(node);
		assert_string_equal(node, "n1");
		assert_string_equal(comm, strcmp(pid, "100") == 0 ? "alpha" : "beta");
		per_pid[strcmp(pid, "100") == 0 ? 0 : 1] += (uint64_t)s->value[0];
	}
	assert_int_equal(per_pid[0], 3);
	assert_int_equal(per_pid[1], 5);
	pprof_profile_free(prof);
	buf_free(&out);
	labels_free(&series[0]);
	labels_free(&series[1]);
	labels_free(&host);
	window_free(w); /* releases a and b: not cached, so freed */
}

/* Reads DIR/name whole into out (NUL-terminated); its length, or -1. */
static long slurp(const char *dir, const char *name, char *out, size_t outsz)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
		return -1;
	n = fread(out, 1, outsz - 1, f);
	fclose(f);
	out[n] = '\0';
	return (long)n;
}

/* The local store's per-process layout: TIME_PID_COMM.pb.gz with the comm
 * made file-name safe, a second profile of the same pid and window (an
 * exec) as _2, never a replaced file, and nothing else left behind. */
static void test_sink_local_names(void **state)
{
	char dir[] = "/tmp/kiln-test-sink.XXXXXX", got[64];
	struct agent_labels none = {0};
	struct agent_profile p[3] = {
	    {.pid = 42,
	     .comm = "my app/1",
	     .labels = &none,
	     .pprof = (const uint8_t *)"first",
	     .pprof_len = 5},
	    {.pid = 42,
	     .comm = "my app/1",
	     .labels = &none,
	     .pprof = (const uint8_t *)"second",
	     .pprof_len = 6},
	    {.pid = 7, .comm = "sh", .labels = &none, .pprof = (const uint8_t *)"", .pprof_len = 0},
	};
	struct agent_sink *sink = NULL;
	struct kiln_error err = {0};
	struct dirent *de;
	size_t entries = 0;
	DIR *d;

	(void)state;
	for (int i = 0; i < 3; i++)
		p[i].time_ns = 1763883000ll * 1000000000ll; /* 2025-11-23T07:30:00Z */
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sink_local_new(dir, true, &sink, &err), 0);
	assert_int_equal(sink->write_window(sink, p, 3, &err), 3);
	assert_int_equal(slurp(dir, "20251123T073000Z_42_my_app_1.pb.gz", got, sizeof(got)), 5);
	assert_string_equal(got, "first");
	assert_int_equal(slurp(dir, "20251123T073000Z_42_my_app_1_2.pb.gz", got, sizeof(got)), 6);
	assert_string_equal(got, "second");
	assert_int_equal(slurp(dir, "20251123T073000Z_7_sh.pb.gz", got, sizeof(got)), 0);
	/* The same window again: new names, the first files untouched. */
	assert_int_equal(sink->write_window(sink, p, 1, &err), 1);
	assert_int_equal(slurp(dir, "20251123T073000Z_42_my_app_1_3.pb.gz", got, sizeof(got)), 5);
	assert_int_equal(slurp(dir, "20251123T073000Z_42_my_app_1.pb.gz", got, sizeof(got)), 5);
	sink->close(sink);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[512];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		entries++;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		assert_int_equal(unlink(path), 0);
	}
	closedir(d);
	assert_int_equal(entries, 4);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_procmaps_keeps_code_mappings),
	    cmocka_unit_test(test_procmaps_rejects_garbage),
	    cmocka_unit_test(test_procmaps_of_self),
	    cmocka_unit_test(test_procmaps_query_matches_text),
	    cmocka_unit_test(test_cgroup_path_choice),
	    cmocka_unit_test(test_cgroup_derive_patterns),
	    cmocka_unit_test(test_labels_set_sorted_and_parse),
	    cmocka_unit_test(test_kallsyms_lookup_with_modules),
	    cmocka_unit_test(test_ksym_parse_forms),
	    cmocka_unit_test(test_ksym_cache_names_on_demand),
	    cmocka_unit_test(test_ksym_cache_from_table),
	    cmocka_unit_test(test_sampler_symbolize_matches_kallsyms),
	    cmocka_unit_test(test_buildid_matches_loaded_note),
	    cmocka_unit_test(test_buildid_synthetic_elves),
	    cmocka_unit_test(test_elf_facts_load_for),
	    cmocka_unit_test(test_proc_info_of_self),
	    cmocka_unit_test(test_mmap_record_parse),
	    cmocka_unit_test(test_proc_cache_notes_for_gone_process),
	    cmocka_unit_test(test_proc_cache_forked_child_takes_parent_code),
	    cmocka_unit_test(test_proc_cache_resolves_lazily),
	    cmocka_unit_test(test_proc_cache_keeps_maps_fd),
	    cmocka_unit_test(test_window_becomes_profile),
	    cmocka_unit_test(test_window_profile_holds_every_process),
	    cmocka_unit_test(test_sink_local_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
