/*
 * labels.c — label sets and the labels derived from a process's cgroup.
 *
 * Label sets are small (a dozen entries), so a sorted array with linear
 * insertion is simpler and faster than a hash. Sorted order is what pprof
 * sample labels and Prometheus series want anyway.
 *
 * Container ids: the runtimes put a 64-hex id in the cgroup path in a few
 * shapes, all handled by looking for a 64-hex run in each component after
 * stripping a known prefix ("docker-", "cri-containerd-", "crio-",
 * "libpod-") and the ".scope" suffix:
 *   /docker/<id>                                     docker, cgroupfs driver
 *   /system.slice/docker-<id>.scope                  docker, systemd driver
 *   /kubepods/burstable/pod<uid>/<id>                containerd/cri-o, cgroupfs
 *   /kubepods.slice/.../cri-containerd-<id>.scope    containerd, systemd
 *   /kubepods.slice/.../crio-<id>.scope              cri-o, systemd
 *   /machine.slice/libpod-<id>.scope, /libpod_parent/libpod-<id>   podman
 */
#include "common/labels.h"
#include "agent/agent.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int label_find(const struct agent_labels *l, const char *name, bool *found)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		int c = strcmp(l->v[i].name, name);

		if (c == 0) {
			*found = true;
			return (int)i;
		}
		if (c > 0)
			break;
	}
	*found = false;
	return (int)i;
}

int labels_set(struct agent_labels *l, const char *name, const char *value)
{
	bool found;
	int i = label_find(l, name, &found);
	char *v;

	if (!value || !*value) {
		if (found) {
			free(l->v[i].name);
			free(l->v[i].value);
			memmove(&l->v[i], &l->v[i + 1], (l->n - (size_t)i - 1) * sizeof(l->v[0]));
			l->n--;
		}
		return 0;
	}
	v = strdup(value);
	if (!v)
		return -ENOMEM;
	if (found) {
		free(l->v[i].value);
		l->v[i].value = v;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct agent_label *nv = realloc(l->v, cap * sizeof(*nv));

		if (!nv) {
			free(v);
			return -ENOMEM;
		}
		l->v = nv;
		l->cap = cap;
	}
	memmove(&l->v[i + 1], &l->v[i], (l->n - (size_t)i) * sizeof(l->v[0]));
	l->v[i].value = v;
	l->v[i].name = strdup(name);
	if (!l->v[i].name) {
		memmove(&l->v[i], &l->v[i + 1], (l->n - (size_t)i) * sizeof(l->v[0]));
		free(v);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

const char *labels_get(const struct agent_labels *l, const char *name)
{
	bool found;
	int i = label_find(l, name, &found);

	return found ? l->v[i].value : NULL;
}

int labels_copy(struct agent_labels *dst, const struct agent_labels *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int rc = labels_set(dst, src->v[i].name, src->v[i].value);

		if (rc)
			return rc;
	}
	return 0;
}

void labels_free(struct agent_labels *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

bool agent_label_name_valid(const char *name)
{
	/* Names that start with "__" are reserved for Kiln's own labels. */
	return label_name_valid(name) && strncmp(name, "__", 2) != 0;
}

int labels_parse_list(struct agent_labels *l, const char *text, struct kiln_error *err)
{
	char *copy = strdup(text ? text : ""), *save = NULL, *item;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		while (*item == ' ')
			item++;
		if (!*item)
			continue;
		if (!eq) {
			rc = kiln_error_set(err, EINVAL, "label \"%s\": expected name=value", item);
			break;
		}
		*eq = '\0';
		if (!agent_label_name_valid(item)) {
			rc = kiln_error_set(err, EINVAL,
					    "label name \"%s\": must match [a-zA-Z_][a-zA-Z0-9_]* "
					    "and not start with __",
					    item);
			break;
		}
		rc = labels_set(l, item, eq + 1);
		if (rc)
			break;
	}
	free(copy);
	return rc;
}

int cgroup_path_from_proc(const char *text, char *out, size_t outsz)
{
	char v2[4096] = "", systemd[4096] = "", v1[4096] = "";
	const char *line = text, *pick;

	while (line && *line) {
		const char *nl = strchr(line, '\n'), *c1, *c2;
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char entry[4096];

		if (len >= sizeof(entry))
			len = sizeof(entry) - 1;
		memcpy(entry, line, len);
		entry[len] = '\0';
		line = nl ? nl + 1 : NULL;
		/* hierarchy-id:controllers:path (the path may contain ':') */
		c1 = strchr(entry, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		if (strncmp(entry, "0::", 3) == 0)
			snprintf(v2, sizeof(v2), "%s", c2 + 1);
		else if (strncmp(c1 + 1, "name=systemd:", 13) == 0)
			snprintf(systemd, sizeof(systemd), "%s", c2 + 1);
		else if (!v1[0] && strcmp(c2 + 1, "/") != 0)
			snprintf(v1, sizeof(v1), "%s", c2 + 1);
	}
	if (v2[0] && strcmp(v2, "/") != 0)
		pick = v2;
	else if (systemd[0] && strcmp(systemd, "/") != 0)
		pick = systemd;
	else if (v1[0])
		pick = v1;
	else
		pick = "/";
	if (strlen(pick) >= outsz)
		return -ENAMETOOLONG;
	strcpy(out, pick);
	return 0;
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool is_hex64(const char *s, size_t len)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

void cgroup_derive(const char *path, char *unit, size_t unitsz, char *container_id, size_t idsz)
{
	static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-",
					       "containerd-"};
	const char *p = path;

	if (unitsz)
		unit[0] = '\0';
	if (idsz)
		container_id[0] = '\0';
	while (p && *p) {
		const char *comp, *end;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		comp = p;
		end = strchr(p, '/');
		len = end ? (size_t)(end - p) : strlen(p);
		p = end;

		if ((ends_with(comp, len, ".service") || ends_with(comp, len, ".scope")) &&
		    len < unitsz) {
			memcpy(unit, comp, len);
			unit[len] = '\0';
		}
		/* Strip a runtime prefix and the .scope suffix, then look for the id. */
		if (ends_with(comp, len, ".scope"))
			len -= 6;
		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			size_t pl = strlen(prefixes[i]);

			if (len > pl && strncmp(comp, prefixes[i], pl) == 0) {
				comp += pl;
				len -= pl;
				break;
			}
		}
		if (is_hex64(comp, len) && idsz > 64) {
			memcpy(container_id, comp, 64);
			container_id[64] = '\0';
		}
	}
}
