#!/usr/bin/env bash
# The web UI in headless Chromium (Playwright from ui/node_modules) against a
# real kiln with real Go runtime/pprof profiles pushed over gRPC WriteRaw:
# type, matcher autocomplete, Search, graph point, zoom, function search,
# table sort, Both, merge, compare two ranges (diff colours), share link
# reload, downloads (read back with go tool pprof), themes, targets (kiln
# scrapes itself), custom range and empty state, a held slow query (loading
# indicator and progress note), hide frames by binary.
# Screenshots of each step go to build/ui-screenshots/ (docs/UI.md).
source "$(dirname "$0")/ui_lib.bash"
ui_setup
SHOTS=$KILN_ROOT/build/ui-screenshots
rm -rf "$SHOTS"
mkdir -p "$SHOTS" "$T/prof" "$T/out"

(cd "$KILN_ROOT/tests/peers/go/uiload" && go build -o "$T/uiload" main.go) || die "go build uiload"
"$T/uiload" -out "$T/prof" -n 4 -units 40 || die "uiload"
# Profiles 5 minutes apart, as an agent's windows would be: the graph's x axis
# spans the whole range asked for, so points recorded 300 ms apart would
# sit on one pixel.
$PY - "$STUBS" "$T/prof" <<'PYEOF' || die "retiming the profiles"
import gzip, sys, time
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
now = time.time_ns()
for k in range(4):
    path = f"{sys.argv[2]}/cpu-{k}.pb.gz"
    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(open(path, "rb").read()))
    p.time_nanos = now - (4 - k) * 300 * 10**9
    open(path, "wb").write(gzip.compress(p.SerializeToString()))
PYEOF

# Pull mode for the targets page: kiln scrapes its own CPU profile
# (/debug/pprof/profile, perf events on its threads) and an endpoint that is
# down, so the page shows an up and a down job with a real error.
cat >"$T/kiln.yaml.in" <<'YAML'
scrape_configs:
  - job_name: kiln-self
    scrape_interval: 3s
    scrape_timeout: 6s
    static_configs:
      - targets: ["127.0.0.1:@PORT@"]
        labels:
          env: ui-test
    profiling_config:
      pprof_config:
        process_cpu: {enabled: true}
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        goroutine: {enabled: false}
  - job_name: offline
    scrape_interval: 3s
    scrape_timeout: 6s
    static_configs:
      - targets: ["127.0.0.1:1"]
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        goroutine: {enabled: false}
YAML
UI_CONFIG_TEMPLATE=$T/kiln.yaml.in ui_start_kiln

# Series node=n1: four profiles alternating hash-heavy / sort-heavy; node=n2: one.
for k in 0 1 2 3; do ui_push uiload "$T/prof/cpu-$k.pb.gz" job=ui node=n1; done
ui_push uiload "$T/prof/cpu-0.pb.gz" job=ui node=n2

export UI_TYPE=uiload:cpu:nanoseconds:cpu:nanoseconds:delta
timeout 300 node "$KILN_ROOT/tests/integration/ui_browser.mjs" "$URL" "$SHOTS" "$T/out" ||
	die "browser steps failed"

# The downloads are real pprof / folded files: go tool pprof reads them.
go tool pprof -top "$T/out/merged.pb.gz" >"$T/top.txt" 2>&1 || { cat "$T/top.txt"; die "go tool pprof merged"; }
grep -q 'main.hashAlpha' "$T/top.txt" || { cat "$T/top.txt"; die "pprof top lacks main.hashAlpha"; }
go tool pprof -top "$T/out/diff.pb.gz" >"$T/dtop.txt" 2>&1 || { cat "$T/dtop.txt"; die "go tool pprof diff"; }
# Totals agree: the sum of the folded lines, the UI's total, pprof -raw samples.
folded_total=$(awk '{s+=$NF} END{print s}' "$T/out/merged.folded")
ui_total=$(cat "$T/out/merged.total")
[ "$folded_total" = "$ui_total" ] || die "folded total $folded_total != UI total $ui_total"
grep -q 'main.work;main.hashAlpha' "$T/out/merged.folded" ||
	{ head "$T/out/merged.folded"; die "folded stacks lack main.hashAlpha"; }
ls "$SHOTS"
echo "ui_browser: ok ($(ls "$SHOTS" | wc -l) screenshots)"
