#!/usr/bin/env bash
# tests/soak/soak.sh PART — the standing soak and fault campaign (make soak,
# make soak-PART; docs/RELIABILITY.md). Not part of `make test`: it runs for
# minutes to hours and prints figures. Each part appends "part key value"
# lines to $SOAK_OUT/results.txt; `all` runs every part and prints them as
# one table. Exit 1 when any invariant broke (a lost or corrupt write, a
# failed start, a crash, a fuzzer finding).
#
#   kill       SOAK_CYCLES=1000 SIGKILL cycles under SOAK_WRITERS=4 writers and
#              a reader (SOAK_KILL_WITHIN=1.0: seconds after the first write)
#   diskfull   a 4 MiB tmpfs under the data directory (needs root)
#   faults     the store with its Nth write/pwrite/fsync/fdatasync/rename/open/
#              malloc/calloc/realloc failed (SOAK_FAULT_RUNS=30 points per op);
#              `make SAN=1 soak-faults` runs the ASan/UBSan build of the driver
#   fuzz       every build/fuzz/fuzz_* for SOAK_FUZZ_SECONDS=60; SOAK_FUZZ_MERGE=1
#              merges new finds into fuzz/corpus/NAME (otherwise nothing is
#              written there)
#   restart    server start time on SOAK_RESTART_SERIES=400000 series
#   all        every part, then the table
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
: "${SOAK_OUT:=$ROOT/build/soak}" "${KILN_BIN:=$ROOT/build/bin}"
: "${SOAK_CYCLES:=1000}" "${SOAK_WRITERS:=4}" "${SOAK_KILL_WITHIN:=1.0}" "${SOAK_FULL_EVERY:=100}"
: "${SOAK_FAULT_RUNS:=30}" "${SOAK_FAULT_OPS:=}" "${SOAK_FUZZ_SECONDS:=60}" "${SOAK_FUZZ_MERGE:=0}"
: "${SOAK_RESTART_SERIES:=400000}" "${SOAK_RESTART_STARTS:=3}"
PY=/usr/bin/python3 # Debian's, with python3-grpcio and grpc_tools
RESULTS=${SOAK_RESULTS:-$SOAK_OUT/results.txt}
T=
failed=0

cleanup() {
	[ -n "$T" ] && mountpoint -q "$T/data" 2>/dev/null && umount "$T/data"
	[ -n "$T" ] && [ -z "${KILN_TEST_KEEP:-}" ] && rm -rf "$T"
}
trap cleanup EXIT

scratch() {
	cleanup
	T=$(mktemp -d /var/tmp/kiln-soak.XXXXXX)
}

stubs() { # generates the gRPC message classes into $T/stubs
	mkdir -p "$T/stubs"
	(cd "$ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$T/stubs" \
		--grpc_python_out="$T/stubs" parca/profilestore/v1alpha1/profilestore.proto \
		parca/query/v1alpha1/query.proto parca/metastore/v1alpha1/metastore.proto \
		pprof/profile.proto)
}

driver() { # soak_server.py CMD [args] with the common arguments
	local cmd=$1
	shift
	$PY "$ROOT/tests/soak/soak_server.py" "$cmd" --stubs "$T/stubs" --kiln "$KILN_BIN/kiln" \
		--log "$T/server.log" --results "$RESULTS" "$@"
}

note() { # part key value
	echo "$1 $2 $3" >>"$RESULTS"
}

part_kill() {
	scratch
	stubs || return 1
	echo "== soak-kill: $SOAK_CYCLES SIGKILL cycles, $SOAK_WRITERS writers and a reader"
	driver kill --data "$T/data" --cycles "$SOAK_CYCLES" --writers "$SOAK_WRITERS" \
		--kill-within "$SOAK_KILL_WITHIN" --full-every "$SOAK_FULL_EVERY"
	local rc=$?
	grep -q 'level=error' "$T/server.log" && {
		echo "soak-kill: the server logged errors:"
		grep 'level=error' "$T/server.log" | head -5
	}
	return $rc
}

part_diskfull() {
	scratch
	stubs || return 1
	mkdir -p "$T/data"
	mount -t tmpfs -o size=4m tmpfs "$T/data" || {
		echo "soak-diskfull: cannot mount a tmpfs (needs root)"
		return 1
	}
	echo "== soak-diskfull: the data directory on a 4 MiB tmpfs"
	driver diskfull --data "$T/data"
}

part_faults() {
	local bin=${SOAK_FAULT_BIN:-$SOAK_OUT/soak_store} ops=()
	[ -x "$bin" ] || {
		echo "soak-faults: $bin missing (make soak-faults builds it)"
		return 1
	}
	[ -n "$SOAK_FAULT_OPS" ] && ops=(--ops "$SOAK_FAULT_OPS")
	echo "== soak-faults: $bin sweep --max-runs $SOAK_FAULT_RUNS ${ops[*]}"
	# Under SAN=1 a sanitizer report aborts the child: counted as a crash.
	ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0} \
		UBSAN_OPTIONS=${UBSAN_OPTIONS:-abort_on_error=1:print_stacktrace=1} \
		"$bin" sweep --max-runs "$SOAK_FAULT_RUNS" "${ops[@]}" | tee "$SOAK_OUT/faults.txt"
	local rc=${PIPESTATUS[0]}
	awk '/^SOAK faults/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); print "faults", kv[1], kv[2] } }' \
		"$SOAK_OUT/faults.txt" >>"$RESULTS"
	awk '$1 ~ /^[a-z]/ && $2 ~ /^[0-9]+$/ && NF == 10 && ($6 + $7 + $8 + $9 + $10 + $5) > 0 {
		print "faults", "failing_op:" $1, $6 + $7 + $8 + $9 + $10 + $5 }' "$SOAK_OUT/faults.txt" >>"$RESULTS"
	return "$rc"
}

part_fuzz() {
	local f n scratchdir seeds execs news crashes=0 total=0 rc=0
	mkdir -p "$SOAK_OUT/fuzz-artifacts"
	for f in "$ROOT"/build/fuzz/fuzz_*; do
		[ -x "$f" ] && [ -f "$f" ] || continue
		n=$(basename "$f")
		scratchdir=$(mktemp -d /var/tmp/kiln-soak-fuzz.XXXXXX)
		seeds=()
		[ -d "fuzz/corpus/$n" ] && seeds=("fuzz/corpus/$n")
		# The scratch directory first: libFuzzer writes new inputs only
		# into its first corpus directory; the repository's is read.
		"$f" -max_total_time="$SOAK_FUZZ_SECONDS" -print_final_stats=1 -timeout=10 \
			-artifact_prefix="$SOAK_OUT/fuzz-artifacts/$n-" "$scratchdir" "${seeds[@]}" \
			>"$SOAK_OUT/$n.log" 2>&1
		local frc=$?
		execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$SOAK_OUT/$n.log")
		news=$(find "$scratchdir" -type f | wc -l)
		total=$((total + ${execs:-0}))
		if [ $frc -ne 0 ]; then
			crashes=$((crashes + 1))
			rc=1
			echo "soak-fuzz: $n FAILED (rc $frc); see $SOAK_OUT/$n.log and $SOAK_OUT/fuzz-artifacts/"
			grep -m3 -E 'ERROR|SUMMARY' "$SOAK_OUT/$n.log"
		fi
		echo "fuzz $n: ${execs:-?} runs in ${SOAK_FUZZ_SECONDS}s, $news new inputs, rc $frc"
		note fuzz "$n" "runs=${execs:-0},new=$news,rc=$frc"
		if [ "$SOAK_FUZZ_MERGE" = 1 ] && [ $frc -eq 0 ] && [ "$news" -gt 0 ]; then
			mkdir -p "fuzz/corpus/$n"
			"$f" -merge=1 "fuzz/corpus/$n" "$scratchdir" >>"$SOAK_OUT/$n.log" 2>&1 &&
				echo "fuzz $n: merged into fuzz/corpus/$n ($(find "fuzz/corpus/$n" -type f | wc -l) files)"
		fi
		rm -rf "$scratchdir"
	done
	note fuzz targets_failed "$crashes"
	note fuzz total_runs "$total"
	return $rc
}

part_restart() {
	local bin=${SOAK_FAULT_BIN:-$SOAK_OUT/soak_store}
	scratch
	stubs || return 1
	[ -x "$bin" ] || {
		echo "soak-restart: $bin missing (make soak-restart builds it)"
		return 1
	}
	echo "== soak-restart: $SOAK_RESTART_SERIES series"
	local t0 t1
	t0=$(date +%s%N)
	# Left in the WAL (no clean close): the start replays it.
	"$bin" populate --dir "$T/data" --series "$SOAK_RESTART_SERIES" --threads 16 --crash || return 1
	t1=$(date +%s%N)
	note restart populate_s "$(((t1 - t0) / 1000000000))"
	driver restart --data "$T/data" --starts 1 --series "$SOAK_RESTART_SERIES" --label wal || return 1
	# The first start cut nothing yet (under head_max_rows); a clean stop
	# flushes the head into blocks, so later starts read blocks.
	driver restart --data "$T/data" --starts "$SOAK_RESTART_STARTS" --series "$SOAK_RESTART_SERIES" \
		--label blocks
}

table() {
	echo
	echo "== soak results ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r))"
	awk '{ printf "%-16s %-28s %s\n", $1, $2, $3 }' "$RESULTS"
}

run_part() {
	local p=$1
	"part_$p" || {
		failed=1
		echo "soak-$p: FAILED"
	}
}

mkdir -p "$SOAK_OUT"
case ${1:-all} in
all)
	: >"$RESULTS"
	for p in faults kill diskfull restart fuzz; do run_part $p; done
	;;
kill | diskfull | faults | fuzz | restart)
	: >"$RESULTS"
	run_part "$1"
	;;
*)
	echo "usage: $0 all|kill|diskfull|faults|fuzz|restart" >&2
	exit 2
	;;
esac
table
exit $failed
