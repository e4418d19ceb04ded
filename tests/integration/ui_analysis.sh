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
mkdir -p "$SHOTS"

now_ms=$(($(date +%s) * 1000))
t0=$((now_ms - 20 * 60 * 1000))
$PY "$KILN_ROOT/tests/peers/python/deploy_profiles.py" "$STUBS" "$T" "$t0" || die "making profiles"
"$KILN_BIN/kilnctl" push --address="$ADDR" --labels=job=deploy,version=v1 "$T"/v1/*.pb.gz 2>/dev/null || die "push v1"
"$KILN_BIN/kilnctl" push --address="$ADDR" --labels=job=deploy,version=v2 "$T"/v2/*.pb.gz 2>/dev/null || die "push v2"

export UI_TYPE=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta UI_T0=$t0
timeout 300 node "$KILN_ROOT/tests/integration/ui_analysis.mjs" "$URL" "$SHOTS" || die "browser steps failed"
echo "PASS: frame filters, sandwich, regression table and polish in Chromium"
