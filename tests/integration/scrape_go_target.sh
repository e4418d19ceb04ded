#!/usr/bin/env bash
# Pull mode against real peers: a Go program (net/http/pprof) doing known CPU
# and allocation work is scraped next to targets that are down, hang past the
# timeout, answer garbage, answer an endless body, or answer HTML.
#
# Soundness of the comparison with `go tool pprof`: the driver saves every
# raw response body next to what it ingested. For process_cpu (the target
# computes the delta) `go tool pprof -top` of the ingested profile must equal
# that of the raw bytes — same functions, same totals. For the cumulative
# allocs profile, Kiln's delta for scrape k must equal
# `go tool pprof -base raw(k-1) raw(k)`, the difference of the same two
# responses computed by pprof itself, in every sample type.
set -euo pipefail
source "$(dirname "$0")/../lib/scrape_lib.sh"
build_target
driver=${KILN_TESTBIN:-$root/build/san/tests}/scrape/scrape_driver
[ -x "$driver" ] || fail "$driver is not built"

read -r p_work p_hang p_garbage p_huge p_html p_down <<<"$(free_ports 6)"
start_target "$p_work" work
start_target "$p_hang" hang
start_target "$p_garbage" garbage
start_target "$p_huge" huge
start_target "$p_html" html
for p in $p_work $p_hang $p_garbage $p_huge $p_html; do wait_port "$p"; done

cat >"$work/kiln.yaml" <<YAML
object_storage:
  bucket:
    type: "FILESYSTEM"
    config:
      directory: "./data"
scrape_configs:
  - job_name: "app"
    scrape_interval: "2s"
    scrape_timeout: "4s"
    static_configs:
      - targets: ['127.0.0.1:$p_work']
        labels:
          env: "test"
  - job_name: "bad"
    scrape_interval: "2s"
    scrape_timeout: "5s"
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        process_cpu: {enabled: false}
    static_configs:
      - targets: ['127.0.0.1:$p_hang', '127.0.0.1:$p_garbage', '127.0.0.1:$p_huge',
                  '127.0.0.1:$p_html', '127.0.0.1:$p_down']
YAML
mkdir -p "$work/out"
"$driver" --config "$work/kiln.yaml" --out "$work/out" --duration 11 --max-body 1048576 \
	--status "$work/status" >"$work/driver.log" 2>&1 || { cat "$work/driver.log"; fail "driver failed"; }
cat "$work/status"

# Health and clear errors per target.
status_of() { awk -F'\t' -v u="$1" '$2 ~ u {print $4 "|" $6}' "$work/status"; }
for kind in allocs block goroutine mutex 'profile\?seconds=2'; do
	[ "$(status_of "$p_work/debug/pprof/$kind")" = "up|" ] || fail "work target $kind not up: $(status_of "$p_work/debug/pprof/$kind")"
done
[ "$(status_of ":$p_hang/")" = "down|timeout after 5s" ] || fail "hang: $(status_of ":$p_hang/")"
[ "$(status_of ":$p_huge/")" = "down|body exceeds 1 MiB" ] || fail "huge: $(status_of ":$p_huge/")"
[ "$(status_of ":$p_html/")" = "down|not a pprof profile: looks like HTML" ] || fail "html: $(status_of ":$p_html/")"
[ "$(status_of ":$p_down/")" = "down|connection refused" ] || fail "down: $(status_of ":$p_down/")"
case "$(status_of ":$p_garbage/")" in
"down|not a pprof profile: "*) ;;
*) fail "garbage: $(status_of ":$p_garbage/")" ;;
esac

# The good target kept being scraped while the bad ones failed.
cd "$work/out"
n_cpu=$(ls ingest-process_cpu-* | wc -l)
n_mem=$(ls ingest-memory-*-delta.pb.gz | wc -l)
[ "$n_cpu" -ge 3 ] || fail "only $n_cpu CPU profiles ingested"
[ "$n_mem" -ge 3 ] || fail "only $n_mem memory deltas ingested"
ls ingest-goroutine-*-gauge.pb.gz ingest-block-*-delta.pb.gz ingest-mutex-*-delta.pb.gz >/dev/null ||
	fail "goroutine, block or mutex profiles missing"

# CPU: what was ingested is what the target sent, per go tool pprof.
for f in ingest-process_cpu-*-delta.pb.gz; do
	ts=${f#ingest-process_cpu-$p_work-}
	ts=${ts%-delta.pb.gz}
	raw=raw-process_cpu-$p_work-$ts.pb.gz
	[ -f "$raw" ] || fail "no raw body for $f"
	pprof_top "$raw" >a.txt
	pprof_top "$f" >b.txt
	diff a.txt b.txt || fail "$f differs from the scraped bytes"
	grep -q 'main.burnCPU$' b.txt || fail "main.burnCPU missing in $f"
done
grep -q 'main.burnCPULight$' b.txt || fail "main.burnCPULight missing"
# The known split of the CPU work (burnCPULight spins 1/3 of the wall time,
# burnCPU 2/3) shows in the ingested profiles merged by go tool pprof; the
# bounds are loose: a loaded machine skews CPU per wall-clock slice.
pprof_top -unit=ms ingest-process_cpu-*-delta.pb.gz >cpu_all.txt
python3 - cpu_all.txt <<'PY' || fail "CPU split: $(head -12 cpu_all.txt)"
import sys
cum = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 6 and f[3].endswith("ms"):
        cum[f[5]] = float(f[3][:-2])
light, heavy = cum["main.burnCPULight"], cum["main.burnCPU"]
share = light / heavy  # burnCPU's cum includes the calls from burnCPULight
print(f"burnCPULight / burnCPU (cum) = {share:.2f} (expected about 1/3)")
assert 0.1 < share < 0.6, share
PY

# Allocations: Kiln's delta == pprof's own difference of consecutive scrapes.
raws=($(ls raw-memory-$p_work-*.pb.gz | sort -t- -k4 -n))
checked=0
for ((i = 1; i < ${#raws[@]}; i++)); do
	ts=${raws[$i]#raw-memory-$p_work-}
	ts=${ts%.pb.gz}
	d=ingest-memory-$p_work-$ts-delta.pb.gz
	[ -f "$d" ] || continue
	for st in alloc_space alloc_objects; do
		pprof_top -sample_index=$st -base "${raws[$((i - 1))]}" "${raws[$i]}" >a.txt
		pprof_top -sample_index=$st "$d" >b.txt
		diff a.txt b.txt || fail "$d ($st) differs from go tool pprof -base"
	done
	grep -q 'main.allocSmall$' b.txt || fail "main.allocSmall missing in $d"
	grep -q 'main.allocLarge$' b.txt || fail "main.allocLarge missing in $d"
	g=ingest-memory-$p_work-$ts-gauge.pb.gz
	pprof_top -sample_index=inuse_space "${raws[$i]}" >a.txt
	pprof_top -sample_index=inuse_space "$g" >b.txt
	diff a.txt b.txt || fail "$g (inuse_space) differs from the scraped bytes"
	checked=$((checked + 1))
done
[ "$checked" -ge 2 ] || fail "only $checked memory deltas could be checked"
echo "ok: $n_cpu CPU profiles and $checked memory deltas match go tool pprof"
