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

int procmaps_parse(const char *text, size_t len, struct proc_maps *out, struct kiln_error *err)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[8192], perms[8];
		struct proc_mapping e;
		int pos = 0, rc;

		lineno++;
		if (ll >= sizeof(line))
			ll = sizeof(line) - 1;
		memcpy(line, p, ll);
		line[ll] = '\0';
		p = nl ? nl + 1 : end;
		if (!ll)
			continue;
		memset(&e, 0, sizeof(e));
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 "%n",
			   &e.start, &e.limit, perms, &e.offset, &e.dev_major, &e.dev_minor,
			   &e.inode, &pos) < 7 ||
		    e.limit < e.start)
			return kiln_error_set(err, EINVAL, "maps line %u: cannot parse \"%s\"",
					      lineno, line);
		if (strlen(perms) < 3 || perms[2] != 'x')
			continue;
		e.exec = true;
		while (line[pos] == ' ' || line[pos] == '\t')
			pos++;
		e.path = strdup(line + pos);
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
