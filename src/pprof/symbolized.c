/*
 * symbolized.c — a profile encoded with names given to its addresses.
 *
 * What `kilnctl pprof symbolize` writes: the decoded profile, unchanged,
 * except that locations which had no lines get the frames a symbolizer
 * found for them. Nothing is rebuilt: the output message is a shallow copy
 * of the source's, in which only the arrays that change are new (string
 * table and functions grow at the end; a location that gains lines and a
 * mapping whose flags change are copied, the rest shared by pointer). So
 * ids, order, samples, labels, comments, period and time come out exactly
 * as they went in, and the cost is that of the new objects plus one pass
 * interning the source's strings and functions, which the new ones join
 * (an equal string or function is reused, not added twice).
 *
 * Everything made here lives in one arena and a few arrays that die with
 * the call; the result leaves only as bytes in the caller's buffer.
 */
#include "pprof/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a mapping gains (a bit each), by position in msg->mapping. */
#define GAIN_FUNCTIONS 1u
#define GAIN_FILENAMES 2u
#define GAIN_LINES     4u
#define GAIN_INLINE    8u

struct symbolized {
	const pprof_msg *src;
	struct arena *arena;
	struct htab *strings;	/* string -> index in strtab */
	struct htab *functions; /* function_key -> id */
	char **strtab;		/* the source's strings, then new ones */
	size_t n_str, cap_str;
	pprof_function_msg **fns; /* the source's functions, then new ones */
	size_t n_fn, cap_fn;
	uint64_t next_fn_id;
};

/* Functions are equal when these are (what pprof's own tools compare). */
struct function_key {
	int64_t name, system_name, filename, start_line;
};

/* Grows *v (of *cap elements of size sz) to hold n. 0 or -ENOMEM. */
static int grow(void *v, size_t *cap, size_t n, size_t sz)
{
	void **pv = v, *nv;
	size_t c = *cap ? *cap : 64;

	if (n <= *cap)
		return 0;
	while (c < n)
		c *= 2;
	nv = realloc(*pv, c * sz);
	if (!nv)
		return -ENOMEM;
	*pv = nv;
	*cap = c;
	return 0;
}

/* The string table index of s, appended when new. -1 on out-of-memory. */
static int64_t sym_string(struct symbolized *z, const char *s)
{
	uint64_t idx = z->n_str;
	size_t len = strlen(s);
	int rc;

	rc = htab_intern(z->strings, s, len, &idx);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return (int64_t)idx;
	if (grow(&z->strtab, &z->cap_str, z->n_str + 1, sizeof(*z->strtab)))
		return -1;
	/* The caller's string outlives the call: no copy. */
	z->strtab[z->n_str++] = (char *)s;
	return (int64_t)idx;
}

/* The id of the function frame names, added when new. 0 on out-of-memory. */
static uint64_t sym_function(struct symbolized *z, const struct pprof_frame_desc *f)
{
	const char *name = f->function ? f->function : "";
	struct function_key k = {sym_string(z, name),
				 sym_string(z, f->system_name ? f->system_name : name),
				 sym_string(z, f->filename ? f->filename : ""), f->start_line};
	uint64_t id = z->next_fn_id;
	pprof_function_msg *fn;
	int rc;

	if (k.name < 0 || k.system_name < 0 || k.filename < 0)
		return 0;
	rc = htab_intern(z->functions, &k, sizeof(k), &id);
	if (rc < 0)
		return 0;
	if (rc == 1)
		return id;
	fn = arena_alloc(z->arena, sizeof(*fn));
	if (!fn || grow(&z->fns, &z->cap_fn, z->n_fn + 1, sizeof(*z->fns)))
		return 0;
	*fn = (pprof_function_msg)PERFTOOLS__PROFILES__FUNCTION__INIT;
	fn->id = id;
	fn->name = k.name;
	fn->system_name = k.system_name;
	fn->filename = k.filename;
	fn->start_line = k.start_line;
	z->fns[z->n_fn++] = fn;
	z->next_fn_id++;
	return id;
}

/* Interns the source's strings and functions, so that new ones equal to
 * them are not added again. 0 or -ENOMEM. */
static int sym_seed(struct symbolized *z)
{
	const pprof_msg *m = z->src;

	if (grow(&z->strtab, &z->cap_str, m->n_string_table, sizeof(*z->strtab)) ||
	    grow(&z->fns, &z->cap_fn, m->n_function, sizeof(*z->fns)))
		return -ENOMEM;
	for (size_t i = 0; i < m->n_string_table; i++) {
		uint64_t idx = i;

		if (htab_intern(z->strings, m->string_table[i], strlen(m->string_table[i]), &idx) <
		    0)
			return -ENOMEM;
		z->strtab[z->n_str++] = m->string_table[i];
	}
	for (size_t i = 0; i < m->n_function; i++) {
		const pprof_function_msg *f = m->function[i];
		struct function_key k = {f->name, f->system_name, f->filename, f->start_line};
		uint64_t id = f->id;

		if (htab_intern(z->functions, &k, sizeof(k), &id) < 0)
			return -ENOMEM;
		z->fns[z->n_fn++] = m->function[i];
		if (f->id >= z->next_fn_id)
			z->next_fn_id = f->id + 1;
	}
	if (z->next_fn_id == 0)
		z->next_fn_id = 1;
	return 0;
}

/* A copy of location l with lines for frames f[0..n), innermost first, in
 * the arena; *gain says what its mapping gains. NULL on out-of-memory. */
static pprof_location_msg *sym_location(struct symbolized *z, const pprof_location_msg *l,
					const struct pprof_frame_desc *f, size_t n, unsigned *gain)
{
	pprof_location_msg *nl = arena_alloc(z->arena, sizeof(*nl));
	Perftools__Profiles__Line *lines = arena_alloc(z->arena, n * sizeof(*lines));
	Perftools__Profiles__Line **ptrs = arena_alloc(z->arena, n * sizeof(*ptrs));

	if (!nl || !lines || !ptrs)
		return NULL;
	*nl = *l;
	*gain = GAIN_FUNCTIONS | (n > 1 ? GAIN_INLINE : 0);
	for (size_t i = 0; i < n; i++) {
		lines[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
		lines[i].function_id = sym_function(z, &f[i]);
		if (!lines[i].function_id)
			return NULL;
		lines[i].line = f[i].line;
		ptrs[i] = &lines[i];
		if (f[i].filename && f[i].filename[0])
			*gain |= GAIN_FILENAMES;
		if (f[i].line > 0)
			*gain |= GAIN_LINES;
	}
	nl->line = ptrs;
	nl->n_line = n;
	return nl;
}

/* A copy of mapping mp with what it gained set; NULL on out-of-memory. */
static pprof_mapping_msg *sym_mapping(struct symbolized *z, const pprof_mapping_msg *mp,
				      unsigned gain)
{
	pprof_mapping_msg *nm = arena_alloc(z->arena, sizeof(*nm));

	if (!nm)
		return NULL;
	*nm = *mp;
	nm->has_functions = nm->has_functions || (gain & GAIN_FUNCTIONS);
	nm->has_filenames = nm->has_filenames || (gain & GAIN_FILENAMES);
	nm->has_line_numbers = nm->has_line_numbers || (gain & GAIN_LINES);
	nm->has_inline_frames = nm->has_inline_frames || (gain & GAIN_INLINE);
	return nm;
}

int pprof_encode_symbolized(const struct pprof_profile *p,
			    const struct pprof_location_frames *frames, bool gzip, struct buf *out,
			    struct kiln_error *err)
{
	const pprof_msg *src = p->msg;
	struct symbolized z = {.src = src};
	pprof_msg m = *src; /* shallow: what does not change is shared */
	pprof_location_msg **locs = NULL;
	pprof_mapping_msg **maps = NULL;
	unsigned *gains = NULL;
	int rc = -ENOMEM;

	z.arena = arena_new(0);
	z.strings = htab_new(src->n_string_table + 64);
	z.functions = htab_new(src->n_function + 64);
	locs = malloc((src->n_location + 1) * sizeof(*locs));
	maps = malloc((src->n_mapping + 1) * sizeof(*maps));
	gains = calloc(src->n_mapping + 1, sizeof(*gains));
	if (!z.arena || !z.strings || !z.functions || !locs || !maps || !gains || sym_seed(&z))
		goto nomem;
	for (size_t i = 0; i < src->n_location; i++) {
		const pprof_location_msg *l = src->location[i];
		const struct pprof_location_frames *lf = frames ? &frames[i] : NULL;
		size_t mpos = pprof_mapping_pos(p, l->mapping_id);
		unsigned gain = 0;

		locs[i] = src->location[i];
		if (!lf || lf->n == 0 || l->n_line > 0)
			continue;
		locs[i] = sym_location(&z, l, lf->frames, lf->n, &gain);
		if (!locs[i])
			goto nomem;
		if (mpos != SIZE_MAX)
			gains[mpos] |= gain;
	}
	for (size_t i = 0; i < src->n_mapping; i++) {
		maps[i] = src->mapping[i];
		if (gains[i] && !(maps[i] = sym_mapping(&z, src->mapping[i], gains[i])))
			goto nomem;
	}
	m.location = locs;
	m.mapping = maps;
	m.string_table = z.strtab;
	m.n_string_table = z.n_str;
	m.function = z.fns;
	m.n_function = z.n_fn;
	/* Valid by construction; checked anyway, as the bytes leave Kiln. */
	rc = pprof_validate(&m, err);
	if (rc)
		goto out;
	rc = pprof_encode(&m, gzip, out);
	if (rc)
		kiln_error_set(err, -rc, "encoding the profile: %s", strerror(-rc));
	goto out;
nomem:
	rc = kiln_error_set(err, ENOMEM, "out of memory naming the profile's locations");
out:
	free(locs);
	free(maps);
	free(gains);
	free(z.strtab);
	free(z.fns);
	htab_free(z.strings);
	htab_free(z.functions);
	arena_free(z.arena);
	return rc;
}
