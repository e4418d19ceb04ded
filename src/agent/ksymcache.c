/*
 * ksymcache.c — names of the kernel frames a window's profiles need.
 *
 * Dumping /proc/kallsyms costs the kernel ~30 ms of text formatting for
 * 120k lines (plus the agent's parsing and ~10 MB of names), which was a
 * quarter of the agent's CPU over a minute; a window needs a few hundred
 * distinct kernel addresses. So addresses are named on demand, in batches,
 * by the kernel's own kallsyms lookup (the BPF symbolize program, see
 * sampler_symbolize: "name+0xoff/0xsize [module]"), and cached. Kernels
 * without bpf_snprintf (before 5.13) get a /proc/kallsyms table instead
 * (kallsyms.c), behind the same cache.
 *
 * Usage per window: ksym_cache_want for every kernel frame's lookup address,
 * one ksym_cache_resolve, then ksym_cache_lookup while building profiles.
 * Kernel text addresses are stable while the system runs, except that an
 * unloaded module or BPF program frees its addresses for another one; the
 * owner clears the cache now and then (agent.c: every few minutes) so a
 * reused address gets its new name.
 */
#include "agent/agent.h"
#include "common/arena.h"
#include "common/htab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct ksym_entry {
	const char *name;   /* NULL: no symbol covers the address */
	const char *module; /* "" for the core kernel */
};

struct ksym_cache {
	ksym_batch_fn fn;
	void *ctx;
	struct kallsyms *table; /* owned; used instead of fn when set */
	struct htab *index;	/* address -> entry index */
	struct ksym_entry *v;
	size_t n, cap;
	uint64_t *pending; /* wanted addresses not yet named */
	size_t npending, cappending;
	struct arena *strings;
	const char *last_module; /* interning: frames of one module cluster */
};

struct ksym_cache *ksym_cache_new(ksym_batch_fn fn, void *ctx)
{
	struct ksym_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fn = fn;
	c->ctx = ctx;
	c->index = htab_new(1024);
	c->strings = arena_new(64 << 10);
	if (!c->index || !c->strings) {
		ksym_cache_free(c);
		return NULL;
	}
	return c;
}

void ksym_cache_set_table(struct ksym_cache *c, struct kallsyms *table)
{
	kallsyms_free(c->table);
	c->table = table;
}

void ksym_cache_free(struct ksym_cache *c)
{
	if (!c)
		return;
	htab_free(c->index);
	arena_free(c->strings);
	kallsyms_free(c->table);
	free(c->v);
	free(c->pending);
	free(c);
}

void ksym_cache_clear(struct ksym_cache *c)
{
	struct htab *index = htab_new(1024);
	struct arena *strings = arena_new(64 << 10);

	if (!index || !strings) { /* keep the old contents: still mostly right */
		htab_free(index);
		arena_free(strings);
		return;
	}
	htab_free(c->index);
	arena_free(c->strings);
	c->index = index;
	c->strings = strings;
	c->n = 0;
	c->npending = 0;
	c->last_module = NULL;
}

size_t ksym_cache_count(const struct ksym_cache *c)
{
	return c->n;
}

int ksym_cache_want(struct ksym_cache *c, uint64_t addr)
{
	uint64_t idx = c->n;
	int rc;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct ksym_entry *nv = realloc(c->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		c->v = nv;
		c->cap = cap;
	}
	rc = htab_intern(c->index, &addr, sizeof(addr), &idx);
	if (rc != 0)
		return rc < 0 ? rc : 0; /* 1: known (named or pending) */
	if (c->npending == c->cappending) {
		size_t cap = c->cappending ? c->cappending * 2 : 256;
		uint64_t *nv = realloc(c->pending, cap * sizeof(*nv));

		if (!nv) {
			/* The index entry stays, unnamed: the frame keeps its
			 * address, which is all that is lost. */
			c->v[c->n++] = (struct ksym_entry){NULL, ""};
			return -ENOMEM;
		}
		c->pending = nv;
		c->cappending = cap;
	}
	c->v[c->n++] = (struct ksym_entry){NULL, ""};
	c->pending[c->npending++] = addr;
	return 0;
}

bool ksym_parse(const char *text, char *name, size_t namesz, char *module, size_t modsz)
{
	const char *plus, *end = text + strlen(text), *mod = strstr(text, " [");
	size_t len;

	*name = *module = '\0';
	if (mod) {
		const char *close = strchr(mod + 2, ']');

		if (!close)
			return false; /* cut short: trust nothing */
		len = (size_t)(close - (mod + 2));
		if (len >= modsz)
			return false;
		memcpy(module, mod + 2, len);
		module[len] = '\0';
		end = mod;
	}
	/* "name+0xoff/0xsize": the name ends at the last '+' before the '/'. */
	plus = NULL;
	for (const char *p = text; p < end; p++)
		if (*p == '+')
			plus = p;
	if (!plus || plus == text || strncmp(plus, "+0x", 3) != 0 || !memchr(plus, '/', end - plus))
		return false; /* a bare address: no symbol */
	len = (size_t)(plus - text);
	if (len >= namesz)
		return false;
	memcpy(name, text, len);
	name[len] = '\0';
	return true;
}

static int set_entry(struct ksym_cache *c, uint64_t addr, const char *name, const char *module)
{
	uint64_t idx;
	struct ksym_entry *e;

	if (!htab_get(c->index, &addr, sizeof(addr), &idx))
		return 0;
	e = &c->v[idx];
	e->name = arena_strdup(c->strings, name);
	if (!module[0]) {
		e->module = "";
	} else if (c->last_module && strcmp(c->last_module, module) == 0) {
		e->module = c->last_module;
	} else {
		e->module = arena_strdup(c->strings, module);
		c->last_module = e->module;
	}
	if (!e->name || !e->module) {
		e->name = NULL;
		e->module = "";
		return -ENOMEM;
	}
	return 0;
}

int ksym_cache_resolve(struct ksym_cache *c)
{
	char name[KSYM_NAME_LEN], module[KSYM_NAME_LEN];
	int rc = 0;

	for (size_t i = 0; i < c->npending && !rc;) {
		const char(*names)[KSYM_NAME_LEN];
		size_t n = c->npending - i;
		int got;

		if (c->table) {
			const char *tn, *tm;

			if (kallsyms_lookup(c->table, c->pending[i], &tn, &tm, NULL))
				rc = set_entry(c, c->pending[i], tn, tm);
			i++;
			continue;
		}
		if (!c->fn) {
			rc = -EOPNOTSUPP;
			break;
		}
		got = c->fn(c->ctx, &c->pending[i], n > KSYM_BATCH ? KSYM_BATCH : n, &names);
		if (got <= 0) {
			rc = got < 0 ? got : -EIO;
			break;
		}
		for (int j = 0; j < got && !rc; j++)
			if (ksym_parse(names[j], name, sizeof(name), module, sizeof(module)))
				rc = set_entry(c, c->pending[i + (size_t)j], name, module);
		i += (size_t)got;
	}
	/* Whatever failed stays unnamed (its frames keep their addresses)
	 * until the next clear: retrying every window would repeat the cost. */
	c->npending = 0;
	return rc;
}

bool ksym_cache_lookup(const struct ksym_cache *c, uint64_t addr, const char **name,
		       const char **module)
{
	uint64_t idx;

	if (!htab_get(c->index, &addr, sizeof(addr), &idx) || !c->v[idx].name)
		return false;
	*name = c->v[idx].name;
	*module = c->v[idx].module;
	return true;
}
