#!/usr/bin/env python3
"""Compares what two pprof profiles say, for the agent push tests.

  pprof_compare.py --stubs DIR profiles A B
      A and B (gzipped or not) hold the same mappings (start, limit,
      offset, file, build ID) and the same stacks (each frame's mapping
      file, build ID, address and function names) with the same values.
  pprof_compare.py --stubs DIR labels URL QUERY FILE...
      The series the server holds for QUERY have the labels that the
      agent's local files (series labels on every sample) carry, except
      the per-sample thread_id and thread_name: the same names, the same
      values.
Exit 0 when equal, 1 with the differences on stdout otherwise.
"""
import argparse, collections, gzip, json, sys, urllib.parse, urllib.request


def load(stubs, path):
    sys.path.insert(0, stubs)
    from pprof import profile_pb2
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = profile_pb2.Profile()
    p.ParseFromString(data)
    return p


def shape(p):
    s = p.string_table
    maps = {m.id: m for m in p.mapping}
    funcs = {f.id: f for f in p.function}
    locs = {l.id: l for l in p.location}
    mapping_set = {(m.memory_start, m.memory_limit, m.file_offset, s[m.filename], s[m.build_id])
                   for m in p.mapping}
    stacks = collections.Counter()
    for smp in p.sample:
        key = []
        for lid in smp.location_id:
            l = locs[lid]
            m = maps.get(l.mapping_id)
            key.append((s[m.filename] if m else "", s[m.build_id] if m else "", l.address,
                        tuple(s[funcs[ln.function_id].name] for ln in l.line)))
        stacks[tuple(key)] += smp.value[0]
    return mapping_set, stacks


def profiles(args):
    ma, sa = shape(load(args.stubs, args.a))
    mb, sb = shape(load(args.stubs, args.b))
    bad = 0
    if ma != mb:
        bad = 1
        print("mappings only in A:", sorted(ma - mb)[:10])
        print("mappings only in B:", sorted(mb - ma)[:10])
    if sa != sb:
        bad = 1
        for k in list(set(sa) ^ set(sb))[:5] + [k for k in sa if k in sb and sa[k] != sb[k]][:5]:
            print("stack differs: A", sa.get(k), "B", sb.get(k), k[:3])
    if not bad:
        print(f"{len(ma)} mappings and {len(sa)} stacks equal")
    return bad


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def labels(args):
    want = collections.defaultdict(set)
    for f in args.files:
        p = load(args.stubs, f)
        s = p.string_table
        for smp in p.sample:
            for l in smp.label:
                if s[l.key] not in ("thread_id", "thread_name"):
                    want[s[l.key]].add(s[l.str])
    q = urllib.parse.quote(args.query, safe="")
    names = get(f"{args.url}/api/v1/labels?query={q}")["names"]
    got = {n: set(get(f"{args.url}/api/v1/values?label={n}&query={q}")["values"]) for n in names}
    if got != dict(want):
        print("server labels:", got)
        print("local files' labels:", dict(want))
        return 1
    print(f"{len(got)} series labels equal")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stubs", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("profiles")
    a.add_argument("a")
    a.add_argument("b")
    b = sub.add_parser("labels")
    b.add_argument("url")
    b.add_argument("query")
    b.add_argument("files", nargs="+")
    args = ap.parse_args()
    sys.exit(profiles(args) if args.cmd == "profiles" else labels(args))


main()
