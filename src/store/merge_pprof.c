/*
 * merge_pprof.c — a merge written straight out as an encoded pprof
 * (store_merge_pprof), without a pprof builder or profile object.
 *
 * The builder path (store_merge, then pprof_builder_to_profile or _encode)
 * holds the merged profile several times over: interned copies of every
 * string, function, location and stack with hash tables keyed by copies of
 * their bytes, a deep-copied profile with its id tables, the serialized
 * message, then its gzip. For the merge of everything (32k stacks, 157k
 * locations) that was ~175 MB on top of the store. Here each object is read
 * from the metastore when first met, deduplicated by a 128-bit hash of its
 * content (no copy of the key), and appended already encoded to its section
 * of the message. Pass 1 walks the stacks and fills the mapping, location,
 * function and string sections (a few MB of protobuf) and finds the stacks
 * that are the same sample; pass 2 writes the message in field order —
 * sample types, samples (encoded on the fly), the four sections (each freed
 * once compressed), then the scalars — through a 64 KiB staging buffer.
 * Gzipped, a message of up to 4 MiB is compressed whole by libdeflate at
 * level 1 as pprof_encode does (so the gzip bytes are the builder path's
 * too); a larger one is streamed through zlib (level 1, one gzip member).
 *
 * Ids and order are those the builder gives (objects numbered in the order
 * first met, strings interned in the same call order, equal content merged),
 * so the uncompressed bytes equal pprof_builder_encode's for the same merge
 * (tests/query/test_merge_pprof.c checks it).
 */
#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zlib.h>

#include "common/satadd.h"
#include "store/internal.h"

/* ---- content hash -> id (the key is the hash: 96 of its bits kept) -------- */

struct cslot {
	uint64_t lo;
	uint32_t hi;
	uint32_t v1; /* id + 1; 0 = empty */
};
struct ctab {
	struct cslot *s;
	size_t cap, n;
};

static int ctab_grow(struct ctab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct cslot *s = calloc(cap, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->s[i].v1)
			continue;
		size_t j = t->s[i].lo & (cap - 1);
		while (s[j].v1)
			j = (j + 1) & (cap - 1);
		s[j] = t->s[i];
	}
	free(t->s);
	t->s = s;
	t->cap = cap;
	return 0;
}

/* The id stored under h, or fresh (stored) when h is new: 1 found, 0 new,
 * -ENOMEM. */
static int ctab_intern(struct ctab *t, XXH128_hash_t h, uint32_t fresh, uint32_t *id)
{
	if ((t->n + 1) * 4 > t->cap * 3 && ctab_grow(t))
		return -ENOMEM;
	uint32_t hi = (uint32_t)h.high64;
	size_t j = h.low64 & (t->cap - 1);
	for (; t->s[j].v1; j = (j + 1) & (t->cap - 1))
		if (t->s[j].lo == h.low64 && t->s[j].hi == hi) {
			*id = t->s[j].v1 - 1;
			return 1;
		}
	t->s[j] = (struct cslot){.lo = h.low64, .hi = hi, .v1 = fresh + 1};
	t->n++;
	*id = fresh;
	return 0;
}

/* ---- protobuf encoding ------------------------------------------------------ */

static inline size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* A varint field, left out when 0 as proto3 (and protobuf-c) does. */
static inline size_t put_field(uint8_t *p, unsigned field, uint64_t v)
{
	if (!v)
		return 0;
	size_t n = put_varint(p, (uint64_t)field << 3);
	return n + put_varint(p + n, v);
}

/* Appends field (length-delimited) holding body to b. */
static int put_message(struct buf *b, unsigned field, const uint8_t *body, size_t len)
{
	if (buf_reserve(b, len + 20))
		return -ENOMEM;
	b->len += put_varint(b->data + b->len, (uint64_t)field << 3 | 2);
	b->len += put_varint(b->data + b->len, len);
	memcpy(b->data + b->len, body, len);
	b->len += len;
	return 0;
}

/* ---- the output: staged, then deflated or appended -------------------------- */

/* Up to this size a gzipped message is kept whole and compressed in one call
 * by libdeflate at level 1, as pprof_encode does (faster than zlib, and the
 * same bytes as the builder path); past it, it is streamed through zlib. */
#define WHOLE_MAX (4u << 20)

struct sink {
	struct buf *out;
	bool gzip;
	bool streaming; /* zlib started: the message outgrew WHOLE_MAX */
	z_stream z;
	struct buf whole; /* gzip, not streaming: the message so far */
	uint8_t stage[64 * 1024];
	size_t n;
};

static int sink_deflate(struct sink *k, const uint8_t *p, size_t n, int flush)
{
	int zr;

	k->z.next_in = (Bytef *)p;
	k->z.avail_in = (uInt)n;
	do {
		if (buf_reserve(k->out, 64 * 1024))
			return -ENOMEM;
		size_t room = k->out->cap - k->out->len - 1;
		k->z.next_out = k->out->data + k->out->len;
		k->z.avail_out = (uInt)(room > (1u << 30) ? (1u << 30) : room);
		uInt before = k->z.avail_out;
		zr = deflate(&k->z, flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		k->out->len += before - k->z.avail_out;
	} while (k->z.avail_in || k->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	return 0;
}

static int sink_emit(struct sink *k, const uint8_t *p, size_t n)
{
	if (!k->gzip)
		return buf_append(k->out, p, n);
	if (!k->streaming && k->whole.len + n <= WHOLE_MAX)
		return buf_append(&k->whole, p, n);
	if (!k->streaming) {
		memset(&k->z, 0, sizeof(k->z));
		if (deflateInit2(&k->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return -ENOMEM;
		k->streaming = true;
		int rc = sink_deflate(k, k->whole.data, k->whole.len, Z_NO_FLUSH);
		buf_free(&k->whole);
		if (rc)
			return rc;
	}
	return sink_deflate(k, p, n, Z_NO_FLUSH);
}

static int sink_flush(struct sink *k)
{
	int rc = k->n ? sink_emit(k, k->stage, k->n) : 0;

	k->n = 0;
	return rc;
}

static int sink_write(struct sink *k, const void *data, size_t n)
{
	if (!n)
		return 0; /* data may be NULL (an empty section) */
	if (k->n + n <= sizeof(k->stage)) {
		memcpy(k->stage + k->n, data, n);
		k->n += n;
		return 0;
	}
	int rc = sink_flush(k);
	if (rc)
		return rc;
	if (n <= sizeof(k->stage))
		return sink_write(k, data, n);
	return sink_emit(k, data, n);
}

static int sink_finish(struct sink *k)
{
	int rc = sink_flush(k);

	if (rc || !k->gzip)
		return rc;
	if (k->streaming)
		return sink_deflate(k, NULL, 0, Z_FINISH);
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
	if (!c)
		return -ENOMEM;
	size_t bound = libdeflate_gzip_compress_bound(c, k->whole.len), got = 0;
	rc = buf_reserve(k->out, bound);
	if (!rc) {
		got = libdeflate_gzip_compress(c, k->whole.data, k->whole.len,
					       k->out->data + k->out->len, bound);
		rc = got ? 0 : -EIO;
		k->out->len += got;
	}
	libdeflate_free_compressor(c);
	return rc;
}

/* ---- pass 1: objects -------------------------------------------------------- */

struct writer {
	struct store *s;
	struct meta *m;
	struct describer d;
	/* metastore id -> output id (0 = not met yet) */
	uint32_t *loc_out, *func_out, *map_out;
	size_t n_meta_loc, n_meta_func, n_meta_map;
	/* content -> output index */
	struct ctab strs, maps, funcs, locs, samples;
	uint32_t n_strs, n_maps, n_funcs, n_locs;
	/* encoded sections: mapping (3), location (4), function (5), string_table (6) */
	struct buf sec_map, sec_loc, sec_func, sec_str;
	uint64_t *key; /* scratch: a sample key (length, then location ids) */
	size_t cap_key;
	struct buf body; /* scratch: one encoded message */
};

static int64_t intern_str(struct writer *w, const char *str)
{
	size_t len = str ? strlen(str) : 0;
	uint32_t id;
	int rc = ctab_intern(&w->strs, XXH3_128bits(str ? str : "", len), w->n_strs, &id);

	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		struct buf *b = &w->sec_str;
		if (buf_reserve(b, len + 20))
			return -ENOMEM;
		b->len += put_varint(b->data + b->len, 6 << 3 | 2);
		b->len += put_varint(b->data + b->len, len);
		if (len)
			memcpy(b->data + b->len, str, len);
		b->len += len;
		w->n_strs++;
	}
	return id;
}

static int64_t out_mapping(struct writer *w, const struct store_mapping_view *mv)
{
	if (mv->id < w->n_meta_map && w->map_out[mv->id])
		return w->map_out[mv->id];
	int64_t fn = intern_str(w, mv->filename), bid = intern_str(w, mv->build_id);
	if (fn < 0 || bid < 0)
		return -ENOMEM;
	uint64_t key[6] = {mv->memory_start, mv->memory_limit, mv->file_offset,
			   (uint64_t)fn,     (uint64_t)bid,    mv->flags & 15};
	uint32_t idx;
	int rc = ctab_intern(&w->maps, XXH3_128bits(key, sizeof(key)), w->n_maps, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		uint8_t b[128];
		size_t n = put_field(b, 1, idx + 1);
		n += put_field(b + n, 2, mv->memory_start);
		n += put_field(b + n, 3, mv->memory_limit);
		n += put_field(b + n, 4, mv->file_offset);
		n += put_field(b + n, 5, (uint64_t)fn);
		n += put_field(b + n, 6, (uint64_t)bid);
		for (unsigned f = 0; f < 4; f++)
			n += put_field(b + n, 7 + f, (mv->flags >> f) & 1);
		if (put_message(&w->sec_map, 3, b, n))
			return -ENOMEM;
		w->n_maps++;
	}
	if (mv->id < w->n_meta_map)
		w->map_out[mv->id] = idx + 1;
	return idx + 1;
}

static int64_t out_function(struct writer *w, const struct store_line_view *lv)
{
	if (lv->function_id && lv->function_id < w->n_meta_func && w->func_out[lv->function_id])
		return w->func_out[lv->function_id];
	int64_t name = intern_str(w, lv->name), sys = intern_str(w, lv->system_name);
	int64_t file = intern_str(w, lv->filename);
	if (name < 0 || sys < 0 || file < 0)
		return -ENOMEM;
	int64_t key[4] = {name, sys, file, lv->start_line};
	uint32_t idx;
	int rc = ctab_intern(&w->funcs, XXH3_128bits(key, sizeof(key)), w->n_funcs, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		uint8_t b[64];
		size_t n = put_field(b, 1, idx + 1);
		n += put_field(b + n, 2, (uint64_t)name);
		n += put_field(b + n, 3, (uint64_t)sys);
		n += put_field(b + n, 4, (uint64_t)file);
		n += put_field(b + n, 5, (uint64_t)lv->start_line);
		if (put_message(&w->sec_func, 5, b, n))
			return -ENOMEM;
		w->n_funcs++;
	}
	if (lv->function_id && lv->function_id < w->n_meta_func)
		w->func_out[lv->function_id] = idx + 1;
	return idx + 1;
}

/* The output id of metastore location id (described and written when new). */
static int64_t out_location(struct writer *w, uint32_t id)
{
	struct store_location_view lv;
	uint64_t key[2 + 3 * 256];
	int64_t map = 0;
	size_t nk = 2;

	if (w->loc_out[id])
		return w->loc_out[id];
	merge_describe_location(&w->d, id, &lv);
	if (lv.mapping) {
		map = out_mapping(w, lv.mapping);
		if (map < 0)
			return -ENOMEM;
	}
	key[0] = (uint64_t)map;
	key[1] = lv.address;
	for (size_t i = 0; i < lv.n_lines; i++) {
		int64_t f = out_function(w, &lv.lines[i]);
		if (f < 0)
			return -ENOMEM;
		key[nk++] = (uint64_t)f;
		key[nk++] = (uint64_t)lv.lines[i].line;
		key[nk++] = 0; /* column */
	}
	uint32_t idx;
	int rc = ctab_intern(&w->locs, XXH3_128bits(key, nk * sizeof(*key)), w->n_locs, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		struct buf *b = &w->body;
		buf_reset(b);
		if (buf_reserve(b, 40 + lv.n_lines * 40))
			return -ENOMEM;
		b->len += put_field(b->data + b->len, 1, idx + 1);
		b->len += put_field(b->data + b->len, 2, (uint64_t)map);
		b->len += put_field(b->data + b->len, 3, lv.address);
		for (size_t i = 0; i < lv.n_lines; i++) {
			uint8_t l[32];
			size_t n = put_field(l, 1, key[2 + 3 * i]);
			n += put_field(l + n, 2, key[3 + 3 * i]);
			b->data[b->len++] = 4 << 3 | 2;
			b->len += put_varint(b->data + b->len, n);
			memcpy(b->data + b->len, l, n);
			b->len += n;
		}
		if (put_message(&w->sec_loc, 4, b->data, b->len))
			return -ENOMEM;
		w->n_locs++;
	}
	w->loc_out[id] = idx + 1;
	return idx + 1;
}

/* The sample key of stack stk into w->key (its output location ids, with
 * any location new so far written out); its length in words or -errno. */
static int64_t stack_key(struct writer *w, const struct meta_stack *stk, uint32_t st,
			 struct kiln_error *err)
{
	if (stk->n + 1 > w->cap_key) {
		uint64_t *k = realloc(w->key, (stk->n + 1) * sizeof(*k));
		if (!k)
			return kiln_error_set(err, ENOMEM, "out of memory");
		w->key = k;
		w->cap_key = stk->n + 1;
	}
	w->key[0] = stk->n;
	for (uint32_t j = 0; j < stk->n; j++) {
		uint32_t id = stk->locs[j];
		if (id == 0 || id >= w->n_meta_loc)
			return kiln_error_set(err, EIO, "merge: stack %u names location %u of %zu",
					      st, id, w->n_meta_loc);
		int64_t o = out_location(w, id);
		if (o < 0)
			return kiln_error_set(err, ENOMEM, "out of memory");
		w->key[1 + j] = (uint64_t)o;
	}
	return stk->n + 1;
}

/* ---- pass 2: the message ---------------------------------------------------- */

static int write_value_type(struct sink *k, unsigned field, int64_t type, int64_t unit)
{
	uint8_t b[32], h[8];
	size_t n = put_field(b, 1, (uint64_t)type);
	n += put_field(b + n, 2, (uint64_t)unit);
	size_t nh = put_varint(h, (uint64_t)field << 3 | 2);
	nh += put_varint(h + nh, n);
	return sink_write(k, h, nh) || sink_write(k, b, n) ? -ENOMEM : 0;
}

static int write_sample(struct writer *w, struct sink *k, const uint64_t *ids, size_t n,
			int64_t value)
{
	struct buf *b = &w->body;
	size_t ids_len = 0;
	uint8_t tmp[10];

	for (size_t i = 0; i < n; i++)
		ids_len += put_varint(tmp, ids[i]);
	buf_reset(b);
	if (buf_reserve(b, ids_len + 40))
		return -ENOMEM;
	if (n) {
		b->data[b->len++] = 1 << 3 | 2;
		b->len += put_varint(b->data + b->len, ids_len);
		for (size_t i = 0; i < n; i++)
			b->len += put_varint(b->data + b->len, ids[i]);
	}
	size_t vl = put_varint(tmp, (uint64_t)value);
	b->data[b->len++] = 2 << 3 | 2;
	b->len += put_varint(b->data + b->len, vl);
	memcpy(b->data + b->len, tmp, vl);
	b->len += vl;
	uint8_t h[16];
	size_t nh = put_varint(h, 2 << 3 | 2);
	nh += put_varint(h + nh, b->len);
	return sink_write(k, h, nh) || sink_write(k, b->data, b->len) ? -ENOMEM : 0;
}

/* Writes a section and frees it (the big ones go to zlib without a copy). */
static int write_section(struct sink *k, struct buf *sec)
{
	int rc = sink_write(k, sec->data, sec->len);
	buf_free(sec);
	return rc;
}

static void writer_free(struct writer *w)
{
	free(w->loc_out);
	free(w->func_out);
	free(w->map_out);
	free(w->strs.s);
	free(w->maps.s);
	free(w->funcs.s);
	free(w->locs.s);
	free(w->samples.s);
	buf_free(&w->sec_map);
	buf_free(&w->sec_loc);
	buf_free(&w->sec_func);
	buf_free(&w->sec_str);
	buf_free(&w->body);
	free(w->key);
}

int store_merge_pprof(struct store *s, const struct store_selector *sel, bool gzip, struct buf *out,
		      struct store_pprof_result *res, struct kiln_error *err)
{
	struct merge_agg a;
	struct writer *w = NULL;
	struct sink *k = NULL;
	uint8_t *skip = NULL;
	uint32_t first = 0;
	size_t out_len0 = out->len, n_samples = 0;
	int64_t total = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = merge_aggregate(s, sel, &a, &first, err);
	if (rc || !a.n_touched)
		goto out;
	symbolize_merge_locations(s, &a);
	w = calloc(1, sizeof(*w));
	k = calloc(1, sizeof(*k));
	skip = calloc(a.n_touched, 1);
	if (!w || !k || !skip)
		goto oom;
	w->s = s;
	w->m = &s->meta;
	w->d.s = s;
	w->n_meta_loc = chunked_count(&s->meta.locations);
	w->n_meta_func = chunked_count(&s->meta.functions);
	w->n_meta_map = chunked_count(&s->meta.mappings);
	w->loc_out = calloc(w->n_meta_loc + 1, sizeof(uint32_t));
	w->func_out = calloc(w->n_meta_func + 1, sizeof(uint32_t));
	w->map_out = calloc(w->n_meta_map + 1, sizeof(uint32_t));
	if (!w->loc_out || !w->func_out || !w->map_out)
		goto oom;

	/* The builder's order: "", the sample type, the period type. */
	const struct series *se = series_at(&s->sx, first);
	int64_t empty = intern_str(w, "");
	int64_t st_type = intern_str(w, se->sample_type), st_unit = intern_str(w, se->sample_unit);
	int64_t pt_type = intern_str(w, se->period_type), pt_unit = intern_str(w, se->period_unit);
	if (empty < 0 || st_type < 0 || st_unit < 0 || pt_type < 0 || pt_unit < 0)
		goto oom;

	/* Pass 1: objects in the order first met; the stacks that become the
	 * same sample (equal output location ids) are summed into the first. */
	for (size_t t = 0; t < a.n_touched; t++) {
		uint32_t st = a.touched[t], fi;
		const struct meta_stack *stk = chunked_at(&s->meta.stacks, st);

		if (a.sum[st] == 0) {
			skip[t] = 1;
			continue;
		}
		int64_t nk = stack_key(w, stk, st, err);
		if (nk < 0) {
			rc = (int)nk;
			goto out;
		}
		int r = ctab_intern(&w->samples, XXH3_128bits(w->key, (size_t)nk * 8), (uint32_t)t,
				    &fi);
		if (r < 0)
			goto oom;
		if (r == 1) {
			uint32_t fst = a.touched[fi];
			sat_acc_i64(&a.sum[fst], a.sum[st]);
			skip[t] = 1;
		} else {
			n_samples++;
		}
	}
	if (!n_samples)
		goto out;

	/* Pass 2: the message, in field order. */
	k->out = out;
	k->gzip = gzip;
	if (write_value_type(k, 1, st_type, st_unit))
		goto oom;
	for (size_t t = 0; t < a.n_touched; t++) {
		if (skip[t])
			continue;
		uint32_t st = a.touched[t];
		const struct meta_stack *stk = chunked_at(&s->meta.stacks, st);
		for (uint32_t j = 0; j < stk->n; j++)
			w->key[j] = w->loc_out[stk->locs[j]];
		if (write_sample(w, k, w->key, stk->n, a.sum[st]))
			goto oom;
		sat_acc_i64(&total, a.sum[st]);
	}
	if (write_section(k, &w->sec_map) || write_section(k, &w->sec_loc) ||
	    write_section(k, &w->sec_func) || write_section(k, &w->sec_str))
		goto oom;
	uint8_t tail[64];
	size_t nt = put_field(tail, 9, (uint64_t)(a.min_ts * 1000000));
	nt += put_field(tail + nt, 10, (uint64_t)((a.max_ts - a.min_ts) * 1000000));
	if (sink_write(k, tail, nt) || write_value_type(k, 11, pt_type, pt_unit))
		goto oom;
	nt = put_field(tail, 12, (uint64_t)se->period);
	if (sink_write(k, tail, nt) || sink_finish(k))
		goto oom;
	res->n_samples = n_samples;
	res->total = total;
	goto out;
oom:
	rc = kiln_error_set(err, ENOMEM, "merge: out of memory");
out:
	if (k && k->streaming)
		deflateEnd(&k->z);
	if (k)
		buf_free(&k->whole);
	if (rc || !res->n_samples)
		out->len = out_len0;
	if (w)
		writer_free(w);
	free(w);
	free(k);
	free(skip);
	merge_agg_free(&a);
	return rc;
}
