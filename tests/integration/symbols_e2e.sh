#!/usr/bin/env bash
# Server-side symbolization end to end: a PIE program (with a function
# inlined into another) and a shared library it loads run here; their real
# runtime addresses and mappings (/proc/PID/maps) go into a raw profile as
# the agent sends it, naming the *stripped* program. The program's debuginfo
# is uploaded with kilnctl; the library is found by build ID in a
# --symbols-local-dir (never at the path the mapping names). WriteRaw, then QueryService/Query: the merged pprof must carry
# function, file and line for every location, the inlined frame first,
# exactly as addr2line -i -f says on the unstripped builds (symbols_e2e.py).
# A location in an object nobody has debuginfo for shows as
# "[ghost.so] +0x123" (it never vanishes). Each mapping carries
# executable_info (ELF type, load segment) as the agent sends it; the server
# normalizes with it: a ghost library linked at a non-zero base shows its
# vaddr, which it could not know without executable_info.
# Results are cached in the metastore: after a restart, with the uploaded
# debuginfo and the unstripped library deleted, the query still shows every
# name, file and line (nothing is read again).
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"

T=$(mktemp -d /tmp/kiln-symbols-e2e.XXXXXX)
PROG_PID=
cleanup() {
	[ -n "$PROG_PID" ] && kill -KILL "$PROG_PID" 2>/dev/null && wait "$PROG_PID" 2>/dev/null
	server_cleanup
}
trap cleanup EXIT
mkdir -p "$T/stubs"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) || die "grpc_tools.protoc failed"

cat >"$T/lib.c" <<'C'
volatile double lib_sink;
__attribute__((noinline)) double lib_work(int n)
{
	double acc = 0;
	for (int i = 1; i <= n; i++)
		acc += (double)i / (i + 1);
	lib_sink = acc;
	return acc;
}
C
cat >"$T/main.c" <<'C'
#include <stdio.h>
#include <unistd.h>
double lib_work(int n);
volatile long sink;
static inline __attribute__((always_inline)) long inlined_square(long x)
{
	long r = x * x;
	sink += r;
	return r + 1;
}
__attribute__((noinline)) long outer_function(long n)
{
	long acc = 0;
	for (long i = 0; i < n; i++)
		acc += inlined_square(i ^ acc);
	return acc;
}
int main(int argc, char **argv)
{
	printf("%p %p\n", (void *)outer_function, (void *)lib_work);
	fflush(stdout);
	long r = outer_function(argc * 1000) + (long)lib_work(argc * 100);
	if (argc > 1)
		pause();
	return (int)(r & 1);
}
C
(cd "$T" && gcc -g -O2 -fPIC -shared -Wl,--build-id -o libwork.so lib.c &&
	gcc -g -O2 -pie -fPIE -Wl,--build-id -o main main.c -L. -lwork -Wl,-rpath,"$T" &&
	strip -o main.stripped main) || die "build failed"

# Run the stripped program; read where things landed.
"$T/main.stripped" wait >"$T/addrs.txt" &
PROG_PID=$!
for _ in $(seq 1 50); do [ -s "$T/addrs.txt" ] && break; sleep 0.1; done
read -r rt_outer rt_lib <"$T/addrs.txt"
cp "/proc/$PROG_PID/maps" "$T/maps"
kill -KILL "$PROG_PID"; wait "$PROG_PID" 2>/dev/null; PROG_PID=

$PY - "$T" "$rt_outer" "$rt_lib" >"$T/expect.json" <<'PY' || die "expectation building failed"
import json, subprocess, sys
T, rt_outer, rt_lib = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16)
def sh(*a): return subprocess.run(a, check=True, capture_output=True, text=True).stdout
def build_id(p): return [l.split()[-1] for l in sh("readelf", "-n", p).splitlines() if "Build ID" in l][0]
def sym(p, name):
    for l in sh("nm", "-S", p).splitlines():
        f = l.split()
        if len(f) == 4 and f[3] == name: return int(f[0], 16), int(f[1], 16)
def insns(p, name):
    start, size = sym(p, name)
    out = sh("objdump", "-d", "--no-show-raw-insn", p)
    sec = out.split("<%s>:" % name, 1)[1].split("\n\n", 1)[0]
    a = [int(l.split(":")[0], 16) for l in sec.splitlines() if l.strip() and ":" in l]
    return [x for x in a if start <= x < start + size]
def a2l(p, addr):
    lines = sh("addr2line", "-i", "-f", "-e", p, hex(addr)).splitlines()
    frames = []
    for fn, loc in zip(lines[0::2], lines[1::2]):
        loc = loc.split(" (discriminator")[0]
        fi, ln = loc.rsplit(":", 1)
        frames.append([fn, fi, int(ln) if ln.isdigit() else 0])
    return frames
maps = []
for l in open(T + "/maps"):
    f = l.split()
    if len(f) >= 6 and "x" in f[1]:
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        maps.append((lo, hi, int(f[2], 16), f[5]))
def mapping_of(rt):
    return [m for m in maps if m[0] <= rt < m[1]][0]
def exec_info(p, off):
    # What the agent sends as executable_info: e_type and the executable
    # PT_LOAD (p_offset, p_vaddr) whose pages this mapping maps.
    etype = 3 if "DYN" in sh("readelf", "-hW", p) else 2
    for l in sh("readelf", "-lW", p).splitlines():
        f = l.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            o, v, fsz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if (o & ~4095) <= off < o + fsz:
                return {"elf_type": etype, "offset": o, "vaddr": v}
exp = {"mappings": [], "locations": []}
main, lib = T + "/main", T + "/libwork.so"
for mid, (binary, file_, rt_func, func) in enumerate(
        [(main, T + "/main.stripped", rt_outer, "outer_function"), (lib, lib, rt_lib, "lib_work")], 1):
    lo, hi, off, path = mapping_of(rt_func)
    assert path == file_, (path, file_)
    exp["mappings"].append({"id": mid, "start": lo, "limit": hi, "offset": off, "file": file_,
                            "build_id": build_id(binary), "exec": exec_info(binary, off)})
    assert exp["mappings"][-1]["exec"], "no executable segment for " + binary
    base = sym(binary, func)[0]
    addrs = insns(binary, func)
    chosen = [a for a in addrs if len(a2l(binary, a)) > 1][:3] + addrs[1:4]
    for a in chosen:
        exp["locations"].append({"id": len(exp["locations"]) + 1, "mapping": mid,
                                 "address": rt_func + (a - base), "frames": a2l(binary, a)})
assert any(len(l["frames"]) > 1 for l in exp["locations"]), "no inlined address found"
# An object with no debuginfo anywhere: shown by name and file offset.
exp["mappings"].append({"id": 3, "start": 0x7f0000000000, "limit": 0x7f0000010000, "offset": 0x2000,
                        "file": "/nonexistent/ghost.so", "build_id": "ab" * 20})
exp["locations"].append({"id": len(exp["locations"]) + 1, "mapping": 3, "address": 0x7f0000000123,
                         "frames": [["[ghost.so] +0x2123", "", 0]]})
# The same with executable_info, as for a library linked at a non-zero base
# (text segment at file offset 0x1000, vaddr 0x201000): the server
# normalizes with it, without the file, so the offset shown is the vaddr.
exp["mappings"].append({"id": 4, "start": 0x7f1000000000, "limit": 0x7f1000010000, "offset": 0x1000,
                        "file": "/nonexistent/ghost2.so", "build_id": "cd" * 20,
                        "exec": {"elf_type": 3, "offset": 0x1000, "vaddr": 0x201000}})
exp["locations"].append({"id": len(exp["locations"]) + 1, "mapping": 4, "address": 0x7f1000000234,
                         "frames": [["[ghost2.so] +0x201234", "", 0]]})
print(json.dumps(exp))
PY

build_id_tree "$T/symdir" "$T/libwork.so"
server_start --symbols-local-dir="$T/symdir"
"$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure "$T/main" >"$T/upload.out" ||
	die "upload failed: $(cat "$T/upload.out")"
$PY "$KILN_ROOT/tests/integration/symbols_e2e.py" "$T/stubs" "$ADDR" "$T/expect.json" || die "symbolization mismatch"
server_stop

# Restart with every debug source gone: the cached results answer.
rm -rf "$T/data/debuginfo" "$T/main" "$T/libwork.so" "$T/symdir"
server_start
$PY "$KILN_ROOT/tests/integration/symbols_e2e.py" "$T/stubs" "$ADDR" "$T/expect.json" --query-only ||
	die "symbolization results not kept across the restart"
[ ! -e "$T/data/debuginfo/$(readelf -n "$T/main.stripped" | awk '/Build ID/ {print $3}')" ] ||
	die "debuginfo came back"
server_stop
