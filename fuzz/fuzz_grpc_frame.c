/*
 * fuzz_grpc_frame.c — the gRPC request decoders of the server: message
 * framing (with and without gzip), the grpc-timeout header, and every
 * QueryService request message a client can send.
 *
 * Input layout: byte 0 selects the decoder, the rest is its input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/arena.h"
#include "parca/query/v1alpha1/query.pb-c.h"
#include "server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	data++;
	size--;
	struct kiln_error err = {0};
	struct grpc_frame fr;
	switch (sel % 4) {
	case 0:
	case 1:
		if (grpc_frame_unwrap(data, size, sel & 1, 1 << 20, &fr, &err) == 0) {
			/* The message must lie inside the body or the inflated copy. */
			if (!fr.owned && (fr.msg < data || fr.msg + fr.len > data + size))
				abort();
			free(fr.owned);
		}
		break;
	case 2:
		(void)grpc_timeout_parse((const char *)data, size);
		break;
	case 3: {
		struct arena *a = arena_new(0);
		ProtobufCAllocator alloc;
		arena_protobuf_allocator(a, &alloc);
		Parca__Query__V1alpha1__QueryRequest *q =
		    parca__query__v1alpha1__query_request__unpack(&alloc, size, data);
		if (q) {
			/* Re-encode: a decoded message must pack again. */
			size_t n = protobuf_c_message_get_packed_size(&q->base);
			uint8_t *out = malloc(n ? n : 1);
			protobuf_c_message_pack(&q->base, out);
			free(out);
		}
		(void)parca__query__v1alpha1__query_range_request__unpack(&alloc, size, data);
		(void)parca__query__v1alpha1__labels_request__unpack(&alloc, size, data);
		(void)parca__query__v1alpha1__values_request__unpack(&alloc, size, data);
		arena_free(a);
		break;
	}
	}
	return 0;
}
