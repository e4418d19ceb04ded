/*
 * buildid.c — GNU build IDs from ELF notes, with a cache.
 *
 * The build ID is what the server uses to find a binary's debug info, so
 * every file-backed mapping carries it. Notes are looked up through the
 * program headers first (PT_NOTE is what the loader maps and survives
 * section stripping; read with pread, see read_facts_fast), then the
 * section headers (libelf). Files are identified in
 * the cache by (dev, inode, size, mtime) from stat, or, for mapped files, by
 * the (dev, inode) that /proc/PID/maps prints, which needs no system call:
 * the same library mapped by 200 processes is read once. A rebuilt binary
 * normally gets a new inode (compilers and installers write a new file and
 * rename it), so it is read again. A file without a GNU build ID gets the
 * hash of its .text section instead (symbols.h, symbols_text_hash_id), the
 * ID the server recomputes to check its debuginfo upload.
 *
 * The same read also keeps the ELF type and the PT_LOAD program headers:
 * they are what a mapping's executable_info tells the server (which load
 * segment a mapping maps, so that addresses can be normalized without the
 * binary at hand).
 */
#include "agent/agent.h"
#include "common/htab.h"
#include "symbols/symbols.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int note_find_build_id(Elf_Data *data, char *hex, size_t hexsz)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const unsigned char *desc = (const unsigned char *)data->d_buf + desc_off;

		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0)
			continue;
		if (nh.n_descsz == 0 || nh.n_descsz * 2 + 1 > hexsz)
			return -ENAMETOOLONG;
		for (size_t i = 0; i < nh.n_descsz; i++)
			snprintf(hex + 2 * i, 3, "%02x", desc[i]);
		return 0;
	}
	return -ENOENT;
}

/* Finds the GNU build ID among the notes in buf (a PT_NOTE segment whose
 * notes are aligned to align bytes). */
static int notes_find_build_id(const unsigned char *buf, size_t len, size_t align, char *hex,
			       size_t hexsz)
{
	size_t off = 0;

	while (off + sizeof(Elf64_Nhdr) <= len) {
		Elf64_Nhdr nh; /* the same layout as Elf32_Nhdr */
		size_t name_off, desc_off;

		memcpy(&nh, buf + off, sizeof(nh));
		name_off = off + sizeof(nh);
		desc_off = name_off + ((nh.n_namesz + align - 1) & ~(align - 1));
		if (desc_off < name_off || desc_off > len || nh.n_descsz > len - desc_off)
			break;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(buf + name_off, "GNU", 4) == 0) {
			if (nh.n_descsz == 0 || nh.n_descsz * 2 + 1 > hexsz)
				return -ENAMETOOLONG;
			for (size_t i = 0; i < nh.n_descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", buf[desc_off + i]);
			return 0;
		}
		off = desc_off + ((nh.n_descsz + align - 1) & ~(align - 1));
	}
	return -ENOENT;
}

/* The common case without libelf: a few pread()s of the ELF header, the
 * program headers and the PT_NOTE segments. libelf maps the whole file,
 * and the munmap at the end costs a TLB shootdown on every CPU (IPIs), the
 * agent's largest cost per new binary. Returns 1 when done (*rc set), 0
 * when libelf must look (another byte order, many program headers, no
 * build ID in the segments: the section headers may still have one). */
static int read_facts_fast(int fd, char *hex, size_t hexsz, struct elf_facts *f, int *rc)
{
	union {
		Elf64_Ehdr e64;
		Elf32_Ehdr e32;
	} eh;
	unsigned char ph[64 * sizeof(Elf64_Phdr)], note[4096];
	bool is64;
	uint64_t phoff;
	size_t phnum, phentsize;

	*rc = -ENOENT;
	if (pread(fd, &eh, sizeof(eh), 0) < (ssize_t)sizeof(eh.e32) ||
	    memcmp(eh.e64.e_ident, ELFMAG, SELFMAG) != 0) {
		*rc = -ENOEXEC;
		return 1;
	}
	if (eh.e64.e_ident[EI_DATA] !=
	    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return 0;
	is64 = eh.e64.e_ident[EI_CLASS] == ELFCLASS64;
	if (!is64 && eh.e64.e_ident[EI_CLASS] != ELFCLASS32)
		return 0;
	phoff = is64 ? eh.e64.e_phoff : eh.e32.e_phoff;
	phnum = is64 ? eh.e64.e_phnum : eh.e32.e_phnum;
	phentsize = is64 ? eh.e64.e_phentsize : eh.e32.e_phentsize;
	if (phentsize != (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) ||
	    phnum * phentsize > sizeof(ph) || phnum == PN_XNUM)
		return 0;
	if (f)
		f->type = is64 ? eh.e64.e_type : eh.e32.e_type;
	if (pread(fd, ph, phnum * phentsize, (off_t)phoff) != (ssize_t)(phnum * phentsize))
		return 0;
	for (size_t i = 0; i < phnum; i++) {
		Elf64_Phdr p;

		if (is64) {
			memcpy(&p, ph + i * phentsize, sizeof(p));
		} else {
			Elf32_Phdr q;

			memcpy(&q, ph + i * phentsize, sizeof(q));
			p = (Elf64_Phdr){.p_type = q.p_type,
					 .p_flags = q.p_flags,
					 .p_offset = q.p_offset,
					 .p_vaddr = q.p_vaddr,
					 .p_filesz = q.p_filesz,
					 .p_align = q.p_align};
		}
		if (p.p_type == PT_LOAD && f && f->nloads < ELF_FACTS_MAX_LOADS)
			f->loads[f->nloads++] = (struct elf_load){.offset = p.p_offset,
								  .vaddr = p.p_vaddr,
								  .filesz = p.p_filesz,
								  .flags = p.p_flags};
		if (p.p_type == PT_NOTE && *rc == -ENOENT && p.p_filesz <= sizeof(note) &&
		    pread(fd, note, p.p_filesz, (off_t)p.p_offset) == (ssize_t)p.p_filesz)
			*rc = notes_find_build_id(note, p.p_filesz, p.p_align == 8 ? 8 : 4, hex,
						  hexsz);
	}
	if (*rc == -ENOENT) { /* let libelf try the sections from scratch */
		if (f)
			f->nloads = 0;
		return 0;
	}
	return 1;
}

/* Reads the build ID (into f->build_id, hexsz bytes), the ELF type and
 * the PT_LOAD headers of path. Returns 0, -ENOENT (ELF without a build ID:
 * type and loads are still set), -ENOEXEC, or -errno. */
static int read_facts(const char *path, char *hex, size_t hexsz, struct elf_facts *f)
{
	Elf *elf = NULL;
	GElf_Ehdr eh;
	size_t nph = 0;
	int fd, rc = -ENOENT;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (read_facts_fast(fd, hex, hexsz, f, &rc)) {
		close(fd);
		return rc;
	}
	rc = -ENOENT;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		close(fd);
		return -ENOSYS;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		rc = -ENOEXEC;
		goto out;
	}
	if (f)
		f->type = eh.e_type;
	if (elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(elf, (int)i, &ph))
				continue;
			if (ph.p_type == PT_LOAD && f && f->nloads < ELF_FACTS_MAX_LOADS) {
				f->loads[f->nloads++] = (struct elf_load){.offset = ph.p_offset,
									  .vaddr = ph.p_vaddr,
									  .filesz = ph.p_filesz,
									  .flags = ph.p_flags};
			}
			if (ph.p_type != PT_NOTE || rc != -ENOENT)
				continue;
			d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						 ELF_T_NHDR);
			if (d)
				rc = note_find_build_id(d, hex, hexsz);
		}
	}
	for (Elf_Scn *scn = NULL; rc == -ENOENT && (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (d)
			rc = note_find_build_id(d, hex, hexsz);
	}
	/* No GNU note (linked with --build-id=none): the hash of .text, as
	 * Parca's agent does, so that debuginfo can still be uploaded and
	 * found by ID (symbols_text_hash_id). */
	if (rc == -ENOENT && symbols_text_hash_id(elf, hex, hexsz) == 0)
		rc = 0;
out:
	elf_end(elf);
	close(fd);
	return rc;
}

int buildid_read_file(const char *path, char *hex, size_t hexsz)
{
	return read_facts(path, hex, hexsz, NULL);
}

bool elf_facts_load_for(const struct elf_facts *f, uint64_t map_offset, uint64_t *offset,
			uint64_t *vaddr)
{
	const struct elf_load *first_x = NULL;

	for (size_t i = 0; f && i < f->nloads; i++) {
		const struct elf_load *l = &f->loads[i];
		uint64_t page_start = l->offset & ~(uint64_t)4095;

		if (!(l->flags & PF_X))
			continue;
		if (!first_x)
			first_x = l;
		if (map_offset >= page_start && map_offset < l->offset + l->filesz) {
			*offset = l->offset;
			*vaddr = l->vaddr;
			return true;
		}
	}
	if (!first_x)
		return false;
	*offset = first_x->offset;
	*vaddr = first_x->vaddr;
	return true;
}

struct buildid_key {
	uint64_t kind; /* 1: stat identity, 2: maps identity (mtime/size 0) */
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
};

struct buildid_cache {
	struct htab *index; /* buildid_key -> index into facts + 1 */
	struct elf_facts **facts;
	size_t n, cap;
};

struct buildid_cache *buildid_cache_new(void)
{
	struct buildid_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->index = htab_new(256);
	if (!c->index) {
		free(c);
		return NULL;
	}
	return c;
}

void buildid_cache_free(struct buildid_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->facts[i]->build_id);
		free(c->facts[i]);
	}
	free(c->facts);
	htab_free(c->index);
	free(c);
}

static const struct elf_facts no_facts = {.build_id = ""};

static const struct elf_facts *cache_lookup_or_read(struct buildid_cache *c,
						    const struct buildid_key *key, const char *path)
{
	struct buildid_key k = *key;
	struct elf_facts *f;
	char hex[256] = "";
	uint64_t v;

	if (htab_get(c->index, &k, sizeof(k), &v))
		return c->facts[v - 1];
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct elf_facts **nv = realloc(c->facts, cap * sizeof(*nv));

		if (!nv)
			return &no_facts;
		c->facts = nv;
		c->cap = cap;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return &no_facts;
	if (read_facts(path, hex, sizeof(hex), f) != 0)
		hex[0] = '\0';
	f->build_id = strdup(hex);
	if (!f->build_id) {
		free(f);
		return &no_facts;
	}
	c->facts[c->n++] = f;
	if (htab_put(c->index, &k, sizeof(k), c->n) != 0) {
		c->n--;
		free(f->build_id);
		free(f);
		return &no_facts;
	}
	return f;
}

static const struct elf_facts *facts_by_stat(struct buildid_cache *c, const char *path)
{
	struct buildid_key k;
	struct stat st;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return &no_facts;
	memset(&k, 0, sizeof(k));
	k.kind = 1;
	k.dev = st.st_dev;
	k.ino = st.st_ino;
	k.size = (uint64_t)st.st_size;
	k.mtime_sec = st.st_mtim.tv_sec;
	k.mtime_nsec = st.st_mtim.tv_nsec;
	return cache_lookup_or_read(c, &k, path);
}

const char *buildid_cache_get(struct buildid_cache *c, const char *path)
{
	return facts_by_stat(c, path)->build_id;
}

const struct elf_facts *buildid_cache_facts_mapped(struct buildid_cache *c, const char *path,
						   unsigned dev_major, unsigned dev_minor,
						   uint64_t inode)
{
	struct buildid_key k;

	if (!inode)
		return facts_by_stat(c, path);
	memset(&k, 0, sizeof(k));
	k.kind = 2;
	k.dev = ((uint64_t)dev_major << 32) | dev_minor;
	k.ino = inode;
	return cache_lookup_or_read(c, &k, path);
}

const char *buildid_cache_get_mapped(struct buildid_cache *c, const char *path, unsigned dev_major,
				     unsigned dev_minor, uint64_t inode)
{
	return buildid_cache_facts_mapped(c, path, dev_major, dev_minor, inode)->build_id;
}
