"""Writes CPU profiles of a known workload around a "deploy", for the
regression-report tests (kilnctl_diff.sh, ui_analysis.sh).

    deploy_profiles.py STUBS OUT T0_MS

Sixty 10 s windows from T0_MS, each a gzipped pprof of 400 samples drawn
(seeded, so every run is the same) over main;f1, main;f2 and main;f3: the
first thirty in OUT/v1 with shares 30/50/20 %, the last thirty in OUT/v2
where f1 takes 5 points from f2 (35/45/20), and all sixty again in
OUT/same with the v1 shares throughout (the unchanged workload).
"""
import gzip
import os
import random
import sys

sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2  # noqa: E402  (generated into STUBS by the test)

OUT, T0 = sys.argv[2], int(sys.argv[3])
BEFORE, AFTER = (0.3, 0.5, 0.2), (0.35, 0.45, 0.2)
rnd = random.Random(20261128)


def profile(path, ts_ms, probs):
    p = profile_pb2.Profile()
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "f1", "f2", "f3"]
    p.string_table.extend(strings)
    for t, u in ((1, 2), (3, 4)):
        st = p.sample_type.add()
        st.type, st.unit = t, u
    p.period_type.type, p.period_type.unit, p.period = 3, 4, 10000000
    for i, name in enumerate(["main", "f1", "f2", "f3"], start=1):
        f = p.function.add()
        f.id, f.name = i, strings.index(name)
        loc = p.location.add()
        loc.id, loc.address = i, 0x1000 * i
        loc.line.add().function_id = i
    counts = [0, 0, 0]
    for _ in range(400):
        u = rnd.random()
        counts[0 if u < probs[0] else 1 if u < probs[0] + probs[1] else 2] += 1
    for k, c in enumerate(counts):
        if c:
            s = p.sample.add()
            s.location_id.extend([k + 2, 1])
            s.value.extend([c, c * 10000000])
    p.time_nanos = ts_ms * 1000000
    p.duration_nanos = 10 * 1000000000
    with open(path, "wb") as f:
        f.write(gzip.compress(p.SerializeToString()))


for d in ("v1", "v2", "same"):
    os.makedirs(os.path.join(OUT, d), exist_ok=True)
for w in range(60):
    ts = T0 + w * 10000
    profile(f"{OUT}/{'v1' if w < 30 else 'v2'}/{w:03d}.pb.gz", ts, BEFORE if w < 30 else AFTER)
    profile(f"{OUT}/same/{w:03d}.pb.gz", ts, BEFORE)
