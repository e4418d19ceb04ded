/*
 * fuzz_pprof_decode.c — libFuzzer target for the pprof decoder.
 *
 * Any input must either fail with an error message or decode to a profile
 * that satisfies the invariants; a decoded profile is then pushed through
 * every consumer (folded, top, merge, re-encode + decode) since those trust
 * the invariants.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_decode_opts opts = {.max_inflated_bytes = 16 << 20};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL, *q = NULL;
	struct pprof_builder *b;
	struct buf out = {0};
	struct pprof_top top;

	if (pprof_decode(data, size, &opts, &p, &err) != 0) {
		if (!err.msg[0])
			abort(); /* every failure must say why */
		return 0;
	}
	if (pprof_validate(pprof_profile_msg(p), &err) != 0)
		abort();
	if (pprof_profile_msg(p)->n_sample_type) {
		int ti = pprof_sample_type_index(p, NULL, &err);

		if (ti < 0 || pprof_folded(p, ti, &out) || pprof_top(p, ti, &top))
			abort();
		pprof_top_free(&top);
	}
	b = pprof_builder_new();
	if (!b || pprof_builder_merge(b, p, &err) || pprof_builder_merge(b, p, &err))
		abort();
	buf_reset(&out);
	if (pprof_encode(pprof_profile_msg(p), false, &out) ||
	    pprof_decode(out.data, out.len, NULL, &q, &err) ||
	    pprof_sample_count(q) != pprof_sample_count(p))
		abort();
	pprof_profile_free(q);
	q = NULL;
	buf_reset(&out);
	if (pprof_builder_encode(b, true, &out) || pprof_decode(out.data, out.len, NULL, &q, &err))
		abort();
	pprof_profile_free(q);
	pprof_builder_free(b);
	buf_free(&out);
	pprof_profile_free(p);
	return 0;
}
