/*
 * webrpc.c — one gRPC-Web or Connect call, end to end (webrpc.h): checks
 * the protocol's headers, unwraps the request message (base64, envelope or
 * JSON), passes the gate, runs the method's handler from
 * server_grpc_methods[] on the calling thread, and wraps the answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/health.h"
#include "server/internal.h"
#include "server/pbjson.h"
#include "server/webrpc.h"

static bool is_connect_unary(enum webrpc_protocol p)
{
	return p == WEBRPC_CONNECT_PROTO || p == WEBRPC_CONNECT_JSON;
}

static bool is_json(enum webrpc_protocol p)
{
	return p == WEBRPC_CONNECT_JSON || p == WEBRPC_CONNECT_STREAM_JSON;
}

const char *webrpc_response_type(enum webrpc_protocol p)
{
	switch (p) {
	case WEBRPC_GRPC_WEB:
		return "application/grpc-web+proto";
	case WEBRPC_GRPC_WEB_TEXT:
		return "application/grpc-web-text+proto";
	case WEBRPC_CONNECT_PROTO:
		return "application/proto";
	case WEBRPC_CONNECT_JSON:
		return "application/json";
	case WEBRPC_CONNECT_STREAM_PROTO:
		return "application/connect+proto";
	case WEBRPC_CONNECT_STREAM_JSON:
		return "application/connect+json";
	default:
		return "application/json";
	}
}

/* The whole answer: msg (NULL on failure) then the status, in p's form. */
static void respond(enum webrpc_protocol p, int code, const char *message, const uint8_t *msg,
		    size_t len, struct http_response *resp)
{
	struct buf body = {0};
	int rc = 0;

	buf_reset(&resp->body);
	resp->content_type = webrpc_response_type(p);
	resp->status = 200;
	if (webrpc_is_grpc_web(p) || p == WEBRPC_UNSUPPORTED) {
		if (code == GRPC_STATUS_OK && msg)
			rc = webrpc_append_envelope(&body, 0, msg, len);
		if (rc == 0)
			rc = webrpc_append_trailer(&body, code, message);
		if (p == WEBRPC_UNSUPPORTED)
			resp->content_type = "application/grpc-web+proto";
	} else if (is_connect_unary(p)) {
		if (code == GRPC_STATUS_OK) {
			rc = buf_append(&body, msg ? msg : (const uint8_t *)"", msg ? len : 0);
		} else {
			resp->status = webrpc_connect_http_status(code);
			resp->content_type = "application/json";
			rc = webrpc_append_connect_error(&body, code, message);
		}
	} else { /* Connect streaming */
		struct buf end = {0};
		if (code == GRPC_STATUS_OK && msg)
			rc = webrpc_append_envelope(&body, 0, msg, len);
		if (rc == 0 && code == GRPC_STATUS_OK)
			rc = buf_append_str(&end, "{}");
		else if (rc == 0) {
			rc = buf_append_str(&end, "{\"error\":");
			if (rc == 0)
				rc = webrpc_append_connect_error(&end, code, message);
			if (rc == 0)
				rc = buf_append_str(&end, "}");
		}
		if (rc == 0)
			rc = webrpc_append_envelope(&body, 0x02, end.data, end.len);
		buf_free(&end);
	}
	if (rc == 0 && p == WEBRPC_GRPC_WEB_TEXT) {
		struct buf text = {0};
		rc = webrpc_base64_encode(body.data, body.len, &text);
		buf_free(&body);
		body = text;
	}
	if (rc) {
		buf_free(&body);
		resp->status = 503;
		resp->content_type = "text/plain; charset=utf-8";
		buf_append_str(&resp->body, "out of memory for the response\n");
		return;
	}
	buf_free(&resp->body);
	resp->body = body;
}

void webrpc_fail(enum webrpc_protocol p, int code, const char *message, struct http_response *resp)
{
	respond(p, code, message, NULL, 0, resp);
}

int webrpc_authorize(struct server *s, enum webrpc_protocol p, const char *path,
		     const char *authorization, struct http_response *resp)
{
	const struct grpc_method *m = server_find_grpc(path, NULL);
	struct grpc_call call = {0};
	if (!m)
		return 0;
	int rc = server_authorize_grpc(s, m, authorization, &call);
	if (rc)
		webrpc_fail(p, call.status, call.message, resp);
	if (rc == -EACCES)
		resp->www_authenticate = authorization && *authorization
					     ? "Bearer realm=\"kiln\", error=\"invalid_token\""
					     : "Bearer realm=\"kiln\"";
	return rc;
}

/* The request message into msg and len (pointing into req->body or owned),
 * or a status with why. */
static int unwrap_request(struct server *s, const struct webrpc_request *req, bool streaming,
			  const ProtobufCMessageDescriptor *req_type, struct buf *owned,
			  const uint8_t **msg, size_t *len, char *why, size_t why_cap)
{
	size_t max = server_config(s)->grpc_max_msg_bytes;
	struct kiln_error err = {0};
	const uint8_t *body = req->body ? req->body : (const uint8_t *)"";
	size_t body_len = req->body_len;
	struct buf decoded = {0};
	int code = GRPC_STATUS_OK;

	if (req->proto == WEBRPC_GRPC_WEB_TEXT) {
		if (webrpc_base64_decode(body, body_len, &decoded, &err)) {
			code = GRPC_STATUS_INVALID_ARGUMENT;
			goto fail;
		}
		body = decoded.data ? decoded.data : (const uint8_t *)"";
		body_len = decoded.len;
	}
	if (is_connect_unary(req->proto)) {
		if (streaming) {
			snprintf(why, why_cap,
				 "%s is client-streaming: use application/connect+proto or "
				 "gRPC-Web, not Connect's unary protocol",
				 req->path);
			code = GRPC_STATUS_UNIMPLEMENTED;
			goto fail;
		}
		if (body_len > max) {
			snprintf(why, why_cap,
				 "request message of %zu bytes exceeds --grpc-max-message-size=%zu",
				 body_len, max);
			code = GRPC_STATUS_RESOURCE_EXHAUSTED;
			goto fail;
		}
		if (req->content_encoding && *req->content_encoding &&
		    strcmp(req->content_encoding, "identity") != 0) {
			snprintf(why, why_cap,
				 "content-encoding %.40s is not supported (send identity)",
				 req->content_encoding);
			code = GRPC_STATUS_UNIMPLEMENTED;
			goto fail;
		}
		if (req->proto == WEBRPC_CONNECT_JSON) {
			if (pbjson_to_proto(req_type, (const char *)body, body_len, owned, &err)) {
				code = GRPC_STATUS_INVALID_ARGUMENT;
				goto fail;
			}
			*msg = owned->data ? owned->data : (const uint8_t *)"";
			*len = owned->len;
		} else {
			if (buf_append(owned, body, body_len)) {
				code = GRPC_STATUS_RESOURCE_EXHAUSTED;
				goto fail;
			}
			*msg = owned->data ? owned->data : (const uint8_t *)"";
			*len = owned->len;
		}
		buf_free(&decoded);
		return 0;
	}
	/* Envelopes: gRPC-Web may end the body with a trailer frame (0x80) a
	 * client never needs to send; Connect's streaming request carries
	 * messages only. */
	int n = webrpc_envelopes_check(body, body_len, 0x01, max, &err);
	if (n < 0) {
		code = n == -EFBIG ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INVALID_ARGUMENT;
		goto fail;
	}
	if (streaming && is_json(req->proto)) {
		snprintf(why, why_cap, "%s takes protobuf messages: send application/connect+proto",
			 req->path);
		code = GRPC_STATUS_UNIMPLEMENTED;
		goto fail;
	}
	if (streaming) {
		if (buf_append(owned, body, body_len)) {
			code = GRPC_STATUS_RESOURCE_EXHAUSTED;
			goto fail;
		}
	} else {
		bool gzip = false;
		const char *enc =
		    webrpc_is_grpc_web(req->proto) ? req->grpc_encoding : req->content_encoding;
		if (enc && *enc && strcmp(enc, "identity") != 0) {
			if (strcmp(enc, "gzip") != 0) {
				snprintf(why, why_cap, "message encoding %.40s is not supported",
					 enc);
				code = GRPC_STATUS_UNIMPLEMENTED;
				goto fail;
			}
			gzip = true;
		}
		struct grpc_frame fr = {0};
		int rc = grpc_frame_unwrap(body, body_len, gzip, max, &fr, &err);
		if (rc) {
			code = rc == -EFBIG    ? GRPC_STATUS_RESOURCE_EXHAUSTED
			       : rc == -ENOSYS ? GRPC_STATUS_UNIMPLEMENTED
					       : GRPC_STATUS_INVALID_ARGUMENT;
			goto fail;
		}
		if (is_json(req->proto))
			rc = pbjson_to_proto(req_type, (const char *)fr.msg, fr.len, owned, &err);
		else
			rc = buf_append(owned, fr.msg, fr.len);
		free(fr.owned);
		if (rc) {
			code = rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED
					     : GRPC_STATUS_INVALID_ARGUMENT;
			goto fail;
		}
	}
	*msg = owned->data ? owned->data : (const uint8_t *)"";
	*len = owned->len;
	buf_free(&decoded);
	return 0;
fail:
	if (err.msg[0])
		snprintf(why, why_cap, "%s", err.msg);
	buf_free(&decoded);
	return code;
}

static int64_t deadline_of(const struct webrpc_request *req, char *why, size_t cap)
{
	int64_t t = -1;
	if (webrpc_is_grpc_web(req->proto) && req->grpc_timeout && *req->grpc_timeout) {
		t = grpc_timeout_parse(req->grpc_timeout, strlen(req->grpc_timeout));
		if (t < 0) {
			snprintf(why, cap, "grpc-timeout %.40s is malformed", req->grpc_timeout);
			return -1;
		}
	} else if (!webrpc_is_grpc_web(req->proto) && req->connect_timeout &&
		   *req->connect_timeout) {
		t = webrpc_connect_timeout_parse(req->connect_timeout);
		if (t < 0) {
			snprintf(why, cap, "connect-timeout-ms %.40s is malformed (1 to 10 digits)",
				 req->connect_timeout);
			return -1;
		}
	}
	return t < 0 ? 0 : mono_ns() + t;
}

void webrpc_serve(struct server *s, const struct webrpc_request *req, struct http_response *resp)
{
	enum webrpc_protocol p = req->proto;
	size_t idx = 0;
	const struct grpc_method *m = server_find_grpc(req->path, &idx);
	struct route_metrics *rm =
	    m ? &server_metrics(s)->grpc[idx] : &server_metrics(s)->unknown_grpc;
	const ProtobufCMessageDescriptor *req_type = NULL, *resp_type = NULL;
	struct grpc_call call = {.srv = s};
	struct buf owned = {0}, json = {0};
	char why[512] = "";
	int code = GRPC_STATUS_OK;

	protocol_count(webrpc_is_grpc_web(p) ? PROTOCOL_GRPC_WEB : PROTOCOL_CONNECT);
	if (p == WEBRPC_UNSUPPORTED) {
		code = GRPC_STATUS_UNIMPLEMENTED;
		snprintf(why, sizeof(why),
			 "only the proto codec is served for gRPC-Web and application/proto or "
			 "application/json for Connect");
		goto out;
	}
	if (!m) {
		code = GRPC_STATUS_UNIMPLEMENTED;
		snprintf(why, sizeof(why), "unknown method %.400s", req->path);
		goto out;
	}
	if (!webrpc_is_grpc_web(p) && req->connect_version && *req->connect_version &&
	    strcmp(req->connect_version, "1") != 0) {
		code = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(why, sizeof(why), "connect-protocol-version %.40s: only 1 is served",
			 req->connect_version);
		goto out;
	}
	if (server_authorize_grpc(s, m, req->authorization, &call) != 0) {
		code = call.status;
		snprintf(why, sizeof(why), "%s", call.message);
		if (code == GRPC_STATUS_UNAUTHENTICATED)
			resp->www_authenticate = "Bearer realm=\"kiln\"";
		goto out;
	}
	if (server_stopping(s)) {
		code = GRPC_STATUS_UNAVAILABLE;
		snprintf(why, sizeof(why), "server is shutting down");
		goto out;
	}
	pbjson_method_types(req->path, &req_type, &resp_type);
	if (is_json(p) && !req_type) {
		code = GRPC_STATUS_UNIMPLEMENTED;
		snprintf(why, sizeof(why), "%.400s has no JSON mapping; send application/proto",
			 req->path);
		goto out;
	}
	call.deadline_ns = deadline_of(req, why, sizeof(why));
	if (call.deadline_ns < 0) {
		code = GRPC_STATUS_INVALID_ARGUMENT;
		goto out;
	}
	code = unwrap_request(s, req, server_grpc_client_streaming(req->path), req_type, &owned,
			      &call.req, &call.req_len, why, sizeof(why));
	if (code != GRPC_STATUS_OK)
		goto out;
	if (call.deadline_ns && mono_ns() > call.deadline_ns) {
		code = GRPC_STATUS_DEADLINE_EXCEEDED;
		snprintf(why, sizeof(why), "deadline exceeded before the call started");
		goto out;
	}
	/* Watch streams over the streaming protocols (webrpc_watch_begin);
	 * asked in Connect's unary form, it answers the status now, as Check
	 * does. */
	const struct grpc_method *run =
	    health_is_watch(req->path) ? server_find_grpc("/grpc.health.v1.Health/Check", NULL) : m;
	run->handler(&call);
	code = call.status;
	snprintf(why, sizeof(why), "%s", call.message);
	if (code == GRPC_STATUS_OK && call.deadline_ns && mono_ns() > call.deadline_ns) {
		code = GRPC_STATUS_DEADLINE_EXCEEDED;
		snprintf(why, sizeof(why), "deadline exceeded");
	}
	if (code == GRPC_STATUS_OK && call.resp.len > server_config(s)->grpc_max_msg_bytes) {
		code = GRPC_STATUS_RESOURCE_EXHAUSTED;
		snprintf(why, sizeof(why),
			 "response message of %zu bytes exceeds --grpc-max-message-size=%zu",
			 call.resp.len, server_config(s)->grpc_max_msg_bytes);
	}
	if (code == GRPC_STATUS_OK && is_json(p)) {
		struct kiln_error err = {0};
		if (pbjson_from_proto(resp_type,
				      call.resp.data ? call.resp.data : (const uint8_t *)"",
				      call.resp.len, &json, &err)) {
			code = GRPC_STATUS_INTERNAL;
			snprintf(why, sizeof(why), "%s", err.msg);
		}
	}
out:
	if (code != GRPC_STATUS_OK)
		log_debug("%s %s: %s: %s", webrpc_family(p), req->path, grpc_status_name(code),
			  why);
	if (code == GRPC_STATUS_OK && is_json(p))
		respond(p, code, NULL, json.data ? json.data : (const uint8_t *)"", json.len, resp);
	else if (code == GRPC_STATUS_OK)
		respond(p, code, NULL, call.resp.data ? call.resp.data : (const uint8_t *)"",
			call.resp.len, resp);
	else
		respond(p, code, why, NULL, 0, resp);
	metrics_observe(rm, (uint64_t)(mono_ns() - (req->start_ns ? req->start_ns : mono_ns())),
			code != GRPC_STATUS_OK);
	buf_free(&json);
	buf_free(&owned);
	buf_free(&call.resp);
}

int webrpc_watch_begin(struct server *s, const struct webrpc_request *req, char *service,
		       size_t size, char *why, size_t why_cap)
{
	const ProtobufCMessageDescriptor *req_type = NULL, *resp_type = NULL;
	const struct grpc_method *m = server_find_grpc(req->path, NULL);
	struct grpc_call call = {.srv = s};
	struct buf owned = {0};
	const uint8_t *msg = NULL;
	size_t len = 0;
	int code;

	if (!m || !health_is_watch(req->path) || !webrpc_is_streaming(req->proto)) {
		snprintf(why, why_cap, "%.400s is not Watch over a streaming protocol", req->path);
		return GRPC_STATUS_INTERNAL;
	}
	if (!webrpc_is_grpc_web(req->proto) && req->connect_version && *req->connect_version &&
	    strcmp(req->connect_version, "1") != 0) {
		snprintf(why, why_cap, "connect-protocol-version %.40s: only 1 is served",
			 req->connect_version);
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	if (server_authorize_grpc(s, m, req->authorization, &call) != 0) {
		snprintf(why, why_cap, "%s", call.message);
		return call.status;
	}
	if (server_stopping(s)) {
		snprintf(why, why_cap, "server is shutting down");
		return GRPC_STATUS_UNAVAILABLE;
	}
	pbjson_method_types(req->path, &req_type, &resp_type);
	code = unwrap_request(s, req, false, req_type, &owned, &msg, &len, why, why_cap);
	if (code == GRPC_STATUS_OK && health_parse_request(msg, len, service, size)) {
		snprintf(why, why_cap, "not a HealthCheckRequest");
		code = GRPC_STATUS_INVALID_ARGUMENT;
	}
	buf_free(&owned);
	return code;
}
