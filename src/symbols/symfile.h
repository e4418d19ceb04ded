/*
 * symfile.h — one object (an ELF file) as the symbolizer holds it, and the
 * symbolizer itself (internal to src/symbols). The object layer: its
 * symbol table (symtab.c), result cache (rcache.h), CU index
 * (cu_index.h), inflated sections (inflate.h) and Kiln's DWARF reader.
 *
 * Layers of src/symbols, each calling only those below it (symbols.h has
 * the map): the public API (symbolizer.c) -> batches (batch.c,
 * stream_batch.c, which also opens an object: symfile_open) -> resolving
 * one address (resolve.c) -> the object (symfile.c, symtab.c, cu_index.c,
 * rcache.c) -> inflating (inflate.c, hugemem.c) and the DWARF reader
 * (dwarf_reader.h) with libdw.
 *
 * Names from libdw and libelf point into the mapped file and live as long
 * as the symfile; demangled names are interned in the symfile's arena. A
 * symfile that is forgotten (newer debuginfo) or replaced (a provisional
 * one, without DWARF, for which a better file turned up: recheck) is
 * retired, not freed, so strings already handed out stay valid until
 * symbolizer_free.
 */
#ifndef KILN_SYMBOLS_SYMFILE_H
#define KILN_SYMBOLS_SYMFILE_H

#include <elfutils/libdw.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "symbols/cu_index.h"
#include "symbols/dwarf_reader.h"
#include "symbols/inflate.h"
#include "symbols/rcache.h"
#include "symbols/symbols.h"

struct worker;

struct fsym {
	uint64_t addr, size;
	const char *name;
};

struct cu_arange {
	uint64_t low, high;
	Dwarf_Off cu; /* the CU DIE's offset */
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
 * are listed. Under about a megabyte of DIEs a helper makes a cold pass
 * no faster and only adds CPU; a debug file of several megabytes (libc's)
 * gains from one. */
#define BATCH_THREAD_MISSES 2048
#define BATCH_THREAD_INFO   ((size_t)2 << 20)

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

/* Worker i of s, started on first use; NULL when no thread can be had. */
struct worker *symbolizer_worker(struct symbolizer *s, size_t i);

void symfile_free(struct symfile *f);
void batch_helper_free(struct batch_helper *h);
void batch_helpers_free(struct symfile *f);

/* Opens Kiln's DWARF reader on f's (inflated) sections into f->kdw (left
 * NULL when it cannot read them: libdw alone answers). */
void symfile_open_reader(struct symfile *f);

/* Whether elf's memory goes in huge pages (LARGE_FILE bytes of DWARF and
 * symbol tables, or more). */
bool symfile_large(Elf *elf);

/* Loads f's function symbols (.symtab, else .dynsym), sorted. 0 or -ENOMEM. */
int symtab_load(struct symfile *f);

/* The function symbol holding addr (one without a size: up to the next
 * symbol, or 4 KiB for the last one), or NULL. */
const struct fsym *symtab_lookup(const struct symfile *f, uint64_t addr);

/* Display name for a raw name: demangled and interned in names (copies in
 * arena), or raw itself. */
const char *symtab_intern(struct htab *names, struct arena *arena, const char *raw);

/* symtab_intern in f's own names and arena. */
const char *symtab_name(struct symfile *f, const char *raw);

#endif
