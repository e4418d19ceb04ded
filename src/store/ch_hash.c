/*
 * ch_hash.c — the content hashes that key the ClickHouse tables, and the
 * per-server memo of them.
 *
 * A hash depends only on an object's content (strings by their bytes, an
 * object by the hashes of what it refers to), never on local ids, so two
 * servers that intern the same stack in different orders still name it the
 * same: that is what lets them write without coordination. 64 bits: with
 * 10^8 distinct stacks the chance of any collision is about 3 * 10^-4;
 * ClickHouse 18.16 has no UInt128 key type (a FixedString(16) key would
 * double the samples table's stack column).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "store/ch.h"

static uint64_t nonzero(uint64_t h)
{
	return h ? h : 1; /* 0 means "not computed" and CH_TOTAL_ROW */
}

static uint64_t str_hash(const char *s)
{
	return XXH3_64bits(s, strlen(s));
}

static int memo_grow(struct ch_memo *m, size_t id)
{
	if (id < m->cap)
		return 0;
	size_t cap = m->cap ? m->cap : 1024;
	while (cap <= id)
		cap *= 2;
	uint64_t *h = realloc(m->hash, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	m->hash = h;
	uint8_t *st = realloc(m->stored, cap);
	if (!st)
		return -ENOMEM;
	m->stored = st;
	memset(m->hash + m->cap, 0, (cap - m->cap) * sizeof(*h));
	memset(m->stored + m->cap, 0, cap - m->cap);
	m->cap = cap;
	return 0;
}

int ch_memo_set(struct ch_store *ch, enum ch_kind k, uint32_t id, uint64_t h, bool stored)
{
	struct ch_memo *m = &ch->memo[k];

	if (!m->by_hash && !(m->by_hash = htab_new(1024)))
		return -ENOMEM;
	if (memo_grow(m, id) || htab_put(m->by_hash, &h, sizeof(h), id))
		return -ENOMEM;
	m->hash[id] = h;
	m->stored[id] |= stored;
	return 0;
}

bool ch_memo_find(struct ch_store *ch, enum ch_kind k, uint64_t h, uint32_t *id)
{
	uint64_t v;

	if (!ch->memo[k].by_hash || !htab_get(ch->memo[k].by_hash, &h, sizeof(h), &v))
		return false;
	*id = (uint32_t)v;
	return true;
}

void ch_memo_mark_stored(struct ch_store *ch, enum ch_kind k, uint32_t id)
{
	if (id < ch->memo[k].cap)
		ch->memo[k].stored[id] = 1;
}

bool ch_memo_is_stored(const struct ch_store *ch, enum ch_kind k, uint32_t id)
{
	return id < ch->memo[k].cap && ch->memo[k].stored[id];
}

void ch_memo_free(struct ch_memo *m)
{
	free(m->hash);
	free(m->stored);
	htab_free(m->by_hash);
	memset(m, 0, sizeof(*m));
}

/* The memoized hash of (k, id), or 0 (then *cached is false). */
static uint64_t memo_get(struct ch_store *ch, enum ch_kind k, uint32_t id)
{
	return id < ch->memo[k].cap ? ch->memo[k].hash[id] : 0;
}

static uint64_t remember(struct ch_store *ch, enum ch_kind k, uint32_t id, uint64_t h)
{
	/* Out of memory only costs recomputing it next time. */
	(void)ch_memo_set(ch, k, id, h, false);
	return h;
}

uint64_t ch_hash_type(const char *profile_type)
{
	uint64_t h = str_hash(profile_type);

	return h > CH_TOTALS_TYPE ? h : h + 2; /* 0: markers, 1: totals */
}

uint64_t ch_hash_series(struct store *s, uint32_t id)
{
	uint64_t h = memo_get(s->ch, CH_SERIES, id);

	if (h)
		return h;
	const struct series *se = series_at(&s->sx, id);
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, se->type, strlen(se->type) + 1);
	for (size_t i = 0; i < se->n_labels; i++) {
		XXH3_64bits_update(&st, se->labels[i].name, strlen(se->labels[i].name) + 1);
		XXH3_64bits_update(&st, se->labels[i].value, strlen(se->labels[i].value) + 1);
	}
	return remember(s->ch, CH_SERIES, id, nonzero(XXH3_64bits_digest(&st)));
}

uint64_t ch_hash_mapping(struct store *s, uint32_t id)
{
	uint64_t h = id ? memo_get(s->ch, CH_MAPPING, id) : 0;

	if (h || !id)
		return h;
	const struct meta_mapping *mp = chunked_at(&s->meta.mappings, id);
	struct {
		uint64_t start, limit, offset, filename, build_id;
		uint64_t flags, elf_type, load_offset, load_vaddr;
	} k = {mp->start,
	       mp->limit,
	       mp->offset,
	       str_hash(meta_str(&s->meta, mp->filename)),
	       str_hash(meta_str(&s->meta, mp->build_id)),
	       mp->flags,
	       mp->elf_type,
	       mp->load_offset,
	       mp->load_vaddr};
	return remember(s->ch, CH_MAPPING, id, nonzero(XXH3_64bits(&k, sizeof(k))));
}

uint64_t ch_hash_function(struct store *s, uint32_t id)
{
	uint64_t h = id ? memo_get(s->ch, CH_FUNCTION, id) : 0;

	if (h || !id)
		return h;
	const struct meta_function *f = chunked_at(&s->meta.functions, id);
	struct {
		uint64_t name, system_name, filename;
		int64_t start_line;
	} k = {str_hash(meta_str(&s->meta, f->name)), str_hash(meta_str(&s->meta, f->system_name)),
	       str_hash(meta_str(&s->meta, f->filename)), f->start_line};
	return remember(s->ch, CH_FUNCTION, id, nonzero(XXH3_64bits(&k, sizeof(k))));
}

uint64_t ch_hash_location(struct store *s, uint32_t id)
{
	uint64_t h = memo_get(s->ch, CH_LOCATION, id);

	if (h)
		return h;
	const struct meta_location *l = chunked_at(&s->meta.locations, id);
	const struct meta_lines *ls = atomic_load(&((struct meta_location *)l)->lines);
	uint32_t n = atomic_load(&((struct meta_location *)l)->sym) == SYM_NONE ? ls->n : 0;
	uint64_t head[2] = {ch_hash_mapping(s, l->mapping), l->address};
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, head, sizeof(head));
	for (uint32_t i = 0; i < n; i++) {
		uint64_t line[2] = {ch_hash_function(s, ls->l[i].function),
				    (uint64_t)ls->l[i].line};

		XXH3_64bits_update(&st, line, sizeof(line));
	}
	return remember(s->ch, CH_LOCATION, id, nonzero(XXH3_64bits_digest(&st)));
}

uint64_t ch_hash_stack(struct store *s, uint32_t id)
{
	uint64_t h = memo_get(s->ch, CH_STACK, id);

	if (h)
		return h;
	const struct meta_stack *sk = chunked_at(&s->meta.stacks, id);
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	for (uint32_t i = 0; i < sk->n; i++) {
		uint64_t lh = ch_hash_location(s, sk->locs[i]);

		XXH3_64bits_update(&st, &lh, sizeof(lh));
	}
	return remember(s->ch, CH_STACK, id, nonzero(XXH3_64bits_digest(&st)));
}
