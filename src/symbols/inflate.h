/*
 * inflate.h — an object's compressed debug sections (SHF_COMPRESSED,
 * zlib), inflated with ISA-L before libdw and Kiln's reader see them, the
 * largest (.debug_info) on a second thread that a stream batch may follow
 * as the bytes arrive. Internal to src/symbols: the layer under the object
 * (symfile), above hugemem.c.
 *
 *   inflate_start     finds the sections, makes room, starts the second
 *                     thread (when there is enough to inflate);
 *   inflate_jobs      the calling thread's share (meanwhile it may read
 *                     the symbol table);
 *   inflate_sections  the bytes Kiln's reader reads, also while
 *                     .debug_info still inflates;
 *   inflate_finish    waits, and hands the inflated bytes to libelf.
 *
 * Who follows the inflating (a stream batch) is the caller's business: it
 * is called back through struct inflate_with, never named here.
 */
#ifndef KILN_SYMBOLS_INFLATE_H
#define KILN_SYMBOLS_INFLATE_H

#include <libelf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/dwarf_form.h"

struct worker;

/* A mapping an object's inflating made: unmapped when the object goes. */
struct inflated {
	void *p;
	size_t size;
};

struct inflate_job;

/* What the caller gives inflate_start. */
struct inflate_with {
	/* The second thread (the caller's, started on first use), asked for
	 * only when there is enough to inflate (or always); NULL: none. */
	struct worker *(*thread)(void *ctx);
	void *thread_ctx;
	bool always;	  /* a second thread whatever the size (tests) */
	unsigned spin_us; /* how long it spins, once done, for what follows */
	bool large;	  /* the object's memory is in huge pages */
	/* A follower of .debug_info (the batch that opens the file), or
	 * after NULL: after runs on the second thread once it inflated
	 * .debug_info, and returns true when the follower took its share
	 * (the thread then stops spinning); stop runs on the calling thread
	 * in inflate_finish, before it waits for the second thread (which
	 * may be waiting in after for the follower's decision). */
	bool (*after)(void *follower, struct inflate_job *info, bool large);
	void (*stop)(void *follower);
	void *follower;
};

struct inflate_job {
	Elf_Scn *scn;
	const uint8_t *src; /* the compressed bytes, after the header */
	size_t src_size;
	uint8_t *out; /* NULL: a section not needed, made empty */
	size_t out_size;
	size_t align;
	bool carved; /* out is in the shared region, not a mapping of its own */
	bool info;   /* .debug_info's */
	bool ok;     /* set by whichever thread inflated it, before finished */
	/* Published as the inflating goes (a stream reader follows it): the
	 * bytes of out written so far, and whether the job is over. */
	atomic_size_t avail;
	atomic_bool finished;
};

struct inflating {
	struct inflate_job *jobs;
	size_t njobs;
	atomic_size_t next;    /* the next job to take */
	struct worker *thread; /* the second thread's; NULL: none */
	/* .debug_info's job when the second thread inflates it (first):
	 * the batch opening the file may read it as it comes (stream batch). */
	struct inflate_job *info;
	struct inflate_with with; /* inflate_start's */
};

/* Finds elf's compressed debug sections, makes room for the needed ones
 * (mappings appended to (*kept)[*nkept], which the caller unmaps when the
 * object goes) and starts inflating them on with->thread's thread. */
void inflate_start(struct inflating *in, Elf *elf, struct inflated **kept, size_t *nkept,
		   const struct inflate_with *with);

/* The calling thread's share: takes jobs until none is left; first (the
 * largest job) too when set. */
void inflate_jobs(struct inflating *in, bool first);

/* Waits for the second thread (the caller took its share of the jobs:
 * inflate_jobs), and hands the sections inflated to libelf (and so to
 * libdw and the reader); mappings of their own go to (*kept)[*nkept]. */
void inflate_finish(struct inflating *in, struct inflated **kept, size_t *nkept);

/* The sections Kiln's reader reads, into secs: as libelf has them (in
 * NULL: after inflate_finish), or while in's jobs still run, from their
 * outputs (of which only .debug_info's may be unfinished: its reader
 * follows it). False when the reader cannot read the file: relocatable
 * objects (their DWARF needs relocations applied), big-endian files,
 * sections still compressed (zstd, or inflation failed). */
bool inflate_sections(Elf *elf, const struct inflating *in, struct kdw_sections *secs);

#endif
