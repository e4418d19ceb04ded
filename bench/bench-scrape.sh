#!/usr/bin/env bash
# make bench-scrape — the scrape manager (build/tests/scrape/scrape_driver:
# scheduler + libcurl + pprof decode + deltas, ingest callback that only
# counts) against TARGETS loopback targets at a 10 s interval, all served by
# one Go process (tests/peers/go/scrapetarget -many: net/http on TARGETS
# ports; /debug/pprof/profile returns a captured real CPU profile at once,
# /debug/pprof/allocs is the live runtime allocs profile, turned into deltas).
# Two profile kinds per target = 2 x TARGETS scrapes per interval.
#
# "Overhead beyond ingest" (the issue's < 5% goal) = all CPU of the
# scheduler thread (scheduling, libcurl and sockets, gunzip + parse +
# validate, deltas and projections, queueing) + the ingest thread's CPU
# outside the ingest callback; the callback (store_write_profile in the
# server) is ingest. Each is measured with per-thread CPU clocks
# (CLOCK_THREAD_CPUTIME_ID around decode, delta and the callback;
# pthread_getcpuclockid for the threads' totals), kept in scrape_stats and
# exported by the server as kiln_scrape_cpu_seconds_total{phase=...}.
#
# Prints: scrapes/s sustained (and the expected rate), the CPU by phase (%
# of one core and µs per scrape), ingest lag (scrape done -> callback
# returned), peak RSS; the peer: the Go process's own CPU for serving the
# same profiles (utime+stime from /proc), with the ratio. Part 2 runs the
# same targets through the server (kiln --config-path, real store) and
# prints its /metrics phases: overhead vs store ingest. In between,
# bench_scrape_delta prints the µs of decode, delta and gauge of one allocs
# scrape of the peer, on one thread.
#
#   TARGETS=1000 BENCH_SECONDS=60 make bench-scrape
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
driver=${SCRAPE_DRIVER:-build/tests/scrape/scrape_driver} # another build, for A/B runs
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

# The status file only once per interval (older drivers, for A/B runs:
# every 500 ms).
status_every=
grep -q status-every "$driver" && status_every="--status-every 10"
# Like the server below, the driver is measured after a 10 s warm-up (older
# drivers: from the start, first interval included). In the first interval
# each memory unit's first scrape only becomes the baseline (no delta), and
# the peer's allocs profile, just started, is smaller: counting it made the
# driver look ~20% cheaper per scrape than the server for the same work.
warmup=
grep -q -- --warmup "$driver" && warmup="--warmup 10"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
g0=$(cpu_ticks "$gp")
dur=$BENCH_SECONDS
[ -n "$warmup" ] && dur=$((BENCH_SECONDS + 10))
echo "== $driver --config bench.yaml --duration $dur $warmup ($TARGETS targets x {process_cpu, memory}, 10 s interval)"
t0=$(date +%s%N)
out=$("$driver" --config "$dir/bench.yaml" --duration "$dur" $warmup --status "$dir/status" $status_every | tail -1)
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
t = wall = (int(sys.argv[3]) - int(sys.argv[2])) / 1e9
if "window_ns" in kv:  # the measured window (after --warmup)
    t = int(kv["window_ns"]) / 1e9
targets, up, total = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
go_s = (int(sys.argv[8]) - int(sys.argv[7])) / int(sys.argv[9])
scrapes, errors = int(kv["scrapes"]), int(kv["errors"])
sched_s = int(kv["scheduler_cpu_ns"]) / 1e9
ing_s = int(kv["ingest_cpu_ns"]) / 1e9
print(f"targets up: {up}/{total} scrape units")
print(f"scrapes: {scrapes} in {t:.1f} s = {scrapes / t:.1f}/s sustained "
      f"(expected {2 * targets / 10:.0f}/s after the first interval), errors {errors}")
dec_s = int(kv.get("decode_cpu_ns", 0)) / 1e9  # 0: a driver without phases
del_s = int(kv.get("delta_cpu_ns", 0)) / 1e9
cb_s = int(kv.get("callback_cpu_ns", 0)) / 1e9
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
      f"{100 * go_s / wall:.2f}% of one core; kiln scheduler / Go server = "
      f"{sched_s * wall / t / go_s if go_s else float('nan'):.2f}x")
PY

# Per scrape, on one thread: decode + delta + gauge of one allocs profile of
# the peer against the one scraped 5 s before (bench/bench_scrape_delta.c),
# a figure that the machine's load disturbs much less than the rates above.
bsd=${SCRAPE_DELTA_BENCH:-build/bench/bench_scrape_delta} # another build, for A/B runs
if [ -x "$bsd" ]; then
	curl -sf -o "$dir/allocs1.pb.gz" "http://127.0.0.1:$base/debug/pprof/allocs"
	sleep 5
	curl -sf -o "$dir/allocs2.pb.gz" "http://127.0.0.1:$base/debug/pprof/allocs"
	echo "== $bsd allocs1 allocs2 (one cumulative scrape, 1,000 rounds)"
	"$bsd" "$dir/allocs1.pb.gz" "$dir/allocs2.pb.gz" 1000 | sed "s#$dir/##g"
fi

# Part 2 (BENCH_SERVER=0 skips it): the same targets scraped by the server
# itself (kiln --config-path), now with the real store ingest. Its /metrics
# splits the pull-mode CPU by phase (kiln_scrape_cpu_seconds_total): the
# overhead beyond ingest (schedule_http + decode + delta + queue) next to the
# store ingest; both are counted from the end of the first interval (units
# start within it) to the end of the run.
[ "${BENCH_SERVER:-1}" = 1 ] || exit 0
kiln=build/bin/kiln
[ -x "$kiln" ] || { echo "bench-scrape: $kiln missing (run: make bench-scrape)" >&2; exit 1; }
kp=$(free_port)
"$kiln" --http-address=127.0.0.1:$kp --storage-path="$dir/data" --config-path="$dir/bench.yaml" \
	--log-level=warn >"$dir/kiln.log" 2>&1 &
kpid=$!
pids+=($kpid)
wait_http "http://127.0.0.1:$kp/ready"
echo "== $kiln --config-path bench.yaml, ${BENCH_SECONDS} s after a 10 s warm-up (scrapes and store ingest)"
sleep 10
curl -sf "http://127.0.0.1:$kp/metrics" >"$dir/m0"
k0=$(cpu_ticks "$kpid")
t0=$(date +%s%N)
sleep "$BENCH_SECONDS"
curl -sf "http://127.0.0.1:$kp/metrics" >"$dir/m1"
k1=$(cpu_ticks "$kpid")
t1=$(date +%s%N)
python3 - "$dir/m0" "$dir/m1" "$t0" "$t1" "$k0" "$k1" "$hz" <<'PY'
import sys
def load(p):
    return {l.split()[0]: float(l.split()[1]) for l in open(p) if l.startswith("kiln_scrape_")}
m0, m1 = load(sys.argv[1]), load(sys.argv[2])
t = (int(sys.argv[4]) - int(sys.argv[3])) / 1e9
proc = (int(sys.argv[6]) - int(sys.argv[5])) / int(sys.argv[7])
d = lambda k: m1.get(k, 0) - m0.get(k, 0)
ph = {p: d(f'kiln_scrape_cpu_seconds_total{{phase="{p}"}}')
      for p in ("schedule_http", "decode", "delta", "queue", "ingest")}
scrapes = d("kiln_scrape_scrapes_total")
print(f"scrapes: {scrapes:.0f} in {t:.1f} s = {scrapes / t:.1f}/s, errors {d('kiln_scrape_errors_total'):.0f}, "
      f"profiles stored {d('kiln_scrape_profiles_ingested_total'):.0f}, "
      f"store errors {d('kiln_scrape_ingest_errors_total'):.0f}")
for p, s in ph.items():
    print(f"  {p:14s} {s:6.2f} s = {100 * s / t:5.2f}% of one core")
over = sum(s for p, s in ph.items() if p != "ingest")
print(f"OVERHEAD BEYOND INGEST in the server: {over:.2f} s = {100 * over / t:.2f}% of one core "
      f"(goal: < 5%); store ingest {100 * ph['ingest'] / t:.2f}%; "
      f"whole kiln process {100 * proc / t:.2f}%")
PY
