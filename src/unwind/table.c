/*
 * table.c — the row array of one file's unwind table, and
 * unwind_table_build, which decides which of the file's sources give the
 * rows.
 *
 * Sources are pushed in order of trust (Go's own table first: the Go
 * linker's .debug_frame, when present, says the same with more bytes;
 * then .eh_frame, which is what the C runtime itself unwinds with for
 * exceptions, so it is right wherever it exists; .debug_frame last). A
 * stable sort keeps that order among rows of one pc, and
 * unwind_table_finish keeps the first. A source's NONE row (the end of its
 * last function) must not hide a later source's rows, so a NONE row loses
 * to any other row at the same pc.
 */
#include "common/grow.h"
#include "unwind/unwind.h"

#include <errno.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

void unwind_table_init(struct unwind_table *t)
{
	memset(t, 0, sizeof(*t));
}

void unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

int unwind_table_push(struct unwind_table *t, uint32_t pc, uint32_t rule)
{
	if (GROW_ARRAY(t->rows, t->cap, t->n + 1, 1024))
		return -ENOMEM;
	t->rows[t->n].pc = pc;
	t->rows[t->n].rule = rule;
	t->n++;
	return 0;
}

/* Bottom-up merge sort on pc: stable (push order decides among equal
 * pcs), O(n log n) on the already mostly sorted input a CFI section gives. */
static int sort_rows(struct unwind_table *t)
{
	struct unwind_row *tmp, *src = t->rows, *dst;

	if (t->n < 2)
		return 0;
	tmp = malloc(t->n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	dst = tmp;
	for (size_t width = 1; width < t->n; width *= 2) {
		for (size_t lo = 0; lo < t->n; lo += 2 * width) {
			size_t mid = lo + width < t->n ? lo + width : t->n;
			size_t hi = lo + 2 * width < t->n ? lo + 2 * width : t->n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = src[j].pc < src[i].pc ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct unwind_row *swap = src;
		src = dst;
		dst = swap;
	}
	if (src != t->rows)
		memcpy(t->rows, src, t->n * sizeof(*src));
	free(tmp);
	return 0;
}

void unwind_table_finish(struct unwind_table *t)
{
	size_t out = 0;

	if (sort_rows(t) != 0) {
		/* Out of memory for the scratch: an insertion sort is slow but
		 * needs none, and keeps the same order. */
		for (size_t i = 1; i < t->n; i++) {
			struct unwind_row r = t->rows[i];
			size_t j = i;

			while (j > 0 && t->rows[j - 1].pc > r.pc) {
				t->rows[j] = t->rows[j - 1];
				j--;
			}
			t->rows[j] = r;
		}
	}
	for (size_t i = 0; i < t->n; i++) {
		struct unwind_row r = t->rows[i];

		if (out > 0 && t->rows[out - 1].pc == r.pc) {
			/* Same pc: the first source wins, except over a NONE. */
			if (UNWIND_RULE_KIND(t->rows[out - 1].rule) == UNWIND_NONE)
				t->rows[out - 1] = r;
			continue;
		}
		if (out > 0 && t->rows[out - 1].rule == r.rule)
			continue;
		t->rows[out++] = r;
	}
	/* A leading NONE row says nothing. */
	if (out > 0 && UNWIND_RULE_KIND(t->rows[0].rule) == UNWIND_NONE) {
		memmove(t->rows, t->rows + 1, (out - 1) * sizeof(*t->rows));
		out--;
	}
	t->n = out;
}

const struct unwind_row *unwind_table_find(const struct unwind_table *t, uint32_t pc)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}

/* Pushes the rows of src into t except where t already covers the pc
 * with a row that is not NONE (t finished; src finished). */
static int add_uncovered(struct unwind_table *t, const struct unwind_table *src)
{
	size_t n0 = t->n;

	for (size_t i = 0; i < src->n; i++) {
		struct unwind_table covered = {.rows = t->rows, .n = n0};
		const struct unwind_row *r = unwind_table_find(&covered, src->rows[i].pc);
		int rc;

		if (r && UNWIND_RULE_KIND(r->rule) != UNWIND_NONE)
			continue;
		rc = unwind_table_push(t, src->rows[i].pc, src->rows[i].rule);
		if (rc)
			return rc;
	}
	return 0;
}

static void add_stats(struct unwind_table_stats *to, const struct unwind_table_stats *from)
{
	to->fdes += from->fdes;
	to->unsupported += from->unsupported;
	to->plt += from->plt;
	to->signal += from->signal;
	to->bad += from->bad;
}

static void note_source(struct unwind_table *t, const char *name)
{
	static const char *const joined[][3] = {
	    {"gopclntab", "eh_frame", "gopclntab+eh_frame"},
	    {"gopclntab", "debug_frame", "gopclntab+debug_frame"},
	    {"eh_frame", "debug_frame", "eh_frame+debug_frame"},
	    {"gopclntab+eh_frame", "debug_frame", "gopclntab+eh_frame+debug_frame"},
	};

	if (!t->source) {
		t->source = name;
		return;
	}
	for (size_t i = 0; i < sizeof(joined) / sizeof(joined[0]); i++)
		if (strcmp(t->source, joined[i][0]) == 0 && strcmp(name, joined[i][1]) == 0)
			t->source = joined[i][2];
}

/* One source's rows into t, kept only where the sources before left pcs
 * uncovered. A source that is absent is not an error. */
static int add_source(Elf *elf, int which, struct unwind_table *t, struct kiln_error *err)
{
	static const char *const names[] = {"gopclntab", "eh_frame", "debug_frame"};
	struct unwind_table one;
	int rc;

	unwind_table_init(&one);
	if (which == 0)
		rc = unwind_gopclntab_elf(elf, &one, err);
	else
		rc = unwind_cfi_rows(elf, which == 1, &one, err);
	if (rc == -ENOENT) {
		unwind_table_free(&one);
		return 0;
	}
	if (rc < 0)
		goto out;
	unwind_table_finish(&one);
	add_stats(&t->stats, &one.stats);
	one.stats = (struct unwind_table_stats){0};
	if (one.n == 0)
		goto out;
	note_source(t, names[which]);
	if (t->n == 0) {
		/* The first source: its rows become the table's. */
		free(t->rows);
		t->rows = one.rows;
		t->n = one.n;
		t->cap = one.cap;
		return 0;
	}
	rc = add_uncovered(t, &one);
	if (rc == 0)
		unwind_table_finish(t);
out:
	unwind_table_free(&one);
	return rc < 0 ? rc : 0;
}

/* The GNU build ID of elf in hex, or false. */
static bool elf_build_id(Elf *elf, char *hex, size_t hexsz)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			const char *name = (const char *)d->d_buf + name_off;
			const uint8_t *desc = (const uint8_t *)d->d_buf + desc_off;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp(name, "GNU", 4) != 0 || nh.n_descsz < 2 ||
			    nh.n_descsz * 2 + 1 > hexsz)
				continue;
			for (size_t i = 0; i < nh.n_descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", desc[i]);
			return true;
		}
	}
	return false;
}

/* The separate debug file of elf under debug_dir, by build ID, opened
 * without blocking and only if it is a regular file: -1 if none. */
static int open_debug_file(Elf *elf, const char *debug_dir)
{
	char id[130], path[4096];
	struct stat st;
	int fd;

	if (!debug_dir || !elf_build_id(elf, id, sizeof(id)))
		return -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", debug_dir, id,
			     id + 2) >= sizeof(path))
		return -1;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int build_from_elf(Elf *elf, const char *debug_dir, struct unwind_table *t,
			  struct kiln_error *err)
{
	GElf_Ehdr eh;
	int rc = 0;

	unwind_table_init(t);
	if (!gelf_getehdr(elf, &eh))
		return kiln_error_set(err, ENOEXEC, "not an ELF file: %s", elf_errmsg(-1));
	if (eh.e_machine != EM_X86_64)
		return kiln_error_set(err, ENOTSUP,
				      "ELF machine %u: unwind tables are built for x86-64 only",
				      eh.e_machine);
	for (int which = 0; which < 3 && rc == 0; which++)
		rc = add_source(elf, which, t, err);
	/* Stripping keeps .eh_frame, which for code built without unwind
	 * tables describes only the start-up code and the PLT: the separate
	 * debug file's .debug_frame fills what is left uncovered. */
	if (rc == 0 && !(t->source && strstr(t->source, "debug_frame"))) {
		int dfd = open_debug_file(elf, debug_dir);

		if (dfd >= 0) {
			Elf *d = elf_begin(dfd, ELF_C_READ_MMAP, NULL);

			if (d) {
				rc = add_source(d, 2, t, err);
				elf_end(d);
			}
			close(dfd);
		}
	}
	if (rc == 0 && t->n == 0)
		rc = kiln_error_set(err, ENOENT,
				    "no unwind information (.eh_frame, .debug_frame "
				    "or .gopclntab)");
	if (rc)
		unwind_table_free(t);
	return rc;
}

int unwind_table_build(int fd, const char *debug_dir, struct unwind_table *t,
		       struct kiln_error *err)
{
	Elf *elf;
	int rc;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return kiln_error_set(err, ENOEXEC, "not an ELF file: %s", elf_errmsg(-1));
	rc = build_from_elf(elf, debug_dir, t, err);
	elf_end(elf);
	return rc;
}

int unwind_table_build_mem(const void *image, size_t len, struct unwind_table *t,
			   struct kiln_error *err)
{
	Elf *elf;
	int rc;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)image, len);
	if (!elf)
		return kiln_error_set(err, ENOEXEC, "not an ELF image: %s", elf_errmsg(-1));
	rc = build_from_elf(elf, NULL, t, err);
	elf_end(elf);
	return rc;
}
