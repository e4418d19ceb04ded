/*
 * symbolizer.c — ELF virtual address -> frames, with libdw and libelf.
 *
 * One `symfile` per object (keyed by build ID, else path): the open debug
 * file, its Dwarf handle (if it has DWARF), a sorted table of function
 * symbols from .symtab (or .dynsym), and a cache from address to the
 * resolved frames. Lookups:
 *
 *   1. result cache (one hash probe: the warm path);
 *   2. DWARF: .debug_aranges finds the CU, its line table the line, and
 *      the CU's index (built once per CU: see "per-CU index") the chain of
 *      inlined_subroutine nodes up to the enclosing subprogram. Frame i+1's
 *      file:line is the DW_AT_call_file / DW_AT_call_line of inlined node
 *      i — where the callee was inlined. The CU's DIEs and line program
 *      are decoded by Kiln's own reader (dwarf_reader.h: several times
 *      faster cold); a CU it does not support or finds malformed goes to
 *      libdw (dwarf_getsrc_die, dwarf_child, ...), which also serves
 *      addresses .debug_aranges does not cover;
 *   3. the symbol table, by binary search (name only, no file:line).
 *
 * Compressed debug sections are inflated (inflate.h: ISA-L's igzip)
 * before libdw sees the file, and only those symbolization reads,
 * .debug_info on a worker thread; the batch that opens such a file reads
 * its units while .debug_info inflates ("the batch that opens a file").
 * The result cache is rcache.h's; big tables take their memory from
 * hugemem.h.
 *
 * A batch (symbolizer_resolve_batch) reads a cold object CU by CU in
 * address order ("batches"); a large one on more threads, each with a
 * reader of its own.
 *
 * Names from libdw and libelf point into the mapped file and live as long as
 * the symfile; demangled names are interned in the symfile's arena. A symfile
 * that is forgotten (newer debuginfo) or replaced (a provisional one, without
 * DWARF, for which a better file turned up: recheck) is retired, not freed,
 * so strings already handed out stay valid until symbolizer_free.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/fdio.h"
#include "common/htab.h"
#include "common/log.h"
#include "common/worker.h"
#include "symbols/debuginfo.h"
#include "symbols/dwarf_reader.h"
#include "symbols/hugemem.h"
#include "symbols/inflate.h"
#include "symbols/rcache.h"
#include "symbols/symbols.h"

struct fsym {
	uint64_t addr, size;
	const char *name;
};

/* Growable arrays reused by every CU index build of a symfile: a CU is
 * indexed once, so per-build allocations (and the page faults of fresh
 * memory) were a fifth of a cold run. */
struct cu_scratch {
	struct cu_node *nodes;
	size_t cap_nodes;
	struct cu_range *ranges;
	size_t cap_ranges;
	struct cu_event *ev;
	size_t cap_ev;
	int32_t *active;
	size_t cap_active;
	struct cu_segment *segs;
	size_t cap_segs;
};

struct cu_arange {
	uint64_t low, high;
	Dwarf_Off cu; /* the CU DIE's offset */
};

struct symfile {
	struct symfile *next_retired;
	int fd;
	Elf *elf;
	Dwarf *dwarf; /* NULL: symbol table only */
	struct fsym *syms;
	size_t nsyms;
	struct rcache results; /* address -> struct cached * or struct cached_ref * */
	/* Where the next struct cached_ref goes (refs_left of them): they are
	 * taken from the arena in blocks, 24 bytes each rather than the 32 of
	 * an arena allocation's. */
	struct cached_ref *refs;
	size_t refs_left;
	struct htab *names; /* raw name -> interned display name */
	struct htab *cus;   /* CU DIE offset -> struct cu_index * */
	struct arena *arena;
	struct elfinfo info;	       /* program headers for normalization */
	char *path;		       /* the file open */
	char *obj_build_id, *obj_path; /* the object it was opened for */
	time_t recheck_at;	       /* provisional (no DWARF): look for a better file then */
	struct inflated *inflated;     /* section bytes inflate_finish made */
	size_t ninflated;
	struct cu_scratch scratch; /* for CU index builds */
	struct cu_arange *aranges; /* address -> CU, sorted; see cu_lookup */
	size_t naranges;
	bool aranges_read;
	struct kdw *kdw;	      /* Kiln's DWARF reader; NULL: libdw only */
	size_t reader_cus, libdw_cus; /* CUs indexed by each */
	size_t stream_cus;	      /* of reader_cus, by the batch that opened it */
	struct kdw_sections secs;     /* the section bytes it reads */
	struct batch_helper *helpers; /* [BATCH_MAX_THREADS - 1], made on first use */
	struct batch_helper *early;   /* the stream reader's (stream batch), or NULL */
	struct batch_helper *back;    /* kdw's arena, names, scratch from a stream
				       * batch's second thread (its kdw NULL: it is
				       * f->kdw), or NULL */
	bool large;		      /* large_file: the arena is in huge pages */
};

#define BATCH_MAX_THREADS 8 /* a batch's threads, the calling one included */

/* Below how many misses, or DIE bytes of the object, a batch stays on
 * one thread: its work must be long beside a helper's start (tens of
 * microseconds; in a VM at times milliseconds), the copy of the unit
 * table it makes on its first batch, and its spinning while the misses
 * are listed. (kiln's own binary, 0.8 MB of DIEs: a cold pass of 20k
 * addresses was 6 ms, and a helper made it no faster and took a third more
 * CPU; libc's debug file, 5.8 MB: 30 -> 25 ms.) */
#define BATCH_THREAD_MISSES 2048
#define BATCH_THREAD_INFO   ((size_t)2 << 20)

/* How long the thread that inflated a file for a large batch spins, once
 * done, for that batch's work: the rest of the open and the listing of the
 * misses take 2-3 ms (libc's debug file); a thread left to sleep was 0.1-4
 * ms late to start again (see struct worker). */
#define INFLATE_SPIN_US 10000

struct symbolizer {
	pthread_mutex_t lock;
	struct debuginfo_store *debuginfo;
	size_t max_cached;
	struct htab *files; /* key -> struct symfile * (0: open failed) */
	struct symfile *retired;
	int recheck;
	size_t batch_threads;
	bool batch_threads_always;
	enum symbolizer_stream_test stream_test;
	bool libdw_only;
	bool by_build_id_only; /* never open obj->path (symbolizer_config) */
	/* The threads a batch (and the open before it) shares its work with,
	 * started on first use; workers[0] inflates as well. */
	struct worker *workers[BATCH_MAX_THREADS - 1];
	/* The file the last call used, by key: consecutive calls are mostly
	 * for one object, and hashing its key was a tenth of a cold run on
	 * an uncompressed binary. last_len 0: none. */
	char last_key[256];
	size_t last_len;
	struct symfile *last;
};

static void cu_scratch_free(struct cu_scratch *sc);
static void batch_helpers_free(struct symfile *f);

/* Worker i of s, started on first use; NULL when no thread can be had. */
static struct worker *symbolizer_worker(struct symbolizer *s, size_t i)
{
	if (!s->workers[i])
		s->workers[i] = worker_new();
	return s->workers[i];
}

/* Whether a batch of n addresses not cached yet is for more than one
 * thread (given an object with BATCH_THREAD_INFO bytes of DIEs). */
static bool batch_wants_helpers(const struct symbolizer *s, size_t n)
{
	return s->batch_threads >= 2 && (s->batch_threads_always || n >= BATCH_THREAD_MISSES);
}

static void symfile_free(struct symfile *f)
{
	if (!f)
		return;
	kdw_close(f->kdw);
	batch_helpers_free(f);
	if (f->dwarf)
		dwarf_end(f->dwarf);
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	htab_free(f->cus); /* the indexes live in the arena */
	cu_scratch_free(&f->scratch);
	free(f->aranges);
	rcache_free(&f->results);
	htab_free(f->names);
	arena_free(f->arena);
	for (size_t i = 0; i < f->ninflated; i++)
		munmap(f->inflated[i].p, f->inflated[i].size);
	free(f->inflated);
	free(f->path);
	free(f->obj_build_id);
	free(f->obj_path);
	free(f);
}

static int fsym_cmp(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Prefer the sized (and global) symbol among aliases: sorted first. */
	return x->size > y->size ? -1 : x->size < y->size;
}

/* Loads STT_FUNC symbols of one symbol table section (into the arena:
 * malloc'd megabytes were fresh pages, a fault each). */
static int load_symtab(struct symfile *f, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL), *strs = NULL;
	Elf_Scn *strscn = elf_getscn(f->elf, sh->sh_link);
	GElf_Shdr strsh;
	const char *strbase = NULL;
	size_t n, strsize = 0;
	struct fsym *syms;
	bool sym64;

	if (!data || sh->sh_entsize == 0 || sh->sh_type == SHT_NOBITS)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	if (n > data->d_size / gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT))
		n = data->d_size / gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT);
	if (f->nsyms + n == 0)
		return 0;
	syms = arena_alloc(f->arena, (f->nsyms + n) * sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	if (f->nsyms)
		memcpy(syms, f->syms, f->nsyms * sizeof(*syms));
	f->syms = syms;
	/* A string table whose last byte is NUL terminates every name in it:
	 * names are then taken without elf_strptr's per-call checks. */
	if (strscn && gelf_getshdr(strscn, &strsh) && strsh.sh_type == SHT_STRTAB &&
	    (strs = elf_getdata(strscn, NULL)) != NULL && strs->d_buf && strs->d_size &&
	    strs->d_off == 0 && strs->d_size == strsh.sh_size &&
	    ((const char *)strs->d_buf)[strs->d_size - 1] == '\0') {
		strbase = strs->d_buf;
		strsize = strs->d_size;
	}
	/* Native 64-bit data is an array of Elf64_Sym as libelf hands it. */
	sym64 = gelf_getclass(f->elf) == ELFCLASS64 && data->d_type == ELF_T_SYM &&
		((uintptr_t)data->d_buf % _Alignof(Elf64_Sym)) == 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (sym64)
			sym = ((const Elf64_Sym *)data->d_buf)[i];
		else if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value == 0)
			continue;
		if (strbase)
			name = sym.st_name < strsize ? strbase + sym.st_name : NULL;
		else
			name = elf_strptr(f->elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		f->syms[f->nsyms++] = (struct fsym){sym.st_value, sym.st_size, name};
	}
	return 0;
}

/* Stable bottom-up merge sort of syms[0..n) by fsym_cmp (what glibc's
 * qsort does, so aliases keep the order they had), with tmp[0..n). */
static void sort_syms(struct fsym *syms, struct fsym *tmp, size_t n)
{
	struct fsym *src = syms, *dst = tmp;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = fsym_cmp(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct fsym *t = src;
		src = dst;
		dst = t;
	}
	if (src != syms)
		memcpy(syms, src, n * sizeof(*syms));
}

static int load_symbols(struct symfile *f)
{
	Elf_Scn *scn = NULL, *dynsym = NULL;
	GElf_Shdr dynsh;
	bool have_symtab = false;
	int rc;

	while ((scn = elf_nextscn(f->elf, scn)) != NULL) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			rc = load_symtab(f, scn, &sh);
			if (rc < 0)
				return rc;
			have_symtab = true;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dynsh = sh;
		}
	}
	if (!have_symtab && dynsym) {
		rc = load_symtab(f, dynsym, &dynsh);
		if (rc < 0)
			return rc;
	}
	if (f->nsyms > 1) {
		bool sorted = true;

		for (size_t i = 1; i < f->nsyms && sorted; i++)
			sorted = fsym_cmp(&f->syms[i - 1], &f->syms[i]) <= 0;
		if (!sorted) {
			struct fsym *tmp = arena_alloc(f->arena, f->nsyms * sizeof(*tmp));

			if (!tmp)
				return -ENOMEM;
			sort_syms(f->syms, tmp, f->nsyms);
		}
	}
	return 0;
}

/* Opens Kiln's DWARF reader on the (inflated) debug sections: with none
 * (see inflate_sections), libdw alone answers. */
static void open_reader(struct symfile *f)
{
	struct kiln_error e = {0};

	if (!inflate_sections(f->elf, NULL, &f->secs))
		return;
	f->kdw = kdw_open(&f->secs, f->arena, &e);
	if (!f->kdw)
		log_debug("symbolizer: %s: DWARF reader: %s; libdw only", f->path, e.msg);
}

/* Bytes of DWARF (info, abbrev, line; inflated) and symbol tables from
 * which a file's memory is taken in huge pages: a fresh 4 KiB page costs
 * microseconds in a VM whose page tables the hypervisor shadows, and such a
 * file fills thousands of them (the symbol table, the reader's and the
 * index's data, the result cache). */
#define LARGE_FILE ((size_t)512 << 10)

static bool large_file(Elf *elf)
{
	size_t shstrndx, bytes = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			bytes += sh.sh_size;
			continue;
		}
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name ||
		    (strcmp(name, ".debug_info") != 0 && strcmp(name, ".debug_line") != 0 &&
		     strcmp(name, ".debug_abbrev") != 0))
			continue;
		/* Inflated size, bounded as inflate_start bounds it. */
		if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
			bytes += ch.ch_size / 1032 <= sh.sh_size ? ch.ch_size : sh.sh_size;
		else
			bytes += sh.sh_size;
	}
	return bytes >= LARGE_FILE;
}

/* The batch a file is opened for (symfile_get): its addresses, where its
 * answers go, and which of them the opening answered already. */
struct opening {
	const uint64_t *addrs;
	size_t n;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* out: per address, 1 once emitted (NULL: none; the caller frees) */
};

static struct stream_batch *stream_batch_new(struct symbolizer *s, const struct opening *op);
static void stream_batch_run(struct symbolizer *s, struct symfile *f, struct inflating *in,
			     struct stream_batch *sb, struct opening *op);
static void stream_batch_end(struct symbolizer *s, struct symfile *f, struct stream_batch *sb,
			     struct opening *op);
static void stream_batch_free(struct stream_batch *sb);
static bool stream_batch_back(struct stream_batch *sb, struct inflate_job *info, bool large);
static void stream_batch_off(struct stream_batch *sb);

/* struct inflate_with's callbacks: the second thread's part, and calling
 * the stream batch off. */
static bool stream_batch_back_cb(void *sb, struct inflate_job *info, bool large)
{
	return stream_batch_back(sb, info, large);
}

static void stream_batch_off_cb(void *sb)
{
	stream_batch_off(sb);
}

static struct worker *first_worker(void *s)
{
	return symbolizer_worker(s, 0);
}

/* Opens path for s, for the batch op (NULL: for one address), which it
 * starts answering while .debug_info inflates. With by_build_id_only, a
 * final symbolic link is not followed and the file must have build ID
 * want_id (when not NULL/""). */
static struct symfile *symfile_open(struct symbolizer *s, const char *path, const char *want_id,
				    struct opening *op, struct kiln_error *e)
{
	struct symfile *f = calloc(1, sizeof(*f));
	struct stream_batch *sb = NULL;
	struct inflating in;
	struct inflate_with with;

	if (!f)
		return NULL;
	/* Never a FIFO or a device. */
	f->fd = s->by_build_id_only ? fd_open_nofollow(path, e) : fd_open_regular(path, e);
	if (f->fd < 0)
		goto err;
	/* Private: inflate_finish rewrites section headers in place. */
	f->elf = elf_begin(f->fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
		kiln_error_set(e, ENOEXEC, "%s: not an ELF file", path);
		goto err;
	}
	f->names = htab_new(256);
	if (large_file(f->elf) && (f->arena = arena_new_huge()) != NULL) {
		f->large = true;
		f->results.first_cap = 65536;
		rcache_init_in(&f->results, f->arena);
	} else {
		f->arena = arena_new(64 * 1024);
	}
	f->cus = htab_new(256);
	f->path = strdup(path);
	if (!f->names || !f->arena || !f->cus || !f->path) {
		kiln_error_set(e, ENOMEM, "%s: out of memory", path);
		goto err;
	}
	/* The symbol table and program headers are read while the second
	 * thread inflates (inflate_start). */
	sb = stream_batch_new(s, op);
	with = (struct inflate_with){.thread = first_worker,
				     .thread_ctx = s,
				     .always = s->stream_test != SYMBOLIZER_STREAM_SHARED,
				     .spin_us =
					 op && batch_wants_helpers(s, op->n) ? INFLATE_SPIN_US : 0,
				     .large = f->large,
				     .after = sb ? stream_batch_back_cb : NULL,
				     .stop = sb ? stream_batch_off_cb : NULL,
				     .follower = sb};
	inflate_start(&in, f->elf, &f->inflated, &f->ninflated, &with);
	if (elfinfo_read_fd(f->fd, path, &f->info, e) < 0 || load_symbols(f) < 0) {
		if (!e || !e->code)
			kiln_error_set(e, ENOMEM, "%s: out of memory reading symbols", path);
		inflate_finish(&in, &f->inflated, &f->ninflated);
		goto err;
	}
	if (s->by_build_id_only && want_id && *want_id &&
	    strcasecmp(f->info.build_id, want_id) != 0) {
		kiln_error_set(e, ENOENT, "%s: build ID %s, want %s", path,
			       f->info.build_id[0] ? f->info.build_id : "none", want_id);
		inflate_finish(&in, &f->inflated, &f->ninflated);
		goto err;
	}
	inflate_jobs(&in, false);
	stream_batch_run(s, f, &in, sb, op);
	inflate_finish(&in, &f->inflated, &f->ninflated);
	/* No DWARF is fine: the symbol table still names functions. The
	 * reader is opened here (or by the stream batch's second thread). */
	f->dwarf = dwarf_begin_elf(f->elf, DWARF_C_READ, NULL);
	stream_batch_end(s, f, sb, op);
	return f;
err:
	stream_batch_free(sb);
	symfile_free(f);
	return NULL;
}

/* Display name for a raw name: demangled and interned in names (copies in
 * arena), or raw itself. */
static const char *intern_name(struct htab *names, struct arena *arena, const char *raw)
{
	uint64_t v;
	size_t len;
	char *dem, *copy;

	if (!raw || raw[0] != '_' || (raw[1] != 'Z' && raw[1] != 'R'))
		return raw;
	len = strlen(raw);
	if (htab_get(names, raw, len, &v))
		return (const char *)(uintptr_t)v;
	dem = symbols_demangle(raw);
	copy = dem ? arena_strdup(arena, dem) : NULL;
	free(dem);
	if (!copy)
		return raw;
	htab_put(names, raw, len, (uint64_t)(uintptr_t)copy);
	return copy;
}

static const char *display_name(struct symfile *f, const char *raw)
{
	return intern_name(f->names, f->arena, raw);
}

static void die_names(struct symfile *f, Dwarf_Die *die, struct symbols_frame *fr)
{
	Dwarf_Attribute attr;
	const char *raw = NULL, *name;
	Dwarf_Word decl = 0;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		raw = dwarf_formstring(&attr);
	name = dwarf_attr_integrate(die, DW_AT_name, &attr) ? dwarf_formstring(&attr) : NULL;
	if (!raw)
		raw = name;
	fr->system_name = raw;
	fr->function = raw ? display_name(f, raw) : NULL;
	if (dwarf_attr_integrate(die, DW_AT_decl_line, &attr) && dwarf_formudata(&attr, &decl) == 0)
		fr->start_line = (int64_t)decl;
}

static const struct fsym *symtab_lookup(const struct symfile *f, uint64_t addr)
{
	size_t lo = 0, hi = f->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo is the first symbol above addr; walk back over aliases at the
	 * same address to the one sorted first (largest size). */
	if (lo == 0)
		return NULL;
	size_t i = lo - 1;
	while (i > 0 && f->syms[i - 1].addr == f->syms[i].addr)
		i--;
	const struct fsym *s = &f->syms[i];
	if (s->size ? addr - s->addr < s->size : (lo < f->nsyms || addr - s->addr < 4096))
		return s;
	return NULL;
}

#define MAX_DIE_DEPTH 64

/* --- per-CU index ---------------------------------------------------------
 *
 * Walking a CU's DIE tree for every address (what dwarf_getscopes does)
 * dominates cold symbolization: libc's CUs have thousands of top-level
 * DIEs. So the first address in a CU walks it once and keeps:
 *   nodes:    one per subprogram / inlined_subroutine with code, with its
 *             names, declaration line, call site and enclosing node;
 *   segments: disjoint address intervals, each mapped to the innermost node
 *             covering it (a sweep over every node's ranges).
 * A lookup is then a search of the segments' low addresses (sorted keys
 * with search levels, dwarf_reader.h: two or three cache misses on a cold
 * index, not one per probe) plus a walk up the parent links. */

struct cu_node {
	const char *function, *system_name, *call_file;
	int64_t start_line, call_line;
	int32_t parent; /* -1: outermost */
	bool inlined;
};

/* A segment as the sweep makes it. */
struct cu_segment {
	uint64_t low, high;
	int32_t node;
};

/* A segment as the index keeps it: its low address is its search key
 * (segment_lows), kept beside it rather than in it. */
struct cu_seg {
	uint64_t high;
	int32_t node;
};

/* What a lookup reads comes first and fits one cache line (the index is
 * allocated 64-byte aligned): per address of a cold run the CU's index is
 * most likely out of cache, and each further line is another miss. */
struct cu_index {
	struct cu_seg *segs;
	struct cu_node *nodes; /* in the symfile's arena, like the index */
	uint32_t nsegs;
	bool fast;
	bool has_lines; /* fast: lines holds the unit's line table */
	/* fast: a copy of the reader's table (sharing its arrays); its
	 * lookup fields are its first 40 bytes */
	struct kdw_lines lines;
	size_t nnodes;
	Dwarf_Die cudie; /* libdw's CUs */
};
_Static_assert(offsetof(struct cu_index, lines) + offsetof(struct kdw_lines, nfiles) <= 64,
	       "a lookup's fields of cu_index fit one cache line");

/* A zeroed cu_index in arena, 64-byte aligned. */
static struct cu_index *cu_index_new(struct arena *arena)
{
	uint8_t *p = arena_alloc(arena, sizeof(struct cu_index) + 48);
	struct cu_index *idx;

	if (!p)
		return NULL;
	idx = (struct cu_index *)(p + ((64 - (uintptr_t)p % 64) % 64));
	memset(idx, 0, sizeof(*idx));
	return idx;
}

/* Makes room for n elements of size sz in *p (capacity *cap). */
static bool grow(void *pp, size_t *cap, size_t n, size_t sz)
{
	void **p = pp;
	size_t c = *cap ? *cap : 256;

	if (n <= *cap)
		return true;
	while (c < n)
		c *= 2;
	void *np = realloc(*p, c * sz);
	if (!np)
		return false;
	*p = np;
	*cap = c;
	return true;
}

struct cu_range {
	uint64_t low, high;
	int32_t node, depth;
};

/* What CU indexes are built with: Kiln's reader, the arena the index, its
 * nodes and their display names go to, the display-name table and the
 * scratch arrays. The symfile's own (symfile_reader), or a batch helper
 * thread's (struct batch_helper). */
struct cu_reader {
	struct kdw *kdw;
	struct arena *arena;
	struct htab *names;
	struct cu_scratch *sc;
};

static struct cu_reader symfile_reader(struct symfile *f)
{
	return (struct cu_reader){f->kdw, f->arena, f->names, &f->scratch};
}

/* One CU index build. */
struct cu_build {
	struct symfile *f;
	struct cu_reader r;
	struct cu_index *idx;
	Dwarf_Files *files;
	struct kdw_lines *lines; /* the reader's */
	size_t nnodes, nranges;
	bool oom;
};

/* A build with the symfile's own reader, arena and names. */
static struct cu_build cu_build_of(struct symfile *f)
{
	return (struct cu_build){.f = f, .r = symfile_reader(f)};
}

static int32_t add_node(struct cu_build *b, Dwarf_Die *die, int32_t parent, bool inlined)
{
	struct cu_index *idx = b->idx;
	struct symbols_frame fr = {0};
	Dwarf_Attribute attr;
	Dwarf_Word w;

	if (!grow(&b->r.sc->nodes, &b->r.sc->cap_nodes, b->nnodes + 1, sizeof(*b->r.sc->nodes))) {
		b->oom = true;
		return -1;
	}
	struct cu_node *node = &b->r.sc->nodes[b->nnodes];
	memset(node, 0, sizeof(*node));
	die_names(b->f, die, &fr);
	node->function = fr.function;
	node->system_name = fr.system_name;
	node->start_line = fr.start_line;
	node->parent = parent;
	node->inlined = inlined;
	if (inlined) {
		if (dwarf_attr(die, DW_AT_call_file, &attr) && dwarf_formudata(&attr, &w) == 0 &&
		    (b->files || dwarf_getsrcfiles(&idx->cudie, &b->files, NULL) == 0))
			node->call_file = dwarf_filesrc(b->files, w, NULL, NULL);
		if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &w) == 0)
			node->call_line = (int64_t)w;
	}
	return (int32_t)b->nnodes++;
}

static void add_range(struct cu_build *b, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	if (high <= low)
		return;
	if (!grow(&b->r.sc->ranges, &b->r.sc->cap_ranges, b->nranges + 1,
		  sizeof(*b->r.sc->ranges))) {
		b->oom = true;
		return;
	}
	b->r.sc->ranges[b->nranges++] = (struct cu_range){low, high, node, depth};
}

static void index_children(struct cu_build *b, Dwarf_Die *parent_die, int32_t parent, int depth)
{
	Dwarf_Die child;

	if (depth > MAX_DIE_DEPTH || b->oom || dwarf_child(parent_die, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);

		switch (tag) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_entry_point: {
			Dwarf_Addr base, low, high;
			ptrdiff_t off = 0;
			int32_t node = -1;

			while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0) {
				if (node < 0)
					node = add_node(b, &child, parent,
							tag == DW_TAG_inlined_subroutine);
				if (node < 0)
					return;
				add_range(b, low, high, node, depth);
			}
			/* Without code (declarations, abstract instances)
			 * nothing below can hold an address either. */
			if (node >= 0)
				index_children(b, &child, node, depth + 1);
			break;
		}
		case DW_TAG_lexical_block:
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			index_children(b, &child, parent, depth + 1);
			break;
		default:
			break;
		}
	} while (!b->oom && dwarf_siblingof(&child, &child) == 0);
}

struct cu_event {
	uint64_t addr;
	int32_t range; /* index into ranges */
	bool start;
};

static bool event_before(const struct cu_event *x, const struct cu_event *y)
{
	if (x->addr != y->addr)
		return x->addr < y->addr;
	return !x->start && y->start; /* ends before starts */
}

/* Bottom-up merge sort of ev[0..n) with tmp[0..n) (stable, O(n log n), no
 * allocation: qsort allocates its own buffer on every call). Returns the
 * sorted array (ev or tmp). */
static struct cu_event *sort_events(struct cu_event *ev, struct cu_event *tmp, size_t n)
{
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				tmp[k++] = event_before(&ev[j], &ev[i]) ? ev[j++] : ev[i++];
			while (i < mid)
				tmp[k++] = ev[i++];
			while (j < hi)
				tmp[k++] = ev[j++];
		}
		struct cu_event *t = ev;
		ev = tmp;
		tmp = t;
	}
	return ev;
}

/* Turns the (possibly nested) ranges into disjoint innermost segments,
 * copied with the nodes into the symfile's arena. */
static int build_segments(struct cu_build *b)
{
	struct cu_scratch *sc = b->r.sc;
	const struct cu_range *ranges = sc->ranges;
	size_t nev = b->nranges * 2, nactive = 0, nsegs = 0;
	struct cu_event *ev;
	struct cu_segment *segs;
	int32_t *active;

	/* ev holds two halves: the events and the sort's buffer. */
	if (!grow(&sc->ev, &sc->cap_ev, 2 * nev + 1, sizeof(*sc->ev)) ||
	    !grow(&sc->active, &sc->cap_active, b->nranges + 1, sizeof(*sc->active)) ||
	    !grow(&sc->segs, &sc->cap_segs, nev + 1, sizeof(*sc->segs)))
		return -ENOMEM;
	active = sc->active;
	segs = sc->segs;
	for (size_t i = 0; i < b->nranges; i++) {
		sc->ev[2 * i] = (struct cu_event){ranges[i].low, (int32_t)i, true};
		sc->ev[2 * i + 1] = (struct cu_event){ranges[i].high, (int32_t)i, false};
	}
	ev = sort_events(sc->ev, sc->ev + nev, nev);
	for (size_t i = 0; i < nev;) {
		uint64_t at = ev[i].addr;

		for (; i < nev && ev[i].addr == at; i++) {
			if (ev[i].start) {
				active[nactive++] = ev[i].range;
				continue;
			}
			for (size_t k = 0; k < nactive; k++)
				if (active[k] == ev[i].range) {
					active[k] = active[--nactive];
					break;
				}
		}
		if (nactive == 0 || i == nev)
			continue;
		int32_t best = active[0];
		for (size_t k = 1; k < nactive; k++)
			if (ranges[active[k]].depth > ranges[best].depth)
				best = active[k];
		int32_t node = ranges[best].node;
		if (nsegs && segs[nsegs - 1].high == at && segs[nsegs - 1].node == node)
			segs[nsegs - 1].high = ev[i].addr;
		else
			segs[nsegs++] = (struct cu_segment){at, ev[i].addr, node};
	}
	if (nsegs > UINT32_MAX) /* cu_index.nsegs */
		return -ENOMEM;
	/* The segments' low addresses as sorted keys with search levels
	 * (dwarf_reader.h), the rest of each segment right after them. */
	size_t words = kdw_keys64_words(nsegs);
	uint8_t *p = arena_alloc(b->r.arena, words * sizeof(uint64_t) +
						 (nsegs ? nsegs : 1) * sizeof(struct cu_seg) + 48);
	uint64_t *lows;

	b->idx->nodes = arena_alloc(b->r.arena, (b->nnodes ? b->nnodes : 1) * sizeof(*sc->nodes));
	if (!p || !b->idx->nodes)
		return -ENOMEM;
	lows = kdw_keys64_at((uint64_t *)(p + ((64 - (uintptr_t)p % 64) % 64)), nsegs);
	b->idx->segs = (struct cu_seg *)(lows + kdw_keys64_pad(nsegs));
	for (size_t i = 0; i < nsegs; i++) {
		lows[i] = segs[i].low;
		b->idx->segs[i] = (struct cu_seg){segs[i].high, segs[i].node};
	}
	kdw_keys64_finish(lows, nsegs);
	if (b->nnodes) /* a CU without functions never grew the nodes */
		memcpy(b->idx->nodes, sc->nodes, b->nnodes * sizeof(*sc->nodes));
	b->idx->nsegs = nsegs;
	b->idx->nnodes = b->nnodes;
	return 0;
}

static void cu_scratch_free(struct cu_scratch *sc)
{
	free(sc->nodes);
	free(sc->ranges);
	free(sc->ev);
	free(sc->active);
	free(sc->segs);
}

/* The index of the CU whose DIE is cudie, built on first use (in the
 * symfile's arena: it lives as long as the symfile). */
static struct cu_index *cu_index_get(struct symfile *f, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct cu_build b = cu_build_of(f);
	uint64_t v;

	if (htab_get(f->cus, &off, sizeof(off), &v))
		return (struct cu_index *)(uintptr_t)v;
	b.idx = cu_index_new(f->arena);
	if (!b.idx)
		return NULL;
	b.idx->cudie = *cudie;
	index_children(&b, cudie, -1, 0);
	if (b.oom || build_segments(&b) < 0 ||
	    htab_put(f->cus, &off, sizeof(off), (uint64_t)(uintptr_t)b.idx) < 0)
		return NULL;
	f->libdw_cus++;
	return b.idx;
}

static int32_t fast_func(void *ctx, const struct kdw_func *fn, int32_t parent)
{
	struct cu_build *b = ctx;
	const char *raw = fn->linkage_name ? fn->linkage_name : fn->name;

	if (!grow(&b->r.sc->nodes, &b->r.sc->cap_nodes, b->nnodes + 1, sizeof(*b->r.sc->nodes)))
		return -1;
	b->r.sc->nodes[b->nnodes] = (struct cu_node){
	    .function = raw ? intern_name(b->r.names, b->r.arena, raw) : NULL,
	    .system_name = raw,
	    .start_line = fn->decl_line,
	    .parent = parent,
	    .inlined = fn->inlined,
	};
	if (fn->inlined) {
		struct cu_node *node = &b->r.sc->nodes[b->nnodes];

		if (fn->has_call_file && b->lines)
			node->call_file =
			    kdw_lines_file(b->lines, fn->call_file, kdw_arena(b->r.kdw));
		if (fn->has_call_line)
			node->call_line = (int64_t)fn->call_line;
	}
	return (int32_t)b->nnodes++;
}

static int fast_range(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	struct cu_build *b = ctx;

	add_range(b, low, high, node, depth);
	return b->oom ? -1 : 0;
}

/* The index of a CU of the reader (kcu), built with the reader; NULL when
 * it cannot (the caller then asks libdw). */
static struct cu_index *cu_index_fast(struct symfile *f, struct kdw_cu *kcu)
{
	struct cu_build b = cu_build_of(f);
	struct kdw_walk_ops ops = {.ctx = &b, .func = fast_func, .range = fast_range};
	struct kiln_error e = {0};

	b.lines = kdw_cu_lines(f->kdw, kcu, &e);
	if (!b.lines && e.code != -ENOENT)
		goto fail;
	memset(&e, 0, sizeof(e));
	b.idx = cu_index_new(f->arena);
	if (!b.idx)
		return NULL;
	b.idx->fast = true;
	if (b.lines) {
		b.idx->lines = *b.lines;
		b.idx->has_lines = true;
	}
	if (kdw_walk_cu(f->kdw, kcu, &ops, &e) < 0 || b.oom)
		goto fail;
	if (build_segments(&b) < 0 || htab_put(f->cus, &kcu->die_offset, sizeof(kcu->die_offset),
					       (uint64_t)(uintptr_t)b.idx) < 0)
		return NULL;
	f->reader_cus++;
	return b.idx;
fail:
	log_debug("symbolizer: %s: %s; libdw reads this CU", f->path,
		  e.code ? e.msg : "out of memory");
	return NULL;
}

/* The keys of idx's segments: their low addresses (build_segments). */
static const uint64_t *segment_lows(const struct cu_index *idx)
{
	return (const uint64_t *)idx->segs - kdw_keys64_pad(idx->nsegs);
}

/* Segments are disjoint and ascending: addr's is the last one starting at
 * or below it, if it ends above. */
static const struct cu_seg *segment_lookup(const struct cu_index *idx, uint64_t addr)
{
	size_t i =
	    kdw_keys64_find(segment_lows(idx), idx->nsegs, addr, idx->segs, sizeof(*idx->segs));

	return i != SIZE_MAX && addr < idx->segs[i].high ? &idx->segs[i] : NULL;
}

static int arange_cmp(const void *a, const void *b)
{
	const struct cu_arange *x = a, *y = b;

	return x->low < y->low ? -1 : x->low > y->low;
}

/* The CU holding addr (its DIE in *cudie) and its index. The address ranges
 * of .debug_aranges are copied once into a sorted array of our own: per
 * address, dwarf_addrdie searched them and then looked the CU up by offset
 * in a tree (tfind), a tenth of a cold run. Addresses outside the table
 * (no .debug_aranges, or an incomplete one) still go to dwarf_addrdie. */
static struct cu_index *cu_lookup(struct symfile *f, uint64_t addr, Dwarf_Die *cudie)
{
	size_t lo = 0, hi;
	uint64_t v;
	struct kdw_cu *kcu = NULL;
	void **slot = f->kdw ? kdw_arange_user(f->kdw, addr, &kcu) : NULL;

	if (slot && *slot) { /* through this range before: no other lookup */
		struct cu_index *idx = *slot;

		if (!idx->fast)
			*cudie = idx->cudie;
		return idx;
	}
	if (kcu) {
		uint64_t off = kcu->die_offset;
		struct cu_index *idx;

		if (kcu->user) { /* indexed before: no hash lookup */
			idx = kcu->user;
			*cudie = idx->cudie;
			*slot = idx;
			return idx;
		}
		if (htab_get(f->cus, &off, sizeof(off), &v)) {
			idx = (struct cu_index *)(uintptr_t)v;
			*cudie = idx->cudie;
			return idx;
		}
		if ((idx = cu_index_fast(f, kcu)) != NULL ||
		    (dwarf_offdie(f->dwarf, off, cudie) && (idx = cu_index_get(f, cudie)))) {
			kcu->user = idx;
			*slot = idx;
		}
		return idx;
	}
	/* libdw's dwarf_addrdie searches the same .debug_aranges: no unit.
	 * (Reading its copy of the table was a twentieth of a cold run.) */
	if (f->kdw && kdw_aranges_whole(f->kdw))
		return NULL;

	if (!f->aranges_read) {
		Dwarf_Aranges *ar;
		size_t n = 0;

		f->aranges_read = true;
		if (dwarf_getaranges(f->dwarf, &ar, &n) == 0 && n > 0 &&
		    (f->aranges = malloc(n * sizeof(*f->aranges))) != NULL) {
			for (size_t i = 0; i < n; i++) {
				Dwarf_Addr a;
				Dwarf_Word len;
				Dwarf_Off off;

				if (dwarf_getarangeinfo(dwarf_onearange(ar, i), &a, &len, &off) ==
					0 &&
				    len > 0)
					f->aranges[f->naranges++] =
					    (struct cu_arange){a, a + len, off};
			}
			qsort(f->aranges, f->naranges, sizeof(*f->aranges), arange_cmp);
		}
	}
	hi = f->naranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->aranges[mid].low <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && addr < f->aranges[lo - 1].high) {
		Dwarf_Off off = f->aranges[lo - 1].cu;

		if (htab_get(f->cus, &off, sizeof(off), &v)) {
			struct cu_index *idx = (struct cu_index *)(uintptr_t)v;

			*cudie = idx->cudie;
			return idx;
		}
		if (dwarf_offdie(f->dwarf, off, cudie))
			return cu_index_get(f, cudie);
	}
	if (!dwarf_addrdie(f->dwarf, addr, cudie))
		return NULL;
	return cu_index_get(f, cudie);
}

/* The frames of node k of idx (-1: none) and its inlined callers,
 * innermost first, the innermost at file:lineno. Each inlined node's call
 * site is the position of the frame that follows it. Returns how many. */
static size_t node_frames(const struct cu_index *idx, int32_t k, const char *file, int lineno,
			  struct symbols_frame *frames)
{
	size_t n = 0;

	for (; k >= 0 && n < SYMBOLS_MAX_FRAMES; k = idx->nodes[k].parent) {
		const struct cu_node *node = &idx->nodes[k];

		frames[n++] = (struct symbols_frame){.function = node->function,
						     .system_name = node->system_name,
						     .file = file,
						     .line = lineno,
						     .start_line = node->start_line};
		if (!node->inlined)
			break;
		file = node->call_file;
		lineno = (int)node->call_line;
	}
	return n;
}

/* Resolves with DWARF; returns the number of frames (0: no DWARF here).
 * When the frames are node_frames' alone, *ref says how to make them again
 * (ref->idx NULL otherwise). */
static size_t dwarf_frames(struct symfile *f, const struct cu_index *idx, int32_t k, bool line,
			   const char *file, int lineno, uint64_t addr,
			   struct symbols_frame *frames, struct cached_ref *ref);

static size_t resolve_dwarf(struct symfile *f, uint64_t addr, struct symbols_frame *frames,
			    struct cached_ref *ref)
{
	Dwarf_Die cudie;
	const char *file = NULL;
	int lineno = 0;
	bool line = false;
	struct cu_index *idx;
	const struct cu_seg *seg;

	if (!f->dwarf || !(idx = cu_lookup(f, addr, &cudie)))
		return 0;
	if (idx->fast) {
		struct kdw_row row;

		/* The segment search's first probe, so that its miss overlaps
		 * the line search's. */
		if (idx->nsegs)
			kdw_keys64_prefetch(segment_lows(idx), idx->nsegs);

		if (idx->has_lines && kdw_lines_find(&idx->lines, addr, &row)) {
			line = true;
			file = kdw_lines_file(&idx->lines, row.file, kdw_arena(f->kdw));
			lineno = row.line;
		}
	} else {
		Dwarf_Line *dl = dwarf_getsrc_die(&cudie, addr);

		if (dl) {
			line = true;
			file = dwarf_linesrc(dl, NULL, NULL);
			dwarf_lineno(dl, &lineno);
		}
	}
	seg = idx ? segment_lookup(idx, addr) : NULL;
	return dwarf_frames(f, idx, seg ? seg->node : -1, line, file, lineno, addr, frames, ref);
}

/* The frames of addr in idx: node k's (-1: none) with the line found (line
 * set: file:lineno), else the symbol table's name where DWARF has a line
 * but no function. Returns how many; *ref as for resolve_dwarf. */
static size_t dwarf_frames(struct symfile *f, const struct cu_index *idx, int32_t k, bool line,
			   const char *file, int lineno, uint64_t addr,
			   struct symbols_frame *frames, struct cached_ref *ref)
{
	size_t n = node_frames(idx, k, file, lineno, frames);

	if (n > 0 && frames[n - 1].function)
		*ref = (struct cached_ref){idx, file, k, lineno};
	if (n == 0 && line) {
		/* A line but no function DIE (assembly, stripped DIEs): name
		 * from the symbol table, place from the line table. */
		const struct fsym *s = symtab_lookup(f, addr);

		if (s) {
			frames[0] = (struct symbols_frame){.function = display_name(f, s->name),
							   .system_name = s->name,
							   .file = file,
							   .line = lineno};
			n = 1;
		}
	}
	/* A subprogram DIE without a name (rare): borrow the symbol's. */
	if (n > 0 && !frames[n - 1].function) {
		const struct fsym *s = symtab_lookup(f, addr);

		if (s) {
			frames[n - 1].function = display_name(f, s->name);
			frames[n - 1].system_name = s->name;
		}
	}
	return n;
}

static void cached_answer(uintptr_t v, struct symbols_location *out);
static void answer(struct symbolizer *s, struct symfile *f, uint64_t addr, size_t n,
		   const struct cached_ref *ref, struct symbols_location *out, size_t slot);

static int symfile_resolve(struct symbolizer *s, struct symfile *f, uint64_t addr,
			   struct symbols_location *out)
{
	struct cached_ref ref = {0};
	uintptr_t v;
	size_t n, slot;

	out->stripped = !f->dwarf && !f->info.has_symtab;
	out->partial = !f->dwarf;
	if ((v = rcache_get(&f->results, addr, &slot)) != 0) {
		cached_answer(v, out);
		return 0;
	}
	n = resolve_dwarf(f, addr, out->frames, &ref);
	answer(s, f, addr, n, &ref, out, slot);
	return 0;
}

/* out's frames from the result cache's value v. */
static void cached_answer(uintptr_t v, struct symbols_location *out)
{
	const struct cached *c;

	if (v & CACHED_REF) {
		const struct cached_ref *r = (const struct cached_ref *)(v & ~CACHED_REF);

		out->nframes = node_frames(r->idx, r->node, r->file, r->line, out->frames);
		return;
	}
	c = (const struct cached *)v;
	out->nframes = c->nframes;
	memcpy(out->frames, c->frames, c->nframes * sizeof(c->frames[0]));
}

/* Completes the answer for addr, whose n frames DWARF gave in out->frames
 * (0: none, then the symbol table's name), and caches it (ref: how, when
 * ref->idx is set; slot: rcache_get's, or SIZE_MAX). */
static void answer(struct symbolizer *s, struct symfile *f, uint64_t addr, size_t n,
		   const struct cached_ref *ref, struct symbols_location *out, size_t slot)
{
	struct cached *c;

	if (n == 0) {
		const struct fsym *sym = symtab_lookup(f, addr);

		if (sym) {
			out->frames[0] = (struct symbols_frame){
			    .function = display_name(f, sym->name), .system_name = sym->name};
			n = 1;
		}
	}
	out->nframes = n;
	if (f->results.n >= s->max_cached)
		return; /* full: still correct, just not cached */
	if (ref->idx) {
		if (!f->refs_left) {
			f->refs_left = 2048;
			f->refs = arena_alloc(f->arena, f->refs_left * sizeof(*f->refs));
			if (!f->refs) {
				f->refs_left = 0;
				return;
			}
		}
		*f->refs = *ref;
		/* (On failure: not cached.) */
		rcache_put(&f->results, addr, (uintptr_t)f->refs | CACHED_REF, slot);
		f->refs++;
		f->refs_left--;
		return;
	}
	c = arena_alloc(f->arena, sizeof(*c) + n * sizeof(c->frames[0]));
	if (!c)
		return;
	c->nframes = (uint32_t)n;
	memcpy(c->frames, out->frames, n * sizeof(c->frames[0]));
	rcache_put(&f->results, addr, (uintptr_t)c, slot); /* on failure: not cached */
}

/* --- batches ----------------------------------------------------------------
 *
 * With every address known up front (symbolizer_resolve_batch), a cold
 * object is read in address order, one CU at a time: the CU's line program
 * runs once and is matched against all of its addresses without building
 * the row table (kdw_cu_lines_match), and its DIE tree is walked once
 * asking only about them (kdw_walk_ops.want), so that functions none of
 * them falls into are stepped over rather than indexed, and no segment
 * table is built. The answers are node_frames' as for single addresses
 * (the walk reports the same nodes and ranges for the functions it does not
 * step over; the innermost range holding an address wins, as in
 * build_segments). CUs indexed before, the reader's failures and addresses
 * in no unit go the single-address way. */

struct bmiss {
	uint64_t addr;
	uint32_t i;    /* the address's index in the batch */
	uint32_t next; /* the next miss of the same CU, in address order */
};

/* Sorts m[0..n) by address (LSD radix over the bytes in which addresses
 * differ, stable) with tmp[0..n); returns the sorted array (m or tmp). */
static struct bmiss *sort_misses(struct bmiss *m, struct bmiss *tmp, size_t n)
{
	uint64_t diff = 0;
	size_t count[256];

	for (size_t i = 1; i < n; i++)
		diff |= m[i].addr ^ m[0].addr;
	for (unsigned shift = 0; shift < 64 && (diff >> shift); shift += 8) {
		struct bmiss *t;

		if (!((diff >> shift) & 0xff))
			continue;
		memset(count, 0, sizeof(count));
		for (size_t i = 0; i < n; i++)
			count[(m[i].addr >> shift) & 0xff]++;
		for (size_t b = 0, sum = 0; b < 256; b++) {
			size_t c = count[b];

			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(m[i].addr >> shift) & 0xff]++] = m[i];
		t = m;
		m = tmp;
		tmp = t;
	}
	return m;
}

/* One CU's walk for a batch: the build (first, for fast_func) and, per
 * wanted address, the deepest node whose range holds it. */
struct cu_batch {
	struct cu_build b;
	const uint64_t *want;
	size_t nwant;
	int32_t *node, *depth;
};

static int batch_range(void *ctx, uint64_t low, uint64_t high, int32_t node, int32_t depth)
{
	struct cu_batch *cb = ctx;
	size_t lo = kdw_lower_bound(cb->want, cb->nwant, low);

	for (; lo < cb->nwant && cb->want[lo] < high; lo++)
		if (depth > cb->depth[lo]) {
			cb->depth[lo] = depth;
			cb->node[lo] = node;
		}
	return 0;
}

/* What the work found for one miss: its node in its CU's index (-1: none)
 * and its line row's file name (NULL: no row; no_file: a row whose file
 * has no name) and line. It takes the place of a struct bmiss in the
 * radix sort's spare buffer: fresh memory for it was a tenth of a cold
 * pass's page faults on libc. */
struct bfound {
	const char *file;
	int32_t node;
	int32_t line;
};
_Static_assert(sizeof(struct bfound) <= sizeof(struct bmiss) &&
		   _Alignof(struct bfound) <= _Alignof(struct bmiss),
	       "a struct bfound fits in the place of a struct bmiss");

static const char no_file[] = "";

/* One batch call, shared by its threads. The work (lines, walk, index per
 * listed CU) is spread over them, CU by CU from a counter; the answers are
 * made and emitted on the calling thread alone (the result cache, the
 * symfile's names and the caller's emit are not for threads): of its own
 * CUs as it goes, of the helpers' once they are done. */
struct batch {
	struct symbolizer *s;
	struct symfile *f;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* per address: set once emitted (a stream batch's), or NULL */
	/* Set by the calling thread before it sets listed: */
	const struct bmiss *m; /* the misses, sorted */
	struct kdw_cu **cus;   /* the listed CUs (the symfile reader's units) */
	const uint32_t *head;  /* by unit ordinal: its first miss, in address order */
	size_t nlisted;
	size_t longest;	    /* the most misses of one listed CU */
	struct bfound *res; /* per miss (by its index in m) */
	/* Helpers start before the misses are listed and wait for them. */
	atomic_bool listed;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_size_t next;    /* the next listed CU to take */
	struct cu_index **idx; /* per listed CU; NULL: go address by address */
	bool *answered;	       /* per listed CU (the calling thread's) */
};

/* A helper thread's reader over the symfile's section bytes, with an arena
 * and name table of its own: threads share nothing they write. Kept with
 * the symfile (the next batch uses it again): the CU indexes and names it
 * made live in its arena, and cached answers point at them. */
struct batch_helper {
	struct kdw *kdw; /* NULL: not opened (or could not be: takes no CU) */
	struct arena *arena;
	struct htab *names;
	struct cu_scratch scratch;
};

static void batch_helper_free(struct batch_helper *h)
{
	kdw_close(h->kdw);
	cu_scratch_free(&h->scratch);
	htab_free(h->names);
	arena_free(h->arena);
}

static void batch_helpers_free(struct symfile *f)
{
	for (size_t i = 0; f->helpers && i < BATCH_MAX_THREADS - 1; i++)
		batch_helper_free(&f->helpers[i]);
	free(f->helpers);
	if (f->early)
		batch_helper_free(f->early);
	free(f->early);
	if (f->back)
		batch_helper_free(f->back);
	free(f->back);
}

/* One thread's share: its reader, arena, names and scratch (the symfile's,
 * or a helper's), and arrays for the addresses of one CU. */
struct batch_worker {
	struct batch *bt;
	struct batch_helper *helper; /* NULL: the calling thread */
	struct cu_reader r;
	uint64_t *want; /* one CU's addresses, ascending, each once */
	int32_t *node, *depth;
	struct kdw_row *rows; /* each one's line row, when found */
	bool *found;
	size_t reader_cus;
	struct worker *thread; /* a helper's, while it works */
};

/* The work for the misses of one listed CU of w's reader (the list from
 * m[first], ascending): its line program run once against all of them,
 * its DIE tree walked once for them, the nodes found kept as an index in
 * w's arena (no segments: each miss's result says which node). NULL
 * (nothing found) when the reader cannot read the CU. */
static struct cu_index *batch_cu(struct batch_worker *w, struct kdw_cu *kcu, uint32_t first)
{
	const struct bmiss *m = w->bt->m;
	struct bfound *res = w->bt->res;
	struct cu_batch cb = {.b = {.f = w->bt->f, .r = w->r}};
	struct kdw_walk_ops ops = {.ctx = &cb, .func = fast_func, .range = batch_range};
	struct kiln_error e = {0};
	struct cu_index *idx;
	size_t nw = 0, wi = 0;

	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next)
		if (nw == 0 || w->want[nw - 1] != m[k].addr) {
			w->want[nw] = m[k].addr;
			w->node[nw] = -1;
			w->depth[nw] = -1;
			nw++;
		}
	/* Each address's line row from one run of the line program (and
	 * the file names, which inlined calls' sites need during the walk). */
	if (kdw_cu_lines_match(w->r.kdw, kcu, w->want, nw, w->rows, w->found, &cb.b.lines, &e) <
	    0) {
		if (e.code != -ENOENT)
			return NULL;
		cb.b.lines = NULL;
		memset(w->found, 0, nw * sizeof(*w->found));
	}
	memset(&e, 0, sizeof(e));
	cb.want = ops.want = w->want;
	cb.nwant = ops.nwant = nw;
	cb.node = w->node;
	cb.depth = w->depth;
	if (kdw_walk_cu(w->r.kdw, kcu, &ops, &e) < 0 || cb.b.oom)
		return NULL;
	idx = cu_index_new(w->r.arena);
	if (!idx)
		return NULL;
	idx->fast = true;
	idx->nnodes = cb.b.nnodes;
	idx->nodes = arena_alloc(w->r.arena, (cb.b.nnodes ? cb.b.nnodes : 1) * sizeof(*idx->nodes));
	if (!idx->nodes)
		return NULL;
	if (cb.b.nnodes)
		memcpy(idx->nodes, w->r.sc->nodes, cb.b.nnodes * sizeof(*idx->nodes));
	w->reader_cus++;
	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next) {
		if (m[k].addr != w->want[wi]) /* (the list is ascending) */
			wi++;
		res[k] = (struct bfound){.node = w->node[wi]};
		if (w->found[wi]) {
			res[k].file = kdw_lines_file(cb.b.lines, w->rows[wi].file, w->r.arena);
			if (!res[k].file)
				res[k].file = no_file;
			res[k].line = w->rows[wi].line;
		}
	}
	return idx;
}

static void batch_worker_free(struct batch_worker *w)
{
	free(w->want);
	free(w->node);
	free(w->depth);
	free(w->rows);
	free(w->found);
}

/* Answers (and caches) the misses of the list from m[first], which the
 * work on their CU found in idx; emits them when bt has an emit. On the
 * calling thread only. */
static void answer_found(struct batch *bt, uint32_t first, const struct cu_index *idx)
{
	const struct bmiss *m = bt->m;
	struct symbols_location loc;

	for (uint32_t k = first; k != UINT32_MAX; k = m[k].next) {
		struct cached_ref ref = {0};
		const struct bfound *r = &bt->res[k];
		size_t nf;

		loc.stripped = loc.partial = false; /* (f has DWARF) */
		nf = dwarf_frames(bt->f, idx, r->node, r->file != NULL,
				  r->file == no_file ? NULL : r->file, r->line, m[k].addr,
				  loc.frames, &ref);
		answer(bt->s, bt->f, m[k].addr, nf, &ref, &loc, SIZE_MAX);
		if (bt->emit)
			bt->emit(bt->ctx, m[k].i, &loc);
		if (bt->emitted)
			bt->emitted[m[k].i] = 1;
	}
}

/* Answers and emits the misses of listed CU c, from its work when done,
 * else address by address. On the calling thread only. */
static void batch_answer(struct batch *bt, size_t c, bool done)
{
	struct symfile *f = bt->f;
	const struct bmiss *m = bt->m;
	uint32_t first = bt->head[kdw_cu_ordinal(f->kdw, bt->cus[c])];
	struct symbols_location loc;

	if (done)
		answer_found(bt, first, bt->idx[c]);
	for (uint32_t k = first; !done && k != UINT32_MAX; k = m[k].next) {
		symfile_resolve(bt->s, f, m[k].addr, &loc);
		bt->emit(bt->ctx, m[k].i, &loc);
	}
	bt->answered[c] = true;
}

/* w's arrays for the misses of one CU (at most bt->longest); false when
 * out of memory. */
static bool batch_worker_arrays(struct batch_worker *w)
{
	size_t n = w->bt->longest ? w->bt->longest : 1;

	w->want = malloc(n * sizeof(*w->want));
	w->node = malloc(n * sizeof(*w->node));
	w->depth = malloc(n * sizeof(*w->depth));
	w->rows = malloc(n * sizeof(*w->rows));
	w->found = malloc(n * sizeof(*w->found));
	return w->want && w->node && w->depth && w->rows && w->found;
}

/* Takes listed CUs until none is left (none when its arrays cannot be
 * had: the other threads take them); the calling thread answers its own
 * at once. */
static void batch_work(struct batch_worker *w)
{
	struct batch *bt = w->bt;
	size_t c;

	if (!batch_worker_arrays(w))
		return;
	while ((c = atomic_fetch_add(&bt->next, 1)) < bt->nlisted) {
		size_t o = kdw_cu_ordinal(bt->f->kdw, bt->cus[c]);

		bt->idx[c] =
		    batch_cu(w, w->helper ? kdw_cu_at(w->r.kdw, o) : bt->cus[c], bt->head[o]);
		if (!w->helper)
			batch_answer(bt, c, bt->idx[c] != NULL);
	}
}

/* How long a helper spins for the list before it sleeps: in a VM, a vCPU
 * left idle is soon descheduled by the host, and waking it again took up
 * to milliseconds (measured here: 0.1 to 4 ms), longer than listing the
 * misses of a large batch. */
#define BATCH_SPIN 200000

/* A helper thread: makes its reader on its first batch (a copy of the
 * symfile reader's unit table, read while the calling thread lists the
 * misses: it reads only unit headers, which nothing writes after the
 * open), waits for the list, works. */
static void batch_thread(void *arg)
{
	struct batch_worker *w = arg;
	struct batch *bt = w->bt;
	struct batch_helper *h = w->helper;
	struct kiln_error e = {0};

	if (!h->arena)
		h->arena = bt->f->large ? arena_new_huge() : arena_new(256 * 1024);
	if (!h->names)
		h->names = htab_new(64);
	if (!h->kdw && h->arena && h->names)
		h->kdw = kdw_clone_units(bt->f->kdw, h->arena, &e);
	if (!h->kdw)
		return; /* out of memory: the other threads take every CU */
	w->r = (struct cu_reader){h->kdw, h->arena, h->names, &h->scratch};
	for (unsigned i = 0; !atomic_load(&bt->listed); i++) {
		if (i < BATCH_SPIN) {
			worker_pause();
			continue;
		}
		pthread_mutex_lock(&bt->lock);
		while (!atomic_load(&bt->listed))
			pthread_cond_wait(&bt->cond, &bt->lock);
		pthread_mutex_unlock(&bt->lock);
	}
	batch_work(w);
}

/* Starts the helper threads of a batch with nm misses in f (none when
 * they are few, or threads are not to be used); returns the threads the
 * work will take, this one included. */
static size_t batch_start_helpers(struct symbolizer *s, struct symfile *f, struct batch *bt,
				  struct batch_worker *w, size_t nm)
{
	size_t want = s->batch_threads, t;

	if (want > BATCH_MAX_THREADS)
		want = BATCH_MAX_THREADS;
	if (!batch_wants_helpers(s, nm) ||
	    (!s->batch_threads_always && f->secs.size[KDW_INFO] < BATCH_THREAD_INFO))
		return 1;
	if (!f->helpers && !(f->helpers = calloc(BATCH_MAX_THREADS - 1, sizeof(*f->helpers))))
		return 1;
	for (t = 1; t < want; t++) {
		w[t].bt = bt;
		w[t].helper = &f->helpers[t - 1];
		if (!(w[t].thread = symbolizer_worker(s, t - 1)))
			break;
		worker_run(w[t].thread, batch_thread, &w[t], 0);
	}
	return t;
}

/* Lets the helpers go: the list in bt is complete. */
static void batch_listed(struct batch *bt)
{
	pthread_mutex_lock(&bt->lock);
	atomic_store(&bt->listed, true);
	pthread_cond_broadcast(&bt->cond);
	pthread_mutex_unlock(&bt->lock);
}

/* --- the batch that opens a file ------------------------------------------
 *
 * A compressed file's .debug_info inflates on the second thread for 10 ms
 * and more (libc's debug file: 5.8 MB), and for most of that time the
 * calling thread, done with the smaller sections and the symbol table,
 * waited: no unit was read before the whole section was. The batch that
 * opens the file now reads units as they arrive. The calling thread lists
 * the units its addresses fall in, by .debug_aranges, and reads them from
 * the first on with a stream reader (kdw_open_stream: a unit is read once
 * all of its bytes are there), behind the inflating, answering into the
 * result cache. The second thread, once .debug_info is whole, opens the
 * reader on the whole section (which becomes the file's) and reads units
 * from the last one back; the two meet in the middle (each unit goes to
 * the thread that takes it first). The batch then finds its answers cached
 * and resolves what is left (units the readers could not read, addresses
 * that only the whole reader places).
 *
 * The answers stay only when the reader on the whole section maps every
 * address answered to the same unit as .debug_aranges did
 * (stream_batch_end): it checks .debug_aranges against the units, and it
 * adds ranges for units that .debug_aranges leaves out, which could take
 * an address from another unit. A unit referring into another one
 * (DW_FORM_ref_addr) fails in the stream reader and is left to the batch. */

enum { STREAM_UNDECIDED, STREAM_GO, STREAM_OFF };
enum { VERDICT_UNKNOWN, VERDICT_AGREE, VERDICT_CHECK };

/* The batch that opens a file, shared by its two threads. The calling
 * thread lists the units before it sets state to STREAM_GO (or to
 * STREAM_OFF: no stream batch after all); the second thread waits for
 * that decision once it has inflated .debug_info. */
struct stream_batch {
	atomic_int state;
	enum symbolizer_stream_test test;
	bool front, back;	     /* each thread reads units (from its end) */
	struct batch bt;	     /* m: the addresses sorted; res: what was found */
	struct bmiss *m, *spare;     /* (bt.m and bt.res are these two) */
	struct bmiss *units, *tmp;   /* per address in a unit: its offset, index in m */
	size_t ngroups;		     /* the units with addresses, by offset: */
	uint64_t *group_unit;	     /* the unit's offset */
	uint32_t *group_first;	     /* its first miss in bt.m (the rest chained) */
	atomic_uchar *taken;	     /* by one thread or the other */
	struct cu_index **front_idx; /* per group, what the calling thread found */
	bool *answered;		     /* per group: answered (and emitted) */
	size_t flushed;		     /* the calling thread's groups below are answered */
	size_t stream_naranges;	     /* the stream reader's ranges */
	/* Set by the second thread once its reader is open: VERDICT_AGREE
	 * when that reader maps addresses to units as the stream reader does
	 * (no answer can be taken back: the calling thread emits them as it
	 * goes); else they wait for stream_batch_end. */
	atomic_int verdict;
	struct kdw_sections secs;
	/* The second thread's reader on the whole section, its arena,
	 * names and scratch, and per group what it found (NULL: nothing). */
	struct kdw *back_kdw;
	struct batch_helper *back_h;
	struct cu_index **back_idx;
	size_t back_cus;
};

static void stream_batch_free(struct stream_batch *sb)
{
	if (!sb)
		return;
	kdw_close(sb->back_kdw);
	if (sb->back_h)
		batch_helper_free(sb->back_h);
	free(sb->back_h);
	free(sb->back_idx);
	free(sb->m);
	free(sb->spare);
	free(sb->units);
	free(sb->tmp);
	free(sb->group_unit);
	free(sb->group_first);
	free(sb->taken);
	free(sb->front_idx);
	free(sb->answered);
	free(sb->bt.emitted);
	free(sb);
}

/* A stream batch for opening f for addrs[0 .. n), if it is worth one;
 * decided and listed later (stream_batch_run). */
static struct stream_batch *stream_batch_new(struct symbolizer *s, const struct opening *op)
{
	struct stream_batch *sb;

	if (!op || op->n < 2 || op->n >= UINT32_MAX || s->libdw_only ||
	    (op->n < BATCH_THREAD_MISSES && !s->stream_test) || !(sb = calloc(1, sizeof(*sb))))
		return NULL;
	atomic_init(&sb->state, STREAM_UNDECIDED);
	atomic_init(&sb->verdict, VERDICT_UNKNOWN);
	sb->test = s->stream_test;
	sb->front = sb->test != SYMBOLIZER_STREAM_BACK;
	sb->back = sb->test != SYMBOLIZER_STREAM_FRONT && s->batch_threads >= 2;
	return sb;
}

/* Calls the stream batch off unless it was decided. */
static void stream_batch_off(struct stream_batch *sb)
{
	int undecided = STREAM_UNDECIDED;

	atomic_compare_exchange_strong(&sb->state, &undecided, STREAM_OFF);
}

/* Lists the units of the batch's addrs[0 .. n) by offset (stream reader
 * d's ranges), each unit's misses chained in address order; false when
 * out of memory. */
static bool stream_batch_list(struct stream_batch *sb, struct kdw *d, const uint64_t *addrs,
			      size_t n)
{
	const struct bmiss *units;
	struct bmiss *sorted;
	size_t nu = 0, run = 0;

	sb->m = malloc(n * sizeof(*sb->m));
	sb->spare = malloc(n * sizeof(*sb->spare));
	sb->units = malloc(n * sizeof(*sb->units));
	sb->tmp = malloc(n * sizeof(*sb->tmp));
	if (!sb->m || !sb->spare || !sb->units || !sb->tmp)
		return false;
	for (size_t i = 0; i < n; i++)
		sb->m[i] = (struct bmiss){addrs[i], (uint32_t)i, UINT32_MAX};
	sorted = sort_misses(sb->m, sb->spare, n);
	for (size_t j = 0; j < n; j++) {
		uint64_t u = kdw_stream_unit_offset(d, sorted[j].addr);

		if (u != UINT64_MAX)
			sb->units[nu++] = (struct bmiss){u, (uint32_t)j, UINT32_MAX};
	}
	/* (Stable: each unit's misses stay in address order.) */
	units = sort_misses(sb->units, sb->tmp, nu);
	for (size_t a = 0; a < nu; a++)
		sb->ngroups += a + 1 == nu || units[a + 1].addr != units[a].addr;
	sb->group_unit = malloc((sb->ngroups ? sb->ngroups : 1) * sizeof(*sb->group_unit));
	sb->group_first = malloc((sb->ngroups ? sb->ngroups : 1) * sizeof(*sb->group_first));
	sb->taken = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->taken));
	sb->front_idx = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->front_idx));
	sb->answered = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->answered));
	sb->back_idx = calloc(sb->ngroups ? sb->ngroups : 1, sizeof(*sb->back_idx));
	sb->bt.emitted = calloc(n, sizeof(*sb->bt.emitted));
	if (!sb->group_unit || !sb->group_first || !sb->taken || !sb->front_idx || !sb->answered ||
	    !sb->back_idx || !sb->bt.emitted)
		return false;
	for (size_t a = 0, g = 0; a < nu; a++) {
		bool last = a + 1 == nu || units[a + 1].addr != units[a].addr;

		if (run++ == 0) {
			sb->group_unit[g] = units[a].addr;
			sb->group_first[g] = units[a].i;
		}
		sorted[units[a].i].next = last ? UINT32_MAX : units[a + 1].i;
		if (last) {
			sb->bt.longest = run > sb->bt.longest ? run : sb->bt.longest;
			run = 0;
			g++;
		}
	}
	sb->bt.m = sorted;
	sb->bt.res = (struct bfound *)(sorted == sb->m ? sb->spare : sb->m);
	return true;
}

/* Answers (caches, emits) group g from what idx found (NULL: nothing),
 * once. On the calling thread. */
static void stream_group_answer(struct stream_batch *sb, size_t g, const struct cu_index *idx)
{
	if (!idx || sb->answered[g])
		return;
	answer_found(&sb->bt, sb->group_first[g], idx);
	sb->answered[g] = true;
}

/* Waits for the stream reader's unit at off while info inflates: NULL
 * when there is no unit at off, or the inflating failed. */
static struct kdw_cu *stream_unit_wait(struct kdw *d, struct inflate_job *info, uint64_t off)
{
	for (;;) {
		bool over = atomic_load_explicit(&info->finished, memory_order_acquire);
		size_t avail = atomic_load_explicit(&info->avail, memory_order_acquire);
		struct kiln_error e = {0};
		struct kdw_cu *cu;

		if (over && !info->ok)
			return NULL;
		cu = kdw_stream_unit(d, off, avail, &e);
		if (cu || e.code)
			return cu;
		worker_pause();
	}
}

/* The calling thread's part of the stream batch sb for addrs[0 .. n),
 * while the second thread inflates in's .debug_info: decides (lists the
 * units, or calls it off), then reads units from the front until it meets
 * the second thread. */
static void stream_batch_run(struct symbolizer *s, struct symfile *f, struct inflating *in,
			     struct stream_batch *sb, struct opening *op)
{
	struct inflate_job *info = in->info;
	struct batch_worker w;
	struct batch_helper *h;
	struct kiln_error e = {0};

	memset(&w, 0, sizeof(w));
	if (!sb)
		return;
	if (!info || (!sb->test && atomic_load(&info->finished)))
		goto off;
	/* The other sections are whole: this thread inflated them, unless
	 * the second one, done with .debug_info, took some. */
	for (size_t i = 0; i < in->njobs; i++)
		while (&in->jobs[i] != info &&
		       !atomic_load_explicit(&in->jobs[i].finished, memory_order_acquire))
			worker_pause();
	if (!inflate_sections(f->elf, in, &sb->secs) || !(f->early = calloc(1, sizeof(*f->early))))
		goto off;
	h = f->early;
	h->arena = f->large ? arena_new_huge() : arena_new(256 * 1024);
	h->names = htab_new(64);
	if (!h->arena || !h->names || !(h->kdw = kdw_open_stream(&sb->secs, h->arena, &e)) ||
	    !stream_batch_list(sb, h->kdw, op->addrs, op->n))
		goto off;
	sb->stream_naranges = kdw_naranges(h->kdw);
	sb->bt.s = s;
	sb->bt.f = f;
	sb->bt.emit = op->emit;
	sb->bt.ctx = op->ctx;
	w = (struct batch_worker){
	    .bt = &sb->bt, .helper = h, .r = {h->kdw, h->arena, h->names, &h->scratch}};
	if (!batch_worker_arrays(&w))
		goto off;
	atomic_store_explicit(&sb->state, STREAM_GO, memory_order_release);
	for (size_t g = 0; sb->front && g < sb->ngroups; g++) {
		struct kdw_cu *kcu;
		struct cu_index *idx;

		if (atomic_exchange(&sb->taken[g], 1))
			break; /* the second thread's from here on */
		kcu = stream_unit_wait(h->kdw, info, sb->group_unit[g]);
		if (!kcu) {
			if (atomic_load(&info->finished) && !info->ok)
				break;
			continue;
		}
		if (!kcu->supported || !(idx = batch_cu(&w, kcu, sb->group_first[g])))
			continue;
		sb->front_idx[g] = idx;
		if (atomic_load_explicit(&sb->verdict, memory_order_relaxed) == VERDICT_AGREE)
			for (; sb->flushed <= g; sb->flushed++)
				stream_group_answer(sb, sb->flushed, sb->front_idx[sb->flushed]);
	}
	f->reader_cus += w.reader_cus;
	f->stream_cus += w.reader_cus;
	batch_worker_free(&w);
	return;
off:
	batch_worker_free(&w);
	stream_batch_off(sb);
}

/* The second thread's part, once it has inflated .debug_info: waits for
 * the decision, opens the reader on the whole section and reads units
 * from the last one back until it meets the calling thread. Returns
 * whether there was a stream batch. */
static bool stream_batch_back(struct stream_batch *sb, struct inflate_job *info, bool large)
{
	struct batch_worker w;
	struct batch_helper *h;
	struct kiln_error e = {0};
	int state;

	while ((state = atomic_load_explicit(&sb->state, memory_order_acquire)) == STREAM_UNDECIDED)
		worker_pause();
	if (state != STREAM_GO)
		return false;
	if (!sb->back || !info->ok || !(h = calloc(1, sizeof(*h))))
		return true;
	sb->back_h = h;
	h->arena = large ? arena_new_huge() : arena_new(256 * 1024);
	h->names = htab_new(64);
	if (!h->arena || !h->names || !(sb->back_kdw = kdw_open(&sb->secs, h->arena, &e)))
		return true;
	atomic_store_explicit(&sb->verdict,
			      kdw_aranges_whole(sb->back_kdw) &&
				      kdw_naranges(sb->back_kdw) == sb->stream_naranges
				  ? VERDICT_AGREE
				  : VERDICT_CHECK,
			      memory_order_relaxed);
	w = (struct batch_worker){
	    .bt = &sb->bt, .helper = h, .r = {sb->back_kdw, h->arena, h->names, &h->scratch}};
	if (batch_worker_arrays(&w))
		for (size_t g = sb->ngroups; g-- > 0;) {
			struct kdw_cu *kcu;

			if (atomic_exchange(&sb->taken[g], 1))
				break; /* the calling thread's from here back */
			kcu = kdw_unit_at(sb->back_kdw, sb->group_unit[g]);
			if (kcu && kcu->supported)
				sb->back_idx[g] = batch_cu(&w, kcu, sb->group_first[g]);
		}
	sb->back_cus = w.reader_cus;
	batch_worker_free(&w);
	return true;
}

/* Whether f's reader (on the whole section) maps every address of group g
 * to the group's unit. */
static bool stream_group_agrees(struct symfile *f, const struct stream_batch *sb, size_t g)
{
	for (uint32_t k = sb->group_first[g]; k != UINT32_MAX; k = sb->bt.m[k].next) {
		const struct kdw_cu *cu = kdw_cu_for_addr(f->kdw, sb->bt.m[k].addr);

		if (!cu || cu->offset != sb->group_unit[g])
			return false;
	}
	return true;
}

/* Once both threads are done and libdw has the file: gives f the second
 * thread's reader (else opens one), answers what the threads found (those
 * not answered yet) when that reader agrees on their units, else forgets
 * every cached answer (all of them this batch's); hands op the addresses
 * emitted; frees sb. */
static void stream_batch_end(struct symbolizer *s, struct symfile *f, struct stream_batch *sb,
			     struct opening *op)
{
	bool keep, check;

	if (f->dwarf && !s->libdw_only) {
		if (sb && sb->back_kdw) {
			f->kdw = sb->back_kdw;
			f->secs = sb->secs;
			f->back = sb->back_h;
			sb->back_kdw = NULL;
			sb->back_h = NULL;
		} else {
			open_reader(f);
		}
	}
	if (!sb || atomic_load(&sb->state) != STREAM_GO) {
		stream_batch_free(sb);
		return;
	}
	keep = f->dwarf && f->kdw && kdw_aranges_whole(f->kdw);
	check = keep && kdw_naranges(f->kdw) != sb->stream_naranges;
	for (size_t g = 0; check && keep && g < sb->ngroups; g++)
		if (sb->front_idx[g] || sb->back_idx[g])
			keep = stream_group_agrees(f, sb, g);
	if (keep) {
		for (size_t g = 0; g < sb->ngroups; g++)
			stream_group_answer(sb, g,
					    sb->front_idx[g] ? sb->front_idx[g] : sb->back_idx[g]);
		f->reader_cus += sb->back_cus;
		f->stream_cus += sb->back_cus;
	} else {
		/* (What was emitted stands: the verdict was given by the reader
		 * on the whole section, which libdw then refused.) */
		rcache_clear(&f->results);
	}
	op->emitted = sb->bt.emitted;
	sb->bt.emitted = NULL;
	stream_batch_free(sb);
}

/* symbolizer_resolve_batch for the open symfile f; emitted (or NULL): the
 * addresses answered already (by the stream batch that opened f). */
static int symfile_resolve_batch(struct symbolizer *s, struct symfile *f, const uint64_t *addrs,
				 size_t n, symbols_emit_fn emit, void *ctx, const uint8_t *emitted)
{
	struct batch bt = {.s = s, .f = f, .emit = emit, .ctx = ctx};
	struct batch_worker w[BATCH_MAX_THREADS];
	struct symbols_location loc;
	struct bmiss *m = NULL, *tmp = NULL, *sorted;
	uint32_t *head = NULL, *len = NULL; /* by unit ordinal */
	size_t nm = 0, ncus, nthreads = 0;

	memset(w, 0, sizeof(w));
	/* (With the cache full, a batch's nodes would be kept for answers
	 * that are not cached.) */
	if (f->kdw && n > 1 && n < UINT32_MAX && f->results.n < s->max_cached) {
		m = malloc(n * sizeof(*m));
		tmp = malloc(n * sizeof(*tmp));
		ncus = kdw_ncus(f->kdw);
		head = malloc((ncus ? ncus : 1) * sizeof(*head));
		len = malloc((ncus ? ncus : 1) * sizeof(*len));
		bt.cus = malloc(n * sizeof(*bt.cus));
		bt.idx = malloc(n * sizeof(*bt.idx));
		bt.answered = calloc(n, sizeof(*bt.answered));
	}
	if (!m || !tmp || !head || !len || !bt.cus || !bt.idx || !bt.answered) {
		/* Not worth it, or not possible: one by one. */
		for (size_t i = 0; i < n; i++) {
			if (emitted && emitted[i])
				continue;
			symfile_resolve(s, f, addrs[i], &loc);
			emit(ctx, i, &loc);
		}
		goto out;
	}
	atomic_init(&bt.listed, false);
	atomic_init(&bt.next, 0);
	pthread_mutex_init(&bt.lock, NULL);
	pthread_cond_init(&bt.cond, NULL);
	/* Cached answers first; the rest sorted by address. */
	loc.stripped = !f->dwarf && !f->info.has_symtab;
	loc.partial = !f->dwarf;
	for (size_t i = 0; i < n; i++) {
		size_t slot;
		uintptr_t v;

		if (emitted && emitted[i])
			continue;
		/* (A file just opened has nothing cached.) */
		v = f->results.n ? rcache_get(&f->results, addrs[i], &slot) : 0;
		if (v) {
			cached_answer(v, &loc);
			emit(ctx, i, &loc);
		} else {
			m[nm++] = (struct bmiss){addrs[i], (uint32_t)i, UINT32_MAX};
		}
	}
	/* The helpers before the sort: they make their readers meanwhile (and
	 * a thread takes a while to start). A warm batch starts none. */
	nthreads = batch_start_helpers(s, f, &bt, w, nm);
	sorted = sort_misses(m, tmp, nm);
	/* Each reader CU's misses as a list in address order (pushed from
	 * the highest address down); the others one by one. */
	memset(head, 0xff, (ncus ? ncus : 1) * sizeof(*head));
	for (size_t j = nm; j-- > 0;) {
		struct kdw_cu *kcu = NULL;
		void **user = kdw_arange_user(f->kdw, sorted[j].addr, &kcu);
		size_t o;

		if (!kcu || !kcu->supported || kcu->user || (user && *user)) {
			symfile_resolve(s, f, sorted[j].addr, &loc);
			emit(ctx, sorted[j].i, &loc);
			continue;
		}
		o = kdw_cu_ordinal(f->kdw, kcu);
		if (head[o] == UINT32_MAX) {
			bt.cus[bt.nlisted++] = kcu;
			len[o] = 0;
		}
		sorted[j].next = head[o];
		head[o] = (uint32_t)j;
		if (++len[o] > bt.longest)
			bt.longest = len[o];
	}
	bt.m = sorted;
	bt.res = (struct bfound *)(sorted == m ? tmp : m);
	bt.head = head;
	/* The work, on this thread and the helpers. */
	batch_listed(&bt);
	w[0] = (struct batch_worker){.bt = &bt, .r = symfile_reader(f)};
	batch_work(&w[0]);
	for (size_t t = 0; t < nthreads; t++) {
		if (w[t].thread)
			worker_wait(w[t].thread);
		f->reader_cus += w[t].reader_cus;
	}
	pthread_mutex_destroy(&bt.lock);
	pthread_cond_destroy(&bt.cond);
	/* The helpers' CUs; those the work did not take (no memory for it)
	 * or the reader could not read go address by address. */
	for (size_t c = bt.nlisted; c-- > 0;)
		if (!bt.answered[c])
			batch_answer(&bt, c, c < atomic_load(&bt.next) && bt.idx[c]);
out:
	for (size_t t = 0; t < BATCH_MAX_THREADS; t++)
		batch_worker_free(&w[t]);
	free(m);
	free(tmp);
	free(head);
	free(len);
	free(bt.cus);
	free(bt.idx);
	free(bt.answered);
	return 0;
}

struct symbolizer *symbolizer_new(const struct symbolizer_config *config)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	elf_version(EV_CURRENT);
	pthread_mutex_init(&s->lock, NULL);
	s->debuginfo = config ? config->debuginfo : NULL;
	s->max_cached =
	    config && config->max_cached_results ? config->max_cached_results : (1u << 20);
	s->recheck = config && config->recheck_seconds > 0 ? config->recheck_seconds : 10;
	s->libdw_only = config && config->libdw_only;
	s->by_build_id_only = config && config->by_build_id_only;
	s->batch_threads = config && config->batch_threads ? config->batch_threads : 2;
	s->batch_threads_always = config && config->batch_threads_always;
	s->stream_test = config ? config->stream_test : SYMBOLIZER_STREAM_SHARED;
	s->files = htab_new(64);
	if (!s->files) {
		symbolizer_free(s);
		return NULL;
	}
	return s;
}

void symbolizer_free(struct symbolizer *s)
{
	size_t it = 0;
	const void *k;
	size_t kl;
	uint64_t v;

	if (!s)
		return;
	for (size_t i = 0; i < BATCH_MAX_THREADS - 1; i++)
		worker_free(s->workers[i]);
	while (s->files && htab_next(s->files, &it, &k, &kl, &v))
		symfile_free((struct symfile *)(uintptr_t)v);
	htab_free(s->files);
	while (s->retired) {
		struct symfile *next = s->retired->next_retired;

		symfile_free(s->retired);
		s->retired = next;
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Picks the file to open for obj: the debuginfo store's by build ID, else the
 * path (when its build ID matches, or none was given) unless
 * by_build_id_only. */
static int locate(struct symbolizer *s, const struct symbols_object *obj, char *out, size_t outsz,
		  struct kiln_error *e)
{
	bool has_id = obj->build_id && *obj->build_id;
	bool has_path = obj->path && *obj->path && !s->by_build_id_only;
	int rc = -ENOENT;

	if (has_id && s->debuginfo) {
		rc = debuginfo_store_find(s->debuginfo, obj->build_id, has_path ? obj->path : NULL,
					  out, outsz);
		if (rc == 0 || rc == -EAGAIN)
			return rc == 0 ? 0
				       : kiln_error_set(e, EAGAIN, "debuginfo %s: being fetched",
							obj->build_id);
	}
	if (has_path) {
		struct elfinfo info;

		if (elfinfo_read_file(obj->path, &info, e) < 0)
			return -ENOENT;
		if (has_id && strcasecmp(info.build_id, obj->build_id) != 0)
			return kiln_error_set(e, ENOENT, "%s: build ID %s, want %s", obj->path,
					      info.build_id[0] ? info.build_id : "none",
					      obj->build_id);
		snprintf(out, outsz, "%s", obj->path);
		return 0;
	}
	return kiln_error_set(e, ENOENT, "no debuginfo for build ID %s",
			      has_id ? obj->build_id : "(none)");
}

/* A provisional symfile (no DWARF) is due: looks for obj's file again (which
 * may queue a debuginfod fetch once the negative cache expired) and, when
 * another file is found now, opens it in f's place; f is retired, so the
 * strings it handed out stay valid. Caller holds the lock. */
static struct symfile *recheck(struct symbolizer *s, const struct symbols_object *obj,
			       const char *key, struct symfile *f)
{
	char path[4096];
	struct symfile *nf;
	uint64_t *slot;

	f->recheck_at = time(NULL) + s->recheck;
	if (locate(s, obj, path, sizeof(path), NULL) != 0 || strcmp(path, f->path) == 0)
		return f;
	nf = symfile_open(s, path, obj->build_id, NULL, NULL);
	slot = htab_lookup(s->files, key, strlen(key));
	if (!nf || !slot) {
		symfile_free(nf);
		return f;
	}
	log_debug("symbolizer: %s: %s replaces %s", key, path, f->path);
	nf->recheck_at = f->recheck_at;
	nf->obj_build_id = f->obj_build_id;
	nf->obj_path = f->obj_path;
	f->obj_build_id = f->obj_path = NULL;
	f->next_retired = s->retired;
	s->retired = f;
	*slot = (uint64_t)(uintptr_t)nf;
	s->last_len = 0;
	return nf;
}

/* Opens obj's file, keyed by key, into s->files; caller holds the lock.
 * (Apart from symfile_get, which runs for every address: its 4 KiB path
 * buffer made each call's frame span a page of stack.) */
static __attribute__((noinline)) int symfile_add(struct symbolizer *s,
						 const struct symbols_object *obj, const char *key,
						 struct opening *op, struct symfile **out,
						 struct kiln_error *e)
{
	struct symfile *f;
	char path[4096];
	int rc;

	rc = locate(s, obj, path, sizeof(path), e);
	if (rc < 0)
		return rc; /* not cached: may appear later */
	f = symfile_open(s, path, obj->build_id, op, e);
	if (!f)
		return -ENOENT;
	f->recheck_at = time(NULL) + s->recheck;
	f->obj_build_id = strdup(obj->build_id ? obj->build_id : "");
	f->obj_path = strdup(obj->path ? obj->path : "");
	if (!f->obj_build_id || !f->obj_path) {
		symfile_free(f);
		return -ENOMEM;
	}
	rc = htab_put(s->files, key, strlen(key), (uint64_t)(uintptr_t)f);
	if (rc < 0) {
		symfile_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* The open symfile for obj (opening it on first use, for the batch op,
 * NULL for one address); caller holds the lock. */
static int symfile_get(struct symbolizer *s, const struct symbols_object *obj, struct opening *op,
		       struct symfile **out, struct kiln_error *e)
{
	const char *key = obj->build_id && *obj->build_id ? obj->build_id : obj->path;
	struct symfile *f;
	uint64_t v;
	size_t len;
	bool hit_last;

	if (!key || !*key)
		return kiln_error_set(e, EINVAL, "object has neither build ID nor path");
	/* One strcmp against the last key (kept NUL-terminated) rather than
	 * a strlen and a memcmp per call. */
	hit_last = s->last_len && strcmp(key, s->last_key) == 0 && (f = s->last) != NULL;
	len = hit_last ? s->last_len : strlen(key);
	if (hit_last ||
	    (htab_get(s->files, key, len, &v) && v && (f = (struct symfile *)(uintptr_t)v))) {
		if (!f->dwarf && time(NULL) >= f->recheck_at)
			f = recheck(s, obj, key, f);
		/* (Not copied again per call when it is the last one.) */
		if (!(hit_last && f == s->last) && len < sizeof(s->last_key)) {
			memcpy(s->last_key, key, len);
			s->last_key[len] = '\0';
			s->last_len = len;
			s->last = f;
		}
		*out = f;
		return 0;
	}
	return symfile_add(s, obj, key, op, out, e);
}

int symbolizer_resolve(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
		       struct symbols_location *out, struct kiln_error *e)
{
	struct symfile *f;
	int rc;

	out->nframes = 0;
	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, NULL, &f, e);
	if (rc == 0)
		rc = symfile_resolve(s, f, addr, out);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_resolve_batch(struct symbolizer *s, const struct symbols_object *obj,
			     const uint64_t *addrs, size_t n, symbols_emit_fn emit, void *ctx,
			     struct kiln_error *e)
{
	struct opening op = {addrs, n, emit, ctx, NULL};
	struct symfile *f;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, &op, &f, e);
	if (rc == 0)
		rc = symfile_resolve_batch(s, f, addrs, n, emit, ctx, op.emitted);
	free(op.emitted);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_normalize(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
			 uint64_t map_start, uint64_t map_limit, uint64_t map_offset,
			 uint64_t *vaddr, struct kiln_error *e)
{
	struct symfile *f;
	int rc;

	*vaddr = addr;
	pthread_mutex_lock(&s->lock);
	rc = symfile_get(s, obj, NULL, &f, e);
	if (rc == 0)
		rc = symbols_normalize(&f->info, addr, map_start, map_limit, map_offset, vaddr);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int symbolizer_normalize_mapping(struct symbolizer *s, const struct symbols_object *obj,
				 uint64_t addr, uint64_t map_start, uint64_t map_limit,
				 uint64_t map_offset, uint64_t *vaddr, struct kiln_error *e)
{
	int rc;

	*vaddr = addr;
	if (map_limit <= map_start)
		return 0; /* no addresses: addr is file-relative already */
	rc = symbolizer_normalize(s, obj, addr, map_start, map_limit, map_offset, vaddr, e);
	return rc == -ERANGE ? 0 : rc; /* *vaddr as symbols_normalize left it */
}

void symbolizer_recheck(struct symbolizer *s)
{
	size_t it = 0, kl;
	const void *k;
	uint64_t v;
	time_t now = time(NULL);
	char key[4096];

	pthread_mutex_lock(&s->lock);
	while (htab_next(s->files, &it, &k, &kl, &v)) {
		struct symfile *f = (struct symfile *)(uintptr_t)v;

		if (!f || f->dwarf || now < f->recheck_at || kl >= sizeof(key))
			continue;
		memcpy(key, k, kl);
		key[kl] = '\0';
		/* Replacing the value of the current key keeps the iteration. */
		recheck(s, &(struct symbols_object){f->obj_build_id, f->obj_path}, key, f);
	}
	pthread_mutex_unlock(&s->lock);
}

void symbolizer_forget(struct symbolizer *s, const char *build_id)
{
	uint64_t *slot;

	if (!build_id || !*build_id)
		return;
	pthread_mutex_lock(&s->lock);
	slot = htab_lookup(s->files, build_id, strlen(build_id));
	if (slot && *slot) {
		struct symfile *f = (struct symfile *)(uintptr_t)*slot;

		/* htab has no delete: a zero slot means "look again". */
		f->next_retired = s->retired;
		s->retired = f;
		*slot = 0;
		s->last_len = 0;
	}
	pthread_mutex_unlock(&s->lock);
}

void symbolizer_dwarf_stats(struct symbolizer *s, size_t *reader_cus, size_t *stream_cus,
			    size_t *libdw_cus)
{
	size_t streamed = 0;
	size_t it = 0, kl;
	const void *k;
	uint64_t v;

	pthread_mutex_lock(&s->lock);
	*reader_cus = *libdw_cus = 0;
	while (htab_next(s->files, &it, &k, &kl, &v)) {
		const struct symfile *f = (const struct symfile *)(uintptr_t)v;

		if (f) {
			*reader_cus += f->reader_cus;
			streamed += f->stream_cus;
			*libdw_cus += f->libdw_cus;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (stream_cus)
		*stream_cus = streamed;
}
