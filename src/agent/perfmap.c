/*
 * perfmap.c — the perf-map parser and the table of one file's names.
 *
 * The table is an array sorted by start address, deduplicated by start
 * (the later entry wins), with the running maximum of the entries' ends
 * beside it. A lookup binary-searches the last entry starting at or below
 * the address and walks down while an earlier entry could still reach it
 * (the running maximum says when none can), keeping the latest (highest
 * line number) that covers it. JIT entries rarely overlap, so the walk is
 * one or two steps; a file crafted to make it long is bounded by
 * LOOKUP_STEPS, and only its own process's names suffer.
 *
 * New lines are parsed into the tail of the array, which is then sorted
 * and merged with the sorted part: each read of an appended part costs
 * O(n) on top of sorting what it added.
 */
#include "agent/perfmap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far a lookup walks down through overlapping entries. */
#define LOOKUP_STEPS 64
/* Longest name kept (a line is bounded anyway; this bounds a symbol). */
#define NAME_MAX_BYTES 2048

struct perfmap_entry {
	uint64_t start, end; /* [start, end) */
	uint32_t name_off;   /* into names, NUL-terminated */
	uint32_t seq;	     /* line number: later wins */
};

/* What one entry costs: the entry, its running maximum, its name. */
#define ENTRY_BYTES (sizeof(struct perfmap_entry) + sizeof(uint64_t))

struct perfmap {
	struct perfmap_budget *budget; /* shared, may be NULL */
	struct perfmap_entry *v;       /* [0, sorted) sorted; [sorted, n) new */
	uint64_t *max_end;	       /* max_end[i] = max(v[0..i].end) */
	size_t n, sorted, cap;
	char *names;
	size_t names_len, names_cap;
	size_t charged; /* bytes counted against the caps */
	uint32_t lines;
	bool skipping; /* inside an over-long line: drop up to its newline */
	char first_error[96];
};

static bool hex_digit(char c, unsigned *d)
{
	if (c >= '0' && c <= '9')
		*d = (unsigned)(c - '0');
	else if (c >= 'a' && c <= 'f')
		*d = (unsigned)(c - 'a' + 10);
	else if (c >= 'A' && c <= 'F')
		*d = (unsigned)(c - 'A' + 10);
	else
		return false;
	return true;
}

/* A hex number at *p (an optional 0x, at most 16 digits), advancing it. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned d, n = 0;

	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end && hex_digit(*s, &d); s++, n++) {
		if (n == 16)
			return false;
		v = v << 4 | d;
	}
	if (n == 0)
		return false;
	*p = s;
	*out = v;
	return true;
}

/* Whether s[0..len) is UTF-8 without control characters (the name goes
 * into a protobuf string and onto people's screens). */
static bool name_ok(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = s[i], need;
		uint32_t cp;

		if (c < 0x80) {
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return false;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, cp = c & 0x07;
		else
			return false;
		if (len - i <= need)
			return false;
		for (unsigned k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and values past U+10FFFF. */
		if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

bool perfmap_parse_line(const char *line, size_t len, struct perfmap_line *out, const char **why)
{
	const char *p = line, *end = line + len;

	if (len && end[-1] == '\r')
		end--;
	if (!parse_hex(&p, end, &out->start)) {
		*why = "start is not a hex number";
		return false;
	}
	if (p == end || (*p != ' ' && *p != '\t')) {
		*why = "no blank after start";
		return false;
	}
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (!parse_hex(&p, end, &out->size)) {
		*why = "size is not a hex number";
		return false;
	}
	if (p == end || (*p != ' ' && *p != '\t')) {
		*why = "no blank after size";
		return false;
	}
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (out->size == 0) {
		*why = "size is zero";
		return false;
	}
	if (out->start + out->size < out->start) {
		*why = "start + size wraps around";
		return false;
	}
	if (p == end) {
		*why = "no name";
		return false;
	}
	if ((size_t)(end - p) > NAME_MAX_BYTES) {
		*why = "name too long";
		return false;
	}
	if (!name_ok((const unsigned char *)p, (size_t)(end - p))) {
		*why = "name is not printable UTF-8";
		return false;
	}
	out->name = p;
	out->name_len = (size_t)(end - p);
	return true;
}

struct perfmap *perfmap_new(struct perfmap_budget *budget)
{
	struct perfmap *pm = calloc(1, sizeof(*pm));

	if (pm)
		pm->budget = budget;
	return pm;
}

static void uncharge(struct perfmap *pm)
{
	if (pm->budget)
		pm->budget->used -= pm->charged;
	pm->charged = 0;
}

void perfmap_clear(struct perfmap *pm)
{
	uncharge(pm);
	free(pm->v);
	free(pm->max_end);
	free(pm->names);
	pm->v = NULL;
	pm->max_end = NULL;
	pm->names = NULL;
	pm->n = pm->sorted = pm->cap = pm->names_len = pm->names_cap = 0;
	pm->lines = 0;
	pm->skipping = false;
	pm->first_error[0] = '\0';
}

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	perfmap_clear(pm);
	free(pm);
}

/* Reserves cost bytes against both caps; false if either would overflow. */
static bool charge(struct perfmap *pm, size_t cost)
{
	if (pm->charged + cost > PERFMAP_PROC_MAX_BYTES)
		return false;
	if (pm->budget && pm->budget->used + cost > pm->budget->limit)
		return false;
	pm->charged += cost;
	if (pm->budget)
		pm->budget->used += cost;
	return true;
}

static int grow_entries(struct perfmap *pm)
{
	size_t cap = pm->cap ? pm->cap * 2 : 64;
	struct perfmap_entry *nv;
	uint64_t *nm;

	nv = realloc(pm->v, cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	pm->v = nv;
	nm = realloc(pm->max_end, cap * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	pm->max_end = nm;
	pm->cap = cap;
	return 0;
}

static int add_name(struct perfmap *pm, const char *name, size_t len, uint32_t *off)
{
	if (pm->names_len + len + 1 > pm->names_cap) {
		size_t cap = pm->names_cap ? pm->names_cap * 2 : 4096;
		char *nv;

		while (cap < pm->names_len + len + 1)
			cap *= 2;
		nv = realloc(pm->names, cap);
		if (!nv)
			return -ENOMEM;
		pm->names = nv;
		pm->names_cap = cap;
	}
	memcpy(pm->names + pm->names_len, name, len);
	pm->names[pm->names_len + len] = '\0';
	*off = (uint32_t)pm->names_len;
	pm->names_len += len + 1;
	return 0;
}

/* One complete line (without its newline) into the unsorted tail. */
static void add_line(struct perfmap *pm, const char *line, size_t len,
		     struct perfmap_feed_stats *st)
{
	struct perfmap_line l;
	const char *why;
	uint32_t off;

	pm->lines++;
	if (len == 0 || (len == 1 && line[0] == '\r'))
		return; /* blank lines are harmless */
	if (!perfmap_parse_line(line, len, &l, &why)) {
		st->lines_rejected++;
		if (!pm->first_error[0])
			snprintf(pm->first_error, sizeof(pm->first_error), "line %u: %s", pm->lines,
				 why);
		return;
	}
	if (!charge(pm, ENTRY_BYTES + l.name_len + 1)) {
		st->symbols_dropped++;
		return;
	}
	if ((pm->n == pm->cap && grow_entries(pm) != 0) ||
	    add_name(pm, l.name, l.name_len, &off) != 0) {
		st->symbols_dropped++;
		return;
	}
	pm->v[pm->n++] = (struct perfmap_entry){
	    .start = l.start, .end = l.start + l.size, .name_off = off, .seq = pm->lines};
	st->symbols_added++;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct perfmap_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts the new tail into the table, keeping the latest entry of each
 * start, and recomputes the running maximum of the ends. */
static int merge_new(struct perfmap *pm)
{
	size_t nold = pm->sorted, nnew = pm->n - pm->sorted, i = 0, j = 0, k = 0, replaced;
	struct perfmap_entry *out;

	if (nnew == 0)
		return 0;
	qsort(pm->v + nold, nnew, sizeof(*pm->v), entry_cmp);
	out = malloc(pm->n * sizeof(*out));
	if (!out)
		return -ENOMEM;
	while (i < nold || j < nnew) {
		const struct perfmap_entry *e;

		if (j == nnew || (i < nold && entry_cmp(&pm->v[i], &pm->v[nold + j]) < 0))
			e = &pm->v[i++];
		else
			e = &pm->v[nold + j++];
		/* Equal starts arrive in line order: the later replaces. */
		if (k > 0 && out[k - 1].start == e->start)
			out[k - 1] = *e;
		else
			out[k++] = *e;
	}
	memcpy(pm->v, out, k * sizeof(*out));
	free(out);
	/* Replaced entries give their slot back (their names stay in the
	 * arena, still charged: the arena only grows). */
	replaced = pm->n - k;
	pm->charged -= replaced * ENTRY_BYTES;
	if (pm->budget)
		pm->budget->used -= replaced * ENTRY_BYTES;
	pm->n = pm->sorted = k;
	for (size_t e = 0; e < k; e++)
		pm->max_end[e] =
		    e && pm->max_end[e - 1] > pm->v[e].end ? pm->max_end[e - 1] : pm->v[e].end;
	return 0;
}

size_t perfmap_feed(struct perfmap *pm, const char *data, size_t len, struct perfmap_feed_stats *st)
{
	const char *p = data, *end = data + len;

	if (pm->skipping) {
		const char *nl = memchr(p, '\n', len);

		if (!nl)
			return len;
		pm->skipping = false;
		p = nl + 1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl) {
			if ((size_t)(end - p) < PERFMAP_LINE_MAX)
				break; /* the writer is still writing it */
			pm->lines++;
			st->lines_rejected++;
			if (!pm->first_error[0])
				snprintf(pm->first_error, sizeof(pm->first_error),
					 "line %u: longer than %d bytes", pm->lines,
					 PERFMAP_LINE_MAX);
			pm->skipping = true;
			p = end;
			break;
		}
		if ((size_t)(nl - p) >= PERFMAP_LINE_MAX) {
			pm->lines++;
			st->lines_rejected++;
			if (!pm->first_error[0])
				snprintf(pm->first_error, sizeof(pm->first_error),
					 "line %u: longer than %d bytes", pm->lines,
					 PERFMAP_LINE_MAX);
		} else {
			add_line(pm, p, (size_t)(nl - p), st);
		}
		p = nl + 1;
	}
	if (merge_new(pm) != 0) {
		/* Out of memory sorting: the new entries are lost, the table
		 * stays as it was (their names stay charged in the arena). */
		size_t lost = pm->n - pm->sorted;

		st->symbols_dropped += lost;
		st->symbols_added -= lost;
		pm->charged -= lost * ENTRY_BYTES;
		if (pm->budget)
			pm->budget->used -= lost * ENTRY_BYTES;
		pm->n = pm->sorted;
	}
	return (size_t)(p - data);
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->sorted;
	const struct perfmap_entry *best = NULL;

	/* lo = the number of entries starting at or below addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, steps = 0; i > 0 && steps < LOOKUP_STEPS; i--, steps++) {
		const struct perfmap_entry *e = &pm->v[i - 1];

		if (pm->max_end[i - 1] <= addr)
			break;
		if (e->end > addr && (!best || e->seq > best->seq))
			best = e;
	}
	return best ? pm->names + best->name_off : NULL;
}

size_t perfmap_count(const struct perfmap *pm)
{
	return pm->sorted;
}

size_t perfmap_bytes(const struct perfmap *pm)
{
	return pm->charged;
}

const char *perfmap_first_error(const struct perfmap *pm)
{
	return pm->first_error;
}
