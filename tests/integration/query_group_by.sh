#!/usr/bin/env bash
# "Sum by" for the metrics graph and group-by for the flame graph, checked
# against the ungrouped answers of the same server: six series (three comms
# × two pids) of real Go CPU profiles. query_range with sum_by=comm must
# give three series whose points are the sums of their pids' points, limit
# must keep the largest groups and sum the rest into one "other" series,
# and a flame graph grouped by comm must have one first-level frame per
# comm whose value is that comm's own merged total.
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=3 server_setup
server_start

P=$T/prof
i=0
for comm in api db cache; do
	for pid in 1 2; do
		# Different amounts per series, so that the ranking is known: api
		# gets the most profiles, cache the fewest.
		case $comm in api) files=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" "$P/cpu-2.pb.gz") ;;
		db) files=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz") ;; cache) files=("$P/cpu-2.pb.gz") ;; esac
		"$KILNCTL" push --address="$ADDR" --labels=job=g,comm=$comm,pid=$pid "${files[@]}" 2>/dev/null ||
			die "push $comm $pid"
		i=$((i + 1))
	done
done
Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="g"}'
now=$(($(date +%s) * 1000))
get() { curl -sf -G "http://$ADDR$1" --data-urlencode "query=$Q" --data-urlencode "start=$((now - 86400000))" \
	--data-urlencode "end=$((now + 60000))" "${@:2}"; }
get /api/v1/query_range >"$T/raw.json" || die "query_range"
get /api/v1/query_range --data-urlencode sum_by=comm >"$T/by.json" || die "sum_by"
get /api/v1/query_range --data-urlencode sum_by=comm --data-urlencode limit=2 >"$T/top2.json" || die "limit"
get /api/v1/query_range --data-urlencode limit=4 >"$T/lim4.json" || die "limit alone"
get /api/v1/query --data-urlencode group_by=comm --data-urlencode report=flamegraph >"$T/flame.json" || die "group_by"
for c in api db cache; do
	curl -sf -G "http://$ADDR/api/v1/query" --data-urlencode "query=${Q%\}*},comm=\"$c\"}" \
		--data-urlencode "start=$((now - 86400000))" --data-urlencode "end=$((now + 60000))" \
		--data-urlencode report=top >"$T/top-$c.json" || die "top $c"
done
$PY - "$T" <<'PYEOF' || die "grouped answers differ from the ungrouped ones"
import json, sys, collections
T = sys.argv[1]
load = lambda n: json.load(open(f"{T}/{n}"))
raw = load("raw.json")["series"]
assert len(raw) == 6, len(raw)
want = collections.defaultdict(lambda: collections.Counter())
for s in raw:
    for t, v in s["points"]:
        want[s["labels"]["comm"]][t] += v
by = load("by.json")["series"]
assert sorted(json.dumps(s["labels"]) for s in by) == sorted(json.dumps({"comm": c}) for c in want), by
for s in by:
    got = {t: v for t, v in s["points"]}
    assert got == dict(want[s["labels"]["comm"]]), (s["labels"], got, want[s["labels"]["comm"]])
totals = {c: sum(p.values()) for c, p in want.items()}
order = sorted(totals, key=lambda c: -totals[c])
assert [s["labels"]["comm"] for s in by] == order, ([s["labels"] for s in by], order)
top2 = load("top2.json")["series"]
assert [s["labels"].get("comm") for s in top2[:2]] == order[:2], top2
other = top2[2]
assert other["labels"] == {"__other__": "1 more"}, other["labels"]
assert {t: v for t, v in other["points"]} == dict(want[order[2]])
lim4 = load("lim4.json")["series"]
assert len(lim4) == 5 and lim4[4]["labels"] == {"__other__": "2 more"}, [s["labels"] for s in lim4]
assert sum(v for s in lim4 for _, v in s["points"]) == sum(v for s in raw for _, v in s["points"])
f = load("flame.json")
S, N = f["strings"], f["nodes"]
first = {S[N["name"][i]]: N["cum"][i] for i in range(len(N["name"])) if N["depth"][i] == 1}
for c in want:
    t = load(f"top-{c}.json")
    assert first.get(f"comm={c}") == t["total"], (c, first, t["total"])
assert set(first) == {f"comm={c}" for c in want}, first
print("sum_by, limit and group_by agree with the ungrouped answers:", totals)
PYEOF
# Bad input.
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query_range" \
	--data-urlencode "query=$Q" --data-urlencode limit=-1)
[ "$code" = 400 ] || die "limit=-1: HTTP $code"
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query_range" \
	--data-urlencode "query=$Q" --data-urlencode sum_by=a,b,c,d,e,f,g,h,i)
[ "$code" = 400 ] && grep -q 'at most 8' "$T/bad.json" || die "nine sum_by labels: HTTP $code"
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query" \
	--data-urlencode "query=$Q" --data-urlencode group_by=comm --data-urlencode report=pprof)
[ "$code" = 400 ] || die "group_by on a pprof report: HTTP $code"
server_stop
echo "PASS: sum_by, limit and group_by"
