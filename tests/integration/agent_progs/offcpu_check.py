#!/usr/bin/env python3
"""Checks kiln-agent's off-CPU profiles of offcpu_block against the blocked
time the program measured itself.

    offcpu_check.py --program OUTPUT --probability P [--slack F] FILE...

OUTPUT: what offcpu_block printed ("PLACE NANOSECONDS CALLS" per line).
FILE: the agent's off-CPU pprof files of that process (one per window).

The files are read with `go tool pprof -symbolize=local -raw` (so this
also checks that pprof reads them): the sample type must be
wallclock/nanoseconds, and each sample's value is attributed to a place
when the place's function is in its stack. For each place, the time
attributed must be P times the program's own measure within --slack
(default 0.05): at P = 1 every wait is timed, so the sums must agree.
Exit status 1 when a check fails."""
import argparse
import re
import subprocess
import sys


def parse_raw(text):
    """(sample type line, [(value, [location ids])], {id: [function names]})"""
    lines = text.splitlines()
    samples, funcs, sample_type = [], {}, None
    section = None
    for i, line in enumerate(lines):
        if line.startswith("Samples:"):
            section = "samples"
            sample_type = lines[i + 1].strip() if i + 1 < len(lines) else None
            continue
        if line.startswith("Locations"):
            section = "locations"
            continue
        if line.startswith("Mappings"):
            section = None
            continue
        if section == "samples":
            m = re.match(r"^\s*(\d+):((?:\s+\d+)*)\s*$", line)
            if m:
                samples.append((int(m.group(1)), [int(x) for x in m.group(2).split()]))
        elif section == "locations":
            m = re.match(r"^\s*(\d+):\s+0x[0-9a-f]+\s+M=\d+\s*(.*)$", line)
            if m:
                loc = int(m.group(1))
                funcs[loc] = [m.group(2).split()[0]] if m.group(2).strip() else []
                continue
            # an inlined function: a continuation line of the last location
            m = re.match(r"^\s+(\S+)\s+\S+:\d+\s+s=\d+\s*$", line)
            if m and funcs:
                funcs[max(funcs)].append(m.group(1))
    return sample_type, samples, funcs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    ap.add_argument("--probability", type=float, default=1.0)
    ap.add_argument("--slack", type=float, default=0.05)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    truth = {}
    for line in open(args.program):
        parts = line.split()
        if len(parts) == 3:
            truth[parts[0]] = int(parts[1])
    if len(truth) != 3:
        sys.exit(f"offcpu_check: the program printed {truth}, expected three places")

    r = subprocess.run(["go", "tool", "pprof", "-symbolize=local", "-raw"] + args.files,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"offcpu_check: go tool pprof -raw failed: {r.stderr}")
    sample_type, samples, funcs = parse_raw(r.stdout)
    ok = True
    if sample_type != "wallclock/nanoseconds":
        print(f"FAIL: sample type {sample_type!r}, expected wallclock/nanoseconds")
        ok = False
    if "PeriodType: samples count" not in r.stdout:
        print("FAIL: period type is not samples/count")
        ok = False
    got = {p: 0 for p in truth}
    total = 0
    for value, locs in samples:
        total += value
        names = {f for loc in locs for f in funcs.get(loc, [])}
        for p in truth:
            if p in names:
                got[p] += value
    print(f"{'place':22}{'program ms':>12}{'agent ms':>12}{'ratio':>8}")
    for p, want in truth.items():
        ratio = got[p] / (want * args.probability) if want else 0.0
        print(f"{p:22}{want / 1e6:12.1f}{got[p] / 1e6:12.1f}{ratio:8.3f}")
        if abs(ratio - 1) > args.slack:
            print(f"FAIL: {p}: the agent has {ratio:.3f} of the time the program measured "
                  f"(x {args.probability}), outside 1 +- {args.slack}")
            ok = False
    print(f"{len(samples)} samples, {total / 1e6:.1f} ms in all")
    sys.exit(0 if ok else 1)


main()
