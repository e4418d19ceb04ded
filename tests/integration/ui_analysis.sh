#!/usr/bin/env bash
# The UI's analysis tools in headless Chromium against a real kiln: pprof's
# frame filters (server-side), the sandwich view (right click on a frame),
# the compare view's ranked regression table (click a row: the flame graph
# finds the function), the profile type offered before any search, readable
# type names, a graph whose x axis spans the chosen range, a legend of only
# the labels that differ, and no stale results beside an error. The data:
# CPU profiles of a known workload, one per 10 s window, where after a
# "deploy" (version v2) f1 takes 5 points more (see kilnctl_diff.sh).
source "$(dirname "$0")/ui_lib.bash"
ui_setup
ui_start_kiln
SHOTS=$KILN_ROOT/build/ui-screenshots/analysis
rm -rf "$SHOTS"
mkdir -p "$SHOTS" "$T/v1" "$T/v2"

now_ms=$(($(date +%s) * 1000))
t0=$((now_ms - 20 * 60 * 1000))
$PY - "$STUBS" "$T" "$t0" <<'PYEOF' || die "making profiles"
import gzip, random, sys
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
out, t0 = sys.argv[2], int(sys.argv[3])
rnd = random.Random(7)
def profile(path, ts_ms, probs):
    p = profile_pb2.Profile()
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "f1", "f2", "f3"]
    p.string_table.extend(strings)
    for t, u in ((1, 2), (3, 4)):
        st = p.sample_type.add(); st.type = t; st.unit = u
    p.period_type.type, p.period_type.unit, p.period = 3, 4, 10000000
    for i, name in enumerate(["main", "f1", "f2", "f3"], start=1):
        f = p.function.add(); f.id = i; f.name = strings.index(name)
        l = p.location.add(); l.id = i; l.address = 0x1000 * i
        l.line.add().function_id = i
    counts = [0, 0, 0]
    for _ in range(400):
        u = rnd.random()
        counts[0 if u < probs[0] else 1 if u < probs[0] + probs[1] else 2] += 1
    for k, c in enumerate(counts):
        if c:
            s = p.sample.add(); s.location_id.extend([k + 2, 1]); s.value.extend([c, c * 10000000])
    p.time_nanos = ts_ms * 1000000
    p.duration_nanos = 10 * 1000000000
    open(path, "wb").write(gzip.compress(p.SerializeToString()))
for w in range(60):
    v = "v1" if w < 30 else "v2"
    profile(f"{out}/{v}/{w:03d}.pb.gz", t0 + w * 10000, (0.3, 0.5, 0.2) if w < 30 else (0.35, 0.45, 0.2))
PYEOF
"$KILN_BIN/kilnctl" push --address="$ADDR" --labels=job=deploy,version=v1 "$T"/v1/*.pb.gz 2>/dev/null || die "push v1"
"$KILN_BIN/kilnctl" push --address="$ADDR" --labels=job=deploy,version=v2 "$T"/v2/*.pb.gz 2>/dev/null || die "push v2"

export UI_TYPE=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta UI_T0=$t0
timeout 300 node "$KILN_ROOT/tests/integration/ui_analysis.mjs" "$URL" "$SHOTS" || die "browser steps failed"
echo "PASS: frame filters, sandwich, regression table and polish in Chromium"
