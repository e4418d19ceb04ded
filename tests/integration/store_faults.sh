#!/usr/bin/env bash
# The store under injected faults (the short form of `make soak-faults`,
# tests/soak/soak_store sweep): the Nth write, pwrite, fsync, fdatasync,
# rename, open, malloc, calloc or realloc fails, once and for good, at
# points spread over a run of writes; each time a fresh process reopens
# the store and every write acknowledged before the fault must be there,
# exactly once, and nothing half-written visible. It regresses three bugs
# the sweep found: rows counted twice after a block that failed after its
# rename was retried, checkpointed rows lost by compacting a window whose
# cut had no checkpoint yet, and every later write lost after one failed
# allocation while registering a series.
set -uo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${KILN_TESTBIN:=$KILN_ROOT/build/san/tests}"
bin=${KILN_TESTBIN%/tests}/soak/soak_store
[ -x "$bin" ] || { echo "FAIL: $bin is not built (make test builds it)" >&2; exit 1; }
out=$("$bin" sweep 2>&1)
rc=$?
echo "$out" | tail -16
[ $rc -eq 0 ] || { echo "FAIL: the fault sweep broke an invariant (exit $rc)" >&2; exit 1; }
echo "$out" | grep -q "SOAK faults runs=[1-9][0-9]* failed=0" || { echo "FAIL: no runs" >&2; exit 1; }
echo "PASS"
