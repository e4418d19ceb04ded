/*
 * builder.c — building a profile by interning (see pprof.h).
 *
 * Every object kind has a hash table from its canonical key bytes to its
 * index and an array of message structs, index = id - 1. Strings, line and
 * label arrays, sample stacks and values live in the builder's arena, so
 * they never move; the struct arrays are realloc'ed and therefore referred
 * to by index until a message is assembled (build_msg), which either points
 * into the builder (for encoding) or deep-copies into another arena (for
 * pprof_builder_to_profile).
 *
 * A sample's key is its stack plus its labels sorted, so the same label set
 * in another order is the same sample; the labels are stored in the order
 * of first use.
 */
#include "common/grow.h"
#include "pprof/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pprof_builder *pprof_builder_new(void)
{
	return pprof_builder_new_sized(1024);
}

struct pprof_builder *pprof_builder_new_sized(size_t hint)
{
	struct pprof_builder *b = calloc(1, sizeof(*b));
	size_t chunk;

	if (!b)
		return NULL;
	if (hint < 16)
		hint = 16;
	chunk = hint < 1024 ? hint * 256 : 256 * 1024; /* 256 KiB at the default hint */
	if (chunk < 16 * 1024)
		chunk = 16 * 1024;
	b->arena = arena_new(chunk);
	b->string_ix = htab_new(hint);
	b->mapping_ix = htab_new(16);
	b->function_ix = htab_new(hint);
	b->location_ix = htab_new(hint);
	b->sample_ix = htab_new(hint);
	if (!b->arena || !b->string_ix || !b->mapping_ix || !b->function_ix || !b->location_ix ||
	    !b->sample_ix || pprof_builder_string(b, "") != 0) {
		pprof_builder_free(b);
		return NULL;
	}
	return b;
}

void pprof_builder_free(struct pprof_builder *b)
{
	if (!b)
		return;
	arena_free(b->arena);
	htab_free(b->string_ix);
	htab_free(b->mapping_ix);
	htab_free(b->function_ix);
	htab_free(b->location_ix);
	htab_free(b->sample_ix);
	free(b->strings);
	free(b->mappings);
	free(b->functions);
	free(b->locations);
	free(b->samples);
	free(b->types);
	free(b->comments);
	free(b->label_scratch);
	buf_free(&b->key);
	free(b);
}

int pprof_builder_reset(struct pprof_builder *b, size_t hint)
{
	/* Tables grown past twice the hint shrink back: one large profile
	 * must not make every later reset a large memset. */
	size_t keep = (hint < 16 ? 16 : hint) * 2;

	arena_reset(b->arena);
	htab_clear(b->string_ix, keep);
	htab_clear(b->mapping_ix, 16);
	htab_clear(b->function_ix, keep);
	htab_clear(b->location_ix, keep);
	htab_clear(b->sample_ix, keep);
	b->n_strings = b->n_mappings = b->n_functions = b->n_locations = b->n_samples = 0;
	b->n_types = b->n_comments = b->n_merged = 0;
	b->has_period_type = false;
	b->period_type = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	b->period = b->time_nanos = b->duration_nanos = 0;
	b->default_type = b->drop_frames = b->keep_frames = 0;
	buf_reset(&b->key);
	return pprof_builder_string(b, "") == 0 ? 0 : -ENOMEM;
}

int64_t pprof_builder_string_n(struct pprof_builder *b, const char *s, size_t len)
{
	uint64_t hash = htab_hash(s, len), *idx;
	char *copy;

	/* Look up before inserting so that a failed copy leaves no entry behind. */
	idx = htab_lookup_hashed(b->string_ix, hash, s, len);
	if (idx)
		return (int64_t)*idx;
	if (GROW_ARRAY(b->strings, b->cap_strings, b->n_strings + 1, 64))
		return -1;
	copy = arena_strndup(b->arena, s, len);
	if (!copy || !htab_insert_hashed(b->string_ix, hash, s, len, b->n_strings))
		return -1;
	b->strings[b->n_strings] = copy;
	return (int64_t)b->n_strings++;
}

int64_t pprof_builder_string(struct pprof_builder *b, const char *s)
{
	if (!s)
		s = "";
	return pprof_builder_string_n(b, s, strlen(s));
}

const char *pprof_builder_string_at(const struct pprof_builder *b, int64_t idx)
{
	return idx >= 0 && (uint64_t)idx < b->n_strings ? b->strings[idx] : "";
}

int pprof_builder_add_sample_type(struct pprof_builder *b, const char *type, const char *unit)
{
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;

	if (b->n_samples)
		return -EINVAL; /* existing samples would lack the value */
	vt.type = pprof_builder_string(b, type);
	vt.unit = pprof_builder_string(b, unit);
	if (vt.type < 0 || vt.unit < 0 || GROW_ARRAY(b->types, b->cap_types, b->n_types + 1, 64))
		return -ENOMEM;
	b->types[b->n_types++] = vt;
	return 0;
}

int pprof_builder_set_period(struct pprof_builder *b, const char *type, const char *unit,
			     int64_t period)
{
	int64_t t = pprof_builder_string(b, type), u = pprof_builder_string(b, unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	b->period_type = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	b->period_type.type = t;
	b->period_type.unit = u;
	b->has_period_type = true;
	b->period = period;
	return 0;
}

void pprof_builder_set_time(struct pprof_builder *b, int64_t time_nanos, int64_t duration_nanos)
{
	b->time_nanos = time_nanos;
	b->duration_nanos = duration_nanos;
}

int pprof_builder_set_default_sample_type(struct pprof_builder *b, const char *type)
{
	int64_t t = pprof_builder_string(b, type);

	if (t < 0)
		return -ENOMEM;
	b->default_type = t;
	return 0;
}

int pprof_builder_add_comment_idx(struct pprof_builder *b, int64_t idx)
{
	for (size_t i = 0; i < b->n_comments; i++)
		if (b->comments[i] == idx)
			return 0;
	if (GROW_ARRAY(b->comments, b->cap_comments, b->n_comments + 1, 64))
		return -ENOMEM;
	b->comments[b->n_comments++] = idx;
	return 0;
}

int pprof_builder_add_comment(struct pprof_builder *b, const char *comment)
{
	int64_t c = pprof_builder_string(b, comment);

	if (c < 0)
		return -ENOMEM;
	/* Comments are a list: the same text twice is kept twice. */
	if (GROW_ARRAY(b->comments, b->cap_comments, b->n_comments + 1, 64))
		return -ENOMEM;
	b->comments[b->n_comments++] = c;
	return 0;
}

uint64_t pprof_builder_mapping_idx(struct pprof_builder *b, const pprof_mapping_msg *in)
{
	pprof_mapping_msg m = PERFTOOLS__PROFILES__MAPPING__INIT;
	uint64_t key[6], idx = b->n_mappings;
	int rc;

	key[0] = in->memory_start;
	key[1] = in->memory_limit;
	key[2] = in->file_offset;
	key[3] = (uint64_t)in->filename;
	key[4] = (uint64_t)in->build_id;
	key[5] = (uint64_t)((in->has_functions ? 1 : 0) | (in->has_filenames ? 2 : 0) |
			    (in->has_line_numbers ? 4 : 0) | (in->has_inline_frames ? 8 : 0));
	if (GROW_ARRAY(b->mappings, b->cap_mappings, b->n_mappings + 1, 64))
		return 0;
	rc = htab_intern(b->mapping_ix, key, sizeof(key), &idx);
	if (rc < 0)
		return 0;
	if (rc == 1)
		return idx + 1;
	m.id = idx + 1;
	m.memory_start = in->memory_start;
	m.memory_limit = in->memory_limit;
	m.file_offset = in->file_offset;
	m.filename = in->filename;
	m.build_id = in->build_id;
	m.has_functions = !!in->has_functions;
	m.has_filenames = !!in->has_filenames;
	m.has_line_numbers = !!in->has_line_numbers;
	m.has_inline_frames = !!in->has_inline_frames;
	b->mappings[b->n_mappings++] = m;
	return m.id;
}

uint64_t pprof_builder_mapping(struct pprof_builder *b, const struct pprof_mapping_desc *d)
{
	pprof_mapping_msg m = PERFTOOLS__PROFILES__MAPPING__INIT;

	m.memory_start = d->memory_start;
	m.memory_limit = d->memory_limit;
	m.file_offset = d->file_offset;
	m.filename = pprof_builder_string(b, d->filename);
	m.build_id = pprof_builder_string(b, d->build_id);
	m.has_functions = d->has_functions;
	m.has_filenames = d->has_filenames;
	m.has_line_numbers = d->has_line_numbers;
	m.has_inline_frames = d->has_inline_frames;
	if (m.filename < 0 || m.build_id < 0)
		return 0;
	return pprof_builder_mapping_idx(b, &m);
}

uint64_t pprof_builder_function_idx(struct pprof_builder *b, int64_t name, int64_t system_name,
				    int64_t filename, int64_t start_line)
{
	pprof_function_msg f = PERFTOOLS__PROFILES__FUNCTION__INIT;
	int64_t key[4] = {name, system_name, filename, start_line};
	uint64_t idx = b->n_functions;
	int rc;

	if (GROW_ARRAY(b->functions, b->cap_functions, b->n_functions + 1, 64))
		return 0;
	rc = htab_intern(b->function_ix, key, sizeof(key), &idx);
	if (rc < 0)
		return 0;
	if (rc == 1)
		return idx + 1;
	f.id = idx + 1;
	f.name = name;
	f.system_name = system_name;
	f.filename = filename;
	f.start_line = start_line;
	b->functions[b->n_functions++] = f;
	return f.id;
}

uint64_t pprof_builder_function(struct pprof_builder *b, const char *name, const char *system_name,
				const char *filename, int64_t start_line)
{
	int64_t n = pprof_builder_string(b, name), s = pprof_builder_string(b, system_name);
	int64_t f = pprof_builder_string(b, filename);

	if (n < 0 || s < 0 || f < 0)
		return 0;
	return pprof_builder_function_idx(b, n, s, f, start_line);
}

uint64_t pprof_builder_location(struct pprof_builder *b, uint64_t mapping_id, uint64_t address,
				const struct pprof_line_desc *lines, size_t n_lines)
{
	pprof_location_msg l = PERFTOOLS__PROFILES__LOCATION__INIT;
	uint64_t hash, *idx;
	size_t i;

	if (mapping_id > b->n_mappings)
		return 0;
	buf_reset(&b->key);
	if (buf_append(&b->key, &mapping_id, 8) || buf_append(&b->key, &address, 8))
		return 0;
	for (i = 0; i < n_lines; i++) {
		if (lines[i].function_id == 0 || lines[i].function_id > b->n_functions)
			return 0;
		if (buf_append(&b->key, &lines[i].function_id, 8) ||
		    buf_append(&b->key, &lines[i].line, 8) ||
		    buf_append(&b->key, &lines[i].column, 8))
			return 0;
	}
	hash = htab_hash(b->key.data, b->key.len);
	idx = htab_lookup_hashed(b->location_ix, hash, b->key.data, b->key.len);
	if (idx)
		return *idx + 1;
	if (GROW_ARRAY(b->locations, b->cap_locations, b->n_locations + 1, 64))
		return 0;
	l.id = b->n_locations + 1;
	l.mapping_id = mapping_id;
	l.address = address;
	if (n_lines) {
		Perftools__Profiles__Line *ls = arena_alloc(b->arena, n_lines * sizeof(*ls));

		l.line = arena_alloc(b->arena, n_lines * sizeof(*l.line));
		if (!ls || !l.line)
			return 0;
		for (i = 0; i < n_lines; i++) {
			ls[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
			ls[i].function_id = lines[i].function_id;
			ls[i].line = lines[i].line;
			ls[i].column = lines[i].column;
			l.line[i] = &ls[i];
		}
		l.n_line = n_lines;
	}
	if (!htab_insert_hashed(b->location_ix, hash, b->key.data, b->key.len, b->n_locations))
		return 0;
	b->locations[b->n_locations++] = l;
	return l.id;
}

static int label_cmp(const Perftools__Profiles__Label *a, const Perftools__Profiles__Label *b)
{
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->str != b->str)
		return a->str < b->str ? -1 : 1;
	if (a->num != b->num)
		return a->num < b->num ? -1 : 1;
	if (a->num_unit != b->num_unit)
		return a->num_unit < b->num_unit ? -1 : 1;
	return 0;
}

/* The sample key: stack length, stack, then the labels in sorted order. */
static int sample_key(struct pprof_builder *b, const uint64_t *locs, size_t n_locs,
		      const Perftools__Profiles__Label *labels, size_t n_labels)
{
	uint64_t n = n_locs;
	size_t i, j;

	buf_reset(&b->key);
	if (buf_reserve(&b->key, 8 + 8 * n_locs + 32 * n_labels))
		return -ENOMEM;
	buf_append(&b->key, &n, 8);
	buf_append(&b->key, locs, 8 * n_locs);
	if (n_labels == 0)
		return 0;
	if (n_labels > b->cap_label_scratch) {
		void *p = realloc(b->label_scratch, n_labels * sizeof(*labels));

		if (!p)
			return -ENOMEM;
		b->label_scratch = p;
		b->cap_label_scratch = n_labels;
	}
	/* Insertion sort: label sets are small. */
	for (i = 0; i < n_labels; i++) {
		Perftools__Profiles__Label l = labels[i];

		for (j = i; j > 0 && label_cmp(&b->label_scratch[j - 1], &l) > 0; j--)
			b->label_scratch[j] = b->label_scratch[j - 1];
		b->label_scratch[j] = l;
	}
	for (i = 0; i < n_labels; i++) {
		const Perftools__Profiles__Label *l = &b->label_scratch[i];
		int64_t t[4] = {l->key, l->str, l->num, l->num_unit};

		buf_append(&b->key, t, sizeof(t));
	}
	return 0;
}

int pprof_builder_add_sample_ids(struct pprof_builder *b, const uint64_t *locs, size_t n_locs,
				 const int64_t *values, const Perftools__Profiles__Label *labels,
				 size_t n_labels)
{
	pprof_sample_msg s = PERFTOOLS__PROFILES__SAMPLE__INIT;
	const unsigned char *stored;
	uint64_t *slot, hash;
	size_t i;

	for (i = 0; i < n_locs; i++)
		if (locs[i] == 0 || locs[i] > b->n_locations)
			return -EINVAL;
	if (sample_key(b, locs, n_locs, labels, n_labels) ||
	    GROW_ARRAY(b->samples, b->cap_samples, b->n_samples + 1, 64))
		return -ENOMEM;
	hash = htab_hash(b->key.data, b->key.len);
	slot = htab_lookup_hashed(b->sample_ix, hash, b->key.data, b->key.len);
	if (slot) {
		int64_t *v = b->samples[*slot].value;

		for (i = 0; i < b->n_types; i++)
			v[i] = pprof_add(v[i], values[i]);
		return 0;
	}
	s.n_value = b->n_types;
	s.value = arena_alloc(b->arena, (b->n_types ? b->n_types : 1) * sizeof(int64_t));
	if (!s.value)
		goto oom;
	memcpy(s.value, values, b->n_types * sizeof(int64_t));
	if (n_labels) {
		Perftools__Profiles__Label *ls = arena_alloc(b->arena, n_labels * sizeof(*ls));

		s.label = arena_alloc(b->arena, n_labels * sizeof(*s.label));
		if (!ls || !s.label)
			goto oom;
		for (i = 0; i < n_labels; i++) {
			ls[i] = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
			ls[i].key = labels[i].key;
			ls[i].str = labels[i].str;
			ls[i].num = labels[i].num;
			ls[i].num_unit = labels[i].num_unit;
			s.label[i] = &ls[i];
		}
		s.n_label = n_labels;
	}
	/* The key starts with the stack (see sample_key), and the table keeps
	 * its copy until the builder dies: the sample points into it rather than
	 * holding a second copy of every stack. */
	stored = htab_insert_hashed(b->sample_ix, hash, b->key.data, b->key.len, b->n_samples);
	if (!stored)
		goto oom;
	s.n_location_id = n_locs;
	s.location_id = n_locs ? (uint64_t *)(void *)(stored + 8) : NULL;
	b->samples[b->n_samples++] = s;
	return 0;
oom:
	return -ENOMEM;
}

int pprof_builder_reserve_samples(struct pprof_builder *b, size_t n)
{
	size_t want = b->n_samples + n;

	if (want > b->cap_samples) {
		/* Doubling, so that many small reservations stay amortized O(1). */
		size_t cap = want > b->cap_samples * 2 ? want : b->cap_samples * 2;
		void *p = realloc(b->samples, cap * sizeof(*b->samples));

		if (!p)
			return -ENOMEM;
		b->samples = p;
		b->cap_samples = cap;
	}
	return htab_reserve(b->sample_ix, n);
}

int pprof_builder_add_sample(struct pprof_builder *b, const uint64_t *location_ids,
			     size_t n_locations, const int64_t *values,
			     const struct pprof_label_desc *labels, size_t n_labels)
{
	Perftools__Profiles__Label small[16], *ls = small;
	size_t i;
	int rc = 0;

	if (n_labels > 16) {
		ls = malloc(n_labels * sizeof(*ls));
		if (!ls)
			return -ENOMEM;
	}
	for (i = 0; i < n_labels; i++) {
		ls[i] = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
		ls[i].key = pprof_builder_string(b, labels[i].key);
		if (labels[i].str) {
			ls[i].str = pprof_builder_string(b, labels[i].str);
		} else {
			ls[i].num = labels[i].num;
			ls[i].num_unit = pprof_builder_string(b, labels[i].num_unit);
		}
		if (ls[i].key < 0 || ls[i].str < 0 || ls[i].num_unit < 0) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = pprof_builder_add_sample_ids(b, location_ids, n_locations, values, ls, n_labels);
out:
	if (ls != small)
		free(ls);
	return rc;
}

size_t pprof_builder_sample_count(const struct pprof_builder *b)
{
	return b->n_samples;
}
