#!/usr/bin/env bash
# /metrics of kiln and kiln-agent, parsed by Prometheus' own Python parser
# (tests/integration/metrics_check.py): every family's samples follow its own
# HELP and TYPE lines (no family of type "unknown"), and both pages carry the
# process_* families and their build_info. The agent pushes to the server
# and a few HTTP requests are made first, so that the gRPC and HTTP request
# families have samples of several methods and routes.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null ||
	fail "precondition: python3-prometheus-client not installed"
check="$KILN_ROOT/tests/integration/metrics_check.py"
process="process_cpu_seconds_total process_resident_memory_bytes process_open_fds
	process_start_time_seconds"

K=127.0.0.1:$(free_port)
"$KILN_BIN/kiln" --http-address=$K --storage-path="$AGENT_TMP/data" >"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid 2>/dev/null; wait $kiln_pid 2>/dev/null")
for _ in $(seq 1 100); do curl -sf "http://$K/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://$K/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"

mport=$(free_port)
agent_start "$AGENT_TMP/profiles" --remote-store-address=$K --remote-store-insecure \
	--profiling-duration=1s --http-address=127.0.0.1:$mport
curl -sf "http://$K/api/v1/labels" >/dev/null || true
curl -s "http://$K/no-such-route" >/dev/null || true
# Until the agent's first pushes have arrived (a loaded machine and a
# sanitized build can take several windows).
for _ in $(seq 1 150); do
	curl -sf "http://$K/metrics" >"$AGENT_TMP/kiln.metrics" || fail "kiln /metrics"
	grep -q '^kiln_grpc_requests_total{.*} [1-9]' "$AGENT_TMP/kiln.metrics" && break
	sleep 0.2
done

curl -sf "http://127.0.0.1:$mport/metrics" >"$AGENT_TMP/agent.metrics" || fail "agent /metrics"
curl -sf "http://$K/metrics" >"$AGENT_TMP/kiln.metrics" || fail "kiln /metrics"
agent_stop
grep -q '^kiln_grpc_requests_total{.*} [1-9]' "$AGENT_TMP/kiln.metrics" ||
	fail "no gRPC request counted: the agent's pushes did not reach kiln"

# shellcheck disable=SC2086 # $process is a list of names
/usr/bin/python3 "$check" "$AGENT_TMP/kiln.metrics" kiln_build_info $process ||
	fail "kiln's /metrics"
# shellcheck disable=SC2086
/usr/bin/python3 "$check" "$AGENT_TMP/agent.metrics" kiln_agent_build_info $process ||
	fail "kiln-agent's /metrics"

# The values are this process's, not zeros: both started seconds ago and hold memory.
now=$(date +%s)
for f in kiln agent; do
	start=$(awk '$1 == "process_start_time_seconds" {printf "%d", $2}' "$AGENT_TMP/$f.metrics")
	[ -n "$start" ] && [ $((now - start)) -ge 0 ] && [ $((now - start)) -lt 600 ] ||
		fail "$f: process_start_time_seconds $start is not a few seconds before $now"
	awk '$1 == "process_resident_memory_bytes" && $2 > 1e6 {ok=1} END {exit !ok}' \
		"$AGENT_TMP/$f.metrics" || fail "$f: process_resident_memory_bytes under 1 MB"
	awk '$1 == "process_open_fds" && $2 >= 3 {ok=1} END {exit !ok}' \
		"$AGENT_TMP/$f.metrics" || fail "$f: process_open_fds under 3"
done
grep -q "^kiln_build_info{version=\"$("$KILN_BIN/kiln" --version | cut -d' ' -f2)\"} 1$" \
	"$AGENT_TMP/kiln.metrics" || fail "kiln_build_info is not kiln --version's"
echo "ok: both /metrics pages parse with no unknown family"
