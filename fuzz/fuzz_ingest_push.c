/*
 * fuzz_ingest_push.c — the IngestService/Push messages (common/ingest_proto.c):
 * the request decoder, the packed rows of every SeriesRows it accepts, and
 * the response decoder the agent runs on the server's answer.
 *
 * Input layout: byte 0 even: a PushRequest; odd: a PushResponse.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ingest_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_error err = {0};

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		struct ingest_push_response r;

		if (ingest_response_decode(data + 1, size - 1, &r, &err) == 0)
			free(r.acked);
		return 0;
	}
	struct arena *a = arena_new(0);
	struct ingest_push push;

	if (a && ingest_push_decode(data + 1, size - 1, a, &push, &err) == 0) {
		for (size_t i = 0; i < push.n_windows; i++) {
			const struct ingest_window *w = &push.windows[i];

			for (size_t j = 0; j < w->n_rows; j++) {
				const uint8_t *p = w->rows[j].rows, *end = p + w->rows[j].len;
				uint64_t ref = 0;
				int64_t v;

				while (ingest_rows_next(&p, end, &ref, &v) == 1)
					if (ref > UINT32_MAX)
						abort();
			}
			for (size_t j = 0; j < w->n_series; j++)
				for (size_t k = 0; k < w->series[j].n_labels; k++)
					if (strlen(w->series[j].labels[k].name) > size)
						abort();
		}
	}
	arena_free(a);
	return 0;
}
