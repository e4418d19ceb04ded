/*
 * extract.c — write only the debug-relevant parts of an ELF file.
 *
 * What `eu-strip --only-keep-debug` produces, built with libelf: every
 * section header survives (so section indices in .symtab stay valid, and
 * addresses too), but only the bytes of .symtab with its string table, the
 * notes (the build ID among them), .debug_* / .zdebug_*, .gnu_debugaltlink
 * and the section name table are written; every other section becomes
 * SHT_NOBITS — except .text of a file without a GNU build ID, whose ID is
 * the hash of .text (symbols_text_hash_id). Program headers are kept as they are: tools read the load
 * segments from them. The output is typically a fraction of the binary and
 * is what kiln-agent and `kilnctl debuginfo upload` send.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <elfutils/libdwelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fdio.h"
#include "symbols/symbols.h"

static bool keep_section(Elf *elf, size_t shstrndx, size_t index, const GElf_Shdr *sh,
			 size_t symtab_strndx, bool keep_text)
{
	const char *name = elf_strptr(elf, shstrndx, sh->sh_name);

	if (index == shstrndx || index == symtab_strndx)
		return true;
	/* Without a GNU build ID the file is known by the hash of .text. */
	if (keep_text && name && strcmp(name, ".text") == 0)
		return true;
	if (sh->sh_type == SHT_SYMTAB || sh->sh_type == SHT_NOTE)
		return true;
	if (!name || (sh->sh_flags & SHF_ALLOC))
		return false;
	return strncmp(name, ".debug_", 7) == 0 || strncmp(name, ".zdebug_", 8) == 0 ||
	       strcmp(name, ".gnu_debugaltlink") == 0;
}

int symbols_extract_debuginfo(const char *in_path, const char *out_path, struct kiln_error *e)
{
	int in_fd = -1, out_fd = -1, rc = 0;
	Elf *in = NULL, *out = NULL;
	GElf_Ehdr ehdr;
	size_t phnum, shstrndx, symtab_strndx = 0;
	Elf_Scn *scn = NULL;
	char tmp[4096];
	int64_t layout;
	struct stat st;
	bool keep_text;
	const void *id;

	elf_version(EV_CURRENT);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", out_path) >= (int)sizeof(tmp))
		return kiln_error_set(e, ENAMETOOLONG, "%s: path too long", out_path);
	in_fd = fd_open_regular(in_path, e);
	if (in_fd < 0)
		return in_fd;
	in = elf_begin(in_fd, ELF_C_READ_MMAP, NULL);
	if (!in || elf_kind(in) != ELF_K_ELF || !gelf_getehdr(in, &ehdr) ||
	    elf_getphdrnum(in, &phnum) != 0 || elf_getshdrstrndx(in, &shstrndx) != 0) {
		rc =
		    kiln_error_set(e, ENOEXEC, "%s: not an ELF file with section headers", in_path);
		goto out;
	}
	keep_text = dwelf_elf_gnu_build_id(in, &id) <= 0;
	/* The string table of .symtab is kept with it. */
	while ((scn = elf_nextscn(in, scn)) != NULL) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			symtab_strndx = sh.sh_link;
	}

	out_fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out_fd < 0) {
		rc = kiln_error_set(e, errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	out = elf_begin(out_fd, ELF_C_WRITE, NULL);
	if (!out || !gelf_newehdr(out, gelf_getclass(in))) {
		rc = kiln_error_set(e, EIO, "%s: %s", tmp, elf_errmsg(-1));
		goto out;
	}
	if (phnum && !gelf_newphdr(out, phnum)) {
		rc = kiln_error_set(e, EIO, "%s: %s", tmp, elf_errmsg(-1));
		goto out;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(in, (int)i, &ph) || !gelf_update_phdr(out, (int)i, &ph)) {
			rc = kiln_error_set(e, ENOEXEC, "%s: program header %zu: %s", in_path, i,
					    elf_errmsg(-1));
			goto out;
		}
	}
	scn = NULL;
	while ((scn = elf_nextscn(in, scn)) != NULL) {
		size_t index = elf_ndxscn(scn);
		Elf_Scn *nscn = elf_newscn(out);
		GElf_Shdr sh;
		Elf_Data *data, *ndata;

		if (!nscn || !gelf_getshdr(scn, &sh)) {
			rc = kiln_error_set(e, ENOEXEC, "%s: section %zu: %s", in_path, index,
					    elf_errmsg(-1));
			goto out;
		}
		if (keep_section(in, shstrndx, index, &sh, symtab_strndx, keep_text) &&
		    sh.sh_type != SHT_NOBITS) {
			/* Raw bytes: no byte-order translation either way. */
			data = elf_rawdata(scn, NULL);
			if (data && data->d_size) {
				ndata = elf_newdata(nscn);
				if (!ndata) {
					rc = kiln_error_set(e, ENOMEM, "%s: %s", tmp,
							    elf_errmsg(-1));
					goto out;
				}
				ndata->d_buf = data->d_buf;
				ndata->d_size = data->d_size;
				ndata->d_type = ELF_T_BYTE;
				ndata->d_align = sh.sh_addralign ? sh.sh_addralign : 1;
				ndata->d_version = EV_CURRENT;
			}
		} else {
			/* libelf sizes sections from their data; a NOBITS section
			 * keeps its size through a data descriptor without bytes. */
			sh.sh_type = SHT_NOBITS;
			ndata = elf_newdata(nscn);
			if (!ndata) {
				rc = kiln_error_set(e, ENOMEM, "%s: %s", tmp, elf_errmsg(-1));
				goto out;
			}
			ndata->d_buf = NULL;
			ndata->d_size = sh.sh_size;
			ndata->d_type = ELF_T_BYTE;
			ndata->d_align = sh.sh_addralign ? sh.sh_addralign : 1;
			ndata->d_version = EV_CURRENT;
		}
		if (!gelf_update_shdr(nscn, &sh)) {
			rc = kiln_error_set(e, EIO, "%s: section %zu: %s", tmp, index,
					    elf_errmsg(-1));
			goto out;
		}
	}
	ehdr.e_shstrndx = shstrndx < SHN_LORESERVE ? (uint16_t)shstrndx : SHN_XINDEX;
	if (!gelf_update_ehdr(out, &ehdr) || (layout = elf_update(out, ELF_C_NULL)) < 0) {
		rc = kiln_error_set(e, EIO, "%s: %s", tmp, elf_errmsg(-1));
		goto out;
	}
	/* The output keeps a subset of the input's bytes, so it can only be
	 * larger by padding; a hostile alignment (2^40) would otherwise make
	 * libelf write gigabytes of zeros. */
	if (fstat(in_fd, &st) < 0 || layout > st.st_size + (1 << 20)) {
		rc = kiln_error_set(e, ENOEXEC,
				    "%s: section alignments would make a %lld-byte debug file "
				    "from a %lld-byte binary; refusing",
				    in_path, (long long)layout, (long long)st.st_size);
		goto out;
	}
	if (elf_update(out, ELF_C_WRITE) < 0) {
		rc = kiln_error_set(e, EIO, "%s: %s", tmp, elf_errmsg(-1));
		goto out;
	}
	if (fsync(out_fd) < 0) {
		rc = kiln_error_set(e, errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	elf_end(out);
	out = NULL;
	close(out_fd);
	out_fd = -1;
	if (rename(tmp, out_path) < 0)
		rc = kiln_error_set(e, errno, "%s: %s", out_path, strerror(errno));
out:
	if (out)
		elf_end(out);
	if (out_fd >= 0) {
		close(out_fd);
		unlink(tmp);
	}
	if (in)
		elf_end(in);
	close(in_fd);
	return rc;
}
