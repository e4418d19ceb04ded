#!/usr/bin/env bash
# The streaming ingest protocol (IngestService/Push) end to end, with the
# real agent and real servers:
#   1. the agent pushes a burn process over the stream protocol (it says so
#      in its log); the server is killed with SIGKILL in the middle and
#      restarted on the same storage; afterwards the server holds exactly
#      the samples of the agent's local files: no acknowledged window lost,
#      none counted twice (the replayed windows are recognised);
#   2. the same local files pushed with WriteRaw to a second server give
#      the same flame graph (folded stacks with their values) as the
#      stream protocol did, the same mappings and frames (report=pprof),
#      and the stream server's series carry the local files' labels;
#   3. a server started with --disable-stream-ingest makes the agent fall
#      back to WriteRaw, and the data arrives.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
PY=/usr/bin/python3
$PY -c 'import grpc_tools' 2>/dev/null || fail "precondition: python3-grpc-tools not installed"

KPID=""
kiln_start() { # PORT DATA [FLAGS...]
	local port=$1 data=$2
	shift 2
	"$KILN_BIN/kiln" --http-address=127.0.0.1:$port --storage-path="$data" "$@" \
		>>"$AGENT_TMP/kiln-$port.log" 2>&1 &
	KPID=$!
	AGENT_CLEANUP+=("kill $KPID 2>/dev/null; wait $KPID 2>/dev/null")
	for _ in $(seq 1 150); do
		curl -sf "http://127.0.0.1:$port/ready" >/dev/null && return 0
		sleep 0.1
	done
	fail "kiln not ready: $(cat "$AGENT_TMP/kiln-$port.log")"
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

# ---- 1. stream push, SIGKILL and restart of the server in the middle ----
p1=$(free_port)
kiln_start $p1 "$AGENT_TMP/d1"
s1=$KPID
out="$AGENT_TMP/profiles"
agent_start "$out" --remote-store-address=127.0.0.1:$p1 --remote-store-insecure \
	--node=stream-node --profiling-duration=1s --debuginfo-upload-disable --http-address= \
	--log-level=debug
"$AGENT_TESTBIN/burn" 10 >/dev/null &
bpid=$!
# Kill the server once windows of burn are stored, while burn still runs.
for _ in $(seq 1 100); do
	n=$(curl -sf "http://127.0.0.1:$p1/metrics" | awk '/^kiln_ingested_samples_total/ {print $2}')
	[ "${n:-0}" -gt 0 ] && break
	sleep 0.1
done
[ "${n:-0}" -gt 0 ] || fail "nothing pushed within 10 s: $(grep 'remote store' "$AGENT_LOG")"
sleep 1
kill -KILL $s1
wait $s1 2>/dev/null || true
sleep 1
kiln_start $p1 "$AGENT_TMP/d1"
wait $bpid
sleep 3
agent_stop
grep -q "using the streaming ingest protocol" "$AGENT_LOG" ||
	fail "the agent did not use the stream protocol: $(grep 'remote store' "$AGENT_LOG")"
grep -q "asked for a new session\|push failed" "$AGENT_LOG" ||
	fail "the restart went unnoticed by the agent (was the server killed mid-stream?)"
grep -q "dropping\|refused" "$AGENT_LOG" && fail "windows dropped: $(grep 'remote store' "$AGENT_LOG")"

sel="%7Bpid=%22$bpid%22,comm=%22burn%22,node=%22stream-node%22%7D"
local_n=$(pprof_samples $(agent_files "$out" "$bpid" burn))
server_n=$(total $p1 "$sel")
echo "local files: $local_n samples, stream server after SIGKILL+restart: $server_n"
[ "${local_n:-0}" -gt 0 ] || fail "no local samples of burn"
[ "$server_n" = "$local_n" ] || fail "server holds $server_n samples, the agent's files $local_n"

# ---- 2. the same data through WriteRaw gives the same profile ----------
p2=$(free_port)
kiln_start $p2 "$AGENT_TMP/d2" --disable-stream-ingest
STUBS="$AGENT_TMP/stubs"
mkdir -p "$STUBS"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
	--grpc_python_out="$STUBS" parca/profilestore/v1alpha1/profilestore.proto \
	parca/query/v1alpha1/query.proto parca/metastore/v1alpha1/metastore.proto \
	pprof/profile.proto) || fail "grpc_tools.protoc failed"
for f in $(agent_files "$out" "$bpid" burn); do
	$PY "$KILN_ROOT/tests/integration/server_grpc_client.py" write --stubs "$STUBS" \
		--addr 127.0.0.1:$p2 --name parca_agent --label pid=$bpid --label comm=burn \
		--profiles "$f" || fail "WriteRaw of $f"
done
sel2="%7Bpid=%22$bpid%22,comm=%22burn%22%7D"
folded $p1 "$sel" >"$AGENT_TMP/stream.folded"
folded $p2 "$sel2" >"$AGENT_TMP/writeraw.folded"
[ -s "$AGENT_TMP/stream.folded" ] || fail "no folded stacks from the stream server"
diff "$AGENT_TMP/stream.folded" "$AGENT_TMP/writeraw.folded" >"$AGENT_TMP/folded.diff" ||
	fail "stream and WriteRaw profiles differ: $(head -20 "$AGENT_TMP/folded.diff")"
echo "stream and WriteRaw: $(wc -l <"$AGENT_TMP/stream.folded") identical stacks"
# Beyond the flame graph: the same mappings (file, build ID, range) and
# the same frames by address, and the series labels the local files carry.
pprof_of() { # PORT SELECTOR FILE
	curl -sgf -o "$3" "http://127.0.0.1:$1/api/v1/query?mode=merge&query=$T$2&start=0&end=9999999999999&report=pprof" ||
		fail "report=pprof from port $1"
}
pprof_of $p1 "$sel" "$AGENT_TMP/stream.pb.gz"
pprof_of $p2 "$sel2" "$AGENT_TMP/writeraw.pb.gz"
$PY "$KILN_ROOT/tests/integration/pprof_compare.py" --stubs "$STUBS" profiles \
	"$AGENT_TMP/stream.pb.gz" "$AGENT_TMP/writeraw.pb.gz" ||
	fail "the stream server's profile differs from the local files' (WriteRaw)"
$PY "$KILN_ROOT/tests/integration/pprof_compare.py" --stubs "$STUBS" labels \
	"http://127.0.0.1:$p1" "$T{pid=\"$bpid\",comm=\"burn\",node=\"stream-node\"}" \
	$(agent_files "$out" "$bpid" burn) ||
	fail "the stream server's series labels differ from the local files'"

# ---- 3. a server without the service: the agent falls back to WriteRaw --
p3=$(free_port)
kiln_start $p3 "$AGENT_TMP/d3" --disable-stream-ingest
out3="$AGENT_TMP/profiles3"
agent_start "$out3" --remote-store-address=127.0.0.1:$p3 --remote-store-insecure \
	--node=fallback-node --profiling-duration=1s --debuginfo-upload-disable --http-address=
"$AGENT_TESTBIN/burn" 2 >/dev/null &
b3=$!
wait $b3
sleep 2
agent_stop
grep -q "no streaming ingest" "$AGENT_LOG" || fail "no fallback logged: $(cat "$AGENT_LOG")"
sel3="%7Bpid=%22$b3%22,comm=%22burn%22,node=%22fallback-node%22%7D"
local3=$(pprof_samples $(agent_files "$out3" "$b3" burn))
server3=$(total $p3 "$sel3")
echo "fallback: local $local3, server $server3"
[ "${local3:-0}" -gt 0 ] && [ "$server3" = "$local3" ] || fail "fallback server has $server3, files $local3"
echo PASS
