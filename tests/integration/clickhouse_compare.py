#!/usr/bin/env python3
"""Asks two kiln servers the same HTTP queries and checks that the answers
are identical (tests/integration/clickhouse_queries.sh): one on the embedded
store, one on ClickHouse. JSON answers are compared whole; pprof answers by
their decoded samples (stack of function/file/line, values), because the ids
inside a pprof are numbered in whatever order a store hands stacks over.

usage: clickhouse_compare.py STUBS ADDR_A ADDR_B PATH...
"""
import gzip
import json
import sys
import urllib.request

sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2  # noqa: E402


def get(addr, path):
    try:
        with urllib.request.urlopen("http://%s%s" % (addr, path), timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def pprof_canon(data):
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = profile_pb2.Profile()
    p.ParseFromString(data)
    s = p.string_table
    fn = {f.id: (s[f.name], s[f.system_name], s[f.filename], f.start_line) for f in p.function}
    mp = {m.id: (m.memory_start, m.memory_limit, m.file_offset, s[m.filename], s[m.build_id])
          for m in p.mapping}
    loc = {l.id: (mp.get(l.mapping_id), l.address,
                  tuple((fn.get(ln.function_id), ln.line) for ln in l.line))
           for l in p.location}
    samples = {}
    for smp in p.sample:
        key = tuple(loc[i] for i in smp.location_id)
        old = samples.get(key, [0] * len(smp.value))
        samples[key] = [a + b for a, b in zip(old, smp.value)]
    types = [(s[t.type], s[t.unit]) for t in p.sample_type]
    return {"types": types, "period": p.period,
            "period_type": (s[p.period_type.type], s[p.period_type.unit]),
            "samples": sorted(samples.items(), key=repr), "time": p.time_nanos,
            "duration": p.duration_nanos}


def main():
    stubs, a, b = sys.argv[1:4]
    bad = 0
    for path in sys.argv[4:]:
        ca, ta, da = get(a, path)
        cb, tb, db = get(b, path)
        if ca != cb:
            print("DIFF %s: status %d vs %d: %r / %r" % (path, ca, cb, da[:200], db[:200]))
            bad += 1
            continue
        if "json" in ta:
            ja, jb = json.loads(da), json.loads(db)
            same = ja == jb
        elif "report=pprof" in path:
            ja, jb = pprof_canon(da), pprof_canon(db)
            same = ja == jb
        else:
            ja, jb = da, db
            same = da == db
        if not same:
            print("DIFF %s:\n  A: %s\n  B: %s" % (path, repr(ja)[:600], repr(jb)[:600]))
            bad += 1
        else:
            print("same %s (%d bytes)" % (path, len(da)))
    if bad:
        print("%d of %d answers differ" % (bad, len(sys.argv) - 4))
        sys.exit(1)


if __name__ == "__main__":
    main()
