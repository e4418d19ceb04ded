/*
 * jfr.h — Java Flight Recorder recordings into pprof profiles, for
 * Pyroscope's POST /ingest?format=jfr (what its Java agent sends).
 *
 * A recording is a sequence of self-describing chunks. Each chunk's
 * metadata event declares its types (classes with fields, a field's type,
 * whether its values live in a constant pool, whether it is an array), its
 * checkpoint events hold the constant pools (stack traces, methods,
 * classes, symbols, threads...), and its other events are records of those
 * types. reader.c reads any type from that description, so no event layout
 * is assumed; convert.c then turns the events a profiler cares about into
 * one pprof profile per kind:
 *
 *   jdk.ExecutionSample                    process_cpu: samples/count, cpu/nanoseconds
 *   jdk.ObjectAllocationSample (weight),
 *   jdk.ObjectAllocationInNewTLAB (tlabSize),
 *   jdk.ObjectAllocationOutsideTLAB (allocationSize)
 *                                          memory: alloc_objects/count, alloc_space/bytes
 *   jdk.JavaMonitorEnter, jdk.ThreadPark   mutex: contentions/count, delay/nanoseconds
 *
 * Frames are named "package.Class.method" (the class's internal name with
 * '/' as '.'), with the frame's line number; stacks are leaf first, as
 * pprof's are. A CPU sample is worth the sampling period: 1e9 / sample_rate
 * nanoseconds.
 *
 * Input is untrusted: every read is bounded by its chunk, recursion in type
 * descriptions is bounded, sizes and counts are checked before anything is
 * allocated for them, and an error names the chunk offset where the
 * recording stopped making sense.
 */
#ifndef KILN_JFR_H
#define KILN_JFR_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

enum jfr_kind { JFR_CPU, JFR_ALLOC, JFR_LOCK, JFR_N_KINDS };

struct jfr_options {
	int64_t sample_rate; /* CPU samples per second; 0 = 100 */
	size_t max_events;   /* refuse recordings with more events; 0 = 10 million */
};

struct jfr_profiles {
	/* Serialized (not gzipped) pprof of each kind that had events; empty
	 * (len 0) otherwise. */
	struct buf pprof[JFR_N_KINDS];
	size_t events[JFR_N_KINDS]; /* events of each kind turned into samples */
	size_t chunks;
};

/* The Pyroscope metric (__name__) of each kind: process_cpu, memory, mutex. */
const char *jfr_kind_metric(enum jfr_kind k);

/* Converts a whole recording (one or more chunks). 0, or -EINVAL with err
 * naming what is wrong and where, or -ENOMEM / -E2BIG. Release with
 * jfr_profiles_release even on failure. */
int jfr_to_pprof(const uint8_t *data, size_t len, const struct jfr_options *o,
		 struct jfr_profiles *out, struct kiln_error *err);
void jfr_profiles_release(struct jfr_profiles *p);

#endif
