#!/usr/bin/env python3
"""Checks the Python frames of kiln-agent's profiles of one process.

    python_check.py --script FILE --pid PID [--path LEAF:CALLER,...]
                    [--native-between LEAF] [--thread LEAF=main|other]
                    [--min F] PROFILE...

The profiles are the agent's pprof files (gzipped). A sample's Python
frames are its locations under the "[python]" mapping, with the function
name, file and line the agent wrote (nothing is symbolized here). The
expected lines come from the script's own syntax tree: the frame of a
function that calls the next one must be on a line of that call, the
leaf's anywhere in its body.

For each --path LEAF:CALLER,... (callers innermost first): of the samples
that have a Python frame named LEAF, the share whose Python frames start
(leaf first) with LEAF, then the callers, each in FILE at the right line,
must be at least --min (or all but one sample). --native-between LEAF: in those samples a native
frame must sit between LEAF and its caller (a C function called back into
Python). --thread LEAF=main|other: LEAF's samples are on the main thread
(thread_id == pid) or on another one. Exit status 1 when a check fails.
"""
import argparse
import ast
import gzip
import os
import sys

from pbwire import fields, packed



def profile_samples(path):
    """[(frames leaf first, count, labels)]; a frame is ("py", name, file,
    line) or ("native", mapping file)."""
    b = gzip.open(path).read()
    strings, samples, locs, maps, funcs = [], [], {}, {}, {}
    for f, t, v in fields(b):
        if f == 6:
            strings.append(v.decode(errors="replace"))
        elif f == 2:
            ids, vals, labels = [], [], []
            for g, gt, gv in fields(v):
                if g == 1:
                    ids += packed(gt, gv)
                elif g == 2:
                    vals += packed(gt, gv)
                elif g == 3:
                    d = {h: hv for h, ht, hv in fields(gv) if ht == 0}
                    labels.append((d.get(1, 0), d.get(2, 0), d.get(3, 0)))
            samples.append((ids, vals[0] if vals else 1, labels))
        elif f == 4:
            d, lines = {}, []
            for g, gt, gv in fields(v):
                if g == 4:
                    ld = {h: hv for h, ht, hv in fields(gv) if ht == 0}
                    lines.append((ld.get(1, 0), ld.get(2, 0)))
                elif gt == 0:
                    d[g] = gv
            locs[d.get(1)] = (d.get(2, 0), lines)
        elif f == 3:
            d = {g: gv for g, gt, gv in fields(v) if gt == 0}
            maps[d.get(1)] = d.get(5, 0)
        elif f == 5:
            d = {g: gv for g, gt, gv in fields(v) if gt == 0}
            funcs[d.get(1)] = (d.get(2, 0), d.get(4, 0))
    out = []
    for ids, n, labels in samples:
        frames = []
        for lid in ids:
            mid, lines = locs.get(lid, (0, []))
            mfile = strings[maps.get(mid, 0)]
            if mfile == "[python]":
                if lines:
                    fname, ffile = funcs.get(lines[0][0], (0, 0))
                    frames.append(("py", strings[fname], strings[ffile], lines[0][1]))
                else:
                    frames.append(("py", "?", "?", 0))
            elif mfile != "[kernel.kallsyms]":
                frames.append(("native", mfile))
        lab = {strings[k]: (strings[s] if s else num) for k, s, num in labels}
        out.append((frames, n, lab))
    return out


def script_lines(path):
    """function name -> (body lines, {callee name: call lines})."""
    tree = ast.parse(open(path).read())
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            calls = {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call):
                    names = [a.id for a in ast.walk(sub) if isinstance(a, ast.Name)]
                    for name in names:
                        calls.setdefault(name, set()).add(sub.lineno)
            out[node.name] = (body, calls)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--path", action="append", default=[])
    ap.add_argument("--native-between", action="append", default=[])
    ap.add_argument("--thread", action="append", default=[])
    ap.add_argument("--min", type=float, default=0.95)
    ap.add_argument("--name", default="")
    ap.add_argument("profiles", nargs="+")
    a = ap.parse_args()
    script = os.path.realpath(a.script)
    lines = script_lines(script)
    samples = []
    for p in a.profiles:
        samples += profile_samples(p)
    between = set(a.native_between)
    threads = dict(t.split("=", 1) for t in a.thread)
    ok = True
    total_py = sum(n for fr, n, _ in samples if any(f[0] == "py" for f in fr))
    print("%s: %d samples, %d with Python frames" %
          (a.name, sum(n for _, n, _ in samples), total_py))
    for spec in a.path:
        leaf, callers = spec.split(":", 1)
        chain = [leaf] + [c for c in callers.split(",") if c]
        have = good = 0
        bad_example = None
        for frames, n, lab in samples:
            py = [(i, f) for i, f in enumerate(frames) if f[0] == "py"]
            if not any(f[1] == leaf for _, f in py):
                continue
            have += n
            why = None
            if len(py) < len(chain):
                why = "too few Python frames"
            for k, name in enumerate(chain):
                if why:
                    break
                i, f = py[k]
                if f[1] != name:
                    why = "frame %d is %s, not %s" % (k, f[1], name)
                elif os.path.realpath(f[2]) != script:
                    why = "%s in %s" % (name, f[2])
                elif k == 0 and f[3] not in lines[name][0]:
                    why = "%s at line %d, not in its body" % (name, f[3])
                elif k > 0 and f[3] not in lines[name][1].get(chain[k - 1], set()):
                    why = "%s at line %d, not at its call of %s %s" % (
                        name, f[3], chain[k - 1], sorted(lines[name][1].get(chain[k - 1], [])))
            if not why and leaf in between:
                i0, i1 = py[0][0], py[1][0]
                if not any(frames[j][0] == "native" for j in range(i0 + 1, i1)):
                    why = "no native frame between %s and %s" % (chain[0], chain[1])
            if not why and leaf in threads:
                tid = int(lab.get("thread_id", 0))
                if (threads[leaf] == "main") != (tid == a.pid):
                    why = "on thread %d" % tid
            if why:
                bad_example = bad_example or (why, frames)
            else:
                good += n
        share = good / have if have else 0.0
        print("  %s: %d of %d samples (%.1f%%) with %s" %
              (leaf, good, have, 100 * share, " <- ".join(chain)))
        # One odd sample is allowed whatever the count: with under 20
        # samples of a leaf, a single one is already more than 5%.
        if have == 0 or (share < a.min and have - good > 1):
            ok = False
            if not have:
                top = max(samples, key=lambda s: s[1], default=None)
                print("    no sample has %s; the most common: %s" %
                      (leaf, top[0][:14] if top else None))
            if bad_example:
                print("    e.g. %s: %s" % (bad_example[0], bad_example[1][:14]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
