#!/usr/bin/env bash
# The agents' streaming protocol (IngestService/Push) on a ClickHouse-backed
# server, with the real agent:
#   1. the agent pushes a burn process over the stream protocol to kiln A
#      on ClickHouse (it says so in its log); A is killed with SIGKILL in
#      the middle and a new server is started on the same ClickHouse and
#      port; afterwards the server holds exactly the samples of the agent's
#      local files: no acknowledged window lost, none counted twice (the
#      windows the agent sends again are recognised by their marker in
#      ClickHouse, not by the dead server's memory);
#   2. a second server B on the same ClickHouse, which the agent never
#      talked to, answers the same flame graph as A.
source "$(dirname "$0")/../lib/agent_test.bash"
source "$KILN_ROOT/tests/lib/clickhouse.bash"
agent_setup
agent_build burn
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
ch_available || fail "precondition: clickhouse-server not installed (make deps)"
PY=/usr/bin/python3
chmod o+x "$AGENT_TMP"
ch_start "$AGENT_TMP/ch" >/dev/null || fail "cannot start clickhouse-server"
AGENT_CLEANUP+=("ch_stop")

KPID=""
kiln_start() { # PORT NAME
	local port=$1 name=$2
	"$KILN_BIN/kiln" --http-address=127.0.0.1:$port --storage-path="$AGENT_TMP/$name" \
		--storage=clickhouse --clickhouse-url="$CH_URL" >>"$AGENT_TMP/kiln-$name.log" 2>&1 &
	KPID=$!
	AGENT_CLEANUP+=("kill $KPID 2>/dev/null; wait $KPID 2>/dev/null")
	for _ in $(seq 1 150); do
		curl -sf "http://127.0.0.1:$port/ready" >/dev/null && return 0
		sleep 0.1
	done
	fail "kiln $name not ready: $(cat "$AGENT_TMP/kiln-$name.log")"
}
folded() { # PORT SELECTOR: the merged stacks of the selection, sorted
	curl -sgf "http://127.0.0.1:$1/api/v1/query?mode=merge&query=$T$2&start=0&end=9999999999999&report=folded" |
		sort
}
total() { # PORT SELECTOR
	curl -sgf "http://127.0.0.1:$1/api/v1/query?mode=merge&query=$T$2&start=0&end=9999999999999&report=top" |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["total"])' || echo "no answer"
}
T="parca_agent:samples:count:cpu:nanoseconds:delta"

# ---- 1. stream push to ClickHouse, SIGKILL and a new server mid-stream ----
pa=$(free_port)
kiln_start $pa a1
sa=$KPID
out="$AGENT_TMP/profiles"
agent_start "$out" --remote-store-address=127.0.0.1:$pa --remote-store-insecure \
	--node=ch-stream-node --profiling-duration=1s --debuginfo-upload-disable --http-address= \
	--log-level=debug
"$AGENT_TESTBIN/burn" 10 >/dev/null &
bpid=$!
for _ in $(seq 1 100); do
	n=$(curl -sf "http://127.0.0.1:$pa/metrics" | awk '/^kiln_ingested_samples_total/ {print $2}')
	[ "${n:-0}" -gt 0 ] && break
	sleep 0.1
done
[ "${n:-0}" -gt 0 ] || fail "nothing pushed within 10 s: $(grep 'remote store' "$AGENT_LOG")"
sleep 1
kill -KILL $sa
wait $sa 2>/dev/null || true
sleep 1
kiln_start $pa a2
wait $bpid
sleep 3
agent_stop
grep -q "using the streaming ingest protocol" "$AGENT_LOG" ||
	fail "the agent did not use the stream protocol: $(grep 'remote store' "$AGENT_LOG")"
grep -q "no streaming ingest" "$AGENT_LOG" &&
	fail "the agent fell back to WriteRaw: $(grep 'remote store' "$AGENT_LOG")"
grep -q "asked for a new session\|push failed" "$AGENT_LOG" ||
	fail "the restart went unnoticed by the agent (was the server killed mid-stream?)"
grep -q "dropping\|refused" "$AGENT_LOG" && fail "windows dropped: $(grep 'remote store' "$AGENT_LOG")"

sel="%7Bpid=%22$bpid%22,comm=%22burn%22,node=%22ch-stream-node%22%7D"
local_n=$(pprof_samples $(agent_files "$out" "$bpid" burn))
server_n=$(total $pa "$sel")
echo "local files: $local_n samples; ClickHouse after SIGKILL and a new server: $server_n"
[ "${local_n:-0}" -gt 0 ] || fail "no local samples of burn"
[ "$server_n" = "$local_n" ] || fail "ClickHouse holds $server_n samples, the agent's files $local_n"

# ---- 2. another server on the same ClickHouse answers the same -----------
pb=$(free_port)
kiln_start $pb b
folded $pa "$sel" >"$AGENT_TMP/a.folded"
folded $pb "$sel" >"$AGENT_TMP/b.folded"
[ -s "$AGENT_TMP/a.folded" ] || fail "no folded stacks from server A"
diff "$AGENT_TMP/a.folded" "$AGENT_TMP/b.folded" >"$AGENT_TMP/ab.diff" ||
	fail "servers A and B differ: $(head -20 "$AGENT_TMP/ab.diff")"
[ "$(total $pb "$sel")" = "$local_n" ] || fail "server B's total differs"
echo "PASS: clickhouse_stream ($local_n samples, $(wc -l <"$AGENT_TMP/a.folded") stacks on both servers)"
