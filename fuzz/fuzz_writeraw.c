/*
 * fuzz_writeraw.c — WriteRaw's request decoder: the protobuf request, the
 * label checks and every embedded pprof (gzip-bounded), without a store.
 */
#include <stddef.h>
#include <stdint.h>

#include "server/ingest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_new(0);
	struct ingest_batch b;
	struct kiln_error err = {0};
	struct ingest_limits lim = {.max_inflate = 16 << 20, .now_ms = 1};
	if (ingest_prepare(data, size, &lim, a, &b, &err) == 0)
		ingest_batch_release(&b);
	arena_free(a);
	return 0;
}
