/*
 * handlers_otlp.c — OpenTelemetry profiles ingest: gRPC
 * ProfilesService/Export and HTTP POST /v1development/profiles (protobuf or
 * JSON, optionally gzip-compressed).
 *
 * Both transports share otlp_ingest: decode (JSON is first re-encoded as
 * protobuf), convert for the row path (src/otlp/rows.c: a bad dictionary
 * fails the request, a bad profile is rejected alone and reported as OTLP
 * partial success), then intern the request's stacks once and each
 * profile's series with the store's own checks, and write the rows as
 * fsynced WAL records (store_write_groups).
 * A request is answered only once every accepted profile is durable.
 *
 * The HTTP body's format is recognised by its bytes rather than headers: a
 * gzip stream starts 1f 8b, a JSON object with '{' after optional
 * whitespace, and an ExportProfilesServiceRequest never starts with '{'
 * (0x7b would be field 15 as a group, which the message does not have).
 * The answer uses the request's format.
 */
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "common/clock.h"
#include "common/gzip.h"
#include "common/log.h"
#include "otlp/otlp.h"
#include "server/handlers.h"
#include "server/ingest.h"
#include "server/internal.h"

/* Process-wide OTLP counters (rendered into /metrics by metrics.c). */
static struct {
	_Atomic uint64_t requests, request_errors;
	_Atomic uint64_t profiles_accepted, profiles_rejected;
	_Atomic uint64_t samples_accepted, samples_rejected;
} otlp_counters;

void otlp_metrics_render(struct buf *out)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} rows[] = {
	    {"kiln_otlp_requests_total", "OTLP profile export requests (gRPC and HTTP).", 0},
	    {"kiln_otlp_request_errors_total",
	     "OTLP export requests refused whole (bad body or dictionary, store failure).", 1},
	    {"kiln_otlp_profiles_accepted_total", "OTLP profiles stored.", 2},
	    {"kiln_otlp_profiles_rejected_total",
	     "OTLP profiles rejected (partial success, or with their request).", 3},
	    {"kiln_otlp_samples_accepted_total", "OTLP samples of the stored profiles.", 4},
	    {"kiln_otlp_samples_rejected_total", "OTLP samples of the rejected profiles.", 5},
	};
	_Atomic uint64_t *c[] = {&otlp_counters.requests,	   &otlp_counters.request_errors,
				 &otlp_counters.profiles_accepted, &otlp_counters.profiles_rejected,
				 &otlp_counters.samples_accepted,  &otlp_counters.samples_rejected};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %lu\n", rows[i].name,
			   rows[i].help, rows[i].name, rows[i].name,
			   (unsigned long)atomic_load(c[rows[i].off]));
}

/* Counts what a request that failed whole carried. */
static void count_failed_request(const otlp_request *req)
{
	uint64_t profiles = 0, samples = 0;

	atomic_fetch_add(&otlp_counters.request_errors, 1);
	if (!req)
		return;
	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++) {
			const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			    req->resource_profiles[i]->scope_profiles[j];
			profiles += sp->n_profiles;
			for (size_t k = 0; k < sp->n_profiles; k++)
				samples += sp->profiles[k]->n_samples;
		}
	atomic_fetch_add(&otlp_counters.profiles_rejected, profiles);
	atomic_fetch_add(&otlp_counters.samples_rejected, samples);
}

/*
 * Decodes, converts and stores one request (protobuf bytes). On success
 * *rejected and msg (size msg_size) say what partial success to report.
 * Returns 0 or a negative errno with err set: -EINVAL for a bad request
 * (including one whose every profile was rejected), else the store's error.
 */
static int otlp_ingest(struct server *s, const uint8_t *body, size_t len, int64_t *rejected,
		       char *msg, size_t msg_size, struct kiln_error *err)
{
	struct arena *a = arena_new(0);
	otlp_request *req = NULL;
	struct otlp_rows res = {0};
	int64_t skew = server_config(s)->ingest_max_future_skew_ms;
	struct otlp_limits lim = {.now_ms = realtime_ms(),
				  .min_time_ms = INGEST_MIN_TIME_MS,
				  .max_future_skew_ms =
				      skew > 0 ? skew : INGEST_DEFAULT_FUTURE_SKEW_MS};
	int rc;

	*rejected = 0;
	msg[0] = 0;
	if (!a)
		return kiln_error_set(err, ENOMEM, "out of memory");
	rc = otlp_request_unpack(body, len, a, &req, err);
	if (rc)
		goto fail;
	rc = otlp_convert_rows(req, &lim, a, &res, err);
	if (rc)
		goto fail;
	if (res.n_profiles == 0 && res.n_rejected > 0) {
		rc = kiln_error_set(err, EINVAL, "every profile was rejected: %s",
				    res.error_message);
		goto fail;
	}
	if ((rc = otlp_rows_store(server_store(s), &res, err)))
		goto fail;

	atomic_fetch_add(&otlp_counters.profiles_accepted, res.n_profiles);
	atomic_fetch_add(&otlp_counters.profiles_rejected, res.n_rejected);
	atomic_fetch_add(&otlp_counters.samples_accepted, res.samples_accepted);
	atomic_fetch_add(&otlp_counters.samples_rejected, res.samples_rejected);
	*rejected = (int64_t)res.n_rejected;
	snprintf(msg, msg_size, "%s", res.error_message);
	otlp_rows_release(&res);
	arena_free(a);
	return 0;
fail:
	count_failed_request(req);
	otlp_rows_release(&res);
	arena_free(a);
	return rc;
}

void rpc_otlp_export(struct grpc_call *c)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp =
	    OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess ps =
	    OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
	struct kiln_error err = {0};
	char msg[1024];
	int64_t rejected;
	int rc;

	atomic_fetch_add(&otlp_counters.requests, 1);
	rc = otlp_ingest(c->srv, c->req, c->req_len, &rejected, msg, sizeof(msg), &err);
	if (rc) {
		int code = rc == -EFBIG ? GRPC_STATUS_RESOURCE_EXHAUSTED : grpc_code_from_errno(rc);
		grpc_fail(c, code, "%s", err.msg[0] ? err.msg : "export failed");
		log_debug("OTLP Export: %s", err.msg);
		return;
	}
	if (rejected) {
		ps.rejected_profiles = rejected;
		ps.error_message = msg;
		resp.partial_success = &ps;
	}
	size_t n = protobuf_c_message_get_packed_size(&resp.base);
	if (buf_reserve(&c->resp, n)) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	c->resp.len = protobuf_c_message_pack(&resp.base, c->resp.data);
}

static bool body_is_json(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return i < len && p[i] == '{';
}

void http_otlp_profiles(const struct http_request *req, struct http_response *resp)
{
	struct server *s = req->srv;
	struct buf inflated = {0}, pb = {0};
	struct kiln_error err = {0};
	const uint8_t *body = req->body;
	size_t len = req->body_len;
	char msg[1024];
	int64_t rejected;
	bool json;
	int rc = 0;

	atomic_fetch_add(&otlp_counters.requests, 1);
	if (gzip_is_gzip(body, len)) {
		rc = gzip_inflate(body, len, server_config(s)->grpc_max_msg_bytes, &inflated, &err);
		if (rc) {
			kiln_error_prefix(&err, "gzip body: ");
			goto fail;
		}
		body = inflated.data;
		len = inflated.len;
	}
	json = body_is_json(body, len);
	if (json) {
		rc = otlp_json_to_protobuf((const char *)body, len, &pb, &err);
		if (rc)
			goto fail;
		body = pb.data;
		len = pb.len;
	}
	rc = otlp_ingest(s, body ? body : (const uint8_t *)"", len, &rejected, msg, sizeof(msg),
			 &err);
	if (rc)
		goto done;
	if (json) {
		resp->content_type = "application/json";
		rc = otlp_response_json(rejected, msg, &resp->body);
	} else {
		Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
		    r = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
		Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
		    ps =
			OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
		if (rejected) {
			ps.rejected_profiles = rejected;
			ps.error_message = msg;
			r.partial_success = &ps;
		}
		size_t n = protobuf_c_message_get_packed_size(&r.base);
		resp->content_type = "application/x-protobuf";
		rc = buf_reserve(&resp->body, n);
		if (rc == 0)
			resp->body.len = protobuf_c_message_pack(&r.base, resp->body.data);
	}
	if (rc)
		rc = kiln_error_set(&err, ENOMEM, "out of memory");
	else
		resp->status = 200;
	goto done;
fail:
	atomic_fetch_add(&otlp_counters.request_errors, 1);
done:
	if (rc) {
		http_error(resp, rc == -EFBIG ? 413 : http_status_from_errno(rc), -1, "%s",
			   err.msg[0] ? err.msg : "export failed");
		log_debug("OTLP HTTP export: %s", err.msg);
	}
	buf_free(&inflated);
	buf_free(&pb);
}
