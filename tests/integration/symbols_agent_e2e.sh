#!/usr/bin/env bash
# Issue 5 end to end with real processes (root, real BPF): kiln server +
# kiln-agent pushing over gRPC (--remote-store-address, --remote-store-insecure)
# + a C program (symbols_progs/prog.c) with an always-inlined function and a
# C++ function in a shared library it loads. Four builds of it run at once:
#   kprog_sym  with its symbols, found by build ID in --symbols-local-dir (as
#              is libkspin.so): the server never reads the path a mapping names;
#   kprog_up   stripped; its debuginfo uploaded by `kilnctl debuginfo upload`;
#   kprog_dfd  stripped; its debuginfo served by Debian's debuginfod on
#              loopback (--debuginfod-upstream-servers);
#   kprog_ag   stripped, with a .gnu_debuglink to kprog_ag.debug beside it:
#              the agent uploads that debug file itself (DebuginfoService).
# Mid-run the server is killed with SIGKILL and restarted on the same port
# and storage. Checks, over gRPC (QueryService/Query, python3-grpcio):
#   - each build's merged profile has the location inlined_mix+outer_function
#     (the inlined frame first) and kspin::Spinner::run(long) (demangled,
#     mangled name as system_name), both called from main, with file:line
#     inside the functions' source;
#   - nothing acknowledged before the kill is lost, and the agent catches up:
#     for every build the server ends up holding every sample of the agent's
#     local files (--local-store-directory, same windows), including the
#     windows cut while the server was down. (A window the server made
#     durable but could not acknowledge before dying is sent again, so it
#     may hold more: delivery is at least once.)
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"
[ "$(id -u)" -eq 0 ] || die "precondition: root (BPF)"
command -v debuginfod >/dev/null || die "precondition: debuginfod (make deps)"
[ -x "$KILN_BIN/kiln-agent" ] || die "precondition: $KILN_BIN/kiln-agent not built"

T=$(mktemp -d /tmp/kiln-symbols-agent.XXXXXX)
APID= DPID= PIDS=()
cleanup() {
	for p in "${PIDS[@]}" $APID $DPID; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	server_cleanup
}
trap cleanup EXIT
CHECK="$PY $KILN_ROOT/tests/integration/symbols_agent_e2e.py"
STUBS=$T/stubs
mkdir -p "$STUBS" "$T/src" "$T/dfd" "$T/local" "$T/bin"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" --grpc_python_out="$STUBS" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) ||
	die "grpc_tools.protoc failed"

# Build: -O2 -g with frame pointers (the agent unwinds with them).
cp "$KILN_ROOT"/tests/integration/symbols_progs/{prog.c,lib.cc} "$T/src/"
CFLAGS="-g -O2 -fno-omit-frame-pointer -Wl,--build-id"
g++ $CFLAGS -fPIC -shared -o "$T/bin/libkspin.so" "$T/src/lib.cc" || die "g++ lib"
for v in sym up dfd ag; do
	gcc $CFLAGS -DVARIANT="\"$v\"" -o "$T/bin/kprog_$v.full" "$T/src/prog.c" -L"$T/bin" -lkspin \
		-Wl,-rpath,"$T/bin" || die "gcc kprog_$v"
done
mv "$T/bin/kprog_sym.full" "$T/bin/kprog_sym"
strip -o "$T/bin/kprog_up" "$T/bin/kprog_up.full"
strip -o "$T/bin/kprog_dfd" "$T/bin/kprog_dfd.full"
mv "$T/bin/kprog_dfd.full" "$T/dfd/kprog_dfd" # only debuginfod has this one's symbols
(cd "$T/bin" && objcopy --only-keep-debug kprog_ag.full kprog_ag.debug &&
	strip -o kprog_ag kprog_ag.full && objcopy --add-gnu-debuglink=kprog_ag.debug kprog_ag &&
	rm kprog_ag.full) || die "objcopy kprog_ag"
for v in up dfd ag; do
	nm "$T/bin/kprog_$v" 2>&1 | grep -q outer_function && die "kprog_$v is not stripped"
done
build_id() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }
dfd_id=$(build_id "$T/dfd/kprog_dfd")

# Debian's debuginfod on loopback, serving the unstripped kprog_dfd.
dport=$(free_port)
debuginfod -F "$T/dfd" -p "$dport" -d "$T/dfd.sqlite" -t 1 >"$T/debuginfod.log" 2>&1 &
DPID=$!
durl=http://127.0.0.1:$dport
for _ in $(seq 1 120); do
	curl -sf -o /dev/null "$durl/buildid/$dfd_id/debuginfo" && break
	sleep 0.5
done
curl -sf -o /dev/null "$durl/buildid/$dfd_id/debuginfo" || die "debuginfod never served $dfd_id"

build_id_tree "$T/symdir" "$T/bin/kprog_sym" "$T/bin/libkspin.so"
SERVER_FLAGS=(--debuginfod-upstream-servers="$durl" --debuginfod-http-request-timeout=10s
	--symbols-local-dir="$T/symdir")
server_start "${SERVER_FLAGS[@]}"
"$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure "$T/bin/kprog_up.full" >"$T/upload.out" ||
	die "upload failed: $(cat "$T/upload.out")"
grep -q "$(build_id "$T/bin/kprog_up").*uploaded" "$T/upload.out" || die "not uploaded: $(cat "$T/upload.out")"

agent_start_push

RUN_S=24
declare -A PID_OF
for v in sym up dfd ag; do
	"$T/bin/kprog_$v" $RUN_S >"$T/kprog_$v.out" &
	PID_OF[$v]=$!
	PIDS+=($!)
done

# Once the server holds a window of kprog_sym, kill it without warning.
before=$($CHECK wait-total "$STUBS" "$ADDR" "pid=\"${PID_OF[sym]}\"" 40)
[ "$before" -gt 0 ] || die "no kprog_sym samples reached the server: $(tail "$T/agent.log")"
kill -KILL "$SPID"
wait "$SPID" 2>/dev/null
SPID=
echo "killed the server holding $before acknowledged kprog_sym samples"
# The agent keeps sampling; at least two windows are cut while nobody listens.
for _ in $(seq 1 100); do grep -q "push failed" "$T/agent.log" && break; sleep 0.1; done
sleep 4
grep -q "push failed" "$T/agent.log" || die "the agent never noticed the server was gone"
# Restart on the same port and storage (SO_REUSEADDR).
"$KILN" --http-address="$ADDR" --storage-path="$T/data" "${SERVER_FLAGS[@]}" >>"$T/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 100); do curl -sf "http://$ADDR/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://$ADDR/ready" >/dev/null || die "restarted server not ready"
after=$($CHECK total "$STUBS" "$ADDR" "pid=\"${PID_OF[sym]}\"")
[ "$after" -ge "$before" ] || die "acknowledged samples lost: $before before the kill, $after after"

for v in sym up dfd ag; do wait "${PID_OF[$v]}" || die "kprog_$v failed"; done
PIDS=()
# Every window the agent cut (its local files) reaches the server, the ones
# from the outage through the agent's retries.
$CHECK caught-up "$STUBS" "$ADDR" "$T/local" 60 "${PID_OF[@]}" || die "the agent did not catch up"

rc=0
$CHECK check "$STUBS" "$ADDR" kprog_sym "$T/src" 30 || rc=1
$CHECK check "$STUBS" "$ADDR" kprog_up "$T/src" 30 || rc=1
$CHECK check "$STUBS" "$ADDR" kprog_dfd "$T/src" 60 || rc=1
$CHECK check "$STUBS" "$ADDR" kprog_ag "$T/src" 60 || rc=1
[ $rc -eq 0 ] || die "symbolization incomplete"
ag_id=$(build_id "$T/bin/kprog_ag")
"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure | grep -q "^$ag_id " ||
	die "the agent did not upload kprog_ag's debuginfo: $(grep -i debuginfo "$T/agent.log" | tail -5)"
kill -INT $APID
wait $APID || die "agent exited $?"
APID=
server_stop
echo ok
