/*
 * fuzz_pprof_decode.c — libFuzzer target for the pprof decoder.
 *
 * Any input must either fail with an error message or decode to a profile
 * that satisfies the invariants; a decoded profile is then pushed through
 * every consumer (folded, top, merge, re-encode + decode, naming every
 * location without lines) since those trust the invariants. The same input then goes through a pprof_decoder twice
 * (the second time into the memory the first left) and must give the same
 * profile, byte for byte once re-encoded.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* pprof_encode_symbolized with one frame for every location: the result
 * must decode, with a line at every location. */
static bool name_every_location(const struct pprof_profile *p, struct buf *out)
{
	static const struct pprof_frame_desc frame = {"fuzz", NULL, "fuzz.c", 1, 0};
	const pprof_msg *m = pprof_profile_msg(p);
	struct pprof_location_frames *lf = calloc(m->n_location + 1, sizeof(*lf));
	struct pprof_profile *q = NULL;
	bool ok;

	if (!lf)
		abort();
	for (size_t i = 0; i < m->n_location; i++)
		lf[i] = (struct pprof_location_frames){&frame, 1};
	buf_reset(out);
	ok = pprof_encode_symbolized(p, lf, true, out, NULL) == 0 &&
	     pprof_decode(out->data, out->len, NULL, &q, NULL) == 0;
	for (size_t i = 0; ok && i < pprof_profile_msg(q)->n_location; i++)
		ok = pprof_profile_msg(q)->location[i]->n_line > 0;
	pprof_profile_free(q);
	free(lf);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_decode_opts opts = {.max_inflated_bytes = 16 << 20};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL, *q = NULL;
	struct pprof_builder *b;
	struct buf out = {0};
	struct pprof_top top;

	struct pprof_decoder *d = pprof_decoder_new();
	struct buf again = {0};

	if (!d)
		abort();
	for (int i = 0; i < 2; i++) {
		struct kiln_error derr = {0};
		int rc = pprof_decoder_decode(d, data, size, &opts, &q, &derr);

		if (rc == 0)
			pprof_decoder_recycle(d, q);
		else if (!derr.msg[0])
			abort();
		q = NULL;
	}
	if (pprof_decode(data, size, &opts, &p, &err) != 0) {
		if (!err.msg[0])
			abort(); /* every failure must say why */
		if (pprof_decoder_decode(d, data, size, &opts, &q, &err) == 0)
			abort(); /* the decoder must fail the same input */
		pprof_decoder_free(d);
		return 0;
	}
	if (pprof_decoder_decode(d, data, size, &opts, &q, &err) != 0 ||
	    pprof_encode(pprof_profile_msg(q), false, &again) ||
	    pprof_encode(pprof_profile_msg(p), false, &out) || again.len != out.len ||
	    memcmp(again.data, out.data, out.len) != 0)
		abort();
	pprof_decoder_recycle(d, q);
	pprof_decoder_free(d);
	buf_free(&again);
	q = NULL;
	buf_reset(&out);
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
	q = NULL;
	pprof_builder_free(b);
	if (!name_every_location(p, &out))
		abort();
	buf_free(&out);
	pprof_profile_free(p);
	return 0;
}
