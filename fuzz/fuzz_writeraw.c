/*
 * fuzz_writeraw.c — WriteRaw's request decoder: the protobuf request, the
 * label checks and every embedded pprof (gzip-bounded), without a store;
 * twice through one borrowed decoder, as the server's ingest threads reuse
 * decode memory from request to request.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/ingest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ingest_decoders *ds = ingest_decoders_new(1);
	struct ingest_limits lim = {.max_inflate = 16 << 20,
				    .now_ms = 4102444800000LL /* 2100 */,
				    .decoder = ingest_decoder_take(ds)};
	int first = 1;

	for (int i = 0; i < 2; i++) {
		struct arena *a = arena_new(0);
		struct ingest_batch b;
		struct kiln_error err = {0};
		int rc = ingest_prepare(data, size, &lim, a, &b, &err);

		if (rc == 0)
			ingest_batch_release(&b);
		else if (!err.msg[0])
			abort(); /* every failure says why */
		if (i == 0)
			first = rc;
		else if (rc != first)
			abort(); /* reused memory changes nothing */
		arena_free(a);
	}
	ingest_decoder_give(ds, lim.decoder);
	ingest_decoders_free(ds);
	return 0;
}
