/*
 * fuzz_grpcweb_frame.c — the gRPC-Web and Connect decoders of the server
 * (webrpc.h, pbjson.h): content types, gRPC-Web-text's base64, the
 * envelope walk, connect-timeout-ms, and Connect's JSON bodies read as
 * QueryService requests (and written back as JSON when they parse), and
 * server reflection's answer to any request bytes (reflection.h).
 *
 * Input layout: byte 0 selects the decoder, the rest is its input.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parca/query/v1alpha1/query.pb-c.h"
#include "server/pbjson.h"
#include "server/reflection.h"
#include "server/server.h"
#include "server/webrpc.h"

static void json_round_trip(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size)
{
	struct kiln_error err = {0};
	struct buf pb = {0}, js = {0};
	if (pbjson_to_proto(d, (const char *)data, size, &pb, &err) == 0) {
		/* What the JSON reader wrote must be a d, and print again. */
		if (pbjson_from_proto(d, pb.data ? pb.data : (const uint8_t *)"", pb.len, &js,
				      &err) != 0 &&
		    err.code != -ENOMEM)
			abort();
	}
	buf_free(&pb);
	buf_free(&js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	data++;
	size--;
	struct kiln_error err = {0};
	struct buf out = {0};
	switch (sel % 7) {
	case 0:
		(void)webrpc_protocol_of((const char *)data, size);
		break;
	case 1:
		if (webrpc_base64_decode(data, size, &out, &err) == 0) {
			/* Decoded bytes re-encode to at most the input's length. */
			struct buf again = {0};
			if (webrpc_base64_encode(out.data, out.len, &again) || again.len > size)
				abort();
			buf_free(&again);
		}
		break;
	case 2: {
		int n = webrpc_envelopes_check(data, size, sel & 0x80 ? 0x83 : 0x01, 1 << 20, &err);
		if (n == 0 && size != 0)
			abort();
		break;
	}
	case 3: {
		char s[16];
		size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
		memcpy(s, data, n);
		s[n] = '\0';
		int64_t t = webrpc_connect_timeout_parse(s);
		if (t < -1)
			abort();
		break;
	}
	case 4:
		json_round_trip(&parca__query__v1alpha1__query_request__descriptor, data, size);
		break;
	case 5:
		json_round_trip(sel & 0x80
				    ? &parca__query__v1alpha1__query_range_request__descriptor
				    : &parca__query__v1alpha1__labels_request__descriptor,
				data, size);
		break;
	case 6: {
		struct grpc_call call = {.req = data, .req_len = size};
		rpc_reflection_info(&call);
		buf_free(&call.resp);
		break;
	}
	}
	buf_free(&out);
	return 0;
}
