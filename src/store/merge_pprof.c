/*
 * merge_pprof.c — a merge written straight out as an encoded pprof
 * (store_merge_pprof), without a pprof builder or profile object.
 *
 * The builder path (store_merge, then pprof_builder_to_profile or _encode)
 * holds the merged profile several times over: interned copies of every
 * string, function, location and stack with hash tables keyed by copies of
 * their bytes, a deep-copied profile with its id tables, the serialized
 * message, then its gzip: for a merge of everything, several times the
 * size of the store's own tables. Here each object is read from the
 * metastore when first met, deduplicated by a 128-bit hash of its content
 * (the store's fp_tab: no copy of the key), and appended already encoded to
 * its section of the message by pprof's streamed encoder (pprof.h,
 * pprof_put_*). Pass 1 walks the stacks and fills the mapping, location,
 * function and string sections and finds the stacks that are the same
 * sample; pass 2 writes the message in field order through a pprof_stream
 * — sample types, samples (encoded on the fly), the four sections (each
 * freed once written), then the scalars — which compresses it as
 * pprof_encode does (so the gzip bytes are the builder path's too).
 *
 * Ids and order are those the builder gives (objects numbered in the order
 * first met, strings interned in the same call order, equal content merged),
 * so the uncompressed bytes equal pprof_builder_encode's for the same merge
 * (tests/query/test_merge_pprof.c checks it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/satadd.h"
#include "pprof/pprof.h"
#include "store/internal.h"

/* Content hash -> output id, with the store's 128-bit table (fp_tab.c):
 * 1 found, 0 new (fresh stored), -ENOMEM. */
static int content_intern(struct fp_tab *t, XXH128_hash_t h, uint32_t fresh, uint32_t *id)
{
	return fp_tab_intern(t, h.low64, h.high64, fresh, id);
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
	struct fp_tab strs, maps, funcs, locs, samples;
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
	int rc = content_intern(&w->strs, XXH3_128bits(str ? str : "", len), w->n_strs, &id);

	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		if (pprof_put_string(&w->sec_str, str, len))
			return -ENOMEM;
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
	int rc = content_intern(&w->maps, XXH3_128bits(key, sizeof(key)), w->n_maps, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		if (pprof_put_mapping(&w->sec_map, idx + 1, mv->memory_start, mv->memory_limit,
				      mv->file_offset, fn, bid, mv->flags))
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
	int rc = content_intern(&w->funcs, XXH3_128bits(key, sizeof(key)), w->n_funcs, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		if (pprof_put_function(&w->sec_func, idx + 1, name, sys, file, lv->start_line))
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
	int rc = content_intern(&w->locs, XXH3_128bits(key, nk * sizeof(*key)), w->n_locs, &idx);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0) {
		if (pprof_put_location(&w->sec_loc, &w->body, idx + 1, (uint64_t)map, lv.address,
				       key + 2, lv.n_lines))
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

/* Writes a section and frees it (the big ones go to zlib without a copy). */
static int write_section(struct pprof_stream *k, struct buf *sec)
{
	int rc = pprof_stream_bytes(k, sec->data, sec->len);
	buf_free(sec);
	return rc;
}

static void writer_free(struct writer *w)
{
	free(w->loc_out);
	free(w->func_out);
	free(w->map_out);
	fp_tab_free(&w->strs);
	fp_tab_free(&w->maps);
	fp_tab_free(&w->funcs);
	fp_tab_free(&w->locs);
	fp_tab_free(&w->samples);
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
	struct pprof_stream *k = NULL;
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
	skip = calloc(a.n_touched, 1);
	if (!w || !skip)
		goto oom;
	w->s = s;
	w->m = &s->meta;
	w->strs.dense = w->maps.dense = w->funcs.dense = w->locs.dense = w->samples.dense = true;
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
		int r = content_intern(&w->samples, XXH3_128bits(w->key, (size_t)nk * 8),
				       (uint32_t)t, &fi);
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
	k = pprof_stream_new(out, gzip);
	if (!k || pprof_stream_sample_type(k, st_type, st_unit))
		goto oom;
	for (size_t t = 0; t < a.n_touched; t++) {
		if (skip[t])
			continue;
		uint32_t st = a.touched[t];
		const struct meta_stack *stk = chunked_at(&s->meta.stacks, st);
		for (uint32_t j = 0; j < stk->n; j++)
			w->key[j] = w->loc_out[stk->locs[j]];
		if (pprof_stream_sample(k, w->key, stk->n, a.sum[st]))
			goto oom;
		sat_acc_i64(&total, a.sum[st]);
	}
	if (write_section(k, &w->sec_map) || write_section(k, &w->sec_loc) ||
	    write_section(k, &w->sec_func) || write_section(k, &w->sec_str))
		goto oom;
	if (pprof_stream_time(k, a.min_ts * 1000000, (a.max_ts - a.min_ts) * 1000000) ||
	    pprof_stream_period(k, pt_type, pt_unit, se->period) || pprof_stream_finish(k))
		goto oom;
	res->n_samples = n_samples;
	res->total = total;
	goto out;
oom:
	rc = kiln_error_set(err, ENOMEM, "merge: out of memory");
out:
	pprof_stream_free(k);
	if (rc || !res->n_samples)
		out->len = out_len0;
	if (w)
		writer_free(w);
	free(w);
	free(skip);
	merge_agg_free(&a);
	return rc;
}
