# Shared helpers for tests/integration/clickhouse_*.sh (sourced, not run):
# server_lib.bash's setup plus a ClickHouse server in $T/ch and any number of
# kiln servers.
#
#   ch_setup                server_setup, then ClickHouse: $CH_URL
#   kiln_start NAME [flags] starts a kiln with storage in $T/NAME; sets
#                           ADDR_NAME (host:port) and PID_NAME
#   kiln_kill NAME          SIGKILL
#   kiln_stop NAME          SIGTERM, waits, fails unless it exited 0
#   on NAME CMD [args]      the python gRPC client against kiln NAME
#   on_bg NAME CMD [args]   the same in the background ($! is the client)
source "$(dirname "${BASH_SOURCE[0]}")/server_lib.bash"
source "$KILN_ROOT/tests/lib/clickhouse.bash"

ch_cleanup() {
	for v in ${!PID_*}; do
		kill -KILL "${!v}" 2>/dev/null
	done
	ch_stop
	server_cleanup
}

ch_setup() {
	ch_available || die "clickhouse-server is not installed (make deps installs it)"
	server_setup
	trap ch_cleanup EXIT
	chmod o+x "$T" # the clickhouse user reaches $T/ch
	ch_start "$T/ch" || die "cannot start clickhouse-server"
}

kiln_start() {
	local name=$1
	shift
	local port addr pid
	for _ in 1 2 3; do
		port=$(free_port)
		addr=127.0.0.1:$port
		"$KILN" --http-address="$addr" --storage-path="$T/$name" "$@" >>"$T/$name.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 150); do
			if curl -sf "http://$addr/ready" >/dev/null 2>&1; then
				printf -v "ADDR_$name" '%s' "$addr"
				printf -v "PID_$name" '%s' "$pid"
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	tail -20 "$T/$name.log" >&2
	die "kiln $name did not become ready"
}

kiln_kill() {
	local v=PID_$1
	kill -KILL "${!v}" 2>/dev/null
	wait "${!v}" 2>/dev/null
	unset "PID_$1"
}

kiln_stop() {
	local v=PID_$1 rc
	kill -TERM "${!v}"
	wait "${!v}"
	rc=$?
	unset "PID_$1"
	[ $rc -eq 0 ] || die "kiln $1 exited $rc on SIGTERM"
}

on() {
	local v=ADDR_$1 cmd=$2
	shift 2
	$PY "$CLIENT" "$cmd" --stubs "$STUBS" --addr "${!v}" "$@"
}

# on_bg NAME CMD [args]: the same in the background; $! is the client itself
# (not a subshell), so that kill stops it.
on_bg() {
	local v=ADDR_$1 cmd=$2
	shift 2
	$PY "$CLIENT" "$cmd" --stubs "$STUBS" --addr "${!v}" "$@" &
}

ch_kiln_flags() {
	echo "--storage=clickhouse --clickhouse-url=$CH_URL"
}
