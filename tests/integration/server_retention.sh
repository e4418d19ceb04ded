#!/usr/bin/env bash
# --storage-retention deletes whole blocks: a real Go CPU profile ingested
# twice through the python3-grpcio client, once stamped 10 h ago and once
# now, into a server keeping 1 h. The blocks are time-partitioned, so the old
# profile lands in its own block; cutting it (at shutdown) lets retention
# delete that file with a log line. After a restart only the recent profile
# is queryable, exactly, and one block remains on disk.
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 CPU_PROFILE_TIME=300ms server_setup

# The same profile, re-stamped 10 h in the past (time_nanos drives placement).
$PY - "$STUBS" "$T/prof/cpu-0.pb.gz" "$T/old.pb.gz" <<'PYEOF' || die "re-stamping the profile"
import gzip, sys, time
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
p = profile_pb2.Profile()
p.ParseFromString(gzip.decompress(open(sys.argv[2], "rb").read()))
p.time_nanos = time.time_ns() - 10 * 3600 * 10**9
open(sys.argv[3], "wb").write(gzip.compress(p.SerializeToString()))
PYEOF

server_start --storage-retention=1h
client write --name kiln_ret --label age=old --profiles "$T/old.pb.gz" || die "WriteRaw old"
client write --name kiln_ret --label age=new --profiles "$T/prof/cpu-0.pb.gz" || die "WriteRaw new"
server_stop # closing cuts the head into blocks; retention runs after the cut
grep -q 'retention: deleting block' "$T/server.log" ||
	{ cat "$T/server.log"; die "no block deleted by retention"; }
n=$(find "$T/data/blocks" -name 'b-*.kb' | wc -l)
[ "$n" -eq 1 ] || { ls -l "$T/data/blocks"; die "$n blocks on disk, want 1 (the recent one)"; }

server_start --storage-retention=1h
Q='kiln_ret:samples:count:cpu:nanoseconds:delta'
curl -sf "http://$ADDR/api/v1/values?label=age&query=$Q" >"$T/values.json" || die "/api/v1/values"
$PY - "$T/values.json" <<'PYEOF' || die "label values after retention"
import json, sys
v = json.load(open(sys.argv[1]))["values"]
if v != ["new"]:
    sys.exit("values of age: %s, want ['new']" % v)
PYEOF
# The recent profile is intact: its merge equals the ingested total.
$PY - "$STUBS" "$T/prof/cpu-0.pb.gz" "$ADDR" "$Q" <<'PYEOF' || die "recent data after retention"
import gzip, sys, time
sys.path.insert(0, sys.argv[1])
import grpc
from pprof import profile_pb2
from parca.query.v1alpha1 import query_pb2 as q, query_pb2_grpc as qg
from google.protobuf import timestamp_pb2
p = profile_pb2.Profile()
p.ParseFromString(gzip.decompress(open(sys.argv[2], "rb").read()))
names = [p.string_table[st.type] for st in p.sample_type]
want = sum(s.value[names.index("samples")] for s in p.sample)
stub = qg.QueryServiceStub(grpc.insecure_channel(sys.argv[3]))
start, end = timestamp_pb2.Timestamp(seconds=0), timestamp_pb2.Timestamp(seconds=int(time.time()) + 3600)
r = stub.Query(q.QueryRequest(mode=q.QueryRequest.MODE_MERGE,
                              merge=q.MergeProfile(query=sys.argv[4], start=start, end=end),
                              report_type=q.QueryRequest.REPORT_TYPE_TOP), timeout=30)
if r.total != want:
    sys.exit("merged total %d, want %d (the recent profile only)" % (r.total, want))
print("after retention: total", r.total)
PYEOF
curl -sf "http://$ADDR/metrics" | grep -Eq '^kiln_store_blocks 1$' || die "kiln_store_blocks != 1"
server_stop
echo "server_retention: ok"
