#!/usr/bin/env bash
# A failed debuginfod lookup is remembered only for a while
# (--debuginfod-negative-cache-ttl), and answers from a poor source do not
# stay once real debuginfo arrives. Two builds of a program with a function
# inlined into another run as kiln sees them:
#   prog_s  stripped (only .dynsym): shown as "[prog_s] +0xVADDR";
#   prog_p  strip --strip-debug (.symtab, no DWARF): names without lines,
#           stored as its answer.
# Both sit in a --symbols-local-dir by build ID (the server never reads the
# path a mapping names). Debian's debuginfod on loopback does not have them at first; Kiln asks it
# (its log shows both GETs) and is told no. Then the unstripped builds are
# put in debuginfod's directory. After the negative-cache TTL (3s here) a new
# lookup fetches them, and the merged profile (QueryService/Query, over gRPC)
# shows for every location the frames binutils' addr2line -i -f gives on the
# unstripped builds: names, files, lines and the inlined frame.
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"
command -v debuginfod >/dev/null || die "precondition: debuginfod (make deps)"

T=$(mktemp -d /tmp/kiln-symbols-retry.XXXXXX)
DPID=
cleanup() {
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	server_cleanup
}
trap cleanup EXIT
mkdir -p "$T/stubs" "$T/dfd" "$T/full"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) || die "grpc_tools.protoc failed"

cp "$(dirname "$0")/symbols_progs/hot_loop.c" "$T/prog.c" || die "cp"
# Two source files, so that each build's file:line is its own.
cp "$T/prog.c" "$T/prog_s.c" && cp "$T/prog.c" "$T/prog_p.c" || die "cp"
(cd "$T" && gcc -g -O2 -Wl,--build-id -DVARIANT='"s"' -o full/prog_s prog_s.c &&
	gcc -g -O2 -Wl,--build-id -DVARIANT='"p"' -o full/prog_p prog_p.c &&
	strip -o prog_s full/prog_s && strip --strip-debug -o prog_p full/prog_p) || die "build failed"
nm "$T/prog_s" 2>&1 | grep -q hot_loop && die "prog_s is not stripped"
nm "$T/prog_p" | grep -q hot_loop || die "prog_p lost its symbol table"
readelf -S "$T/prog_p" | grep -q debug_info && die "prog_p still has DWARF"

# The profile as the agent sends it: runtime addresses in a mapping of each
# program's text segment, with executable_info; what to expect before the
# debuginfo arrives and after (addr2line on the unstripped builds).
$PY - "$T" >"$T/expect.json" <<'PY' || die "expectation building failed"
import json, subprocess, sys
T = sys.argv[1]
def sh(*a): return subprocess.run(a, check=True, capture_output=True, text=True).stdout
def build_id(p): return [l.split()[-1] for l in sh("readelf", "-n", p).splitlines() if "Build ID" in l][0]
def text_seg(p):
    for l in sh("readelf", "-lW", p).splitlines():
        f = l.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            return int(f[1], 16), int(f[2], 16), int(f[4], 16)
def a2l(p, addr):
    lines = sh("addr2line", "-i", "-f", "-e", p, hex(addr)).splitlines()
    out = []
    for fn, loc in zip(lines[0::2], lines[1::2]):
        fi, ln = loc.split(" (discriminator")[0].rsplit(":", 1)
        out.append([fn, fi, int(ln) if ln.isdigit() else 0])
    return out
exp = {"mappings": [], "locations": []}
before = []
for mid, name in enumerate(["prog_s", "prog_p"], 1):
    full = "%s/full/%s" % (T, name)
    off, vaddr, filesz = text_seg(full)
    start, mo = 0x555500000000 + mid * 0x10000000, off & ~4095
    exp["mappings"].append({"id": mid, "start": start, "limit": start + (off + filesz - mo),
                            "offset": mo, "file": "%s/%s" % (T, name), "build_id": build_id(full),
                            "exec": {"elf_type": 3, "offset": off, "vaddr": vaddr}})
    fstart, fsize = [(int(f[0], 16), int(f[1], 16)) for f in
                     (l.split() for l in sh("nm", "-S", full).splitlines()) if len(f) == 4 and f[3] == "hot_loop"][0]
    dis = sh("objdump", "-d", "--no-show-raw-insn", full).split("<hot_loop>:", 1)[1].split("\n\n", 1)[0]
    addrs = [int(l.split(":")[0], 16) for l in dis.splitlines() if ":" in l]
    addrs = [a for a in addrs if fstart <= a < fstart + fsize]
    chosen = [a for a in addrs if len(a2l(full, a)) > 1][:2] + addrs[:2]
    assert len(chosen) == 4, "no inlined address in hot_loop"
    for a in chosen:
        loc = {"id": len(exp["locations"]) + 1, "mapping": mid, "address": start + (a - vaddr + off) - mo}
        exp["locations"].append(dict(loc, frames=a2l(full, a)))
        before.append(dict(loc, frames=[["[prog_s] +0x%x" % a, "", 0]] if name == "prog_s"
                           else [["hot_loop", "", 0]]))
json.dump(dict(exp, locations=before), open(T + "/before.json", "w"))
print(json.dumps(exp))
PY
bid() { $PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["mappings"][int(sys.argv[2])]["build_id"])' "$T/expect.json" "$1"; }
ID_S=$(bid 0)
ID_P=$(bid 1)

dport=$(free_port)
debuginfod -F "$T/dfd" -p "$dport" -d "$T/dfd.sqlite" -t 1 -v >"$T/debuginfod.log" 2>&1 &
DPID=$!
durl=http://127.0.0.1:$dport
for _ in $(seq 1 60); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$durl/buildid/$ID_S/debuginfo")" = 404 ] && break
	sleep 0.5
done
asked() { grep -c "GET /buildid/$1/debuginfo" "$T/debuginfod.log"; }

build_id_tree "$T/symdir" "$T/prog_s" "$T/prog_p"
server_start --debuginfod-upstream-servers="$durl" --debuginfod-http-request-timeout=10s \
	--debuginfod-negative-cache-ttl=3s --symbols-local-dir="$T/symdir"
E2E="$PY $KILN_ROOT/tests/integration/symbols_e2e.py"
$E2E "$T/stubs" "$ADDR" "$T/expect.json" --write-only || die "WriteRaw failed"
# Kiln asks debuginfod for both and is told no.
for _ in $(seq 1 100); do
	[ "$(asked "$ID_S")" -ge 1 ] && [ "$(asked "$ID_P")" -ge 1 ] && break
	$E2E "$T/stubs" "$ADDR" "$T/before.json" --query-only >/dev/null 2>&1
	sleep 0.2
done
[ "$(asked "$ID_S")" -ge 1 ] && [ "$(asked "$ID_P")" -ge 1 ] ||
	die "kiln never asked debuginfod: $(grep buildid "$T/debuginfod.log" | tail -3)"
sleep 1 # the answers (404) reach kiln's negative cache
$E2E "$T/stubs" "$ADDR" "$T/before.json" --query-only ||
	die "before the debuginfo exists: not the stripped/symbol-table answers"
echo "debuginfod said no; the profile shows [prog_s] +0x... and hot_loop without lines"

# Now debuginfod has them; after the TTL kiln asks again and uses them.
cp "$T/full/prog_s" "$T/full/prog_p" "$T/dfd/"
for _ in $(seq 1 120); do
	curl -sf -o /dev/null "$durl/buildid/$ID_S/debuginfo" &&
		curl -sf -o /dev/null "$durl/buildid/$ID_P/debuginfo" && break
	sleep 0.5
done
curl -sf -o /dev/null "$durl/buildid/$ID_P/debuginfo" || die "debuginfod never served the new files"
$E2E "$T/stubs" "$ADDR" "$T/expect.json" --query-only --wait=60 ||
	die "names and lines did not replace the negative answers"
ls "$T/data/debuginfo/$ID_S/debuginfo" "$T/data/debuginfo/$ID_P/debuginfo" >/dev/null ||
	die "fetched debuginfo not cached under the storage path"
server_stop
echo ok
