#!/usr/bin/env python3
"""Compares kiln-agent's user stacks with `perf record --call-graph dwarf`'s
on the same processes, as an independent judge of the unwinder.

    unwind_check.py --pid PID --agent FILE... --perf SCRIPT [checks]

--agent: the agent's pprof files for the process (gzipped, one per window).
--perf: the text of `perf script --no-inline -F pid,ip,dso` over a
perf.data recorded with --call-graph dwarf at the same time.

Both sides are named by the same oracle, written here and depending on
nothing in Kiln: each frame becomes (file, file offset) through the
process's mappings (the pprof mappings; perf prints file addresses), then a
symbol from the file's own ELF symbol table (or the separate debug file
under /usr/lib/debug/.build-id), the ELF entry point standing in as
_start in stripped binaries. Both name non-leaf frames at the return
address minus one (inside the call).

Per side it prints: samples, the share whose outermost user frame is a
root (_start, __libc_start_main, a thread start, Go's runtime.goexit...),
the median depth, the share with a junk frame (an address in no mapping),
and for each --path LEAF:CALLER,... the share of LEAF's samples whose
stack holds the callers in that order. Checks (exit status 1 when one
fails): --min-complete F (the agent's root share, and at least perf's less
--slack; both with one sample's worth of slack), --max-junk F, --min-path F.
"""
import argparse
import bisect
import gzip
import os
import re
import struct
import sys

from pbwire import fields, packed

ROOTS = {
    "_start", "__libc_start_main", "__libc_start_call_main", "start_thread",
    "clone", "clone3", "__clone", "__clone3", "__clone_internal",
    "runtime.goexit", "runtime.goexit.abi0", "runtime.main", "runtime.mstart",
    "runtime.mstart0", "runtime.rt0_go", "runtime.rt0_go.abi0", "_rt0_amd64_linux",
    "_rt0_amd64",
}
KERNEL_MIN = 0xFFFF800000000000


# ---- ELF: loads, entry, symbols --------------------------------------------

class Elf:
    def __init__(self, path):
        self.path = path
        self.loads, self.syms, self.entry, self.build_id = [], [], None, None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        if data[:4] != b"\x7fELF" or data[4] != 2:
            return
        (self.entry, phoff, shoff) = struct.unpack_from("<QQQ", data, 24)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 54)
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                "<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                self.loads.append((p_offset, p_vaddr, p_filesz))
        secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)] if shoff else []
        self.build_id = self._build_id(data, secs)
        syms = self._symbols(data, secs, 2)
        if not syms and self.build_id:
            dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (self.build_id[:2], self.build_id[2:])
            if os.path.exists(dbg):
                syms = Elf(dbg).syms
        self.syms = syms or self._symbols(data, secs, 11)

    @staticmethod
    def _build_id(data, secs):
        for s in secs:
            if s[1] != 7:  # SHT_NOTE
                continue
            off, end = s[4], s[4] + s[5]
            while off + 12 <= end:
                namesz, descsz, typ = struct.unpack_from("<III", data, off)
                name_off = off + 12
                desc_off = name_off + ((namesz + 3) & ~3)
                if typ == 3 and data[name_off:name_off + 3] == b"GNU":
                    return data[desc_off:desc_off + descsz].hex()
                off = desc_off + ((descsz + 3) & ~3)
        return None

    @staticmethod
    def _symbols(data, secs, want):
        """FUNC symbols of the SHT_SYMTAB (2) or SHT_DYNSYM (11) section."""
        out = []
        if True:
            for s in secs:
                if s[1] != want or s[9] != 24 or s[6] >= len(secs):
                    continue
                stroff = secs[s[6]][4]
                for i in range(s[5] // 24):
                    name, info, _, shndx, value, size = struct.unpack_from(
                        "<IBBHQQ", data, s[4] + i * 24)
                    if (info & 0xF) != 2 or shndx == 0 or value == 0:  # STT_FUNC, defined
                        continue
                    end = data.index(b"\0", stroff + name)
                    out.append((value, max(size, 1), data[stroff + name:end].decode(errors="replace")))
        out.sort()
        return out

    def vaddr(self, off):
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= off < p_offset + p_filesz:
                return off - p_offset + p_vaddr
        return None

    def name(self, vaddr):
        i = bisect.bisect_right(self.syms, (vaddr, float("inf"), "")) - 1
        if i >= 0:
            value, size, name = self.syms[i]
            if value <= vaddr < value + size:
                return name
        if self.entry is not None and self.entry <= vaddr < self.entry + 0x30:
            return "_start"
        return None


_elves = {}


def frame_name(path, off):
    """The symbol at a file offset of path, or (path "v:FILE") at a
    virtual address of FILE."""
    is_vaddr = path.startswith("v:")
    if is_vaddr:
        path = path[2:]
    if path not in _elves:
        _elves[path] = Elf(path)
    e = _elves[path]
    v = off if is_vaddr else e.vaddr(off)
    n = e.name(v) if v is not None else None
    return n or "%s+0x%x" % (os.path.basename(path), off)


# ---- pprof -------------------------------------------------------------------

def agent_samples(path):
    b = gzip.open(path).read()
    strings, samples, locs, maps = [], [], {}, {}
    for f, t, v in fields(b):
        if f == 6:
            strings.append(v.decode(errors="replace"))
        elif f == 2:
            ids, vals = [], []
            for g, gt, gv in fields(v):
                if g == 1:
                    ids += packed(gt, gv)
                elif g == 2:
                    vals += packed(gt, gv)
            samples.append((ids, vals[0] if vals else 1))
        elif f == 4:
            d = {g: gv for g, gt, gv in fields(v) if gt == 0}
            locs[d.get(1)] = (d.get(2, 0), d.get(3, 0))
        elif f == 3:
            d = {g: gv for g, gt, gv in fields(v) if gt == 0}
            maps[d.get(1)] = (d.get(2, 0), d.get(3, 0), d.get(4, 0), d.get(5, 0))
    out = []
    for ids, n in samples:
        frames = []
        for lid in ids:
            mid, addr = locs.get(lid, (0, 0))
            m = maps.get(mid)
            if m and strings[m[3]] == "[kernel.kallsyms]" or addr >= KERNEL_MIN:
                continue  # kernel frames: not the unwinder's
            if not m:
                frames.append(None)
                continue
            path = strings[m[3]]
            if not path.startswith("/"):
                frames.append(("[%s]" % path.strip("[]"), addr - m[0]))
                continue
            frames.append((path, addr - m[0] + m[2]))
        out.append((frames, n))
    return out


# ---- perf script -----------------------------------------------------------

def perf_samples(path, pid):
    """Samples of pid in `perf script --no-inline -F pid,ip,dso` text: perf
    prints each user frame as its offset in the mapped file (the address
    less the mapping's start, plus its file offset) and the file."""
    out, cur = [], None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur is not None:
                    out.append((cur, 1))
                cur = None
                continue
            m = re.match(r"\s+([0-9a-f]+) \((.*)\)$", line)
            if not m:  # a sample's first line: its pid (right-aligned with -a)
                toks = line.split()
                cur = [] if toks and toks[0].isdigit() and int(toks[0]) == pid else None
                continue
            if cur is None:
                continue
            ip, dso = int(m.group(1), 16), m.group(2)
            if ip >= KERNEL_MIN or "kernel.kallsyms" in dso or dso.startswith("[kernel"):
                continue
            if dso == "[unknown]":
                cur.append(None)
                continue
            off = ip  # perf's DWARF unwinder already shows callers at pc - 1
            cur.append((dso, off) if dso.startswith("/") else ("[%s]" % dso.strip("[]"), off))
    if cur:
        out.append((cur, 1))
    return out


# ---- judging ---------------------------------------------------------------

SUFFIX_RE = re.compile(r"(\.(part|constprop|isra|cold|lto_priv)(\.\d+)?)+$")


def named(frames):
    return [None if f is None else SUFFIX_RE.sub("", frame_name(*f)) if f[0][0] in "/v" else f[0]
            for f in frames]


def summarize(samples, paths):
    total = sum(n for _, n in samples)
    complete = junk = 0
    depths = []
    path_hits = {p: [0, 0] for p in paths}
    for frames, n in samples:
        names = named(frames)
        if names and names[-1] in ROOTS:
            complete += n
        if any(x is None for x in names[1:]):
            junk += n
        depths += [len(names)] * n
        for p in paths:
            leaf, callers = p
            if not names or not (names[0] == leaf or
                                 (leaf.endswith("*") and names[0] and names[0].startswith(leaf[:-1]))):
                continue
            path_hits[p][1] += n
            it = iter(reversed(names))
            if all(any(c == x for x in it) for c in callers):
                path_hits[p][0] += n
    depths.sort()
    return {
        "samples": total,
        "complete": complete / total if total else 0.0,
        "junk": junk / total if total else 0.0,
        "depth": depths[len(depths) // 2] if depths else 0,
        "paths": {p: (h / t if t else None, t) for p, (h, t) in path_hits.items()},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--name", default="")
    ap.add_argument("--agent", nargs="+", required=True)
    ap.add_argument("--perf")
    ap.add_argument("--path", action="append", default=[],
                    help="LEAF:ROOTMOST_CALLER,...,NEAREST_CALLER (LEAF may end in * for a prefix)")
    ap.add_argument("--show-perf", type=int, default=0, help="print the N commonest perf stacks")
    ap.add_argument("--min-complete", type=float, default=0.0)
    ap.add_argument("--slack", type=float, default=0.02)
    ap.add_argument("--max-junk", type=float, default=1.0)
    ap.add_argument("--min-path", type=float, default=0.0)
    ap.add_argument("--show", type=int, default=0, help="print the N commonest agent stacks")
    a = ap.parse_args()
    paths = []
    for p in a.path:
        leaf, _, callers = p.partition(":")
        paths.append((leaf, tuple(c for c in callers.split(",") if c)))
    sides = {"agent": summarize([s for f in a.agent for s in agent_samples(f)], paths)}
    if a.perf:
        sides["perf"] = summarize(perf_samples(a.perf, a.pid), paths)
    ok = True
    print("%-12s %-6s %8s %9s %6s %6s  %s" % ("workload", "side", "samples", "complete", "junk",
                                          "depth", "paths (share of the leaf's samples)"))
    for side, s in sides.items():
        ps = " ".join("%s:%s" % (p[0], "-" if v is None else "%.0f%%(%d)" % (100 * v, t))
                      for p, (v, t) in s["paths"].items())
        print("%-12s %-6s %8d %8.1f%% %5.1f%% %6d  %s" % (a.name, side, s["samples"],
                                                        100 * s["complete"], 100 * s["junk"],
                                                        s["depth"], ps))
    ag = sides["agent"]
    if ag["samples"] == 0:
        print("FAIL: no agent samples")
        ok = False
    # One sample's worth of slack in both share checks: the busiest gzip
    # of a short run has some 20 samples, where a single stack cut short
    # (a process sampled as it starts or exits) is 5 points, and a walk
    # that is right 99% of the time would fail one run in six.
    one = 1.0 / ag["samples"] if ag["samples"] else 0.0
    if ag["complete"] + one < a.min_complete:
        print("FAIL: %.1f%% of the agent's stacks reach a root (want %.1f%%)" %
              (100 * ag["complete"], 100 * a.min_complete))
        ok = False
    if "perf" in sides and sides["perf"]["samples"] and \
            ag["complete"] + one < sides["perf"]["complete"] - a.slack:
        print("FAIL: the agent's root share is below perf --call-graph dwarf's")
        ok = False
    if ag["junk"] > a.max_junk:
        print("FAIL: %.1f%% of the agent's stacks hold a junk frame" % (100 * ag["junk"]))
        ok = False
    for p, (v, t) in ag["paths"].items():
        if t and v < a.min_path:
            print("FAIL: %s: %.1f%% of its samples show %s" % (p[0], 100 * v, " > ".join(p[1])))
            ok = False
        if not t and a.min_path > 0:
            print("FAIL: no agent sample has %s as its leaf" % p[0])
            ok = False
    if a.show:
        from collections import Counter
        c = Counter()
        for f in a.agent:
            for frames, n in agent_samples(f):
                c[";".join(reversed([x or "?" for x in named(frames)]))] += n
        for st, n in c.most_common(a.show):
            print("%6d %s" % (n, st))
    if a.show_perf and a.perf:
        from collections import Counter
        c = Counter()
        for frames, n in perf_samples(a.perf, a.pid):
            c[";".join(reversed([x or "?" for x in named(frames)]))] += n
        for st, n in c.most_common(a.show_perf):
            print("perf %6d %s" % (n, st))
    sys.exit(0 if ok else 1)


main()
