# Shared helpers for tests/integration/server_*.sh (sourced, not run).
#
#   server_setup            temp dir $T, cleanup trap, python stubs in $STUBS,
#                           Go profiles in $T/prof (cpu-N.pb.gz, heap-N.pb.gz)
#   server_start [flags]    starts $KILN on a free port: $PORT, $ADDR, $SPID
#                           (readiness probed at $SERVER_SCHEME://, default http,
#                           with curl $SERVER_CURL_ARGS)
#   server_stop             SIGTERM, waits, fails unless it exited 0
#   client CMD [args]       the python3-grpcio client (Debian's python3)
#   build_id_tree DIR FILE...  copies each ELF file to DIR/.build-id/xx/rest
#                           (its build ID), where --symbols-local-dir=DIR finds it
set -uo pipefail

: "${KILN_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${KILN_BIN:=$KILN_ROOT/build/san/bin}"
KILN=$KILN_BIN/kiln
KILNCTL=$KILN_BIN/kilnctl
PY=/usr/bin/python3 # Debian's interpreter, which has python3-grpcio
CLIENT=$KILN_ROOT/tests/integration/server_grpc_client.py
SPID=

die() {
	echo "FAIL: $*" >&2
	[ -n "${T:-}" ] && [ -f "$T/server.log" ] && tail -n 30 "$T/server.log" >&2
	exit 1
}

server_cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill -KILL "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
	[ -n "${T:-}" ] && [ -z "${KILN_TEST_KEEP:-}" ] && rm -rf "$T"
}

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

server_setup() {
	[ -x "$KILN" ] || die "no $KILN (build it first)"
	T=$(mktemp -d /tmp/kiln-server-test.XXXXXX)
	trap server_cleanup EXIT
	STUBS=$T/stubs
	mkdir -p "$STUBS" "$T/prof"
	(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
		--grpc_python_out="$STUBS" parca/profilestore/v1alpha1/profilestore.proto \
		parca/query/v1alpha1/query.proto parca/metastore/v1alpha1/metastore.proto \
		pprof/profile.proto) || die "grpc_tools.protoc failed"
	export GOCACHE=${GOCACHE:-$T/gocache} GOFLAGS=-mod=mod GO111MODULE=off
	(cd "$KILN_ROOT/tests/peers/go/serverload" && go build -o "$T/serverload" main.go) ||
		die "go build serverload failed"
	"$T/serverload" -out "$T/prof" -cpu "${CPU_PROFILE_TIME:-600ms}" -n "${PROFILE_PAIRS:-2}" ||
		die "serverload failed"
}

# server_start [extra flags...]: storage in $T/data unless given.
server_start() {
	local tries=0
	while :; do
		PORT=$(free_port)
		ADDR=127.0.0.1:$PORT
		"$KILN" --http-address="$ADDR" --storage-path="$T/data" "$@" >>"$T/server.log" 2>&1 &
		SPID=$!
		for _ in $(seq 1 100); do
			if curl -sf ${SERVER_CURL_ARGS:-} "${SERVER_SCHEME:-http}://$ADDR/ready" >/dev/null 2>&1; then
				return 0
			fi
			kill -0 "$SPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
		SPID=
		tries=$((tries + 1))
		[ $tries -lt 3 ] || die "server did not become ready"
	done
}

server_stop() {
	kill -TERM "$SPID"
	wait "$SPID"
	local rc=$?
	SPID=
	[ $rc -eq 0 ] || die "server exited $rc after SIGTERM"
}

build_id_tree() {
	local dir=$1 f id
	shift
	for f in "$@"; do
		id=$(readelf -n "$f" | awk '/Build ID/ {print $3}')
		[ -n "$id" ] || die "build_id_tree: $f has no build ID"
		mkdir -p "$dir/.build-id/${id:0:2}"
		cp "$f" "$dir/.build-id/${id:0:2}/${id:2}" || die "build_id_tree: cp $f"
	done
}

client() {
	local cmd=$1
	shift
	$PY "$CLIENT" "$cmd" --stubs "$STUBS" --addr "$ADDR" "$@"
}

# agent_start_push: starts kiln-agent pushing to $ADDR (and writing local
# files under $T/local, one per process per window: TIME_PID_COMM.pb.gz)
# with 2 s windows at 49 Hz; sets $APID and returns once
# it samples every CPU. The caller stops it (kill -INT $APID) and cleans up.
agent_start_push() {
	"$KILN_BIN/kiln-agent" --remote-store-address="$ADDR" --remote-store-insecure \
		--local-store-directory="$T/local" --local-store-layout=process --profiling-duration=2s \
		--profiling-cpu-sampling-frequency=49 --http-address= >"$T/agent.log" 2>&1 &
	APID=$!
	for _ in $(seq 1 300); do
		grep -q "profiling every CPU" "$T/agent.log" && return 0
		kill -0 $APID 2>/dev/null || die "agent exited: $(cat "$T/agent.log")"
		sleep 0.1
	done
	die "agent did not start: $(cat "$T/agent.log")"
}
