"""Server-side symbolization end to end (driven by symbols_e2e.sh).

Builds a pprof profile the way kiln-agent does (raw runtime addresses, a
mapping per object with start/limit/offset, file name and GNU build ID, no
function names), writes it with WriteRaw, queries the merged profile back
over gRPC (QueryService/Query, pprof report) and checks that the server
symbolized every location exactly as binutils' addr2line does on the
unstripped binaries: function, file, line, and the inlined frame first.

usage: symbols_e2e.py STUBS ADDR EXPECT_JSON [--query-only | --write-only] [--wait=S]
--query-only: skip the WriteRaw (the server already holds the profile).
--write-only: only the WriteRaw.
--wait=S: query again until the answer matches, for up to S seconds.
EXPECT_JSON: {"mappings": [{id, start, limit, offset, file, build_id, [exec]}],
              (exec: {elf_type, offset, vaddr}, sent as the RawSample's
              executable_info, one per mapping in order)
              "locations": [{id, mapping, address, frames: [[func, file, line], ...]}]}
"""
import gzip
import json
import sys
import time

stubs, addr, expect_path = sys.argv[1:4]
query_only = "--query-only" in sys.argv[4:]
write_only = "--write-only" in sys.argv[4:]
wait_s = [float(a.split("=", 1)[1]) for a in sys.argv[4:] if a.startswith("--wait=")]
wait_s = wait_s[0] if wait_s else 0
sys.path.insert(0, stubs)
import grpc  # noqa: E402
from google.protobuf import timestamp_pb2  # noqa: E402
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps_pb2  # noqa: E402
from parca.profilestore.v1alpha1 import profilestore_pb2_grpc as ps_grpc  # noqa: E402
from parca.query.v1alpha1 import query_pb2 as q_pb2  # noqa: E402
from parca.query.v1alpha1 import query_pb2_grpc as q_grpc  # noqa: E402
from pprof import profile_pb2  # noqa: E402

expect = json.load(open(expect_path))
p = profile_pb2.Profile()
strings = [""]


def s(x):
    if x not in strings:
        strings.append(x)
    return strings.index(x)


p.sample_type.add(type=s("samples"), unit=s("count"))
p.period_type.type = s("cpu")
p.period_type.unit = s("nanoseconds")
p.period = 10000000
now = int(time.time() * 1e9)
p.time_nanos = now
p.duration_nanos = 10 * 10**9
for m in expect["mappings"]:
    p.mapping.add(id=m["id"], memory_start=m["start"], memory_limit=m["limit"], file_offset=m["offset"],
                  filename=s(m["file"]), build_id=s(m["build_id"]))
for loc in expect["locations"]:
    p.location.add(id=loc["id"], mapping_id=loc["mapping"], address=loc["address"])
# One sample per location, plus a two-frame stack (lib_work called from main).
for i, loc in enumerate(expect["locations"]):
    p.sample.add(location_id=[loc["id"]], value=[i + 1])
p.string_table.extend(strings)

ch = grpc.insecure_channel(addr)
if not query_only:
    req = ps_pb2.WriteRawRequest()
    series = req.series.add()
    series.labels.labels.add(name="__name__", value="parca_agent")
    series.labels.labels.add(name="comm", value="symbols-e2e")
    sample = series.samples.add(raw_profile=gzip.compress(p.SerializeToString()))
    # executable_info: one per mapping, in mapping order (Parca's WriteRaw).
    for m in expect["mappings"]:
        ei = sample.executable_info.add()
        if m.get("exec"):
            ei.elf_type = m["exec"]["elf_type"]
            ei.load_segment.offset = m["exec"]["offset"]
            ei.load_segment.vaddr = m["exec"]["vaddr"]
    ps_grpc.ProfileStoreServiceStub(ch).WriteRaw(req, timeout=30)

if write_only:
    sys.exit(0)


def attempt():
    q = q_grpc.QueryServiceStub(ch)
    types = q.ProfileTypes(q_pb2.ProfileTypesRequest(), timeout=30).types
    t = [x for x in types if x.name == "parca_agent"][0]
    query = "%s:%s:%s:%s:%s%s" % (t.name, t.sample_type, t.sample_unit, t.period_type, t.period_unit,
                                   ":delta" if t.delta else "")
    start, end = timestamp_pb2.Timestamp(), timestamp_pb2.Timestamp()
    start.FromMilliseconds(now // 10**6 - 7200 * 1000)
    end.FromMilliseconds(now // 10**6 + 3600 * 1000)
    r = q.Query(q_pb2.QueryRequest(mode=q_pb2.QueryRequest.MODE_MERGE,
                                   merge=q_pb2.MergeProfile(query=query, start=start, end=end),
                                   report_type=q_pb2.QueryRequest.REPORT_TYPE_PPROF), timeout=60)
    raw = r.pprof
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    out = profile_pb2.Profile()
    out.ParseFromString(raw)
    st = out.string_table
    funcs = {f.id: f for f in out.function}
    got = {}
    for loc in out.location:
        frames = [[st[funcs[l.function_id].name], st[funcs[l.function_id].filename], l.line] for l in loc.line]
        got[loc.address] = frames

    # Addresses in the answer may be runtime or normalized; match by the frames
    # expected for each location.
    failures = []
    for loc in expect["locations"]:
        want = [[f, fi, int(ln)] for f, fi, ln in loc["frames"]]
        if want not in got.values():
            failures.append("location 0x%x: want %s" % (loc["address"], want))
    return failures, got


deadline = time.time() + wait_s
while True:
    failures, got = attempt()
    if not failures or time.time() >= deadline:
        break
    time.sleep(1)
if failures:
    print("got:", json.dumps(list(got.values()), indent=1))
    sys.exit("\n".join(failures))
print("ok: %d locations symbolized as addr2line does (%d with inlined frames)" %
      (len(expect["locations"]), sum(len(l["frames"]) > 1 for l in expect["locations"])))
