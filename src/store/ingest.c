/*
 * ingest.c — the write path's first step, shared by every backend: one
 * pprof profile becomes series (validated labels, one per sample type),
 * metastore objects (strings, mappings, functions, locations, stacks,
 * interned in s->meta) and one sample record (the WAL record format: time,
 * then per series its rows of stack id and value). store_commit_record
 * (store.c) then makes the record durable: the embedded store's WAL and
 * head, or ClickHouse (ch_write.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/satadd.h"
#include "pprof/pprof.h"
#include "store/internal.h"

/* pprof id -> position + 1: the identity when the ids are 1..n (what every
 * pprof encoder we know writes: no table at all), a dense array when the ids
 * are small, else a hash table. */
struct idmap {
	uint32_t *dense;
	size_t n_dense;
	struct htab *sparse;
	size_t n_ident; /* ids 1..n_ident map to themselves */
};

static void idmap_free(struct idmap *m)
{
	free(m->dense);
	htab_free(m->sparse);
}

static uint32_t idmap_get(const struct idmap *m, uint64_t id)
{
	uint64_t v = 0;

	if (m->n_ident || (!m->dense && !m->sparse))
		return id <= m->n_ident ? (uint32_t)id : 0;
	if (m->dense)
		return id < m->n_dense ? m->dense[id] : 0;
	htab_get(m->sparse, &id, sizeof(id), &v);
	return (uint32_t)v;
}

#define ITEM_ID(items, i, off) (*(const uint64_t *)((const uint8_t *)(items)[i] + (off)))

static int build_ix(struct idmap *m, void **items, size_t n, size_t id_offset)
{
	uint64_t max = 0;
	size_t i;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < n && ITEM_ID(items, i, id_offset) == i + 1; i++)
		;
	if (i == n) {
		m->n_ident = n;
		return 0;
	}
	for (i = 0; i < n; i++)
		max = ITEM_ID(items, i, id_offset) > max ? ITEM_ID(items, i, id_offset) : max;
	if (max <= 4 * n + 64) {
		m->n_dense = max + 1;
		if (!(m->dense = calloc(m->n_dense, sizeof(*m->dense))))
			return -ENOMEM;
		for (i = 0; i < n; i++)
			m->dense[ITEM_ID(items, i, id_offset)] = (uint32_t)(i + 1);
		return 0;
	}
	if (!(m->sparse = htab_new(n)))
		return -ENOMEM;
	for (i = 0; i < n && !rc; i++) {
		uint64_t id = ITEM_ID(items, i, id_offset);

		rc = htab_put(m->sparse, &id, sizeof(id), (uint32_t)(i + 1));
	}
	return rc;
}

/* Ingestion fast path. Interning every function and location of every
 * profile costs a hash-table probe per object, ~15 per sample row for agent
 * profiles. Instead each object gets a 128-bit content hash (pure
 * computation over the profile), a stack's fingerprint is the hash of its
 * locations' hashes, and meta.fp_ix maps fingerprints to stack ids: a stack
 * seen before costs one probe. Only new stacks intern their locations (and
 * those their functions, mappings and strings), lazily, through the caches
 * below. Fingerprints live in memory only; after a restart the first sight
 * of each stack takes the slow path once. The content hashes are built
 * bottom-up from fixed-size keys: each string of the string table is hashed
 * once, a function is the hash of its strings' hashes and start line, a
 * location of its mapping's and functions' hashes, address and lines. */
struct ingest {
	const struct pprof_profile *p;
	const pprof_msg *msg;
	const struct store_exec_info *exec; /* per mapping, in message order */
	size_t n_exec;
	struct idmap fn_ix, map_ix, loc_ix; /* pprof id -> position + 1 */
	XXH128_hash_t *str_hash, *fn_hash, *map_hash, *loc_hash;
	uint32_t *fn_meta, *map_meta, *loc_meta, *str_meta; /* 0 = not interned yet */
	void *mem; /* one allocation behind the arrays above */
	struct buf key;
};

static void ingest_free(struct ingest *in)
{
	idmap_free(&in->fn_ix);
	idmap_free(&in->map_ix);
	idmap_free(&in->loc_ix);
	free(in->mem);
	buf_free(&in->key);
}

static XXH128_hash_t str_hash(const struct ingest *in, int64_t idx)
{
	static const XXH128_hash_t none = {0, 0};

	return idx >= 0 && (size_t)idx < in->msg->n_string_table ? in->str_hash[idx] : none;
}

/* Hashes every string, function, mapping and location of the profile. */
static int ingest_prepare(struct ingest *in, const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	size_t ns = m->n_string_table, nf = m->n_function, nm = m->n_mapping, nl = m->n_location;
	static const XXH128_hash_t zero = {0, 0};
	uint8_t *mem;
	int rc;

	in->p = p;
	in->msg = m;
	rc = build_ix(&in->fn_ix, (void **)m->function, nf, offsetof(pprof_function_msg, id));
	rc = rc ?: build_ix(&in->map_ix, (void **)m->mapping, nm, offsetof(pprof_mapping_msg, id));
	rc =
	    rc ?: build_ix(&in->loc_ix, (void **)m->location, nl, offsetof(pprof_location_msg, id));
	if (rc)
		return rc;
	/* Hashes first (16-byte aligned), then the id caches, which must start
	 * zeroed; +1 each so that no array is empty. */
	size_t hashes = (ns + nf + nm + nl + 4) * sizeof(XXH128_hash_t);
	size_t ids = (ns + nf + nm + nl + 4) * sizeof(uint32_t);
	if (!(in->mem = malloc(hashes + ids)))
		return -ENOMEM;
	mem = in->mem;
	memset(mem + hashes, 0, ids);
	in->str_hash = (XXH128_hash_t *)mem;
	in->fn_hash = in->str_hash + ns + 1;
	in->map_hash = in->fn_hash + nf + 1;
	in->loc_hash = in->map_hash + nm + 1;
	in->str_meta = (uint32_t *)(mem + hashes);
	in->fn_meta = in->str_meta + ns + 1;
	in->map_meta = in->fn_meta + nf + 1;
	in->loc_meta = in->map_meta + nm + 1;

	for (size_t i = 0; i < ns; i++) {
		const char *s = m->string_table[i];

		in->str_hash[i] = XXH3_128bits(s, strlen(s));
	}
	for (size_t i = 0; i < nf; i++) {
		const pprof_function_msg *f = m->function[i];
		struct {
			XXH128_hash_t name, system_name, filename;
			int64_t start_line;
		} k = {str_hash(in, f->name), str_hash(in, f->system_name),
		       str_hash(in, f->filename), f->start_line};

		in->fn_hash[i] = XXH3_128bits(&k, sizeof(k));
	}
	for (size_t i = 0; i < nm; i++) {
		const pprof_mapping_msg *mp = m->mapping[i];
		struct {
			uint64_t start, limit, offset;
			XXH128_hash_t filename, build_id;
			uint64_t flags;
		} k = {mp->memory_start,
		       mp->memory_limit,
		       mp->file_offset,
		       str_hash(in, mp->filename),
		       str_hash(in, mp->build_id),
		       (uint64_t)(mp->has_functions | mp->has_filenames << 1 |
				  mp->has_line_numbers << 2 | mp->has_inline_frames << 3)};

		in->map_hash[i] = XXH3_128bits(&k, sizeof(k));
	}
	/* A location key: mapping hash, address, then (function hash, line)
	 * per line; on the stack unless a location has many inlined lines. */
	struct loc_line {
		XXH128_hash_t fn;
		int64_t line;
	} __attribute__((packed));
	struct {
		XXH128_hash_t map;
		uint64_t address;
		struct loc_line l[16];
	} __attribute__((packed)) k;
	for (size_t i = 0; i < nl && !rc; i++) {
		const pprof_location_msg *l = m->location[i];
		uint32_t mi = idmap_get(&in->map_ix, l->mapping_id);
		struct loc_line *ls = k.l;
		size_t len = offsetof(__typeof__(k), l) + l->n_line * sizeof(*ls);

		if (l->n_line > 16) {
			buf_reset(&in->key);
			if ((rc = buf_reserve(&in->key, len)))
				break;
			ls = (struct loc_line *)(in->key.data + offsetof(__typeof__(k), l));
		}
		k.map = mi ? in->map_hash[mi - 1] : zero;
		k.address = l->address;
		for (size_t j = 0; j < l->n_line; j++) {
			uint32_t fi = idmap_get(&in->fn_ix, l->line[j]->function_id);

			ls[j].fn = fi ? in->fn_hash[fi - 1] : zero;
			ls[j].line = l->line[j]->line;
		}
		if (ls == k.l) {
			in->loc_hash[i] = XXH3_128bits(&k, len);
		} else {
			memcpy(in->key.data, &k, offsetof(__typeof__(k), l));
			in->loc_hash[i] = XXH3_128bits(in->key.data, len);
		}
	}
	return rc;
}

static int64_t ingest_string(struct ingest *in, struct meta *m, int64_t idx)
{
	if (idx <= 0 || (size_t)idx >= in->msg->n_string_table)
		return 0;
	if (!in->str_meta[idx]) {
		const char *s = in->msg->string_table[idx];
		int64_t id = meta_string(m, s, strlen(s));

		if (id < 0)
			return id;
		in->str_meta[idx] = (uint32_t)id;
	}
	return in->str_meta[idx];
}

static int64_t ingest_mapping(struct ingest *in, struct meta *m, uint64_t pprof_id)
{
	uint32_t mi = idmap_get(&in->map_ix, pprof_id);

	if (!mi)
		return 0;
	if (!in->map_meta[mi - 1]) {
		const pprof_mapping_msg *mp = in->msg->mapping[mi - 1];
		struct meta_mapping mm;
		int64_t fn = ingest_string(in, m, mp->filename),
			bid = ingest_string(in, m, mp->build_id);

		if (fn < 0 || bid < 0)
			return -ENOMEM;
		memset(&mm, 0, sizeof(mm));
		mm.start = mp->memory_start;
		mm.limit = mp->memory_limit;
		mm.offset = mp->file_offset;
		mm.filename = (uint32_t)fn;
		mm.build_id = (uint32_t)bid;
		mm.flags = (uint32_t)mp->has_functions | (uint32_t)mp->has_filenames << 1 |
			   (uint32_t)mp->has_line_numbers << 2 |
			   (uint32_t)mp->has_inline_frames << 3;
		if (mi - 1 < in->n_exec && in->exec[mi - 1].elf_type) {
			mm.elf_type = in->exec[mi - 1].elf_type;
			mm.load_offset = in->exec[mi - 1].load_offset;
			mm.load_vaddr = in->exec[mi - 1].load_vaddr;
		}
		int64_t id = meta_mapping(m, &mm);
		if (id < 0)
			return id;
		in->map_meta[mi - 1] = (uint32_t)id;
	}
	return in->map_meta[mi - 1];
}

static int64_t ingest_function(struct ingest *in, struct meta *m, uint64_t pprof_id)
{
	uint32_t fi = idmap_get(&in->fn_ix, pprof_id);

	if (!fi)
		return 0;
	if (!in->fn_meta[fi - 1]) {
		const pprof_function_msg *f = in->msg->function[fi - 1];
		struct meta_function mf = {0};
		int64_t a = ingest_string(in, m, f->name), b = ingest_string(in, m, f->system_name),
			c = ingest_string(in, m, f->filename);

		if (a < 0 || b < 0 || c < 0)
			return -ENOMEM;
		mf.name = (uint32_t)a;
		mf.system_name = (uint32_t)b;
		mf.filename = (uint32_t)c;
		mf.start_line = f->start_line;
		int64_t id = meta_function(m, &mf);
		if (id < 0)
			return id;
		in->fn_meta[fi - 1] = (uint32_t)id;
	}
	return in->fn_meta[fi - 1];
}

static int64_t ingest_location(struct ingest *in, struct meta *m, uint32_t li)
{
	if (!in->loc_meta[li]) {
		const pprof_location_msg *l = in->msg->location[li];
		struct meta_line lines[64], *ls = lines;
		int64_t mp = ingest_mapping(in, m, l->mapping_id), id;

		if (mp < 0)
			return mp;
		if (l->n_line > 64 && !(ls = malloc(l->n_line * sizeof(*ls))))
			return -ENOMEM;
		for (size_t j = 0; j < l->n_line; j++) {
			int64_t f = ingest_function(in, m, l->line[j]->function_id);

			if (f < 0) {
				if (ls != lines)
					free(ls);
				return f;
			}
			ls[j].function = (uint32_t)f;
			ls[j].line = l->line[j]->line;
		}
		id = meta_location(m, (uint32_t)mp, l->address, ls, (uint32_t)l->n_line);
		if (ls != lines)
			free(ls);
		if (id < 0)
			return id;
		in->loc_meta[li] = (uint32_t)id;
	}
	return in->loc_meta[li];
}

/* A sample's stack fingerprint: the hash of its locations' content hashes.
 * Pure computation, done before taking meta.mu; hs holds n_location_id. */
static XXH128_hash_t stack_fp(const struct ingest *in, const pprof_sample_msg *sm,
			      XXH128_hash_t *hs)
{
	for (size_t j = 0; j < sm->n_location_id; j++) {
		uint32_t li = idmap_get(&in->loc_ix, sm->location_id[j]);

		hs[j] = in->loc_hash[li ? li - 1 : 0];
	}
	return XXH3_128bits(hs, sm->n_location_id * sizeof(*hs));
}

/* The stack id of a sample: by fingerprint, else by interning. Caller holds
 * meta.mu; locs holds at least n_location_id entries. */
static int64_t ingest_stack(struct ingest *in, struct meta *m, const pprof_sample_msg *sm,
			    XXH128_hash_t fp, uint32_t *locs)
{
	uint32_t id;

	if (fp_tab_get(&m->fp_ix, fp.low64, fp.high64, &id))
		return (int64_t)id;
	for (size_t j = 0; j < sm->n_location_id; j++) {
		uint32_t li = idmap_get(&in->loc_ix, sm->location_id[j]);
		int64_t l = li ? ingest_location(in, m, li - 1) : 0;

		if (l < 0)
			return l;
		locs[j] = (uint32_t)l;
	}
	int64_t st = meta_stack(m, locs, (uint32_t)sm->n_location_id);
	if (st < 0)
		return st;
	if (fp_tab_put(&m->fp_ix, fp.low64, fp.high64, (uint32_t)st))
		return -ENOMEM;
	return st;
}

struct srow {
	uint32_t stack;
	uint32_t sample;
};
static int cmp_srow(const void *a, const void *b)
{
	const struct srow *x = a, *y = b;

	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

int store_write_profile(struct store *s, const struct store_label *labels, size_t n_labels,
			const struct pprof_profile *p, int64_t timestamp_ms, bool delta,
			struct kiln_error *err)
{
	return store_write_profile_exec(s, labels, n_labels, p, NULL, 0, timestamp_ms, delta, err);
}

int store_write_profile_exec(struct store *s, const struct store_label *labels, size_t n_labels,
			     const struct pprof_profile *p, const struct store_exec_info *exec,
			     size_t n_exec, int64_t timestamp_ms, bool delta,
			     struct kiln_error *err)
{
	const pprof_msg *msg;
	struct store_label *sorted = NULL;
	const char *name;
	struct ingest in = {0};
	XXH128_hash_t *hashes = NULL, *fps = NULL;
	struct srow *rows = NULL;
	uint32_t *stack = NULL, *sids = NULL;
	struct buf rec = {0}, type = {0};
	size_t cap_stack = 0;
	int rc, nl;

	if (atomic_load(&s->closing))
		return kiln_error_set(err, ESHUTDOWN, "store is shutting down");
	if (!p)
		return kiln_error_set(err, EINVAL, "no profile");
	msg = pprof_profile_msg(p);
	if (msg->n_sample_type == 0)
		return kiln_error_set(err, EINVAL, "profile: no sample types");
	sorted = calloc(n_labels + 1, sizeof(*sorted));
	rows = calloc(msg->n_sample + 1, sizeof(*rows));
	sids = calloc(msg->n_sample_type, sizeof(*sids));
	if (!sorted || !rows || !sids) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	nl = series_check_labels(labels, n_labels, s->opts.max_labels_per_series, sorted, &name,
				 err);
	if (nl < 0) {
		rc = nl;
		goto out;
	}

	in.exec = exec;
	in.n_exec = exec ? n_exec : 0;
	rc = ingest_prepare(&in, p);
	if (rc) {
		rc = kiln_error_set(err, -rc, "out of memory");
		goto out;
	}
	/* Fingerprints (and the scratch for interning) outside the locks. */
	fps = malloc((msg->n_sample + 1) * sizeof(*fps));
	if (!fps) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < msg->n_sample; i++) {
		const pprof_sample_msg *sm = msg->sample[i];

		if (sm->n_location_id > cap_stack) {
			uint32_t *a = realloc(stack, sm->n_location_id * sizeof(*a));
			XXH128_hash_t *h = realloc(hashes, sm->n_location_id * sizeof(*h));

			if (a)
				stack = a;
			if (h)
				hashes = h;
			if (!a || !h) {
				rc = kiln_error_set(err, ENOMEM, "out of memory");
				goto out;
			}
			cap_stack = sm->n_location_id;
		}
		fps[i] = stack_fp(&in, sm, hashes);
	}
	/* Metadata: series, then everything the samples refer to. */
	pthread_rwlock_wrlock(&s->sx.lock);
	pthread_mutex_lock(&s->meta.mu);
	rc = 0;
	for (size_t t = 0; t < msg->n_sample_type && !rc; t++) {
		const char *st = pprof_string(p, msg->sample_type[t]->type);
		const char *su = pprof_string(p, msg->sample_type[t]->unit);
		const char *pt = msg->period_type ? pprof_string(p, msg->period_type->type) : "";
		const char *pu = msg->period_type ? pprof_string(p, msg->period_type->unit) : "";

		buf_reset(&type);
		rc = buf_printf(&type, "%s:%s:%s:%s:%s%s", name, st, su, pt, pu,
				delta ? ":delta" : "");
		rc = rc ?: buf_terminate(&type);
		int64_t id = rc ? rc
				: series_get(&s->sx, &s->meta, name, (char *)type.data, st, su, pt,
					     pu, msg->period, delta, sorted, (size_t)nl);
		if (id < 0)
			rc = (int)id;
		else
			sids[t] = (uint32_t)id;
	}
	/* Probe in order, prefetching a few rows ahead: the fingerprint table
	 * is larger than the caches, so each probe is otherwise a miss. */
	for (size_t i = 0; i < msg->n_sample && !rc; i++) {
		if (i + 4 < msg->n_sample)
			fp_tab_prefetch(&s->meta.fp_ix, fps[i + 4].low64);
		int64_t id = ingest_stack(&in, &s->meta, msg->sample[i], fps[i], stack);
		if (id < 0)
			rc = (int)id;
		rows[i] = (struct srow){(uint32_t)id, (uint32_t)i};
	}
	pthread_mutex_unlock(&s->meta.mu);
	pthread_rwlock_unlock(&s->sx.lock);
	if (rc) {
		rc = kiln_error_set(err, -rc, "cannot intern the profile's metadata: %s",
				    strerror(-rc));
		goto out;
	}

	/* One record for all sample types: stacks sorted, duplicates summed,
	 * zero sums dropped. */
	qsort(rows, msg->n_sample, sizeof(*rows), cmp_srow);
	rc = buf_append(&rec, (uint8_t[]){REC_SAMPLES}, 1);
	rc = rc ?: put_svarint(&rec, timestamp_ms);
	rc = rc ?: put_uvarint(&rec, msg->n_sample_type);
	for (size_t t = 0; t < msg->n_sample_type && !rc; t++) {
		size_t count_at, n = 0;
		uint32_t last = 0;
		struct buf body = {0};

		rc = put_uvarint(&rec, sids[t]);
		count_at = rec.len;
		for (size_t i = 0; i < msg->n_sample && !rc;) {
			uint32_t st = rows[i].stack;
			int64_t v = 0;

			for (; i < msg->n_sample && rows[i].stack == st; i++)
				sat_acc_i64(&v, msg->sample[rows[i].sample]->value[t]);
			if (v == 0)
				continue;
			rc = put_uvarint(&body, st - last);
			rc = rc ?: put_svarint(&body, v);
			last = st;
			n++;
		}
		(void)count_at;
		rc = rc ?: put_uvarint(&rec, n);
		rc = rc ?: buf_append(&rec, body.data, body.len);
		buf_free(&body);
	}
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory encoding the WAL record");
		goto out;
	}
	rc = store_commit_record(s, rec.data, rec.len, err);
out:
	ingest_free(&in);
	free(hashes);
	free(fps);
	free(sorted);
	free(rows);
	free(stack);
	free(sids);
	buf_free(&rec);
	buf_free(&type);
	return rc;
}

/* The row path's stack interning (rows.c, store.h): each sample's stack,
 * the way store_write_profile_exec interns them, without writing rows. */
int store_intern_stacks(struct store *s, const struct pprof_profile *p,
			const struct store_exec_info *exec, size_t n_exec, uint32_t *stack_ids,
			struct kiln_error *err)
{
	const pprof_msg *msg = pprof_profile_msg(p);
	struct ingest in = {.exec = exec, .n_exec = exec ? n_exec : 0};
	XXH128_hash_t *hashes = NULL;
	uint32_t *stack = NULL;
	size_t cap = 0;
	int rc;

	if (atomic_load(&s->closing))
		return kiln_error_set(err, ESHUTDOWN, "store is shutting down");
	rc = ingest_prepare(&in, p);
	for (size_t i = 0; i < msg->n_sample && !rc; i++)
		cap = msg->sample[i]->n_location_id > cap ? msg->sample[i]->n_location_id : cap;
	if (!rc && (!(hashes = malloc((cap + 1) * sizeof(*hashes))) ||
		    !(stack = malloc((cap + 1) * sizeof(*stack)))))
		rc = -ENOMEM;
	if (rc) {
		rc = kiln_error_set(err, -rc, "out of memory");
		goto out;
	}
	pthread_mutex_lock(&s->meta.mu);
	for (size_t i = 0; i < msg->n_sample && !rc; i++) {
		XXH128_hash_t fp = stack_fp(&in, msg->sample[i], hashes);
		int64_t id = ingest_stack(&in, &s->meta, msg->sample[i], fp, stack);

		if (id < 0)
			rc = (int)id;
		else
			stack_ids[i] = (uint32_t)id;
	}
	pthread_mutex_unlock(&s->meta.mu);
	if (rc)
		rc = kiln_error_set(err, -rc, "cannot intern the stacks: %s", strerror(-rc));
out:
	ingest_free(&in);
	free(hashes);
	free(stack);
	return rc;
}
