/*
 * elfinfo.c — the ELF facts the rest of Kiln needs, read with libelf.
 *
 * Used on trusted binaries (the agent's mappings, local debug files) and on
 * untrusted bytes (uploads, fuzzing), so every count and offset from the
 * file is checked by libelf or here before use, and nothing is kept open.
 * A path is opened only if it is a regular file (fd_open_regular): a
 * mapping's file name comes from a profile and may name a FIFO or a
 * device.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <elfutils/libdwelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/fdio.h"
#include "symbols/symbols.h"

static void hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int symbols_text_hash_id(struct Elf *elf, char *hex, size_t hexsz)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (hexsz < 17 || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d = NULL;
		XXH64_state_t *st;
		uint8_t be[8];
		uint64_t h;
		bool any = false;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".text") != 0)
			continue;
		st = XXH64_createState();
		if (!st)
			return -ENOMEM;
		XXH64_reset(st, 0);
		while ((d = elf_rawdata(scn, d)) != NULL) {
			if (d->d_buf && d->d_size) {
				XXH64_update(st, d->d_buf, d->d_size);
				any = true;
			}
		}
		h = XXH64_digest(st);
		XXH64_freeState(st);
		if (!any)
			return -ENOENT;
		for (int i = 0; i < 8; i++)
			be[i] = (uint8_t)(h >> (56 - 8 * i));
		hex_encode(be, 8, hex);
		return 0;
	}
	return -ENOENT;
}

/* Fills out from an open Elf handle. */
static int elfinfo_from_elf(Elf *elf, struct elfinfo *out, const char *what, struct kiln_error *e)
{
	GElf_Ehdr ehdr;
	size_t phnum, shstrndx;
	const void *id;
	ssize_t idlen;
	const char *link;
	GElf_Word crc = 0;
	Elf_Scn *scn = NULL;

	memset(out, 0, sizeof(*out));
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return kiln_error_set(e, ENOEXEC, "%s: not an ELF file", what);
	out->type = ehdr.e_type;
	out->machine = ehdr.e_machine;

	if (elf_getphdrnum(elf, &phnum) != 0)
		return kiln_error_set(e, ENOEXEC, "%s: bad program headers: %s", what,
				      elf_errmsg(-1));
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			return kiln_error_set(e, ENOEXEC, "%s: bad program header %zu", what, i);
		if (ph.p_type != PT_LOAD || out->nloads == ELFINFO_MAX_LOADS)
			continue;
		out->loads[out->nloads++] = (struct elfinfo_load){
		    .vaddr = ph.p_vaddr,
		    .offset = ph.p_offset,
		    .filesz = ph.p_filesz,
		    .memsz = ph.p_memsz,
		    .align = ph.p_align,
		    .flags = ph.p_flags,
		};
	}

	idlen = dwelf_elf_gnu_build_id(elf, &id);
	if (idlen > 0 && (size_t)idlen * 2 <= SYMBOLS_BUILD_ID_MAX)
		hex_encode(id, (size_t)idlen, out->build_id);

	if (!out->build_id[0] &&
	    symbols_text_hash_id(elf, out->build_id, sizeof(out->build_id)) == 0)
		out->build_id_is_hash = true;

	link = dwelf_elf_gnu_debuglink(elf, &crc);
	if (link) {
		snprintf(out->debuglink, sizeof(out->debuglink), "%s", link);
		out->debuglink_crc = crc;
	}

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0; /* no section names: still usable through program headers */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			out->has_symtab = true;
		else if (sh.sh_type == SHT_DYNSYM)
			out->has_dynsym = true;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && sh.sh_type == SHT_PROGBITS &&
		    (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0))
			out->has_debug_info = true;
	}
	return 0;
}

int elfinfo_read_fd(int fd, const char *what, struct elfinfo *out, struct kiln_error *e)
{
	Elf *elf;
	int rc;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return kiln_error_set(e, ENOEXEC, "%s: %s", what, elf_errmsg(-1));
	rc = elfinfo_from_elf(elf, out, what, e);
	elf_end(elf);
	return rc;
}

int elfinfo_read_file(const char *path, struct elfinfo *out, struct kiln_error *e)
{
	int fd, rc;

	fd = fd_open_regular(path, e);
	if (fd < 0)
		return fd;
	rc = elfinfo_read_fd(fd, path, out, e);
	close(fd);
	return rc;
}

int elfinfo_read_mem(const void *data, size_t size, struct elfinfo *out, struct kiln_error *e)
{
	Elf *elf;
	int rc;

	elf_version(EV_CURRENT);
	/* elf_memory takes a non-const pointer but only reads with ELF_C_READ. */
	elf = elf_memory((char *)data, size);
	if (!elf)
		return kiln_error_set(e, ENOEXEC, "ELF data: %s", elf_errmsg(-1));
	rc = elfinfo_from_elf(elf, out, "ELF data", e);
	elf_end(elf);
	return rc;
}

bool symbols_build_id_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++) {
		char c = s[n];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
		if (n >= SYMBOLS_BUILD_ID_MAX)
			return false;
	}
	return n >= 2 && n % 2 == 0;
}

int symbols_normalize_exec(uint32_t elf_type, uint64_t seg_offset, uint64_t seg_vaddr,
			   uint64_t addr, uint64_t map_start, uint64_t map_limit,
			   uint64_t map_offset, uint64_t *vaddr)
{
	*vaddr = addr;
	if (addr < map_start || (map_limit && addr >= map_limit))
		return -ERANGE;
	if (elf_type == ET_EXEC)
		return 0;
	if (elf_type != ET_DYN)
		return -EINVAL;
	*vaddr = addr - map_start + map_offset - seg_offset + seg_vaddr;
	return 0;
}

int symbols_normalize(const struct elfinfo *info, uint64_t addr, uint64_t map_start,
		      uint64_t map_limit, uint64_t map_offset, uint64_t *vaddr)
{
	uint64_t off;

	if (addr < map_start || (map_limit && addr >= map_limit)) {
		*vaddr = addr;
		return -ERANGE;
	}
	/* A separate debug file (objcopy --only-keep-debug, /usr/lib/debug)
	 * keeps the segments' addresses but not their file offsets: its code
	 * segment has no file bytes and a rewritten p_offset. The kernel maps
	 * a code segment from its first page, so the mapping's start is that
	 * page of the segment's p_vaddr. */
	for (size_t i = 0; i < info->nloads; i++) {
		const struct elfinfo_load *l = &info->loads[i];
		uint64_t v = addr - map_start + (l->vaddr & ~(uint64_t)4095);

		if ((l->flags & PF_X) && l->filesz == 0 && l->memsz && v >= l->vaddr &&
		    v - l->vaddr < l->memsz) {
			*vaddr = v;
			return 0;
		}
	}
	off = addr - map_start + map_offset;
	/* The segment whose file bytes hold this offset. The kernel maps whole
	 * pages, so a mapping starts at the page below p_offset; the exact
	 * offset still falls inside [p_offset, p_offset + p_filesz). */
	for (size_t i = 0; i < info->nloads; i++) {
		const struct elfinfo_load *l = &info->loads[i];

		if (off >= l->offset &&
		    off - l->offset < (l->memsz > l->filesz ? l->memsz : l->filesz)) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	/* In the page-rounding slack before a segment: use the executable
	 * segment's relation, which is what a return address lands in. */
	for (size_t i = 0; i < info->nloads; i++) {
		const struct elfinfo_load *l = &info->loads[i];
		uint64_t page = l->align > 1 ? l->align : 4096;

		if ((l->flags & PF_X) && off >= (l->offset & ~(page - 1)) &&
		    off < l->offset + l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	*vaddr = off;
	return -ERANGE;
}
