#!/usr/bin/env bash
# A server that accepts connections and never answers (a TCP black hole):
# the push and the debuginfo upload hang in their calls, yet sampling goes
# on losing nothing, and SIGINT still stops the agent promptly (the flush
# gets its few seconds, then calls in flight are cancelled; without that,
# the upload's 2-minute call timeout would hold the exit).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
port=$(free_port)
python3 - "$port" >"$AGENT_TMP/hole.log" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("listening", flush=True)
held = []
while True:
    c, _ = s.accept()
    held.append(c)  # never read, never answer
PY
hole=$!
AGENT_CLEANUP+=("kill $hole")
for _ in $(seq 1 50); do grep -q listening "$AGENT_TMP/hole.log" && break; sleep 0.1; done

agent_start "$AGENT_TMP/profiles" --remote-store-address=127.0.0.1:$port --remote-store-insecure \
	--profiling-duration=1s --http-address=
"$AGENT_TESTBIN/burn" 0.5 >/dev/null
sleep 2
kill -INT "$AGENT_PID"
rc=0
timeout 30 tail --pid="$AGENT_PID" -f /dev/null || rc=$?
[ "$rc" = 0 ] || fail "agent still running 30 s after SIGINT: $(tail -5 "$AGENT_LOG")"
wait "$AGENT_PID" || fail "agent exited with $?: $(tail -5 "$AGENT_LOG")"
AGENT_PID=""
line=$(grep "stopped:" "$AGENT_LOG") || fail "no exit summary: $(cat "$AGENT_LOG")"
echo "$line"
grep -q " 0 lost" <<<"$line" || fail "sampling lost data while the push hung"
grep -q "dropping .* undelivered profiles at exit" "$AGENT_LOG" ||
	fail "undelivered windows not reported: $(cat "$AGENT_LOG")"
ls "$(agent_split "$AGENT_TMP/profiles")"/*_burn.pb.gz >/dev/null || fail "local store stopped while the push hung"
echo PASS
