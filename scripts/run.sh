#!/usr/bin/env bash
# `make run`: the main job on the embedded store. Starts the server on
# 127.0.0.1:$KILN_PORT (loopback only, so it needs no tokens:
# docs/SECURITY.md; data in $KILN_DATA, pull-mode config kiln.yaml when
# present), waits until it is ready, then starts the agent pushing to it.
#
# Stopping: Ctrl-C, SIGINT or SIGTERM (to make or to this script) stops the
# agent first, which sends its last window, and then the server. The two run
# in process groups of their own (set -m) so that a terminal's Ctrl-C reaches
# only make and this script, not both binaries at once (the server would go
# before the agent's last window). Exits non-zero when the server cannot
# start or a binary fails.
#
# Environment: KILN_PORT (default 7070), KILN_DATA (default ./data),
# KILN_CONFIG (default ./kiln.yaml), KILN_AGENT=0 to run the server alone
# (the agent needs root and BTF).
set -uo pipefail
set -m
cd "$(dirname "$0")/.."
bin=build/bin
port=${KILN_PORT:-7070}
data=${KILN_DATA:-./data}
config=${KILN_CONFIG:-kiln.yaml}
server="" agent="" watcher=""

# Waits up to $2 seconds for pid $1 to exit; then kills it.
reap() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# Whether process $1 has a handler for SIGINT (signal 2: bit 1 of SigCgt).
sigint_caught() {
	local mask
	mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) && [ -n "$mask" ] &&
		(((16#$mask >> 1) & 1))
}

stop() { # [exit status]
	local rc=${1:-0}
	trap - INT TERM HUP EXIT
	[ -n "$watcher" ] && kill "$watcher" 2>/dev/null
	echo
	if [ -n "$agent" ] && kill -0 "$agent" 2>/dev/null; then
		echo "run: stopping the agent (it sends its last window)"
		kill -INT "$agent" 2>/dev/null
		reap "$agent" 30
	fi
	if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
		echo "run: stopping the server"
		kill -TERM "$server" 2>/dev/null
		reap "$server" 30
	fi
	exit "$rc"
}
trap 'stop 0' INT TERM HUP
trap 'stop $?' EXIT

server_args=(--http-address="127.0.0.1:$port" --storage-path="$data")
if [ -f "$config" ]; then
	server_args+=(--config-path="$config")
fi
echo "run: $bin/kiln ${server_args[*]}"
"$bin/kiln" "${server_args[@]}" &
server=$!

for _ in $(seq 1 100); do
	kill -0 "$server" 2>/dev/null || {
		echo "run: the server could not start (see its message above); another port: KILN_PORT=7171 make run" >&2
		exit 1
	}
	# Bounded: whatever else holds the port may accept and never answer.
	curl -fsS --max-time 1 "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
	sleep 0.1
done

if [ "${KILN_AGENT:-1}" != 0 ]; then
	agent_args=(--remote-store-address="127.0.0.1:$port" --remote-store-insecure)
	echo "run: $bin/kiln-agent ${agent_args[*]}"
	"$bin/kiln-agent" "${agent_args[@]}" &
	agent=$!
fi

cat <<EOF

Kiln is running.
  web UI:   http://127.0.0.1:$port/
  metrics:  http://127.0.0.1:$port/metrics
  query:    $bin/kilnctl query --address=127.0.0.1:$port 'parca_agent:samples:count:cpu:nanoseconds:delta' --since=5m --output=top
Profiles appear after the first 10 s window. Press Ctrl-C to stop.
EOF
# make, on SIGINT, waits for its children, expecting the terminal to have
# signalled them too; a SIGINT sent to make alone would leave it waiting
# for ever. It resets SIGINT to the default action when one arrives (to
# re-raise it), so a watcher reads make's caught-signal mask and stops us
# when SIGINT leaves it.
if [ "$(cat /proc/$PPID/comm 2>/dev/null)" = make ] && sigint_caught $PPID; then
	(
		while sleep 1 && sigint_caught $PPID; do :; done
		kill -TERM $$ 2>/dev/null
	) &
	watcher=$!
fi
# Returns when either binary exits (or a signal's trap runs stop).
wait -n $server $agent
rc=$?
echo "run: a process exited (status $rc); stopping the other" >&2
stop "$((rc ? rc : 1))"
