#!/usr/bin/env bash
# make bench-scrape — the scrape manager (build/tests/scrape/scrape_driver:
# scheduler + libcurl + pprof decode + deltas, ingest callback that only
# counts) against TARGETS loopback targets at a 10 s interval, all served by
# one Go process (tests/peers/go/scrapetarget -many: net/http on TARGETS
# ports; /debug/pprof/profile returns a captured real CPU profile at once,
# /debug/pprof/allocs is the live runtime allocs profile, turned into deltas).
# Two profile kinds per target = 2 x TARGETS scrapes per interval.
#
# Prints: scrapes/s sustained (and the expected rate), scheduler-thread CPU
# (% of one core and µs per scrape), ingest-thread CPU, ingest lag (scrape
# done -> callback returned), peak RSS; and the peer: the Go process's own
# CPU for serving the same profiles (utime+stime from /proc), with the ratio.
#
#   TARGETS=1000 BENCH_SECONDS=60 make bench-scrape
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
driver=build/tests/scrape/scrape_driver
[ -x "$driver" ] || { echo "bench-scrape: $driver missing (run: make bench-scrape)" >&2; exit 1; }
command -v go >/dev/null || { echo "bench-scrape: go not found (make deps installs golang-go)" >&2; exit 1; }
: "${TARGETS:=1000}" "${BENCH_SECONDS:=60}"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true # 1,000 listeners and connections
export GOCACHE="$root/build/go/cache" GOFLAGS=-mod=mod GO111MODULE=off GOTOOLCHAIN=local
dir=$(mktemp -d /tmp/kiln-bench-scrape-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

mkdir -p build/go
(cd tests/peers/go/scrapetarget && go build -o "$root/build/go/scrapetarget" .)
target=build/go/scrapetarget
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url
	for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
	echo "bench-scrape: $1 does not answer" >&2
	exit 1
}

# A real CPU profile to serve: 2 s of the work-mode target.
p=$(free_port)
"$target" -listen "127.0.0.1:$p" -mode work >/dev/null 2>&1 &
wp=$!
pids+=($wp)
wait_http "http://127.0.0.1:$p/debug/pprof/"
curl -sf -o "$dir/cpu.pb.gz" "http://127.0.0.1:$p/debug/pprof/profile?seconds=2"
kill "$wp"
echo "served CPU profile: $(stat -c %s "$dir/cpu.pb.gz") bytes (gzipped)"

# TARGETS consecutive free ports (retry on another base when one is taken).
started=0
for _ in $(seq 20); do
	base=$((20000 + RANDOM % 35000))
	"$target" -many "$TARGETS" -base-port "$base" -cpu-profile "$dir/cpu.pb.gz" >"$dir/many.out" 2>"$dir/many.err" &
	gp=$!
	for _ in $(seq 200); do
		grep -q ready "$dir/many.out" 2>/dev/null && break
		kill -0 "$gp" 2>/dev/null || break
		sleep 0.05
	done
	if grep -q ready "$dir/many.out"; then
		started=1
		pids+=($gp)
		break
	fi
	wait "$gp" 2>/dev/null || true
done
[ "$started" = 1 ] || { echo "bench-scrape: no free run of $TARGETS ports" >&2; exit 1; }

{
	echo "scrape_configs:"
	echo "  - job_name: \"bench\""
	echo "    scrape_interval: \"10s\""
	echo "    profiling_config:"
	echo "      pprof_config:"
	echo "        block: {enabled: false}"
	echo "        mutex: {enabled: false}"
	echo "        goroutine: {enabled: false}"
	echo "    static_configs:"
	echo "      - targets:"
	for ((i = 0; i < TARGETS; i++)); do echo "        - '127.0.0.1:$((base + i))'"; done
} >"$dir/bench.yaml"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
g0=$(cpu_ticks "$gp")
echo "== $driver --config bench.yaml --duration $BENCH_SECONDS ($TARGETS targets x {process_cpu, memory}, 10 s interval)"
t0=$(date +%s%N)
out=$("$driver" --config "$dir/bench.yaml" --duration "$BENCH_SECONDS" --status "$dir/status" | tail -1)
t1=$(date +%s%N)
g1=$(cpu_ticks "$gp")
echo "$out"
awk -F'\t' '$6 != "" {print $6}' "$dir/status" | sort | uniq -c | sort -rn | head -5 |
	sed 's/^/last error of targets down: /'
up=$(awk -F'\t' '$4 == "up"' "$dir/status" | wc -l)
total=$(wc -l <"$dir/status")
python3 - "$out" "$t0" "$t1" "$TARGETS" "$up" "$total" "$g0" "$g1" "$hz" <<'PY'
import sys
kv = dict(x.split("=") for x in sys.argv[1].split())
t = (int(sys.argv[3]) - int(sys.argv[2])) / 1e9
targets, up, total = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
go_s = (int(sys.argv[8]) - int(sys.argv[7])) / int(sys.argv[9])
scrapes, errors = int(kv["scrapes"]), int(kv["errors"])
sched_s = int(kv["scheduler_cpu_ns"]) / 1e9
ing_s = int(kv["ingest_cpu_ns"]) / 1e9
print(f"targets up: {up}/{total} scrape units")
print(f"scrapes: {scrapes} in {t:.1f} s = {scrapes / t:.1f}/s sustained "
      f"(expected {2 * targets / 10:.0f}/s after the first interval), errors {errors}")
dec_s = int(kv["decode_cpu_ns"]) / 1e9
del_s = int(kv["delta_cpu_ns"]) / 1e9
cb_s = int(kv["callback_cpu_ns"]) / 1e9
http_s = max(sched_s - dec_s - del_s, 0)
queue_s = max(ing_s - cb_s, 0)
over_s = sched_s + queue_s
pct = lambda s: f"{s:.2f} s = {100 * s / t:.2f}% of one core"
print(f"scheduler thread CPU: {pct(sched_s)}, "
      f"{1e6 * sched_s / max(scrapes, 1):.0f} us per scrape, of which")
print(f"  schedule + HTTP (libcurl, sockets, poll): {pct(http_s)}")
print(f"  decode (gunzip, parse, validate):          {pct(dec_s)}")
print(f"  delta (deltas, projections, queueing):     {pct(del_s)}")
print(f"ingest thread CPU: {pct(ing_s)}: queue handling {pct(queue_s)}, "
      f"callback (store ingest; here it only counts) {pct(cb_s)}")
print(f"OVERHEAD BEYOND INGEST (scheduler thread + ingest thread outside the callback): "
      f"{pct(over_s)}, {1e6 * over_s / max(scrapes, 1):.0f} us per scrape (goal: < 5%)")
print(f"ingest lag: avg {int(kv['lag_avg_ns']) / 1e6:.2f} ms, max {int(kv['lag_max_ns']) / 1e6:.2f} ms")
print(f"peak RSS of the driver: {int(kv['maxrss_kb']) / 1024:.1f} MiB")
print(f"peer: the Go process serving the same profiles used {go_s:.2f} s CPU = "
      f"{100 * go_s / t:.2f}% of one core; kiln scheduler / Go server = "
      f"{sched_s / go_s if go_s else float('nan'):.2f}x")
PY
