#!/usr/bin/env bash
# bench-pprof: pprof decode/encode throughput and merge time, next to
# `go tool pprof -proto` doing the same merge in the same run.
#
#   1. a ~20 MB (uncompressed) Go CPU-shaped profile, written at bench time by
#      tests/peers/go/pprofgen: decode + re-encode, MB/s (best of 5, one core)
#   2. 100 such profiles of ~0.5 MB each: merged by kilnctl and by go tool
#      pprof -proto; wall-clock ms of each process and the ratio
# Prints figures only; never fails on time.
set -euo pipefail
export KILN_BIN=${KILN_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
source "$(dirname "$0")/../tests/peers/pprof_env.sh"
BENCH=$KILN_BIN/bench_pprof
gen=$(build_go_peer)
ms() { date +%s%N | awk '{printf "%d", $1 / 1e6}'; }

echo "== pprof decode / encode (one thread)"
"$gen" big -o "$WORK/big.pb.gz" -mb 20 -seed 1
"$BENCH" codec "$WORK/big.pb.gz" 5

echo "== merge 100 profiles"
for i in $(seq 1 100); do
	"$gen" big -o "$WORK/p$i.pb.gz" -mb 0.5 -seed "$i"
done
files=("$WORK"/p*.pb.gz)
in_mb=$(du -cb "${files[@]}" | tail -1 | awk '{printf "%.1f", $1 / 1e6}')
echo "inputs: ${#files[@]} files, $in_mb MB gzip"
"$BENCH" merge "$WORK/lib.pb.gz" "${files[@]}"
# Wall and CPU (user+sys) seconds of each merge process: the machine may be
# shared, and CPU time is what load does not inflate.
TIMEFORMAT='%R %U %S'
kiln_t=$({ time "$KILNCTL" pprof merge -o "$WORK/kiln.pb.gz" "${files[@]}" >/dev/null; } 2>&1)
go_t=$({ time gopprof -proto "${files[@]}" >"$WORK/go.pb.gz"; } 2>&1)
awk -v k="$kiln_t" -v g="$go_t" 'BEGIN {
	split(k, a, " "); split(g, b, " ")
	printf "kilnctl pprof merge:    %6.0f ms wall, %6.0f ms cpu\n", a[1] * 1000, (a[2] + a[3]) * 1000
	printf "go tool pprof -proto:   %6.0f ms wall, %6.0f ms cpu\n", b[1] * 1000, (b[2] + b[3]) * 1000
	printf "ratio (go / kiln):      %6.1fx wall, %6.1fx cpu\n", b[1] / (a[1] ? a[1] : 0.001),
		(b[2] + b[3]) / ((a[2] + a[3]) ? (a[2] + a[3]) : 0.001)
}'
# Same result? Each tool reads the other's output: totals must agree.
total() { "$KILNCTL" pprof top --raw --sample-type=cpu "$1" | sed -n 's/^Showing nodes accounting for \([0-9]*\),.*/\1/p'; }
echo "totals (cpu ns): kiln merge $(total "$WORK/kiln.pb.gz"), go merge $(total "$WORK/go.pb.gz")"
