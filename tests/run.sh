#!/usr/bin/env bash
# Kiln's test runner: cmocka unit programs, black-box integration scripts and
# short fuzz runs, each counted; the last line is "N passed, N failed".
#
# Environment (set by `make test`):
#   KILN_BIN      directory with kiln, kiln-agent, kilnctl (sanitized build)
#   KILN_TESTBIN  directory with the cmocka programs (build/san/tests)
#   KILN_FUZZBIN  directory with the libFuzzer programs (build/fuzz)
#   TEST_FILTER   run only tests whose name contains this string
#   FUZZ_SMOKE_SECONDS  seconds per fuzz target (default 15)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
: "${KILN_BIN:=$root/build/san/bin}" "${KILN_TESTBIN:=$root/build/san/tests}"
: "${KILN_FUZZBIN:=$root/build/fuzz}" "${TEST_FILTER:=}" "${FUZZ_SMOKE_SECONDS:=15}"
export KILN_BIN KILN_ROOT="$root"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
logdir="$root/build/test-logs"
rm -rf "$logdir"; mkdir -p "$logdir"
passed=0 failed=0 failures=()

record() { # name status logfile
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1)); echo "PASS  $1"
	else
		failed=$((failed + 1)); failures+=("$1"); echo "FAIL  $1 (log: $3)"
		tail -n 40 "$3" | sed 's/^/      /'
	fi
}

# cmocka programs: count each test case.
for t in $(find "$KILN_TESTBIN" -type f -name 'test_*' -perm -u+x 2>/dev/null | sort); do
	name=${t#"$KILN_TESTBIN"/}
	[[ -n "$TEST_FILTER" && "$name" != *"$TEST_FILTER"* ]] && continue
	log="$logdir/${name//\//_}.log"
	timeout 600 "$t" >"$log" 2>&1; rc=$?
	ok=$(grep -c '^\[       OK \]' "$log"); bad=$(grep -c '^\[  FAILED  \] [a-z_]' "$log")
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
	passed=$((passed + ok)); failed=$((failed + bad))
	if [ "$bad" -gt 0 ]; then
		failures+=("$name"); echo "FAIL  $name ($ok ok, $bad failed; log: $log)"
		tail -n 40 "$log" | sed 's/^/      /'
	else
		echo "PASS  $name ($ok cases)"
	fi
done

# Integration scripts: one test each; exit 0 = pass, 77 = precondition missing (fails too:
# a skipped test must not hide a failure).
for t in $(ls tests/integration/*.sh 2>/dev/null | sort); do
	name=integration/$(basename "$t" .sh)
	[[ -n "$TEST_FILTER" && "$name" != *"$TEST_FILTER"* ]] && continue
	log="$logdir/${name//\//_}.log"
	timeout 900 bash "$t" >"$log" 2>&1; rc=$?
	record "$name" "$rc" "$log"
done

# Short fuzz runs: the long ones are `make fuzz`.
for f in "$KILN_FUZZBIN"/fuzz_*; do
	n=$(basename "$f"); name=fuzz/$n
	# Programs only: skip the .d dependency files (and a missing build).
	[[ "$n" == *.* || ! -x "$f" || -d "$f" ]] && continue
	[[ -n "$TEST_FILTER" && "$name" != *"$TEST_FILTER"* ]] && continue
	log="$logdir/fuzz_$n.log"; corpus="$root/build/fuzz/corpus/$n"; mkdir -p "$corpus"
	seeds=(); [ -d "fuzz/corpus/$n" ] && seeds=("fuzz/corpus/$n")
	# -seed=1: the same mutations on every machine, so CI replays what passed
	# here (new finds come from `make fuzz`). -timeout: one slow input is a
	# failure to look at, not a hung suite. Artifacts (crash-*, slow-unit-*)
	# go under build/, never the checkout.
	mkdir -p "$root/build/fuzz/artifacts"
	"$f" -seed=1 -max_total_time="$FUZZ_SMOKE_SECONDS" -timeout=30 -rss_limit_mb=2048 \
		-artifact_prefix="$root/build/fuzz/artifacts/$n-" "$corpus" "${seeds[@]}" >"$log" 2>&1
	record "$name" "$?" "$log"
done

echo
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
