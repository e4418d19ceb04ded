#!/usr/bin/env bash
# The server's debuginfod client, seen from outside:
#   - ingestion never waits for it: with an upstream that accepts
#     connections and never answers (and a 60 s request timeout), WriteRaw
#     and a query of a profile naming an unknown build ID both answer within
#     a 15 s deadline, the frame shown as "[ghost.so] +0x2123";
#   - negative answers are remembered: with Debian's debuginfod (which does
#     not know the build ID) as upstream, repeated queries of the unresolved
#     location ask it for that build ID exactly once.
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"
command -v debuginfod >/dev/null || die "precondition: debuginfod (make deps)"

T=$(mktemp -d /tmp/kiln-symbols-dfd-server.XXXXXX)
BPID= DPID=
cleanup() {
	for p in $BPID $DPID; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	server_cleanup
}
trap cleanup EXIT
STUBS=$T/stubs
mkdir -p "$STUBS" "$T/empty"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" --grpc_python_out="$STUBS" \
	parca/profilestore/v1alpha1/profilestore.proto parca/query/v1alpha1/query.proto \
	parca/metastore/v1alpha1/metastore.proto pprof/profile.proto) || die "grpc_tools.protoc failed"
GHOST=ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12

# Writes a profile with one location in ghost.so, then queries it N times
# (each within a 15 s deadline); checks the frame's display name each time.
write_and_query() { # N
	$PY - "$STUBS" "$ADDR" "$GHOST" "$1" <<'PY'
import gzip, sys, time
sys.path.insert(0, sys.argv[1])
import grpc
from google.protobuf import timestamp_pb2
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps, profilestore_pb2_grpc as ps_grpc
from parca.query.v1alpha1 import query_pb2 as q, query_pb2_grpc as q_grpc
from pprof import profile_pb2
addr, ghost, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
strings = ["", "samples", "count", "cpu", "nanoseconds", "/nonexistent/ghost.so", ghost]
p = profile_pb2.Profile(string_table=strings, period=10**7, time_nanos=time.time_ns(), duration_nanos=10**10)
p.sample_type.add(type=1, unit=2)
p.period_type.type, p.period_type.unit = 3, 4
p.mapping.add(id=1, memory_start=0x7f0000000000, memory_limit=0x7f0000010000, file_offset=0x2000,
              filename=5, build_id=6)
p.location.add(id=1, mapping_id=1, address=0x7f0000000123)
p.sample.add(location_id=[1], value=[5])
ch = grpc.insecure_channel(addr)
req = ps.WriteRawRequest()
s = req.series.add()
s.labels.labels.add(name="__name__", value="parca_agent")
s.labels.labels.add(name="comm", value="ghost")
s.samples.add(raw_profile=gzip.compress(p.SerializeToString()))
ps_grpc.ProfileStoreServiceStub(ch).WriteRaw(req, timeout=15)
now = int(time.time() * 1000)
start, end = timestamp_pb2.Timestamp(), timestamp_pb2.Timestamp()
start.FromMilliseconds(now - 3600 * 1000)
end.FromMilliseconds(now + 3600 * 1000)
for i in range(n):
    r = q_grpc.QueryServiceStub(ch).Query(q.QueryRequest(
        mode=q.QueryRequest.MODE_MERGE,
        merge=q.MergeProfile(query="parca_agent:samples:count:cpu:nanoseconds:delta{comm=\"ghost\"}",
                             start=start, end=end),
        report_type=q.QueryRequest.REPORT_TYPE_PPROF), timeout=15)
    out = profile_pb2.Profile()
    out.ParseFromString(gzip.decompress(r.pprof) if r.pprof[:2] == b"\x1f\x8b" else r.pprof)
    names = [out.string_table[f.name] for f in out.function]
    assert names == ["[ghost.so] +0x2123"], names
    time.sleep(0.5)
print("ok: WriteRaw and %d queries answered, frame shown as [ghost.so] +0x2123" % n)
PY
}

# An upstream that accepts connections and never answers.
bport=$(free_port)
$PY -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64); conns = []
while True: conns.append(s.accept())' "$bport" &
BPID=$!
server_start --debuginfod-upstream-servers="http://127.0.0.1:$bport" --debuginfod-http-request-timeout=60s
write_and_query 3 || die "ingestion or query waited for a silent debuginfod"
kill -KILL "$SPID"; wait "$SPID" 2>/dev/null; SPID=
kill "$BPID"; wait "$BPID" 2>/dev/null; BPID=
rm -rf "$T/data"

# Debian's debuginfod, which does not have the build ID.
dport=$(free_port)
debuginfod -F "$T/empty" -p "$dport" -d "$T/dfd.sqlite" -t 1 -v >"$T/debuginfod.log" 2>&1 &
DPID=$!
for _ in $(seq 1 60); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$dport/buildid/$GHOST/debuginfo")" = 404 ] && break
	sleep 0.5
done
asked() { grep -c "GET /buildid/$GHOST/debuginfo" "$T/debuginfod.log"; }
before=$(asked)
server_start --debuginfod-upstream-servers="http://127.0.0.1:$dport" --debuginfod-http-request-timeout=10s
write_and_query 1 || die "first query"
for _ in $(seq 1 100); do [ "$(asked)" -gt "$before" ] && break; sleep 0.2; done
[ "$(asked)" -eq $((before + 1)) ] || die "kiln asked debuginfod $(($(asked) - before)) times, want 1"
write_and_query 6 || die "later queries"
[ "$(asked)" -eq $((before + 1)) ] ||
	die "negative answer not remembered: debuginfod asked $(($(asked) - before)) times"
server_stop
echo ok
