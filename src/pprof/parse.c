/*
 * parse.c — protobuf bytes to a Profile message, written for pprof's schema.
 *
 * protobuf-c's generic unpacker manages about 25 MB/s on a real 20 MB CPU
 * profile (descriptor lookups and one allocation per submessage); this one
 * does over 10x that. It fills the same protobuf-c structs, so everything
 * downstream (validation, pprof_encode, callers reading the message) is
 * unchanged. A message is read twice: a counting pass sizes its repeated
 * fields, then a filling pass stores them into exactly sized arrays in the
 * arena (structs of one kind in one block). Samples and locations, most of
 * a profile, are read in one pass when laid out as producers write them
 * (short packed scalars once each, a few labels or lines): decoded on the
 * stack, then copied into one exactly sized block. Unknown fields are skipped,
 * packed and unpacked repeated scalars are both accepted, and a known field
 * with the wrong wire type is an error, as in protobuf-c. Errors name the
 * byte offset and the element ("sample[3]").
 */
#include "pprof/internal.h"
#include "pprof/wire.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

struct parse {
	struct arena *a;
	const uint8_t *base;
	uint8_t *mut; /* base, writable: strings are terminated in place */
	struct kiln_error *err;
};

/* i == SIZE_MAX: what is not an array element. */
static int malformed(struct parse *ps, const struct wire *w, const char *what, size_t i)
{
	size_t at = (size_t)(w->p - ps->base);

	if (i == SIZE_MAX)
		return kiln_error_set(
		    ps->err, EBADMSG,
		    "malformed protobuf in %s near byte %zu (truncated or corrupt)", what, at);
	return kiln_error_set(ps->err, EBADMSG,
			      "malformed protobuf in %s[%zu] near byte %zu (truncated or corrupt)",
			      what, i, at);
}

static int oom(struct parse *ps)
{
	return kiln_error_set(ps->err, ENOMEM, "out of memory decoding the profile");
}

/* Counts a repeated scalar occurrence: packed (LEN) or single (VARINT). */
static bool count_scalars(struct wire *w, uint32_t type, size_t *n)
{
	struct wire sub = {0};

	if (type == WIRE_VARINT) {
		uint64_t v;

		(*n)++;
		return wire_varint(w, &v);
	}
	if (type != WIRE_LEN || !wire_bytes(w, &sub))
		return false;
	*n += wire_count_varints(&sub);
	return true;
}

/* Reads a repeated scalar occurrence into arr[*n...]. The counting pass saw
 * the same bytes, so arr has room (see wire_packed_varints); cap is checked
 * for the unpacked form only, as a guard. */
static bool read_scalars(struct wire *w, uint32_t type, uint64_t *arr, size_t *n, size_t cap)
{
	struct wire sub = {0};
	long got;

	if (type == WIRE_VARINT)
		return *n < cap && wire_varint(w, &arr[(*n)++]);
	if (!wire_bytes(w, &sub))
		return false;
	/* No array means the counting pass found no complete varint in this
	 * field: only an empty payload is well-formed (and arr + *n on NULL
	 * would be undefined; found by fuzz_query_tree). */
	if (!arr)
		return sub.p == sub.end;
	got = wire_packed_varints(sub, arr + *n);
	if (got < 0)
		return false;
	*n += (size_t)got;
	return *n <= cap;
}

/* Reads a varint field into *v, checking the wire type. */
static inline bool read_varint(struct wire *w, uint32_t type, uint64_t *v)
{
	return type == WIRE_VARINT && wire_varint(w, v);
}

static int parse_value_type(struct parse *ps, struct wire w, Perftools__Profiles__ValueType *vt,
			    const char *what, size_t i)
{
	uint32_t f = 0, t = 0;
	uint64_t v = 0;

	*vt = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, what, i);
		if (f == 1 || f == 2) {
			if (!read_varint(&w, t, &v))
				return malformed(ps, &w, what, i);
			if (f == 1)
				vt->type = (int64_t)v;
			else
				vt->unit = (int64_t)v;
		} else if (!wire_skip(&w, t)) {
			return malformed(ps, &w, what, i);
		}
	}
	return 0;
}

static int parse_label(struct parse *ps, struct wire w, Perftools__Profiles__Label *l, size_t i)
{
	uint32_t f = 0, t = 0;
	uint64_t v = 0;

	*l = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "sample", i);
		if (f >= 1 && f <= 4) {
			if (!read_varint(&w, t, &v))
				return malformed(ps, &w, "sample", i);
			if (f == 1)
				l->key = (int64_t)v;
			else if (f == 2)
				l->str = (int64_t)v;
			else if (f == 3)
				l->num = (int64_t)v;
			else
				l->num_unit = (int64_t)v;
		} else if (!wire_skip(&w, t)) {
			return malformed(ps, &w, "sample", i);
		}
	}
	return 0;
}

/* Any layout of a sample: a counting pass, then a filling pass. */
static int parse_sample_general(struct parse *ps, struct wire w, pprof_sample_msg *s, size_t i)
{
	struct wire start = w, sub = {0};
	size_t n_loc = 0, n_val = 0, n_lab = 0, il = 0, iv = 0, ib = 0;
	Perftools__Profiles__Label *labels = NULL;
	uint32_t f = 0, t = 0;
	int rc;

	*s = (pprof_sample_msg)PERFTOOLS__PROFILES__SAMPLE__INIT;
	while (w.p < w.end) {
		bool ok;

		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "sample", i);
		if (f == 1)
			ok = count_scalars(&w, t, &n_loc);
		else if (f == 2)
			ok = count_scalars(&w, t, &n_val);
		else if (f == 3)
			ok = t == WIRE_LEN && wire_bytes(&w, &sub) && ++n_lab;
		else
			ok = wire_skip(&w, t);
		if (!ok)
			return malformed(ps, &w, "sample", i);
	}
	/* One block for the scalars, one for the labels. */
	if (n_loc + n_val) {
		uint64_t *block = arena_alloc(ps->a, (n_loc + n_val) * sizeof(uint64_t));

		if (!block)
			return oom(ps);
		s->location_id = block;
		s->value = (int64_t *)(block + n_loc);
	}
	if (n_lab) {
		labels = arena_alloc(ps->a, n_lab * sizeof(*labels));
		s->label = arena_alloc(ps->a, n_lab * sizeof(*s->label));
		if (!labels || !s->label)
			return oom(ps);
	}
	w = start;
	while (w.p < w.end) {
		bool ok = true;

		wire_key(&w, &f, &t);
		if (f == 1) {
			ok = read_scalars(&w, t, s->location_id, &il, n_loc);
		} else if (f == 2) {
			ok = read_scalars(&w, t, (uint64_t *)s->value, &iv, n_val);
		} else if (f == 3) {
			wire_bytes(&w, &sub);
			rc = parse_label(ps, sub, &labels[ib], i);
			if (rc)
				return rc;
			s->label[ib] = &labels[ib];
			ib++;
		} else {
			wire_skip(&w, t);
		}
		if (!ok)
			return malformed(ps, &w, "sample", i);
	}
	if (il != n_loc || iv != n_val)
		return malformed(ps, &w, "sample", i);
	s->n_location_id = n_loc;
	s->n_value = n_val;
	s->n_label = n_lab;
	return 0;
}

/* Labels and lines that the one-pass parsers below hold on the stack: Go
 * writes one label per allocs sample and none per CPU sample, one line per
 * location unless frames were inlined. More take the general path. */
#define ONE_PASS_LABELS 4
#define ONE_PASS_LINES	8
/* Bytes of a packed field that the one-pass sample parser decodes on the
 * stack (a varint takes at least one byte: at most this many values; Go's
 * stacks of 64 frames with two-byte ids fit). Longer fields take the
 * general path. */
#define ONE_PASS_PACKED 128

/* A sample in one pass, in the layout every producer writes: location_id
 * and value packed, at most ONE_PASS_PACKED bytes and once each, at most
 * ONE_PASS_LABELS labels. Everything is decoded on the stack, then copied
 * into one block of the arena (ids, values, labels, pointers to the
 * labels), so a sample costs one allocation and no counting pass. Returns
 * through parse_sample_general, having kept nothing, when the sample is
 * laid out otherwise; what is malformed is an error in either parser. */
static int parse_sample(struct parse *ps, struct wire w, pprof_sample_msg *s, size_t i)
{
	Perftools__Profiles__Label labels[ONE_PASS_LABELS];
	uint64_t locs[ONE_PASS_PACKED], vals[ONE_PASS_PACKED];
	bool seen_loc = false, seen_val = false;
	struct wire start = w, sub = {0};
	size_t n_loc = 0, n_val = 0, n_lab = 0;
	uint32_t f = 0, t = 0;
	int rc;

	*s = (pprof_sample_msg)PERFTOOLS__PROFILES__SAMPLE__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "sample", i);
		if ((f == 1 && (seen_loc || t != WIRE_LEN)) ||
		    (f == 2 && (seen_val || t != WIRE_LEN)) || (f == 3 && n_lab == ONE_PASS_LABELS))
			return parse_sample_general(ps, start, s, i);
		if (f == 1 || f == 2) {
			long got;

			if (!wire_bytes(&w, &sub))
				return malformed(ps, &w, "sample", i);
			if (sub.end - sub.p > ONE_PASS_PACKED)
				return parse_sample_general(ps, start, s, i);
			got = wire_packed_varints(sub, f == 1 ? locs : vals);
			if (got < 0)
				return malformed(ps, &w, "sample", i);
			if (f == 1) {
				seen_loc = true;
				n_loc = (size_t)got;
			} else {
				seen_val = true;
				n_val = (size_t)got;
			}
		} else if (f == 3) {
			if (t != WIRE_LEN || !wire_bytes(&w, &sub))
				return malformed(ps, &w, "sample", i);
			rc = parse_label(ps, sub, &labels[n_lab++], i);
			if (rc)
				return rc;
		} else if (!wire_skip(&w, t)) {
			return malformed(ps, &w, "sample", i);
		}
	}
	if (n_loc + n_val + n_lab == 0)
		return 0;
	uint64_t *block = arena_alloc(ps->a, (n_loc + n_val) * sizeof(uint64_t) +
						 n_lab * (sizeof(*labels) + sizeof(*s->label)));
	if (!block)
		return oom(ps);
	if (n_loc) {
		s->location_id = block;
		s->n_location_id = n_loc;
		memcpy(block, locs, n_loc * sizeof(uint64_t));
	}
	if (n_val) {
		s->value = (int64_t *)block + n_loc;
		s->n_value = n_val;
		memcpy(s->value, vals, n_val * sizeof(uint64_t));
	}
	if (n_lab) {
		Perftools__Profiles__Label *copy =
		    (Perftools__Profiles__Label *)(block + n_loc + n_val);

		s->label = (Perftools__Profiles__Label **)(copy + n_lab);
		memcpy(copy, labels, n_lab * sizeof(*labels));
		for (size_t k = 0; k < n_lab; k++)
			s->label[k] = &copy[k];
		s->n_label = n_lab;
	}
	return 0;
}

static int parse_mapping(struct parse *ps, struct wire w, pprof_mapping_msg *m, size_t i)
{
	uint32_t f = 0, t = 0;
	uint64_t v = 0;

	*m = (pprof_mapping_msg)PERFTOOLS__PROFILES__MAPPING__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "mapping", i);
		if (f < 1 || f > 10) {
			if (!wire_skip(&w, t))
				return malformed(ps, &w, "mapping", i);
			continue;
		}
		if (!read_varint(&w, t, &v))
			return malformed(ps, &w, "mapping", i);
		switch (f) {
		case 1:
			m->id = v;
			break;
		case 2:
			m->memory_start = v;
			break;
		case 3:
			m->memory_limit = v;
			break;
		case 4:
			m->file_offset = v;
			break;
		case 5:
			m->filename = (int64_t)v;
			break;
		case 6:
			m->build_id = (int64_t)v;
			break;
		case 7:
			m->has_functions = v != 0;
			break;
		case 8:
			m->has_filenames = v != 0;
			break;
		case 9:
			m->has_line_numbers = v != 0;
			break;
		default:
			m->has_inline_frames = v != 0;
			break;
		}
	}
	return 0;
}

static int parse_function(struct parse *ps, struct wire w, pprof_function_msg *fn, size_t i)
{
	uint32_t f = 0, t = 0;
	uint64_t v = 0;

	*fn = (pprof_function_msg)PERFTOOLS__PROFILES__FUNCTION__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "function", i);
		if (f < 1 || f > 5) {
			if (!wire_skip(&w, t))
				return malformed(ps, &w, "function", i);
			continue;
		}
		if (!read_varint(&w, t, &v))
			return malformed(ps, &w, "function", i);
		switch (f) {
		case 1:
			fn->id = v;
			break;
		case 2:
			fn->name = (int64_t)v;
			break;
		case 3:
			fn->system_name = (int64_t)v;
			break;
		case 4:
			fn->filename = (int64_t)v;
			break;
		default:
			fn->start_line = (int64_t)v;
			break;
		}
	}
	return 0;
}

static int parse_line(struct parse *ps, struct wire w, Perftools__Profiles__Line *l, size_t i)
{
	uint32_t f = 0, t = 0;
	uint64_t v = 0;

	*l = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "location", i);
		if (f >= 1 && f <= 3) {
			if (!read_varint(&w, t, &v))
				return malformed(ps, &w, "location", i);
			if (f == 1)
				l->function_id = v;
			else if (f == 2)
				l->line = (int64_t)v;
			else
				l->column = (int64_t)v;
		} else if (!wire_skip(&w, t)) {
			return malformed(ps, &w, "location", i);
		}
	}
	return 0;
}

/* A location's scalar fields (id, mapping_id, address, is_folded) are read
 * into l; any other field but the lines (4, the caller's) is skipped. */
static bool location_scalar(struct wire *w, uint32_t f, uint32_t t, pprof_location_msg *l)
{
	uint64_t v = 0;

	if (f != 1 && f != 2 && f != 3 && f != 5)
		return wire_skip(w, t);
	if (!read_varint(w, t, &v))
		return false;
	if (f == 1)
		l->id = v;
	else if (f == 2)
		l->mapping_id = v;
	else if (f == 3)
		l->address = v;
	else
		l->is_folded = v != 0;
	return true;
}

/* Any number of lines: the scalars and a count, then the lines. */
static int parse_location_general(struct parse *ps, struct wire w, pprof_location_msg *l, size_t i)
{
	struct wire start = w, sub = {0};
	Perftools__Profiles__Line *lines = NULL;
	size_t n_line = 0, k = 0;
	uint32_t f = 0, t = 0;
	int rc;

	*l = (pprof_location_msg)PERFTOOLS__PROFILES__LOCATION__INIT;
	while (w.p < w.end) {
		bool ok;

		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "location", i);
		if (f == 4)
			ok = t == WIRE_LEN && wire_bytes(&w, &sub) && ++n_line;
		else
			ok = location_scalar(&w, f, t, l);
		if (!ok)
			return malformed(ps, &w, "location", i);
	}
	if (!n_line)
		return 0;
	lines = arena_alloc(ps->a, n_line * sizeof(*lines));
	l->line = arena_alloc(ps->a, n_line * sizeof(*l->line));
	if (!lines || !l->line)
		return oom(ps);
	w = start;
	while (w.p < w.end) {
		wire_key(&w, &f, &t);
		if (f != 4) {
			wire_skip(&w, t);
			continue;
		}
		wire_bytes(&w, &sub);
		rc = parse_line(ps, sub, &lines[k], i);
		if (rc)
			return rc;
		l->line[k] = &lines[k];
		k++;
	}
	l->n_line = n_line;
	return 0;
}

/* A location with at most ONE_PASS_LINES lines in one pass (the lines are
 * held on the stack until their number is known); more take
 * parse_location_general. */
static int parse_location(struct parse *ps, struct wire w, pprof_location_msg *l, size_t i)
{
	Perftools__Profiles__Line lines[ONE_PASS_LINES];
	struct wire start = w, sub = {0};
	size_t n_line = 0;
	uint32_t f = 0, t = 0;
	int rc;

	*l = (pprof_location_msg)PERFTOOLS__PROFILES__LOCATION__INIT;
	while (w.p < w.end) {
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "location", i);
		if (f == 4) {
			if (n_line == ONE_PASS_LINES)
				return parse_location_general(ps, start, l, i);
			if (t != WIRE_LEN || !wire_bytes(&w, &sub))
				return malformed(ps, &w, "location", i);
			rc = parse_line(ps, sub, &lines[n_line++], i);
			if (rc)
				return rc;
			continue;
		}
		if (!location_scalar(&w, f, t, l))
			return malformed(ps, &w, "location", i);
	}
	if (n_line) {
		/* The lines and the pointers to them in one block. */
		Perftools__Profiles__Line **ptrs =
		    arena_alloc(ps->a, n_line * (sizeof(*ptrs) + sizeof(*lines)));
		Perftools__Profiles__Line *copy;

		if (!ptrs)
			return oom(ps);
		copy = (Perftools__Profiles__Line *)(ptrs + n_line);
		memcpy(copy, lines, n_line * sizeof(*lines));
		for (size_t k = 0; k < n_line; k++)
			ptrs[k] = &copy[k];
		l->line = ptrs;
		l->n_line = n_line;
	}
	return 0;
}

/* Allocates n structs of size and a pointer array over them. */
static void **alloc_items(struct parse *ps, size_t n, size_t size)
{
	void **ptrs;
	char *items;

	if (n == 0)
		return NULL;
	ptrs = arena_alloc(ps->a, n * sizeof(void *));
	items = arena_alloc(ps->a, n * size);
	if (!ptrs || !items)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ptrs[i] = items + i * size;
	return ptrs;
}

struct top_counts {
	size_t sample_type, sample, mapping, location, function, string, comment;
};

static int count_top(struct parse *ps, struct wire w, struct top_counts *c)
{
	struct wire sub = {0};
	uint32_t f = 0, t = 0;
	size_t n[7] = {0}; /* by field: 1..6 are the repeated messages and strings */

	memset(c, 0, sizeof(*c));
	while (w.p < w.end) {
		bool ok;

		/* Nearly every field: a one-byte key of field 1..6 with a
		 * one-byte length (under 128 bytes), counted and skipped
		 * without the general decoding below. */
		if (w.end - w.p >= 2 && (w.p[0] & 7) == WIRE_LEN && w.p[0] >= (1 << 3) &&
		    w.p[0] < (7 << 3) && w.p[1] < 0x80) {
			size_t len = w.p[1];

			n[w.p[0] >> 3]++;
			w.p += 2;
			if (len > (size_t)(w.end - w.p))
				return malformed(ps, &w, "profile", SIZE_MAX);
			w.p += len;
			continue;
		}
		if (!wire_key(&w, &f, &t))
			return malformed(ps, &w, "profile", SIZE_MAX);
		if (f >= 1 && f <= 6) {
			ok = t == WIRE_LEN && wire_bytes(&w, &sub);
			n[f]++;
		} else if (f == 13) {
			ok = count_scalars(&w, t, &c->comment);
		} else if (f == 11) {
			ok = t == WIRE_LEN && wire_bytes(&w, &sub);
		} else if (f >= 7 && f <= 15) {
			uint64_t v;

			ok = read_varint(&w, t, &v);
		} else {
			ok = wire_skip(&w, t);
		}
		if (!ok)
			return malformed(ps, &w, "profile", SIZE_MAX);
	}
	c->sample_type = n[1];
	c->sample = n[2];
	c->mapping = n[3];
	c->location = n[4];
	c->function = n[5];
	c->string = n[6];
	return 0;
}

static int fill_top(struct parse *ps, struct wire w, pprof_msg *m, const struct top_counts *c)
{
	size_t ist = 0, is = 0, imp = 0, il = 0, ifn = 0, istr = 0, ic = 0;
	struct wire sub = {0};
	uint32_t f = 0, t = 0;
	uint64_t v = 0;
	uint8_t *nul = NULL; /* where the last string read ends */
	int rc = 0;

	while (w.p < w.end) {
		wire_key(&w, &f, &t);
		/* The byte after the previous string is this field's key, which
		 * has just been read and is not needed again. */
		if (nul) {
			*nul = 0;
			nul = NULL;
		}
		switch (f) {
		case 1:
			wire_bytes(&w, &sub);
			rc = parse_value_type(ps, sub, m->sample_type[ist], "sample_type", ist);
			ist++;
			break;
		case 2:
			wire_bytes(&w, &sub);
			rc = parse_sample(ps, sub, m->sample[is], is);
			is++;
			break;
		case 3:
			wire_bytes(&w, &sub);
			rc = parse_mapping(ps, sub, m->mapping[imp], imp);
			imp++;
			break;
		case 4:
			wire_bytes(&w, &sub);
			rc = parse_location(ps, sub, m->location[il], il);
			il++;
			break;
		case 5:
			wire_bytes(&w, &sub);
			rc = parse_function(ps, sub, m->function[ifn], ifn);
			ifn++;
			break;
		case 6:
			wire_bytes(&w, &sub);
			m->string_table[istr++] = (char *)ps->mut + (sub.p - ps->base);
			nul = ps->mut + (sub.end - ps->base);
			break;
		case 11:
			wire_bytes(&w, &sub);
			m->period_type = arena_alloc(ps->a, sizeof(*m->period_type));
			rc = m->period_type ? parse_value_type(ps, sub, m->period_type,
							       "period_type", SIZE_MAX)
					    : oom(ps);
			break;
		case 13:
			if (!read_scalars(&w, t, (uint64_t *)m->comment, &ic, c->comment))
				rc = malformed(ps, &w, "comment", ic);
			break;
		default:
			if (f >= 7 && f <= 15) {
				wire_varint(&w, &v);
				if (f == 7)
					m->drop_frames = (int64_t)v;
				else if (f == 8)
					m->keep_frames = (int64_t)v;
				else if (f == 9)
					m->time_nanos = (int64_t)v;
				else if (f == 10)
					m->duration_nanos = (int64_t)v;
				else if (f == 12)
					m->period = (int64_t)v;
				else if (f == 14)
					m->default_sample_type = (int64_t)v;
				else
					m->doc_url = (int64_t)v;
			} else {
				wire_skip(&w, t);
			}
		}
		if (rc)
			return rc;
	}
	if (nul)
		*nul = 0; /* a string at the very end: data[len] */
	return 0;
}

int pprof_parse(struct arena *a, uint8_t *data, size_t len, pprof_msg **out, struct kiln_error *err)
{
	struct parse ps = {.a = a, .base = data, .mut = data, .err = err};
	struct wire w = {.p = data, .end = data + len};
	struct top_counts c;
	pprof_msg *m;
	int rc;

	rc = count_top(&ps, w, &c);
	if (rc)
		return rc;
	m = arena_alloc(a, sizeof(*m));
	if (!m)
		return oom(&ps);
	*m = (pprof_msg)PERFTOOLS__PROFILES__PROFILE__INIT;
	m->n_sample_type = c.sample_type;
	m->n_sample = c.sample;
	m->n_mapping = c.mapping;
	m->n_location = c.location;
	m->n_function = c.function;
	m->n_string_table = c.string;
	m->n_comment = c.comment;
	m->sample_type = (Perftools__Profiles__ValueType **)alloc_items(
	    &ps, c.sample_type, sizeof(Perftools__Profiles__ValueType));
	m->sample = (pprof_sample_msg **)alloc_items(&ps, c.sample, sizeof(pprof_sample_msg));
	m->mapping = (pprof_mapping_msg **)alloc_items(&ps, c.mapping, sizeof(pprof_mapping_msg));
	m->location =
	    (pprof_location_msg **)alloc_items(&ps, c.location, sizeof(pprof_location_msg));
	m->function =
	    (pprof_function_msg **)alloc_items(&ps, c.function, sizeof(pprof_function_msg));
	m->string_table = c.string ? arena_alloc(a, c.string * sizeof(char *)) : NULL;
	m->comment = c.comment ? arena_alloc(a, c.comment * sizeof(int64_t)) : NULL;
	if ((c.sample_type && !m->sample_type) || (c.sample && !m->sample) ||
	    (c.mapping && !m->mapping) || (c.location && !m->location) ||
	    (c.function && !m->function) || (c.string && !m->string_table) ||
	    (c.comment && !m->comment))
		return oom(&ps);
	rc = fill_top(&ps, w, m, &c);
	if (rc)
		return rc;
	*out = m;
	return 0;
}
