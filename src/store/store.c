/*
 * store.c — the embedded store: open/recover, the write path, and the
 * maintenance that turns the head into blocks.
 *
 * Directory layout (docs/STORAGE.md has the bytes):
 *   DIR/LOCK          flock()ed while open (one process per directory)
 *   DIR/meta.log      metastore log (strings ... stacks, series, symbols)
 *   DIR/wal/N.log     WAL segments (sample records)
 *   DIR/blocks/b-SEQ.kb  immutable blocks, one time window each
 *   DIR/CHECKPOINT    "segments <= N are in blocks"
 *
 * Write path: validate labels -> intern metadata and stacks (meta.mu) ->
 * encode one WAL record for all the profile's sample types -> group commit
 * (fsync) -> apply the same record to the head (head_lock) -> acknowledge.
 * Because the head is only changed after the fsync, a reader never sees an
 * unacknowledged write, and replay after a crash applies exactly the durable
 * records.
 *
 * Cut (background thread or store_flush): rotate the WAL segment and freeze
 * the head atomically (no commit in flight, every acknowledged record
 * applied), write one block per time window of the frozen head, publish the
 * blocks, then write CHECKPOINT and delete the covered segments. Readers see
 * the frozen head until its blocks are published, so nothing disappears in
 * between. Recovery invariants:
 *   1. a block whose cut_seg > CHECKPOINT is from an unfinished cut: deleted
 *      (its rows are still in the WAL, which is replayed);
 *   2. a block named as a source by another block was compacted: deleted;
 *   3. segments <= CHECKPOINT are covered by blocks: deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/satadd.h"
#include "common/log.h"
#include "pprof/pprof.h"
#include "store/internal.h"

#include <stddef.h>
#include <xxhash.h>

#define DEFAULT_BLOCK_MS  (2 * 3600 * 1000LL)
#define DEFAULT_MAX_LABEL 64
#define DEFAULT_HEAD_ROWS (2u << 20)
#define REC_SAMPLES	  1
#define REC_ROWS	  2 /* rows.c */

static int64_t window_of(const struct store *s, int64_t ts)
{
	int64_t d = s->opts.block_duration_ms;
	int64_t q = ts / d;

	return (ts % d < 0) ? q - 1 : q;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- applying a WAL record ---------------------------------------------- */

/* Record: type u8 (1), ts svarint, n_series, per series: id, n_rows, rows
 * (stack id delta uvarint, value svarint). Validated completely before
 * anything is applied, so a bad record changes nothing. */
int store_apply_record(struct store *s, const uint8_t *p, size_t len)
{
	struct rd r = {p, p + len, false};
	size_t n_series = chunked_count(&s->sx.series);
	size_t n_stacks = chunked_count(&s->meta.stacks);
	uint32_t *stacks = NULL;
	int64_t *values = NULL;
	size_t cap = 0;
	int rc = 0;

	if (len > 0 && p[0] == REC_ROWS)
		return store_apply_rows_record(s, p, len);
	for (int pass = 0; pass < 2 && !rc; pass++) {
		r.p = p;
		const uint8_t *type = rd_bytes(&r, 1);
		int64_t ts = rd_svarint(&r);
		uint64_t ns = rd_below(&r, 1 << 16);

		if (!type || *type != REC_SAMPLES)
			return -EBADMSG;
		for (uint64_t i = 0; i < ns && !r.bad; i++) {
			uint32_t id = (uint32_t)rd_below(&r, n_series);
			uint64_t n = rd_below(&r, (uint64_t)(r.end - r.p) / 2 + 1), st = 0;

			if (r.bad)
				break;
			if (n > cap) {
				uint32_t *a = realloc(stacks, n * sizeof(*a));
				if (a)
					stacks = a;
				int64_t *v = realloc(values, n * sizeof(*v));
				if (v)
					values = v;
				if (!a || !v) {
					rc = -ENOMEM;
					break;
				}
				cap = n;
			}
			for (uint64_t j = 0; j < n; j++) {
				st += rd_uvarint(&r);
				if (st >= n_stacks)
					r.bad = true;
				stacks[j] = (uint32_t)st;
				values[j] = rd_svarint(&r);
			}
			if (pass == 1 && !r.bad) {
				struct series_rows *sr = head_series(s->head, id, true);

				if (!sr || series_rows_add_profile(sr, ts, stacks, values, n)) {
					rc = -ENOMEM;
					break;
				}
				s->head->n_rows += n;
				s->head->n_profiles++;
				if (ts < s->head->min_ts)
					s->head->min_ts = ts;
				if (ts > s->head->max_ts)
					s->head->max_ts = ts;
				series_note_time(series_at(&s->sx, id), ts);
				atomic_fetch_add(&s->total_rows, n);
			}
		}
		if (!rc && (r.bad || r.p != r.end))
			rc = -EBADMSG;
	}
	free(stacks);
	free(values);
	return rc;
}

/* ---- the write path ------------------------------------------------------ */

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

	rc = wal_commit(s, rec.data, rec.len, err);
	if (rc)
		goto out;
	pthread_rwlock_wrlock(&s->head_lock);
	rc = store_apply_record(s, rec.data, rec.len);
	bool kick = s->head->n_rows >= s->opts.head_max_rows ||
		    window_of(s, s->head->max_ts) - window_of(s, s->head->min_ts) >= 2;
	pthread_rwlock_unlock(&s->head_lock);
	wal_applied(&s->wal);
	if (rc) {
		/* The record is durable and will be replayed; only memory ran out. */
		rc =
		    kiln_error_set(err, -rc, "cannot apply the write in memory: %s", strerror(-rc));
		goto out;
	}
	if (kick) {
		pthread_mutex_lock(&s->bg_mu);
		s->bg_kick = true;
		pthread_cond_signal(&s->bg_cond);
		pthread_mutex_unlock(&s->bg_mu);
	}
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

/* ---- blocks: cut, compaction, retention ------------------------------- */

static void freeze_head(struct store *s)
{
	pthread_rwlock_wrlock(&s->head_lock);
	struct head *fresh = head_new();
	if (fresh) {
		s->head->seg = s->wal.seg;
		s->head->next = s->frozen;
		s->frozen = s->head;
		s->head = fresh;
	}
	pthread_rwlock_unlock(&s->head_lock);
}

static const struct series_rows *head_get(void *ctx, uint32_t id, int *rc)
{
	struct head *h = ctx;

	(void)rc;
	return id < h->cap_series ? h->series[id] : NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_block(const void *a, const void *b)
{
	const struct block *x = *(struct block *const *)a, *y = *(struct block *const *)b;

	if (x->min_ts != y->min_ts)
		return x->min_ts < y->min_ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Adds and removes blocks under head_lock; drops `frozen` from the list. */
static int publish(struct store *s, struct block **add, size_t n_add, struct block **remove,
		   size_t n_remove, struct head *frozen)
{
	pthread_rwlock_wrlock(&s->head_lock);
	struct block **nb = realloc(s->blocks, (s->n_blocks + n_add + 1) * sizeof(*nb));
	if (!nb) {
		pthread_rwlock_unlock(&s->head_lock);
		return -ENOMEM;
	}
	s->blocks = nb;
	size_t k = 0;
	for (size_t i = 0; i < s->n_blocks; i++) {
		bool gone = false;

		for (size_t j = 0; j < n_remove && !gone; j++)
			gone = s->blocks[i] == remove[j];
		if (!gone)
			s->blocks[k++] = s->blocks[i];
	}
	for (size_t i = 0; i < n_add; i++)
		s->blocks[k++] = add[i];
	s->n_blocks = k;
	qsort(s->blocks, s->n_blocks, sizeof(*s->blocks), cmp_block);
	if (frozen) {
		struct head **pp = &s->frozen;

		while (*pp && *pp != frozen)
			pp = &(*pp)->next;
		if (*pp)
			*pp = frozen->next;
	}
	pthread_rwlock_unlock(&s->head_lock);
	return 0;
}

static int write_checkpoint(struct store *s, uint64_t seg, struct kiln_error *err)
{
	struct buf b = {0};
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/CHECKPOINT", s->dir);
	rc = buf_printf(&b, "kiln-store 1\nwal_segment %" PRIu64 "\n", seg);
	rc = rc ?: buf_write_file_mode(&b, path, STORE_FILE_MODE);
	buf_free(&b);
	if (rc)
		return kiln_error_set(err, -rc, "cannot write %s: %s", path, strerror(-rc));
	s->checkpoint_seg = seg;
	return 0;
}

/* Writes the oldest frozen head into blocks (one per window). */
static int write_frozen(struct store *s, struct head *h, struct kiln_error *err)
{
	int64_t *wins = NULL;
	size_t nw = 0, cap = 0;
	struct block **made = NULL;
	size_t n_made = 0;
	int rc = 0;

	for (size_t id = 0; id < h->cap_series; id++) {
		const struct series_rows *r = h->series[id];

		for (size_t i = 0; r && i < r->np; i++) {
			int64_t w = window_of(s, r->ts[i]);

			if (nw && wins[nw - 1] == w)
				continue;
			if (nw == cap) {
				cap = cap ? cap * 2 : 16;
				int64_t *a = realloc(wins, cap * sizeof(*a));
				if (!a) {
					free(wins);
					return kiln_error_set(err, ENOMEM, "out of memory");
				}
				wins = a;
			}
			wins[nw++] = w;
		}
	}
	if (nw)
		qsort(wins, nw, sizeof(*wins), cmp_i64);
	made = calloc(nw + 1, sizeof(*made));
	if (!made) {
		free(wins);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	uint32_t n_stacks = (uint32_t)chunked_count(&s->meta.stacks);
	for (size_t i = 0; i < nw && !rc; i++) {
		struct block *b;
		int64_t d = s->opts.block_duration_ms;

		if (i && wins[i] == wins[i - 1])
			continue;
		rc = block_write(s->block_dir, s->next_block_seq++, h->seg, NULL, 0, head_get, h,
				 h->cap_series, wins[i] * d, wins[i] * d + d, n_stacks, &b, err);
		if (!rc && b)
			made[n_made++] = b;
	}
	rc = rc ?: publish(s, made, n_made, NULL, 0, h);
	if (rc) {
		/* Unpublished blocks go: the retry writes them again. */
		for (size_t i = 0; i < n_made; i++) {
			unlink(made[i]->path);
			block_unref(made[i]);
		}
		kiln_error_set(err, -rc, "out of memory"); /* kept: the first error */
		goto out;
	}
	rc = write_checkpoint(s, h->seg, err);
	if (!rc)
		wal_drop_upto(&s->wal, h->seg);
	head_free(h);
out:
	free(made);
	free(wins);
	return rc;
}

static int cut(struct store *s, struct kiln_error *err)
{
	bool empty;
	int rc = 0;

	pthread_rwlock_rdlock(&s->head_lock);
	empty = s->head->n_profiles == 0;
	pthread_rwlock_unlock(&s->head_lock);
	if (!empty)
		rc = wal_rotate(s, freeze_head, err);
	/* Oldest frozen head first; a failure leaves it (and later ones) to
	 * the next attempt, still visible to readers. */
	while (!rc) {
		struct head *h;

		pthread_rwlock_rdlock(&s->head_lock);
		h = s->frozen;
		while (h && h->next)
			h = h->next;
		pthread_rwlock_unlock(&s->head_lock);
		if (!h)
			break;
		rc = write_frozen(s, h, err);
	}
	return rc;
}

struct compact_ctx {
	struct block **src;
	size_t n_src;
	uint32_t n_stacks;
	struct series_rows rows;
	struct kiln_error *err;
};

static const struct series_rows *compact_get(void *ctx, uint32_t id, int *rc)
{
	struct compact_ctx *c = ctx;

	series_rows_reset(&c->rows);
	for (size_t i = 0; i < c->n_src && !*rc; i++) {
		const struct block_series *bs = block_find(c->src[i], id);

		if (bs)
			*rc = block_read_rows(c->src[i], bs, c->n_stacks, &c->rows, c->err);
	}
	return c->rows.np ? &c->rows : NULL;
}

/* Merges the blocks of one window into one. */
static int compact_window(struct store *s, struct block **src, size_t n, struct kiln_error *err)
{
	struct compact_ctx c = {src, n, (uint32_t)chunked_count(&s->meta.stacks), {0}, err};
	uint64_t *seqs = calloc(n, sizeof(*seqs)), cut_seg = 0;
	uint32_t max_id = 0;
	struct block *out = NULL;
	int rc;

	if (!seqs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		seqs[i] = src[i]->seq;
		cut_seg = src[i]->cut_seg > cut_seg ? src[i]->cut_seg : cut_seg;
		if (src[i]->n_series && src[i]->series[src[i]->n_series - 1].id + 1 > max_id)
			max_id = src[i]->series[src[i]->n_series - 1].id + 1;
	}
	int64_t d = s->opts.block_duration_ms, w = window_of(s, src[0]->min_ts);
	rc = block_write(s->block_dir, s->next_block_seq++, cut_seg, seqs, n, compact_get, &c,
			 max_id, w * d, w * d + d, c.n_stacks, &out, err);
	series_rows_free(&c.rows);
	free(seqs);
	if (rc)
		return rc;
	rc = publish(s, out ? &out : NULL, out ? 1 : 0, src, n, NULL);
	if (rc) {
		/* Left on disk, it would name src as merged: a later merge of
		 * the same window would then count their rows twice. */
		if (out) {
			unlink(out->path);
			block_unref(out);
		}
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		unlink(src[i]->path);
		block_unref(src[i]); /* the store's reference */
	}
	atomic_fetch_add(&s->compactions, 1);
	return 0;
}

/* Snapshot of the block list with a reference each. */
static struct block **blocks_snapshot(struct store *s, size_t *n)
{
	struct block **bs;

	pthread_rwlock_rdlock(&s->head_lock);
	bs = calloc(s->n_blocks + 1, sizeof(*bs));
	*n = 0;
	if (bs) {
		for (size_t i = 0; i < s->n_blocks; i++) {
			block_ref(s->blocks[i]);
			bs[i] = s->blocks[i];
		}
		*n = s->n_blocks;
	}
	pthread_rwlock_unlock(&s->head_lock);
	return bs;
}

static void blocks_release(struct block **bs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		block_unref(bs[i]);
	free(bs);
}

static int compact(struct store *s, bool all, struct kiln_error *err)
{
	size_t n;
	struct block **bs = blocks_snapshot(s, &n);
	int64_t newest = INT64_MIN;
	int rc = 0;

	if (!bs)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (window_of(s, bs[i]->max_ts) > newest)
			newest = window_of(s, bs[i]->max_ts);
	/* bs is sorted by min_ts, so one window's blocks are adjacent. */
	for (size_t i = 0; i < n && !rc;) {
		int64_t w = window_of(s, bs[i]->min_ts);
		size_t j = i;

		bool checkpointed = true;

		while (j < n && window_of(s, bs[j]->min_ts) == w)
			checkpointed &= bs[j++]->cut_seg <= s->checkpoint_seg;
		/* A block whose cut has no CHECKPOINT yet (its write failed) is
		 * dropped by recovery, its rows replayed from the WAL; merged
		 * now, the merge would be dropped too and take the checkpointed
		 * blocks it names as sources with it. Wait for the checkpoint. */
		if (j - i >= 2 && checkpointed && (all || w < newest))
			rc = compact_window(s, bs + i, j - i, err);
		i = j;
	}
	blocks_release(bs, n);
	return rc;
}

static void apply_retention(struct store *s)
{
	int64_t cutoff;
	size_t n, k = 0;
	struct block **bs, **old;

	if (s->opts.retention_ms <= 0)
		return;
	cutoff = wall_ms() - s->opts.retention_ms;
	bs = blocks_snapshot(s, &n);
	old = calloc(n + 1, sizeof(*old));
	if (!bs || !old) {
		free(old);
		blocks_release(bs, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (bs[i]->max_ts < cutoff)
			old[k++] = bs[i];
	if (k && publish(s, NULL, 0, old, k, NULL) == 0) {
		series_forget_before(&s->sx, cutoff);
		for (size_t i = 0; i < k; i++) {
			log_info("store: retention: deleting block %s (data up to %" PRId64 ")",
				 old[i]->path, old[i]->max_ts);
			atomic_fetch_sub(&s->total_rows, old[i]->n_rows);
			unlink(old[i]->path);
			block_unref(old[i]);
		}
	}
	free(old);
	blocks_release(bs, n);
}

static int maintain(struct store *s, bool all, struct kiln_error *err)
{
	int rc;

	pthread_mutex_lock(&s->maint_mu);
	rc = cut(s, err);
	rc = rc ?: compact(s, all, err);
	apply_retention(s);
	pthread_mutex_unlock(&s->maint_mu);
	return rc;
}

int store_flush(struct store *s, struct kiln_error *err)
{
	return maintain(s, true, err);
}

static void *bg_main(void *arg)
{
	struct store *s = arg;

	pthread_mutex_lock(&s->bg_mu);
	while (!s->bg_stop) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		if (!s->bg_kick)
			pthread_cond_timedwait(&s->bg_cond, &s->bg_mu, &until);
		if (s->bg_stop)
			break;
		bool kicked = s->bg_kick;
		s->bg_kick = false;
		pthread_mutex_unlock(&s->bg_mu);

		struct kiln_error err = {0};
		int rc;
		if (kicked) {
			rc = maintain(s, false, &err);
		} else {
			pthread_mutex_lock(&s->maint_mu);
			rc = compact(s, false, &err);
			apply_retention(s);
			pthread_mutex_unlock(&s->maint_mu);
		}
		if (rc)
			log_error("store: background maintenance: %s", err.msg);
		pthread_mutex_lock(&s->bg_mu);
	}
	pthread_mutex_unlock(&s->bg_mu);
	return NULL;
}

/* ---- open / close -------------------------------------------------------- */

static int read_checkpoint(struct store *s, struct kiln_error *err)
{
	struct buf b = {0};
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/CHECKPOINT", s->dir);
	rc = buf_read_file(&b, path, 4096);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return kiln_error_set(err, -rc, "cannot read %s: %s", path, strerror(-rc));
	buf_terminate(&b);
	const char *p = b.data ? strstr((char *)b.data, "wal_segment ") : NULL;
	if (!p) {
		buf_free(&b);
		return kiln_error_set(err, EBADMSG, "%s: no wal_segment line", path);
	}
	s->checkpoint_seg = strtoull(p + 12, NULL, 10);
	buf_free(&b);
	return 0;
}

static int load_blocks(struct store *s, struct kiln_error *err)
{
	DIR *d = opendir(s->block_dir);
	struct dirent *e;
	struct block **all = NULL;
	size_t n = 0, cap = 0;
	char path[4096];

	if (!d)
		return kiln_error_set(err, errno, "cannot open %s: %s", s->block_dir,
				      strerror(errno));
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct block *b;
		struct kiln_error berr = {0};

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->block_dir, e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
			unlink(path); /* an unfinished write */
			continue;
		}
		if (len < 4 || strcmp(e->d_name + len - 3, ".kb") != 0)
			continue;
		if (block_open(path, 0, &b, &berr)) {
			log_error("store: skipping unreadable block: %s", berr.msg);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct block **a = realloc(all, cap * sizeof(*a));
			if (!a) {
				block_unref(b);
				break;
			}
			all = a;
		}
		all[n++] = b;
	}
	closedir(d);
	/* Recovery invariants 1 and 2 (see the top of the file): decide for
	 * every block first, then drop. */
	bool *drop = calloc(n + 1, sizeof(*drop));
	if (!drop) {
		for (size_t i = 0; i < n; i++)
			block_unref(all[i]);
		free(all);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		drop[i] = all[i]->cut_seg > s->checkpoint_seg;
		for (size_t j = 0; j < n && !drop[i]; j++)
			for (size_t x = 0; x < all[j]->n_sources && !drop[i]; x++)
				drop[i] = all[j]->sources[x] == all[i]->seq && j != i;
		if (all[i]->seq >= s->next_block_seq)
			s->next_block_seq = all[i]->seq + 1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (drop[i]) {
			log_info(
			    "store: removing block %s left by an interrupted cut or compaction",
			    all[i]->path);
			unlink(all[i]->path);
			block_unref(all[i]);
			continue;
		}
		all[k++] = all[i];
	}
	free(drop);
	s->blocks = all;
	s->n_blocks = k;
	if (k)
		qsort(s->blocks, k, sizeof(*s->blocks), cmp_block);
	/* Series time ranges come from the blocks too. */
	for (size_t i = 0; i < k; i++)
		for (size_t j = 0; j < s->blocks[i]->n_series; j++) {
			const struct block_series *bs = &s->blocks[i]->series[j];

			if (bs->id < chunked_count(&s->sx.series)) {
				series_note_time(series_at(&s->sx, bs->id), bs->min_ts);
				series_note_time(series_at(&s->sx, bs->id), bs->max_ts);
			}
			atomic_fetch_add(&s->total_rows, bs->n_rows);
		}
	return 0;
}

int store_open(const struct store_options *opts, struct store **out, struct kiln_error *err)
{
	struct store *s;
	char path[4096];
	int rc, fd;

	*out = NULL;
	if (!opts || !opts->path || !*opts->path)
		return kiln_error_set(err, EINVAL, "store: no storage path");
	s = calloc(1, sizeof(*s));
	if (!s)
		return kiln_error_set(err, ENOMEM, "out of memory");
	s->opts = *opts;
	if (s->opts.block_duration_ms <= 0)
		s->opts.block_duration_ms = DEFAULT_BLOCK_MS;
	if (!s->opts.max_labels_per_series)
		s->opts.max_labels_per_series = DEFAULT_MAX_LABEL;
	if (!s->opts.head_max_rows)
		s->opts.head_max_rows = DEFAULT_HEAD_ROWS;
	if (opts->symbolizer && opts->symbolizer->resolve) {
		s->symbolizer = *opts->symbolizer;
		s->has_symbolizer = true;
	}
	s->opts.symbolizer = NULL;
	s->dir = strdup(opts->path);
	s->next_block_seq = 1;
	pthread_rwlock_init(&s->head_lock, NULL);
	pthread_mutex_init(&s->maint_mu, NULL);
	pthread_mutex_init(&s->bg_mu, NULL);
	pthread_cond_init(&s->bg_cond, NULL);
	s->head = head_new();
	s->wal.fd = s->wal.meta_fd = -1;
	s->lock_fd = -1;
	if (!s->dir || !s->head || asprintf(&s->block_dir, "%s/blocks", opts->path) < 0) {
		s->block_dir = NULL;
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (meta_init(&s->meta) || series_index_init(&s->sx)) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if ((mkdir(s->dir, STORE_DIR_MODE) && errno != EEXIST) ||
	    (mkdir(s->block_dir, STORE_DIR_MODE) && errno != EEXIST)) {
		rc = kiln_error_set(err, errno, "cannot create %s: %s", s->block_dir,
				    strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/LOCK", s->dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		rc = kiln_error_set(err, errno == EWOULDBLOCK ? EBUSY : errno,
				    "cannot lock %s: %s (is another kiln using this directory?)",
				    path, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	s->lock_fd = fd;
	rc = read_checkpoint(s, err);
	rc = rc ?: wal_open(s, err);
	rc = rc ?: wal_replay(s, err);
	rc = rc ?: load_blocks(s, err);
	if (rc)
		goto fail;
	if (pthread_create(&s->bg_thread, NULL, bg_main, s)) {
		rc = kiln_error_set(err, EAGAIN, "cannot start the store's background thread");
		goto fail;
	}
	s->bg_started = true;
	log_info("store: opened %s: %zu series, %zu stacks, %zu blocks, %zu rows in the head",
		 s->dir, chunked_count(&s->sx.series), chunked_count(&s->meta.stacks), s->n_blocks,
		 s->head->n_rows);
	*out = s;
	return 0;
fail:
	kiln_error_prefix(err, "store %s: ", opts->path);
	store_close(s);
	return rc;
}

void store_close(struct store *s)
{
	struct kiln_error err = {0};

	if (!s)
		return;
	atomic_store(&s->closing, true);
	if (s->bg_started) {
		pthread_mutex_lock(&s->bg_mu);
		s->bg_stop = true;
		pthread_cond_signal(&s->bg_cond);
		pthread_mutex_unlock(&s->bg_mu);
		pthread_join(s->bg_thread, NULL);
		/* Everything acknowledged is already durable; cutting now only
		 * spares the next start a replay. Pending metastore records
		 * (symbolization results) are written by an empty commit. */
		if (wal_commit(s, NULL, 0, &err) == 0)
			wal_applied(&s->wal);
		if (maintain(s, true, &err))
			log_warn("store: closing %s: %s (the WAL keeps the data)", s->dir, err.msg);
	}
	if (s->wal.dir)
		wal_close(&s->wal);
	store_rows_marks_free(s);
	for (size_t i = 0; i < s->n_blocks; i++)
		block_unref(s->blocks[i]);
	free(s->blocks);
	head_free(s->head);
	while (s->frozen) {
		struct head *h = s->frozen;

		s->frozen = h->next;
		head_free(h);
	}
	if (s->sx.key_ix || s->sx.series.dir)
		series_index_destroy(&s->sx);
	if (s->meta.arena || s->meta.strings.dir)
		meta_destroy(&s->meta);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	pthread_rwlock_destroy(&s->head_lock);
	pthread_mutex_destroy(&s->maint_mu);
	pthread_mutex_destroy(&s->bg_mu);
	pthread_cond_destroy(&s->bg_cond);
	free(s->dir);
	free(s->block_dir);
	free(s);
}

void store_get_stats(struct store *s, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&s->head_lock);
	out->head_rows = s->head->n_rows;
	for (struct head *h = s->frozen; h; h = h->next)
		out->head_rows += h->n_rows;
	out->blocks = s->n_blocks;
	for (size_t i = 0; i < s->n_blocks; i++)
		out->disk_bytes += s->blocks[i]->file_size;
	pthread_rwlock_unlock(&s->head_lock);
	pthread_mutex_lock(&s->wal.mu);
	out->wal_bytes = s->wal.seg_len;
	out->disk_bytes += s->wal.seg_len + s->wal.meta_len;
	out->wal_fsyncs = s->wal.fsyncs;
	out->wal_fsync_ns_total = s->wal.fsync_ns;
	pthread_mutex_unlock(&s->wal.mu);
	out->series = chunked_count(&s->sx.series);
	out->sample_rows = atomic_load(&s->total_rows);
	out->stacks = chunked_count(&s->meta.stacks);
	out->locations = chunked_count(&s->meta.locations) - 1;
	pthread_mutex_lock(&s->meta.mu);
	for (size_t i = s->meta.sym_cursor; i < s->meta.n_sym_queue; i++) {
		const struct meta_location *l =
		    chunked_at(&s->meta.locations, s->meta.sym_queue[i]);
		out->symbolize_pending += atomic_load(&l->sym) == SYM_PENDING;
	}
	pthread_mutex_unlock(&s->meta.mu);
	out->compactions = atomic_load(&s->compactions);
}
