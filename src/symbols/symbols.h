/*
 * symbols.h — from a sampled address to function, file and line.
 *
 * Three layers, each usable on its own:
 *
 *  1. ELF facts (elfinfo_*): GNU build ID, PT_LOAD program headers, ELF type,
 *     .gnu_debuglink, whether .symtab / .debug_info are present. Read with
 *     libelf from a file or from memory (uploads are validated this way).
 *
 *  2. Address normalization (symbols_normalize): a process address plus the
 *     mapping it fell in (start, limit, file offset) becomes the ELF virtual
 *     address that DWARF and the symbol tables speak. The sampled address is
 *     first turned into a file offset (addr - start + offset), then mapped
 *     through the PT_LOAD segment holding that offset. One rule serves
 *     non-PIE executables (where it is the identity), PIE executables and
 *     shared libraries, whatever their load bias.
 *
 *  3. The symbolizer (symbolizer_*): resolves ELF virtual addresses of an
 *     object, identified by GNU build ID and/or path, to a symbols_location:
 *     one or more frames, innermost first (an address inside code inlined
 *     into f gives the inlined callee first and f last, each with its
 *     file:line — the order of pprof's Location.line). DWARF first (Kiln's
 *     own reader, libdw for what it does not read: dwarf_reader.h);
 *     .symtab/.dynsym when there is no DWARF for the address. C++ and Rust
 *     names are demangled for display; the raw name is kept as system_name.
 *     Each object is opened once and kept with its symbol table and a result
 *     cache, so repeated addresses cost one hash lookup. Many addresses of
 *     one object at once (symbolizer_resolve_batch, the server's path) are
 *     read CU by CU in address order, which is several times cheaper cold,
 *     and for a large batch on two threads (symbolizer_config).
 *
 * The symbolizer's files, in layers as SQLite's are: each calls only the
 * layers below it, and each file's top comment says which layer it is.
 *
 *   public API       symbolizer.c       objects by build ID / path, the lock
 *   batches          batch.c            many addresses, CU by CU, helpers
 *                    stream_batch.c     opening an object; the batch that
 *                                       opens it reads units as they inflate
 *   one address      resolve.c          result cache, then Kiln's reader,
 *                                       then libdw, then the symbol table:
 *                                       stated once (symfile_resolve); the
 *                                       serial path batches must agree with
 *   the object       symfile.c symtab.c cu_index.c rcache.c
 *                                       one ELF file's state (symfile.h)
 *   inflating        inflate.c hugemem.c  compressed .debug_* and the worker
 *   DWARF reader     dwarf_info.c       opening: units, .debug_aranges,
 *    (dwarf_reader.h)                   a unit's line table
 *                    dwarf_walk.c       the function-DIE walk
 *                    dwarf_die.c        attribute values, names, ranges
 *                    dwarf_abbrev.c     abbreviation tables
 *                    dwarf_line.c       line programs
 *                    dwarf_line_header.c  a line unit's header, file tables
 *                    keysearch.h        one key search, 32- and 64-bit keys
 *                    dwarf_form.c       sections, cursor, strings, forms
 *   beside them      elfinfo.c (ELF facts, normalization), debuginfo.c (the
 *                    debuginfo store), extract.c, demangle.c
 *
 * Where the debug file comes from is the debuginfo store's job (see
 * debuginfo.h): the symbolizer asks it for a path by build ID and falls back
 * to the path it was given — unless by_build_id_only (the server's case:
 * there the path came from a client and is never opened).
 *
 * Ownership: strings in a symbols_location belong to the symbolizer and stay
 * valid until symbolizer_free. A symbolizer is thread-safe (one lock): the
 * server's background thread and a query may share one.
 */
#ifndef KILN_SYMBOLS_SYMBOLS_H
#define KILN_SYMBOLS_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* --- 1. ELF facts ------------------------------------------------------- */

#define ELFINFO_MAX_LOADS    16
#define SYMBOLS_BUILD_ID_MAX 64 /* hex digits; GNU build IDs are 20 bytes = 40 */

struct elfinfo_load {
	uint64_t vaddr, offset, filesz, memsz, align;
	uint32_t flags; /* PF_X | PF_W | PF_R */
};

struct elfinfo {
	/* Lowercase hex: the NT_GNU_BUILD_ID note, else the hash ID of .text
	 * (symbols_text_hash_id; build_id_is_hash set), "" if neither. */
	char build_id[SYMBOLS_BUILD_ID_MAX + 1];
	bool build_id_is_hash;
	uint16_t type; /* ET_EXEC, ET_DYN, ... */
	uint16_t machine;
	size_t nloads;
	struct elfinfo_load loads[ELFINFO_MAX_LOADS];
	char debuglink[256]; /* .gnu_debuglink file name, "" if none */
	uint32_t debuglink_crc;
	bool has_symtab, has_dynsym, has_debug_info;
};

/* Reads the facts of the ELF file at path / in [data, data+size). Returns 0,
 * -ENOEXEC when it is not a well-formed ELF file, or another -errno. */
int elfinfo_read_file(const char *path, struct elfinfo *out, struct kiln_error *e);
/* The same from the open file fd (not closed; what names it in messages). */
int elfinfo_read_fd(int fd, const char *what, struct elfinfo *out, struct kiln_error *e);
int elfinfo_read_mem(const void *data, size_t size, struct elfinfo *out, struct kiln_error *e);

/* The ID of an ELF file that has no NT_GNU_BUILD_ID note (linked with
 * --build-id=none): XXH64, seed 0, of the bytes of its .text section, as 16
 * lowercase hex digits of the big-endian value. This is what Parca's agent
 * uses for such files, so IDs agree with Parca's. .text and not the whole
 * file: stripping or adding debug sections keeps the ID, so an unstripped
 * build and its stripped copy match, and so does the debug extract (which
 * keeps .text for such files — see symbols_extract_debuginfo). elf is a
 * libelf Elf *. Returns 0, or -ENOENT when there is no .text with bytes. */
struct Elf;
int symbols_text_hash_id(struct Elf *elf, char *hex, size_t hexsz);

/* True when s is a plausible build ID: 2..SYMBOLS_BUILD_ID_MAX lowercase or
 * uppercase hex digits, even length. Used to validate untrusted input before
 * it becomes part of a path. */
bool symbols_build_id_valid(const char *s);

/* Writes to out_path what `eu-strip --only-keep-debug` keeps: all section
 * headers, but only the bytes of .symtab/.strtab, notes and .debug_*; other
 * sections become SHT_NOBITS. The build ID and addresses are unchanged, so
 * the result symbolizes like the original. A file without a GNU build ID
 * also keeps the bytes of .text, from which its hash ID is computed (so the
 * server can check the upload). Written to out_path.tmp and
 * renamed. Returns 0 or -errno (-ENOEXEC: not ELF). */
int symbols_extract_debuginfo(const char *in_path, const char *out_path, struct kiln_error *e);

/* --- 2. Address normalization -------------------------------------------- */

/* Turns a sampled address inside the mapping [map_start, map_limit) mapped
 * from file offset map_offset into the ELF virtual address of info's object.
 * Returns 0 and *vaddr, or -ERANGE when addr is outside the mapping or in no
 * PT_LOAD segment (then *vaddr is the file offset, for display). */
int symbols_normalize(const struct elfinfo *info, uint64_t addr, uint64_t map_start,
		      uint64_t map_limit, uint64_t map_offset, uint64_t *vaddr);

/* The same from what a mapping's executable_info says (Parca's WriteRaw
 * RawSample.executable_info), without the file: the ELF type and the
 * executable PT_LOAD segment (p_offset, p_vaddr) the mapping maps. ET_EXEC
 * objects run at their link addresses (identity); for ET_DYN the address
 * becomes a file offset and then a vaddr through that segment. Returns 0,
 * -ERANGE when addr is outside the mapping, -EINVAL for another ELF type
 * (the caller falls back to symbols_normalize with the file's headers). */
int symbols_normalize_exec(uint32_t elf_type, uint64_t seg_offset, uint64_t seg_vaddr,
			   uint64_t addr, uint64_t map_start, uint64_t map_limit,
			   uint64_t map_offset, uint64_t *vaddr);

/* --- 3. Symbolizer ------------------------------------------------------- */

#define SYMBOLS_MAX_FRAMES 16

struct symbols_frame {
	const char *function;	 /* display name (demangled); NULL when unresolved */
	const char *system_name; /* raw (mangled) name; NULL when unresolved */
	const char *file;	 /* source file; NULL when unknown (symbol table only) */
	int64_t line;		 /* 0 when unknown */
	int64_t start_line;	 /* the function's declaration line, 0 when unknown */
};

struct symbols_location {
	size_t nframes; /* 0: unresolved — show "[binary] +0xaddr" */
	/* The file had neither DWARF nor .symtab (a stripped binary: only
	 * .dynsym): its debuginfo, if uploaded or fetched later, says more. */
	bool stripped;
	/* The file has no DWARF (names from a symbol table, no file:line):
	 * better debuginfo may still arrive. */
	bool partial;
	struct symbols_frame frames[SYMBOLS_MAX_FRAMES];
};

struct debuginfo_store; /* debuginfo.h */

struct symbolizer_config {
	/* Where debug files come from by build ID; NULL to use only paths. */
	struct debuginfo_store *debuginfo;
	/* Results cached per object; 0 means the default (1 << 20). */
	size_t max_cached_results;
	/* An object open without DWARF (a stripped binary, a symbol table
	 * only) is provisional: its file is looked up again at most this
	 * often, and a better one (uploaded, fetched from debuginfod once the
	 * negative cache expired) replaces it. 0: 10 s. */
	int recheck_seconds;
	/* Threads a batch may read a cold object's units on, the calling one
	 * included (symbolizer_resolve_batch): 0 means 2; 1 keeps every batch
	 * on the calling thread; at most 8 are used. */
	unsigned batch_threads;
	/* Use those threads for batches of any size and object (else only
	 * for large ones, where they pay): for tests. */
	bool batch_threads_always;
	/* For tests: the batch that opens a compressed file reads its units
	 * while .debug_info inflates whatever the sizes, and one thread reads
	 * them all: SYMBOLIZER_STREAM_FRONT the calling one, with the stream
	 * reader as the section inflates; SYMBOLIZER_STREAM_BACK the one that
	 * inflates, once the section is whole. (0: both, as it goes.) */
	enum symbolizer_stream_test {
		SYMBOLIZER_STREAM_SHARED,
		SYMBOLIZER_STREAM_FRONT,
		SYMBOLIZER_STREAM_BACK
	} stream_test;
	/* Find files by build ID only, through the debuginfo store, and never
	 * open an object's path: for the server, where paths come from
	 * clients (a profile's mapping names any file, a FIFO, a device). The
	 * file found is opened without following a final symbolic link and
	 * used only when its build ID is the object's. */
	bool by_build_id_only;
	/* Resolve DWARF with libdw alone, not Kiln's own reader (which is
	 * faster and must agree with it): for tests and benchmarks. */
	bool libdw_only;
};

struct symbolizer;

struct symbolizer *symbolizer_new(const struct symbolizer_config *config);
void symbolizer_free(struct symbolizer *s);

/* Identifies one object file: by build ID (preferred: the debuginfo store is
 * asked for it) and/or by a path readable here (ignored with
 * by_build_id_only but for display). Either may be NULL/"". */
struct symbols_object {
	const char *build_id;
	const char *path;
};

/* Resolves the ELF virtual address addr in obj into *out. Returns 0 (with
 * out->nframes == 0 if the address is in no known function), -ENOENT when no
 * file for obj can be found or opened (retrying later may help: the debuginfo
 * may be uploaded or fetched meanwhile), or another -errno. */
int symbolizer_resolve(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
		       struct symbols_location *out, struct kiln_error *e);

/* Receives the answer for addrs[i] of a symbolizer_resolve_batch; loc and
 * its strings as symbolizer_resolve gives them (loc itself only for the
 * call). Called with the symbolizer's lock held: it must not call the
 * symbolizer, nor take a lock that is held around calls to it. */
typedef void (*symbols_emit_fn)(void *ctx, size_t i, const struct symbols_location *loc);

/* Resolves the n ELF virtual addresses addrs of obj, as symbolizer_resolve
 * does each (the same answers, cached the same way), calling emit once for
 * every address, in no particular order. Knowing every address up front
 * lets a cold object be read once in address order: each CU's line table
 * and DIE tree are decoded for all of its addresses at once, and functions
 * holding none of them are stepped over. This is the server's path; a
 * single address costs the same as symbolizer_resolve. Returns 0 (emit
 * called for each address), or, with emit called for none, -ENOENT /
 * another -errno as symbolizer_resolve. */
int symbolizer_resolve_batch(struct symbolizer *s, const struct symbols_object *obj,
			     const uint64_t *addrs, size_t n, symbols_emit_fn emit, void *ctx,
			     struct kiln_error *e);

/* symbols_normalize with obj's program headers, read once and cached with
 * the object. Returns 0, -ERANGE (see symbols_normalize) or -ENOENT. */
int symbolizer_normalize(struct symbolizer *s, const struct symbols_object *obj, uint64_t addr,
			 uint64_t map_start, uint64_t map_limit, uint64_t map_offset,
			 uint64_t *vaddr, struct kiln_error *e);

/* The ELF virtual address to resolve for a profile location's address
 * addr in its pprof Mapping [map_start, map_limit) from file offset
 * map_offset: the rule the server and `kilnctl pprof symbolize` share. A
 * mapping without addresses (map_limit <= map_start: runtimes that write
 * none) has file-relative addresses already, so *vaddr is addr; otherwise
 * symbolizer_normalize, whose -ERANGE (outside the mapping, in no PT_LOAD
 * segment) is no failure: what it left in *vaddr is looked up. addr is
 * taken exactly as given, never adjusted: a caller frame's address is
 * expected to point into its call instruction already (return address
 * minus one, as kiln-agent writes them). Returns 0, or -ENOENT (with e)
 * when no file for obj can be had. */
int symbolizer_normalize_mapping(struct symbolizer *s, const struct symbols_object *obj,
				 uint64_t addr, uint64_t map_start, uint64_t map_limit,
				 uint64_t map_offset, uint64_t *vaddr, struct kiln_error *e);

/* Looks again for the file of every provisional object that is due (see
 * recheck_seconds), also of objects no lookup asks about any more because
 * their answers are stored: the debuginfo store may then fetch their
 * debuginfo from debuginfod after the negative cache expired. The server's
 * background thread calls it. */
void symbolizer_recheck(struct symbolizer *s);

/* Forgets what is known about obj (a newer debug file arrived): the next
 * lookup opens the file again. */
void symbolizer_forget(struct symbolizer *s, const char *build_id);

/* How many CUs the symbolizer indexed with Kiln's DWARF reader, how many
 * of those the batch that opened a compressed file read as its
 * .debug_info inflated (stream_cus; may be NULL), and how many it left to
 * libdw (unsupported or malformed for the reader), over all objects: tests
 * check that the reader, not libdw, did the work. */
void symbolizer_dwarf_stats(struct symbolizer *s, size_t *reader_cus, size_t *stream_cus,
			    size_t *libdw_cus);

/* Formats the display of an unresolved frame, "[libc.so.6] +0x1234", into
 * buf. Returns buf. */
char *symbols_format_unresolved(char *buf, size_t size, const char *path, uint64_t addr);

/* Demangles a C++ or Rust symbol for display; returns a malloc'd string or
 * NULL when name is not mangled. */
char *symbols_demangle(const char *name);

#endif
