/*
 * fuzz_jfr.c — JFR recordings (Pyroscope's format=jfr) into pprof: any
 * bytes either convert, each non-empty result decoding as a valid pprof
 * profile, or fail with a message that says why.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "jfr/jfr.h"
#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jfr_options o = {.sample_rate = 100, .max_events = 100000};
	struct jfr_profiles out;
	struct kiln_error err = {0};
	int rc = jfr_to_pprof(data, size, &o, &out, &err);

	if (rc && !err.msg[0])
		abort(); /* every failure says why */
	for (int k = 0; rc == 0 && k < JFR_N_KINDS; k++) {
		struct pprof_profile *p = NULL;
		if (!out.pprof[k].len)
			continue;
		if (pprof_decode(out.pprof[k].data, out.pprof[k].len, NULL, &p, &err))
			abort(); /* what the converter writes is a valid profile */
		pprof_profile_free(p);
	}
	jfr_profiles_release(&out);
	return 0;
}
