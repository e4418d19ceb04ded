# agent_test.bash — shared helpers for tests/integration/agent_*.sh.
#
# Source it, then: agent_setup; agent_build PROG...; agent_start DIR [FLAGS];
# ... run workloads ...; agent_stop; agent_traces FILES... (JSON on stdout).
# Everything started here is stopped by the EXIT trap.
set -euo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${KILN_BIN:=$KILN_ROOT/build/san/bin}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
AGENT_PROGS="$KILN_ROOT/tests/integration/agent_progs"
AGENT_TESTBIN="$KILN_ROOT/build/agent-test"
AGENT_PID=""
AGENT_CLEANUP=()

fail() { echo "FAIL: $*" >&2; exit 1; }

agent_cleanup() {
	local rc=$?
	if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
		kill -INT "$AGENT_PID" 2>/dev/null || true
		wait "$AGENT_PID" 2>/dev/null || true
	fi
	for c in "${AGENT_CLEANUP[@]}"; do eval "$c" || true; done
	[ -n "${AGENT_TMP:-}" ] && rm -rf "$AGENT_TMP"
	exit $rc
}

agent_setup() {
	[ "$(id -u)" -eq 0 ] || fail "precondition: these tests need root"
	[ -x "$KILN_BIN/kiln-agent" ] || fail "precondition: $KILN_BIN/kiln-agent not built"
	command -v go >/dev/null || fail "precondition: go (for go tool pprof) not installed"
	AGENT_TMP=$(mktemp -d /tmp/kiln-agent-test.XXXXXX)
	trap agent_cleanup EXIT
}

# Builds test programs from tests/integration/agent_progs/NAME.c with frame
# pointers into build/agent-test/NAME.
agent_build() {
	mkdir -p "$AGENT_TESTBIN"
	for p in "$@"; do
		gcc -O0 -g -fno-omit-frame-pointer -pthread -o "$AGENT_TESTBIN/$p" "$AGENT_PROGS/$p.c"
	done
}

# A free TCP port on 127.0.0.1.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# agent_start DIR [FLAGS...]: starts the agent writing to DIR and waits until
# it samples. The array AGENT_PREFIX, when set, is the command it runs under.
agent_start() {
	local dir=$1; shift
	AGENT_LOG="$AGENT_TMP/agent.log"
	# The window layout (one file per window), split by agent_split below;
	# a test may pass --local-store-layout=process, the default, to override.
	# AGENT_PREFIX: a command the agent runs under (setpriv, capsh...).
	${AGENT_PREFIX[@]+"${AGENT_PREFIX[@]}"} "$KILN_BIN/kiln-agent" \
		--local-store-directory="$dir" --local-store-layout=window "$@" >"$AGENT_LOG" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 200); do
		grep -q "profiling every CPU" "$AGENT_LOG" && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || { cat "$AGENT_LOG"; fail "agent exited at start"; }
		sleep 0.1
	done
	cat "$AGENT_LOG"
	fail "agent did not start"
}

# Stops the agent with SIGINT (it flushes the partial window) and checks it
# exited cleanly.
agent_stop() {
	kill -INT "$AGENT_PID"
	local rc=0
	wait "$AGENT_PID" || rc=$?
	AGENT_PID=""
	[ "$rc" -eq 0 ] || { cat "$AGENT_LOG"; fail "agent exited with $rc"; }
}

# agent_split DIR: splits the window files in DIR (one pprof per window,
# --local-store-layout=window, what agent_start asks for) into one file per process per window in
# DIR.split, named TIME_PID_COMM.pb.gz as --local-store-layout=process names
# them; prints DIR.split. Files already split are not split again.
agent_split() {
	local f=() g
	for g in "$1"/*.pb.gz; do [ -e "$g" ] && f+=("$g"); done
	mkdir -p "$1.split"
	[ ${#f[@]} -eq 0 ] || python3 "$AGENT_PROGS/split.py" "$1.split" "${f[@]}"
	echo "$1.split"
}

# agent_files DIR PID [COMM]: one file per window with the samples of a pid
# (and comm: a pid forked by the shell is sampled under the shell's name
# until it execs), split out of DIR's window files.
agent_files() {
	local s
	s=$(agent_split "$1")
	if [ -n "${3:-}" ]; then
		ls "$s"/*_"$2"_"$3".pb.gz 2>/dev/null || true
	else
		ls "$s"/*_"$2"_*.pb.gz 2>/dev/null || true
	fi
}

# agent_traces FILE...: the samples as JSON lines {"n":count,"frames":[leaf..],
# "labels":{...}}, symbolized by go tool pprof from the binaries on disk.
agent_traces() {
	go tool pprof -symbolize=local -sample_index=samples -traces "$@" 2>/dev/null |
		python3 "$AGENT_PROGS/traces.py"
}

# pprof_samples [PPROF FLAGS] FILES...: the number of samples pprof counts
# (after any filter flags), read from its "accounting for N" line.
pprof_samples() {
	go tool pprof -symbolize=none -sample_index=samples -nodecount=1000000 -nodefraction=0 \
		-edgefraction=0 -top "$@" 2>/dev/null |
		awk '/accounting for/ && !done { for (i = 1; i < NF; i++) if ($i == "for") { v = $(i + 1); sub(",", "", v); print v; done = 1 } }'
}
