/*
 * fuzz_otlp_convert.c — OTLP profiles ingest without a store: an
 * ExportProfilesServiceRequest (protobuf bytes) unpacked and converted into
 * pprof profiles and labels, and for the row path (otlp_convert_rows).
 * Every failure must say why; an accepted profile must be a valid pprof
 * profile with __name__ first; the row path must accept and reject the
 * same profiles with the same messages, its stack table be a valid pprof
 * and every row refer to a stack of it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "otlp/otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_new(0);
	struct kiln_error err = {0};
	struct otlp_result res = {0};
	struct otlp_rows rows = {0};
	struct kiln_error rows_err = {0};
	int rows_rc = 0;
	struct otlp_limits lim = {.now_ms = 4102444800000LL /* 2100 */,
				  .min_time_ms = 0,
				  .max_future_skew_ms = 3600 * 1000};
	otlp_request *req;
	int rc = otlp_request_unpack(data, size, a, &req, &err);

	if (rc == 0) {
		rows_rc = otlp_convert_rows(req, &lim, a, &rows, &rows_err);
		rc = otlp_convert(req, &lim, a, &res, &err);
		if (rows_rc != rc || (rc && strcmp(rows_err.msg, err.msg) != 0))
			abort();
	}
	if (rc && !err.msg[0])
		abort(); /* every failure says why */
	if (rc == 0) {
		if (res.n_profiles + res.n_rejected != res.n_seen)
			abort();
		if (res.n_rejected && !res.error_message[0])
			abort();
		for (size_t i = 0; i < res.n_profiles; i++) {
			struct kiln_error verr = {0};
			const struct otlp_profile *p = &res.profiles[i];
			if (p->n_labels < 1 || strcmp(p->labels[0].name, "__name__") != 0 ||
			    pprof_validate(pprof_profile_msg(p->profile), &verr))
				abort();
		}
	}
	if (rc == 0) {
		struct kiln_error verr = {0};

		if (rows.n_profiles != res.n_profiles || rows.n_rejected != res.n_rejected ||
		    strcmp(rows.error_message, res.error_message) != 0)
			abort();
		if (rows.stacks && pprof_validate(pprof_profile_msg(rows.stacks), &verr))
			abort();
		for (size_t i = 0; i < rows.n_profiles; i++)
			for (size_t k = 0; k < rows.profiles[i].n; k++)
				if (rows.profiles[i].stacks[k] >= rows.n_stacks)
					abort();
	}
	otlp_rows_release(&rows);
	otlp_result_release(&res);
	arena_free(a);
	return 0;
}
