/*
 * procmaps.c — parsing /proc/PID/maps.
 *
 * Line format (proc(5)): "start-end perms offset major:minor inode   path".
 * The path may contain spaces and ends at the newline; " (deleted)" is kept
 * as part of it, as the kernel prints it. Only executable mappings are kept:
 * a stack frame can only point into code.
 */
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int procmaps_push(struct proc_maps *m, const struct proc_mapping *e)
{
	if (m->n == m->cap) {
		/* Lazy entries hold a few mappings and gaps (the ones samples
		 * hit): start small, in malloc's per-thread cache sizes. */
		size_t cap = m->cap ? m->cap * 2 : 4;
		struct proc_mapping *nv = realloc(m->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		m->v = nv;
		m->cap = cap;
	}
	m->v[m->n++] = *e;
	return 0;
}

/* Hex (base 16) or decimal digits at *p, advancing it; false if none or
 * on overflow. sscanf cost more than the kernel's printing of the line. */
static bool parse_num(const char **p, const char *end, unsigned base, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	for (; s < end; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	if (s == *p)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool skip_char(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

/* One line without its newline: "start-end perms offset major:minor inode
 * [path]". Fills e (path and build_id left NULL); *perms_x says whether
 * the mapping is executable. */
static bool parse_line(const char *p, const char *end, struct proc_mapping *e, bool *perms_x,
		       const char **path)
{
	const char *perms;
	uint64_t maj, min;

	if (!parse_num(&p, end, 16, &e->start) || !skip_char(&p, end, '-') ||
	    !parse_num(&p, end, 16, &e->limit) || !skip_char(&p, end, ' '))
		return false;
	perms = p;
	while (p < end && *p != ' ')
		p++;
	if (p == perms || !skip_char(&p, end, ' ') || !parse_num(&p, end, 16, &e->offset) ||
	    !skip_char(&p, end, ' ') || !parse_num(&p, end, 16, &maj) || !skip_char(&p, end, ':') ||
	    !parse_num(&p, end, 16, &min) || !skip_char(&p, end, ' ') ||
	    !parse_num(&p, end, 10, &e->inode) || maj > UINT32_MAX || min > UINT32_MAX ||
	    e->limit < e->start)
		return false;
	e->dev_major = (unsigned)maj;
	e->dev_minor = (unsigned)min;
	*perms_x = p - perms >= 3 && perms[2] == 'x';
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	*path = p;
	return true;
}

int procmaps_parse(const char *text, size_t len, struct proc_maps *out, struct kiln_error *err)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *path;
		struct proc_mapping e;
		bool x;
		int rc;

		lineno++;
		if (le == p) {
			p = le + 1;
			continue;
		}
		memset(&e, 0, sizeof(e));
		if (!parse_line(p, le, &e, &x, &path)) {
			int ll = (int)(le - p > 200 ? 200 : le - p);

			return kiln_error_set(err, EINVAL, "maps line %u: cannot parse \"%.*s\"",
					      lineno, ll, p);
		}
		p = nl ? nl + 1 : end;
		if (!x)
			continue;
		e.exec = true;
		e.path = strndup(path, (size_t)(le - path));
		e.build_id = strdup("");
		if (!e.path || !e.build_id) {
			free(e.path);
			free(e.build_id);
			return -ENOMEM;
		}
		rc = procmaps_push(out, &e);
		if (rc) {
			free(e.path);
			free(e.build_id);
			return rc;
		}
	}
	return 0;
}

/* PROCMAP_QUERY (Linux 6.11, uapi/linux/fs.h), declared here for older
 * headers; the layout is fixed by the ABI (the size field versions it). */
struct kiln_procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define KILN_PROCMAP_QUERY		    _IOWR('f', 17, struct kiln_procmap_query)
#define KILN_PROCMAP_QUERY_VMA_EXECUTABLE   0x04
#define KILN_PROCMAP_QUERY_COVERING_OR_NEXT 0x10

int procmaps_query(int maps_fd, struct proc_maps *out)
{
	char name[4096];
	uint64_t addr = 0;

	for (;;) {
		struct kiln_procmap_query q = {
		    .size = sizeof(q),
		    .query_flags =
			KILN_PROCMAP_QUERY_VMA_EXECUTABLE | KILN_PROCMAP_QUERY_COVERING_OR_NEXT,
		    .query_addr = addr,
		    .vma_name_size = sizeof(name),
		    .vma_name_addr = (uint64_t)(uintptr_t)name,
		};
		struct proc_mapping e = {0};
		int rc;

		if (ioctl(maps_fd, KILN_PROCMAP_QUERY, &q) != 0) {
			if (errno == ENOENT) /* no executable mapping at or after addr */
				return 0;
			if (errno == ENOTTY || errno == EINVAL)
				return -EOPNOTSUPP;
			return -errno;
		}
		if (q.vma_end <= q.vma_start || q.vma_end <= addr)
			return -EINVAL;
		e.start = q.vma_start;
		e.limit = q.vma_end;
		e.offset = q.vma_offset;
		e.inode = q.inode;
		e.dev_major = q.dev_major;
		e.dev_minor = q.dev_minor;
		e.exec = true;
		e.path = strndup(q.vma_name_size ? name : "", sizeof(name));
		e.build_id = strdup("");
		rc = !e.path || !e.build_id ? -ENOMEM : procmaps_push(out, &e);
		if (rc) {
			free(e.path);
			free(e.build_id);
			return rc;
		}
		addr = q.vma_end;
	}
}

int procmaps_query_at(int maps_fd, uint64_t addr, struct proc_mapping *out, char *name,
		      size_t namesz)
{
	struct kiln_procmap_query q = {
	    .size = sizeof(q),
	    .query_flags = KILN_PROCMAP_QUERY_VMA_EXECUTABLE | KILN_PROCMAP_QUERY_COVERING_OR_NEXT,
	    .query_addr = addr,
	    .vma_name_size = (uint32_t)namesz,
	    .vma_name_addr = (uint64_t)(uintptr_t)name,
	};

	if (ioctl(maps_fd, KILN_PROCMAP_QUERY, &q) != 0) {
		if (errno == ENOTTY || errno == EINVAL)
			return -EOPNOTSUPP;
		return -errno;
	}
	if (q.vma_end <= q.vma_start || q.vma_end <= addr)
		return -EINVAL;
	if (!q.vma_name_size)
		name[0] = '\0';
	*out = (struct proc_mapping){.start = q.vma_start,
				     .limit = q.vma_end,
				     .offset = q.vma_offset,
				     .inode = q.inode,
				     .dev_major = q.dev_major,
				     .dev_minor = q.dev_minor,
				     .exec = true,
				     .path = name};
	return 0;
}

int procmaps_insert(struct proc_maps *m, const struct proc_mapping *e)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start < e->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Keep what is known on an overlap (the process remapped code: an
	 * exec, which starts a new entry, is the usual way). */
	if ((lo < m->n && m->v[lo].start < e->limit) || (lo > 0 && m->v[lo - 1].limit > e->start))
		return -EEXIST;
	if (procmaps_push(m, e) != 0)
		return -ENOMEM;
	memmove(&m->v[lo + 1], &m->v[lo], (m->n - 1 - lo) * sizeof(*m->v));
	m->v[lo] = *e;
	return 0;
}

int procmaps_query_addr(int maps_fd, uint64_t addr)
{
	struct kiln_procmap_query q = {
	    .size = sizeof(q),
	    .query_flags = KILN_PROCMAP_QUERY_VMA_EXECUTABLE,
	    .query_addr = addr,
	};

	if (ioctl(maps_fd, KILN_PROCMAP_QUERY, &q) == 0)
		return 0;
	if (errno == ENOTTY || errno == EINVAL)
		return -EOPNOTSUPP;
	return -errno;
}

const struct proc_mapping *procmaps_find(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* The kernel prints maps sorted by address and they never overlap. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].limit)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

void procmaps_free(struct proc_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].path);
		free(m->v[i].build_id);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}
