/*
 * bench_otlp.c — OTLP profiles ingest next to WriteRaw on the same
 * profiles, each the way the server runs it: WriteRaw as rpc_write_raw
 * (ingest_prepare, ingest_commit), OTLP as handlers_otlp.c
 * (otlp_request_unpack, otlp_convert_rows, otlp_rows_store).
 *
 *   bench_otlp run [--profiles N] [--samples N] [--out FILE] [--dir DIR]
 *
 * Builds N agent-like profiles (one per process; stacks of 24 frames drawn
 * from 4000 locations in 8 mappings, every 4th location with an inlined
 * frame) once as a WriteRawRequest (one gzipped pprof per series) and once
 * as an ExportProfilesServiceRequest (one shared dictionary, as the
 * OpenTelemetry eBPF profiler sends). Times, in CPU of this thread, best of
 * 5: decoding alone, then decoding and writing into a fresh store under DIR
 * (every stack new) and again into the same store (every stack known); it
 * checks that both give the same total and store the same number of rows.
 * --out writes the OTLP request for the peer (a protobuf parse of the same
 * bytes; bench-server.sh runs it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "otlp/otlp.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "server/ingest.h"
#include "server/pyroscope.h"

#define N_LOCATIONS 4000
#define N_MAPPINGS  8
#define DEPTH	    24

typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary dict_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Location loc_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Line line_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Function func_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping map_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Stack stack_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Sample sample_msg;
typedef Opentelemetry__Proto__Profiles__V1development__Profile prof_msg;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU: the machine may be shared */
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "bench_otlp: out of memory\n");
		exit(1);
	}
	return p;
}

static char *xstrdup_printf(const char *fmt, int v)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), fmt, v);
	return strdup(tmp);
}

/* The synthetic data both requests are made of. */
struct world {
	size_t n_profiles, n_samples;
	uint32_t *stacks; /* [profile][sample][DEPTH] location rows, leaf first */
	int64_t *values;  /* [profile][sample] */
	int64_t total;
	struct buf *pprofs; /* [profile]: the gzipped pprof WriteRaw carries */
};

static uint32_t rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*s >> 33);
}

static void make_world(struct world *w)
{
	uint64_t seed = 42;

	w->stacks = xcalloc(w->n_profiles * w->n_samples * DEPTH, sizeof(*w->stacks));
	w->values = xcalloc(w->n_profiles * w->n_samples, sizeof(*w->values));
	for (size_t i = 0; i < w->n_profiles * w->n_samples; i++) {
		/* A shared root path and a random tail, as real stacks look. */
		for (int d = 0; d < DEPTH; d++)
			w->stacks[i * DEPTH + d] = d >= DEPTH - 6
						       ? (uint32_t)(DEPTH - d)
						       : 1 + rng(&seed) % (N_LOCATIONS - 1);
		w->values[i] = 1 + rng(&seed) % 10;
		w->total += w->values[i];
	}
}

/* --- the OTLP request ------------------------------------------------------ */

static void otlp_encode(const struct world *w, struct buf *out)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest req =
	    OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	dict_msg dict = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	size_t n_strings = 4 + N_LOCATIONS + N_MAPPINGS;

	/* Strings: "", samples, count, cpu, nanoseconds, f1.., /lib/m1.. */
	dict.string_table = xcalloc(n_strings + 1, sizeof(char *));
	dict.string_table[dict.n_string_table++] = "";
	dict.string_table[dict.n_string_table++] = "samples";
	dict.string_table[dict.n_string_table++] = "count";
	dict.string_table[dict.n_string_table++] = "cpu";
	dict.string_table[dict.n_string_table++] = "nanoseconds";
	size_t first_func = dict.n_string_table;
	for (int i = 0; i < N_LOCATIONS; i++)
		dict.string_table[dict.n_string_table++] = xstrdup_printf("function_%d", i);
	size_t first_map = dict.n_string_table;
	for (int i = 0; i < N_MAPPINGS; i++)
		dict.string_table[dict.n_string_table++] = xstrdup_printf("/usr/lib/libm%d.so", i);

	dict.n_mapping_table = N_MAPPINGS + 1;
	dict.mapping_table = xcalloc(dict.n_mapping_table, sizeof(map_msg *));
	for (size_t i = 0; i < dict.n_mapping_table; i++) {
		map_msg *m = xcalloc(1, sizeof(*m));
		opentelemetry__proto__profiles__v1development__mapping__init(m);
		if (i) {
			m->memory_start = i << 32;
			m->memory_limit = (i << 32) + (1 << 30);
			m->filename_strindex = (int32_t)(first_map + i - 1);
		}
		dict.mapping_table[i] = m;
	}
	dict.n_function_table = N_LOCATIONS;
	dict.function_table = xcalloc(N_LOCATIONS, sizeof(func_msg *));
	dict.n_location_table = N_LOCATIONS;
	dict.location_table = xcalloc(N_LOCATIONS, sizeof(loc_msg *));
	for (int i = 0; i < N_LOCATIONS; i++) {
		func_msg *f = xcalloc(1, sizeof(*f));
		loc_msg *l = xcalloc(1, sizeof(*l));
		opentelemetry__proto__profiles__v1development__function__init(f);
		opentelemetry__proto__profiles__v1development__location__init(l);
		f->name_strindex = (int32_t)(first_func + i);
		dict.function_table[i] = f;
		if (i) {
			l->mapping_index = 1 + i % N_MAPPINGS;
			l->address = ((uint64_t)l->mapping_index << 32) + 0x1000 + 16 * i;
			l->n_lines = i % 4 == 0 ? 2 : 1;
			l->lines = xcalloc(2, sizeof(line_msg *));
			for (size_t k = 0; k < l->n_lines; k++) {
				line_msg *ln = xcalloc(1, sizeof(*ln));
				opentelemetry__proto__profiles__v1development__line__init(ln);
				ln->function_index = k ? (i + 1) % N_LOCATIONS : i;
				ln->line = 10 + k;
				l->lines[k] = ln;
			}
		}
		dict.location_table[i] = l;
	}
	size_t n_stacks = w->n_profiles * w->n_samples;
	dict.n_stack_table = n_stacks + 1;
	dict.stack_table = xcalloc(n_stacks + 1, sizeof(stack_msg *));
	for (size_t i = 0; i <= n_stacks; i++) {
		stack_msg *s = xcalloc(1, sizeof(*s));
		opentelemetry__proto__profiles__v1development__stack__init(s);
		if (i) {
			s->n_location_indices = DEPTH;
			s->location_indices = xcalloc(DEPTH, sizeof(int32_t));
			for (int d = 0; d < DEPTH; d++)
				s->location_indices[d] = (int32_t)w->stacks[(i - 1) * DEPTH + d];
		}
		dict.stack_table[i] = s;
	}
	req.dictionary = &dict;

	Opentelemetry__Proto__Profiles__V1development__ResourceProfiles **rps =
	    xcalloc(w->n_profiles, sizeof(*rps));
	for (size_t p = 0; p < w->n_profiles; p++) {
		Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
		    xcalloc(1, sizeof(*rp));
		Opentelemetry__Proto__Resource__V1__Resource *res = xcalloc(1, sizeof(*res));
		Opentelemetry__Proto__Common__V1__KeyValue *kv = xcalloc(1, sizeof(*kv));
		Opentelemetry__Proto__Common__V1__AnyValue *av = xcalloc(1, sizeof(*av));
		Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
		    xcalloc(1, sizeof(*sp));
		Opentelemetry__Proto__Common__V1__InstrumentationScope *scope =
		    xcalloc(1, sizeof(*scope));
		prof_msg *pm = xcalloc(1, sizeof(*pm));
		Opentelemetry__Proto__Profiles__V1development__ValueType *st =
		    xcalloc(2, sizeof(*st));

		opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
		opentelemetry__proto__resource__v1__resource__init(res);
		opentelemetry__proto__common__v1__key_value__init(kv);
		opentelemetry__proto__common__v1__any_value__init(av);
		opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
		opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
		opentelemetry__proto__profiles__v1development__profile__init(pm);
		opentelemetry__proto__profiles__v1development__value_type__init(&st[0]);
		opentelemetry__proto__profiles__v1development__value_type__init(&st[1]);
		kv->key = "process.pid";
		av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		av->int_value = 1000 + (int64_t)p;
		kv->value = av;
		res->n_attributes = 1;
		res->attributes = xcalloc(1, sizeof(kv));
		res->attributes[0] = kv;
		rp->resource = res;
		scope->name = "bench";
		sp->scope = scope;
		st[0].type_strindex = 1, st[0].unit_strindex = 2;
		st[1].type_strindex = 3, st[1].unit_strindex = 4;
		pm->sample_type = &st[0];
		pm->period_type = &st[1];
		pm->period = 10000000;
		pm->time_unix_nano = 1700000000000000000ULL;
		pm->n_samples = w->n_samples;
		pm->samples = xcalloc(w->n_samples, sizeof(sample_msg *));
		for (size_t i = 0; i < w->n_samples; i++) {
			sample_msg *s = xcalloc(1, sizeof(*s));
			opentelemetry__proto__profiles__v1development__sample__init(s);
			s->stack_index = (int32_t)(1 + p * w->n_samples + i);
			s->n_values = 1;
			s->values = &w->values[p * w->n_samples + i];
			pm->samples[i] = s;
		}
		sp->n_profiles = 1;
		sp->profiles = xcalloc(1, sizeof(pm));
		sp->profiles[0] = pm;
		rp->n_scope_profiles = 1;
		rp->scope_profiles = xcalloc(1, sizeof(sp));
		rp->scope_profiles[0] = sp;
		rps[p] = rp;
	}
	req.n_resource_profiles = w->n_profiles;
	req.resource_profiles = rps;
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	if (buf_reserve(out, n))
		exit(1);
	out->len = protobuf_c_message_pack(&req.base, out->data);
}

/* --- the WriteRaw request -------------------------------------------------- */

static void writeraw_encode(struct world *w, struct buf *out)
{
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;

	req.n_series = w->n_profiles;
	req.series = xcalloc(w->n_profiles, sizeof(*req.series));
	w->pprofs = xcalloc(w->n_profiles, sizeof(*w->pprofs));
	for (size_t p = 0; p < w->n_profiles; p++) {
		struct pprof_builder *b = pprof_builder_new();
		uint64_t funcs[N_LOCATIONS] = {0}, maps[N_MAPPINGS + 1] = {0},
			 locs[N_LOCATIONS] = {0};
		struct buf enc = {0};

		pprof_builder_add_sample_type(b, "samples", "count");
		pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000);
		pprof_builder_set_time(b, 1700000000000000000LL, 0);
		for (size_t i = 0; i < w->n_samples; i++) {
			uint64_t stack[DEPTH];
			for (int d = 0; d < DEPTH; d++) {
				uint32_t li = w->stacks[(p * w->n_samples + i) * DEPTH + d];
				if (!locs[li]) {
					int mi = 1 + li % N_MAPPINGS;
					char fname[32], mname[32];
					struct pprof_line_desc lines[2];
					size_t nl = li % 4 == 0 ? 2 : 1;
					if (!maps[mi]) {
						snprintf(mname, sizeof(mname), "/usr/lib/libm%d.so",
							 mi - 1);
						struct pprof_mapping_desc md = {
						    .memory_start = (uint64_t)mi << 32,
						    .memory_limit =
							((uint64_t)mi << 32) + (1 << 30),
						    .filename = mname,
						    .has_functions = true};
						maps[mi] = pprof_builder_mapping(b, &md);
					}
					for (size_t k = 0; k < nl; k++) {
						uint32_t fi = k ? (li + 1) % N_LOCATIONS : li;
						if (!funcs[fi]) {
							snprintf(fname, sizeof(fname),
								 "function_%u", fi);
							funcs[fi] = pprof_builder_function(
							    b, fname, fname, "", 0);
						}
						lines[k] = (struct pprof_line_desc){
						    funcs[fi], (int64_t)(10 + k), 0};
					}
					locs[li] = pprof_builder_location(
					    b, maps[mi], ((uint64_t)mi << 32) + 0x1000 + 16 * li,
					    lines, nl);
				}
				stack[d] = locs[li];
			}
			pprof_builder_add_sample(b, stack, DEPTH, &w->values[p * w->n_samples + i],
						 NULL, 0);
		}
		pprof_builder_encode(b, true, &enc);
		pprof_builder_free(b);

		Parca__Profilestore__V1alpha1__RawProfileSeries *rs = xcalloc(1, sizeof(*rs));
		Parca__Profilestore__V1alpha1__LabelSet *ls = xcalloc(1, sizeof(*ls));
		Parca__Profilestore__V1alpha1__Label *l = xcalloc(2, sizeof(*l));
		Parca__Profilestore__V1alpha1__RawSample *sm = xcalloc(1, sizeof(*sm));
		parca__profilestore__v1alpha1__raw_profile_series__init(rs);
		parca__profilestore__v1alpha1__label_set__init(ls);
		parca__profilestore__v1alpha1__label__init(&l[0]);
		parca__profilestore__v1alpha1__label__init(&l[1]);
		parca__profilestore__v1alpha1__raw_sample__init(sm);
		l[0].name = "__name__", l[0].value = "bench";
		l[1].name = "process_pid", l[1].value = xstrdup_printf("%d", 1000 + (int)p);
		ls->n_labels = 2;
		ls->labels = xcalloc(2, sizeof(l));
		ls->labels[0] = &l[0], ls->labels[1] = &l[1];
		rs->labels = ls;
		sm->raw_profile.data = enc.data;
		sm->raw_profile.len = enc.len;
		w->pprofs[p] = enc;
		rs->n_samples = 1;
		rs->samples = xcalloc(1, sizeof(sm));
		rs->samples[0] = sm;
		req.series[p] = rs;
	}
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	if (buf_reserve(out, n))
		exit(1);
	out->len = protobuf_c_message_pack(&req.base, out->data);
}

static int64_t profile_total(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t t = 0;
	for (size_t i = 0; i < m->n_sample; i++)
		t += m->sample[i]->value[0];
	return t;
}

/* One timed ingest of each kind, CPU seconds of this thread. */
struct timing {
	double decode, store_cold, store_warm;
	int64_t total;
	uint64_t rows_stored;
};

static void keep_best(struct timing *best, const struct timing *t)
{
	if (t->decode < best->decode)
		best->decode = t->decode;
	if (t->store_cold < best->store_cold)
		best->store_cold = t->store_cold;
	if (t->store_warm < best->store_warm)
		best->store_warm = t->store_warm;
	best->total = t->total;
	best->rows_stored = t->rows_stored;
}

static struct store *open_store(const char *dir, const char *name)
{
	char path[4096];
	struct store_options o = {0};
	struct store *s = NULL;
	struct kiln_error err = {0};

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	o.path = path;
	if (store_open(&o, &s, &err)) {
		fprintf(stderr, "bench_otlp: store %s: %s\n", path, err.msg);
		exit(1);
	}
	return s;
}

static void remove_store(const char *dir, const char *name)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", dir, name);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_otlp: cannot remove %s/%s\n", dir, name);
}

/* Decoders for WriteRaw, reused across requests as the server's pool does. */
static struct ingest_decoders *writeraw_decoders;

/* WriteRaw as rpc_write_raw does it: decode and validate with a pooled
 * decoder, then commit. */
static double writeraw_once(const struct buf *raw, struct store *s, int64_t *total)
{
	struct kiln_error err = {0};
	struct arena *a = arena_new(0);
	struct ingest_limits lim = {.now_ms = 1800000000000LL,
				    .decoder = ingest_decoder_take(writeraw_decoders)};
	struct ingest_batch b;
	double t0 = now_s();

	if (ingest_prepare(raw->data, raw->len, &lim, a, &b, &err) ||
	    (s && ingest_commit(s, &b, &err))) {
		fprintf(stderr, "bench_otlp: WriteRaw: %s\n", err.msg);
		exit(1);
	}
	double t = now_s() - t0;
	if (total) {
		*total = 0;
		for (size_t i = 0; i < b.n_profiles; i++)
			*total += profile_total(b.profiles[i].profile);
	}
	ingest_batch_release(&b);
	ingest_decoder_give(writeraw_decoders, lim.decoder);
	arena_free(a);
	return t;
}

/* OTLP as handlers_otlp.c does it: unpack, convert for the row path, store. */
static double otlp_once(const struct buf *otlp, struct store *s, int64_t *total)
{
	struct kiln_error err = {0};
	struct arena *a = arena_new(0);
	struct otlp_limits olim = {.now_ms = 1800000000000LL,
				   .min_time_ms = 946684800000LL,
				   .max_future_skew_ms = 3600000};
	struct otlp_rows res;
	otlp_request *req;
	double t0 = now_s();

	if (otlp_request_unpack(otlp->data, otlp->len, a, &req, &err) ||
	    otlp_convert_rows(req, &olim, a, &res, &err) || res.n_rejected ||
	    (s && otlp_rows_store(s, &res, &err))) {
		fprintf(stderr, "bench_otlp: OTLP: %s %s\n", err.msg, res.error_message);
		exit(1);
	}
	double t = now_s() - t0;
	if (total) {
		*total = 0;
		for (size_t i = 0; i < res.n_profiles; i++)
			for (size_t k = 0; k < res.profiles[i].n; k++)
				*total += res.profiles[i].values[k];
	}
	otlp_rows_release(&res);
	arena_free(a);
	return t;
}

/* Pyroscope's /ingest as handlers_pyroscope.c does it for format=pprof:
 * one request per profile (as the SDKs push), each through
 * pyro_write_pprof; the HTTP and multipart framing are left out. */
static double pyroscope_once(const struct world *w, struct store *s, int64_t *total)
{
	struct ingest_decoders *ds = ingest_decoders_new(8);
	struct pyro_write pw = {
	    .store = s, .decoders = ds, .now_ms = 1800000000000LL, .timeless_ms = 1800000000000LL};
	double t0 = now_s();

	for (size_t p = 0; p < w->n_profiles; p++) {
		struct kiln_error err = {0};
		char pid[32];
		struct pyro_labels l = {.names = {"__name__", "service_name", "process_pid"},
					.values = {"unknown", "bench", pid},
					.n = 3};

		snprintf(pid, sizeof(pid), "%d", 1000 + (int)p);
		if (pyro_write_pprof(&pw, &l, true, w->pprofs[p].data, w->pprofs[p].len, &err)) {
			fprintf(stderr, "bench_otlp: /ingest: %s\n", err.msg);
			exit(1);
		}
	}
	double t = now_s() - t0;
	ingest_decoders_free(ds);
	if (total)
		*total = w->total; /* pyro_write_pprof keeps no profile: checked by rows */
	return t;
}

static uint64_t stored_rows(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.sample_rows;
}

int main(int argc, char **argv)
{
	struct world w = {.n_profiles = 64, .n_samples = 500};
	const char *out_path = NULL, *dir = NULL;
	char tmpdir[] = "/var/tmp/kiln-bench-otlp-XXXXXX";
	struct buf otlp = {0}, raw = {0};
	struct timing best_raw = {1e9, 1e9, 1e9, 0, 0}, best_otlp = {1e9, 1e9, 1e9, 0, 0},
		      best_pyro = {1e9, 1e9, 1e9, 0, 0};

	if (argc < 2 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: bench_otlp run [--profiles N] [--samples N] [--out FILE] "
				"[--dir DIR]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--profiles") == 0)
			w.n_profiles = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--samples") == 0)
			w.n_samples = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--out") == 0)
			out_path = argv[i + 1];
		else if (strcmp(argv[i], "--dir") == 0)
			dir = argv[i + 1];
	}
	if (!dir && !(dir = mkdtemp(tmpdir))) {
		perror("bench_otlp: mkdtemp");
		return 1;
	}
	log_set_level(LOG_WARN); /* the stores' open and close lines */
	writeraw_decoders = ingest_decoders_new(8);
	make_world(&w);
	otlp_encode(&w, &otlp);
	writeraw_encode(&w, &raw);
	if (out_path && buf_write_file(&otlp, out_path)) {
		fprintf(stderr, "bench_otlp: cannot write %s\n", out_path);
		return 1;
	}

	/* Each round: both requests decoded alone, then written into a fresh
	 * store (cold: every stack new) and once more into the same store
	 * (warm: every stack known, as for an agent's next push). */
	for (int rep = 0; rep < 5; rep++) {
		struct timing tr = {0}, to = {0}, tp = {0};
		struct store *sr = open_store(dir, "writeraw"), *so = open_store(dir, "otlp"),
			     *sp = open_store(dir, "pyroscope");

		tr.decode = writeraw_once(&raw, NULL, &tr.total);
		to.decode = otlp_once(&otlp, NULL, &to.total);
		tp.decode = pyroscope_once(&w, NULL, &tp.total);
		tr.store_cold = writeraw_once(&raw, sr, NULL);
		to.store_cold = otlp_once(&otlp, so, NULL);
		tp.store_cold = pyroscope_once(&w, sp, NULL);
		tr.store_warm = writeraw_once(&raw, sr, NULL);
		to.store_warm = otlp_once(&otlp, so, NULL);
		tp.store_warm = pyroscope_once(&w, sp, NULL);
		tr.rows_stored = stored_rows(sr);
		to.rows_stored = stored_rows(so);
		tp.rows_stored = stored_rows(sp);
		store_close(sr);
		store_close(so);
		store_close(sp);
		remove_store(dir, "writeraw");
		remove_store(dir, "otlp");
		remove_store(dir, "pyroscope");
		keep_best(&best_raw, &tr);
		keep_best(&best_otlp, &to);
		keep_best(&best_pyro, &tp);
	}
	if (dir == tmpdir)
		rmdir(tmpdir);

	size_t rows = w.n_profiles * w.n_samples, pprof_bytes = 0;
	for (size_t p = 0; p < w.n_profiles; p++)
		pprof_bytes += w.pprofs[p].len;
	printf("request: %zu profiles x %zu samples (stacks of %d frames), total %lld; "
	       "CPU of one thread, best of 5\n",
	       w.n_profiles, w.n_samples, DEPTH, (long long)w.total);
	printf("%-8s %8s %24s %24s %24s\n", "path", "bytes", "decode only",
	       "decode+store (new stacks)", "decode+store (known)");
	const struct {
		const char *name;
		size_t bytes;
		const struct timing *t;
	} line[] = {{"writeraw", raw.len, &best_raw},
		    {"otlp", otlp.len, &best_otlp},
		    {"/ingest", pprof_bytes, &best_pyro}};
	for (int i = 0; i < 3; i++)
		printf("%-8s %8zu %9.2f ms %6.2f M/s %9.2f ms %6.2f M/s %9.2f ms %6.2f M/s\n",
		       line[i].name, line[i].bytes, line[i].t->decode * 1e3,
		       rows / line[i].t->decode / 1e6, line[i].t->store_cold * 1e3,
		       rows / line[i].t->store_cold / 1e6, line[i].t->store_warm * 1e3,
		       rows / line[i].t->store_warm / 1e6);
	printf("totals %s, stored rows %s (%llu)\n",
	       best_raw.total == w.total && best_otlp.total == w.total ? "equal" : "DIFFER",
	       best_raw.rows_stored == best_otlp.rows_stored &&
		       best_raw.rows_stored == best_pyro.rows_stored
		   ? "equal"
		   : "DIFFER",
	       (unsigned long long)best_otlp.rows_stored);
	for (int i = 1; i < 3; i++)
		printf("%s/writeraw CPU: decode %.2fx, with the store %.2fx (new stacks), %.2fx "
		       "(known)\n",
		       line[i].name, line[i].t->decode / best_raw.decode,
		       line[i].t->store_cold / best_raw.store_cold,
		       line[i].t->store_warm / best_raw.store_warm);
	ingest_decoders_free(writeraw_decoders);
	buf_free(&otlp);
	buf_free(&raw);
	return 0;
}
