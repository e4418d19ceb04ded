#!/usr/bin/env bash
# bench-unwind: how true the agent's user stacks are and what walking them
# costs, next to perf on the same activity at the same time.
#
#   bench/bench-unwind.sh [--duration SECONDS] [--frequency HZ]   (default 30, 19)
#
# Workload (all at once, for DURATION): the agent_unwind test programs (C
# without and with frame pointers through libc's qsort and memcpy, C++
# with exceptions, Go with frameless leaves and assembly) and Debian's xz,
# gzip and /usr/bin/python3. Three profilers sample the whole host at
# the same frequency, side by side: kiln-agent (local files), `perf record
# -a -g` (frame pointers) and `perf record -a --call-graph dwarf` (the
# reference for true stacks).
#
# Printed:
#   per workload and profiler: samples, the share whose outermost user
#     frame is a root (_start, a thread start, runtime.goexit...), the
#     share with a junk frame, median depth (tests/integration/agent_progs/
#     unwind_check.py, which names frames from the ELF files themselves);
#   each profiler's CPU time (user+sys over the run, start-up included)
#     and the agent's as a ratio of each perf's; the agent's peak RSS;
#   the BPF program's mean run time per sample (the kernel's bpf_stats:
#     kernel.bpf_stats_enabled is turned on for the run) and the mean
#     user depth of the samples it walked;
#   the unwind tables: executables, bytes of rows, bytes of map memory
#     (the row pool's chunks), build time.
# Figures only: nothing here passes or fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
duration=30 freq=19
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--duration=*) duration=${1#*=}; shift ;;
	--frequency) freq=$2; shift 2 ;;
	--frequency=*) freq=${1#*=}; shift ;;
	*) echo "usage: $0 [--duration SECONDS] [--frequency HZ]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-unwind: needs root" >&2; exit 1; }
agent=${AGENT_BIN:-$root/build/bin/kiln-agent}
[ -x "$agent" ] || { echo "bench-unwind: build first (make)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench-unwind: perf not installed (make deps)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/kiln-bench-unwind.XXXXXX)
pids=()
old_stats=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "$old_stats" >/proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

progs=tests/integration/agent_progs
bin=$tmp/bin
mkdir -p "$bin"
gcc -O2 -g -fomit-frame-pointer -o "$bin/qsort_nofp" "$progs/unwind_qsort.c"
gcc -O2 -g -fno-omit-frame-pointer -o "$bin/qsort_fp" "$progs/unwind_qsort.c"
g++ -O2 -g -fomit-frame-pointer -o "$bin/unwind_cxx" "$progs/unwind_cxx.cc"
(cd "$progs/unwind_go" && GOCACHE="$tmp/gocache" GOFLAGS=-mod=mod go build -o "$bin/unwind_go" .)
head -c 40000000 /dev/urandom >"$tmp/rand.bin"

echo 1 >/proc/sys/kernel/bpf_stats_enabled
out=$tmp/agent
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Each profiler under /usr/bin/time: its CPU (user+sys) and peak RSS from
# its own rusage when it exits, start-up and shut-down included.
/usr/bin/time -f "%U %S %M" -o "$tmp/agent.cpu" "$agent" --local-store-directory="$out" \
	--local-store-layout=process --profiling-duration=5s --profiling-cpu-sampling-frequency="$freq" \
	--http-address=127.0.0.1:$mport >"$tmp/agent.log" 2>&1 &
timepid=$!
pids+=($timepid)
for _ in $(seq 1 100); do grep -q "profiling every CPU" "$tmp/agent.log" && break; sleep 0.1; done
apid=$(pgrep -P $timepid)
/usr/bin/time -f "%U %S %M" -o "$tmp/fp.cpu" perf record -q -F "$freq" -a -g -o "$tmp/fp.data" -- \
	sleep "$duration" 2>/dev/null &
fppid=$!
/usr/bin/time -f "%U %S %M" -o "$tmp/dwarf.cpu" perf record -q -F "$freq" -a --call-graph dwarf \
	-o "$tmp/dwarf.data" -- sleep "$duration" 2>/dev/null &
dwpid=$!
sleep 0.2
declare -A wl
"$bin/qsort_nofp" "$duration" >/dev/null & wl[qsort_nofp]=$!
"$bin/qsort_fp" "$duration" >/dev/null & wl[qsort_fp]=$!
"$bin/unwind_cxx" "$duration" >/dev/null & wl[cxx]=$!
"$bin/unwind_go" "$duration" >/dev/null & wl[go]=$!
/usr/bin/python3 "$progs/unwind_py.py" "$duration" & wl[python3]=$!
xz -9 -T1 -c "$tmp/rand.bin" >/dev/null & wl[xz]=$!
(end=$((SECONDS + duration)); while [ $SECONDS -lt $end ]; do gzip -9 -c "$tmp/rand.bin" >/dev/null; done) &
gzloop=$!
pids+=("${wl[@]}" $gzloop)
wait $fppid $dwpid 2>/dev/null || true
kill "${wl[xz]}" 2>/dev/null || true
wait "${wl[@]}" $gzloop 2>/dev/null || true
metrics=$(curl -sf "http://127.0.0.1:$mport/metrics")
read -r bpf_ns bpf_cnt < <(bpftool prog show -j | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name") == "profile_cpu":
        print(p.get("run_time_ns", 0), p.get("run_cnt", 0))
        break
else:
    print(0, 0)')
kill -INT $apid
wait $timepid || true
# (time's last line: a first one may say the command exited non-zero)
read -r au as rss < <(tail -1 "$tmp/agent.cpu")
read -r fu fs _ < <(tail -1 "$tmp/fp.cpu")
read -r du ds _ < <(tail -1 "$tmp/dwarf.cpu")

# perf script exits non-zero on some hosts' data after printing it all.
perf script -i "$tmp/fp.data" --no-inline -F pid,ip,dso >"$tmp/fp.txt" 2>/dev/null || true
perf script -i "$tmp/dwarf.data" --no-inline -F pid,ip,dso >"$tmp/dwarf.txt" 2>/dev/null || true

echo "workload: qsort_nofp qsort_fp cxx go python3 xz gzip at once on $(nproc) CPUs, ${duration}s, ${freq} Hz"
echo
printf '%-11s %-9s %8s %9s %6s %6s\n' workload profiler samples complete junk depth
busiest() {
	ls "$out" | awk -F_ -v c="$1" '$3 ~ "^"c {n[$2]++} END {for (p in n) print n[p], p}' |
		sort -rn | awk 'NR==1 {print $2}'
}
for name in qsort_nofp qsort_fp cxx go python3 xz gzip; do
	case $name in
	gzip) pid=$(busiest gzip) ;;
	*) pid=${wl[$name]} ;;
	esac
	files=$(ls "$out"/*_"$pid"_*.pb.gz 2>/dev/null || true)
	[ -n "$files" ] || { echo "$name: no agent profile"; continue; }
	for side in agent perf-g perf-dwarf; do
		case $side in
		agent) args=(--agent $files) ;;
		perf-g) args=(--agent $files --perf "$tmp/fp.txt") ;;
		perf-dwarf) args=(--agent $files --perf "$tmp/dwarf.txt") ;;
		esac
		python3 "$progs/unwind_check.py" --name "$name" --pid "$pid" "${args[@]}" 2>/dev/null |
			awk -v n="$name" -v s="$side" '
				$2 == (s == "agent" ? "agent" : "perf") {
					printf "%-11s %-9s %8s %9s %6s %6s\n", n, s, $3, $4, $5, $6 }' ||
			echo "$name: $side: unwind_check failed"
	done
done
echo
awk -v au="$au" -v as="$as" -v fu="$fu" -v fs="$fs" -v du="$du" -v ds="$ds" \
	-v t="$duration" -v rss="$rss" 'BEGIN {
	a = au + as; f = fu + fs; d = du + ds
	printf "CPU (s, %% of one core): kiln-agent %.2f (%.2f%%), perf -g %.2f (%.2f%%), perf dwarf %.2f (%.2f%%)\n",
		a, 100 * a / t, f, 100 * f / t, d, 100 * d / t
	if (f > 0) printf "agent / perf -g: %.3f   (goal <= 0.25)\n", a / f
	if (d > 0) printf "agent / perf dwarf: %.3f   (goal <= 0.05)\n", a / d
	printf "agent peak RSS: %.1f MB   (goal <= 40)\n", rss / 1024 }'
walks=$(echo "$metrics" | awk '/^kiln_agent_unwind_walks_total / {print $2}')
[ "$bpf_cnt" -gt 0 ] && awk -v ns="$bpf_ns" -v n="$bpf_cnt" 'BEGIN {
	printf "BPF program: %.0f ns mean per sample over %d samples (kernel bpf_stats; idle CPUs included)\n", ns / n, n }'
echo "$metrics" | awk '
	/^kiln_agent_unwind_walks_total / { w = $2 }
	/^kiln_agent_unwind_walk_seconds_total / { ws = $2 }
	/^kiln_agent_unwind_walk_frames_total / { wf = $2 }
	/^kiln_agent_unwind_walk_median_seconds / { wm = $2 }
	/^kiln_agent_unwind_frame_median_seconds / { fm = $2 }
	/^kiln_agent_unwind_tables / { t = $2 }
	/^kiln_agent_unwind_table_bytes / { b = $2 }
	/^kiln_agent_unwind_map_bytes / { mb = $2 }
	/^kiln_agent_unwind_table_build_seconds_total / { s = $2 }
	/^kiln_agent_unwind_table_builds_total / { n = $2 }
	/^kiln_agent_user_stacks_total\{result="complete"\}/ { c = $2 }
	/^kiln_agent_user_stacks_total/ { all += $2 }
	END {
		if (w && wf)
			printf "BPF user-stack walk: median %.0f ns per stack, %.0f ns per frame (15 frames: %.0f ns; goal <= 500); mean %.0f ns per stack (%d walks, %.1f frames each)\n", wm * 1e9, fm * 1e9, 15 * fm * 1e9, ws * 1e9 / w, w, wf / w
		printf "unwind tables: %d executables, %.1f MB of rows in %.1f MB of map memory (goal <= 32), %d built in %.2f s\n", t, b / 1048576, mb / 1048576, n, s
		printf "agent: %.1f%% of all user stacks on the host complete (%d of %d)\n", all ? 100 * c / all : 0, c, all }'
