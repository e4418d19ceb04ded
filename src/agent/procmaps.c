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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int maps_push(struct proc_maps *m, const struct proc_mapping *e)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
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
		rc = maps_push(out, &e);
		if (rc) {
			free(e.path);
			free(e.build_id);
			return rc;
		}
	}
	return 0;
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
