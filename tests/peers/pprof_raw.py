#!/usr/bin/env python3
"""Independent folding of `go tool pprof -raw` output, for Kiln's tests.

    pprof_raw.py folded RAWFILE [SAMPLE_TYPE]   folded stacks, sorted
    pprof_raw.py totals RAWFILE                 "type total" per sample type

Reads the text that go tool pprof prints (not the protobuf), so the result
depends on nothing in Kiln. Frames follow pprof's order: a sample's
locations are leaf first, a location's lines innermost first; folded stacks
are root first. A location without lines is named by its address.
"""
import re
import sys


def parse(path):
    types, samples, locs = [], [], {}
    section = None
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    cur_loc = None
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("Samples:"):
            section = "types"
            continue
        if line.startswith("Locations"):
            section = "locations"
            continue
        if line.startswith("Mappings"):
            section = "mappings"
            continue
        if section == "types":
            types = [t.split("/")[0] for t in line.split()]
            section = "samples"
            continue
        if section == "samples":
            m = re.match(r"^\s*(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$", line)
            if m:
                values = [int(v) for v in m.group(1).split()]
                ids = [int(x) for x in m.group(2).split()]
                samples.append((values, ids))
            continue
        if section == "locations":
            m = re.match(r"^\s*(\d+): (0x[0-9a-f]+)(?: M=\d+)?(.*)$", line)
            if m:
                cur_loc = int(m.group(1))
                locs[cur_loc] = {"addr": m.group(2), "frames": []}
                rest = m.group(3).strip()
                if rest:
                    locs[cur_loc]["frames"].append(frame_name(rest))
                continue
            if cur_loc is not None and line.startswith(" ") and line.strip():
                locs[cur_loc]["frames"].append(frame_name(line.strip()))
    return types, samples, locs


def frame_name(text):
    # "name file:line s=N" (name may contain spaces; file:line and s= are last).
    parts = text.split(" ")
    if parts and parts[-1].startswith("s="):
        parts = parts[:-1]
    if len(parts) > 1 and re.search(r":\d+$", parts[-1]):
        parts = parts[:-1]
    return " ".join(parts)


def folded(path, sample_type=None):
    types, samples, locs = parse(path)
    ti = len(types) - 1 if sample_type is None else types.index(sample_type)
    sums = {}
    for values, ids in samples:
        frames = []
        for lid in reversed(ids):
            loc = locs[lid]
            names = loc["frames"] or [loc["addr"]]
            frames.extend(reversed(names))
        key = ";".join(frames)
        sums[key] = sums.get(key, 0) + values[ti]
    return sorted((k, v) for k, v in sums.items() if v != 0)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "folded":
        st = sys.argv[3] if len(sys.argv) > 3 else None
        for k, v in folded(path, st):
            print(f"{k} {v}")
    elif cmd == "totals":
        types, samples, _ = parse(path)
        for i, t in enumerate(types):
            print(t, sum(v[i] for v, _ in samples))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
