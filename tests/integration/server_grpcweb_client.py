#!/usr/bin/python3
"""gRPC-Web and Connect checks for tests/integration/server_grpcweb.sh.

The reference is native gRPC (Debian's python3-grpcio, messages generated
from proto/ at test time): every other protocol must answer the same call
with the same message.

  calls    --out FILE: writes the QueryService calls (proto JSON) to make
  compare  --calls FILE --node FILE: native gRPC against the Node clients'
           answers (webrpc_calls.mjs) and against this file's own framing of
           gRPC-Web (HTTP/1.1, and HTTP/2 through curl), gRPC-Web-text,
           Connect proto/JSON and Connect's streaming envelope
  grafana  Grafana's Parca data source's request sequence, as connect-go
           sends it (gRPC-Web over HTTP/1.1), and the flame graph it draws
  badinput truncated frames, bad base64, wrong content types, oversize
  auth     --read R --write W: the token gate over gRPC-Web and Connect
  reflect  --desc FILE: server reflection (v1 and v1alpha) over one
           bidirectional stream, several requests each answered in turn;
           the descriptors equal protoc's (FILE); once over gRPC-Web
"""
import argparse
import base64
import gzip
import http.client
import json
import subprocess
import sys

T0 = "2020-01-01T00:00:00Z"
T1 = "2035-01-01T00:00:00Z"
Q = "/parca.query.v1alpha1.QueryService/"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def load_stubs(stubs):
    sys.path.insert(0, stubs)
    global q_pb2, q_grpc, grpc, json_format, prof_pb2
    import grpc  # noqa: F401
    from google.protobuf import json_format  # noqa: F401
    from parca.query.v1alpha1 import query_pb2 as q_pb2  # noqa: F401
    from parca.query.v1alpha1 import query_pb2_grpc as q_grpc  # noqa: F401
    from pprof import profile_pb2 as prof_pb2  # noqa: F401


def msg_types(method):
    return getattr(q_pb2, method + "Request"), getattr(q_pb2, method + "Response")


# ---- framing -------------------------------------------------------------------------

def envelope(flags, payload):
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload


def unframe(body):
    """[(flags, payload)] of a body of 5-byte envelopes; fails on leftovers."""
    out, off = [], 0
    while off < len(body):
        if len(body) - off < 5:
            fail("response has a truncated envelope at %d" % off)
        n = int.from_bytes(body[off + 1:off + 5], "big")
        out.append((body[off], body[off + 5:off + 5 + n]))
        if off + 5 + n > len(body):
            fail("response envelope at %d runs past the body" % off)
        off += 5 + n
    return out


def trailers(payload):
    t = {}
    for line in payload.decode().split("\r\n"):
        if line:
            k, v = line.split(":", 1)
            t[k.strip().lower()] = v.strip()
    return t


def post(addr, path, ctype, body, headers=None):
    c = http.client.HTTPConnection(addr, timeout=60)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def grpc_web_h1(addr, method, req, text=False, headers=None):
    """(grpc-status, message, response bytes or None) over HTTP/1.1."""
    body = envelope(0, req)
    ctype = "application/grpc-web-text" if text else "application/grpc-web+proto"
    if text:
        body = base64.b64encode(body)
    status, h, data = post(addr, Q + method, ctype, body, headers)
    if status != 200:
        fail("%s gRPC-Web: HTTP %d" % (method, status))
    if text:
        data = base64.b64decode(data)
    return parse_grpc_web(data)


def parse_grpc_web(data):
    msg, tr = None, None
    for flags, payload in unframe(data):
        if flags & 0x80:
            tr = trailers(payload)
        else:
            msg = payload
    if tr is None:
        fail("gRPC-Web response without a trailer frame")
    return int(tr["grpc-status"]), tr.get("grpc-message", ""), msg


def grpc_web_h2(addr, method, req):
    """gRPC-Web over HTTP/2 (prior knowledge), through curl."""
    p = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-X", "POST", "-H",
                        "Content-Type: application/grpc-web+proto", "--data-binary", "@-",
                        "http://%s%s%s" % (addr, Q, method)], input=envelope(0, req),
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        fail("curl --http2-prior-knowledge: exit %d" % p.returncode)
    return parse_grpc_web(p.stdout)


def connect_unary(addr, method, body, ctype, headers=None):
    h = {"Connect-Protocol-Version": "1"}
    h.update(headers or {})
    return post(addr, Q + method, ctype, body, h)


def connect_stream(addr, method, req):
    status, h, data = post(addr, Q + method, "application/connect+proto", envelope(0, req),
                           {"Connect-Protocol-Version": "1"})
    if status != 200:
        fail("%s Connect streaming: HTTP %d" % (method, status))
    frames = unframe(data)
    if not frames or frames[-1][0] != 0x02:
        fail("%s Connect streaming: no end-stream envelope" % method)
    end = json.loads(frames[-1][1])
    if "error" in end:
        fail("%s Connect streaming: %s" % (method, end["error"]))
    msgs = [p for f, p in frames[:-1]]
    if len(msgs) != 1:
        fail("%s Connect streaming: %d messages" % (method, len(msgs)))
    return msgs[0]


# ---- calls ------------------------------------------------------------------------------

def make_calls(args):
    t = args.type
    sel = t + "{job=\"web\"}"
    rng = {"start": T0, "end": T1}
    calls = [
        {"method": "ProfileTypes", "request": {}},
        {"method": "Labels", "request": {}},
        {"method": "Labels", "request": dict(match=[sel], **rng)},
        {"method": "Values", "request": {"labelName": "job"}},
        {"method": "Values", "request": dict(labelName="node", match=[sel], **rng)},
        {"method": "QueryRange", "request": dict(query=sel, **rng)},
        {"method": "QueryRange", "request": dict(query=sel, limit=2, **rng)},
        {"method": "QueryRange", "request": dict(query=sel, step="60s", **rng)},
    ]
    for rt in ("REPORT_TYPE_FLAMEGRAPH_UNSPECIFIED", "REPORT_TYPE_PPROF", "REPORT_TYPE_TOP",
               "REPORT_TYPE_FLAMEGRAPH_ARROW"):
        calls.append({"method": "Query", "request": {
            "mode": "MODE_MERGE", "merge": dict(query=sel, **rng), "reportType": rt}})
        calls.append({"method": "Query", "request": {
            "mode": "MODE_SINGLE_UNSPECIFIED",
            "single": {"query": sel, "time": args.time}, "reportType": rt}})
        calls.append({"method": "Query", "request": {
            "mode": "MODE_DIFF", "reportType": rt, "diff": {
                "a": {"mode": "MODE_MERGE", "merge": dict(query=sel, **rng)},
                "b": {"mode": "MODE_SINGLE_UNSPECIFIED",
                      "single": {"query": sel, "time": args.time}}}}})
    # An error must be the same error everywhere.
    calls.append({"method": "Query", "request": {
        "mode": "MODE_MERGE", "merge": dict(query="nosuch:a:b:c:d{}", **rng)}})
    json.dump(calls, open(args.out, "w"))


def native(addr, calls):
    stub = q_grpc.QueryServiceStub(grpc.insecure_channel(
        addr, options=[("grpc.max_receive_message_length", 256 << 20)]))
    out = []
    for c in calls:
        req_t, _ = msg_types(c["method"])
        req = json_format.ParseDict(c["request"], req_t())
        try:
            res = getattr(stub, c["method"])(req, timeout=60)
            out.append((0, res))
        except grpc.RpcError as e:
            out.append((e.code().value[0], e.details()))
    return out


def to_dict(m):
    return json_format.MessageToDict(m)


def normalize(d):
    """Proto JSON as data: pprof bytes decompressed and parsed, so that two
    gzip streams of the same profile compare equal."""
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            if k == "pprof":
                p = prof_pb2.Profile()
                p.ParseFromString(gzip.decompress(base64.b64decode(v)))
                out[k] = to_dict(p)
            else:
                out[k] = normalize(v)
        return out
    if isinstance(d, list):
        return [normalize(x) for x in d]
    return d


def compare(args):
    calls = json.load(open(args.calls))
    ref = native(args.addr, calls)
    ok_calls = sum(1 for code, _ in ref if code == 0)
    if ok_calls < len(calls) - 1:
        fail("native gRPC answered only %d of %d calls" % (ok_calls, len(calls)))
    checked = 0
    # Node's clients.
    node = json.load(open(args.node))
    for transport, answers in node.items():
        if len(answers) != len(calls):
            fail("%s: %d answers for %d calls" % (transport, len(answers), len(calls)))
        for i, (c, (code, want), got) in enumerate(zip(calls, ref, answers)):
            what = "%s call %d (%s %s)" % (transport, i, c["method"],
                                           c["request"].get("reportType", ""))
            if code != 0:
                if "ok" in got:
                    fail("%s: succeeded, native gRPC failed with %d" % (what, code))
                continue
            if "ok" not in got:
                fail("%s: %s" % (what, got["error"]))
            if normalize(got["ok"]) != normalize(to_dict(want)):
                fail("%s: differs from native gRPC:\n%s\n%s" % (
                    what, json.dumps(got["ok"])[:600], json.dumps(to_dict(want))[:600]))
            checked += 1
    # This file's own framing of every protocol.
    for i, (c, (code, want)) in enumerate(zip(calls, ref)):
        req_t, res_t = msg_types(c["method"])
        req = json_format.ParseDict(c["request"], req_t()).SerializeToString()
        what = "call %d (%s)" % (i, c["method"])
        for name, fn in (("gRPC-Web/1.1", lambda: grpc_web_h1(args.addr, c["method"], req)),
                         ("gRPC-Web-text/1.1",
                          lambda: grpc_web_h1(args.addr, c["method"], req, text=True)),
                         ("gRPC-Web/2", lambda: grpc_web_h2(args.addr, c["method"], req))):
            st, m, body = fn()
            if st != code:
                fail("%s %s: grpc-status %d (%s), native %d" % (name, what, st, m, code))
            if code == 0 and res_t.FromString(body or b"") != want:
                fail("%s %s: message differs from native gRPC" % (name, what))
            if code != 0 and m != want:
                fail("%s %s: message %r, native %r" % (name, what, m, want))
            checked += 1
        st, h, body = connect_unary(args.addr, c["method"], req, "application/proto")
        if code == 0:
            if st != 200 or res_t.FromString(body) != want:
                fail("Connect proto %s: HTTP %d or message differs" % (what, st))
            if connect_stream(args.addr, c["method"], req) != body and \
                    res_t.FromString(connect_stream(args.addr, c["method"], req)) != want:
                fail("Connect streaming %s: message differs" % what)
        else:
            e = json.loads(body)
            if st != 404 or e.get("code") != "not_found" or e.get("message") != want:
                fail("Connect proto %s: HTTP %d %r, native NOT_FOUND %r" % (what, st, e, want))
        st, h, body = connect_unary(args.addr, c["method"], json.dumps(c["request"]).encode(),
                                    "application/json")
        if code == 0 and (st != 200 or normalize(json.loads(body)) != normalize(to_dict(want))):
            fail("Connect JSON %s: HTTP %d or differs:\n%s\n%s" % (
                what, st, body[:400], json.dumps(to_dict(want))[:400]))
        checked += 3
    print("compare: %d answers equal native gRPC's (%d calls, Node clients: %s)" % (
        checked, len(calls), ", ".join(sorted(node))))


# ---- Grafana ------------------------------------------------------------------------------

def grafana(args):
    """The calls of Grafana's pkg/tsdb/parca, with connect-go's gRPC-Web
    headers, and the flame graph its walkTree draws from the answer."""
    h = {"User-Agent": "connect-go/1.9.0 (go1.21)", "Grpc-Accept-Encoding": "gzip",
         "Accept-Encoding": "identity", "Grpc-Timeout": "29999m"}

    def call(method, msg):
        _, res_t = msg_types(method)
        st, m, body = grpc_web_h1(args.addr, method, msg.SerializeToString(), headers=h)
        if st != 0:
            fail("Grafana's %s: grpc-status %d: %s" % (method, st, m))
        return res_t.FromString(body or b"")

    types = call("ProfileTypes", q_pb2.ProfileTypesRequest())
    ids = []
    for t in types.types:
        ids.append("%s:%s:%s:%s:%s%s" % (t.name, t.sample_type, t.sample_unit, t.period_type,
                                         t.period_unit, ":delta" if t.delta else ""))
    if args.type not in ids:
        fail("Grafana's profile type picker lacks %s: %s" % (args.type, ids))
    names = call("Labels", q_pb2.LabelsRequest()).label_names
    if "job" not in names:
        fail("Grafana's label picker lacks job: %s" % list(names))
    values = call("Values", q_pb2.ValuesRequest(label_name="job")).label_values
    if "web" not in values:
        fail("Grafana's value picker lacks web: %s" % list(values))
    sel = '{job="web"}'
    ts = __import__("google.protobuf.timestamp_pb2", fromlist=["x"])
    start, end = ts.Timestamp(seconds=args.start), ts.Timestamp(seconds=args.end)
    for limit in (args.limit, 1):
        rng = call("QueryRange", q_pb2.QueryRangeRequest(query=args.type + sel, start=start,
                                                        end=end, limit=limit))
        if not rng.series:
            fail("Grafana's metrics graph: no series")
        for s in rng.series:
            if len(s.samples) > limit:
                fail("QueryRange limit=%d: a series has %d samples" % (limit, len(s.samples)))
        total = sum(p.value for s in rng.series for p in s.samples)
        if total != args.total:
            fail("Grafana's metrics graph sums to %d, ingested %d" % (total, args.total))
    res = call("Query", q_pb2.QueryRequest(
        mode=q_pb2.QueryRequest.MODE_MERGE,
        merge=q_pb2.MergeProfile(query=args.type + sel, start=start, end=end),
        report_type=q_pb2.QueryRequest.REPORT_TYPE_FLAMEGRAPH_ARROW))
    if res.WhichOneof("report") != "flamegraph":
        fail("Query for FLAMEGRAPH_ARROW answered %s" % res.WhichOneof("report"))
    # Grafana's walkTree: depth first, (level, value, self, label) rows.
    rows = []
    root = res.flamegraph.root
    rows.append((0, root.cumulative, root.cumulative - sum(c.cumulative for c in root.children),
                 "total"))
    stack = [(c, 1) for c in root.children]
    while stack:
        node, level = stack.pop(0)
        kids = [(c, level + 1) for c in node.children]
        stack = kids + stack
        label = node.meta.function.name if node.meta.function.name else "<unknown>"
        if node.meta.mapping.file:
            label = "[%s] %s" % (node.meta.mapping.file.split("/")[-1], label)
        rows.append((level, node.cumulative,
                     node.cumulative - sum(c.cumulative for c in node.children), label))
    if rows[0][1] != args.total:
        fail("the flame graph's total is %d, ingested %d" % (rows[0][1], args.total))
    if sum(r[2] for r in rows) != args.total:
        fail("the flame graph's self values sum to %d" % sum(r[2] for r in rows))
    if not any(r[3].endswith(args.function) for r in rows):
        fail("the flame graph lacks %s" % args.function)
    print("grafana: %d flame graph rows, total %d, %s drawn; metrics graph <= %d points" % (
        len(rows), rows[0][1], args.function, args.limit))


# ---- bad input -----------------------------------------------------------------------------

def expect_web_error(addr, body, ctype, code, contains, what):
    status, h, data = post(addr, Q + "Labels", ctype, body)
    if ctype.startswith("application/grpc-web-text"):
        data = base64.b64decode(data)
    if status != 200:
        fail("%s: HTTP %d" % (what, status))
    st, m, _ = parse_grpc_web(data)
    if st != code or contains not in m:
        fail("%s: grpc-status %d %r, want %d with %r" % (what, st, m, code, contains))


def badinput(args):
    ok = q_pb2.LabelsRequest().SerializeToString()
    expect_web_error(args.addr, b"\x00\x00\x00\x00\x09abc", "application/grpc-web+proto", 3,
                     "truncated", "truncated frame")
    expect_web_error(args.addr, b"\x00\x00", "application/grpc-web+proto", 3,
                     "5-byte prefix", "truncated prefix")
    expect_web_error(args.addr, b"AAAA*AAA", "application/grpc-web-text", 3, "not base64",
                     "bad base64")
    expect_web_error(args.addr, b"AAAAA", "application/grpc-web-text", 3, "multiple of 4",
                     "truncated base64")
    expect_web_error(args.addr, envelope(0x40, ok), "application/grpc-web+proto", 3,
                     "flags 0x40", "bad flags")
    expect_web_error(args.addr, envelope(0, ok), "application/grpc-web+json", 12, "codec",
                     "unsupported codec")
    expect_web_error(args.addr, envelope(0, b"\xff\xff\xff"), "application/grpc-web+proto", 3,
                     "", "garbage message")
    big = b"\x0a" + b"x" * (args.max + 10)
    status, h, data = post(args.addr, Q + "Labels", "application/grpc-web+proto",
                           envelope(0, big))
    st, m, _ = parse_grpc_web(data)
    if st != 8 or "--grpc-max-message-size" not in m:
        fail("oversize gRPC-Web: grpc-status %d %r" % (st, m))
    status, h, data = connect_unary(args.addr, "Labels", big, "application/proto")
    if status != 429 or json.loads(data)["code"] != "resource_exhausted":
        fail("oversize Connect: HTTP %d %r" % (status, data[:200]))
    status, h, data = connect_unary(args.addr, "Labels", b"{\"match\": 5}",
                                    "application/json")
    e = json.loads(data)
    if status != 400 or e["code"] != "invalid_argument" or "match" not in e["message"]:
        fail("bad Connect JSON: HTTP %d %r" % (status, e))
    status, h, data = connect_unary(args.addr, "Labels", b"{", "application/json")
    if status != 400 or json.loads(data)["code"] != "invalid_argument":
        fail("truncated Connect JSON: HTTP %d %r" % (status, data))
    status, h, data = connect_unary(args.addr, "Labels", ok, "application/proto",
                                    {"Connect-Protocol-Version": "2"})
    if status != 400:
        fail("connect-protocol-version 2: HTTP %d" % status)
    status, h, data = connect_unary(args.addr, "Labels", ok, "application/proto",
                                    {"Connect-Timeout-Ms": "soon"})
    if status != 400 or "connect-timeout-ms" not in json.loads(data)["message"]:
        fail("bad connect-timeout-ms: HTTP %d %r" % (status, data))
    status, h, data = connect_unary(args.addr, "NoSuchMethod", ok, "application/connect+proto")
    frames = unframe(data)
    if json.loads(frames[-1][1])["error"]["code"] != "unimplemented":
        fail("unknown method over Connect streaming: %r" % frames)
    status, h, data = post(args.addr, Q + "Labels", "text/plain", ok)
    if status not in (404, 405):
        fail("text/plain to a method path: HTTP %d" % status)
    print("badinput: every malformed request answered with its error")


def auth(args):
    req = q_pb2.LabelsRequest().SerializeToString()
    for token, want in ((None, 16), ("nope", 16), (args.write, 7), (args.read, 0)):
        h = {"Authorization": "Bearer " + token} if token else {}
        st, m, _ = grpc_web_h1(args.addr, "Labels", req, headers=h)
        if st != want:
            fail("gRPC-Web with token %s: grpc-status %d (%s), want %d" % (token, st, m, want))
        status, _, data = connect_unary(args.addr, "Labels", req, "application/proto", h)
        http_want = {16: 401, 7: 403, 0: 200}[want]
        if status != http_want:
            fail("Connect with token %s: HTTP %d, want %d" % (token, status, http_want))
    path = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    status, h, data = post(args.addr, path, "application/grpc-web+proto", envelope(0, b""))
    if parse_grpc_web(data)[0] != 16:
        fail("reflection without a token was not UNAUTHENTICATED")
    print("auth: gRPC-Web and Connect pass the same gate as gRPC")


def load_reflection(stubs, ver):
    """The generated reflection messages, by file: as the package "grpc"
    they would be looked up inside grpcio."""
    import importlib.util
    path = "%s/grpc/reflection/%s/reflection_pb2.py" % (stubs, ver)
    spec = importlib.util.spec_from_file_location("kiln_reflection_" + ver, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reflect(args):
    import queue
    import threading
    from google.protobuf import descriptor_pb2
    want = {}
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(open(args.desc, "rb").read())
    for f in fds.file:
        want[f.name] = f
    ch = grpc.insecure_channel(args.addr)
    for ver in ("v1", "v1alpha"):
        r_pb2 = load_reflection(args.stubs, ver)
        call = ch.stream_stream(
            "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % ver,
            request_serializer=r_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=r_pb2.ServerReflectionResponse.FromString)
        reqs = [r_pb2.ServerReflectionRequest(host="h", list_services=""),
                r_pb2.ServerReflectionRequest(
                    file_containing_symbol="parca.query.v1alpha1.QueryService"),
                r_pb2.ServerReflectionRequest(
                    file_containing_symbol="parca.metastore.v1alpha1.Function"),
                r_pb2.ServerReflectionRequest(file_by_filename="grpc/health/v1/health.proto"),
                r_pb2.ServerReflectionRequest(file_containing_symbol="nosuch.Thing")]
        q = queue.Queue()

        def gen():
            # One request, then wait for its answer: the stream stays open
            # and each message is answered before the next is sent.
            for r in reqs:
                yield r
                if not q.get(timeout=30):
                    return
        got = []
        try:
            for res in call(gen(), timeout=60):
                got.append(res)
                q.put(True)
        except grpc.RpcError as e:
            fail("reflection %s: %s %s" % (ver, e.code(), e.details()))
        if len(got) != len(reqs):
            fail("reflection %s: %d answers to %d requests" % (ver, len(got), len(reqs)))
        names = [sv.name for sv in got[0].list_services_response.service]
        for n in ("parca.query.v1alpha1.QueryService", "grpc.health.v1.Health",
                  "parca.profilestore.v1alpha1.ProfileStoreService",
                  "grpc.reflection.%s.ServerReflection" % ver):
            if n not in names:
                fail("reflection %s: list_services lacks %s: %s" % (ver, n, names))
        if got[0].valid_host != "h" or got[0].original_request != reqs[0]:
            fail("reflection %s: valid_host/original_request not echoed" % ver)
        for i, first in ((1, "parca/query/v1alpha1/query.proto"),
                         (2, "parca/metastore/v1alpha1/metastore.proto"),
                         (3, "grpc/health/v1/health.proto")):
            files = []
            for b in got[i].file_descriptor_response.file_descriptor_proto:
                f = descriptor_pb2.FileDescriptorProto()
                f.ParseFromString(b)
                files.append(f)
            if not files or files[0].name != first:
                fail("reflection %s: answer %d starts with %s, want %s" % (
                    ver, i, files[0].name if files else None, first))
            for f in files:
                if f != want.get(f.name):
                    fail("reflection %s: %s differs from protoc's descriptor" % (ver, f.name))
            have = set(f.name for f in files)
            for f in files:
                for d in f.dependency:
                    if d not in have:
                        fail("reflection %s: %s sent without its import %s" % (ver, f.name, d))
        if got[4].error_response.error_code != 5:
            fail("reflection %s: unknown symbol answered %s" % (ver, got[4]))
    # Over gRPC-Web: one request, one answer.
    ra = load_reflection(args.stubs, "v1alpha")
    req = ra.ServerReflectionRequest(list_services="").SerializeToString()
    status, h, data = post(args.addr, "/grpc.reflection.v1alpha.ServerReflection/"
                           "ServerReflectionInfo", "application/grpc-web+proto", envelope(0, req))
    st, m, body = parse_grpc_web(data)
    if st != 0 or not ra.ServerReflectionResponse.FromString(body).list_services_response.service:
        fail("reflection over gRPC-Web: %d %s" % (st, m))
    print("reflect: v1 and v1alpha answer %d requests per stream; descriptors equal protoc's" %
          len(reqs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--addr")
    ap.add_argument("--out")
    ap.add_argument("--calls")
    ap.add_argument("--node")
    ap.add_argument("--type")
    ap.add_argument("--time")
    ap.add_argument("--function")
    ap.add_argument("--total", type=int)
    ap.add_argument("--start", type=int)
    ap.add_argument("--end", type=int)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--max", type=int)
    ap.add_argument("--read")
    ap.add_argument("--write")
    ap.add_argument("--desc")
    args = ap.parse_args()
    load_stubs(args.stubs)
    {"calls": make_calls, "compare": compare, "grafana": grafana, "badinput": badinput,
     "auth": auth, "reflect": reflect}[args.cmd](args)


if __name__ == "__main__":
    main()
