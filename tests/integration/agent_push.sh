#!/usr/bin/env bash
# The push sink against a real gRPC server (python3 grpcio implementing
# Parca's ProfileStoreService): each window arrives as one WriteRaw with a
# series per process, labels __name__="parca_agent" + the series labels in
# name order, the bearer token as authorization, a gzipped pprof whose
# samples `go tool pprof` reads, and one executable_info per mapping. The
# server starts only after the first window was cut, so that window must
# arrive through the retries. The debuginfo uploader's ShouldInitiateUpload
# carries the token too, and asks about each build ID once.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
# Debian's python3 has python3-grpcio (a pyenv python earlier in PATH may not).
py=/usr/bin/python3
$py -c "import grpc, grpc_tools" 2>/dev/null || fail "precondition: python3-grpcio, python3-grpc-tools"
stubs="$AGENT_TMP/stubs"
mkdir -p "$stubs"
$py -m grpc_tools.protoc -I"$KILN_ROOT/proto" --python_out="$stubs" --grpc_python_out="$stubs" \
	"$KILN_ROOT/proto/parca/profilestore/v1alpha1/profilestore.proto" \
	"$KILN_ROOT/proto/parca/debuginfo/v1alpha1/debuginfo.proto" \
	"$KILN_ROOT/proto/pprof/profile.proto"
port=$(free_port)
received="$AGENT_TMP/received.jsonl"
echo secret-token >"$AGENT_TMP/token"

"$KILN_BIN/kiln-agent" --remote-store-address=127.0.0.1:$port --remote-store-insecure \
	--remote-store-bearer-token-file="$AGENT_TMP/token" --profiling-duration=2s \
	--http-address= >"$AGENT_TMP/agent.log" 2>&1 &
AGENT_PID=$!
AGENT_LOG="$AGENT_TMP/agent.log"
for _ in $(seq 1 200); do grep -q "profiling every CPU" "$AGENT_LOG" && break; sleep 0.1; done
"$AGENT_TESTBIN/burn" 1 >/dev/null & bpid=$!
wait $bpid
# The first windows fail (nobody listens); then the server comes up.
for _ in $(seq 1 100); do grep -q "push failed" "$AGENT_LOG" && break; sleep 0.1; done
grep -q "push failed" "$AGENT_LOG" || fail "no failed attempt logged: $(cat "$AGENT_LOG")"
$py "$AGENT_PROGS/writeraw_server.py" "$port" "$received" "$stubs" >"$AGENT_TMP/server.log" 2>&1 &
AGENT_CLEANUP+=("kill $!")
# A program with symbols, first profiled now that the server is up: the
# uploader asks about its build ID (with the token) at once.
gcc -O0 -g -fno-omit-frame-pointer -pthread -DVARIANT=7 -o "$AGENT_TESTBIN/burn7" "$AGENT_PROGS/burn.c"
want7=$(readelf -n "$AGENT_TESTBIN/burn7" | awk '/Build ID/ {print $3}')
for _ in $(seq 1 50); do grep -q serving "$AGENT_TMP/server.log" && break; sleep 0.1; done
"$AGENT_TESTBIN/burn7" 0.3 >/dev/null
for _ in $(seq 1 300); do
	[ -s "$received" ] && grep -q "\"$bpid\"" "$received" && grep -q "\"$want7\"" "$received" && break
	sleep 0.1
done
agent_stop
grep -q "\"$bpid\"" "$received" || fail "burn's window never arrived: $(cat "$AGENT_LOG")"

python3 - "$received" "$bpid" "$AGENT_TMP" "$want7" <<'PY'
import gzip, json, sys
want7 = sys.argv[4]
recs = [json.loads(l) for l in open(sys.argv[1])]
reqs = [r for r in recs if "series" in r]
asks = [r for r in recs if "debuginfo" in r]
pid, tmp = sys.argv[2], sys.argv[3]
# The debuginfo uploader asked about what the profiles point into, with
# the same bearer token, and once per build ID.
assert any(a["debuginfo"] == want7 for a in asks), f"burn7 ({want7}) not asked about: {asks}"
assert all(a["authorization"] == "Bearer secret-token" for a in asks), asks[0]
ids = [a["debuginfo"] for a in asks]
assert len(ids) == len(set(ids)), f"build IDs asked twice: {sorted(ids)}"
assert all(r["authorization"] == "Bearer secret-token" for r in reqs), reqs[0]["authorization"]
assert max(len(r["series"]) for r in reqs) > 1, "no request batched several processes"
found = None
for r in reqs:
    for s in r["series"]:
        names = [n for n, _ in s["labels"]]
        assert names[0] == "__name__" and s["labels"][0][1] == "parca_agent", s["labels"]
        assert names == sorted(names), f"labels not sorted: {names}"
        labels = dict(s["labels"])
        for k in ("node", "pid", "comm", "kernel_release", "cgroup"):
            assert k in labels, f"missing {k}: {labels}"
        if labels["pid"] == pid:
            found = s
assert found and dict(found["labels"])["comm"] == "burn"
assert dict(found["labels"])["executable"].endswith("/burn")
raw = bytes.fromhex(found["profiles"][0])
assert raw[:2] == b"\x1f\x8b", "profile is not gzipped"
open(f"{tmp}/pushed.pb.gz", "wb").write(raw)
json.dump(found["executable_info"][0], open(f"{tmp}/exec_info.json", "w"))
PY
# executable_info: one entry per mapping of the pushed profile, in mapping
# order; burn's says ET_DYN (a PIE) and names its executable PT_LOAD as
# readelf reads it.
readelf -lW "$AGENT_TESTBIN/burn" >"$AGENT_TMP/phdrs.txt"
$py - "$AGENT_TMP" "$stubs" <<'PY'
import gzip, json, sys
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from pprof import profile_pb2
ei = json.load(open(f"{tmp}/exec_info.json"))
prof = profile_pb2.Profile()
prof.ParseFromString(gzip.decompress(open(f"{tmp}/pushed.pb.gz", "rb").read()))
assert [m.id for m in prof.mapping] == list(range(1, len(prof.mapping) + 1))
maps = [prof.string_table[m.filename] for m in prof.mapping]
assert len(ei) == len(maps), f"{len(ei)} executable_info for {len(maps)} mappings"
i = next(i for i, m in enumerate(maps) if m.endswith("/agent-test/burn"))
load = next(l.split() for l in open(f"{tmp}/phdrs.txt") if l.split()[:1] == ["LOAD"] and "E" in l.split()[6:])
want = [3, True, int(load[1], 16), int(load[2], 16)]
print(f"burn mapping {i + 1}: executable_info {ei[i]}, readelf {want}")
assert ei[i] == want, f"executable_info {ei[i]}, want {want}"
for m, e in zip(maps, ei):
    if m == "[kernel.kallsyms]":
        assert e[0] == 0 and not e[1], e
PY
n=$(pprof_samples "$AGENT_TMP/pushed.pb.gz")
[ "${n:-0}" -gt 0 ] || fail "pushed profile has no samples"
# Pushed profiles keep series labels beside the profile, not in samples.
go tool pprof -raw "$AGENT_TMP/pushed.pb.gz" 2>/dev/null | grep -q "thread_name:\[burn\]" ||
	fail "pushed profile lacks per-sample thread labels"
if go tool pprof -raw "$AGENT_TMP/pushed.pb.gz" 2>/dev/null | grep -q "comm:\["; then
	fail "pushed profile repeats series labels in samples"
fi
echo PASS
