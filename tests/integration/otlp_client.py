#!/usr/bin/python3
"""An OpenTelemetry profiles (OTLP v1development) producer for the kiln tests.

No published package reachable here carries the profiles protos (npm's
@opentelemetry/otlp-transformer 0.301.1 has traces, metrics and logs only),
so the message classes are generated at test time by grpc_tools.protoc from
Kiln's proto/opentelemetry/ files into --stubs, which follow the published
opentelemetry-proto v1.8.0 field numbers.

  send   --addr A --run R --via grpc|http-pb|http-json-gz --expect FILE
         one request using every dictionary table (strings, functions,
         locations with inlined lines, mappings with build IDs, links,
         attributes, stacks), two resources, three scopes, four profiles;
         writes what kiln must return for it to FILE (JSON)
  verify --addr A --kilnctl K --expect FILE --out DIR
         queries every expected series with kilnctl and compares the folded
         stacks and totals, and the frame-type marker on the pprof mappings
  bad    --addr A --kilnctl K  every bad input: each error names the table
         and index, and nothing of a refused request or profile is stored
  dump   --out DIR   the request as request.pb and request.json (fuzz seeds)
"""
import argparse
import base64
import gzip
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


def load_stubs(stubs):
    sys.path.insert(0, stubs)
    global svc_pb2, svc_grpc, prof_pb2, common_pb2, pprof_pb2, grpc, json_format
    import grpc  # noqa: F401
    from google.protobuf import json_format  # noqa: F401
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc_pb2
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2_grpc as svc_grpc
    from opentelemetry.proto.profiles.v1development import profiles_pb2 as prof_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from pprof import profile_pb2 as pprof_pb2


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Dict:
    """Builds a ProfilesDictionary, row 0 of each table the zero row."""

    def __init__(self):
        self.d = prof_pb2.ProfilesDictionary()
        self.d.string_table.append("")
        self.d.mapping_table.add()
        self.d.function_table.add()
        self.d.location_table.add()
        self.d.link_table.add()
        self.d.attribute_table.add()
        self.d.stack_table.add()
        self.strings = {"": 0}

    def s(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.d.string_table)
            self.d.string_table.append(text)
        return self.strings[text]

    def attr(self, key, value, unit=""):
        a = self.d.attribute_table.add(key_strindex=self.s(key), unit_strindex=self.s(unit))
        if isinstance(value, int):
            a.value.int_value = value
        else:
            a.value.string_value = value
        return len(self.d.attribute_table) - 1

    def func(self, name, file=""):
        self.d.function_table.add(name_strindex=self.s(name), system_name_strindex=self.s(name),
                                  filename_strindex=self.s(file), start_line=1)
        return len(self.d.function_table) - 1

    def mapping(self, path, start, limit, build_id):
        m = self.d.mapping_table.add(memory_start=start, memory_limit=limit, file_offset=0,
                                     filename_strindex=self.s(path))
        m.attribute_indices.append(self.attr("process.executable.build_id.gnu", build_id))
        return len(self.d.mapping_table) - 1

    def location(self, mapping, addr, funcs, frame_type):
        """funcs: innermost first (the last is the one the others were inlined into)."""
        loc = self.d.location_table.add(mapping_index=mapping, address=addr)
        for i, f in enumerate(funcs):
            loc.lines.add(function_index=f, line=10 + i, column=i)
        loc.attribute_indices.append(self.attr("profile.frame.type", frame_type))
        return len(self.d.location_table) - 1

    def stack(self, locs):
        self.d.stack_table.add(location_indices=locs)
        return len(self.d.stack_table) - 1

    def link(self, trace, span):
        self.d.link_table.add(trace_id=trace, span_id=span)
        return len(self.d.link_table) - 1


def kv(key, value):
    k = common_pb2.KeyValue(key=key)
    if isinstance(value, int):
        k.value.int_value = value
    else:
        k.value.string_value = value
    return k


def build_request(run):
    """The request and what kiln must return: {query: {folded: {stack: value}}}."""
    d = Dict()
    names = {}
    f = {n: d.func(n, "/src/%s.c" % n) for n in
         ["main", "handle", "parse", "inlined_helper", "memcpy", "py_run", "py_step", "do_syscall"]}
    for n, i in f.items():
        names[i] = n
    app = d.mapping("/usr/bin/app", 0x400000, 0x500000, "a1b2c3d4e5f60718")
    libc = d.mapping("/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000, 0x7f0000100000,
                     "0011223344556677")
    # Locations: one with an inlined frame (two lines), native, python
    # (unmapped) and kernel (unmapped) frames.
    l_main = d.location(app, 0x401000, [f["main"]], "native")
    l_handle = d.location(app, 0x402000, [f["inlined_helper"], f["handle"]], "native")
    l_parse = d.location(app, 0x403000, [f["parse"]], "native")
    l_memcpy = d.location(libc, 0x7f0000001000, [f["memcpy"]], "native")
    l_py_run = d.location(0, 0, [f["py_run"]], "python")
    l_py_step = d.location(0, 0, [f["py_step"]], "python")
    l_sys = d.location(0, 0xffffffff81000000, [f["do_syscall"]], "kernel")
    frames = {l_main: ["main"], l_handle: ["handle", "inlined_helper"], l_parse: ["parse"],
              l_memcpy: ["memcpy"], l_py_run: ["py_run"], l_py_step: ["py_step"],
              l_sys: ["do_syscall"]}
    stacks = {
        "A": d.stack([l_parse, l_handle, l_main]),
        "B": d.stack([l_memcpy, l_handle, l_main]),
        "C": d.stack([l_py_step, l_py_run, l_main]),
        "D": d.stack([l_sys, l_memcpy, l_main]),
    }

    def folded(stack_idx):
        locs = list(d.d.stack_table[stack_idx].location_indices)
        out = []
        for l in reversed(locs):
            out += frames[l]
        return ";".join(out)

    link = d.link(bytes(range(16)), bytes(range(8)))
    thread = d.attr("thread.name", "worker-1")
    prof_attr = d.attr("deployment.environment", "test")
    s_samples, s_count = d.s("samples"), d.s("count")
    s_cpu, s_ns = d.s("cpu"), d.s("nanoseconds")
    s_alloc, s_bytes = d.s("alloc_space"), d.s("bytes")
    now = time.time_ns()

    req = svc_pb2.ExportProfilesServiceRequest()
    expect = {}

    def add_profile(scope, service, kind, samples, attrs=()):
        p = scope.profiles.add()
        if kind == "cpu":
            p.sample_type.type_strindex, p.sample_type.unit_strindex = s_samples, s_count
            p.period_type.type_strindex, p.period_type.unit_strindex = s_cpu, s_ns
            p.period = 10000000
            ptype = "samples:count:cpu:nanoseconds:delta"
        else:
            p.sample_type.type_strindex, p.sample_type.unit_strindex = s_alloc, s_bytes
            p.period_type.type_strindex, p.period_type.unit_strindex = s_alloc, s_bytes
            p.period = 524288
            ptype = "alloc_space:bytes:alloc_space:bytes"
        p.time_unix_nano = now
        p.duration_nano = 10 * 10**9
        p.profile_id = os.urandom(16)
        p.attribute_indices.extend(attrs)
        want = {}
        for st, values, ts, lk in samples:
            smp = p.samples.add(stack_index=stacks[st], link_index=lk)
            smp.values.extend(values)
            smp.timestamps_unix_nano.extend(now + i for i in range(ts))
            smp.attribute_indices.append(thread)
            v = sum(values) if values else ts
            want[folded(stacks[st])] = want.get(folded(stacks[st]), 0) + v
        name = scope.scope.name.replace(".", "_").replace("-", "_").replace("/", "_")
        # A selector matches every series that has its labels: the one
        # without the profile attribute also sums the profile that has it.
        sel = 'service_name="%s",test_run="%s"' % (service, run)
        queries = ["%s:%s{%s}" % (name, ptype, sel)]
        if attrs:
            queries.append("%s:%s{%s,deployment_environment=\"test\"}" % (name, ptype, sel))
        for q in queries:
            expect.setdefault(q, {})
            for k, v in want.items():
                expect[q][k] = expect[q].get(k, 0) + v

    r1 = req.resource_profiles.add()
    r1.resource.attributes.extend([kv("service.name", "checkout"), kv("host.name", "node-1"),
                                   kv("process.pid", 4242), kv("container.id", "c0ffee"),
                                   kv("k8s.namespace.name", "shop"), kv("test.run", run)])
    sc1 = r1.scope_profiles.add()
    sc1.scope.name = "otel_ebpf_profiler"
    sc1.scope.version = "0.1"
    add_profile(sc1, "checkout", "cpu",
                [("A", [3], 0, 0), ("B", [], 5, link), ("C", [2, 4], 2, 0), ("D", [7], 0, 0)])
    add_profile(sc1, "checkout", "cpu", [("A", [11], 0, 0), ("C", [1], 0, link)], [prof_attr])
    sc2 = r1.scope_profiles.add()
    sc2.scope.name = "otel_alloc"
    add_profile(sc2, "checkout", "alloc", [("B", [4096], 0, 0), ("A", [100, 28], 0, 0)])
    r2 = req.resource_profiles.add()
    r2.resource.attributes.extend([kv("service.name", "billing"), kv("host.name", "node-2"),
                                   kv("test.run", run)])
    sc3 = r2.scope_profiles.add()
    sc3.scope.name = "otel_ebpf_profiler"
    add_profile(sc3, "billing", "cpu", [("D", [9], 0, 0), ("B", [1], 0, 0)])
    req.dictionary.CopyFrom(d.d)
    labels = {"host_name": "node-1", "process_pid": "4242", "container_id": "c0ffee",
              "k8s_namespace_name": "shop"}
    return req, expect, labels


def http_post(addr, body, ctype, gz=False):
    headers = {"Content-Type": ctype}
    if gz:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    r = urllib.request.Request("http://%s/v1development/profiles" % addr, data=body,
                               headers=headers, method="POST")
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def to_otlp_json(msg):
    """OTLP/JSON: lowerCamelCase names, 64-bit integers as strings, ids in hex."""
    obj = json_format.MessageToDict(msg)  # camelCase, int64 as strings, bytes base64

    def fix(o, key=None):
        if isinstance(o, dict):
            return {k: fix(v, k) for k, v in o.items()}
        if isinstance(o, list):
            return [fix(v, key) for v in o]
        if key in ("traceId", "spanId", "profileId") and isinstance(o, str):
            return base64.b64decode(o).hex()
        return o
    return json.dumps(fix(obj)).encode()


def cmd_send(a):
    req, expect, labels = build_request(a.run)
    n_profiles = sum(len(s.profiles) for r in req.resource_profiles for s in r.scope_profiles)
    if a.via == "grpc":
        ch = grpc.insecure_channel(a.addr)
        resp = svc_grpc.ProfilesServiceStub(ch).Export(req, timeout=30)
        if resp.HasField("partial_success") and resp.partial_success.rejected_profiles:
            fail("gRPC Export rejected %s" % resp.partial_success)
    elif a.via == "http-pb":
        status, body = http_post(a.addr, req.SerializeToString(), "application/x-protobuf")
        if status != 200:
            fail("HTTP protobuf: %d %s" % (status, body[:300]))
        r = svc_pb2.ExportProfilesServiceResponse()
        r.ParseFromString(body)
        if r.partial_success.rejected_profiles:
            fail("HTTP protobuf rejected %s" % r.partial_success)
    else:
        status, body = http_post(a.addr, to_otlp_json(req), "application/json", gz=True)
        if status != 200:
            fail("HTTP JSON: %d %s" % (status, body[:300]))
        if json.loads(body).get("partialSuccess"):
            fail("HTTP JSON rejected %s" % body)
    json.dump({"expect": expect, "labels": labels, "profiles": n_profiles,
               "samples": sum(len(p.samples) for r in req.resource_profiles
                              for s in r.scope_profiles for p in s.profiles)},
              open(a.expect, "w"))
    print("%s: sent %d profiles" % (a.via, n_profiles))


def kilnctl_query(a, q, output, extra=()):
    r = subprocess.run([a.kilnctl, "query", "--address=" + a.addr, q, "--since=1h",
                        "--output=" + output] + list(extra), capture_output=True, text=True)
    if r.returncode != 0:
        fail("kilnctl query %s: %s" % (q, r.stderr.strip()))
    return r.stdout


def cmd_verify(a):
    e = json.load(open(a.expect))
    for q, want in e["expect"].items():
        got = {}
        for line in kilnctl_query(a, q, "folded").splitlines():
            if line.strip():
                stack, v = line.rsplit(" ", 1)
                got[stack] = got.get(stack, 0) + int(v)
        if got != want:
            fail("%s: folded stacks differ\n got  %s\n want %s" % (q, got, want))
        print("ok %s: %d stacks, total %d" % (q, len(want), sum(want.values())))
    # The resource attributes are series labels; the frame types and build
    # IDs are on the mappings of the pprof answer.
    q = [q for q in e["expect"] if "checkout" in q and "samples" in q][0]
    sel = q[:-1] + "".join(',%s="%s"' % kv for kv in e["labels"].items()) + "}"
    path = os.path.join(a.out, "q.pb.gz")
    kilnctl_query(a, sel, "pprof", ["-o", path])
    p = pprof_pb2.Profile()
    p.ParseFromString(gzip.decompress(open(path, "rb").read()))
    maps = {p.string_table[m.filename]: p.string_table[m.build_id] for m in p.mapping}
    for name, bid in [("/usr/bin/app", "a1b2c3d4e5f60718"), ("[python]", ""), ("[kernel]", "")]:
        if maps.get(name) != bid:
            fail("pprof mappings %s: want %s with build ID %r" % (maps, name, bid))
    total = sum(s.value[0] for s in p.sample)
    if total != sum(e["expect"][q].values()):
        fail("labelled query total %d != %d" % (total, sum(e["expect"][q].values())))
    print("ok labels, build IDs and frame-type mappings:", sorted(maps))


def bad_request(run, table):
    """A valid request with one out-of-range index planted in table."""
    req, _, _ = build_request(run)
    d = req.dictionary
    p = req.resource_profiles[0].scope_profiles[0].profiles[0]
    big = 100000
    where = {
        "string_table": lambda: setattr(d.function_table[1], "name_strindex", big),
        "function_table": lambda: setattr(d.location_table[1].lines[0], "function_index", big),
        "location_table": lambda: d.stack_table[1].location_indices.append(big),
        "mapping_table": lambda: setattr(d.location_table[1], "mapping_index", big),
        "attribute_table": lambda: d.mapping_table[1].attribute_indices.append(big),
        "stack_table": lambda: setattr(p.samples[0], "stack_index", big),
        "link_table": lambda: setattr(p.samples[0], "link_index", big),
    }
    where[table]()
    return req


def series_exists(a, run):
    with urllib.request.urlopen("http://%s/api/v1/values?label=test_run" % a.addr) as r:
        return run in r.read().decode()


def cmd_bad(a):
    # Each dictionary table: the whole request is refused, naming table and index.
    for table in ["string_table", "function_table", "location_table", "mapping_table",
                  "attribute_table"]:
        run = "bad-" + table
        status, body = http_post(a.addr, bad_request(run, table).SerializeToString(),
                                 "application/x-protobuf")
        msg = body.decode(errors="replace")
        if status != 400 or table not in msg or "100000" not in msg:
            fail("%s: want 400 naming the table and index, got %d %s" % (table, status, msg))
        if series_exists(a, run):
            fail("%s: a refused request left a series behind" % table)
        print("ok", table, "->", json.loads(msg)["error"])
    # Profile-level indices: only that profile is rejected (partial success).
    for table in ["stack_table", "link_table"]:
        run = "partial-" + table
        status, body = http_post(a.addr, bad_request(run, table).SerializeToString(),
                                 "application/x-protobuf")
        if status != 200:
            fail("%s: want 200 with partial success, got %d %s" % (table, status, body[:300]))
        r = svc_pb2.ExportProfilesServiceResponse()
        r.ParseFromString(body)
        ps = r.partial_success
        if ps.rejected_profiles != 1 or table not in ps.error_message or \
                "profiles[0]" not in ps.error_message or "100000" not in ps.error_message:
            fail("%s: partial success %s" % (table, ps))
        print("ok", table, "-> partial success:", ps.error_message)
        # The rejected profile's series holds nothing; the others were stored.
        q = 'otel_ebpf_profiler:samples:count:cpu:nanoseconds:delta{service_name="checkout",' \
            'test_run="%s"}' % run
        # Only the request's second profile of that series may be there.
        got = kilnctl_query(a, q, "folded")
        if sorted(got.split("\n")) != sorted(["main;handle;inlined_helper;parse 11",
                                              "main;py_run;py_step 1", ""]):
            fail("%s: the rejected profile was stored:\n%s" % (table, got))
        q2 = 'otel_alloc:alloc_space:bytes:alloc_space:bytes{test_run="%s"}' % run
        if not kilnctl_query(a, q2, "folded").strip():
            fail("%s: the valid profiles of the request were not stored" % table)
    # gRPC: a bad dictionary is INVALID_ARGUMENT with the same message.
    ch = grpc.insecure_channel(a.addr)
    try:
        svc_grpc.ProfilesServiceStub(ch).Export(bad_request("bad-grpc", "mapping_table"),
                                                timeout=30)
        fail("gRPC: bad mapping index accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT or "mapping_table" not in e.details():
            fail("gRPC: %s %s" % (e.code(), e.details()))
        print("ok gRPC ->", e.code(), e.details())
    # A truncated body.
    good = build_request("bad-truncated")[0].SerializeToString()
    status, body = http_post(a.addr, good[:len(good) // 2], "application/x-protobuf")
    if status != 400 or b"not a valid protobuf" not in body:
        fail("truncated: %d %s" % (status, body[:300]))
    print("ok truncated ->", body.decode().strip())
    status, body = http_post(a.addr, gzip.compress(good)[:100], "application/x-protobuf")
    if status != 400 or b"gzip" not in body:
        fail("truncated gzip: %d %s" % (status, body[:300]))
    print("ok truncated gzip ->", body.decode().strip())
    # JSON with wrong types, and JSON that is not JSON.
    j = json.loads(to_otlp_json(build_request("bad-json")[0]))
    j["resourceProfiles"][0]["scopeProfiles"][0]["profiles"][0]["samples"][1]["values"] = [True]
    status, body = http_post(a.addr, json.dumps(j).encode(), "application/json")
    if status != 400 or b"samples[1].values[0]" not in body:
        fail("JSON wrong type: %d %s" % (status, body[:300]))
    print("ok JSON wrong type ->", body.decode().strip())
    j = json.loads(to_otlp_json(build_request("bad-json")[0]))
    j["dictionary"]["stringTable"] = "main"
    status, body = http_post(a.addr, json.dumps(j).encode(), "application/json")
    if status != 400 or b"dictionary.stringTable" not in body:
        fail("JSON string for array: %d %s" % (status, body[:300]))
    print("ok JSON not an array ->", body.decode().strip())
    status, body = http_post(a.addr, b'{"resourceProfiles": [', "application/json")
    if status != 400 or b"JSON body" not in body:
        fail("broken JSON: %d %s" % (status, body[:300]))
    print("ok broken JSON ->", body.decode().strip())
    # Attribute values nested past the limit (protobuf-c would recurse on them).
    req = build_request("bad-nested")[0]
    v = req.resource_profiles[0].resource.attributes.add(key="deep").value
    for _ in range(40):
        v = v.array_value.values.add()
    v.string_value = "x"
    status, body = http_post(a.addr, req.SerializeToString(), "application/x-protobuf")
    if status != 400 or b"nest more than" not in body:
        fail("nested protobuf: %d %s" % (status, body[:300]))
    print("ok nested protobuf ->", body.decode().strip())
    status, body = http_post(a.addr, to_otlp_json(req), "application/json")
    if status != 400 or b"nested more than" not in body:
        fail("nested JSON: %d %s" % (status, body[:300]))
    print("ok nested JSON ->", body.decode().strip()[:160])
    # A NUL byte in what becomes a label (protobuf-c would cut the string there).
    req = build_request("bad-nul")[0]
    req.resource_profiles[0].resource.attributes.add(key="pod").value.string_value = "a\0b"
    status, body = http_post(a.addr, req.SerializeToString(), "application/x-protobuf")
    if status != 400 or b"NUL" not in body:
        fail("NUL in a label: %d %s" % (status, body[:300]))
    print("ok NUL ->", body.decode().strip())
    for run in ["bad-grpc", "bad-truncated", "bad-json", "bad-nested", "bad-nul"]:
        if series_exists(a, run):
            fail("%s: a refused request left a series behind" % run)


def cmd_dump(a):
    req = build_request("seed")[0]
    open(os.path.join(a.out, "request.pb"), "wb").write(req.SerializeToString())
    open(os.path.join(a.out, "request.json"), "wb").write(to_otlp_json(req))
    open(os.path.join(a.out, "bad_stack.pb"), "wb").write(
        bad_request("seed", "stack_table").SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["send", "verify", "bad", "dump"])
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--addr", default="")
    ap.add_argument("--run", default="r")
    ap.add_argument("--via", default="grpc")
    ap.add_argument("--expect")
    ap.add_argument("--kilnctl")
    ap.add_argument("--out", default="/tmp")
    a = ap.parse_args()
    load_stubs(a.stubs)
    {"send": cmd_send, "verify": cmd_verify, "bad": cmd_bad, "dump": cmd_dump}[a.cmd](a)


if __name__ == "__main__":
    main()
