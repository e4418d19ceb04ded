/*
 * inflate.c — compressed debug sections inflated before libdw and Kiln's
 * reader see them, on the calling thread and a second one (see inflate.h).
 * Above hugemem.c (the memory they are inflated into); below the object
 * (symfile.c, stream_batch.c's symfile_open), which it tells nothing but
 * through struct inflate_with's callbacks.
 *
 * Debian's debug files (and many distributions' binaries) carry
 * SHF_COMPRESSED DWARF, which dwarf_begin_elf inflates whole, every debug
 * section, with zlib: a large part of a cold symbolization of libc,
 * much of it spent on .debug_loclists that symbolization never reads. So before
 * libdw sees the file: sections it would inflate for nothing become empty
 * (libdw ignores a section without data), and the ones needed are inflated
 * here with ISA-L's igzip (as fast as libdeflate, several times faster
 * than zlib, and it inflates in steps).
 * Anything unexpected (zstd, a size mismatch) is left to libdw.
 *
 * Even so inflating is the largest single part of a cold pass over a
 * compressed file (libc's debug file: 8.6 MB out of 3.2 MB, half the pass),
 * and the sections are independent: with enough bytes to inflate, a second
 * thread inflates the largest (.debug_info, two thirds of the bytes) and
 * then takes others too, while this one inflates the rest and reads the
 * symbol table (inflate_start ... inflate_finish). No libelf call runs on
 * the second thread: they all stay on this one.
 */
#include <gelf.h>
#include <isa-l/igzip_lib.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/worker.h"
#include "symbols/hugemem.h"
#include "symbols/inflate.h"

/* DWARF sections the symbolizer reads (through libdw): names, ranges, lines
 * and the CU lookup table. */
static bool debug_section_needed(const char *name)
{
	static const char *const needed[] = {
	    ".debug_info",     ".debug_abbrev",	     ".debug_line", ".debug_line_str",
	    ".debug_str",      ".debug_str_offsets", ".debug_addr", ".debug_ranges",
	    ".debug_rnglists", ".debug_aranges",
	};

	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
		if (strcmp(name, needed[i]) == 0)
			return true;
	return false;
}

#define INFLATE_THREAD_BYTES ((size_t)1 << 20) /* compressed: below, one thread */

/* Output published per step of a job (j->avail): small enough for a
 * reader to follow closely, large enough that the steps cost nothing
 * (ISA-L's igzip inflates in 256 KiB steps as fast as in one, and as
 * fast as libdeflate on whole buffers). */
#define INFLATE_STEP ((size_t)256 << 10)

/* Inflates j's zlib stream (its Adler-32 checked) step by step; true when
 * it made exactly j->out_size bytes. */
static bool inflate_steps(struct inflate_state *st, struct inflate_job *j)
{
	size_t done = 0;

	if (j->src_size > UINT32_MAX)
		return false;
	isal_inflate_init(st);
	st->crc_flag = ISAL_ZLIB;
	st->next_in = (uint8_t *)(uintptr_t)j->src;
	st->avail_in = (uint32_t)j->src_size;
	for (;;) {
		size_t step = j->out_size - done < INFLATE_STEP ? j->out_size - done : INFLATE_STEP;
		uint32_t in_before = st->avail_in;

		st->next_out = j->out + done;
		st->avail_out = (uint32_t)step;
		if (isal_inflate(st) != ISAL_DECOMP_OK)
			return false;
		done += step - st->avail_out;
		atomic_store_explicit(&j->avail, done, memory_order_release);
		if (st->block_state == ISAL_BLOCK_FINISH)
			return done == j->out_size;
		if (st->avail_out == step && st->avail_in == in_before)
			return false; /* no progress: the input ends, or out is full */
	}
}

static void inflate_one(struct inflate_state *st, struct inflate_job *j)
{
	/* The shared region is populated job by job, each by the thread
	 * inflating it: populating it whole before the second thread
	 * started was a millisecond on its way, and at times (the kernel
	 * compacting memory for the huge pages) over ten. */
	if (j->out && j->carved && j->out_size)
		hugemem_populate(j->out, j->out_size);
	if (j->out)
		j->ok = inflate_steps(st, j);
	atomic_store_explicit(&j->finished, true, memory_order_release);
}

/* Takes jobs until none is left; first (the largest job) too when set. */
void inflate_jobs(struct inflating *in, bool first)
{
	struct inflate_state *st = malloc(sizeof(*st));
	size_t i;

	if (st && first && in->njobs)
		inflate_one(st, &in->jobs[0]);
	while (st && (i = atomic_fetch_add(&in->next, 1)) < in->njobs)
		inflate_one(st, &in->jobs[i]);
	free(st);
}

/* The second thread: the largest job, which the first thread never takes
 * (a thread is slow to start: taking jobs only from the counter, it was
 * often too late for that one, and the two ran one after the other), then
 * whatever is left. */
static void inflate_thread(void *arg)
{
	struct inflating *in = arg;

	inflate_jobs(in, true);
	/* After a stream batch the batch has little left: no helper will be
	 * wanted. */
	if (in->with.after && in->info &&
	    in->with.after(in->with.follower, in->info, in->with.large))
		worker_spin_after(in->thread, 0);
}

static int job_larger_first(const void *a, const void *b)
{
	const struct inflate_job *x = a, *y = b;

	return x->src_size < y->src_size ? 1 : x->src_size > y->src_size ? -1 : 0;
}

void inflate_start(struct inflating *in, Elf *elf, struct inflated **kept, size_t *nkept,
		   const struct inflate_with *with)
{
	struct worker *thread;
	size_t shstrndx, nsecs, region_size = 0, region_used = 0, src_bytes = 0;
	uint8_t *region = NULL;
	Elf_Scn *scn = NULL;

	memset(in, 0, sizeof(*in));
	if (elf_getshdrstrndx(elf, &shstrndx) != 0 || elf_getshdrnum(elf, &nsecs) != 0 ||
	    !(in->jobs = calloc(nsecs ? nsecs : 1, sizeof(*in->jobs))))
		return;
	/* One region in huge pages for all the sections inflated. */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;

		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED) &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) && debug_section_needed(name) &&
		    gelf_getchdr(scn, &ch) && ch.ch_type == ELFCOMPRESS_ZLIB &&
		    ch.ch_size / 1032 <= sh.sh_size)
			region_size += (ch.ch_size + 63) & ~(size_t)63;
	}
	if (region_size && (*kept = malloc(sizeof(**kept))) != NULL &&
	    (region = hugemem_alloc(&region_size, false)) != NULL)
		(*kept)[(*nkept)++] = (struct inflated){region, region_size};
	while ((scn = elf_nextscn(elf, scn)) != NULL && in->njobs < nsecs) {
		struct inflate_job *j = &in->jobs[in->njobs];
		GElf_Shdr sh;
		GElf_Chdr ch;
		const char *name;
		Elf_Data *d;
		size_t hdr;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_COMPRESSED))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strncmp(name, ".debug_", 7) != 0 || !gelf_getchdr(scn, &ch) ||
		    ch.ch_type != ELFCOMPRESS_ZLIB)
			continue;
		d = elf_getdata(scn, NULL);
		hdr = gelf_fsize(elf, ELF_T_CHDR, 1, EV_CURRENT);
		if (!d || !d->d_buf || d->d_size < hdr || d->d_off != 0)
			continue;
		/* The header's size is untrusted (uploads): deflate cannot
		 * expand more than 1032:1, and the memory is committed at once. */
		if (ch.ch_size / 1032 > d->d_size)
			continue;
		*j = (struct inflate_job){.scn = scn,
					  .src = (const uint8_t *)d->d_buf + hdr,
					  .src_size = d->d_size - hdr,
					  .align = ch.ch_addralign ? ch.ch_addralign : 1,
					  .info = strcmp(name, ".debug_info") == 0};
		if (debug_section_needed(name)) {
			struct inflated *v = realloc(*kept, (*nkept + 1) * sizeof(*v));

			if (!v)
				break;
			*kept = v;
			j->out_size = ch.ch_size;
			if (region && region_size - region_used >= ch.ch_size) {
				j->out = region + region_used;
				region_used += (ch.ch_size + 63) & ~(size_t)63;
				j->carved = true;
			} else if (!(j->out = hugemem_alloc_big(ch.ch_size ? ch.ch_size : 1))) {
				break;
			}
			src_bytes += j->src_size;
		}
		in->njobs++;
	}
	qsort(in->jobs, in->njobs, sizeof(*in->jobs), job_larger_first);
	atomic_init(&in->next, 1);
	for (size_t i = 0; i < in->njobs; i++) {
		atomic_init(&in->jobs[i].avail, 0);
		atomic_init(&in->jobs[i].finished, false);
	}
	if (in->njobs > 0 &&
	    (with->always || (src_bytes >= INFLATE_THREAD_BYTES && in->njobs > 1)) &&
	    (thread = with->thread(with->thread_ctx)) != NULL) {
		in->thread = thread;
		if (in->jobs[0].info && in->jobs[0].out)
			in->info = &in->jobs[0];
		in->with = *with;
		worker_run(thread, inflate_thread, in, with->spin_us);
	} else {
		atomic_store(&in->next, 0);
	}
}

void inflate_finish(struct inflating *in, struct inflated **kept, size_t *nkept)
{
	/* (The second thread waits for the follower's decision.) */
	if (in->with.stop)
		in->with.stop(in->with.follower);
	if (in->thread)
		worker_wait(in->thread);
	for (size_t i = 0; i < in->njobs; i++) {
		struct inflate_job *j = &in->jobs[i];
		Elf_Data *d = elf_getdata(j->scn, NULL);
		GElf_Shdr sh;

		if (j->out && !j->ok) {
			if (!j->carved)
				munmap(j->out, j->out_size ? j->out_size : 1);
			continue; /* libdw will try, and say what is wrong */
		}
		if (j->out && !j->carved)
			(*kept)[(*nkept)++] =
			    (struct inflated){j->out, j->out_size ? j->out_size : 1};
		if (!d || !gelf_getshdr(j->scn, &sh))
			continue;
		sh.sh_flags &= ~(GElf_Xword)SHF_COMPRESSED;
		sh.sh_size = j->out_size;
		if (!gelf_update_shdr(j->scn, &sh))
			continue;
		d->d_buf = j->out;
		d->d_size = j->out_size;
		d->d_type = ELF_T_BYTE;
		d->d_align = j->align;
	}
	free(in->jobs);
	in->jobs = NULL;
}

bool inflate_sections(Elf *elf, const struct inflating *in, struct kdw_sections *secs)
{
	GElf_Ehdr eh;
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	memset(secs, 0, sizeof(*secs));
	if (!gelf_getehdr(elf, &eh) || eh.e_type == ET_REL || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strncmp(name, ".debug_", 7) != 0)
			continue;
		for (int i = 0; i < KDW_NSECS; i++) {
			const struct inflate_job *j = NULL;

			if (strcmp(name, kdw_sec_names[i]) != 0)
				continue;
			for (size_t k = 0; in && k < in->njobs && !j; k++)
				j = in->jobs[k].scn == scn ? &in->jobs[k] : NULL;
			if (j) {
				if (!j->out)
					continue; /* not needed: made empty */
				if (j != in->info && !(atomic_load(&j->finished) && j->ok))
					return false;
				secs->p[i] = j->out;
				secs->size[i] = j->out_size;
				continue;
			}
			if (sh.sh_flags & SHF_COMPRESSED)
				return false;
			d = elf_getdata(scn, NULL);
			if (d && d->d_buf && d->d_size) {
				secs->p[i] = d->d_buf;
				secs->size[i] = d->d_size;
			}
		}
	}
	return secs->size[KDW_INFO] && secs->size[KDW_ABBREV];
}
