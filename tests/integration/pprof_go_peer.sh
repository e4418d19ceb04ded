#!/usr/bin/env bash
# kilnctl pprof against Go's own pprof producer and tool: folded stacks and
# top tables of runtime/pprof CPU (with labels) and heap (four sample types)
# profiles equal what `go tool pprof -raw` / `-top` report for the same files.
set -euo pipefail
source "$(dirname "$0")/../peers/pprof_env.sh"
RAW="python3 $ROOT/tests/peers/pprof_raw.py"
gen=$(build_go_peer)

"$gen" cpu -o "$WORK/cpu.pb.gz" -seconds 1.5
"$gen" heap -o "$WORK/heap.pb.gz"
gopprof -raw "$WORK/cpu.pb.gz" >"$WORK/cpu.raw"
gopprof -raw "$WORK/heap.pb.gz" >"$WORK/heap.raw"
grep -q 'worker:\[hash\]' "$WORK/cpu.raw" || die "the CPU profile has no pprof labels"
grep -q '^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes' \
	"$WORK/heap.raw" || die "the heap profile lacks the four sample types"

# folded: default sample type (the last) and each named one.
$RAW folded "$WORK/cpu.raw" >"$WORK/want"
"$KILNCTL" pprof folded "$WORK/cpu.pb.gz" >"$WORK/got"
same_folded "cpu default" "$WORK/want" "$WORK/got"
$RAW folded "$WORK/cpu.raw" samples >"$WORK/want"
"$KILNCTL" pprof folded --sample-type=samples "$WORK/cpu.pb.gz" >"$WORK/got"
same_folded "cpu samples" "$WORK/want" "$WORK/got"
$RAW folded "$WORK/heap.raw" >"$WORK/want"
"$KILNCTL" pprof folded "$WORK/heap.pb.gz" >"$WORK/got"
same_folded "heap default" "$WORK/want" "$WORK/got"
for t in alloc_objects alloc_space inuse_objects inuse_space; do
	$RAW folded "$WORK/heap.raw" "$t" >"$WORK/want"
	"$KILNCTL" pprof folded --sample-type "$t" "$WORK/heap.pb.gz" >"$WORK/got"
	same_folded "heap $t" "$WORK/want" "$WORK/got"
done

# top: every function's flat and cum, and the total, as go tool pprof -top.
compare_top() { # file sample_index unit
	gopprof -top -nodefraction=0 -edgefraction=0 -nodecount=1000000 -unit="$3" \
		-sample_index="$2" "$1" >"$WORK/gotop"
	"$KILNCTL" pprof top --raw --sample-type="$2" "$1" >"$WORK/kilntop"
	python3 - "$WORK/gotop" "$WORK/kilntop" "$2" <<'PY'
import re, sys
def table(path):
    rows, total = {}, None
    for line in open(path):
        m = re.match(r"Showing nodes accounting for .* of (-?\d+)\D* total", line)
        if m:
            total = int(m.group(1))
        parts = line.split(None, 5)
        if len(parts) == 6 and re.match(r"^-?\d+[a-zA-Z]*$", parts[0]) and parts[1].endswith("%"):
            num = lambda s: int(re.sub(r"[a-zA-Z]+$", "", s))
            rows[parts[5].strip()] = (num(parts[0]), num(parts[3]))
    return total, rows
gt, gr = table(sys.argv[1])
kt, kr = table(sys.argv[2])
if gt is None or gt != kt or gr != kr or not gr:
    print(f"top mismatch for {sys.argv[3]}: total go={gt} kiln={kt}", file=sys.stderr)
    for name in sorted(set(gr) | set(kr)):
        if gr.get(name) != kr.get(name):
            print(f"  {name}: go={gr.get(name)} kiln={kr.get(name)}", file=sys.stderr)
    sys.exit(1)
PY
}
compare_top "$WORK/cpu.pb.gz" cpu ns
compare_top "$WORK/cpu.pb.gz" samples ns
compare_top "$WORK/heap.pb.gz" alloc_space B
compare_top "$WORK/heap.pb.gz" inuse_objects B

"$KILNCTL" pprof validate "$WORK/cpu.pb.gz" "$WORK/heap.pb.gz" >"$WORK/validate"
grep -q "cpu.pb.gz: ok: .*samples/count cpu/nanoseconds" "$WORK/validate" || die "validate cpu"
echo "pprof_go_peer: ok"
