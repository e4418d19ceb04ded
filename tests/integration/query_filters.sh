#!/usr/bin/env bash
# pprof's frame filters and the sandwich view, checked against go tool
# pprof itself on the same Go runtime/pprof CPU profiles: kilnctl query's
# top with --focus/--ignore/--hide/--prune-from must give every function
# the flat and cum values `go tool pprof -top` gives with the same flag,
# and the server's sandwich halves (HTTP API, report=folded) must give the
# direct callers and callees `go tool pprof -peek` lists, with their values.
source "$(dirname "$0")/server_lib.bash"
server_setup
server_start

P=$T/prof
PROFS=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz")
"$KILNCTL" push --address="$ADDR" --labels=job=filters "${PROFS[@]}" 2>/dev/null || die "push"
Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="filters"}'

compare_top() { # FLAG=VALUE (kilnctl spelling) and go tool pprof's flag
	local ours=$1 theirs=$2
	"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=top --nodecount=0 "$ours" \
		>"$T/ours.txt" 2>"$T/ours.err" || { cat "$T/ours.err"; die "kilnctl query $ours"; }
	go tool pprof -top -nodecount=1000 "$theirs" "${PROFS[@]}" >"$T/theirs.txt" 2>/dev/null ||
		die "go tool pprof $theirs"
	$PY - "$T/ours.txt" "$T/theirs.txt" "$ours" <<'PYEOF' || die "$ours differs from go tool pprof $theirs"
import re, sys
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
def value(s):
    m = re.fullmatch(r"(-?[\d.]+)(ns|us|ms|s)?", s)
    return float(m.group(1)) * UNITS[m.group(2) or "ns"]
def rows(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 6 and re.fullmatch(r"[\d.]+%", f[1]) and re.fullmatch(r"[\d.]+%", f[4]):
            name = re.sub(r" \[[^]]*\]$", "", " ".join(f[5:]))
            out[name] = (value(f[0]), value(f[3]))
    return out
ours, theirs = rows(sys.argv[1]), rows(sys.argv[2])
theirs = {k: v for k, v in theirs.items() if v != (0, 0)}
assert theirs, "go tool pprof printed no rows"
assert set(ours) == set(theirs), (sys.argv[3], sorted(ours), sorted(theirs))
for name, (flat, cum) in theirs.items():
    assert abs(ours[name][0] - flat) <= 0.005 * max(flat, 1e6), (name, "flat", ours[name], flat)
    assert abs(ours[name][1] - cum) <= 0.005 * max(cum, 1e6), (name, "cum", ours[name], cum)
print(f"{sys.argv[3]}: {len(theirs)} functions, flat and cum equal to go tool pprof's")
PYEOF
}
compare_top --focus=spinBeta -focus=spinBeta
compare_top --ignore=asyncPreempt -ignore=asyncPreempt
compare_top --hide=recurse -hide=recurse
compare_top --prune-from=spinAlpha -prune_from=spinAlpha

# Sandwich through the server's HTTP API: the first frame after the
# function in each half is a direct caller (callee); their sums must equal
# go tool pprof -peek's edges.
go tool pprof -peek='^main\.spinAlpha$' "${PROFS[@]}" >"$T/peek.txt" 2>/dev/null || die "pprof -peek"
now=$(($(date +%s) * 1000))
for side in callers callees; do
	curl -sf -G "http://$ADDR/api/v1/query" --data-urlencode "query=$Q" \
		--data-urlencode "start=$((now - 86400000))" --data-urlencode "end=$now" \
		--data-urlencode report=folded --data-urlencode sandwich=main.spinAlpha \
		--data-urlencode "sandwich_side=$side" >"$T/$side.txt" || die "sandwich $side"
done
$PY - "$T/callers.txt" "$T/callees.txt" "$T/peek.txt" <<'PYEOF' || die "sandwich differs from go tool pprof -peek"
import re, sys
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
def value(s):
    m = re.fullmatch(r"([\d.]+)(ns|us|ms|s)", s)
    return float(m.group(1)) * UNITS[m.group(2)]
def edges(path):
    out = {}
    for line in open(path):
        stack, v = line.rsplit(" ", 1)
        frames = stack.split(";")
        assert frames[0] == "main.spinAlpha", line
        if len(frames) > 1:
            out[frames[1]] = out.get(frames[1], 0) + int(v)
    return out
callers, callees = edges(sys.argv[1]), edges(sys.argv[2])
# -peek: caller lines above the function's own line, callee lines below;
# edge lines are "VALUE PCT% |   NAME".
above, below, seen = {}, {}, False
for line in open(sys.argv[3]):
    if re.search(r"\| main\.spinAlpha$", line):
        seen = True
        continue
    m = re.match(r"\s+([\d.]+\w+)\s+[\d.]+%\s+\|\s+(\S+)$", line)
    if m:
        (below if seen else above)[m.group(2)] = value(m.group(1))
assert seen, "pprof -peek printed no main.spinAlpha"
for name, mine, theirs in (("callers", callers, above), ("callees", callees, below)):
    assert set(mine) == set(theirs), (name, mine, theirs)
    for k in theirs:
        assert abs(mine[k] - theirs[k]) <= 1e6, (name, k, mine[k], theirs[k])
    print(f"sandwich {name}: {mine} equal to go tool pprof -peek")
PYEOF

# Bad patterns are refused with what and where.
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query" \
	--data-urlencode "query=$Q" --data-urlencode report=top --data-urlencode 'focus=spin(')
[ "$code" = 400 ] && grep -q 'focus: invalid regular expression at byte 5' "$T/bad.json" ||
	{ cat "$T/bad.json"; die "bad focus pattern: HTTP $code"; }
code=$(curl -s -o "$T/bad2.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query" \
	--data-urlencode "query=$Q" --data-urlencode report=pprof --data-urlencode 'focus=spin')
[ "$code" = 400 ] || die "focus on a pprof report: HTTP $code, not 400"
rc=0
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --hide='(' >/dev/null 2>"$T/bad.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'hide: invalid regular expression' "$T/bad.err" ||
	{ cat "$T/bad.err"; die "kilnctl --hide='(' exited $rc"; }
server_stop
echo "PASS: frame filters and sandwich agree with go tool pprof"
