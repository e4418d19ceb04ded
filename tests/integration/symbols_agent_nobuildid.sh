#!/usr/bin/env bash
# Issue 5: binaries without a GNU build ID (linked with -Wl,--build-id=none).
# kiln-agent identifies such a file by the hash of its .text section (XXH64,
# what Parca's agent uses), sends that as the mapping's build_id, and uploads
# the file's debuginfo under it; the server checks the upload by hashing the
# uploaded ELF's .text and symbolizes with it.
#
# The server runs in its own mount namespace in which the programs' directory
# is an empty tmpfs: it cannot read the binaries at their paths, so every
# name it shows comes from the agent's uploads. Checks:
#   - the IDs the server holds (kilnctl debuginfo ls) are xxhsum's XXH64 of
#     each file's .text (objcopy), for the program and its shared library;
#   - the merged profile of the program (QueryService/Query, python3-grpcio)
#     has inlined_mix+outer_function and kspin::Spinner::run(long), both
#     called from main, with file:line (symbols_agent_e2e.py check).
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"
[ "$(id -u)" -eq 0 ] || die "precondition: root (BPF, mount namespace)"
command -v xxhsum >/dev/null || die "precondition: xxhsum (make deps)"
command -v unshare >/dev/null || die "precondition: unshare (util-linux)"
[ -x "$KILN_BIN/kiln-agent" ] || die "precondition: $KILN_BIN/kiln-agent not built"

T=$(mktemp -d /tmp/kiln-symbols-noid.XXXXXX)
APID= PPID_= REAL_KILN=$KILN
cleanup() {
	for p in $PPID_ $APID; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	server_cleanup
}
trap cleanup EXIT
CHECK="$PY $KILN_ROOT/tests/integration/symbols_agent_e2e.py"
STUBS=$T/stubs
mkdir -p "$STUBS" "$T/src" "$T/bin" "$T/local"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" --grpc_python_out="$STUBS" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) ||
	die "grpc_tools.protoc failed"

cp "$KILN_ROOT"/tests/integration/symbols_progs/{prog.c,lib.cc} "$T/src/"
CFLAGS="-g -O2 -fno-omit-frame-pointer -Wl,--build-id=none"
g++ $CFLAGS -fPIC -shared -o "$T/bin/libkspin.so" "$T/src/lib.cc" || die "g++ lib"
gcc $CFLAGS -DVARIANT='"noid"' -o "$T/bin/kprog_noid" "$T/src/prog.c" -L"$T/bin" -lkspin \
	-Wl,-rpath,"$T/bin" || die "gcc kprog_noid"
for f in kprog_noid libkspin.so; do
	readelf -n "$T/bin/$f" | grep -q "Build ID" && die "$f has a GNU build ID"
done
text_id() {
	objcopy -O binary --only-section=.text "$1" "$T/text.bin" && xxhsum -H1 "$T/text.bin" 2>/dev/null | cut -d' ' -f1
}
prog_id=$(text_id "$T/bin/kprog_noid")
lib_id=$(text_id "$T/bin/libkspin.so")
[ ${#prog_id} -eq 16 ] && [ ${#lib_id} -eq 16 ] || die "xxhsum gave \"$prog_id\" \"$lib_id\""

# The server, in a mount namespace where $T/bin is empty.
cat >"$T/kiln-ns" <<EOF
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount -t tmpfs none "$T/bin" && exec "\$0" "\$@"' "$REAL_KILN" "\$@"
EOF
chmod +x "$T/kiln-ns"
KILN=$T/kiln-ns
server_start
[ -e "/proc/$SPID/root$T/bin/kprog_noid" ] && die "the server can see the binaries"

agent_start_push

"$T/bin/kprog_noid" 14 >"$T/kprog.out" &
PPID_=$!
wait $PPID_ || die "kprog_noid failed"
PPID_=

# The agent uploads both files under their hash IDs.
for _ in $(seq 1 60); do
	"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure >"$T/ls.out" 2>&1
	grep -q "^$prog_id " "$T/ls.out" && grep -q "^$lib_id " "$T/ls.out" && break
	sleep 1
done
grep -q "^$prog_id " "$T/ls.out" ||
	die "no debuginfo under $prog_id: $(cat "$T/ls.out"; grep -i debuginfo "$T/agent.log" | tail -5)"
grep -q "^$lib_id " "$T/ls.out" ||
	die "no debuginfo under $lib_id: $(cat "$T/ls.out"; grep -i debuginfo "$T/agent.log" | tail -5)"

$CHECK check "$STUBS" "$ADDR" kprog_noid "$T/src" 60 || die "symbolization incomplete"
kill -INT $APID
wait $APID || die "agent exited $?"
APID=
server_stop
echo ok
