/*
 * test_webrpc.c — the pure parts of gRPC-Web and Connect (webrpc.h) and the
 * proto3 JSON mapping (pbjson.h): content types, base64 as gRPC-Web-text
 * sends it, envelopes, trailer frames, Connect's codes and timeouts, and
 * JSON to protobuf and back for QueryService messages, with the errors a
 * client sees for bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parca/query/v1alpha1/query.pb-c.h"
#include "server/cors.h"
#include "server/pbjson.h"
#include "server/webrpc.h"

static void test_content_types(void **state)
{
#define P(s) webrpc_protocol_of(s, strlen(s))
	assert_int_equal(P("application/grpc-web"), WEBRPC_GRPC_WEB);
	assert_int_equal(P("application/grpc-web+proto"), WEBRPC_GRPC_WEB);
	assert_int_equal(P("Application/GRPC-Web+Proto; charset=x"), WEBRPC_GRPC_WEB);
	assert_int_equal(P("application/grpc-web-text"), WEBRPC_GRPC_WEB_TEXT);
	assert_int_equal(P("application/grpc-web-text+proto"), WEBRPC_GRPC_WEB_TEXT);
	assert_int_equal(P("application/proto"), WEBRPC_CONNECT_PROTO);
	assert_int_equal(P("application/json; charset=utf-8"), WEBRPC_CONNECT_JSON);
	assert_int_equal(P("application/connect+proto"), WEBRPC_CONNECT_STREAM_PROTO);
	assert_int_equal(P("application/connect+json"), WEBRPC_CONNECT_STREAM_JSON);
	assert_int_equal(P("application/grpc-web+json"), WEBRPC_UNSUPPORTED);
	assert_int_equal(P("application/connect+thrift"), WEBRPC_UNSUPPORTED);
	assert_int_equal(P("application/grpc"), WEBRPC_NONE);
	assert_int_equal(P("application/grpc+proto"), WEBRPC_NONE);
	assert_int_equal(P("text/plain"), WEBRPC_NONE);
	assert_int_equal(P(""), WEBRPC_NONE);
	/* Bare proto/JSON is Connect only on a method's path and POST. */
	assert_int_equal(webrpc_select("POST", "/api/v1/labels", "application/json"), WEBRPC_NONE);
	assert_int_equal(
	    webrpc_select("GET", "/parca.query.v1alpha1.QueryService/Labels", "application/json"),
	    WEBRPC_NONE);
	assert_int_equal(
	    webrpc_select("POST", "/parca.query.v1alpha1.QueryService/Labels", "application/json"),
	    WEBRPC_CONNECT_JSON);
	assert_int_equal(webrpc_select("POST", "/no.Such/Method", "application/grpc-web"),
			 WEBRPC_GRPC_WEB);
#undef P
}

static void test_base64(void **state)
{
	struct buf out = {0};
	struct kiln_error err = {0};
	/* Two padded chunks one after the other, as gRPC-Web-text may send. */
	const char *in = "AAAAAAE=\nAQ==";
	assert_int_equal(webrpc_base64_decode((const uint8_t *)in, strlen(in), &out, &err), 0);
	assert_int_equal(out.len, 6);
	assert_memory_equal(out.data, "\0\0\0\0\1\1", 6);
	buf_free(&out);

	assert_int_equal(webrpc_base64_decode((const uint8_t *)"AA*A", 4, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "byte 2"));
	memset(&err, 0, sizeof(err));
	assert_int_equal(webrpc_base64_decode((const uint8_t *)"AAAAA", 5, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "multiple of 4"));
	memset(&err, 0, sizeof(err));
	assert_int_equal(webrpc_base64_decode((const uint8_t *)"AB==", 4, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "non-canonical"));
	assert_int_equal(webrpc_base64_decode((const uint8_t *)"A===", 4, &out, &err), -EBADMSG);
	buf_free(&out);

	for (size_t n = 0; n < 7; n++) {
		const uint8_t raw[] = {0xfb, 0xff, 0x00, 0x10, 0x80, 0x3e, 0x7f};
		struct buf enc = {0}, dec = {0};
		assert_int_equal(webrpc_base64_encode(raw, n, &enc), 0);
		assert_int_equal(enc.len, (n + 2) / 3 * 4);
		assert_int_equal(webrpc_base64_decode(enc.data, enc.len, &dec, &err), 0);
		assert_int_equal(dec.len, n);
		if (n)
			assert_memory_equal(dec.data, raw, n);
		buf_free(&enc);
		buf_free(&dec);
	}
}

static void test_envelopes(void **state)
{
	struct kiln_error err = {0};
	struct buf b = {0};
	assert_int_equal(webrpc_append_envelope(&b, 0, (const uint8_t *)"abc", 3), 0);
	assert_int_equal(webrpc_append_trailer(&b, 5, "no 100% match\n"), 0);
	assert_int_equal(webrpc_envelopes_check(b.data, b.len, 0x81, 100, &err), 2);
	/* The trailer frame: flag 0x80, percent-encoded message. */
	const char *want = "grpc-status: 5\r\ngrpc-message: no 100%25 match%0A\r\n";
	assert_int_equal(b.data[8], 0x80);
	assert_int_equal(b.len - 8 - 5, strlen(want));
	assert_memory_equal(b.data + 13, want, strlen(want));
	/* Flags outside the allowed set, truncation, oversize. */
	assert_int_equal(webrpc_envelopes_check(b.data, b.len, 0x01, 100, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "envelope 1 at byte 8: flags 0x80"));
	memset(&err, 0, sizeof(err));
	assert_int_equal(webrpc_envelopes_check(b.data, b.len - 1, 0x81, 100, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "truncated"));
	assert_int_equal(webrpc_envelopes_check(b.data, 3, 0x81, 100, &err), -EBADMSG);
	assert_int_equal(webrpc_envelopes_check(b.data, b.len, 0x81, 2, &err), -EFBIG);
	assert_int_equal(webrpc_envelopes_check(b.data, 0, 0x81, 2, &err), 0);
	buf_free(&b);
}

static void test_connect_codes(void **state)
{
	assert_string_equal(webrpc_connect_code(GRPC_STATUS_NOT_FOUND), "not_found");
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_NOT_FOUND), 404);
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_UNAUTHENTICATED), 401);
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_PERMISSION_DENIED), 403);
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_RESOURCE_EXHAUSTED), 429);
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_UNIMPLEMENTED), 501);
	assert_int_equal(webrpc_connect_http_status(GRPC_STATUS_DEADLINE_EXCEEDED), 504);
	assert_string_equal(webrpc_connect_code(99), "unknown");
	struct buf b = {0};
	assert_int_equal(webrpc_append_connect_error(&b, 3, "bad \"q\""), 0);
	buf_terminate(&b);
	assert_string_equal((char *)b.data,
			    "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"q\\\"\"}");
	buf_free(&b);
	assert_int_equal(webrpc_connect_timeout_parse("1500"), 1500000000LL);
	assert_int_equal(webrpc_connect_timeout_parse("12345678901"), -1);
	assert_int_equal(webrpc_connect_timeout_parse("1s"), -1);
	assert_int_equal(webrpc_connect_timeout_parse(""), -1);
}

static void test_cors(void **state)
{
	assert_null(cors_allow_origin(NULL, "http://a"));
	assert_null(cors_allow_origin("", "http://a"));
	assert_string_equal(cors_allow_origin("*", NULL), "*");
	assert_string_equal(cors_allow_origin("http://b, http://a ", "http://a"), "http://a");
	assert_null(cors_allow_origin("http://b,http://a", "http://c"));
	assert_null(cors_allow_origin("http://b", NULL));
}

/* JSON in -> protobuf -> JSON out. */
static char *round_trip(const ProtobufCMessageDescriptor *d, const char *json)
{
	struct buf pb = {0}, out = {0};
	struct kiln_error err = {0};
	if (pbjson_to_proto(d, json, strlen(json), &pb, &err))
		fail_msg("pbjson_to_proto: %s", err.msg);
	assert_int_equal(pbjson_from_proto(d, pb.data, pb.len, &out, &err), 0);
	buf_terminate(&out);
	buf_free(&pb);
	return (char *)buf_steal(&out, &(size_t){0});
}

static void test_json(void **state)
{
	const ProtobufCMessageDescriptor *q = &parca__query__v1alpha1__query_request__descriptor;
	char *s = round_trip(q, "{\"mode\":\"MODE_MERGE\",\"merge\":{\"query\":\"a:b:c:d:e{}\","
				"\"start\":\"2024-01-02T03:04:05.250+01:00\",\"end\":null},"
				"\"report_type\":2,\"nodeTrimThreshold\":0.5}");
	assert_string_equal(s, "{\"mode\":\"MODE_MERGE\",\"merge\":{\"query\":\"a:b:c:d:e{}\","
			       "\"start\":\"2024-01-02T02:04:05.250Z\"},\"reportType\":"
			       "\"REPORT_TYPE_TOP\",\"nodeTrimThreshold\":0.5}");
	free(s);
	s = round_trip(&parca__query__v1alpha1__query_range_request__descriptor,
		       "{\"query\":\"x\",\"limit\":\"7\",\"step\":\"-1.5s\"}");
	assert_string_equal(s, "{\"query\":\"x\",\"limit\":7,\"step\":\"-1.500s\"}");
	free(s);
	s = round_trip(&parca__query__v1alpha1__labels_request__descriptor, "{}");
	assert_string_equal(s, "{}");
	free(s);
	/* 64-bit integers go out as strings; bytes as base64. */
	s = round_trip(&parca__query__v1alpha1__query_response__descriptor,
		       "{\"pprof\":\"AAEC/w==\",\"total\":9007199254740993}");
	assert_string_equal(s, "{\"pprof\":\"AAEC/w==\",\"total\":\"9007199254740993\"}");
	free(s);

	struct buf pb = {0};
	struct kiln_error err = {0};
	const char *bad[][2] = {
	    {"{\"merge\":{\"start\":5}}", "merge.start: expected an RFC 3339 timestamp"},
	    {"{\"merge\":{\"start\":\"2024-13-01T00:00:00Z\"}}", "merge.start"},
	    {"{\"mode\":\"MODE_NOPE\"}", "mode: expected a value name of the enum"},
	    {"{\"nope\":1}", "nope: parca.query.v1alpha1.QueryRequest has no such field"},
	    {"{\"mode\":", "JSON body:"},
	    {"[]", "(top): expected an object"},
	    {"{\"diff\":{\"a\":{\"merge\":{\"query\":7}}}}",
	     "diff.a.merge.query: expected a string"},
	    {"{\"mode\":1,\"mode\":2}", "duplicate"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		buf_reset(&pb);
		memset(&err, 0, sizeof(err));
		assert_int_equal(pbjson_to_proto(q, bad[i][0], strlen(bad[i][0]), &pb, &err),
				 -EINVAL);
		if (!strstr(err.msg, bad[i][1]))
			fail_msg("%s: error %s, want %s", bad[i][0], err.msg, bad[i][1]);
	}
	buf_reset(&pb);
	memset(&err, 0, sizeof(err));
	assert_int_equal(pbjson_to_proto(&parca__query__v1alpha1__query_range_request__descriptor,
					 "{\"limit\":-1}", 12, &pb, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "limit: expected an unsigned 32-bit integer"));
	buf_free(&pb);

	const ProtobufCMessageDescriptor *req, *resp;
	assert_int_equal(
	    pbjson_method_types("/parca.query.v1alpha1.QueryService/Query", &req, &resp), 0);
	assert_ptr_equal(req, q);
	assert_int_equal(pbjson_method_types("/x.Y/Z", &req, &resp), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_content_types), cmocka_unit_test(test_base64),
	    cmocka_unit_test(test_envelopes),	  cmocka_unit_test(test_connect_codes),
	    cmocka_unit_test(test_cors),	  cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
