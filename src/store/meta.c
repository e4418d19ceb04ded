/*
 * meta.c — the metastore: every string, mapping, function, location and
 * stack is stored once and named by a dense 32-bit id; sample rows refer to
 * a stack id only (this is what makes a sample row a few bytes).
 *
 * Interning happens under meta.mu and appends a record for each new object
 * to meta.pending; the WAL commit writes pending records to the metastore
 * log (DIR/meta.log) and fsyncs it before the WAL segment, so a durable WAL
 * record never refers to an id that is not durable. Replay rebuilds the same
 * tables from the log: ids are implicit (the next free id of the kind) and
 * stated in each record, which replay checks.
 *
 * Stacks are keyed by the 128-bit XXH3 hash of their location ids: the
 * chance of two distinct stacks colliding is about n^2 / 2^129, far below
 * that of a disk error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/grow.h"
#include "store/internal.h"

static const struct meta_stack empty_stack = {0, NULL};

int meta_init(struct meta *m)
{
	uint64_t v;

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
	m->arena = arena_new(1 << 20);
	m->string_ix = htab_new(64);
	m->mapping_ix = htab_new(64);
	m->function_ix = htab_new(64);
	m->location_ix = htab_new(64);
	m->stack_ix = htab_new(64);
	if (!m->arena || !m->string_ix || !m->mapping_ix || !m->function_ix || !m->location_ix ||
	    !m->stack_ix)
		return -ENOMEM;
	if (chunked_init(&m->strings, sizeof(const char *)) ||
	    chunked_init(&m->mappings, sizeof(struct meta_mapping)) ||
	    chunked_init(&m->functions, sizeof(struct meta_function)) ||
	    chunked_init(&m->locations, sizeof(struct meta_location)) ||
	    chunked_init(&m->stacks, sizeof(struct meta_stack)))
		return -ENOMEM;
	/* The dummy entries 0. */
	const char **sp = chunked_slot(&m->strings);
	if (!sp || !chunked_slot(&m->mappings) || !chunked_slot(&m->functions) ||
	    !chunked_slot(&m->locations))
		return -ENOMEM;
	*sp = "";
	chunked_publish(&m->strings);
	chunked_publish(&m->mappings);
	chunked_publish(&m->functions);
	chunked_publish(&m->locations);
	struct meta_stack *st = chunked_slot(&m->stacks);
	if (!st)
		return -ENOMEM;
	*st = empty_stack;
	chunked_publish(&m->stacks);
	v = 0;
	if (htab_intern(m->string_ix, "", 0, &v) < 0)
		return -ENOMEM;
	XXH128_hash_t h = XXH3_128bits(NULL, 0);
	v = 0;
	if (htab_intern(m->stack_ix, &h, sizeof(h), &v) < 0)
		return -ENOMEM;
	return 0;
}

void meta_destroy(struct meta *m)
{
	chunked_free(&m->strings);
	chunked_free(&m->mappings);
	chunked_free(&m->functions);
	chunked_free(&m->locations);
	chunked_free(&m->stacks);
	htab_free(m->string_ix);
	htab_free(m->mapping_ix);
	htab_free(m->function_ix);
	htab_free(m->location_ix);
	htab_free(m->stack_ix);
	fp_tab_free(&m->fp_ix);
	arena_free(m->arena);
	buf_free(&m->pending);
	buf_free(&m->key);
	free(m->sym_queue);
	pthread_mutex_destroy(&m->mu);
}

/* Appends the record being built in rec (type byte first) to pending. */
static int log_record(struct meta *m, struct buf *rec)
{
	return record_append(&m->pending, rec->data, rec->len);
}

/* ---- strings ---- */

static int64_t insert_string(struct meta *m, const char *s, size_t len, bool log)
{
	uint64_t id = chunked_count(&m->strings);
	int rc = htab_intern(m->string_ix, s, len, &id);
	struct buf rec = {0};

	if (rc < 0)
		return rc;
	if (rc == 1)
		return (int64_t)id;
	const char **slot = chunked_slot(&m->strings);
	char *copy = arena_strndup(m->arena, s, len);
	if (!slot || !copy)
		return -ENOMEM;
	*slot = copy;
	if (log) {
		if (buf_append(&rec, (uint8_t[]){MREC_STRING}, 1) || put_uvarint(&rec, id) ||
		    put_uvarint(&rec, len) || buf_append(&rec, s, len) || log_record(m, &rec)) {
			buf_free(&rec);
			return -ENOMEM;
		}
		buf_free(&rec);
	}
	chunked_publish(&m->strings);
	return (int64_t)id;
}

int64_t meta_string(struct meta *m, const char *s, size_t len)
{
	return insert_string(m, s, len, true);
}

/* ---- mappings and functions ---- */

/* Interns a fixed-size key (a struct without padding garbage) in ix: a new
 * one is copied into the next slot of arr and, when log, its record (built
 * by encode) goes to pending. The id is the slot's index. */
static int64_t intern_fixed(struct meta *m, struct htab *ix, struct chunked *arr, const void *key,
			    size_t size, bool log,
			    int (*encode)(struct buf *rec, uint64_t id, const void *key))
{
	uint64_t id = chunked_count(arr);
	int rc = htab_intern(ix, key, size, &id);
	void *slot;

	if (rc != 0)
		return rc < 0 ? rc : (int64_t)id;
	if (!(slot = chunked_slot(arr)))
		return -ENOMEM;
	memcpy(slot, key, size);
	if (log) {
		struct buf rec = {0};

		rc = encode(&rec, id, key);
		rc = rc ?: log_record(m, &rec);
		buf_free(&rec);
		if (rc)
			return rc;
	}
	chunked_publish(arr);
	return (int64_t)id;
}

static int encode_mapping(struct buf *rec, uint64_t id, const void *key)
{
	const struct meta_mapping *mp = key;
	int rc = buf_append(rec, (uint8_t[]){MREC_MAPPING}, 1);

	rc = rc ?: put_uvarint(rec, id);
	rc = rc ?: put_uvarint(rec, mp->start);
	rc = rc ?: put_uvarint(rec, mp->limit);
	rc = rc ?: put_uvarint(rec, mp->offset);
	rc = rc ?: put_uvarint(rec, mp->filename);
	rc = rc ?: put_uvarint(rec, mp->build_id);
	rc = rc ?: put_uvarint(rec, mp->flags);
	/* Optional tail (executable_info): records without it, as written
	 * before it existed, replay with elf_type 0. */
	if (mp->elf_type) {
		rc = rc ?: put_uvarint(rec, mp->elf_type);
		rc = rc ?: put_uvarint(rec, mp->load_offset);
		rc = rc ?: put_uvarint(rec, mp->load_vaddr);
	}
	return rc;
}

static int64_t insert_mapping(struct meta *m, const struct meta_mapping *mp, bool log)
{
	return intern_fixed(m, m->mapping_ix, &m->mappings, mp, sizeof(*mp), log, encode_mapping);
}

int64_t meta_mapping(struct meta *m, const struct meta_mapping *mp)
{
	struct meta_mapping k;

	memset(&k, 0, sizeof(k)); /* no padding garbage in the key */
	k = *mp;
	return insert_mapping(m, &k, true);
}

static int encode_function(struct buf *rec, uint64_t id, const void *key)
{
	const struct meta_function *f = key;
	int rc = buf_append(rec, (uint8_t[]){MREC_FUNCTION}, 1);

	rc = rc ?: put_uvarint(rec, id);
	rc = rc ?: put_uvarint(rec, f->name);
	rc = rc ?: put_uvarint(rec, f->system_name);
	rc = rc ?: put_uvarint(rec, f->filename);
	rc = rc ?: put_svarint(rec, f->start_line);
	return rc;
}

static int64_t insert_function(struct meta *m, const struct meta_function *f, bool log)
{
	return intern_fixed(m, m->function_ix, &m->functions, f, sizeof(*f), log, encode_function);
}

int64_t meta_function(struct meta *m, const struct meta_function *f)
{
	struct meta_function k;

	memset(&k, 0, sizeof(k));
	k.name = f->name;
	k.system_name = f->system_name;
	k.filename = f->filename;
	k.start_line = f->start_line;
	return insert_function(m, &k, true);
}

/* ---- locations ---- */

static struct meta_lines *copy_lines(struct meta *m, const struct meta_line *lines, uint32_t n)
{
	struct meta_lines *ls = arena_alloc(m->arena, sizeof(*ls) + n * sizeof(lines[0]));

	if (!ls)
		return NULL;
	ls->n = n;
	if (n)
		memcpy(ls->l, lines, n * sizeof(lines[0]));
	return ls;
}

int meta_sym_enqueue(struct meta *m, uint32_t loc)
{
	if (GROW_ARRAY(m->sym_queue, m->cap_sym_queue, m->n_sym_queue + 1, 256))
		return -ENOMEM;
	m->sym_queue[m->n_sym_queue++] = loc;
	return 0;
}

/* A location can be symbolized later if it has no lines and a mapping that
 * says which file it came from. */
static bool wants_symbols(struct meta *m, uint32_t mapping, uint32_t n_lines)
{
	if (n_lines || !mapping || mapping >= chunked_count(&m->mappings))
		return false;
	const struct meta_mapping *mp = chunked_at(&m->mappings, mapping);
	return mp->build_id != 0 || mp->filename != 0;
}

static int64_t insert_location(struct meta *m, uint32_t mapping, uint64_t address,
			       const struct meta_line *lines, uint32_t n, bool log)
{
	uint64_t id = chunked_count(&m->locations);
	struct buf *k = &m->key;
	int rc;

	buf_reset(k);
	rc = buf_append(k, &mapping, sizeof(mapping));
	rc = rc ?: buf_append(k, &address, sizeof(address));
	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = buf_append(k, &lines[i].function, sizeof(lines[i].function));
		rc = rc ?: buf_append(k, &lines[i].line, sizeof(lines[i].line));
	}
	if (rc)
		return rc;
	rc = htab_intern(m->location_ix, k->data, k->len, &id);
	if (rc != 0)
		return rc < 0 ? rc : (int64_t)id;
	struct meta_location *slot = chunked_slot(&m->locations);
	struct meta_lines *ls = copy_lines(m, lines, n);
	if (!slot || !ls)
		return -ENOMEM;
	slot->address = address;
	slot->mapping = mapping;
	atomic_store(&slot->lines, ls);
	atomic_store(&slot->sym, wants_symbols(m, mapping, n) ? SYM_PENDING : SYM_NONE);
	if (atomic_load(&slot->sym) == SYM_PENDING && meta_sym_enqueue(m, (uint32_t)id))
		return -ENOMEM;
	if (log) {
		struct buf rec = {0};

		rc = buf_append(&rec, (uint8_t[]){MREC_LOCATION}, 1);
		rc = rc ?: put_uvarint(&rec, id);
		rc = rc ?: put_uvarint(&rec, mapping);
		rc = rc ?: put_uvarint(&rec, address);
		rc = rc ?: put_uvarint(&rec, n);
		for (uint32_t i = 0; i < n && !rc; i++) {
			rc = put_uvarint(&rec, lines[i].function);
			rc = rc ?: put_svarint(&rec, lines[i].line);
		}
		rc = rc ?: log_record(m, &rec);
		buf_free(&rec);
		if (rc)
			return rc;
	}
	chunked_publish(&m->locations);
	return (int64_t)id;
}

int64_t meta_location(struct meta *m, uint32_t mapping, uint64_t address,
		      const struct meta_line *lines, uint32_t n_lines)
{
	return insert_location(m, mapping, address, lines, n_lines, true);
}

/* ---- stacks ---- */

static int64_t insert_stack(struct meta *m, const uint32_t *locs, uint32_t n, bool log)
{
	uint64_t id = chunked_count(&m->stacks);
	XXH128_hash_t h = XXH3_128bits(locs, n * sizeof(*locs));
	int rc = htab_intern(m->stack_ix, &h, sizeof(h), &id);

	if (rc != 0)
		return rc < 0 ? rc : (int64_t)id;
	struct meta_stack *slot = chunked_slot(&m->stacks);
	uint32_t *copy = arena_alloc(m->arena, n * sizeof(*locs) + 1);
	if (!slot || !copy)
		return -ENOMEM;
	memcpy(copy, locs, n * sizeof(*locs));
	slot->n = n;
	slot->locs = copy;
	if (log) {
		struct buf rec = {0};

		rc = buf_append(&rec, (uint8_t[]){MREC_STACK}, 1);
		rc = rc ?: put_uvarint(&rec, id);
		rc = rc ?: put_uvarint(&rec, n);
		for (uint32_t i = 0; i < n && !rc; i++)
			rc = put_uvarint(&rec, locs[i]);
		rc = rc ?: log_record(m, &rec);
		buf_free(&rec);
		if (rc)
			return rc;
	}
	chunked_publish(&m->stacks);
	return (int64_t)id;
}

int64_t meta_stack(struct meta *m, const uint32_t *locs, uint32_t n)
{
	return insert_stack(m, locs, n, true);
}

/* ---- symbolization results ---- */

static int apply_symbolized(struct meta *m, uint32_t loc, const struct meta_line *lines, uint32_t n,
			    bool failed)
{
	struct meta_location *l = chunked_at(&m->locations, loc);
	struct meta_lines *ls = copy_lines(m, lines, n);

	if (!ls)
		return -ENOMEM;
	atomic_store(&l->lines, ls);
	atomic_store(&l->sym, failed ? SYM_FAILED : SYM_DONE);
	return 0;
}

int meta_set_symbolized(struct meta *m, uint32_t loc, const struct meta_line *lines, uint32_t n,
			bool failed)
{
	struct buf rec = {0};
	int rc;

	if (loc == 0 || loc >= chunked_count(&m->locations))
		return -EINVAL;
	rc = buf_append(&rec, (uint8_t[]){MREC_SYMBOLIZED}, 1);
	rc = rc ?: put_uvarint(&rec, loc);
	rc = rc ?: put_uvarint(&rec, failed);
	rc = rc ?: put_uvarint(&rec, n);
	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = put_uvarint(&rec, lines[i].function);
		rc = rc ?: put_svarint(&rec, lines[i].line);
	}
	rc = rc ?: log_record(m, &rec);
	buf_free(&rec);
	return rc ?: apply_symbolized(m, loc, lines, n, failed);
}

/* ---- replay ---- */

/* Reads n (function, line) pairs, checking function ids. */
static struct meta_line *read_lines(struct meta *m, struct rd *r, uint32_t *n_out)
{
	uint64_t n = rd_below(r, 1 << 16);
	size_t nf = chunked_count(&m->functions);
	struct meta_line *lines = calloc(n ? n : 1, sizeof(*lines));

	if (!lines) {
		r->bad = true;
		return NULL;
	}
	for (uint64_t i = 0; i < n; i++) {
		lines[i].function = (uint32_t)rd_below(r, nf);
		lines[i].line = rd_svarint(r);
	}
	*n_out = (uint32_t)n;
	return lines;
}

int meta_replay_record(struct store *s, const uint8_t *p, size_t len)
{
	struct meta *m = &s->meta;
	struct rd r = rd_of(p, len);
	const uint8_t *type = rd_bytes(&r, 1);
	int64_t rc = 0;
	uint64_t id;

	if (!type)
		return -EBADMSG;
	id = rd_uvarint(&r);
	size_t ns = chunked_count(&m->strings);
	switch (*type) {
	case MREC_STRING: {
		uint64_t n = rd_below(&r, RECORD_MAX);
		const uint8_t *b = rd_bytes(&r, n);

		if (r.bad || id != ns || memchr(b, 0, n))
			return -EBADMSG;
		rc = insert_string(m, (const char *)b, n, false);
		break;
	}
	case MREC_MAPPING: {
		struct meta_mapping mp;

		memset(&mp, 0, sizeof(mp));
		mp.start = rd_uvarint(&r);
		mp.limit = rd_uvarint(&r);
		mp.offset = rd_uvarint(&r);
		mp.filename = (uint32_t)rd_below(&r, ns);
		mp.build_id = (uint32_t)rd_below(&r, ns);
		mp.flags = (uint32_t)rd_below(&r, 16);
		if (r.p != r.end) {
			mp.elf_type = (uint32_t)rd_below(&r, 1 << 16);
			mp.load_offset = rd_uvarint(&r);
			mp.load_vaddr = rd_uvarint(&r);
			if (mp.elf_type == 0)
				r.bad = true;
		}
		if (r.bad || id != chunked_count(&m->mappings))
			return -EBADMSG;
		rc = insert_mapping(m, &mp, false);
		break;
	}
	case MREC_FUNCTION: {
		struct meta_function f;

		memset(&f, 0, sizeof(f));
		f.name = (uint32_t)rd_below(&r, ns);
		f.system_name = (uint32_t)rd_below(&r, ns);
		f.filename = (uint32_t)rd_below(&r, ns);
		f.start_line = rd_svarint(&r);
		if (r.bad || id != chunked_count(&m->functions))
			return -EBADMSG;
		rc = insert_function(m, &f, false);
		break;
	}
	case MREC_LOCATION: {
		uint32_t mapping = (uint32_t)rd_below(&r, chunked_count(&m->mappings));
		uint64_t address = rd_uvarint(&r);
		uint32_t n = 0;
		struct meta_line *lines = read_lines(m, &r, &n);

		if (r.bad || id != chunked_count(&m->locations)) {
			free(lines);
			return -EBADMSG;
		}
		rc = insert_location(m, mapping, address, lines, n, false);
		free(lines);
		break;
	}
	case MREC_STACK: {
		uint64_t n = rd_below(&r, 1 << 16);
		size_t nl = chunked_count(&m->locations);
		uint32_t *locs = calloc(n ? n : 1, sizeof(*locs));

		if (!locs)
			return -ENOMEM;
		for (uint64_t i = 0; i < n; i++)
			locs[i] = (uint32_t)rd_below(&r, nl);
		if (r.bad || id != chunked_count(&m->stacks)) {
			free(locs);
			return -EBADMSG;
		}
		rc = insert_stack(m, locs, (uint32_t)n, false);
		free(locs);
		break;
	}
	case MREC_SERIES: {
		uint32_t type_sid = (uint32_t)rd_below(&r, ns);
		uint32_t pt = (uint32_t)rd_below(&r, ns), pu = (uint32_t)rd_below(&r, ns);
		int64_t period = rd_svarint(&r);
		uint64_t n = rd_below(&r, 1024);
		uint32_t sids[2048];

		for (uint64_t i = 0; i < 2 * n; i++)
			sids[i] = (uint32_t)rd_below(&r, ns);
		if (r.bad || id != chunked_count(&s->sx.series))
			return -EBADMSG;
		rc = series_add(&s->sx, m, (uint32_t)id, type_sid, pt, pu, period, sids, n);
		break;
	}
	case MREC_SYMBOLIZED: {
		uint64_t failed = rd_below(&r, 2);
		uint32_t n = 0;
		struct meta_line *lines = read_lines(m, &r, &n);

		if (r.bad || id == 0 || id >= chunked_count(&m->locations)) {
			free(lines);
			return -EBADMSG;
		}
		rc = apply_symbolized(m, (uint32_t)id, lines, n, failed);
		free(lines);
		break;
	}
	case MREC_RESYMBOLIZE: /* id: the build ID's string */
		if (r.bad || id == 0 || id >= ns)
			return -EBADMSG;
		rc = meta_requeue_build_id(m, (uint32_t)id);
		break;
	default:
		return -EBADMSG;
	}
	if (rc >= 0 && r.p != r.end)
		return -EBADMSG;
	return rc < 0 ? (int)rc : 0;
}
