/*
 * handlers_pyroscope.c — POST /ingest, Pyroscope's push API, as its SDKs
 * (Go, Java, Python, Ruby, .NET, Node) and agents call it:
 *
 *   /ingest?name=APP{k=v,...}&from=&until=&format=&sampleRate=&spyName=...
 *
 * format=pprof (the default for a multipart body): the "profile" part, or
 * the whole body when it is not multipart, is a pprof; "prev_profile" is
 * refused as Pyroscope refuses it (an SDK too old to send deltas);
 * "sample_type_config" is accepted and not needed (Kiln keeps every sample
 * type). format=folded / lines: stacks turned into a pprof here, typed by
 * the name's suffix (app.cpu, app.alloc_space, ...; none = cpu) as
 * Pyroscope types them; CPU values are samples scaled to nanoseconds by
 * 1e9/sampleRate (default 100 Hz).
 *
 * Labels, as Pyroscope sets them: __name__ = the metric (process_cpu,
 * memory, ...), service_name = APP (or app_name when the name's labels
 * carry a service_name), pyroscope_spy = spyName, then the name's labels
 * ("__"-prefixed ones are dropped, as Pyroscope drops them).
 *
 * Everything then goes through WriteRaw's own path (pyroscope_write.c:
 * ingest_prepare/ingest_commit, the profile decoded once), so the limits,
 * label checks, durability (the 200 follows the fsynced WAL) and metrics
 * are the ones WriteRaw has. The route is AUTH_WRITE (routes.c).
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gzip.h"
#include "common/log.h"
#include "jfr/jfr.h"
#include "server/handlers.h"
#include "server/ingest.h"
#include "server/internal.h"
#include "server/pyroscope.h"

/* Process-wide counters for /metrics (pyroscope_metrics_render). */
static _Atomic uint64_t pyro_requests[4]; /* pprof, folded, lines, jfr */
static _Atomic uint64_t pyro_bytes;
static _Atomic uint64_t pyro_errors;
static const char *const pyro_formats[4] = {"pprof", "folded", "lines", "jfr"};

void pyroscope_metrics_render(struct buf *out)
{
	buf_append_str(out, "# HELP kiln_pyroscope_ingest_requests_total Pyroscope POST /ingest "
			    "requests by format.\n# TYPE kiln_pyroscope_ingest_requests_total "
			    "counter\n");
	for (int i = 0; i < 4; i++)
		buf_printf(out, "kiln_pyroscope_ingest_requests_total{format=\"%s\"} %lu\n",
			   pyro_formats[i], (unsigned long)atomic_load(&pyro_requests[i]));
	buf_printf(out,
		   "# HELP kiln_pyroscope_ingest_bytes_total Request body bytes received by "
		   "POST /ingest.\n# TYPE kiln_pyroscope_ingest_bytes_total counter\n"
		   "kiln_pyroscope_ingest_bytes_total %lu\n",
		   (unsigned long)atomic_load(&pyro_bytes));
	buf_printf(out,
		   "# HELP kiln_pyroscope_ingest_errors_total POST /ingest requests refused or "
		   "failed.\n# TYPE kiln_pyroscope_ingest_errors_total counter\n"
		   "kiln_pyroscope_ingest_errors_total %lu\n",
		   (unsigned long)atomic_load(&pyro_errors));
}

static void add_label(struct pyro_labels *l, const char *name, const char *value)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->names[i]) == n && memcmp(l->names[i], name, n) == 0)
			return;
	l->names[l->n] = name;
	l->values[l->n] = value;
	l->n++;
}

static void series_labels(const struct pyro_name *nm, const char *app, const char *metric,
			  const char *spy, struct pyro_labels *l)
{
	bool has_service = false;

	l->n = 0;
	add_label(l, "__name__", metric);
	for (size_t i = 0; i < nm->n_labels; i++)
		if (strcmp(nm->names[i], "service_name") == 0)
			has_service = true;
	add_label(l, has_service ? "app_name" : "service_name", app);
	if (spy && *spy)
		add_label(l, "pyroscope_spy", spy);
	for (size_t i = 0; i < nm->n_labels; i++)
		if (strncmp(nm->names[i], "__", 2) != 0)
			add_label(l, nm->names[i], nm->values[i]);
}

/* ---- folded / lines -> pprof ---------------------------------------------- */

struct folded_ctx {
	struct pprof_builder *b;
	int64_t scale;
	uint64_t locs[PYRO_MAX_FRAMES];
	size_t lines;
};

static int add_folded_stack(void *vctx, const char *const *frames, size_t n, int64_t value)
{
	struct folded_ctx *fc = vctx;
	int64_t v;

	fc->lines++;
	if (__builtin_mul_overflow(value, fc->scale, &v))
		return -ERANGE;
	/* Folded stacks are root first; pprof's location_id[0] is the leaf. */
	for (size_t i = 0; i < n; i++) {
		uint64_t fn = pprof_builder_function(fc->b, frames[i], frames[i], NULL, 0);
		struct pprof_line_desc line = {.function_id = fn};
		if (!fn)
			return -ENOMEM;
		fc->locs[n - 1 - i] = pprof_builder_location(fc->b, 0, 0, &line, 1);
		if (!fc->locs[n - 1 - i])
			return -ENOMEM;
	}
	return pprof_builder_add_sample(fc->b, fc->locs, n, &v, NULL, 0);
}

static int folded_to_pprof(const uint8_t *body, size_t len, bool lines, const char *suffix,
			   int64_t sample_rate, int64_t from_s, int64_t until_s,
			   const char **metric, struct pprof_profile **out, size_t *n_lines,
			   struct kiln_error *err)
{
	const struct pyro_type *t = pyro_type_for_suffix(suffix ? suffix : "cpu");
	struct folded_ctx *fc = calloc(1, sizeof(*fc));
	int rc;

	if (!fc)
		return kiln_error_set(err, ENOMEM, "out of memory");
	fc->b = pprof_builder_new_sized(256);
	fc->scale = 1;
	if (!fc->b) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	*metric = t->metric;
	bool timed = strcmp(t->metric, "process_cpu") == 0 || strcmp(t->metric, "wall") == 0;
	if (timed && sample_rate > 0) {
		int64_t period = 1000000000LL / sample_rate;
		fc->scale = period;
		rc = pprof_builder_add_sample_type(
		    fc->b, strcmp(t->metric, "wall") == 0 ? "wall" : "cpu", "nanoseconds");
		if (!rc)
			rc = pprof_builder_set_period(fc->b, "cpu", "nanoseconds", period);
	} else {
		rc = pprof_builder_add_sample_type(fc->b, t->sample_type, t->sample_unit);
		if (!rc)
			rc = pprof_builder_set_period(fc->b, t->period_type, t->period_unit, 1);
	}
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	pprof_builder_set_time(fc->b, from_s * 1000000000LL,
			       until_s > from_s ? (until_s - from_s) * 1000000000LL : 0);
	rc = pyro_folded_parse(body, len, lines, add_folded_stack, fc, err);
	if (rc == -ERANGE)
		rc = kiln_error_set(err, EINVAL,
				    "line %zu: value times the sample period overflows 64 bits",
				    fc->lines);
	else if (rc == -ENOMEM && !err->msg[0])
		rc = kiln_error_set(err, ENOMEM, "out of memory");
	if (rc)
		goto out;
	*n_lines = fc->lines;
	rc = pprof_builder_to_profile(fc->b, out, err);
out:
	pprof_builder_free(fc->b);
	free(fc);
	return rc;
}

/* ---- pprof ------------------------------------------------------------------- */

/* The Content-Type header (HTTP/1.1), or one read off the body's first
 * delimiter line when the transport gives no headers to handlers. */
static const char *content_type(const struct http_request *req, char *sniffed, size_t size)
{
	if (req->mhd_conn)
		return MHD_lookup_connection_value(req->mhd_conn, MHD_HEADER_KIND, "Content-Type");
	if (req->body_len > 2 && req->body[0] == '-' && req->body[1] == '-') {
		const uint8_t *eol = memchr(req->body, '\r', req->body_len);
		size_t n = eol ? (size_t)(eol - req->body) - 2 : 0;
		if (n && n < size - 40) {
			int k = snprintf(sniffed, size, "multipart/form-data; boundary=");
			memcpy(sniffed + k, req->body + 2, n);
			sniffed[k + n] = '\0';
			return sniffed;
		}
	}
	return NULL;
}

/* Finds the profile in the body: the part `part` of a multipart form
 * ("profile" for pprof, "jfr" for JFR), or the body itself. */
static int profile_from_body(const struct http_request *req, const char *part, const uint8_t **data,
			     size_t *len, struct kiln_error *err)
{
	char sniffed[160], boundary[80];
	const char *ct = content_type(req, sniffed, sizeof(sniffed));
	struct pyro_part parts[PYRO_MAX_PARTS];
	size_t n_parts;
	int rc;

	if (!ct || strncasecmp(ct, "multipart/", 10) != 0) {
		*data = req->body;
		*len = req->body_len;
		return 0;
	}
	rc = pyro_multipart_boundary(ct, boundary, sizeof(boundary), err);
	if (!rc)
		rc = pyro_multipart_parse(req->body, req->body_len, boundary, parts, &n_parts, err);
	if (rc)
		return rc;
	if (pyro_multipart_find(parts, n_parts, "prev_profile"))
		return kiln_error_set(err, EINVAL,
				      "multipart: a \"prev_profile\" part (cumulative profiles of "
				      "an old SDK) is not supported; update the SDK");
	const struct pyro_part *p = pyro_multipart_find(parts, n_parts, part);
	if (!p)
		return kiln_error_set(err, EINVAL, "multipart: no \"%s\" part", part);
	*data = p->data;
	*len = p->len;
	return 0;
}

/* ---- the handler ---------------------------------------------------------------- */

static int64_t arg_int(const struct http_request *req, const char *name, int64_t dflt,
		       struct kiln_error *err)
{
	const char *s = http_arg(req, name);
	char *end;
	long long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0) {
		kiln_error_set(err, EINVAL, "%s=\"%.40s\": not an integer >= 0", name, s);
		return -1;
	}
	return v;
}

/* What a write of this request needs from the server. */
static struct pyro_write write_ctx(struct server *s, int64_t now_ms, int64_t timeless_ms)
{
	return (struct pyro_write){.store = server_store(s),
				   .decoders = s->decoders,
				   .max_inflate = server_config(s)->max_profile_inflate,
				   .max_future_skew_ms =
				       server_config(s)->ingest_max_future_skew_ms,
				   .now_ms = now_ms,
				   .timeless_ms = timeless_ms};
}

/* Counts what w stored in the server's ingest metrics. */
static void count_written(struct server *s, const struct pyro_write *w)
{
	struct server_metrics *m = server_metrics(s);

	atomic_fetch_add(&m->ingested_profiles, w->profiles);
	atomic_fetch_add(&m->ingested_samples, w->samples);
	atomic_fetch_add(&m->ingested_bytes, w->bytes);
}

/* format=jfr: the recording (the "jfr" part of a multipart form, or the
 * body; gzipped or not) becomes one series per kind of profile in it, each
 * with the metric Pyroscope gives it (process_cpu, memory, mutex). */
static int ingest_jfr(const struct http_request *req, const struct pyro_name *nm, const char *app,
		      const char *spy, int64_t rate, int64_t now_ms, struct kiln_error *err)
{
	struct server *s = req->srv;
	struct jfr_options o = {.sample_rate = rate};
	struct jfr_profiles prof;
	struct pyro_labels labels;
	struct buf inflated = {0};
	const uint8_t *data;
	size_t len;
	int rc = profile_from_body(req, "jfr", &data, &len, err);

	memset(&prof, 0, sizeof(prof));
	if (rc == 0 && len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
		rc = gzip_inflate(data, len, server_config(s)->max_profile_inflate, &inflated, err);
		data = inflated.data;
		len = inflated.len;
	}
	if (rc == 0)
		rc = jfr_to_pprof(data, len, &o, &prof, err);
	for (int k = 0; rc == 0 && k < JFR_N_KINDS; k++) {
		if (!prof.pprof[k].len)
			continue;
		struct pyro_write w = write_ctx(s, now_ms, now_ms);

		series_labels(nm, app, jfr_kind_metric(k), spy, &labels);
		rc = pyro_write_pprof(&w, &labels, false, prof.pprof[k].data, prof.pprof[k].len,
				      err);
		if (rc == 0)
			count_written(s, &w);
	}
	jfr_profiles_release(&prof);
	buf_free(&inflated);
	return rc;
}

void http_pyroscope_ingest(const struct http_request *req, struct http_response *resp)
{
	struct server *s = req->srv;
	struct server_metrics *m = server_metrics(s);
	struct kiln_error err = {0};
	struct pyro_name *nm = calloc(1, sizeof(*nm));
	char *app = NULL;
	const char *suffix = NULL, *metric = NULL;
	const char *format = http_arg(req, "format");
	const char *spy = http_arg(req, "spyName");
	struct pyro_labels labels;
	struct pprof_profile *built = NULL; /* folded/lines stacks, until written */
	const uint8_t *body = NULL;
	size_t body_len = 0;
	struct timespec now;
	int64_t from_s, until_s, rate;
	int fmt, rc;

	clock_gettime(CLOCK_REALTIME, &now);
	atomic_fetch_add(&pyro_bytes, req->body_len);
	if (!format || !*format || strcmp(format, "pprof") == 0)
		fmt = 0;
	else if (strcmp(format, "folded") == 0)
		fmt = 1;
	else if (strcmp(format, "lines") == 0)
		fmt = 2;
	else if (strcmp(format, "jfr") == 0)
		fmt = 3;
	else
		fmt = -1;
	if (fmt >= 0)
		atomic_fetch_add(&pyro_requests[fmt], 1);
	if (!nm) {
		rc = kiln_error_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	if (fmt < 0) {
		rc = kiln_error_set(&err, EINVAL,
				    "format=\"%.40s\": Kiln takes pprof, folded, lines and jfr "
				    "(trie and tree are not supported)",
				    format);
		goto fail;
	}
	rc = pyro_parse_name(http_arg(req, "name"), nm, &err);
	if (rc)
		goto fail;
	app = malloc(strlen(nm->app) + 1);
	if (!app) {
		rc = kiln_error_set(&err, ENOMEM, "out of memory");
		goto fail;
	}
	from_s = now.tv_sec;
	if (http_arg(req, "from") &&
	    (rc = pyro_parse_time(http_arg(req, "from"), now.tv_sec, &from_s, &err)))
		goto fail;
	until_s = from_s;
	if (http_arg(req, "until") &&
	    (rc = pyro_parse_time(http_arg(req, "until"), now.tv_sec, &until_s, &err)))
		goto fail;
	rate = arg_int(req, "sampleRate", 100, &err);
	if (rate <= 0 || rate > 1000000000) {
		if (rate >= 0)
			kiln_error_set(&err, EINVAL, "sampleRate=%lld: must be 1 to 1e9 Hz",
				       (long long)rate);
		rc = -EINVAL;
		goto fail;
	}

	if (fmt == 3) {
		strcpy(app, nm->app);
		rc = ingest_jfr(req, nm, app, spy, rate,
				(int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, &err);
		if (rc)
			goto fail;
		goto done;
	}
	if (fmt == 0) {
		strcpy(app, nm->app);
		rc = profile_from_body(req, "profile", &body, &body_len, &err);
		if (rc) {
			kiln_error_prefix(&err, "profile: ");
			goto fail;
		}
		/* The metric comes from the profile's sample types, once
		 * ingest decodes it (pyro_write_pprof). */
		series_labels(nm, app, "unknown", spy, &labels);
	} else {
		size_t n_lines = 0;
		pyro_split_app(nm->app, app, &suffix);
		rc = folded_to_pprof(req->body, req->body_len, fmt == 2, suffix, rate, from_s,
				     until_s, &metric, &built, &n_lines, &err);
		if (rc) {
			kiln_error_prefix(&err, "%s: ", pyro_formats[fmt]);
			goto fail;
		}
		if (n_lines == 0) /* nothing to store, as Pyroscope */
			goto done;
		series_labels(nm, app, metric, spy, &labels);
	}

	/* A pprof without time_nanos takes `from` (as Pyroscope does): ingest
	 * gives such a profile now_ms, and checks the future skew against it,
	 * so `from` itself is checked against the server's clock here. */
	int64_t skew_ms = server_config(s)->ingest_max_future_skew_ms;
	if (from_s > now.tv_sec + (skew_ms ? skew_ms / 1000 : 3600)) {
		rc = kiln_error_set(&err, EINVAL,
				    "from=%lld lies more than the allowed skew ahead "
				    "of the server's clock",
				    (long long)from_s);
		goto fail;
	}
	struct pyro_write w =
	    write_ctx(s, (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, from_s * 1000);
	if (built) {
		rc = pyro_write_built(&w, &labels, built, req->body_len, &err);
		built = NULL; /* the write owns it */
	} else {
		rc = pyro_write_pprof(&w, &labels, fmt == 0, body, body_len, &err);
	}
	if (rc)
		goto fail;
	count_written(s, &w);
done:
	resp->content_type = "application/json";
	buf_append_str(&resp->body, "{}\n");
	goto out;
fail:
	atomic_fetch_add(&pyro_errors, 1);
	atomic_fetch_add(&m->ingest_errors, 1);
	log_debug("POST /ingest: %s", err.msg);
	http_error(resp, rc == -EFBIG ? 413 : http_status_from_errno(rc), -1, "%s",
		   err.msg[0] ? err.msg : "ingest failed");
out:
	pprof_profile_free(built);
	free(app);
	free(nm);
}
