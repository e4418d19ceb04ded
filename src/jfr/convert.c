/*
 * convert.c — the profiling events of a JFR recording into pprof profiles
 * (see jfr.h for which events make which profile).
 *
 * Per chunk, the event classes are found by name and their fields by name,
 * so a recording from another JDK or from async-profiler, whose events have
 * more or fewer fields, reads the same. A stack trace is a constant-pool
 * entry: its frames name a method (constant pool: its class and name, each
 * a symbol) and a line. Frame names are cached per chunk by method key, as
 * the same few hundred methods make up most stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfr/internal.h"
#include "pprof/pprof.h"

#define MAX_FRAMES 2048

static const struct {
	const char *metric;
	const char *types[2][2]; /* sample types: {type, unit} */
	const char *period[2];
} kinds[JFR_N_KINDS] = {
    [JFR_CPU] = {"process_cpu",
		 {{"samples", "count"}, {"cpu", "nanoseconds"}},
		 {"cpu", "nanoseconds"}},
    [JFR_ALLOC] = {"memory",
		   {{"alloc_objects", "count"}, {"alloc_space", "bytes"}},
		   {"space", "bytes"}},
    [JFR_LOCK] = {"mutex",
		  {{"contentions", "count"}, {"delay", "nanoseconds"}},
		  {"contentions", "count"}},
};

/* Which events, of which kind, and which field holds the second value. */
static const struct {
	const char *event;
	enum jfr_kind kind;
	const char *weight; /* NULL: the CPU period; "duration": ticks */
} wanted[] = {
    {"jdk.ExecutionSample", JFR_CPU, NULL},
    {"jdk.ObjectAllocationSample", JFR_ALLOC, "weight"},
    {"jdk.ObjectAllocationInNewTLAB", JFR_ALLOC, "tlabSize"},
    {"jdk.ObjectAllocationOutsideTLAB", JFR_ALLOC, "allocationSize"},
    {"jdk.JavaMonitorEnter", JFR_LOCK, "duration"},
    {"jdk.ThreadPark", JFR_LOCK, "duration"},
};
#define N_WANTED (sizeof(wanted) / sizeof(wanted[0]))

const char *jfr_kind_metric(enum jfr_kind k)
{
	return (unsigned)k < JFR_N_KINDS ? kinds[k].metric : "";
}

struct convert {
	struct pprof_builder *b[JFR_N_KINDS];
	struct jfr_profiles *out;
	const struct jfr_options *o;
	int64_t period_ns;
	size_t events;
	int64_t first_nanos, last_nanos;
	/* per chunk */
	const struct jfr_class *classes[N_WANTED];
	int stack_field[N_WANTED], weight_field[N_WANTED];
	struct htab *names; /* method key -> frame name (in the chunk's arena) */
	uint64_t stack[MAX_FRAMES];
};

static struct pprof_builder *builder(struct convert *cv, enum jfr_kind k, struct kiln_error *err)
{
	if (cv->b[k])
		return cv->b[k];
	struct pprof_builder *b = pprof_builder_new();
	if (!b || pprof_builder_add_sample_type(b, kinds[k].types[0][0], kinds[k].types[0][1]) ||
	    pprof_builder_add_sample_type(b, kinds[k].types[1][0], kinds[k].types[1][1]) ||
	    pprof_builder_set_period(b, kinds[k].period[0], kinds[k].period[1],
				     k == JFR_CPU ? cv->period_ns : 1)) {
		pprof_builder_free(b);
		kiln_error_set(err, ENOMEM, "jfr: out of memory");
		return NULL;
	}
	return cv->b[k] = b;
}

/* The text of a symbol-typed field of an object read into vals. */
static int symbol_text(struct jfr_chunk *c, const struct jfr_class *cls,
		       const struct jfr_value *vals, const char *field, const char **out)
{
	int f = jfr_field_index(cls, field);
	*out = "";
	if (f < 0)
		return 0;
	const struct jfr_field *fd = &cls->fields[f];
	const struct jfr_class *t = jfr_class_by_id(c, fd->type_id);
	size_t pos = vals[f].pos;
	if (!t || fd->array)
		return 0;
	if (fd->cp && jfr_pool_get(c, fd->type_id, vals[f].i, &pos))
		return -EINVAL;
	if (t->prim == JFR_STRING)
		return jfr_read_string(c, &pos, out);
	/* jdk.types.Symbol: one field, "string". */
	struct jfr_value sv[JFR_MAX_FIELDS];
	int s = jfr_field_index(t, "string");
	if (s < 0 || jfr_read_object(c, t, &pos, sv))
		return s < 0 ? 0 : -EINVAL;
	pos = sv[s].pos;
	return jfr_read_string(c, &pos, out);
}

/* "package.Class.method" of a jdk.types.Method constant. */
static int method_name(struct convert *cv, struct jfr_chunk *c, const struct jfr_field *fd,
		       int64_t key, const char **out)
{
	uint64_t cached;
	if (htab_get(cv->names, &key, sizeof(key), &cached)) {
		*out = (const char *)(uintptr_t)cached;
		return 0;
	}
	const struct jfr_class *mcls = jfr_class_by_id(c, fd->type_id);
	struct jfr_value mv[JFR_MAX_FIELDS], tv[JFR_MAX_FIELDS];
	const char *cname = "", *mname = "";
	size_t pos;
	if (!mcls || jfr_pool_get(c, fd->type_id, key, &pos) ||
	    jfr_read_object(c, mcls, &pos, mv) || symbol_text(c, mcls, mv, "name", &mname))
		return -EINVAL;
	int t = jfr_field_index(mcls, "type");
	if (t >= 0 && mcls->fields[t].cp) {
		const struct jfr_class *tcls = jfr_class_by_id(c, mcls->fields[t].type_id);
		if (!tcls || jfr_pool_get(c, mcls->fields[t].type_id, mv[t].i, &pos) ||
		    jfr_read_object(c, tcls, &pos, tv) || symbol_text(c, tcls, tv, "name", &cname))
			return -EINVAL;
	}
	size_t n = strlen(cname) + strlen(mname) + 2;
	char *name = arena_alloc(c->arena, n);
	if (!name)
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	snprintf(name, n, "%s%s%s", cname, cname[0] ? "." : "", mname);
	for (char *p = name; *p; p++)
		if (*p == '/')
			*p = '.';
	if (htab_put(cv->names, &key, sizeof(key), (uint64_t)(uintptr_t)name))
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	*out = name;
	return 0;
}

/* The stack trace constant `key` (field fd's type) as builder locations,
 * leaf first, in cv->stack. */
static int stack_of(struct convert *cv, struct jfr_chunk *c, struct pprof_builder *b,
		    const struct jfr_field *fd, int64_t key, size_t *n_out)
{
	const struct jfr_class *scls = jfr_class_by_id(c, fd->type_id);
	struct jfr_value sv[JFR_MAX_FIELDS];
	size_t pos, n = 0;
	int64_t count;

	*n_out = 0;
	if (!scls || jfr_pool_get(c, fd->type_id, key, &pos) || jfr_read_object(c, scls, &pos, sv))
		return -EINVAL;
	int fr = jfr_field_index(scls, "frames");
	if (fr < 0 || !scls->fields[fr].array)
		return 0;
	const struct jfr_class *fcls = jfr_class_by_id(c, scls->fields[fr].type_id);
	int m = jfr_field_index(fcls, "method"), ln = jfr_field_index(fcls, "lineNumber");
	pos = sv[fr].pos;
	if (!fcls || m < 0 || jfr_read_int(c, &pos, &count))
		return -EINVAL;
	for (int64_t i = 0; i < count; i++) {
		struct jfr_value fv[JFR_MAX_FIELDS];
		const char *name = "";
		if (jfr_read_object(c, fcls, &pos, fv))
			return -EINVAL;
		if (n == MAX_FRAMES)
			continue; /* deeper frames are cut, as pprof's own depth limit does */
		if (!fcls->fields[m].cp)
			return kiln_error_set(c->err, EINVAL,
					      "jfr: stack frame methods are not constants");
		if (method_name(cv, c, &fcls->fields[m], fv[m].i, &name))
			return -EINVAL;
		struct pprof_line_desc line = {.function_id =
						   pprof_builder_function(b, name, name, NULL, 0),
					       .line = ln >= 0 && fv[ln].i > 0 ? fv[ln].i : 0};
		uint64_t loc = line.function_id ? pprof_builder_location(b, 0, 0, &line, 1) : 0;
		if (!loc)
			return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
		cv->stack[n++] = loc;
	}
	*n_out = n;
	return 0;
}

static int on_event(void *ctx, struct jfr_chunk *c, const struct jfr_class *cls, size_t pos)
{
	struct convert *cv = ctx;
	size_t w;
	for (w = 0; w < N_WANTED && cv->classes[w] != cls; w++)
		;
	if (w == N_WANTED)
		return 0;
	if (cv->o->max_events && ++cv->events > cv->o->max_events)
		return kiln_error_set(c->err, E2BIG, "jfr: more than %zu profiling events",
				      cv->o->max_events);
	enum jfr_kind k = wanted[w].kind;
	struct jfr_value vals[JFR_MAX_FIELDS];
	struct pprof_builder *b = builder(cv, k, c->err);
	size_t n;
	if (!b)
		return -ENOMEM;
	if (jfr_read_object(c, cls, &pos, vals))
		return -EINVAL;
	int sf = cv->stack_field[w];
	if (stack_of(cv, c, b, &cls->fields[sf], vals[sf].i, &n))
		return -EINVAL;
	int64_t v[2] = {1, cv->period_ns};
	if (wanted[w].weight) {
		int64_t x = vals[cv->weight_field[w]].i;
		if (strcmp(wanted[w].weight, "duration") == 0)
			x = (int64_t)((double)x * 1e9 / (double)c->ticks_per_second);
		v[1] = x > 0 ? x : 0;
	}
	cv->out->events[k]++;
	return pprof_builder_add_sample(b, cv->stack, n, v, NULL, 0)
		   ? kiln_error_set(c->err, ENOMEM, "jfr: out of memory")
		   : 0;
}

static int convert_chunk(struct convert *cv, struct jfr_chunk *c)
{
	int64_t duration;
	for (size_t w = 0; w < N_WANTED; w++) {
		const struct jfr_class *cls = jfr_class_by_name(c, wanted[w].event);
		cv->classes[w] = NULL;
		if (!cls)
			continue;
		cv->stack_field[w] = jfr_field_index(cls, "stackTrace");
		cv->weight_field[w] = wanted[w].weight ? jfr_field_index(cls, wanted[w].weight) : 0;
		/* An event without a stack or its weight says nothing here. */
		if (cv->stack_field[w] < 0 || !cls->fields[cv->stack_field[w]].cp ||
		    cv->weight_field[w] < 0)
			continue;
		cv->classes[w] = cls;
	}
	duration = c->duration_nanos;
	if (!cv->first_nanos || c->start_nanos < cv->first_nanos)
		cv->first_nanos = c->start_nanos;
	if (c->start_nanos + duration > cv->last_nanos)
		cv->last_nanos = c->start_nanos + duration;
	cv->names = htab_new(256);
	if (!cv->names)
		return kiln_error_set(c->err, ENOMEM, "jfr: out of memory");
	int rc = jfr_chunk_events(c, on_event, cv);
	htab_free(cv->names);
	cv->names = NULL;
	return rc;
}

int jfr_to_pprof(const uint8_t *data, size_t len, const struct jfr_options *opts,
		 struct jfr_profiles *out, struct kiln_error *err)
{
	struct jfr_options o = opts ? *opts : (struct jfr_options){0};
	struct convert cv = {.out = out, .o = &o};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	o.sample_rate = o.sample_rate > 0 ? o.sample_rate : 100;
	o.max_events = o.max_events ? o.max_events : 10000000;
	cv.period_ns = 1000000000 / o.sample_rate;
	if (len == 0)
		return kiln_error_set(err, EINVAL, "jfr: empty recording");
	for (size_t off = 0; rc == 0 && off < len;) {
		struct jfr_chunk c;
		uint64_t size = 0;
		if (len - off < JFR_HEADER_BYTES) {
			rc = kiln_error_set(err, EINVAL, "jfr: truncated chunk header at byte %zu",
					    off);
			break;
		}
		if (memcmp(data + off, "FLR", 4) != 0) {
			rc = kiln_error_set(
			    err, EINVAL, "jfr: no JFR chunk (magic \"FLR\\0\") at byte %zu", off);
			break;
		}
		for (int i = 0; i < 8; i++)
			size = size << 8 | data[off + 8 + i];
		if (size < JFR_HEADER_BYTES || size > len - off) {
			rc = kiln_error_set(
			    err, EINVAL, "jfr: chunk at byte %zu claims %llu bytes, %zu are left",
			    off, (unsigned long long)size, len - off);
			break;
		}
		rc = jfr_chunk_open(&c, data + off, (size_t)size, off, err);
		if (rc == 0)
			rc = convert_chunk(&cv, &c);
		jfr_chunk_close(&c);
		out->chunks++;
		off += (size_t)size;
	}
	for (int k = 0; k < JFR_N_KINDS; k++) {
		if (!cv.b[k])
			continue;
		if (rc == 0) {
			pprof_builder_set_time(cv.b[k], cv.first_nanos,
					       cv.last_nanos - cv.first_nanos);
			if (pprof_builder_encode(cv.b[k], false, &out->pprof[k]))
				rc = kiln_error_set(err, ENOMEM, "jfr: out of memory");
		}
		pprof_builder_free(cv.b[k]);
	}
	return rc;
}

void jfr_profiles_release(struct jfr_profiles *p)
{
	for (int k = 0; k < JFR_N_KINDS; k++)
		buf_free(&p->pprof[k]);
}
