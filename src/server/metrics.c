/*
 * metrics.c — the server's Prometheus registry and /metrics rendering.
 *
 * Counters are lock-free atomics bumped by handlers and connection threads.
 * Request metrics are kept per gRPC method and per HTTP route, indexed like
 * the tables in routes.c, so a new route gets its metrics for free. Store
 * sizes and WAL fsync latency come from store_get_stats at scrape time.
 * Every family's samples directly follow its own HELP and TYPE lines.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/process_metrics.h"
#include "common/version.h"
#include "server/handlers.h"
#include "server/health.h"
#include "server/internal.h"
#include "server/webrpc.h"
#include "store/store.h"

/* Latency bucket upper bounds, seconds. */
static const double bucket_le[METRIC_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
						 0.1,	0.25,	0.5,   1,    2.5,   10};

int metrics_init(struct server_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->grpc = calloc(server_n_grpc_methods + 1, sizeof(*m->grpc));
	m->http = calloc(server_n_http_routes + 1, sizeof(*m->http));
	if (!m->grpc || !m->http) {
		metrics_release(m);
		return -ENOMEM;
	}
	return 0;
}

void metrics_release(struct server_metrics *m)
{
	free(m->grpc);
	free(m->http);
	m->grpc = m->http = NULL;
}

void metrics_observe(struct route_metrics *r, uint64_t elapsed_ns, bool error)
{
	double sec = (double)elapsed_ns / 1e9;
	atomic_fetch_add(&r->requests, 1);
	if (error)
		atomic_fetch_add(&r->errors, 1);
	for (int i = 0; i < METRIC_BUCKETS; i++) {
		if (sec <= bucket_le[i]) {
			atomic_fetch_add(&r->latency.buckets[i], 1);
			break;
		}
	}
	atomic_fetch_add(&r->latency.count, 1);
	atomic_fetch_add(&r->latency.sum_us, elapsed_ns / 1000);
}

/* The three request families; each is rendered whole (all its routes) before
 * the next, since Prometheus' text format wants a family's samples right
 * after its own HELP and TYPE lines. */
enum route_family { ROUTE_REQUESTS, ROUTE_ERRORS, ROUTE_DURATION };

/* One route's samples of one family. */
static void render_route(struct buf *out, enum route_family f, const char *kind, const char *label,
			 const char *name, struct route_metrics *r)
{
	uint64_t cum = 0, count;

	switch (f) {
	case ROUTE_REQUESTS:
		buf_printf(out, "kiln_%s_requests_total{%s=\"%s\"} %lu\n", kind, label, name,
			   (unsigned long)atomic_load(&r->requests));
		break;
	case ROUTE_ERRORS:
		buf_printf(out, "kiln_%s_request_errors_total{%s=\"%s\"} %lu\n", kind, label, name,
			   (unsigned long)atomic_load(&r->errors));
		break;
	case ROUTE_DURATION:
		for (int i = 0; i < METRIC_BUCKETS; i++) {
			cum += atomic_load(&r->latency.buckets[i]);
			buf_printf(out,
				   "kiln_%s_request_duration_seconds_bucket{%s=\"%s\",le=\"%g\"} "
				   "%lu\n",
				   kind, label, name, bucket_le[i], (unsigned long)cum);
		}
		count = atomic_load(&r->latency.count);
		buf_printf(out,
			   "kiln_%s_request_duration_seconds_bucket{%s=\"%s\",le=\"+Inf\"} %lu\n",
			   kind, label, name, (unsigned long)count);
		buf_printf(out, "kiln_%s_request_duration_seconds_sum{%s=\"%s\"} %.6f\n", kind,
			   label, name, (double)atomic_load(&r->latency.sum_us) / 1e6);
		buf_printf(out, "kiln_%s_request_duration_seconds_count{%s=\"%s\"} %lu\n", kind,
			   label, name, (unsigned long)count);
		break;
	}
}

/* One family's samples for every gRPC method, then for unknown methods. */
static void render_grpc_family(struct buf *out, struct server_metrics *m, enum route_family f)
{
	for (size_t i = 0; i < server_n_grpc_methods; i++)
		render_route(out, f, "grpc", "method", server_grpc_methods[i].path, &m->grpc[i]);
	render_route(out, f, "grpc", "method", "unknown", &m->unknown_grpc);
}

/* One family's samples for every HTTP route, then for unknown routes. */
static void render_http_family(struct buf *out, struct server_metrics *m, enum route_family f)
{
	for (size_t i = 0; i < server_n_http_routes; i++)
		render_route(out, f, "http", "route", server_http_routes[i].path, &m->http[i]);
	render_route(out, f, "http", "route", "unknown", &m->unknown_http);
}

static void help(struct buf *out, const char *name, const char *type, const char *text)
{
	buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

int metrics_render(struct server *s, struct buf *out)
{
	struct server_metrics *m = &s->metrics;
	struct store_stats st = {0};

	help(out, "kiln_build_info", "gauge", "Always 1; the version kiln was built from.");
	buf_printf(out, "kiln_build_info{version=\"%s\"} 1\n", kiln_version());
	help(out, "kiln_ingested_profiles_total", "counter", "pprof profiles stored by WriteRaw.");
	buf_printf(out, "kiln_ingested_profiles_total %lu\n",
		   (unsigned long)atomic_load(&m->ingested_profiles));
	help(out, "kiln_ingested_samples_total", "counter",
	     "pprof samples stored (one per sample type and sample).");
	buf_printf(out, "kiln_ingested_samples_total %lu\n",
		   (unsigned long)atomic_load(&m->ingested_samples));
	help(out, "kiln_ingested_bytes_total", "counter", "Raw pprof bytes received by WriteRaw.");
	buf_printf(out, "kiln_ingested_bytes_total %lu\n",
		   (unsigned long)atomic_load(&m->ingested_bytes));
	help(out, "kiln_ingest_errors_total", "counter", "Profiles rejected or failed to store.");
	buf_printf(out, "kiln_ingest_errors_total %lu\n",
		   (unsigned long)atomic_load(&m->ingest_errors));
	otlp_metrics_render(out);
	protocol_metrics_render(out);
	help(out, "kiln_connections_total", "counter", "TCP connections accepted.");
	buf_printf(out, "kiln_connections_total %lu\n",
		   (unsigned long)atomic_load(&m->connections_total));
	help(out, "kiln_connections_refused_total", "counter",
	     "Connections closed at once: over --max-connections-per-client, or at "
	     "--max-connections with every connection busy; or a request header refused.");
	buf_printf(out, "kiln_connections_refused_total %lu\n",
		   (unsigned long)atomic_load(&m->connections_refused));
	help(out, "kiln_connections_evicted_total", "counter",
	     "Idle connections closed to make room at --max-connections.");
	buf_printf(out, "kiln_connections_evicted_total %lu\n",
		   (unsigned long)atomic_load(&m->connections_evicted));
	help(out, "kiln_connections_timed_out_total", "counter",
	     "Connections closed for a missed deadline (header, body rate, idle HTTP/1.1).");
	buf_printf(out, "kiln_connections_timed_out_total %lu\n",
		   (unsigned long)atomic_load(&m->connections_timed_out));
	help(out, "kiln_requests_over_inflight_budget_total", "counter",
	     "Requests refused because --max-inflight-request-bytes was full.");
	buf_printf(out, "kiln_requests_over_inflight_budget_total %lu\n",
		   (unsigned long)atomic_load(&m->requests_over_budget));

	help(out, "kiln_grpc_requests_total", "counter", "gRPC calls by method.");
	render_grpc_family(out, m, ROUTE_REQUESTS);
	help(out, "kiln_grpc_request_errors_total", "counter", "gRPC calls not answered OK.");
	render_grpc_family(out, m, ROUTE_ERRORS);
	help(out, "kiln_grpc_request_duration_seconds", "histogram", "gRPC call latency.");
	render_grpc_family(out, m, ROUTE_DURATION);

	help(out, "kiln_http_requests_total", "counter", "HTTP/1.1 requests by route.");
	render_http_family(out, m, ROUTE_REQUESTS);
	help(out, "kiln_http_request_errors_total", "counter", "HTTP requests answered 5xx.");
	render_http_family(out, m, ROUTE_ERRORS);
	help(out, "kiln_http_request_duration_seconds", "histogram", "HTTP request latency.");
	render_http_family(out, m, ROUTE_DURATION);

	if (s->store)
		store_get_stats(s->store, &st);
	const struct {
		const char *name, *type, *help;
		uint64_t v;
	} gauges[] = {
	    {"kiln_store_series", "gauge", "Series in the store.", st.series},
	    {"kiln_store_sample_rows", "gauge", "Sample rows (head and blocks).", st.sample_rows},
	    {"kiln_store_head_rows", "gauge", "Sample rows in the in-memory head.", st.head_rows},
	    {"kiln_store_blocks", "gauge", "Immutable blocks on disk.", st.blocks},
	    {"kiln_store_disk_bytes", "gauge", "Bytes on disk (blocks and WAL).", st.disk_bytes},
	    {"kiln_store_wal_bytes", "gauge", "Bytes in the write-ahead log.", st.wal_bytes},
	    {"kiln_store_stacks", "gauge", "Distinct stacks in the metastore.", st.stacks},
	    {"kiln_store_locations", "gauge", "Distinct locations in the metastore.", st.locations},
	};
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++) {
		help(out, gauges[i].name, gauges[i].type, gauges[i].help);
		buf_printf(out, "%s %lu\n", gauges[i].name, (unsigned long)gauges[i].v);
	}
	help(out, "kiln_wal_fsync_duration_seconds", "summary", "WAL fsync latency.");
	buf_printf(out, "kiln_wal_fsync_duration_seconds_sum %.9f\n",
		   (double)st.wal_fsync_ns_total / 1e9);
	buf_printf(out, "kiln_wal_fsync_duration_seconds_count %lu\n",
		   (unsigned long)st.wal_fsyncs);
	help(out, "kiln_ready", "gauge", "1 while the server is ready.");
	buf_printf(out, "kiln_ready %d\n", atomic_load(&s->ready) ? 1 : 0);
	ext_scrape_metrics(s, out);
	pyroscope_metrics_render(out);
	stream_metrics_render(s, out);
	health_metrics_render(out);
	return process_metrics_render(out);
}
