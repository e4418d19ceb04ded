#!/usr/bin/env bash
# One suite, two backends: the same real profiles (Go CPU and heap, pushed
# with WriteRaw) go to a kiln on the embedded store and to a kiln on
# ClickHouse; every kind of query (profile types, labels, values,
# query_range, merge/single/diff as flame graph, top, folded and pprof) is
# asked of the embedded one and of a *second* kiln on the same ClickHouse
# (stateless servers: it never received a write), and the answers must be
# identical. Label values that are SQL are stored and matched as text.
source "$(dirname "$0")/clickhouse_lib.bash"
ch_setup
kiln_start emb
kiln_start ch1 $(ch_kiln_flags)
kiln_start ch2 $(ch_kiln_flags)

P=$T/prof
# A label value that would break a query built by pasting strings.
EVIL="x'); DROP TABLE kiln.samples; --"
for s in emb ch1; do
	on $s write --name kiln_test --label job=grpc --label node=n1 \
		--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" || die "WriteRaw to $s"
	on $s write --name kiln_test --label job=grpc --label node=n1 \
		--profiles "$P/cpu-1.pb.gz" "$P/heap-1.pb.gz" || die "WriteRaw 2 to $s"
	on $s write --name kiln_test --label job=other --label node=n2 \
		--profiles "$P/cpu-0.pb.gz" || die "WriteRaw 3 to $s"
	on $s write --name kiln_evil --label job=other --label "node=$EVIL" \
		--profiles "$P/cpu-1.pb.gz" || die "WriteRaw 4 to $s"
done

u() { $PY -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
CPU='kiln_test:samples:count:cpu:nanoseconds:delta'
HEAP='kiln_test:inuse_space:bytes:space:bytes'
Q1=$(u "$CPU{node=\"n1\"}")
QE=$(u "kiln_evil:samples:count:cpu:nanoseconds:delta{node=\"$EVIL\"}")
QR=$(u "$CPU{job=~\"gr.*\"}")
QH=$(u "$HEAP")
END=9999999999999
# The heap profiles' times, for single and diff.
mapfile -t TIMES < <(curl -sf "http://$ADDR_emb/api/v1/query_range?query=$QH&start=0&end=$END" |
	$PY -c 'import json,sys; print("\n".join(str(p[0]) for s in json.load(sys.stdin)["series"] for p in s["points"]))' 2>/dev/null)
[ "${#TIMES[@]}" -ge 2 ] || die "query_range on the embedded store: want 2 heap profiles, got ${TIMES[*]}"

paths=(
	/api/v1/profile-types
	/api/v1/labels
	"/api/v1/labels?query=$Q1"
	"/api/v1/values?label=node&query=$(u "$CPU")"
	"/api/v1/values?label=job"
	"/api/v1/values?label=node&query=$Q1&start=0&end=1"
	"/api/v1/query_range?query=$(u "$CPU")&start=0&end=$END"
	"/api/v1/query_range?query=$QR&start=0&end=$END&step=3600000"
	"/api/v1/query_range?query=$QE&start=0&end=$END"
	"/api/v1/query_range?query=$QH&start=0&end=$END"
)
for r in flamegraph top folded pprof; do
	paths+=("/api/v1/query?mode=merge&query=$(u "$CPU")&start=0&end=$END&report=$r"
		"/api/v1/query?mode=merge&query=$QE&start=0&end=$END&report=$r"
		"/api/v1/query?mode=merge&query=$QR&start=0&end=$END&report=$r&filter=spin"
		"/api/v1/query?mode=single&query=$QH&time=${TIMES[0]}&report=$r"
		"/api/v1/query?mode=diff&a_query=$QH&a_mode=single&a_time=${TIMES[0]}&b_query=$QH&b_mode=single&b_time=${TIMES[1]}&report=$r")
done
paths+=("/api/v1/query?mode=merge&query=$(u 'kiln_test:nothing:count:cpu:nanoseconds')&start=0&end=$END&report=top"
	"/api/v1/query?mode=merge&query=$(u "$CPU{node=}")&start=0&end=$END&report=top")

$PY "$KILN_ROOT/tests/integration/clickhouse_compare.py" "$STUBS" "$ADDR_emb" "$ADDR_ch2" \
	"${paths[@]}" || die "the ClickHouse answers differ from the embedded store's"

curl -sf "http://$ADDR_ch2/api/v1/query?mode=merge&query=$QE&start=0&end=$END&report=top" |
	grep -q '"total":[1-9]' || die "the series with the SQL-like label value does not match"
# The evil label value is one series with its text intact, and the tables
# are all still there.
curl -sf "http://$ADDR_ch2/api/v1/values?label=node" | grep -qF "DROP TABLE kiln.samples; --" ||
	die "the SQL-like label value was not stored as text"
[ "$(ch_query "SELECT count() FROM system.tables WHERE database = 'kiln'")" = 6 ] ||
	die "kiln's tables changed"

# The gRPC client's own query checks pass against the second server too.
on ch2 check --name kiln_test --label job=grpc --label node=n1 \
	--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" "$P/cpu-1.pb.gz" "$P/heap-1.pb.gz" \
	--other job=other --other node=n2 --out "$T" || die "QueryService checks on ClickHouse"
kiln_stop ch1
kiln_stop ch2
kiln_stop emb
echo "PASS: clickhouse_queries"
