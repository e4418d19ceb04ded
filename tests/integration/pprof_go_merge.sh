#!/usr/bin/env bash
# kilnctl pprof merge against go tool pprof: merging several runtime/pprof
# CPU profiles gives the same totals and stacks as `go tool pprof -proto`, and
# the file Kiln encodes is read back by go tool pprof unchanged.
set -euo pipefail
source "$(dirname "$0")/../peers/pprof_env.sh"
RAW="python3 $ROOT/tests/peers/pprof_raw.py"
gen=$(build_go_peer)

for i in 1 2 3; do
	"$gen" cpu -o "$WORK/cpu$i.pb.gz" -seconds 0.7
done
"$gen" heap -o "$WORK/heap.pb.gz"

"$KILNCTL" pprof merge -o "$WORK/kiln.pb.gz" "$WORK"/cpu{1,2,3}.pb.gz
gopprof -proto "$WORK"/cpu{1,2,3}.pb.gz >"$WORK/go.pb.gz"
[ -s "$WORK/go.pb.gz" ] || die "go tool pprof -proto wrote nothing"

# Go reads Kiln's encoding: totals per sample type equal Go's own merge.
gopprof -raw "$WORK/kiln.pb.gz" >"$WORK/kiln.raw" || die "go tool pprof cannot read Kiln's merge"
gopprof -raw "$WORK/go.pb.gz" >"$WORK/go.raw"
$RAW totals "$WORK/kiln.raw" >"$WORK/kiln.totals"
$RAW totals "$WORK/go.raw" >"$WORK/go.totals"
diff "$WORK/go.totals" "$WORK/kiln.totals" || die "merge totals differ from go tool pprof -proto"
grep -q '^cpu [1-9]' "$WORK/go.totals" || die "empty merge"

# The stacks too, for every sample type, seen through Go's decoder.
for t in samples cpu; do
	$RAW folded "$WORK/go.raw" "$t" >"$WORK/want"
	$RAW folded "$WORK/kiln.raw" "$t" >"$WORK/got"
	same_folded "merge via go ($t)" "$WORK/want" "$WORK/got"
	"$KILNCTL" pprof folded --sample-type="$t" "$WORK"/cpu{1,2,3}.pb.gz >"$WORK/got"
	same_folded "folded of several files ($t)" "$WORK/want" "$WORK/got"
done

# go tool pprof -top agrees on the total of Kiln's file.
total() { gopprof -top -unit=ns "$1" | sed -n 's/^Showing nodes accounting for .* of \([0-9]*\)ns total$/\1/p'; }
[ "$(total "$WORK/kiln.pb.gz")" = "$(total "$WORK/go.pb.gz")" ] || die "-top totals differ"

# Mismatched sample types: an error naming the file, nothing written.
if "$KILNCTL" pprof merge -o "$WORK/bad.pb.gz" "$WORK/cpu1.pb.gz" "$WORK/heap.pb.gz" 2>"$WORK/err"; then
	die "merge of cpu and heap succeeded"
fi
grep -q "heap.pb.gz: sample types differ" "$WORK/err" || die "merge error: $(cat "$WORK/err")"
[ ! -e "$WORK/bad.pb.gz" ] || die "a failed merge wrote its output"
echo "pprof_go_merge: ok"
