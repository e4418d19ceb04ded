#!/usr/bin/env bash
# `make run`: the main job on the embedded store. Starts the server on
# 127.0.0.1:7070 (loopback only, so it needs no tokens: docs/SECURITY.md;
# data in ./data, pull-mode config kiln.yaml when present), waits until it is
# ready, then starts the agent pushing to it (or, with an agent that cannot
# push, writing pprof files to ./profiles). Ctrl-C stops both.
#
# Environment: KILN_PORT (default 7070), KILN_CONFIG (default ./kiln.yaml),
# KILN_AGENT=0 to run the server alone (the agent needs root and BTF).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
port=${KILN_PORT:-7070}
config=${KILN_CONFIG:-kiln.yaml}
pids=()

stop() {
	trap - INT TERM EXIT
	echo
	echo "run: stopping"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	exit 0
}
trap stop INT TERM EXIT

server_args=(--http-address="127.0.0.1:$port" --storage-path=./data)
if [ -f "$config" ] && "$bin/kiln" --help 2>&1 | grep -q -- '--config-path'; then
	server_args+=(--config-path="$config")
fi
echo "run: $bin/kiln ${server_args[*]}"
"$bin/kiln" "${server_args[@]}" &
pids+=($!)

for _ in $(seq 1 100); do
	curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
	kill -0 "${pids[0]}" 2>/dev/null || { echo "run: the server exited; see its messages above" >&2; exit 1; }
	sleep 0.1
done

if [ "${KILN_AGENT:-1}" != 0 ]; then
	agent_args=()
	if "$bin/kiln-agent" --help 2>&1 | grep -q -- '--remote-store-address'; then
		agent_args+=(--remote-store-address="127.0.0.1:$port" --remote-store-insecure)
	else
		mkdir -p profiles
		agent_args+=(--local-store-directory=./profiles)
	fi
	echo "run: $bin/kiln-agent ${agent_args[*]}"
	"$bin/kiln-agent" "${agent_args[@]}" &
	pids+=($!)
fi

cat <<EOF

Kiln is running.
  web UI:   http://127.0.0.1:$port/
  metrics:  http://127.0.0.1:$port/metrics
  query:    $bin/kilnctl query --address=127.0.0.1:$port 'parca_agent:samples:count:cpu:nanoseconds:delta' --since=5m --output=top
Profiles appear after the first 10 s window. Press Ctrl-C to stop.
EOF
wait -n "${pids[@]}"
echo "run: a process exited; stopping the others" >&2
