#!/usr/bin/python3
"""Parca's newer QueryService fields over gRPC (Debian's python3-grpcio),
each answer compared with the HTTP/JSON API's answer to the same question.

  parca_query_fields_client.py --stubs DIR --addr HOST:PORT --query Q
      --start MS --end MS --sandwich FUNC

The HTTP answers are the reference: query_filters.sh, query_group_by.sh and
the sandwich tests check them against go tool pprof. Exits non-zero with a
message on the first difference.
"""
import argparse
import json
import sys
import urllib.parse
import urllib.request


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def http(addr, path, **params):
    url = "http://%s%s?%s" % (addr, path, urllib.parse.urlencode(params))
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def http_tree(j):
    """Pre-order (depth, name, binary, cum) of the HTTP flame graph JSON,
    the root left out."""
    S, N = j["strings"], j["nodes"]
    return [(N["depth"][i], S[N["name"][i]], S[N["binary"][i]], N["cum"][i])
            for i in range(1, len(N["name"]))]


def grpc_tree(fg):
    out = []

    def walk(node, depth):
        m = node.meta
        out.append((depth, m.function.name, m.mapping.file if m.HasField("mapping") else "",
                    node.cumulative))
        for ch in node.children:
            walk(ch, depth + 1)
    for ch in fg.root.children:
        walk(ch, 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("stubs", "addr", "query", "start", "end", "sandwich"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--calls-out", help="write the answered requests as proto JSON "
                    "(server_grpcweb_client.py compare's calls) to this file")
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    from google.protobuf import duration_pb2, json_format, timestamp_pb2
    from parca.query.v1alpha1 import query_pb2 as pb
    from parca.query.v1alpha1 import query_pb2_grpc as pb_grpc

    q = pb_grpc.QueryServiceStub(grpc.insecure_channel(args.addr))
    start, end = int(args.start), int(args.end)

    def ts(ms):
        return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1000000)

    merge = pb.MergeProfile(query=args.query, start=ts(start), end=ts(end))
    hq = dict(query=args.query, start=start, end=end)
    checked = []
    calls = []

    def keep(method, req):
        calls.append({"method": method, "request": json_format.MessageToDict(req)})

    # --- QueryRange sum_by ---------------------------------------------------------
    step = 60000
    for by in (["comm"], ["comm", "pid"]):
        req = pb.QueryRangeRequest(query=args.query, start=ts(start), end=ts(end),
                                   step=duration_pb2.Duration(seconds=step // 1000), sum_by=by)
        keep("QueryRange", req)
        g = q.QueryRange(req)
        h = http(args.addr, "/api/v1/query_range", sum_by=",".join(by), step=step, **hq)["series"]
        got = [({l.name: l.value for l in s.labelset.labels},
                [[p.timestamp.seconds * 1000 + p.timestamp.nanos // 1000000, p.value]
                 for p in s.samples]) for s in g.series]
        want = [(s["labels"], s["points"]) for s in h]
        if got != want:
            fail("sum_by %s: gRPC %s != HTTP %s" % (by, got, want))
        if not got or any(set(lab) != set(by) for lab, _ in got):
            fail("sum_by %s: label sets %s" % (by, [lab for lab, _ in got]))
        checked.append("sum_by=%s (%d series)" % (",".join(by), len(got)))

    # --- Query: group_by, filters, sandwich vs the HTTP parameters -----------------
    FG = pb.QueryRequest.REPORT_TYPE_FLAMEGRAPH_UNSPECIFIED
    TOP = pb.QueryRequest.REPORT_TYPE_TOP

    def crit(**cond):
        return pb.FilterCriteria(function_name=pb.StringCondition(**cond))

    def stack(**cond):
        return pb.Filter(stack_filter=pb.StackFilter(criteria=crit(**cond)))

    def frame(**cond):
        return pb.Filter(frame_filter=pb.FrameFilter(criteria=crit(**cond)))

    fn = args.sandwich
    low = fn.lower()  # Parca's conditions fold ASCII case
    cases = [
        ("group_by labels.comm", dict(group_by=pb.GroupBy(fields=["function_name", "labels.comm"])),
         dict(group_by="comm")),
        ("stack contains", dict(filter=[stack(contains=low)]), dict(focus="(?i)" + low)),
        ("stack not_contains", dict(filter=[stack(not_contains=low)]), dict(ignore="(?i)" + low)),
        ("stack equal", dict(filter=[stack(equal=low)]), dict(focus="(?i)^" + low + "$")),
        ("two negative stack filters",
         dict(filter=[stack(not_contains=low), stack(not_starts_with="runtime.mcall")]),
         dict(ignore="(?i)%s|(?i)^runtime\\.mcall" % low)),
        ("legacy function_name_stack_filter exclude",
         dict(filter=[pb.Filter(stack_filter=pb.StackFilter(
             function_name_stack_filter=pb.FunctionNameStackFilter(function_to_filter=fn,
                                                                   exclude=True)))]),
         dict(ignore="(?i)" + fn)),
        ("frame not_starts_with", dict(filter=[frame(not_starts_with="runtime.")]),
         dict(hide="(?i)^runtime\\.")),
        ("frame contains", dict(filter=[frame(contains="main.")]),
         dict(hide="(?i)^(?!.*main\\.)")),
        ("sandwich callees", dict(sandwich_by_function=fn),
         dict(sandwich=fn, sandwich_side="callees")),
        ("sandwich callers", dict(sandwich_by_function=fn, invert_call_stack=True),
         dict(sandwich=fn, sandwich_side="callers")),
    ]
    for name, fields, params in cases:
        req = pb.QueryRequest(mode=pb.QueryRequest.MODE_MERGE, merge=merge, report_type=FG,
                              **fields)
        keep("Query", req)
        r = q.Query(req)
        h = http(args.addr, "/api/v1/query", report="flamegraph", **params, **hq)
        got, want = grpc_tree(r.flamegraph), http_tree(h)
        if got != want:
            fail("%s: gRPC tree (%d nodes) != HTTP tree (%d nodes)\n%s\n%s" %
                 (name, len(got), len(want), got[:8], want[:8]))
        if not got:
            fail("%s: empty tree; the test data lacks what the case needs" % name)
        if "total" in h and r.total != h["total"]:
            fail("%s: total %d != HTTP %d" % (name, r.total, h["total"]))
        checked.append("%s (%d nodes)" % (name, len(got)))
        if name.startswith("group_by"):
            firsts = {n for d, n, _, _ in got if d == 1}
            if not firsts or any(not f.startswith("comm=") for f in firsts):
                fail("group_by: first level %s" % firsts)

    # TOP with a filter: the same rows as the HTTP top report.
    r = q.Query(pb.QueryRequest(mode=pb.QueryRequest.MODE_MERGE, merge=merge, report_type=TOP,
                                filter=[stack(contains=low)]))
    h = http(args.addr, "/api/v1/query", report="top", focus="(?i)" + low, **hq)
    got = sorted((n.meta.function.name, n.flat, n.cumulative) for n in r.top.list)
    want = sorted((row["name"], row["flat"], row["cum"]) for row in h["rows"])
    if got != want or not got:
        fail("TOP with a stack filter: gRPC %s != HTTP %s" % (got[:5], want[:5]))
    checked.append("TOP with a stack filter (%d rows)" % len(got))

    # --- What kiln cannot answer as asked: INVALID_ARGUMENT naming the field --------
    bad = [
        ("group_by mapping_file", dict(group_by=pb.GroupBy(fields=["mapping_file"])), "mapping_file"),
        ("two group_by labels", dict(group_by=pb.GroupBy(fields=["labels.comm", "labels.pid"])),
         "one label"),
        ("binary criteria", dict(filter=[pb.Filter(stack_filter=pb.StackFilter(
            criteria=pb.FilterCriteria(binary=pb.StringCondition(equal="x"))))]),
         "filter[0].stack_filter.criteria.binary"),
        ("line criteria", dict(filter=[pb.Filter(frame_filter=pb.FrameFilter(
            criteria=pb.FilterCriteria(line_number=pb.NumberCondition(equal=3))))]),
         "filter[0].frame_filter.criteria.line_number"),
        ("binary_frame_filter", dict(filter=[pb.Filter(frame_filter=pb.FrameFilter(
            binary_frame_filter=pb.BinaryFrameFilter(include_binaries=["a"])))]),
         "binary_frame_filter"),
        ("empty condition", dict(filter=[pb.Filter(stack_filter=pb.StackFilter(
            criteria=pb.FilterCriteria(function_name=pb.StringCondition())))]), "no comparison"),
        ("empty filter", dict(filter=[pb.Filter()]), "filter[0]"),
        ("two keeping stack filters", dict(filter=[stack(contains="a"), stack(contains="b")]),
         "filter[1].stack_filter"),
        ("stack and frame filters", dict(filter=[stack(contains="a"), frame(contains="b")]),
         "stack filters and frame filters"),
        ("runtime_filter", dict(runtime_filter=pb.RuntimeFilter(show_python=True)),
         "runtime_filter"),
        ("source_reference", dict(source_reference=pb.SourceReference(build_id="ab")),
         "source_reference"),
        ("invert without sandwich", dict(invert_call_stack=True), "invert_call_stack"),
        ("pprof with group_by", dict(report_type=pb.QueryRequest.REPORT_TYPE_PPROF,
                                     group_by=pb.GroupBy(fields=["labels.comm"])), "PPROF"),
        ("pprof with filter", dict(report_type=pb.QueryRequest.REPORT_TYPE_PPROF,
                                   filter=[stack(contains="a")]), "PPROF"),
        ("regex metacharacters are literal", dict(filter=[stack(contains="(")]), None),
    ]
    for name, fields, want in bad:
        fields.setdefault("report_type", FG)
        try:
            r = q.Query(pb.QueryRequest(mode=pb.QueryRequest.MODE_MERGE, merge=merge, **fields))
            if want is not None:
                fail("%s: answered instead of INVALID_ARGUMENT" % name)
            # "(" is a literal: nothing in a Go profile has one in its name... or
            # only what has; either way an answer, not a regex error.
            continue
        except grpc.RpcError as e:
            if want is None:
                fail("%s: %s %s" % (name, e.code(), e.details()))
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT or want not in e.details():
                fail("%s: %s %r, want INVALID_ARGUMENT naming %r" % (name, e.code(),
                                                                     e.details(), want))
    try:
        q.QueryRange(pb.QueryRangeRequest(query=args.query, start=ts(start), end=ts(end),
                                          sum_by=[""]))
        fail("sum_by [\"\"]: answered")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT or "sum_by[0]" not in e.details():
            fail("sum_by [\"\"]: %s %s" % (e.code(), e.details()))
    checked.append("%d refused requests" % (len(bad) + 1))
    if args.calls_out:
        with open(args.calls_out, "w") as f:
            json.dump(calls, f)
    print("gRPC answers equal HTTP's:", "; ".join(checked))


if __name__ == "__main__":
    main()
