/*
 * offcpu_ksym.c — finding finish_task_switch's name in /proc/kallsyms, for
 * the off-CPU kprobe (offcpu.c) on kernels whose compiler cloned it under
 * a suffixed name (finish_task_switch.isra.0). Kept apart from offcpu.c
 * (libbpf) so that the parser links alone into its fuzz target.
 *
 * A kallsyms line is "ADDRESS TYPE NAME" with an optional "\t[MODULE]";
 * only core-kernel text symbols (type t or T) can match. Anything else that
 * does not have that shape is refused with -EINVAL, never read past its
 * length.
 */
#include "agent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESUME_FUNC "finish_task_switch"

int offcpu_kallsyms_match(const char *line, size_t len, char *name, size_t namesz)
{
	const char *p = line, *end = line + len, *sym;
	size_t n, flen = strlen(RESUME_FUNC);

	if (len && end[-1] == '\n')
		end--;
	/* ADDRESS: hex digits, then one space. */
	while (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
		p++;
	if (p == line || p + 3 > end || p[0] != ' ' || p[2] != ' ')
		return -EINVAL;
	if (p[1] != 't' && p[1] != 'T') /* not a text symbol */
		return 0;
	sym = p + 3;
	for (n = 0; sym + n < end && sym[n] != '\t' && sym[n] != ' '; n++)
		if (sym[n] == '\0')
			return -EINVAL;
	if (n == 0)
		return -EINVAL;
	if (sym + n < end) /* "\t[module]": not the core kernel */
		return 0;
	if (n < flen || memcmp(sym, RESUME_FUNC, flen) != 0 || (n > flen && sym[flen] != '.'))
		return 0;
	if (n == flen + 1) /* "finish_task_switch." names nothing */
		return -EINVAL;
	if (n + 1 > namesz)
		return -ENAMETOOLONG;
	memcpy(name, sym, n);
	name[n] = '\0';
	return 1;
}

int offcpu_find_resume_symbol(const char *kallsyms_path, char *name, size_t namesz,
			      struct kiln_error *err)
{
	FILE *f = fopen(kallsyms_path, "re");
	char *line = NULL;
	size_t cap = 0;
	unsigned long lineno = 0;
	ssize_t got;
	int rc = 0;

	if (!f)
		return kiln_error_set(err, errno, "%s: %s", kallsyms_path, strerror(errno));
	while ((got = getline(&line, &cap, f)) > 0) {
		lineno++;
		rc = offcpu_kallsyms_match(line, (size_t)got, name, namesz);
		if (rc == 1)
			break;
		if (rc < 0) {
			kiln_error_set(err, -rc, "%s:%lu: not a kallsyms line: %.80s",
				       kallsyms_path, lineno, line);
			break;
		}
	}
	free(line);
	fclose(f);
	if (rc == 1)
		return 0;
	if (rc < 0)
		return rc;
	return kiln_error_set(err, ENOENT, "%s has no %s or %s.* text symbol", kallsyms_path,
			      RESUME_FUNC, RESUME_FUNC);
}
