/*
 * kallsyms.c — kernel symbolization from /proc/kallsyms.
 *
 * Kernel frames are symbolized in the agent because the kernel's layout is
 * only known on the running host (KASLR, modules, BPF programs). The agent
 * asks the kernel per address (ksymcache.c); this whole-file table is its
 * fallback on kernels too old for that (no bpf_snprintf). We keep
 * text symbols (t, T, w, W) sorted by address; a frame belongs to the last
 * symbol starting at or below it. Module symbols end in "\t[module]"; the
 * module name is interned once per module. Names live in one arena.
 */
#include "agent/agent.h"
#include "common/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ksym {
	uint64_t addr;
	const char *name;
	const char *module;
};

struct kallsyms {
	struct ksym *syms;
	size_t n, cap;
	struct arena *strings;
	const char *last_module; /* interning: modules arrive grouped */
};

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	arena_free(k->strings);
	free(k);
}

static int kallsyms_add(struct kallsyms *k, uint64_t addr, const char *name, const char *module)
{
	struct ksym *s;

	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 65536;
		struct ksym *nv = realloc(k->syms, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		k->syms = nv;
		k->cap = cap;
	}
	s = &k->syms[k->n];
	s->addr = addr;
	s->name = arena_strdup(k->strings, name);
	if (!module[0]) {
		s->module = "";
	} else if (k->last_module && strcmp(k->last_module, module) == 0) {
		s->module = k->last_module;
	} else {
		s->module = arena_strdup(k->strings, module);
		k->last_module = s->module;
	}
	if (!s->name || !s->module)
		return -ENOMEM;
	k->n++;
	return 0;
}

/* Parses "ADDR TYPE NAME[\t[MODULE]]" in place: the file has ~100k lines
 * read once at start-up, so this avoids sscanf and a whole-file buffer. */
static bool parse_line(char *line, uint64_t *addr, char *type, char **name, char **module)
{
	char *p = line, *end;

	*addr = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || !end[1] || end[2] != ' ')
		return false;
	*type = end[1];
	*name = end + 3;
	p = strpbrk(*name, "\t \n");
	*module = NULL;
	if (p) {
		bool more = *p != '\n';

		*p = '\0';
		if (more && (p = strchr(p + 1, '[')) != NULL) {
			*module = p + 1;
			p = strchr(*module, ']');
			if (p)
				*p = '\0';
		}
	}
	return **name != '\0';
}

/* Adds the symbol on one NUL-terminated line if it is a text symbol. */
static int load_line(struct kallsyms *k, char *line, uint64_t *nonzero, bool *sorted)
{
	char type, *name, *module;
	uint64_t addr;

	if (!parse_line(line, &addr, &type, &name, &module))
		return 0;
	if (type != 't' && type != 'T' && type != 'w' && type != 'W')
		return 0;
	if (addr)
		(*nonzero)++;
	if (k->n && addr < k->syms[k->n - 1].addr)
		*sorted = false;
	return kallsyms_add(k, addr, name, module ? module : "");
}

/* Big read()s straight into one buffer, lines parsed in place: stdio's
 * 4 KiB reads and line copies were a visible part of start-up. */
#define KALLSYMS_READ (256u << 10)

int kallsyms_load(const char *path, struct kallsyms **out, struct kiln_error *err)
{
	struct kallsyms *k = calloc(1, sizeof(*k));
	char *buf = malloc(KALLSYMS_READ + 1);
	int fd = -1;
	uint64_t nonzero = 0;
	size_t have = 0;
	bool sorted = true, eof = false;
	int rc;

	if (!k || !buf || !(k->strings = arena_new(1 << 20))) {
		rc = -ENOMEM;
		goto fail;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = kiln_error_set(err, errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	while (!eof) {
		ssize_t got = read(fd, buf + have, KALLSYMS_READ - have);
		char *p = buf, *end;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = kiln_error_set(err, errno, "%s: %s", path, strerror(errno));
			goto fail;
		}
		eof = got == 0;
		have += (size_t)got;
		end = buf + have;
		for (;;) {
			char *nl = memchr(p, '\n', (size_t)(end - p));

			if (!nl && !(eof && p < end))
				break;
			if (!nl)
				nl = end;
			*nl = '\0';
			rc = load_line(k, p, &nonzero, &sorted);
			if (rc)
				goto fail;
			p = nl + 1 < end ? nl + 1 : end;
			if (nl == end)
				break;
		}
		have = (size_t)(end - p);
		if (have == KALLSYMS_READ) /* one line longer than the buffer: drop it */
			have = 0;
		memmove(buf, p, have);
	}
	if (k->n == 0 || nonzero == 0) {
		rc = kiln_error_set(err, EPERM,
				    "%s: no kernel symbol addresses visible (run as root, or "
				    "set kernel.kptr_restrict=0)",
				    path);
		goto fail;
	}
	/* The core kernel comes sorted; modules and BPF programs may not. */
	if (!sorted)
		qsort(k->syms, k->n, sizeof(k->syms[0]), ksym_cmp);
	free(buf);
	close(fd);
	*out = k;
	return 0;
fail:
	free(buf);
	if (fd >= 0)
		close(fd);
	kallsyms_free(k);
	return rc;
}

bool kallsyms_lookup(const struct kallsyms *k, uint64_t addr, const char **name,
		     const char **module, uint64_t *sym_start)
{
	size_t lo = 0, hi = k->n;

	if (!k->n || addr < k->syms[0].addr)
		return false;
	/* Find the last symbol with start <= addr. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	/* Past the last symbol by more than any function is long: unknown. */
	if (lo == k->n - 1 && addr - k->syms[lo].addr > (1u << 20))
		return false;
	*name = k->syms[lo].name;
	*module = k->syms[lo].module;
	if (sym_start)
		*sym_start = k->syms[lo].addr;
	return true;
}

size_t kallsyms_count(const struct kallsyms *k)
{
	return k->n;
}
