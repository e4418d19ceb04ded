/*
 * python.c — CPython processes and the names of their frames (see
 * python.h for the contract, python.bpf.h for the kernel's walk).
 *
 * Detection (python_load, when the unwinder loads a process): the code
 * mapping of libpython3.X.so, else of an executable named python3.X,
 * gives the interpreter's file; its dynamic symbols give _PyRuntime and
 * _PyEval_EvalFrameDefault (Debian's static /usr/bin/python3.11 has no
 * .symtab but exports both), the mapping the load bias. The version is
 * Py_Version when the file exports it (3.11+), else the file's name;
 * 3.13's offsets come from the _Py_DebugOffsets at _PyRuntime, read
 * from the process. 3.9 and 3.10 need the fs base offset in the kernel's
 * task_struct (their thread states know only pthread_self()): it is
 * looked up in the kernel's BTF the first time such a process appears,
 * so that the agent's start-up never pays for parsing it.
 *
 * Names (python_note_frames, at drain time): per (pid, code object), the
 * code object is read once with process_vm_readv and kept: qualified
 * name, file, first line and line table, so that a frame's line is
 * decoded from its instruction index when the profile is built, even
 * after the process exited. Memory is bounded (NAMES_MAX_BYTES): past
 * it, the cache is emptied between windows and names are read again.
 */
#include "agent/python.h"
#include "agent/agent.h"
#include "common/htab.h"
#include "common/log.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NAMES_MAX_BYTES (32u << 20)
#define NAME_MAX_CHARS	1024
#define LINETABLE_MAX	(256u << 10)
#define CODE_READ_BYTES 256

/* One CPython process the kernel walks. */
struct python_process {
	uint32_t pid;
	uint16_t version;
	uint64_t code_type;	       /* address of PyCode_Type (0: unknown) */
	uint64_t eval_start, eval_end; /* _PyEval_EvalFrameDefault's code */
	struct python_offsets off;
	uint64_t forgotten_ns; /* 0: live */
};

/* What one code object of one process is called. */
struct python_code {
	uint16_t version;
	bool ok; /* false: unreadable, named "<unknown>" */
	int first_line;
	char *name, *file;
	uint8_t *linetable;
	size_t linetable_len;
	/* What tells this code object from another later made at the same
	 * address (name, file and line table pointers, first line), checked
	 * again on the first use in each drain (epoch). */
	uint64_t ident[4];
	uint64_t epoch;
};

struct python_code_key {
	uint32_t pid;
	uint32_t pad;
	uint64_t code;
};

struct interp_syms {
	uint64_t runtime, eval, eval_size, py_version_addr, code_type;
	uint64_t py_version; /* the value of Py_Version, 0 if absent */
};

/* What one interpreter file gave (interp_read_syms), kept by the file's
 * identity so that a host of processes running the same interpreter reads
 * its symbol tables once, not once per process. */
struct interp_file {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
	uint64_t map_off; /* the mapping it was asked for (the segment differs) */
	int rc;
	struct interp_syms syms;
	uint64_t seg_off, seg_vaddr;
};

#define INTERP_FILES 32

struct python {
	int map_fd;
	struct interp_file files[INTERP_FILES];
	size_t nfiles, next_file; /* filled slots; the one to replace next */
	struct agent_metrics *m;
	struct python_process *procs;
	size_t nprocs, procs_cap;
	struct htab *names; /* python_code_key -> index into codes */
	struct python_code *codes;
	size_t ncodes, codes_cap;
	size_t bytes;
	/* thread.fsbase in task_struct: 0 not looked up yet, -1 not found */
	long fsbase_off;
	uint64_t epoch; /* drains so far (python_new_drain) */
};

#define ADD(f, v) atomic_fetch_add_explicit(&py->m->f, (v), memory_order_relaxed)
#define SET(f, v) atomic_store_explicit(&py->m->f, (v), memory_order_relaxed)

struct python *python_new(int map_fd, struct agent_metrics *m)
{
	struct python *py = calloc(1, sizeof(*py));

	if (!py)
		return NULL;
	py->map_fd = map_fd;
	py->m = m;
	py->names = htab_new(1024);
	if (!py->names) {
		free(py);
		return NULL;
	}
	return py;
}

static void codes_free(struct python *py)
{
	for (size_t i = 0; i < py->ncodes; i++) {
		free(py->codes[i].name);
		free(py->codes[i].file);
		free(py->codes[i].linetable);
	}
	py->ncodes = 0;
	py->bytes = 0;
}

void python_free(struct python *py)
{
	if (!py)
		return;
	codes_free(py);
	free(py->codes);
	htab_free(py->names);
	free(py->procs);
	free(py);
}

static struct python_process *process_find(struct python *py, uint32_t pid)
{
	for (size_t i = 0; i < py->nprocs; i++)
		if (py->procs[i].pid == pid && !py->procs[i].forgotten_ns)
			return &py->procs[i];
	return NULL;
}

/* The entry whose offsets name pid's frames: the live one, else a
 * forgotten one (its samples may still be drained); never an unwalked one. */
static const struct python_process *process_find_any(const struct python *py, uint32_t pid)
{
	const struct python_process *found = NULL;

	for (size_t i = 0; i < py->nprocs; i++)
		if (py->procs[i].pid == pid && py->procs[i].version &&
		    (!found || !py->procs[i].forgotten_ns))
			found = &py->procs[i];
	return found;
}

/* ---- the interpreter's file --------------------------------------------------- */

/* Reads the 8 bytes at vaddr of an ELF file (an initialized datum). */
static int elf_read_u64(Elf *elf, int fd, uint64_t vaddr, uint64_t *out)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr + 8 <= ph.p_vaddr + ph.p_filesz)
			return pread(fd, out, 8, (off_t)(ph.p_offset + vaddr - ph.p_vaddr)) == 8
				   ? 0
				   : -EIO;
	}
	return -ENOENT;
}

/* The symbols the walk needs, from .dynsym (and .symtab when there is
 * one); the load segment that maps file offset map_off for the bias. */
static int interp_read_syms(const char *path, uint64_t map_off, struct interp_syms *s,
			    uint64_t *seg_off, uint64_t *seg_vaddr)
{
	Elf_Scn *scn = NULL;
	int fd, rc = -ENOENT;
	size_t nph;
	Elf *elf;

	memset(s, 0, sizeof(*s));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		rc = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			if (strcmp(name, "_PyRuntime") == 0) {
				s->runtime = sym.st_value;
			} else if (strcmp(name, "_PyEval_EvalFrameDefault") == 0) {
				s->eval = sym.st_value;
				s->eval_size = sym.st_size;
			} else if (strcmp(name, "Py_Version") == 0) {
				s->py_version_addr = sym.st_value;
			} else if (strcmp(name, "PyCode_Type") == 0) {
				s->code_type = sym.st_value;
			}
		}
	}
	if (!s->runtime || !s->eval || !s->eval_size)
		goto out;
	if (s->py_version_addr && elf_read_u64(elf, fd, s->py_version_addr, &s->py_version))
		s->py_version = 0;
	rc = -ENOEXEC;
	if (elf_getphdrnum(elf, &nph))
		goto out;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (map_off >= (ph.p_offset & ~0xfffull) && map_off < ph.p_offset + ph.p_filesz) {
			*seg_off = ph.p_offset;
			*seg_vaddr = ph.p_vaddr;
			rc = 0;
			break;
		}
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

/* interp_read_syms of path, from the cache when the same file (device,
 * inode, size, modification time) was read for the same mapping offset. */
static int interp_syms_cached(struct python *py, const char *path, uint64_t map_off,
			      struct interp_syms *s, uint64_t *seg_off, uint64_t *seg_vaddr)
{
	struct interp_file *f;
	struct stat st;
	int64_t mtime_ns;
	int rc;

	if (stat(path, &st))
		return -errno;
	mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	for (size_t i = 0; i < py->nfiles; i++) {
		f = &py->files[i];
		if (f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
		    f->mtime_ns == mtime_ns && f->map_off == map_off) {
			*s = f->syms;
			*seg_off = f->seg_off;
			*seg_vaddr = f->seg_vaddr;
			return f->rc;
		}
	}
	rc = interp_read_syms(path, map_off, s, seg_off, seg_vaddr);
	if (rc && rc != -ENOENT && rc != -ENOEXEC)
		return rc; /* not an answer about the file: asked again next time */
	if (py->nfiles < INTERP_FILES) {
		f = &py->files[py->nfiles++];
	} else {
		f = &py->files[py->next_file];
		py->next_file = (py->next_file + 1) % INTERP_FILES;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime_ns = mtime_ns;
	f->map_off = map_off;
	f->rc = rc;
	f->syms = *s;
	f->seg_off = *seg_off;
	f->seg_vaddr = *seg_vaddr;
	return rc;
}

/* The byte offset of member name in struct or union type_id, looking
 * into anonymous members; -1 when there is none. */
static long btf_member_offset(const struct btf *btf, __u32 type_id, const char *name)
{
	const struct btf_type *t = btf__type_by_id(btf, type_id);
	const struct btf_member *mem;

	if (!t || (!btf_is_struct(t) && !btf_is_union(t)))
		return -1;
	mem = btf_members(t);
	for (__u16 i = 0; i < btf_vlen(t); i++, mem++) {
		const char *mname = btf__name_by_offset(btf, mem->name_off);
		long inner;

		if (mname && strcmp(mname, name) == 0)
			return (long)(btf_member_bit_offset(t, i) / 8);
		if (mname && mname[0])
			continue;
		/* an anonymous struct or union: look inside */
		inner = btf_member_offset(btf, btf__resolve_type(btf, mem->type), name);
		if (inner >= 0)
			return (long)(btf_member_bit_offset(t, i) / 8) + inner;
	}
	return -1;
}

/* thread.fsbase's offset in the kernel's task_struct, from its BTF. */
static long task_fsbase_offset(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	long thread = -1, fsbase = -1;
	__s32 task, thread_type;

	if (!btf)
		return -1;
	task = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	thread_type = btf__find_by_name_kind(btf, "thread_struct", BTF_KIND_STRUCT);
	if (task > 0 && thread_type > 0)
		thread = btf_member_offset(btf, (__u32)task, "thread");
	if (thread >= 0) {
		long off = btf_member_offset(btf, (__u32)thread_type, "fsbase");

		if (off >= 0)
			fsbase = thread + off;
	}
	btf__free(btf);
	return fsbase;
}

static ssize_t read_process(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};

	return process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
}

/* The interpreter file among pid's code mappings: a libpython wins over
 * the executable (pyenv's python3.X is a stub linking it). */
static const struct proc_mapping *interp_mapping(const struct proc_maps *maps, uint16_t *version)
{
	const struct proc_mapping *exe = NULL;
	uint16_t exe_version = 0;

	for (size_t i = 0; i < maps->n; i++) {
		const char *base = strrchr(maps->v[i].path, '/');
		uint16_t v = python_version_from_name(maps->v[i].path);

		if (!v || !base)
			continue;
		if (strncmp(base + 1, "libpython", 9) == 0) {
			*version = v;
			return &maps->v[i];
		}
		if (!exe) {
			exe = &maps->v[i];
			exe_version = v;
		}
	}
	*version = exe_version;
	return exe;
}

static int read_maps(const char *proc_root, uint32_t pid, struct proc_maps *maps)
{
	char path[256];
	struct buf text;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%u/maps", proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
	rc = procmaps_query(fd, maps);
	close(fd);
	if (rc != -EOPNOTSUPP)
		return rc;
	buf_init(&text);
	rc = buf_read_file(&text, path, 64u << 20);
	if (rc == 0)
		rc = procmaps_parse((const char *)text.data, text.len, maps, NULL);
	buf_free(&text);
	return rc;
}

static int process_add(struct python *py, const struct python_process *p)
{
	struct python_process *slot = NULL;

	for (size_t i = 0; i < py->nprocs && !slot; i++)
		if (py->procs[i].pid == p->pid && !py->procs[i].forgotten_ns)
			slot = &py->procs[i];
	if (!slot) {
		if (py->nprocs == py->procs_cap) {
			size_t cap = py->procs_cap ? py->procs_cap * 2 : 16;
			struct python_process *v = realloc(py->procs, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			py->procs = v;
			py->procs_cap = cap;
		}
		slot = &py->procs[py->nprocs++];
	}
	*slot = *p;
	return 0;
}

int python_load(struct python *py, const char *proc_root, uint32_t pid)
{
	struct proc_maps maps = {0};
	const struct proc_mapping *m;
	struct python_proc entry = {0};
	struct python_process proc = {.pid = pid};
	struct interp_syms syms;
	uint64_t seg_off = 0, seg_vaddr = 0, bias;
	uint16_t version = 0;
	char path[4352];
	int rc;

	/* Loaded again (the unwinder reloads a process that maps new code):
	 * its interpreter is still the one found, walked or not. */
	if (process_find(py, pid))
		return 0;
	rc = read_maps(proc_root, pid, &maps);
	if (rc)
		goto out;
	m = interp_mapping(&maps, &version);
	if (!m)
		goto out; /* not a CPython process */
	snprintf(path, sizeof(path), "%s/%u/root%s", proc_root, pid, m->path);
	rc = interp_syms_cached(py, path, m->offset, &syms, &seg_off, &seg_vaddr);
	if (rc) {
		/* a python3.X without the interpreter's symbols (a launcher,
		 * or a build without them): nothing to walk */
		rc = 0;
		goto out;
	}
	bias = m->start - m->offset + seg_off - seg_vaddr;
	if (syms.py_version)
		version = (uint16_t)(syms.py_version >> 16);
	if (!python_offsets_for(version, &entry.off, &entry.layout)) {
		ADD(python_unsupported, 1);
		process_add(py, &proc); /* version 0: known, not walked */
		log_debug("pid %u: CPython %d.%d has no offset table: native frames only", pid,
			  version >> 8, version & 0xff);
		goto out;
	}
	if (version >= 0x030d) {
		uint8_t dbg[PYTHON_DEBUG_OFFSETS_SIZE];
		char err[160];
		uint32_t hex;

		if (read_process(pid, syms.runtime + bias, dbg, sizeof(dbg)) !=
		    (ssize_t)sizeof(dbg)) {
			rc = -ENOENT;
			goto out;
		}
		if (python_debug_offsets_parse(dbg, sizeof(dbg), &entry.off, &hex, err,
					       sizeof(err))) {
			ADD(python_unsupported, 1);
			process_add(py, &proc); /* version 0: known, not walked */
			log_debug("pid %u: %s: native frames only", pid, err);
			goto out;
		}
	}
	if (version < 0x030b) {
		if (!py->fsbase_off) {
			struct timespec t0, t1;

			clock_gettime(CLOCK_MONOTONIC, &t0);
			py->fsbase_off = task_fsbase_offset();
			clock_gettime(CLOCK_MONOTONIC, &t1);
			log_debug("kernel BTF: task_struct.thread.fsbase at %ld (%.1f ms)",
				  py->fsbase_off,
				  (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
				      (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
		}
		if (py->fsbase_off < 0) {
			ADD(python_unsupported, 1);
			process_add(py, &proc); /* version 0: known, not walked */
			log_debug("pid %u: no thread.fsbase in the kernel's BTF: native frames "
				  "only",
				  pid);
			goto out;
		}
		entry.fsbase_off = (__u32)py->fsbase_off;
	}
	entry.runtime = syms.runtime + bias;
	entry.eval_start = syms.eval + bias;
	entry.eval_end = syms.eval + syms.eval_size + bias;
	entry.version = version;
	proc.version = version;
	proc.off = entry.off;
	proc.code_type = syms.code_type ? syms.code_type + bias : 0;
	proc.eval_start = entry.eval_start;
	proc.eval_end = entry.eval_end;
	rc = process_add(py, &proc);
	if (rc)
		goto out;
	if (bpf_map_update_elem(py->map_fd, &pid, &entry, BPF_ANY)) {
		rc = -errno;
		goto out;
	}
	ADD(python_processes, 1);
	log_debug("pid %u: CPython %d.%d, frames walked", pid, version >> 8, version & 0xff);
out:
	procmaps_free(&maps);
	return rc;
}

size_t python_interleave(const struct python *py, uint32_t pid, const uint64_t *native, size_t n,
			 const uint64_t *chain, size_t nchain, uint64_t *out, size_t max)
{
	const struct python_process *p = py ? process_find_any(py, pid) : NULL;

	if (!p || !p->eval_end)
		return 0;
	return python_merge_frames(p->eval_start, p->eval_end, native, n, chain, nchain, out, max);
}

bool python_held_frames(const struct python *py, struct sample_event *e, const uint64_t *native,
			size_t n)
{
	uint64_t out[PROFILER_MAX_USER_FRAMES];
	size_t at = (size_t)e->n_kernel + e->n_user, m;

	if (!e->n_python || at + e->n_python > PROFILER_MAX_FRAMES)
		return false;
	if (!native) {
		native = (const uint64_t *)&e->frames[e->n_kernel];
		n = e->n_user;
		for (size_t i = 0; i < n; i++)
			if (PYFRAME_IS(native[i]))
				return false; /* the kernel's walk found them */
	}
	m = python_interleave(py, e->pid, native, n, (const uint64_t *)&e->frames[at], e->n_python,
			      out, PROFILER_MAX_USER_FRAMES);
	if (!m)
		return false;
	memcpy(&e->frames[e->n_kernel], out, m * sizeof(out[0]));
	e->n_user = (uint16_t)m;
	e->n_python = 0;
	return true;
}

/* Whether an executable's or library's name is a CPython interpreter's. */
static bool interp_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return (strncmp(base, "python", 6) == 0 || strncmp(base, "libpython", 9) == 0) &&
	       python_version_from_name(path);
}

void python_note_mapping(struct python *py, const char *proc_root, uint32_t pid, const char *path)
{
	if (!py || !path || !interp_name(path) || process_find(py, pid))
		return;
	python_load(py, proc_root, pid);
}

void python_scan(struct python *py, const char *proc_root)
{
	struct dirent *d;
	DIR *dir = opendir(proc_root);
	size_t found = 0;

	if (!dir)
		return;
	while ((d = readdir(dir))) {
		char link[64], exe[4096];
		char *end;
		unsigned long pid = strtoul(d->d_name, &end, 10);
		ssize_t len;

		if (*end || !pid || pid > UINT32_MAX)
			continue;
		snprintf(link, sizeof(link), "%s/%lu/exe", proc_root, pid);
		len = readlink(link, exe, sizeof(exe) - 1);
		if (len <= 0)
			continue;
		exe[len] = '\0';
		/* pyenv's python3.X names its version; Debian's python3 links
		 * to python3.11, which readlink gave */
		if (!strstr(exe, "python"))
			continue;
		if (python_load(py, proc_root, (uint32_t)pid) == 0 &&
		    process_find(py, (uint32_t)pid))
			found++;
	}
	closedir(dir);
	log_debug("start-up: %zu CPython processes found", found);
}

void python_forget(struct python *py, uint32_t pid, uint64_t now_ns)
{
	struct python_process *p = process_find(py, pid);

	if (p)
		p->forgotten_ns = now_ns ? now_ns : 1;
}

/* ---- names ------------------------------------------------------------------------ */

/* A str object of p as UTF-8 (malloc'd), or NULL. */
static char *read_string(uint32_t pid, const struct python_offsets *o, uint64_t addr)
{
	uint8_t head[80];
	uint64_t length;
	unsigned kind, state;
	size_t data_at, n, i, out_len = 0;
	uint8_t *data = NULL;
	char *out = NULL;

	if (!addr || o->unicode_compact_size > sizeof(head) ||
	    read_process(pid, addr, head, o->unicode_compact_size) !=
		(ssize_t)o->unicode_compact_size)
		return NULL;
	memcpy(&length, head + o->unicode_length, 8);
	state = head[o->unicode_state];
	kind = (state >> 2) & 7;
	if (!(state & 0x20) || (kind != 1 && kind != 2 && kind != 4)) /* not compact */
		return NULL;
	data_at = (state & 0x40) ? o->unicode_ascii_size : o->unicode_compact_size;
	if (length > NAME_MAX_CHARS)
		length = NAME_MAX_CHARS;
	n = (size_t)length * kind;
	data = malloc(n + 1);
	out = malloc((size_t)length * 4 + 1);
	if (!data || !out || read_process(pid, addr + data_at, data, n) != (ssize_t)n)
		goto fail;
	for (i = 0; i < length; i++) {
		uint32_t c = kind == 1	 ? data[i]
			     : kind == 2 ? (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8
					 : (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
					       (uint32_t)data[4 * i + 2] << 16 |
					       (uint32_t)data[4 * i + 3] << 24;

		if (c < 0x80) {
			out[out_len++] = (char)c;
		} else if (c < 0x800) {
			out[out_len++] = (char)(0xc0 | c >> 6);
			out[out_len++] = (char)(0x80 | (c & 63));
		} else if (c < 0x10000) {
			out[out_len++] = (char)(0xe0 | c >> 12);
			out[out_len++] = (char)(0x80 | ((c >> 6) & 63));
			out[out_len++] = (char)(0x80 | (c & 63));
		} else if (c < 0x110000) {
			out[out_len++] = (char)(0xf0 | c >> 18);
			out[out_len++] = (char)(0x80 | ((c >> 12) & 63));
			out[out_len++] = (char)(0x80 | ((c >> 6) & 63));
			out[out_len++] = (char)(0x80 | (c & 63));
		} else {
			out[out_len++] = '?';
		}
	}
	out[out_len] = '\0';
	free(data);
	return out;
fail:
	free(data);
	free(out);
	return NULL;
}

/* A bytes object of p (malloc'd, *len bytes), or NULL. */
static uint8_t *read_bytes(uint32_t pid, const struct python_offsets *o, uint64_t addr, size_t *len)
{
	uint64_t size;
	uint8_t *data;

	if (!addr || read_process(pid, addr + o->bytes_size, &size, 8) != 8 || size > LINETABLE_MAX)
		return NULL;
	data = malloc(size ? size : 1);
	if (!data ||
	    (size && read_process(pid, addr + o->bytes_sval, data, size) != (ssize_t)size)) {
		free(data);
		return NULL;
	}
	*len = size;
	return data;
}

/* The identity of the code object at addr (struct python_code.ident):
 * 0, or -1 when it cannot be read or is not a code object. */
static int code_ident(const struct python_process *p, uint64_t addr, uint64_t ident[4])
{
	const struct python_offsets *o = &p->off;
	uint8_t buf[CODE_READ_BYTES];
	uint64_t type;
	int32_t first;

	if (!p->version || read_process(p->pid, addr, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		return -1;
	memcpy(&type, buf + 8, 8); /* ob_type */
	if (p->code_type && type != p->code_type)
		return -1; /* not a code object: a stale frame */
	if ((o->code_qualname != 0xffff && (size_t)o->code_qualname + 8 > sizeof(buf)) ||
	    (size_t)o->code_name + 8 > sizeof(buf) || (size_t)o->code_filename + 8 > sizeof(buf) ||
	    (size_t)o->code_linetable + 8 > sizeof(buf) ||
	    (size_t)o->code_firstlineno + 4 > sizeof(buf))
		return -1;
	memcpy(&ident[0], buf + (o->code_qualname != 0xffff ? o->code_qualname : o->code_name), 8);
	memcpy(&ident[1], buf + o->code_filename, 8);
	memcpy(&ident[2], buf + o->code_linetable, 8);
	memcpy(&first, buf + o->code_firstlineno, 4);
	ident[3] = (uint64_t)(int64_t)first;
	return 0;
}

static void code_read(const struct python_process *p, uint64_t addr, struct python_code *c)
{
	const struct python_offsets *o = &p->off;

	memset(c, 0, sizeof(*c));
	c->version = p->version;
	if (code_ident(p, addr, c->ident))
		return;
	c->name = read_string(p->pid, o, c->ident[0]);
	c->file = read_string(p->pid, o, c->ident[1]);
	if (!c->name || !c->file) {
		free(c->name);
		free(c->file);
		c->name = c->file = NULL;
		return;
	}
	c->first_line = (int)(int64_t)c->ident[3];
	c->linetable = read_bytes(p->pid, o, c->ident[2], &c->linetable_len);
	c->ok = true;
}

static size_t code_bytes(const struct python_code *c)
{
	return sizeof(*c) + sizeof(struct python_code_key) + 32 + c->linetable_len +
	       (c->name ? strlen(c->name) + strlen(c->file) + 2 : 0);
}

/* A code object named in an earlier drain: still the same one? (Memory
 * of a freed code object gets reused, by another code object too.) If
 * not, it is read again. */
static void code_revalidate(struct python *py, const struct python_process *p, uint64_t addr,
			    struct python_code *c)
{
	uint64_t ident[4];

	c->epoch = py->epoch;
	if (p->forgotten_ns || code_ident(p, addr, ident) ||
	    memcmp(ident, c->ident, sizeof(ident)) == 0)
		return;
	py->bytes -= py->bytes > code_bytes(c) ? code_bytes(c) : py->bytes;
	free(c->name);
	free(c->file);
	free(c->linetable);
	code_read(p, addr, c);
	c->epoch = py->epoch;
	py->bytes += code_bytes(c);
}

void python_new_drain(struct python *py)
{
	py->epoch++;
}

void python_note_frames(struct python *py, uint32_t pid, const uint64_t *frames, size_t n)
{
	const struct python_process *p = NULL;

	for (size_t i = 0; i < n; i++) {
		struct python_code_key key = {.pid = pid};
		struct python_code *c;
		uint64_t idx = py->ncodes;
		int rc;

		if (!PYFRAME_IS(frames[i]) || frames[i] == PYFRAME_GROUP_END)
			continue;
		key.code = PYFRAME_CODE(frames[i]);
		if (htab_get(py->names, &key, sizeof(key), &idx)) {
			if (idx < py->ncodes && py->codes[idx].epoch != py->epoch &&
			    (p || (p = process_find_any(py, pid))))
				code_revalidate(py, p, key.code, &py->codes[idx]);
			continue;
		}
		if (!p && !(p = process_find_any(py, pid)))
			return;
		if (py->ncodes == py->codes_cap) {
			size_t cap = py->codes_cap ? py->codes_cap * 2 : 256;
			struct python_code *v = realloc(py->codes, cap * sizeof(*v));

			if (!v)
				return;
			py->codes = v;
			py->codes_cap = cap;
		}
		rc = htab_put(py->names, &key, sizeof(key), idx);
		if (rc)
			return;
		c = &py->codes[py->ncodes++];
		code_read(p, key.code, c);
		c->epoch = py->epoch;
		if (!c->ok)
			ADD(python_code_unreadable, 1);
		py->bytes += code_bytes(c);
	}
}

bool python_frame_name(const struct python *py, uint32_t pid, uint64_t frame, const char **name,
		       const char **file, int64_t *line)
{
	struct python_code_key key = {.pid = pid, .code = PYFRAME_CODE(frame)};
	const struct python_code *c;
	uint64_t idx;
	int l;

	if (!py || !htab_get(py->names, &key, sizeof(key), &idx) || idx >= py->ncodes)
		return false;
	c = &py->codes[idx];
	if (!c->ok)
		return false;
	*name = c->name;
	*file = c->file;
	l = PYFRAME_INSTR(frame) == PYFRAME_INSTR_MAX
		? -1
		: python_line_for(c->version, c->linetable, c->linetable_len, c->first_line,
				  PYFRAME_INSTR(frame));
	*line = l > 0 ? l : c->first_line;
	return true;
}

static bool pid_gone(const uint32_t *gone, size_t ngone, uint32_t pid)
{
	for (size_t i = 0; i < ngone; i++)
		if (gone[i] == pid)
			return true;
	return false;
}

/* Keeps only the names of processes not in gone[]: a new table and a
 * compacted array (the table has no delete). */
static void names_drop(struct python *py, const uint32_t *gone, size_t ngone)
{
	struct htab *names = htab_new(htab_count(py->names));
	size_t *map = calloc(py->ncodes ? py->ncodes : 1, sizeof(*map));
	size_t iter = 0, klen, out = 0, old_n = py->ncodes;
	const void *key;
	uint64_t idx;

	if (!names || !map)
		goto drop_all;
	while (htab_next(py->names, &iter, &key, &klen, &idx)) {
		const struct python_code_key *k = key;

		if (idx < py->ncodes && pid_gone(gone, ngone, k->pid))
			map[idx] = SIZE_MAX;
	}
	for (size_t i = 0; i < py->ncodes; i++) {
		struct python_code *c = &py->codes[i];

		if (map[i] == SIZE_MAX) {
			py->bytes -= py->bytes > c->linetable_len ? c->linetable_len : py->bytes;
			free(c->name);
			free(c->file);
			free(c->linetable);
			continue;
		}
		map[i] = out;
		py->codes[out++] = *c;
	}
	py->ncodes = out;
	iter = 0;
	while (htab_next(py->names, &iter, &key, &klen, &idx)) {
		if (idx < old_n && map[idx] != SIZE_MAX && htab_put(names, key, klen, map[idx]))
			goto drop_all;
	}
	htab_free(py->names);
	py->names = names;
	free(map);
	return;
drop_all: /* out of memory: start over empty */
	htab_free(names);
	free(map);
	codes_free(py);
	htab_clear(py->names, 4096);
}

void python_reap_names(struct python *py, uint64_t cutoff_ns)
{
	uint32_t gone[64];
	size_t ngone = 0, out = 0;

	py->epoch++; /* if no drain hook bumps it */

	for (size_t i = 0; i < py->nprocs; i++) {
		if (py->procs[i].forgotten_ns && py->procs[i].forgotten_ns < cutoff_ns &&
		    ngone < sizeof(gone) / sizeof(gone[0]))
			gone[ngone++] = py->procs[i].pid;
		else
			py->procs[out++] = py->procs[i];
	}
	py->nprocs = out;
	if (py->bytes > NAMES_MAX_BYTES) {
		/* past the bound: everything goes, and what live processes'
		 * samples need is read again (python_note_frames before each
		 * window's profiles) */
		codes_free(py);
		htab_clear(py->names, 4096);
	} else if (ngone) {
		names_drop(py, gone, ngone);
	}
}

void python_update_metrics(struct python *py, const uint64_t *stats)
{
	SET(python_walks, stats[STAT_PY_WALKS]);
	SET(python_walk_ns, stats[STAT_PY_NS]);
	SET(python_kernel_frames, stats[STAT_PY_FRAMES]);
	for (int i = 0; i < PYTHON_FAIL_NR; i++)
		SET(python_fail[i], stats[STAT_PY_FAIL_FIRST + i]);
}
