#!/usr/bin/env bash
# `make run` stops cleanly however it is stopped: Ctrl-C (SIGINT to the
# terminal's whole foreground process group), SIGINT or SIGTERM to make
# alone. Each time the agent stops first and sends its last window (no
# "undelivered" profiles), then the server, and nothing is left running.
# With its port taken, `make run` says so and exits non-zero.
set -uo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "precondition: the agent needs root"
tmp=$(mktemp -d /tmp/kiln-run-test.XXXXXX)
busy=""
cleanup() {
	pkill -TERM -f "kiln.*--storage-path=$tmp" 2>/dev/null
	[ -n "$busy" ] && kill "$busy" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# make_run NAME: starts `make run` in a process group of its own (as a
# terminal would), with its data in $tmp/NAME; sets mk and log.
make_run() {
	log="$tmp/$1.log"
	set -m
	KILN_PORT=$port KILN_DATA="$tmp/$1" KILN_CONFIG=/nonexistent MAKEFLAGS= \
		make --no-print-directory -C "$KILN_ROOT" run >"$log" 2>&1 &
	mk=$!
	set +m
}
started() { # waits until the agent samples and its first window went out
	for _ in $(seq 1 300); do
		grep -q "profiling every CPU" "$log" && break
		kill -0 $mk 2>/dev/null || { cat "$log"; fail "make run exited at start"; }
		sleep 0.2
	done
	grep -q "profiling every CPU" "$log" || { cat "$log"; fail "the agent did not start"; }
	sleep 3
}
# check NAME: make is gone, the agent stopped before the server and
# delivered everything, and no binary of this run is left.
check() {
	for _ in $(seq 1 300); do kill -0 $mk 2>/dev/null || break; sleep 0.2; done
	kill -0 $mk 2>/dev/null && { cat "$log"; fail "$1: make still running 60 s later"; }
	pgrep -f "storage-path=$tmp/$1" >/dev/null && fail "$1: the server is still running"
	pgrep -f "kiln-agent --remote-store-address=127.0.0.1:$port" >/dev/null &&
		fail "$1: the agent is still running"
	grep -q "undelivered" "$log" && { cat "$log"; fail "$1: the agent dropped profiles"; }
	local a s
	a=$(grep -n "level=info stopped:" "$log" | head -1 | cut -d: -f1)
	s=$(grep -n "shutting down" "$log" | head -1 | cut -d: -f1)
	[ -n "$a" ] && [ -n "$s" ] && [ "$a" -lt "$s" ] ||
		{ cat "$log"; fail "$1: the agent did not stop (line ${a:-none}) before the server (${s:-none})"; }
	echo "ok: $1"
}

# Ctrl-C: SIGINT to the foreground process group.
port=$(free_port)
make_run ctrl-c && started
kill -INT -- -$mk
check ctrl-c
# SIGINT to make alone (make waits for its children then).
port=$(free_port)
make_run make-int && started
kill -INT $mk
check make-int
# SIGTERM to make alone.
port=$(free_port)
make_run make-term && started
kill -TERM $mk
check make-term

# A busy port: a clear message and a failure status.
port=$(free_port)
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(600)' $port &
busy=$!
sleep 0.5
log="$tmp/busy.log"
rc=0
KILN_PORT=$port KILN_DATA="$tmp/busy" KILN_AGENT=0 MAKEFLAGS= timeout 120 \
	make --no-print-directory -C "$KILN_ROOT" run >"$log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$log"; fail "busy port: make run exited $rc"; }
grep -q "could not start.*KILN_PORT" "$log" || { cat "$log"; fail "busy port: no advice"; }
echo "PASS"
