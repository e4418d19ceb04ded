#!/usr/bin/env bash
# Off-CPU profiles over the stream push: an agent with --off-cpu-threshold
# writes local files and pushes the same windows to a real kiln
# (IngestService/Push, the default). The server's wallclock profile of the
# blocking program holds exactly the off-CPU time of the agent's local
# .offcpu files, as a delta series of parca_agent, and its CPU profile the
# samples of the CPU files.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build offcpu_block
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
port=$(free_port)
"$KILN_BIN/kiln" --http-address=127.0.0.1:$port --storage-path="$AGENT_TMP/data" \
	>"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid; wait $kiln_pid")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"

out="$AGENT_TMP/profiles"
agent_start "$out" --remote-store-address=127.0.0.1:$port --remote-store-insecure \
	--node=offcpu-push-node --profiling-duration=1s --off-cpu-threshold=1ms \
	--off-cpu-probability=1 --debuginfo-upload-disable --http-address=
"$AGENT_TESTBIN/offcpu_block" 3 >/dev/null &
prog=$!
wait $prog || fail "offcpu_block failed"
sleep 2.5
agent_stop
grep -q "push failed\|refused\|dropping" "$AGENT_LOG" && fail "push failed: $(cat "$AGENT_LOG")"
grep -q "using the streaming ingest protocol" "$AGENT_LOG" ||
	fail "the agent did not use the stream protocol: $(grep 'remote store' "$AGENT_LOG")"

K="http://127.0.0.1:$port"
sel="%7Bpid=%22$prog%22,node=%22offcpu-push-node%22%7D"
total() { # TYPE
	curl -sgf "$K/api/v1/query?mode=merge&query=$1$sel&start=0&end=9999999999999&report=top" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])' || echo "no answer"
}
W="parca_agent:wallclock:nanoseconds:samples:count:delta"
C="parca_agent:samples:count:cpu:nanoseconds:delta"
types=$(curl -sf "$K/api/v1/profile-types") || fail "profile-types failed"
grep -q "\"key\":\"$W\"" <<<"$types" || fail "no off-CPU type on the server: $types"

# The local store's default layout: one file per window, each sample
# labelled with its process's pid.
offfiles=$(ls "$out"/*.offcpu.pb.gz 2>/dev/null) || fail "no local off-CPU files: $(ls "$out" | head)"
# (none when no window saw the blocking program on a CPU: grep -v then
# finds nothing and fails, which is no error here)
cpufiles=$(ls "$out"/*.pb.gz | grep -v '\.offcpu\.pb\.gz$' || true)
local_ns=$(go tool pprof -symbolize=none -tagfocus="pid=^$prog\$" -raw $offfiles 2>/dev/null |
	awk '/^Samples:/ {s = 1; next} /^Locations/ {s = 0} s && $1 ~ /^[0-9]+:$/ {sub(":", "", $1); t += $1} END {printf "%.0f\n", t}')
server_ns=$(total "$W")
echo "off-CPU ns: local files $local_ns, server $server_ns"
[ "${local_ns:-0}" -gt 0 ] || fail "no off-CPU time of pid $prog in the local files"
[ "$server_ns" = "$local_ns" ] || fail "server holds $server_ns ns off CPU, the files $local_ns"

local_n=0
[ -z "$cpufiles" ] || local_n=$(pprof_samples -tagfocus="pid=^$prog\$" $cpufiles)
server_n=$(total "$C")
echo "CPU samples: local files ${local_n:-0}, server $server_n"
if [ "${local_n:-0}" -gt 0 ]; then
	[ "$server_n" = "$local_n" ] || fail "server holds $server_n CPU samples, the files $local_n"
fi
echo PASS
