/*
 * fuzz_scrape_delta.c — libFuzzer target for the scrape deltas (delta.c)
 * on whatever the pprof decoder accepts.
 *
 * A decoded profile is turned into a baseline and diffed against itself:
 * the same stacks with the same values must give an empty delta and no
 * counter reset, whatever the ids, duplicates or labels. The gauge path
 * (no baseline) and a baseline over other sample types must not crash,
 * and every delta or gauge must pass pprof_validate (pprof_profile_subset
 * builds them without checking again).
 */
#include <stdint.h>
#include <stdlib.h>

#include "scrape/scrape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_decode_opts opts = {.max_inflated_bytes = 16 << 20};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL, *d = NULL;
	struct scrape_baseline *base = NULL, *next = NULL;
	size_t idx[2] = {0, 1}, last;
	bool reset;

	if (pprof_decode(data, size, &opts, &p, &err) != 0)
		return 0;
	size_t nt = pprof_profile_msg(p)->n_sample_type;
	if (nt == 0)
		goto out;
	size_t n = nt < 2 ? nt : 2;
	if (scrape_baseline_new(p, idx, n, &base, &err) != 0)
		abort();
	if (scrape_delta_next(base, p, idx, n, &d, &reset, &next, &err) != 0)
		abort();
	if (reset || pprof_sample_count(d) != 0)
		abort(); /* a profile minus itself is empty */
	if (pprof_validate(pprof_profile_msg(d), &err) != 0)
		abort();
	pprof_profile_free(d);
	d = NULL;
	/* The gauge path, and a baseline over another type than cur's. */
	last = nt - 1;
	if (scrape_delta_next(NULL, p, &last, 1, &d, &reset, NULL, &err) != 0 ||
	    pprof_validate(pprof_profile_msg(d), &err) != 0)
		abort();
	pprof_profile_free(d);
	d = NULL;
	if (scrape_delta_next(next, p, &last, 1, &d, &reset, NULL, &err) != 0 ||
	    pprof_validate(pprof_profile_msg(d), &err) != 0)
		abort();
out:
	pprof_profile_free(d);
	scrape_baseline_free(base);
	scrape_baseline_free(next);
	pprof_profile_free(p);
	return 0;
}
