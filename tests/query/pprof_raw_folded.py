#!/usr/bin/env python3
"""Reads `go tool pprof -raw PROFILE` on stdin and prints, for one sample
index, what Kiln's query module must produce from the same profile:

  folded IDX  ->  "caller;...;leaf VALUE" per distinct stack (sorted), inlined
                  functions expanded caller-first, unsymbolized locations
                  named "[basename] +0xOFFSET" or "0xADDR"
  top IDX     ->  "NAME FLAT CUM" per function (sorted by name), CUM counting
                  a function once per sample however often it recurs
  total IDX   ->  the sum of all values

go tool pprof is the peer: it decodes the profile with Go's own code, so the
test compares Kiln's tree against an independent reading of the samples.
"""
import collections
import os
import re
import sys

mode, idx = sys.argv[1], int(sys.argv[2])
section = None
samples = []  # (values, [location ids, leaf first])
locations = {}  # id -> (address, mapping id, [function names, innermost first])
mappings = {}  # id -> (start, offset, file)
current = None
sample_re = re.compile(r'^\s*((?:-?\d+\s+)*-?\d+):((?:\s+\d+)*)\s*$')
loc_re = re.compile(r'^\s*(\d+): 0x([0-9a-f]+)(?: M=(\d+))?\s?(.*)$')
line_re = re.compile(r'^(.*) (\S*):(-?\d+) s=(-?\d+)$')
map_re = re.compile(r'^\s*(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S*)')

for raw in sys.stdin.read().splitlines():
    if raw in ('Samples:', 'Locations', 'Mappings'):
        section = raw
        continue
    if section == 'Samples:':
        m = sample_re.match(raw)
        if m:
            values = [int(v) for v in m.group(1).split()]
            samples.append((values, [int(x) for x in m.group(2).split()]))
    elif section == 'Locations':
        m = loc_re.match(raw)
        if m:
            current = [int(m.group(2), 16), int(m.group(3) or 0), []]
            locations[int(m.group(1))] = current
            rest = m.group(4).strip()
        else:
            rest = raw.strip()
        if rest:
            lm = line_re.match(rest)
            current[2].append(lm.group(1) if lm else rest)
    elif section == 'Mappings':
        m = map_re.match(raw)
        if m:
            mappings[int(m.group(1))] = (int(m.group(2), 16), int(m.group(4), 16), m.group(5))


def frames(loc_id):
    addr, mid, funcs = locations[loc_id]
    if funcs:
        return list(reversed(funcs))
    if mid in mappings and mappings[mid][2]:
        start, off, path = mappings[mid]
        return ['[%s] +0x%x' % (os.path.basename(path), addr - start + off)]
    return ['0x%x' % addr]


folded = collections.Counter()
flat = collections.Counter()
cum = collections.Counter()
total = 0
for values, locs in samples:
    v = values[idx]
    if v == 0:
        continue
    total += v
    stack = []
    for loc in reversed(locs):
        stack.extend(frames(loc))
    folded[';'.join(f.replace(';', ':') for f in stack) if stack else '[unknown]'] += v
    if stack:
        flat[stack[-1]] += v
    for f in set(stack):
        cum[f] += v

if mode == 'folded':
    for k in sorted(folded):
        if folded[k]:
            print('%s %d' % (k, folded[k]))
elif mode == 'top':
    for k in sorted(cum):
        print('%s %d %d' % (k, flat[k], cum[k]))
elif mode == 'total':
    print(total)
else:
    sys.exit('unknown mode ' + mode)
