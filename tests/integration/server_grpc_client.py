#!/usr/bin/python3
"""A third-party gRPC client for the kiln server tests.

Runs with Debian's python3 and python3-grpcio; the message classes are
generated at test time by grpc_tools.protoc from the project's proto/ files
into the directory given as --stubs. Each subcommand checks real behaviour
and exits non-zero with a message on the first mismatch.

  write   --addr A --name N --label k=v ... FILE...   WriteRaw, one series
  check   --addr A --name N --label k=v --profiles FILE... --out DIR
          every QueryService RPC against the ingested profiles
  expect-error --addr A --code CODE --what WHAT        robustness cases
"""
import argparse
import gzip
import os
import sys
import time


def load_stubs(stubs):
    sys.path.insert(0, stubs)
    global ps_pb2, ps_grpc, q_pb2, q_grpc, prof_pb2, grpc, ts_pb2, dur_pb2
    import grpc  # noqa: F401
    from parca.profilestore.v1alpha1 import profilestore_pb2 as ps_pb2
    from parca.profilestore.v1alpha1 import profilestore_pb2_grpc as ps_grpc
    from parca.query.v1alpha1 import query_pb2 as q_pb2
    from parca.query.v1alpha1 import query_pb2_grpc as q_grpc
    from pprof import profile_pb2 as prof_pb2
    from google.protobuf import timestamp_pb2 as ts_pb2
    from google.protobuf import duration_pb2 as dur_pb2


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def channel(addr, max_msg=None):
    opts = [("grpc.max_receive_message_length", 256 << 20),
            ("grpc.max_send_message_length", 256 << 20)]
    return grpc.insecure_channel(addr, options=opts)


def parse_profile(data):
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = prof_pb2.Profile()
    p.ParseFromString(data)
    return p


def sums(p):
    """Sum of values per sample type index."""
    out = [0] * len(p.sample_type)
    for s in p.sample:
        for i, v in enumerate(s.value):
            out[i] += v
    return out


def type_key(name, p, i):
    st = p.sample_type[i]
    s = p.string_table
    key = "%s:%s:%s:%s:%s" % (name, s[st.type], s[st.unit],
                              s[p.period_type.type], s[p.period_type.unit])
    if s[p.period_type.type] == "cpu":
        key += ":delta"
    return key


def labelset(name, labels):
    ls = ps_pb2.LabelSet()
    ls.labels.add(name="__name__", value=name)
    for k, v in labels:
        ls.labels.add(name=k, value=v)
    return ls


def write(addr, name, labels, files, timeout=30):
    stub = ps_grpc.ProfileStoreServiceStub(channel(addr))
    req = ps_pb2.WriteRawRequest()
    series = req.series.add()
    series.labels.CopyFrom(labelset(name, labels))
    for f in files:
        series.samples.add(raw_profile=open(f, "rb").read())
    stub.WriteRaw(req, timeout=timeout)


def ts(ms):
    t = ts_pb2.Timestamp()
    t.seconds = ms // 1000
    t.nanos = (ms % 1000) * 1000000
    return t


def flame_sum_self(node):
    """Sum over the tree of (cum - sum of children's cum): the leaf values."""
    total = 0
    kids = 0
    for c in node.children:
        kids += c.cumulative
        total += flame_sum_self(c)
    return total + node.cumulative - kids


def labels_values(q, args, expected, labels, start, end):
    """Labels and Values honour every match[] entry (a union, like
    Prometheus' match[]) and the time range."""
    other = [tuple(l.split("=", 1)) for l in args.other]
    cpu = sorted(k for k in expected if ":samples:count:cpu:nanoseconds" in k)
    t = cpu[0] if cpu else sorted(expected)[0]
    mine = t + "{" + ",".join('%s="%s"' % kv for kv in labels) + "}"

    def names(match, s=start, e=end):
        return list(q.Labels(q_pb2.LabelsRequest(match=match, start=ts(s), end=ts(e)),
                             timeout=30).label_names)

    def values(name, match, s=start, e=end):
        return list(q.Values(q_pb2.ValuesRequest(label_name=name, match=match, start=ts(s),
                                                 end=ts(e)), timeout=30).label_values)

    got = names([t])
    for k, _ in labels + other:
        if k not in got:
            fail("Labels(%s): %s not in %s" % (t, k, got))
    if got != sorted(set(got)):
        fail("Labels: not sorted and unique: %s" % got)
    for k, v in labels:
        got = values(k, [mine])
        if got != [v]:
            fail("Values(%s, %s) = %s, want [%s]" % (k, mine, got, v))
    if other:
        theirs = t + "{" + ",".join('%s="%s"' % kv for kv in other) + "}"
        k = labels[-1][0]
        both = sorted({dict(labels)[k], dict(other)[k]})
        got = values(k, [mine, theirs])
        if got != both:
            fail("Values(%s) over two matchers = %s, want the union %s" % (k, got, both))
        got = values(k, [t])
        if got != both:
            fail("Values(%s, %s) = %s, want %s" % (k, t, got, both))
        # A matcher on another label narrows the names too.
        extra = [n for n in names([t + '{%s="%s"}' % other[0]]) if n != "__name__"]
        if sorted(extra) != sorted(set(k for k, _ in other)):
            fail("Labels(%s) = %s, want %s" % (other[0], extra, [k for k, _ in other]))
    # No match entry at all: every series.
    if not set(k for k, _ in labels + other) <= set(names([])):
        fail("Labels without match lacks %s: %s" % (labels + other, names([])))
    k = labels[-1][0]
    if dict(labels)[k] not in values(k, []):
        fail("Values(%s) without match lacks %s" % (k, dict(labels)[k]))
    # Nothing matches: empty, not an error.
    if names([t + '{%s="no-such-value"}' % labels[0][0]]) != []:
        fail("Labels with a matcher that selects nothing is not empty")
    if values(labels[0][0], ["no_such:a:b:c:d"]) != []:
        fail("Values for an unknown profile type is not empty")
    # The time range: an hour before the first profile holds nothing.
    if names([t], start - 7200000, start - 3600000) != []:
        fail("Labels over an empty time range is not empty")
    if values(labels[0][0], [mine], start - 7200000, start - 3600000) != []:
        fail("Values over an empty time range is not empty")
    # A malformed matcher anywhere is INVALID_ARGUMENT naming the entry.
    try:
        names([t, t + "{job=}"])
        fail("Labels accepted a malformed second matcher")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT or "match[1]" not in e.details():
            fail("Labels malformed match[1]: %s %s" % (e.code(), e.details()))
    print("Labels/Values ok (matcher union, time range, errors)")


def check(args):
    ch = channel(args.addr)
    q = q_grpc.QueryServiceStub(ch)
    profiles = [parse_profile(open(f, "rb").read()) for f in args.profiles]
    # Expected totals per profile type, and each profile's time.
    expected = {}
    npoints_want = {}
    times = []
    for p in profiles:
        times.append(p.time_nanos // 1000000)
        for i, v in enumerate(sums(p)):
            k = type_key(args.name, p, i)
            expected[k] = expected.get(k, 0) + v
            npoints_want[k] = npoints_want.get(k, 0) + 1
    labels = [tuple(l.split("=", 1)) for l in args.label]
    sel = "{" + ",".join('%s="%s"' % kv for kv in labels) + "}"

    # ProfileTypes: every ingested type is listed, with Parca's fields.
    r = q.ProfileTypes(q_pb2.ProfileTypesRequest(), timeout=30)
    got = set()
    for t in r.types:
        k = "%s:%s:%s:%s:%s" % (t.name, t.sample_type, t.sample_unit, t.period_type,
                                t.period_unit)
        if t.delta:
            k += ":delta"
        got.add(k)
    for k in expected:
        if k not in got:
            fail("ProfileTypes: %s missing from %s" % (k, sorted(got)))
    print("ProfileTypes ok: %d types" % len(r.types))

    start, end = min(times) - 1000, max(times) + 1000
    labels_values(q, args, expected, labels, start, end)

    for k, want in sorted(expected.items()):
        query = k + sel
        # QueryRange: the per-profile totals add up to the ingested sum.
        r = q.QueryRange(q_pb2.QueryRangeRequest(query=query, start=ts(start), end=ts(end)),
                         timeout=30)
        got = sum(s.value for series in r.series for s in series.samples)
        if got != want:
            fail("QueryRange %s: sum %d, ingested %d" % (k, got, want))
        npoints = sum(len(series.samples) for series in r.series)
        if npoints != npoints_want[k]:
            fail("QueryRange %s: %d points for %d profiles" % (k, npoints, npoints_want[k]))

        # Every mode with every report type. SINGLE: each profile alone, at its
        # time; MERGE: everything; DIFF: a = the first profile, b = the merge.
        merge = q_pb2.MergeProfile(query=query, start=ts(start), end=ts(end))
        selections = []
        for i, (p, t) in enumerate(zip(profiles, times)):
            idx = [j for j in range(len(p.sample_type)) if type_key(args.name, p, j) == k]
            if idx:
                selections.append(("single%d" % i, q_pb2.QueryRequest.MODE_SINGLE_UNSPECIFIED,
                                   dict(single=q_pb2.SingleProfile(query=query, time=ts(t))),
                                   sums(p)[idx[0]], 0))
        selections.append(("merge", q_pb2.QueryRequest.MODE_MERGE, dict(merge=merge), want, 0))
        first = selections[0]
        if len(selections) > 2:
            a_sel = q_pb2.ProfileDiffSelection(
                mode=q_pb2.ProfileDiffSelection.MODE_SINGLE_UNSPECIFIED,
                single=first[2]["single"])
            b_sel = q_pb2.ProfileDiffSelection(mode=q_pb2.ProfileDiffSelection.MODE_MERGE,
                                               merge=merge)
            selections.append(("diff", q_pb2.QueryRequest.MODE_DIFF,
                               dict(diff=q_pb2.DiffProfile(a=a_sel, b=b_sel)), want, first[3]))
        safe = k.replace(":", "_")
        for label, mode, opts, b_total, a_total in selections:
            what = "%s %s" % (k, label)
            # PPROF: a gzipped profile whose values sum exactly (b - a for DIFF).
            r = q.Query(q_pb2.QueryRequest(mode=mode, report_type=q_pb2.QueryRequest.REPORT_TYPE_PPROF,
                                           **opts), timeout=30)
            if r.WhichOneof("report") != "pprof" or r.pprof[:2] != b"\x1f\x8b":
                fail("%s PPROF: not a gzipped pprof report" % what)
            mp = parse_profile(r.pprof)
            if sums(mp) != [b_total - a_total]:
                fail("%s PPROF: sums %s, ingested %d" % (what, sums(mp), b_total - a_total))
            if r.total != b_total:
                fail("%s PPROF: total %d, want %d" % (what, r.total, b_total))
            name = "%s.%s.pb.gz" % (safe, label)
            with open(os.path.join(args.out, name), "wb") as f:
                f.write(r.pprof)
            with open(os.path.join(args.out, "manifest.txt"), "a") as f:
                f.write("%s %d\n" % (name, b_total - a_total))
            if label == "merge":  # the name server_grpc.sh reads with go tool pprof -top
                with open(os.path.join(args.out, safe + ".pb.gz"), "wb") as f:
                    f.write(r.pprof)
            # FLAMEGRAPH_TABLE: root cumulative, leaf sum, root diff.
            r = q.Query(q_pb2.QueryRequest(
                mode=mode, report_type=q_pb2.QueryRequest.REPORT_TYPE_FLAMEGRAPH_TABLE, **opts),
                timeout=30)
            fg = r.flamegraph
            if r.WhichOneof("report") != "flamegraph":
                fail("%s FLAMEGRAPH_TABLE: report is %s" % (what, r.WhichOneof("report")))
            if fg.root.cumulative != b_total or r.total != b_total or r.filtered != 0:
                fail("%s FLAMEGRAPH: root %d total %d filtered %d, want %d" %
                     (what, fg.root.cumulative, r.total, r.filtered, b_total))
            if flame_sum_self(fg.root) != b_total:
                fail("%s FLAMEGRAPH: self values sum to %d" % (what, flame_sum_self(fg.root)))
            if mode == q_pb2.QueryRequest.MODE_DIFF and fg.root.diff != b_total - a_total:
                fail("%s FLAMEGRAPH: root diff %d, want %d" % (what, fg.root.diff, b_total - a_total))
            # TOP: flat values add up; DIFF rows carry the change.
            r = q.Query(q_pb2.QueryRequest(mode=mode, report_type=q_pb2.QueryRequest.REPORT_TYPE_TOP,
                                           **opts), timeout=30)
            if r.WhichOneof("report") != "top":
                fail("%s TOP: report is %s" % (what, r.WhichOneof("report")))
            flats = sum(n.flat for n in r.top.list)
            if flats != b_total or r.total != b_total or r.top.reported != len(r.top.list):
                fail("%s TOP: flats sum %d, total %d, want %d" % (what, flats, r.total, b_total))
            if mode == q_pb2.QueryRequest.MODE_DIFF and not any(n.diff for n in r.top.list) \
                    and b_total != a_total:
                fail("%s TOP: no row carries a diff" % what)
        print("%s: QueryRange and %s x PPROF/FLAMEGRAPH_TABLE/TOP ok (total %d)" %
              (k, "/".join(x[0] for x in selections), want))

    # A filter keeps only stacks through a function.
    cpu = [k for k in expected if k.endswith(":cpu:nanoseconds:delta") and ":cpu:nanoseconds:cpu" in k]
    if cpu:
        k = cpu[0]
        merge = q_pb2.MergeProfile(query=k + sel, start=ts(start), end=ts(end))
        r = q.Query(q_pb2.QueryRequest(mode=q_pb2.QueryRequest.MODE_MERGE, merge=merge,
                                       report_type=q_pb2.QueryRequest.REPORT_TYPE_TOP,
                                       filter_query="spinAlpha"), timeout=30)
        if not (0 < r.total - r.filtered < r.total):
            fail("filter: total %d filtered-out %d" % (r.total, r.filtered))
        print("filter_query ok: %d of %d kept" % (r.total - r.filtered, r.total))
    print("check: all QueryService RPCs ok")


def expect_error(args):
    ch = channel(args.addr)
    ps = ps_grpc.ProfileStoreServiceStub(ch)
    q = q_grpc.QueryServiceStub(ch)
    good = open(args.profile, "rb").read() if args.profile else b""
    what = args.what

    def raw(labels, data):
        req = ps_pb2.WriteRawRequest()
        s = req.series.add()
        for k, v in labels:
            s.labels.labels.add(name=k, value=v)
        s.samples.add(raw_profile=data)
        return req

    calls = {
        "garbage-pprof": lambda: ps.WriteRaw(raw([("__name__", "t")], b"\x0a\xff\xff\xff garbage"), timeout=30),
        "gzip-garbage": lambda: ps.WriteRaw(raw([("__name__", "t")], b"\x1f\x8b\x08\x00garbage-not-deflate"), timeout=30),
        "gzip-bomb": lambda: ps.WriteRaw(raw([("__name__", "t")], open(args.file, "rb").read()), timeout=60),
        "oversized": lambda: ps.WriteRaw(raw([("__name__", "t")], b"\0" * args.size), timeout=60),
        "bad-label-name": lambda: ps.WriteRaw(raw([("__name__", "t"), ("bad-name", "x")], good), timeout=30),
        "label-starts-digit": lambda: ps.WriteRaw(raw([("__name__", "t"), ("1abc", "x")], good), timeout=30),
        "too-many-labels": lambda: ps.WriteRaw(raw([("__name__", "t")] + [("l%d" % i, "v") for i in range(100)], good), timeout=30),
        "duplicate-label": lambda: ps.WriteRaw(raw([("__name__", "t"), ("a", "1"), ("a", "2")], good), timeout=30),
        "missing-name": lambda: ps.WriteRaw(raw([("job", "x")], good), timeout=30),
        "unknown-profile-type": lambda: q.Query(q_pb2.QueryRequest(
            mode=q_pb2.QueryRequest.MODE_MERGE,
            merge=q_pb2.MergeProfile(query="nope:a:b:c:d", start=ts(0), end=ts(int(time.time() * 1000)))), timeout=30),
        "bad-query": lambda: q.Query(q_pb2.QueryRequest(
            mode=q_pb2.QueryRequest.MODE_MERGE,
            merge=q_pb2.MergeProfile(query='x:a:b:c:d{comm=~"("}', start=ts(0), end=ts(1))), timeout=30),
        "query-range-bad": lambda: q.QueryRange(q_pb2.QueryRangeRequest(query="{{{"), timeout=30),
        "single-without-time": lambda: q.Query(q_pb2.QueryRequest(
            mode=q_pb2.QueryRequest.MODE_SINGLE_UNSPECIFIED,
            single=q_pb2.SingleProfile(query="x:a:b:c:d")), timeout=30),
        "unimplemented-report": lambda: q.Query(q_pb2.QueryRequest(
            mode=q_pb2.QueryRequest.MODE_MERGE, report_type=q_pb2.QueryRequest.REPORT_TYPE_CALLGRAPH,
            merge=q_pb2.MergeProfile(query=args.query or "x:a:b:c:d", start=ts(0), end=ts(int(time.time() * 1000)))), timeout=30),
        "series-unimplemented": lambda: q.Series(q_pb2.SeriesRequest(), timeout=30),
    }
    try:
        calls[what]()
    except grpc.RpcError as e:
        code = e.code().name
        if code != args.code:
            fail("%s: got %s (%s), want %s" % (what, code, e.details(), args.code))
        if not e.details():
            fail("%s: %s without a message" % (what, code))
        if args.contains and args.contains not in e.details():
            fail("%s: message %r lacks %r" % (what, e.details(), args.contains))
        print("%s: %s: %s" % (what, code, e.details()))
        return
    fail("%s: succeeded, want %s" % (what, args.code))


def hammer(args):
    """WriteRaw in a loop, one series per write (label seq=ROUND-I), appending
    each acknowledged seq to --out; stops at the first error (the server was
    killed)."""
    ps_stub = ps_grpc.ProfileStoreServiceStub(channel(args.addr))
    data = open(args.profile, "rb").read()
    with open(args.out, "a") as acked:
        i = 0
        while True:
            seq = "%s-%d" % (args.what, i)
            req = ps_pb2.WriteRawRequest()
            s = req.series.add()
            s.labels.CopyFrom(labelset(args.name, [("round", args.what), ("seq", seq)]))
            s.samples.add(raw_profile=data)
            try:
                ps_stub.WriteRaw(req, timeout=10)
            except grpc.RpcError as e:
                print("hammer stopped after %d writes: %s: %s" % (i, e.code().name, e.details()))
                return
            acked.write(seq + "\n")
            acked.flush()
            os.fsync(acked.fileno())
            i += 1


def verify(args):
    """Every acknowledged seq is queryable, with exactly one profile's value
    (nothing partial, nothing doubled)."""
    q = q_grpc.QueryServiceStub(channel(args.addr))
    p = parse_profile(open(args.profile, "rb").read())
    acked = [l.strip() for l in open(args.out) if l.strip()]
    if not acked:
        print("verify: nothing acknowledged yet")
        return
    names = [p.string_table[st.type] for st in p.sample_type]
    i = names.index("samples") if "samples" in names else 0
    k = type_key(args.name, p, i)
    want = sums(p)[i]
    r = q.QueryRange(q_pb2.QueryRangeRequest(query=k, start=ts(0), end=ts(int(time.time() * 1000) + 60000)),
                     timeout=60)
    per_seq = {}
    for series in r.series:
        seq = [l.value for l in series.labelset.labels if l.name == "seq"]
        if not seq:
            fail("series without seq label")
        per_seq[seq[0]] = per_seq.get(seq[0], 0) + sum(x.value for x in series.samples)
    missing = [a for a in acked if a not in per_seq]
    if missing:
        fail("%d acknowledged writes missing after restart, e.g. %s" % (len(missing), missing[:5]))
    bad = {s: v for s, v in per_seq.items() if v != want}
    if bad:
        fail("partial or duplicated writes: %s (want %d each)" % (list(bad.items())[:5], want))
    # The merge agrees with the per-series totals.
    r = q.Query(q_pb2.QueryRequest(mode=q_pb2.QueryRequest.MODE_MERGE,
                                   merge=q_pb2.MergeProfile(query=k, start=ts(0), end=ts(int(time.time() * 1000) + 60000)),
                                   report_type=q_pb2.QueryRequest.REPORT_TYPE_PPROF), timeout=60)
    if r.total != want * len(per_seq):
        fail("merge total %d, want %d x %d" % (r.total, want, len(per_seq)))
    print("verify: %d acknowledged, %d stored, all exact" % (len(acked), len(per_seq)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--name", default="kiln_test")
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--other", action="append", default=[])
    ap.add_argument("--profiles", nargs="*", default=[])
    ap.add_argument("--out", default=".")
    ap.add_argument("--code")
    ap.add_argument("--what")
    ap.add_argument("--contains")
    ap.add_argument("--profile")
    ap.add_argument("--file")
    ap.add_argument("--query")
    ap.add_argument("--size", type=int, default=0)
    args = ap.parse_args()
    load_stubs(args.stubs)
    if args.cmd == "write":
        write(args.addr, args.name, [tuple(l.split("=", 1)) for l in args.label], args.profiles)
    elif args.cmd == "check":
        check(args)
    elif args.cmd == "hammer":
        hammer(args)
    elif args.cmd == "verify":
        verify(args)
    elif args.cmd == "expect-error":
        expect_error(args)
    else:
        fail("unknown command " + args.cmd)


if __name__ == "__main__":
    main()
