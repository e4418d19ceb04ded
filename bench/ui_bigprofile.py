#!/usr/bin/python3
"""Writes a synthetic pprof CPU profile whose call tree has about N nodes,
for bench-ui.sh: a 6-frame spine (main → ...) and under it a full B-ary tree
of depth D (siblings have distinct function names, so every path is a
distinct tree node); one sample per leaf with a pseudo-random weight.

    ui_bigprofile.py --stubs DIR --out FILE --branch B --depth D
"""
import argparse
import gzip
import random
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--branch", type=int, required=True)
    ap.add_argument("--depth", type=int, required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.stubs)
    from pprof import profile_pb2

    p = profile_pb2.Profile()
    strings = [""]
    index = {"": 0}

    def s(x):
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    p.sample_type.add(type=s("samples"), unit=s("count"))
    p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
    p.period_type.type = s("cpu")
    p.period_type.unit = s("nanoseconds")
    p.period = 10000000
    p.time_nanos = time.time_ns()
    p.duration_nanos = 10 * 10**9
    m = p.mapping.add(id=1, memory_start=0x400000, memory_limit=0x800000,
                      filename=s("/usr/bin/benchapp"), has_functions=True)
    next_id = [1]

    def loc(name, fname, line):
        i = next_id[0]
        next_id[0] += 1
        f = p.function.add(id=i, name=s(name), system_name=s(name), filename=s(fname))
        l = p.location.add(id=i, mapping_id=m.id, address=0x400000 + 16 * i)
        l.line.add(function_id=f.id, line=line)
        return i

    spine = [loc(n, "app/main.c", 10 + k) for k, n in enumerate(
        ["_start", "__libc_start_main", "main", "app_run", "event_loop", "dispatch"])]
    levels = [[loc("handler_d%d_%s" % (d, k), "app/handlers_%d.c" % d, 100 + k)
               for k in range(a.branch)] for d in range(a.depth)]
    rnd = random.Random(42)
    spine_rev = list(reversed(spine))
    # Every leaf path, iteratively: digits of the leaf index in base B.
    leaves = a.branch ** a.depth
    for leaf in range(leaves):
        ids = []
        x = leaf
        for d in range(a.depth - 1, -1, -1):
            ids.append(levels[d][x % a.branch])
            x //= a.branch
        # pprof stacks are leaf first: ids is already leaf → depth 0.
        w = 1 + int(rnd.paretovariate(1.2))
        p.sample.add(location_id=ids + spine_rev, value=[w, w * p.period])
    p.string_table.extend(strings)
    with open(a.out, "wb") as fh:
        fh.write(gzip.compress(p.SerializeToString(), 6))
    nodes = 1 + len(spine) + sum(a.branch ** (d + 1) for d in range(a.depth))
    print(nodes)


if __name__ == "__main__":
    main()
