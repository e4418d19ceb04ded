#!/usr/bin/env bash
# End to end with Kiln's own server: the agent writes local files and pushes
# the same windows to a real `kiln` (local store and push together). The
# server's HTTP query API then lists the parca_agent profile type, the
# series labels the agent set (comm, pid, node, executable, ...), and, for
# the burn process selected by {pid, comm, node}, exactly the samples the
# local files hold.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
port=$(free_port)
"$KILN_BIN/kiln" --http-address=127.0.0.1:$port --storage-path="$AGENT_TMP/data" \
	>"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid; wait $kiln_pid")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"

out="$AGENT_TMP/profiles"
node=kiln-push-test-node
agent_start "$out" --remote-store-address=127.0.0.1:$port --remote-store-insecure \
	--node=$node --profiling-duration=2s --http-address=
"$AGENT_TESTBIN/burn" 1 >/dev/null & bpid=$!
wait $bpid
sleep 2.5
agent_stop
grep -q "push failed\|refused\|dropping" "$AGENT_LOG" && fail "push failed: $(cat "$AGENT_LOG")"

K="http://127.0.0.1:$port"
types=$(curl -sf "$K/api/v1/profile-types") || fail "profile-types failed"
grep -q '"key":"parca_agent:samples:count:cpu:nanoseconds:delta"' <<<"$types" ||
	fail "no parca_agent samples type: $types"
T="parca_agent:samples:count:cpu:nanoseconds:delta"
names=$(curl -sgf "$K/api/v1/labels?query=$T") || fail "labels failed"
for l in comm pid node executable kernel_release cgroup; do
	grep -q "\"$l\"" <<<"$names" || fail "label $l missing: $names"
done

local_n=$(pprof_samples $(agent_files "$out" "$bpid" burn))
sel="%7Bpid=%22$bpid%22,comm=%22burn%22,node=%22$node%22%7D"
resp=$(curl -sf "$K/api/v1/query?mode=merge&query=$T$sel&start=0&end=9999999999999&report=top") ||
	fail "query failed"
server_n=$(echo "$resp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
echo "local files: $local_n samples, server: $server_n"
[ "${local_n:-0}" -gt 0 ] && [ "$server_n" = "$local_n" ] || fail "server has $server_n, files $local_n"
values=$(curl -sgf "$K/api/v1/values?label=executable&query=$T$sel")
grep -q "agent-test/burn" <<<"$values" || fail "executable label missing: $values"
echo PASS
