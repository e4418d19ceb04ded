#!/usr/bin/env bash
# Issue 24, item 2: the server never opens a path a client names. One raw
# profile (WriteRaw, as an anonymous client sends it) with five mappings,
# each with file-relative addresses (no memory range):
#   1. a library on the server's disk, outside every symbol directory, by
#      its path and its real build ID: must come back as "[libout.so]
#      +0xVADDR", not as lib_work (the server used to open the path and
#      hand its symbols out);
#   1b. the server's own binary, by its build ID under a path that does
#      not exist: resolved to main (its own executable is a symbol source
#      by build ID, so that its self-profile is named; never by path);
#   2. a FIFO (mkfifo) by path: must not hang the query (the whole query is
#      bounded), and SIGTERM still stops the server promptly afterwards;
#   3. a library whose --symbols-local-dir entry (.build-id/xx/rest) is a
#      symbolic link to a file outside the directory: refused, unresolved;
#   4. a library copied into --symbols-local-dir by build ID: resolved to
#      its function, file and line (so the directory is really searched);
#   5. a FIFO at a build ID's .debug path inside --symbols-local-dir:
#      refused without blocking, unresolved.
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"

T=$(mktemp -d /tmp/kiln-symbols-paths.XXXXXX)
trap server_cleanup EXIT
mkdir -p "$T/stubs" "$T/symdir" "$T/outside"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) || die "grpc_tools.protoc failed"

cat >"$T/lib.c" <<'C'
volatile double lib_sink;
volatile int lib_variant = V;
__attribute__((noinline)) double lib_work(int n)
{
	double acc = 0;
	for (int i = 1; i <= n; i++)
		acc += (double)i / (i + 1);
	lib_sink = acc;
	return acc;
}
C
# Two builds (-DV makes the build IDs differ): one outside, one inside.
(cd "$T" && gcc -g -O2 -fPIC -shared -Wl,--build-id -DV=1 -o outside/libout.so lib.c &&
	gcc -g -O2 -fPIC -shared -Wl,--build-id -DV=2 -o libin.so lib.c) || die "build failed"
build_id() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }
out_id=$(build_id "$T/outside/libout.so")
in_id=$(build_id "$T/libin.so")
[ "$out_id" != "$in_id" ] || die "the two builds have one build ID"
mkdir -p "$T/symdir/.build-id/${out_id:0:2}"
ln -s "$T/outside/libout.so" "$T/symdir/.build-id/${out_id:0:2}/${out_id:2}"
build_id_tree "$T/symdir" "$T/libin.so"
fifo_id=$(printf 'ef%.0s' $(seq 20))
mkdir -p "$T/symdir/.build-id/${fifo_id:0:2}"
mkfifo "$T/symdir/.build-id/${fifo_id:0:2}/${fifo_id:2}.debug" "$T/fifo"

KILN_REAL=$(readlink -f "$KILN")
kiln_id=$(build_id "$KILN_REAL")
[ -n "$kiln_id" ] || die "precondition: $KILN_REAL has no GNU build ID"

$PY - "$T" "$KILN_REAL" "$kiln_id" "$out_id" "$in_id" "$fifo_id" >"$T/expect.json" <<'PY' ||
import json, os, subprocess, sys
T, kiln, kiln_id, out_id, in_id, fifo_id = sys.argv[1:7]
def sh(*a): return subprocess.run(a, check=True, capture_output=True, text=True).stdout
def sym(p, name):
    for l in sh("nm", p).splitlines():
        f = l.split()
        if len(f) == 3 and f[2] == name: return int(f[0], 16)
def a2l(p, addr):
    lines = sh("addr2line", "-i", "-f", "-e", p, hex(addr)).splitlines()
    frames = []
    for fn, loc in zip(lines[0::2], lines[1::2]):
        fi, ln = loc.split(" (discriminator")[0].rsplit(":", 1)
        frames.append([fn, fi, int(ln) if ln.isdigit() else 0])
    return frames
main = sym(kiln, "main") + 4
work_out = sym(T + "/outside/libout.so", "lib_work") + 4
work_in = sym(T + "/libin.so", "lib_work") + 8 # (the answer is keyed by address)
exp = {"mappings": [], "locations": []}
def add(file_, build_id, addr, frames):
    mid = len(exp["mappings"]) + 1
    exp["mappings"].append({"id": mid, "start": 0, "limit": 0, "offset": 0, "file": file_,
                            "build_id": build_id})
    exp["locations"].append({"id": mid, "mapping": mid, "address": addr, "frames": frames})
add(T + "/outside/libout.so", out_id, work_out, [["[libout.so] +0x%x" % work_out, "", 0]])
# kiln's DWARF names its sources relative to the build directory (the
# checkout); addr2line joins them with it, the server does not.
root = os.environ["KILN_ROOT"].rstrip("/") + "/"
add("/nonexistent/kiln", kiln_id, main,
    [[f, fi[len(root):] if fi.startswith(root) else fi, ln] for f, fi, ln in a2l(kiln, main)])
add(T + "/fifo", "ab" * 20, 0x123, [["[fifo] +0x123", "", 0]])
add("/nonexistent/libout.so", out_id, work_out, [["[libout.so] +0x%x" % work_out, "", 0]])
add("/nonexistent/libin.so", in_id, work_in, a2l(T + "/libin.so", work_in))
add("/nonexistent/fifo.so", fifo_id, 0x456, [["[fifo.so] +0x456", "", 0]])
assert exp["locations"][4]["frames"][0][0] == "lib_work", exp["locations"][4]
assert exp["locations"][1]["frames"][-1][0] == "main", exp["locations"][1]
print(json.dumps(exp))
PY
	die "expectation building failed"

server_start --symbols-local-dir="$T/symdir" --log-level=debug
E2E="$PY $KILN_ROOT/tests/integration/symbols_e2e.py"
timeout 20 $E2E "$T/stubs" "$ADDR" "$T/expect.json" --write-only || die "WriteRaw failed or hung"
# Let the background pass try every object, then query: bounded, and every
# location as expected (the library inside the directory may take a pass).
sleep 2
t0=$(date +%s)
timeout 30 $E2E "$T/stubs" "$ADDR" "$T/expect.json" --query-only --wait=10 ||
	die "query hung or a client-named file was read"
[ $(($(date +%s) - t0)) -le 15 ] || die "the query took $(($(date +%s) - t0)) s"
grep -q "libout.so, outside" "$T/server.log" || die "the symbolic link leading outside was not reported"

# SIGTERM stops the server promptly, FIFOs or not.
kill -TERM "$SPID"
for _ in $(seq 1 100); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SPID" 2>/dev/null && die "the server still runs 10 s after SIGTERM"
wait "$SPID" || die "server exited $? after SIGTERM"
SPID=
echo ok
