/*
 * unwinder.c — the user-space half of the BPF stack unwinder: which
 * tables are in the kernel, which process maps which.
 *
 * Tables are per file (keyed by device and inode, as /proc/PID/maps shows
 * them), built once with src/unwind the first time a sample meets the
 * file's code, and shared by every process that maps it. Their rows go
 * into the kernel's row pool (unwind_pool.h: chunks added as tables
 * arrive, up to --unwind-table-max-bytes), cut into page-indexed segments
 * (src/unwind/paged.c). A table no process references is kept until its
 * room is wanted (least recently used first), so a process that runs the
 * same binary again finds it; only a full pool evicts.
 *
 * A process is loaded when its first sample arrives without tables
 * (UNWIND_STATUS_NO_PROCESS): its code mappings are read from
 * /proc/PID/maps, and each gets its file's table (or none: anonymous or
 * JIT code, a file without CFI, a spent budget; the BPF walk then tries
 * the frame pointer there). A sample whose pc lies in no known mapping
 * (UNWIND_STATUS_NO_MAPPING: dlopen, new JIT code) asks for a reload, at
 * most once per RELOAD_NS per process. The kernel side forgets a process
 * itself at exec and exit; unwinder_forget drops its references here.
 *
 * Files are opened through /proc/PID/map_files (the very file the process
 * maps, also in another mount namespace or deleted), else
 * /proc/PID/root/PATH, checked to be the mapped inode; never a FIFO or a
 * device (O_NONBLOCK, regular files only).
 */
#include "common/clock.h"
#include "agent/agent.h"
#include "agent/unwind_pool.h"
#include "common/htab.h"
#include "common/log.h"
#include "unwind/unwind.h"

#include <bpf/bpf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RELOAD_NS (1000ull * 1000000)
/* A file whose table could not be built is asked again after this. */
#define RETRY_NS  (60ull * 1000000000)
#define MAX_LOADS 8

struct file_key {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
};

/* One file's table in the kernel. */
struct unwind_file {
	struct file_key key;
	/* Where its page index is (npages == 0: no table), and the pool
	 * slots it holds (index and segments). */
	uint32_t pages, page0, npages;
	struct unwind_extent *allocs;
	size_t nallocs;
	uint64_t nslots;
	bool failed;	    /* no table: no CFI, not x86-64 ELF, or over budget */
	uint64_t failed_ns; /* when, to retry after RETRY_NS */
	unsigned refs;	    /* processes mapping it */
	uint64_t last_used_ns;
	size_t nloads;
	struct elf_load loads[MAX_LOADS];
	struct unwind_file *lru_prev, *lru_next; /* unreferenced tables, oldest first */
};

struct unwind_process {
	uint32_t pid;
	uint64_t loaded_ns;
	struct proc_maps maps;	    /* the code mappings up->m[i] describes maps.v[i] */
	struct unwind_file **files; /* per mapping, referenced; NULL: none or pending */
	struct unwind_proc *up;	    /* what the kernel has (NULL: not loaded) */
};

struct unwinder {
	int procs_fd;
	struct unwind_pool pool;
	const char *debug_dir;
	struct agent_metrics *m;
	struct htab *files; /* file_key -> struct unwind_file * */
	struct htab *procs; /* pid -> struct unwind_process * */
	struct unwind_file *lru_head, *lru_tail;
	struct unwind_file vdso; /* the kernel's vDSO, the same in every process */
	uint64_t rows_used;	 /* pool slots tables hold, the vDSO's included */
	size_t ntables;		 /* files with rows there, the vDSO included */
	size_t nprocs;		 /* entries of procs */
	const char *proc_root;	 /* of the last load: where pending tables' files are */
	uint64_t now;		 /* of the walk under way */
};

#define ADD(f, v) atomic_fetch_add_explicit(&u->m->f, (v), memory_order_relaxed)
#define SET(f, v) atomic_store_explicit(&u->m->f, (v), memory_order_relaxed)

/* ---- the table cache ------------------------------------------------------ */

static void lru_unlink(struct unwinder *u, struct unwind_file *f)
{
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else if (u->lru_head == f)
		u->lru_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else if (u->lru_tail == f)
		u->lru_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
}

static void lru_append(struct unwinder *u, struct unwind_file *f)
{
	f->lru_prev = u->lru_tail;
	f->lru_next = NULL;
	if (u->lru_tail)
		u->lru_tail->lru_next = f;
	else
		u->lru_head = f;
	u->lru_tail = f;
}

/* Gives a table's slots back to the pool: quarantined if the kernel may
 * be reading them (published), else at once. */
static void file_drop_rows(struct unwinder *u, struct unwind_file *f, bool published, uint64_t now)
{
	for (size_t i = 0; i < f->nallocs; i++) {
		if (published)
			unwind_pool_release(&u->pool, f->allocs[i].slot, f->allocs[i].n, now);
		else
			unwind_pool_unalloc(&u->pool, f->allocs[i].slot, f->allocs[i].n);
	}
	free(f->allocs);
	f->allocs = NULL;
	f->nallocs = 0;
	u->rows_used -= f->nslots;
	f->nslots = 0;
	f->npages = 0;
}

/* Gives an unreferenced table's slots back and forgets it. */
static void file_evict(struct unwinder *u, struct unwind_file *f, uint64_t now)
{
	lru_unlink(u, f);
	if (f->npages) {
		u->ntables--;
		ADD(unwind_tables_evicted, 1);
	}
	file_drop_rows(u, f, true, now);
	htab_put(u->files, &f->key, sizeof(f->key), 0);
	free(f);
}

static void file_release(struct unwinder *u, struct unwind_file *f, uint64_t now)
{
	if (f == &u->vdso || !f->refs)
		return;
	f->last_used_ns = now;
	if (--f->refs == 0)
		lru_append(u, f);
}

/* n slots for f, evicting unreferenced tables oldest first when the pool
 * is full. */
static bool file_alloc(struct unwinder *u, struct unwind_file *f, uint32_t n, uint32_t *slot,
		       uint64_t now)
{
	struct unwind_extent *v;

	v = realloc(f->allocs, (f->nallocs + 1) * sizeof(*v));
	if (!v)
		return false;
	f->allocs = v;
	while (!unwind_pool_alloc(&u->pool, n, slot, now)) {
		if (!u->lru_head)
			return false;
		file_evict(u, u->lru_head, now);
	}
	f->allocs[f->nallocs++] = (struct unwind_extent){.slot = *slot, .n = n};
	f->nslots += n;
	u->rows_used += n;
	return true;
}

/* The PT_LOADs of elf (for mapping biases). */
static void read_loads(Elf *elf, struct unwind_file *f)
{
	size_t nph = 0;

	f->nloads = 0;
	if (elf_getphdrnum(elf, &nph) != 0)
		return;
	for (size_t i = 0; i < nph && f->nloads < MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		f->loads[f->nloads++] = (struct elf_load){.offset = ph.p_offset,
							  .vaddr = ph.p_vaddr,
							  .filesz = ph.p_filesz,
							  .flags = ph.p_flags};
	}
}

/* Slots held by tables no process references (what eviction can free). */
static uint64_t lru_slots(const struct unwinder *u)
{
	uint64_t n = 0;

	for (const struct unwind_file *f = u->lru_head; f; f = f->lru_next)
		n += f->nslots;
	return n;
}

/* Copies n rows into the pool at slot (within one chunk). 0, or -ENOMEM
 * when the chunk could not be mapped. */
static int pool_write(struct unwinder *u, uint32_t slot, const void *rows, uint32_t n)
{
	struct unwind_row *at = unwind_pool_at(&u->pool, slot);

	if (!at)
		return -ENOMEM;
	memcpy(at, rows, (size_t)n * sizeof(struct unwind_row));
	return 0;
}

/* Cuts t into page-indexed segments and copies them into the pool. */
static int upload(struct unwinder *u, struct unwind_file *f, const struct unwind_table *t,
		  uint64_t now)
{
	struct unwind_layout l;
	struct unwind_page *pages = NULL;
	uint32_t *slots = NULL, index_slot;
	uint64_t need;
	int rc;

	rc = unwind_layout_plan(t, UNWIND_CHUNK_ROWS, &l);
	if (rc)
		return rc == -EINVAL ? -E2BIG : rc;
	need = l.npages;
	for (size_t i = 0; i < l.nsegs; i++)
		need += l.segs[i].nrows;
	if (need > (uint64_t)u->pool.max_chunks * UNWIND_CHUNK_ROWS) {
		rc = -E2BIG;
		goto out;
	}
	/* Not even with every unused table evicted: give up before taking
	 * anything (a half-uploaded table would only have evicted others). */
	if (need > unwind_pool_room(&u->pool, now) + lru_slots(u)) {
		rc = -ENOSPC;
		goto out;
	}
	slots = calloc(l.nsegs, sizeof(*slots));
	pages = calloc(l.npages, sizeof(*pages));
	if (!slots || !pages) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l.nsegs; i++) {
		if (!file_alloc(u, f, l.segs[i].nrows, &slots[i], now)) {
			rc = -ENOSPC;
			goto out;
		}
		rc = pool_write(u, slots[i], &t->rows[l.segs[i].row], l.segs[i].nrows);
		if (rc)
			goto out;
	}
	if (!file_alloc(u, f, l.npages, &index_slot, now)) {
		rc = -ENOSPC;
		goto out;
	}
	unwind_layout_pages(t, &l, slots, pages);
	rc = pool_write(u, index_slot, pages, l.npages);
	if (rc)
		goto out;
	f->pages = index_slot;
	f->page0 = l.page0;
	f->npages = l.npages;
	u->ntables++;
	rc = 0;
out:
	if (rc)
		file_drop_rows(u, f, false, now);
	free(slots);
	free(pages);
	unwind_layout_free(&l);
	return rc;
}

/* Builds and uploads the table of an open file. */
static void file_build(struct unwinder *u, struct unwind_file *f, int fd, const char *what,
		       uint64_t now)
{
	struct unwind_table t;
	struct kiln_error err = {0};
	uint64_t t0 = (uint64_t)mono_ns(), dt;
	Elf *elf;
	int rc;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf) {
		read_loads(elf, f);
		elf_end(elf);
	}
	rc = unwind_table_build(fd, u->debug_dir, &t, &err);
	dt = (uint64_t)mono_ns() - t0;
	ADD(unwind_table_builds, 1);
	ADD(unwind_table_build_ns, dt);
	if (rc == 0) {
		rc = upload(u, f, &t, now);
		if (rc == -ENOSPC || rc == -E2BIG) {
			ADD(unwind_tables_over_budget, 1);
			log_debug("unwind: %s: %zu rows do not fit the table memory", what, t.n);
		}
		unwind_table_free(&t);
	} else {
		log_debug("unwind: %s: %s", what, err.msg);
	}
	if (rc) {
		ADD(unwind_table_failures, 1);
		f->failed = true;
		f->failed_ns = now;
	} else {
		log_debug("unwind: %s: %llu rows in %.2f ms", what, (unsigned long long)f->nslots,
			  (double)dt / 1e6);
	}
}

/* Opens the file a process maps at m, without following it into a FIFO or
 * device; -1 when it cannot be had. */
static int open_mapped(const char *proc_root, uint32_t pid, const struct proc_mapping *m)
{
	char path[4200];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/map_files/%llx-%llx", proc_root, pid,
		 (unsigned long long)m->start, (unsigned long long)m->limit);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && m->path[0] == '/') {
		snprintf(path, sizeof(path), "%s/%u/root%s", proc_root, pid, m->path);
		fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != m->inode) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The table of the file mapped at m, built if needed; referenced. NULL
 * when there is none (the mapping gets no rows). */
static struct unwind_file *file_get(struct unwinder *u, const char *proc_root, uint32_t pid,
				    const struct proc_mapping *m, uint64_t now)
{
	struct file_key key = {m->dev_major, m->dev_minor, m->inode};
	struct unwind_file *f = NULL;
	uint64_t v;
	int fd;

	if (htab_get(u->files, &key, sizeof(key), &v) && v)
		f = (struct unwind_file *)(uintptr_t)v;
	if (f && f->failed && now - f->failed_ns >= RETRY_NS && !f->refs) {
		lru_unlink(u, f);
		htab_put(u->files, &key, sizeof(key), 0);
		free(f);
		f = NULL;
	}
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return NULL;
		f->key = key;
		if (htab_put(u->files, &key, sizeof(key), (uint64_t)(uintptr_t)f) != 0) {
			free(f);
			return NULL;
		}
		fd = open_mapped(proc_root, pid, m);
		if (fd < 0) {
			/* This process is gone (a short one), not the file:
			 * nothing is remembered, so that the next process
			 * mapping it gets its table (a failure would stand
			 * for as long as any process holds the file). */
			htab_put(u->files, &key, sizeof(key), 0);
			free(f);
			return NULL;
		}
		file_build(u, f, fd, m->path, now);
		close(fd);
	}
	if (f->refs++ == 0 && (f->lru_prev || f->lru_next || u->lru_head == f))
		lru_unlink(u, f);
	f->last_used_ns = now;
	return f;
}

/* The kernel's vDSO, read from this process's own (every process of this
 * kernel maps the same image). */
static void vdso_load(struct unwinder *u)
{
	const unsigned char *image = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
	struct unwind_table t;
	struct kiln_error err = {0};
	Elf *elf;
	size_t len;

	if (!image || memcmp(image, ELFMAG, SELFMAG) != 0 || image[EI_CLASS] != ELFCLASS64)
		return;
	len = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)image, len);
	if (elf) {
		read_loads(elf, &u->vdso);
		elf_end(elf);
	}
	if (unwind_table_build_mem(image, len, &t, &err) != 0) {
		log_debug("unwind: [vdso]: %s", err.msg);
		return;
	}
	if (upload(u, &u->vdso, &t, (uint64_t)mono_ns()) != 0)
		u->vdso.npages = 0;
	unwind_table_free(&t);
}

/* ---- processes -------------------------------------------------------------- */

static void process_free(struct unwinder *u, struct unwind_process *p, uint64_t now)
{
	if (!p)
		return;
	for (size_t i = 0; p->files && i < p->maps.n; i++)
		if (p->files[i])
			file_release(u, p->files[i], now);
	free(p->files);
	free(p->up);
	procmaps_free(&p->maps);
	free(p);
}

/* The mapping bias: what to subtract from an address to get the file's
 * virtual address (the PT_LOAD holding the mapping's file offset). */
static bool mapping_bias(const struct unwind_file *f, const struct proc_mapping *m, uint64_t *bias)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct elf_load *l = &f->loads[i];

		if (m->offset >= l->offset && m->offset < l->offset + l->filesz &&
		    (l->flags & PF_X)) {
			*bias = m->start - m->offset + l->offset - l->vaddr;
			return true;
		}
	}
	return false;
}

/* Remembers a load that failed (a process gone, a kernel thread), so that
 * its later samples do not retry before RELOAD_NS. */
static void note_failed_load(struct unwinder *u, uint32_t pid, uint64_t now)
{
	struct unwind_process *p;
	uint64_t v;

	if (htab_get(u->procs, &pid, sizeof(pid), &v) && v) {
		((struct unwind_process *)(uintptr_t)v)->loaded_ns = now;
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->pid = pid;
	p->loaded_ns = now;
	if (htab_put(u->procs, &pid, sizeof(pid), (uint64_t)(uintptr_t)p) != 0)
		free(p);
	else
		u->nprocs++;
}

/* Points mapping i of p at its file's table, or at none (the BPF walk
 * then tries the frame pointer there). */
static void mapping_set(struct unwinder *u, struct unwind_process *p, size_t i,
			struct unwind_file *f)
{
	const struct proc_mapping *m = &p->maps.v[i];
	struct unwind_mapping *um = &p->up->m[i];
	uint64_t bias;

	um->pages = um->page0 = um->npages = 0;
	if (f && !f->failed && f->npages && mapping_bias(f, m, &bias)) {
		um->bias = bias;
		um->pages = f->pages;
		um->page0 = f->page0;
		um->npages = f->npages;
	}
}

/* An already built table of the file mapped at m, referenced; NULL when
 * none was built (or it failed, which is also given back as none). */
static struct unwind_file *file_built(struct unwinder *u, const struct proc_mapping *m, bool *known)
{
	struct file_key key = {m->dev_major, m->dev_minor, m->inode};
	struct unwind_file *f;
	uint64_t v;

	*known = false;
	if (!htab_get(u->files, &key, sizeof(key), &v) || !v)
		return NULL;
	f = (struct unwind_file *)(uintptr_t)v;
	*known = true;
	if (f->refs++ == 0 && (f->lru_prev || f->lru_next || u->lru_head == f))
		lru_unlink(u, f);
	return f;
}

/* Builds the table of p's mapping i if it is pending. True when the
 * mapping changed (the kernel's copy needs an update). */
static bool mapping_build(struct unwinder *u, struct unwind_process *p, size_t i, uint64_t now)
{
	struct unwind_file *f;

	if (p->up->m[i].pages != UNWIND_PAGES_PENDING || p->files[i] || !u->proc_root)
		return false;
	f = file_get(u, u->proc_root, p->pid, &p->maps.v[i], now);
	p->files[i] = f;
	mapping_set(u, p, i, f);
	return true;
}

int unwinder_load(struct unwinder *u, const char *proc_root, uint32_t pid, uint64_t now)
{
	struct unwind_process *p = NULL, *old = NULL;
	char path[256];
	uint64_t v;
	int fd, rc;

	u->proc_root = proc_root;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->loaded_ns = now;
	snprintf(path, sizeof(path), "%s/%u/maps", proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = procmaps_query(fd, &p->maps);
	close(fd);
	if (rc == -EOPNOTSUPP) { /* before Linux 6.11: the text */
		struct buf text;

		buf_init(&text);
		rc = buf_read_file(&text, path, 64u << 20);
		if (rc == 0)
			rc = procmaps_parse((const char *)text.data, text.len, &p->maps, NULL);
		buf_free(&text);
	}
	if (rc)
		goto out;
	if (p->maps.n == 0) { /* a kernel thread, or gone */
		rc = -ENOENT;
		goto out;
	}
	if (p->maps.n > UNWIND_MAX_MAPPINGS) {
		ADD(unwind_mappings_dropped, p->maps.n - UNWIND_MAX_MAPPINGS);
		while (p->maps.n > UNWIND_MAX_MAPPINGS)
			free(p->maps.v[--p->maps.n].path);
	}
	p->up = calloc(1, sizeof(*p->up));
	p->files = calloc(p->maps.n, sizeof(*p->files));
	if (!p->up || !p->files) {
		rc = -ENOMEM;
		goto out;
	}
	/* Tables already built are used at once; the others are built when
	 * a sample first meets their code (mapping_build, from
	 * unwinder_walk), so a process mapping fifty libraries costs the few
	 * its samples run in. */
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct proc_mapping *m = &p->maps.v[i];
		struct unwind_mapping *um = &p->up->m[i];
		bool known = false;

		um->start = m->start;
		um->end = m->limit;
		if (strcmp(m->path, "[vdso]") == 0) {
			mapping_set(u, p, i, u->vdso.npages ? &u->vdso : NULL);
		} else if (m->path[0] == '/' && m->inode) {
			p->files[i] = file_built(u, m, &known);
			if (known)
				mapping_set(u, p, i, p->files[i]);
			else
				um->pages = UNWIND_PAGES_PENDING;
		}
	}
	p->up->n = (uint32_t)p->maps.n;
	rc = bpf_map_update_elem(u->procs_fd, &pid, p->up, BPF_ANY) ? -errno : 0;
	if (rc)
		goto out;
	if (htab_get(u->procs, &pid, sizeof(pid), &v) && v)
		old = (struct unwind_process *)(uintptr_t)v;
	rc = htab_put(u->procs, &pid, sizeof(pid), (uint64_t)(uintptr_t)p);
	if (rc) {
		bpf_map_delete_elem(u->procs_fd, &pid);
		goto out;
	}
	if (!old)
		u->nprocs++;
	process_free(u, old, now);
	p = NULL;
	ADD(unwind_process_loads, 1);
out:
	if (p)
		process_free(u, p, now);
	if (rc && rc != -ENOMEM)
		note_failed_load(u, pid, now);
	if (rc)
		log_debug("unwind: pid %u: not loaded: %s", pid, strerror(-rc));
	unwinder_update_metrics(u);
	return rc;
}

bool unwinder_reload_due(struct unwinder *u, uint32_t pid, uint64_t now)
{
	uint64_t v;

	if (!htab_get(u->procs, &pid, sizeof(pid), &v) || !v)
		return true;
	return now - ((struct unwind_process *)(uintptr_t)v)->loaded_ns >= RELOAD_NS;
}

bool unwinder_forget(struct unwinder *u, uint32_t pid, uint64_t now)
{
	uint64_t v;

	if (!htab_get(u->procs, &pid, sizeof(pid), &v) || !v)
		return false;
	bpf_map_delete_elem(u->procs_fd, &pid); /* the kernel side did already */
	htab_put(u->procs, &pid, sizeof(pid), 0);
	u->nprocs--;
	process_free(u, (struct unwind_process *)(uintptr_t)v, now);
	unwinder_update_metrics(u);
	return true;
}

void unwinder_idle(struct unwinder *u)
{
	if (u)
		unwind_pool_unmap(&u->pool);
}

void unwinder_update_metrics(struct unwinder *u)
{
	SET(unwind_tables, u->ntables);
	SET(unwind_processes, u->nprocs);
	SET(unwind_table_bytes, u->rows_used * sizeof(struct unwind_row));
	SET(unwind_table_bytes_max,
	    (uint64_t)u->pool.max_chunks * UNWIND_CHUNK_ROWS * sizeof(struct unwind_row));
	SET(unwind_map_bytes, unwind_pool_bytes(&u->pool));
}

/* ---- walking a copied stack ------------------------------------------------ */

/* The walk of unwind.bpf.h, in user space, over a copy of the stack: for
 * the samples a process took before its tables were in the kernel. The
 * rules are the same; a word outside the copy ends the walk
 * (READ_FAULT). */
struct copied_stack {
	uint64_t at;
	const uint8_t *bytes;
	size_t len;
};

static bool read_copied(const struct copied_stack *s, uint64_t addr, uint64_t *out)
{
	if (addr < s->at || addr - s->at > s->len || s->len - (addr - s->at) < 8)
		return false;
	memcpy(out, s->bytes + (addr - s->at), 8);
	return true;
}

static const struct unwind_row *pool_slot(void *ctx, uint32_t slot)
{
	return unwind_pool_at(ctx, slot);
}

static const struct unwind_mapping *walk_mapping(const struct unwind_proc *up, uint64_t pc)
{
	size_t lo = 0, hi = up->n < UNWIND_MAX_MAPPINGS ? up->n : UNWIND_MAX_MAPPINGS;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (up->m[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && pc < up->m[lo - 1].end ? &up->m[lo - 1] : NULL;
}

static int walk_copied(struct unwinder *u, uint32_t pid, const uint64_t regs[3],
		       const uint8_t *stack, size_t stack_len, uint64_t *frames, size_t max,
		       uint8_t *status, bool *changed_out);

int unwinder_walk(struct unwinder *u, uint32_t pid, const uint64_t regs[3], const uint8_t *stack,
		  size_t stack_len, uint64_t *frames, size_t max, uint8_t *status, uint64_t now)
{
	bool changed = false;
	int n;

	u->now = now;
	n = walk_copied(u, pid, regs, stack, stack_len, frames, max, status, &changed);
	if (changed) {
		uint64_t v;

		if (htab_get(u->procs, &pid, sizeof(pid), &v) && v)
			bpf_map_update_elem(u->procs_fd, &pid,
					    ((struct unwind_process *)(uintptr_t)v)->up, BPF_ANY);
		unwinder_update_metrics(u);
	}
	return n;
}

static int walk_copied(struct unwinder *u, uint32_t pid, const uint64_t regs[3],
		       const uint8_t *stack, size_t stack_len, uint64_t *frames, size_t max,
		       uint8_t *status, bool *changed_out)
{
	struct copied_stack s = {.at = regs[1], .bytes = stack, .len = stack_len};
	uint64_t pc = regs[0], sp = regs[1], bp = regs[2], v;
	struct unwind_process *p;
	const struct unwind_proc *up;
	bool bp_valid = true, exact = true;
	bool *changed = changed_out;
	size_t n = 0;

	if (!htab_get(u->procs, &pid, sizeof(pid), &v) || !v)
		return -ENOENT;
	p = (struct unwind_process *)(uintptr_t)v;
	if (!(up = p->up))
		return -ENOENT;
	*status = UNWIND_STATUS_DEPTH;
	while (n < max) {
		uint64_t lookup = exact ? pc : pc - 1, cfa, ra, rel;
		const struct unwind_mapping *m;
		int64_t found = -1;
		uint32_t rule = 0;

		if (pc == 0) {
			*status = UNWIND_STATUS_COMPLETE;
			break;
		}
		m = walk_mapping(up, lookup);
		if (!m) {
			if (n == 0)
				frames[n++] = pc;
			*status = UNWIND_STATUS_NO_MAPPING;
			break;
		}
		frames[n++] = pc;
		/* Code no table was built for yet: build it now (and tell the
		 * kernel, so that its own walks have it from now on). */
		if (mapping_build(u, p, (size_t)(m - up->m), u->now))
			*changed = true;
		rel = lookup - m->bias;
		if (m->npages && rel <= UINT32_MAX) {
			struct unwind_paged pt = {.pages = m->pages,
						  .page0 = m->page0,
						  .npages = m->npages,
						  .slot = pool_slot,
						  .ctx = &u->pool};

			found = unwind_paged_find(&pt, (uint32_t)rel);
		}
		if (found >= 0)
			rule = (uint32_t)found;
		if (found < 0 || UNWIND_RULE_KIND(rule) == UNWIND_NONE) {
			/* No table here: the frame pointer, as the kernel walks. */
			uint64_t pair[2];

			if (!bp_valid || bp <= sp || !read_copied(&s, bp, &pair[0]) ||
			    !read_copied(&s, bp + 8, &pair[1])) {
				*status =
				    !m->npages ? UNWIND_STATUS_NO_TABLE : UNWIND_STATUS_TABLE_MISS;
				break;
			}
			sp = bp + 16;
			bp = pair[0];
			pc = pair[1];
			exact = false;
			continue;
		}
		switch (UNWIND_RULE_KIND(rule)) {
		case UNWIND_CFA_SP:
			cfa = sp + UNWIND_RULE_OFF(rule);
			break;
		case UNWIND_CFA_FP:
			if (!bp_valid) {
				*status = UNWIND_STATUS_NO_TABLE;
				return (int)n;
			}
			cfa = bp + UNWIND_RULE_OFF(rule);
			break;
		case UNWIND_CFA_PLT:
			cfa = sp + 8 + ((pc & 15) >= UNWIND_RULE_OFF(rule) ? 8 : 0);
			break;
		case UNWIND_SIGNAL:
			if (!read_copied(&s, sp + UNWIND_SIGNAL_RIP_AT, &pc) ||
			    !read_copied(&s, sp + UNWIND_SIGNAL_RBP_AT, &bp) ||
			    !read_copied(&s, sp + UNWIND_SIGNAL_RSP_AT, &sp)) {
				*status = UNWIND_STATUS_READ_FAULT;
				return (int)n;
			}
			bp_valid = true;
			exact = true;
			continue;
		case UNWIND_END:
			*status = UNWIND_STATUS_COMPLETE;
			return (int)n;
		default:
			*status = UNWIND_STATUS_UNSUPPORTED;
			return (int)n;
		}
		if (cfa <= sp) {
			*status = UNWIND_STATUS_BAD_FRAME;
			break;
		}
		if (!read_copied(&s, cfa - 8, &ra)) {
			*status = UNWIND_STATUS_READ_FAULT;
			break;
		}
		if (UNWIND_RULE_RBP(rule) == UNWIND_RBP_AT_CFA) {
			if (!read_copied(&s, cfa + 8 * (int64_t)UNWIND_RULE_RBP_OFF(rule), &bp)) {
				*status = UNWIND_STATUS_READ_FAULT;
				break;
			}
			bp_valid = true;
		} else if (UNWIND_RULE_RBP(rule) == UNWIND_RBP_UNDEFINED) {
			bp_valid = false;
		}
		sp = cfa;
		pc = ra;
		exact = false;
	}
	return (int)n;
}

struct unwinder *unwinder_new(const struct sampler_unwind_maps *maps, const char *debug_dir,
			      struct agent_metrics *m)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->procs_fd = maps->procs_fd;
	unwind_pool_init(&u->pool, maps->chunks_fd, maps->max_chunks, maps->pool_gen);
	u->debug_dir = debug_dir;
	u->m = m;
	u->files = htab_new(256);
	u->procs = htab_new(256);
	if (!u->files || !u->procs) {
		unwinder_free(u);
		return NULL;
	}
	vdso_load(u);
	unwinder_update_metrics(u);
	return u;
}

void unwinder_free(struct unwinder *u)
{
	size_t iter = 0, klen;
	const void *key;
	uint64_t v;

	if (!u)
		return;
	while (u->procs && htab_next(u->procs, &iter, &key, &klen, &v))
		if (v)
			process_free(u, (struct unwind_process *)(uintptr_t)v, 0);
	iter = 0;
	while (u->files && htab_next(u->files, &iter, &key, &klen, &v)) {
		if (!v)
			continue;
		free(((struct unwind_file *)(uintptr_t)v)->allocs);
		free((struct unwind_file *)(uintptr_t)v);
	}
	free(u->vdso.allocs);
	htab_free(u->files);
	htab_free(u->procs);
	unwind_pool_free(&u->pool);
	free(u);
}
