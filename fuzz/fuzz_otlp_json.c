/*
 * fuzz_otlp_json.c — the OTLP/JSON reader: any bytes as a JSON
 * ExportProfilesServiceRequest, re-encoded as protobuf, which must then
 * unpack (the re-encoding writes only well-formed wire data), and go
 * through the conversion.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "otlp/otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf pb = {0};
	struct kiln_error err = {0};
	int rc = otlp_json_to_protobuf((const char *)data, size, &pb, &err);

	if (rc && !err.msg[0])
		abort(); /* every failure says why */
	if (rc == 0) {
		struct arena *a = arena_new(0);
		struct otlp_result res = {0};
		struct otlp_limits lim = {.now_ms = 4102444800000LL,
					  .max_future_skew_ms = 3600 * 1000};
		otlp_request *req;

		if (otlp_request_unpack(pb.data ? pb.data : (const uint8_t *)"", pb.len, a, &req,
					&err))
			abort(); /* what the reader writes always decodes */
		if (otlp_convert(req, &lim, a, &res, &err) == 0)
			otlp_result_release(&res);
		else if (!err.msg[0])
			abort();
		arena_free(a);
	}
	buf_free(&pb);
	return 0;
}
