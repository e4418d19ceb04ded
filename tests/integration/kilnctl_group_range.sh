#!/usr/bin/env bash
# kilnctl query --group-by=LABEL and kilnctl query-range --sum-by/--limit,
# as a user runs them, against the server's own grouped answers: the
# folded stacks of the grouped profile must equal the server's
# report=folded&group_by=LABEL (one "comm=X" first frame per value, checked
# against the ungrouped answers by query_group_by.sh), and query-range's
# points and table must equal query_range's sum_by and limit series.
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=3 server_setup
server_start

P=$T/prof
for comm in api db cache; do
	case $comm in api) files=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" "$P/cpu-2.pb.gz") ;;
	db) files=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz") ;; cache) files=("$P/cpu-2.pb.gz") ;; esac
	"$KILNCTL" push --address="$ADDR" --labels=job=kg,comm=$comm,pid=1 "${files[@]}" 2>/dev/null ||
		die "push $comm"
done
# A series without the label: its group is "comm=(none)".
"$KILNCTL" push --address="$ADDR" --labels=job=kg,pid=2 "$P/cpu-0.pb.gz" 2>/dev/null || die "push none"
Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="kg"}'
now=$(($(date +%s) * 1000))
S=$((now - 86400000)) E=$((now + 60000))

# --group-by: the same stacks as the server's grouped folded report.
"$KILNCTL" query --address="$ADDR" "$Q" --start=$S --end=$E --group-by=comm --output=folded \
	>"$T/k.folded" || die "kilnctl query --group-by"
curl -sf -G "http://$ADDR/api/v1/query" --data-urlencode "query=$Q" --data-urlencode start=$S \
	--data-urlencode end=$E --data-urlencode report=folded --data-urlencode group_by=comm \
	>"$T/s.folded" || die "server folded group_by"
sort "$T/k.folded" >"$T/k.sorted"
sort "$T/s.folded" >"$T/s.sorted"
cmp -s "$T/k.sorted" "$T/s.sorted" || { diff "$T/k.sorted" "$T/s.sorted" | head; die "grouped folded stacks differ"; }
firsts=$(cut -d';' -f1 "$T/k.folded" | sort -u | tr '\n' ' ')
[ "$firsts" = "comm=(none) comm=api comm=cache comm=db " ] || die "first frames: $firsts"
# The top table and the flame graph of the grouped profile render too.
"$KILNCTL" query --address="$ADDR" "$Q" --start=$S --end=$E --group-by=comm --output=flame \
	--width=100 --color=never >"$T/k.flame" || die "flame"
grep -q 'comm=api' "$T/k.flame" || die "the flame graph lacks comm=api"
# With a filter, the groups keep only what the filter keeps, as on the server.
"$KILNCTL" query --address="$ADDR" "$Q" --start=$S --end=$E --group-by=comm --focus=spinAlpha \
	--output=folded | sort >"$T/kf.sorted" || die "group-by with focus"
curl -sf -G "http://$ADDR/api/v1/query" --data-urlencode "query=$Q" --data-urlencode start=$S \
	--data-urlencode end=$E --data-urlencode report=folded --data-urlencode group_by=comm \
	--data-urlencode focus=spinAlpha | sort >"$T/sf.sorted" || die "server focus"
[ -s "$T/kf.sorted" ] && cmp -s "$T/kf.sorted" "$T/sf.sorted" || die "grouped focus differs"

# query-range: --sum-by and --limit against the server's series.
for args in "--sum-by=comm" "--sum-by=comm --limit=2" "--limit=1" "--sum-by=comm,pid --step=1m"; do
	# shellcheck disable=SC2086
	"$KILNCTL" query-range --address="$ADDR" "$Q" --start=$S --end=$E $args --output=points \
		>"$T/k.points" || die "kilnctl query-range $args"
	params=()
	for a in $args; do
		case $a in --sum-by=*) params+=(--data-urlencode "sum_by=${a#--sum-by=}") ;;
		--limit=*) params+=(--data-urlencode "limit=${a#--limit=}") ;;
		--step=1m) params+=(--data-urlencode step=60000) ;; esac
	done
	curl -sf -G "http://$ADDR/api/v1/query_range" --data-urlencode "query=$Q" \
		--data-urlencode start=$S --data-urlencode end=$E "${params[@]}" >"$T/s.json" ||
		die "server query_range $args"
	$PY - "$T/s.json" "$T/k.points" "$args" <<'PYEOF' || die "query-range $args differs from the server"
import json, sys
series = json.load(open(sys.argv[1]))["series"]
want = []
for s in series:
    lab = "{" + ", ".join("%s=%s" % (k, json.dumps(v)) for k, v in s["labels"].items()) + "}"
    want += ["%s\t%d\t%d" % (lab, t, v) for t, v in s["points"]]
got = open(sys.argv[2]).read().splitlines()
assert got == want, (sys.argv[3], got[:4], want[:4])
assert len(series) >= 2, series
print("query-range %s: %d series, %d points equal" % (sys.argv[3], len(series), len(got)))
PYEOF
done
"$KILNCTL" query-range --address="$ADDR" "$Q" --start=$S --end=$E --sum-by=comm --limit=2 \
	>"$T/k.table" || die "table"
head -1 "$T/k.table" | grep -q 'TOTAL.*POINTS.*LABELS' || die "table header: $(head -1 "$T/k.table")"
grep -q '__other__="2 more"' "$T/k.table" || { cat "$T/k.table"; die "no other series in the table"; }
[ "$(sed -n 2p "$T/k.table" | grep -c 'comm="api"')" = 1 ] || { cat "$T/k.table"; die "api is not first"; }

# What a user gets wrong: exit 2 with a reason; no data: exit 1.
"$KILNCTL" query --address="$ADDR" "$Q" --group-by=comm --output=pprof 2>"$T/err"
[ $? = 2 ] && grep -q 'cannot carry groups' "$T/err" || die "--group-by with pprof"
"$KILNCTL" query-range --address="$ADDR" "$Q" --limit=-3 2>/dev/null
[ $? = 2 ] || die "--limit=-3"
"$KILNCTL" query-range --address="$ADDR" 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="none"}' \
	--start=$S --end=$E 2>"$T/err"
[ $? = 1 ] && grep -q 'no series' "$T/err" || die "no match: not exit 1"
"$KILNCTL" query --address="$ADDR" "${Q%\}*},comm=\"zz\"}" --start=$S --end=$E --group-by=comm 2>"$T/err"
[ $? = 1 ] && grep -q 'no samples' "$T/err" || die "group-by with no match: not exit 1"
server_stop
echo "PASS: kilnctl query --group-by and query-range --sum-by/--limit"
