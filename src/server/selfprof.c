/*
 * selfprof.c — GET /debug/pprof/profile?seconds=N: a CPU profile of the
 * server's own threads, in the shape Go's net/http/pprof serves, so that
 * Kiln can scrape itself (the default kiln.yaml does).
 *
 * How: perf events on this process (PERF_COUNT_SW_CPU_CLOCK, every 10 ms of
 * CPU time, user-space callchains walked by the kernel through frame
 * pointers — Kiln builds with -fno-omit-frame-pointer): one event with a
 * small mmap ring per thread, drained every 100 ms while the profile runs;
 * the thread list is rescanned at each drain, so threads started during the
 * profile (one per HTTP connection) are followed from their first 100 ms. Addresses are
 * symbolized from the ELF symbol tables (.symtab, else .dynsym) of the
 * mapped files, read with libelf: enough for function names of the server
 * and of the libraries' exported functions. One profile at a time: a second
 * request gets 409, as Go's handler refuses a concurrent CPU profile.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "pprof/pprof.h"
#include "server/handlers.h"
#include "symbols/symbols.h"

#define RING_PAGES  8 /* data pages per thread; drained every 100 ms */
#define PERIOD_NS   10000000ULL
#define MAX_THREADS 1024
#define MAX_SECONDS 300

/* The profiler is a process-wide resource (perf events on our own threads);
 * this lock makes requests take turns. */
static pthread_mutex_t profiling_lock = PTHREAD_MUTEX_INITIALIZER;

struct ring {
	int fd;
	pid_t tid;
	void *base;
	size_t size; /* data area */
};

struct sym {
	uint64_t start, end;
	const char *name;
};

struct elf_file {
	char *path;
	/* GNU build ID (hex, "" if none): the server finds symbols by build
	 * ID only, its own binary's included (debuginfo_config.own_files). */
	char build_id[SYMBOLS_BUILD_ID_MAX + 1];
	uint64_t bias_vaddr; /* p_vaddr - p_offset of the executable PT_LOAD */
	struct sym *syms;
	size_t n_syms;
	char *strings; /* owned copy of the names */
};

struct mapping {
	uint64_t start, end, offset;
	struct elf_file *file; /* NULL = anonymous or unreadable */
	uint64_t pprof_id;
};

struct selfprof {
	struct ring rings[MAX_THREADS];
	size_t n_rings;
	struct pprof_builder *b;
	struct mapping *maps;
	size_t n_maps;
	struct elf_file **files;
	size_t n_files;
	uint64_t samples;
};

/* ---- symbols ------------------------------------------------------------------ */

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static void load_section_syms(Elf *e, Elf_Scn *scn, GElf_Shdr *sh, struct buf *names,
			      struct sym **syms, size_t *n, size_t *cap)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t cnt = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	for (size_t i = 0; d && i < cnt; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
		    s.st_value == 0)
			continue;
		const char *nm = elf_strptr(e, sh->sh_link, s.st_name);
		if (!nm || !*nm)
			continue;
		if (GROW_ARRAY(*syms, *cap, *n + 1, 1024))
			return;
		(*syms)[*n].start = s.st_value;
		(*syms)[*n].end = s.st_value + (s.st_size ? s.st_size : 1);
		(*syms)[*n].name = (const char *)(uintptr_t)names->len; /* offset for now */
		buf_append(names, nm, strlen(nm) + 1);
		(*n)++;
	}
}

static struct elf_file *elf_file_load(const char *path)
{
	struct elf_file *f = calloc(1, sizeof(*f));
	struct buf names;
	size_t cap = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf_init(&names);
	if (!f || !(f->path = strdup(path)) || fd < 0)
		goto out;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		goto out;
	size_t phnum = 0;
	elf_getphdrnum(e, &phnum);
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			f->bias_vaddr = ph.p_vaddr - ph.p_offset;
			break;
		}
	}
	/* .symtab when present (all functions), else .dynsym (exported). */
	for (int want = SHT_SYMTAB; want >= SHT_DYNSYM && f->n_syms == 0;
	     want = want == SHT_SYMTAB ? SHT_DYNSYM : SHT_DYNSYM - 1) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (gelf_getshdr(scn, &sh) && sh.sh_type == (GElf_Word)want)
				load_section_syms(e, scn, &sh, &names, &f->syms, &f->n_syms, &cap);
		}
	}
	elf_end(e);
	f->strings = (char *)buf_steal(&names, &cap);
	for (size_t i = 0; i < f->n_syms; i++)
		f->syms[i].name = f->strings + (uintptr_t)f->syms[i].name;
	if (f->n_syms > 1)
		qsort(f->syms, f->n_syms, sizeof(*f->syms), sym_cmp);
out:
	if (fd >= 0)
		close(fd);
	buf_free(&names);
	return f;
}

static void elf_file_free(struct elf_file *f)
{
	if (!f)
		return;
	free(f->path);
	free(f->syms);
	free(f->strings);
	free(f);
}

static const char *elf_file_lookup(const struct elf_file *f, uint64_t vaddr)
{
	size_t lo = 0, hi = f->n_syms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f->syms[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct sym *s = &f->syms[lo - 1];
	return vaddr < s->end ? s->name : NULL;
}

/* ---- mappings ------------------------------------------------------------------ */

static struct elf_file *file_for(struct selfprof *p, const char *path)
{
	for (size_t i = 0; i < p->n_files; i++)
		if (strcmp(p->files[i]->path, path) == 0)
			return p->files[i];
	struct elf_file **v = realloc(p->files, (p->n_files + 1) * sizeof(*v));
	if (!v)
		return NULL;
	p->files = v;
	struct elf_file *f = elf_file_load(path);
	if (f) {
		struct elfinfo info;

		if (elfinfo_read_file(path, &info, NULL) == 0)
			snprintf(f->build_id, sizeof(f->build_id), "%s", info.build_id);
		p->files[p->n_files++] = f;
	}
	return f;
}

static void read_maps(struct selfprof *p)
{
	FILE *fp = fopen("/proc/self/maps", "re");
	char line[4096];
	size_t cap = 0;
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long start, end, off;
		char perms[8], path[4096] = "";
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &start, &end, perms, &off,
			   path) < 4 ||
		    perms[2] != 'x')
			continue;
		if (GROW_ARRAY(p->maps, cap, p->n_maps + 1, 64))
			break;
		struct mapping *m = &p->maps[p->n_maps++];
		memset(m, 0, sizeof(*m));
		m->start = start;
		m->end = end;
		m->offset = off;
		char *name = path;
		while (*name == ' ')
			name++;
		if (*name == '/')
			m->file = file_for(p, name);
		struct pprof_mapping_desc d = {
		    .memory_start = start,
		    .memory_limit = end,
		    .file_offset = off,
		    .filename = *name ? name : "[anon]",
		    .build_id = m->file ? m->file->build_id : NULL,
		    .has_functions = m->file && m->file->n_syms,
		};
		m->pprof_id = pprof_builder_mapping(p->b, &d);
	}
	fclose(fp);
}

static const struct mapping *mapping_for(const struct selfprof *p, uint64_t addr)
{
	for (size_t i = 0; i < p->n_maps; i++)
		if (addr >= p->maps[i].start && addr < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

/* ---- sampling ------------------------------------------------------------------- */

/* Opens a sampling event on thread tid with its own mmap ring. (Inherited
 * events would follow new threads by themselves, but the kernel refuses to
 * mmap inherited per-thread events; so the caller rescans the thread list
 * instead.) */
static int open_thread(struct selfprof *p, pid_t tid)
{
	struct perf_event_attr a = {0};
	long page = sysconf(_SC_PAGESIZE);
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = PERIOD_NS;
	a.sample_type = PERF_SAMPLE_CALLCHAIN;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.wakeup_events = 1 << 20; /* we poll; never wake us */
	if (p->n_rings >= MAX_THREADS)
		return -EMFILE;
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = (size_t)page * (1 + RING_PAGES);
	void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct ring *r = &p->rings[p->n_rings++];
	r->fd = fd;
	r->tid = tid;
	r->base = base;
	r->size = (size_t)page * RING_PAGES;
	return 0;
}

/* Opens events for threads not seen yet; returns the first error. */
static int scan_threads(struct selfprof *p)
{
	int err = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		pid_t tid = (pid_t)atoi(de->d_name);
		bool seen = false;
		for (size_t i = 0; i < p->n_rings && !seen; i++)
			seen = p->rings[i].tid == tid;
		int rc = seen ? 0 : open_thread(p, tid);
		if (rc < 0 && rc != -ESRCH && !err)
			err = rc;
	}
	closedir(d);
	return err;
}

static void add_stack(struct selfprof *p, const uint64_t *ips, uint64_t nr)
{
	uint64_t locs[128];
	size_t n = 0;
	for (uint64_t i = 0; i < nr && n < 128; i++) {
		uint64_t ip = ips[i];
		if (ip >= (uint64_t)PERF_CONTEXT_MAX)
			continue; /* context markers */
		/* Return addresses point after the call: look up ip - 1 for
		 * callers so that a call at a function's end resolves to it. */
		uint64_t look = n ? ip - 1 : ip;
		const struct mapping *m = mapping_for(p, look);
		const char *name = NULL;
		if (m && m->file)
			name = elf_file_lookup(m->file,
					       look - m->start + m->offset + m->file->bias_vaddr);
		struct pprof_line_desc line = {0};
		if (name)
			line.function_id = pprof_builder_function(p->b, name, name, "", 0);
		locs[n] = pprof_builder_location(p->b, m ? m->pprof_id : 0, ip, &line,
						 name && line.function_id ? 1 : 0);
		if (!locs[n])
			return;
		n++;
	}
	if (n == 0)
		return;
	int64_t v[2] = {1, (int64_t)PERIOD_NS};
	if (pprof_builder_add_sample(p->b, locs, n, v, NULL, 0) == 0)
		p->samples++;
}

static void drain(struct selfprof *p, struct ring *r)
{
	struct perf_event_mmap_page *meta = r->base;
	uint8_t *data = (uint8_t *)r->base + sysconf(_SC_PAGESIZE);
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	uint8_t rec[8192];

	while (tail < head) {
		struct perf_event_header h;
		for (size_t i = 0; i < sizeof(h); i++)
			((uint8_t *)&h)[i] = data[(tail + i) % r->size];
		if (h.size < sizeof(h) || h.size > sizeof(rec))
			break;
		for (size_t i = 0; i < h.size; i++)
			rec[i] = data[(tail + i) % r->size];
		if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + 8) {
			uint64_t nr;
			memcpy(&nr, rec + sizeof(h), 8);
			if (sizeof(h) + 8 + nr * 8 <= h.size)
				add_stack(p, (const uint64_t *)(rec + sizeof(h) + 8), nr);
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

static void selfprof_release(struct selfprof *p)
{
	long page = sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < p->n_rings; i++) {
		munmap(p->rings[i].base, (size_t)page * (1 + RING_PAGES));
		close(p->rings[i].fd);
	}
	for (size_t i = 0; i < p->n_files; i++)
		elf_file_free(p->files[i]);
	free(p->files);
	free(p->maps);
	pprof_builder_free(p->b);
}

void http_debug_pprof_profile(const struct http_request *req, struct http_response *resp)
{
	const char *sec = http_arg(req, "seconds");
	long seconds = 30;
	struct selfprof *p;
	char *end;

	if (sec && *sec) {
		seconds = strtol(sec, &end, 10);
		if (*end || seconds < 1 || seconds > MAX_SECONDS)
			return http_error(resp, 400, -1, "seconds: \"%s\" is not in 1..%d", sec,
					  MAX_SECONDS);
	}
	if (pthread_mutex_trylock(&profiling_lock) != 0)
		return http_error(resp, 409, -1, "a CPU profile is already being taken");
	if (!(p = calloc(1, sizeof(*p))) || !(p->b = pprof_builder_new())) {
		free(p);
		pthread_mutex_unlock(&profiling_lock);
		return http_error(resp, 500, -1, "out of memory");
	}
	elf_version(EV_CURRENT);
	pprof_builder_add_sample_type(p->b, "samples", "count");
	pprof_builder_add_sample_type(p->b, "cpu", "nanoseconds");
	pprof_builder_set_period(p->b, "cpu", "nanoseconds", (int64_t)PERIOD_NS);

	/* One event per thread, now and every 100 ms (new connections start
	 * new threads). */
	int open_err = scan_threads(p);
	if (p->n_rings == 0) {
		http_error(resp, 503, -1,
			   "perf_event_open on our own threads failed: %s "
			   "(see /proc/sys/kernel/perf_event_paranoid)",
			   strerror(-open_err));
		goto out;
	}
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	for (size_t i = 0; i < p->n_rings; i++)
		ioctl(p->rings[i].fd, PERF_EVENT_IOC_ENABLE, 0);
	read_maps(p);
	for (long tick = 0; tick < seconds * 10 && !server_stopping(req->srv); tick++) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
		for (size_t i = 0; i < p->n_rings; i++)
			drain(p, &p->rings[i]);
		scan_threads(p);
	}
	for (size_t i = 0; i < p->n_rings; i++)
		ioctl(p->rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
	for (size_t i = 0; i < p->n_rings; i++)
		drain(p, &p->rings[i]);
	struct timespec t1;
	clock_gettime(CLOCK_REALTIME, &t1);
	int64_t start_ns = t0.tv_sec * 1000000000LL + t0.tv_nsec;
	pprof_builder_set_time(p->b, start_ns, t1.tv_sec * 1000000000LL + t1.tv_nsec - start_ns);
	if (pprof_builder_encode(p->b, true, &resp->body) < 0) {
		buf_reset(&resp->body);
		http_error(resp, 500, -1, "out of memory encoding the profile");
		goto out;
	}
	resp->status = 200;
	resp->content_type = "application/octet-stream";
	snprintf(resp->disposition, sizeof(resp->disposition), "attachment; filename=\"profile\"");
	log_debug("selfprof: %zu events, %" PRIu64 " samples in %lds", p->n_rings, p->samples,
		  seconds);
out:
	selfprof_release(p);
	free(p);
	pthread_mutex_unlock(&profiling_lock);
}

/* GET /debug/pprof/<anything else>. Only the CPU profile is real: a heap
 * profile needs the stack of every sampled allocation, and glibc's malloc
 * keeps none (its statistics, mallinfo2/malloc_info, are totals per arena);
 * getting stacks would mean replacing the allocator for the whole process.
 * Rather than serve made-up data, say so — a scraper gets a 404 with the
 * reason as its last error. */
void http_debug_pprof_other(const struct http_request *req, struct http_response *resp)
{
	const char *name = req->path + strlen("/debug/pprof/");
	if (strcmp(name, "heap") == 0 || strcmp(name, "allocs") == 0)
		return http_error(resp, 404, -1,
				  "%s: no heap profile: Kiln is C on glibc malloc, which records "
				  "no allocation stacks (only /debug/pprof/profile is served)",
				  req->path);
	http_error(resp, 404, -1,
		   "%s: no such profile (only /debug/pprof/profile?seconds=N is served)",
		   req->path);
}
