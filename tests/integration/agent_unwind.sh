#!/usr/bin/env bash
# The agent's user stacks against `perf record --call-graph dwarf` (the
# reference for true stacks), on programs whose hot paths the frame-pointer
# walk gets wrong, all running at once under both profilers:
#   qsort_nofp  C -O2 -fomit-frame-pointer; hot comparator called by libc's
#               qsort (msort), memcpy/memmove loops
#   qsort_fp    the same with frame pointers (libc still has none)
#   cxx         C++ -O2 -fomit-frame-pointer: std::sort, exceptions thrown
#               through three frames
#   go          Go: frameless leaves, assembly that clobbers BP (no
#               .eh_frame: the .gopclntab table)
#   xz, gzip    Debian's binaries; python3: Debian's /usr/bin/python3
# For each, unwind_check.py (independent of Kiln: ELF symbols, file
# offsets) requires the share of the agent's samples whose outermost frame
# is a root (_start, __libc_start_main, runtime.goexit...) to be >= 95%
# and not below perf's by more than 5 points, at most 2% of samples with a
# junk frame (an address in no mapping), and the known call paths (e.g.
# cmp_ints under main and msort_with_tmp) in >= 90% of the hot leaf's
# samples. The first samples of a process, taken before its tables are
# loaded, are the only expected misses. The agent's /metrics must count
# complete stacks and the tables it built.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
command -v perf >/dev/null || fail "precondition: perf (linux-perf) not installed"
bin="$AGENT_TESTBIN"
mkdir -p "$bin"
src="$AGENT_PROGS"
gcc -O2 -g -fomit-frame-pointer -o "$bin/qsort_nofp" "$src/unwind_qsort.c"
gcc -O2 -g -fno-omit-frame-pointer -o "$bin/qsort_fp" "$src/unwind_qsort.c"
g++ -O2 -g -fomit-frame-pointer -o "$bin/unwind_cxx" "$src/unwind_cxx.cc"
(cd "$src/unwind_go" && GOCACHE="$AGENT_TMP/gocache" GOFLAGS=-mod=mod go build -o "$bin/unwind_go" .) ||
	fail "go build"
head -c 10000000 /dev/urandom >"$AGENT_TMP/rand.bin" # xz -9: a few seconds a run

out="$AGENT_TMP/profiles"
port=$(free_port)
agent_start "$out" --local-store-layout=process --profiling-duration=3s \
	--profiling-cpu-sampling-frequency=49 --http-address=127.0.0.1:$port
secs=8
declare -A pids
"$bin/qsort_nofp" $secs >/dev/null & pids[qsort_nofp]=$!
"$bin/qsort_fp" $secs >/dev/null & pids[qsort_fp]=$!
"$bin/unwind_cxx" $secs >/dev/null & pids[cxx]=$!
"$bin/unwind_go" $secs >/dev/null & pids[go]=$!
/usr/bin/python3 "$src/unwind_py.py" $secs & pids[python3]=$!
(end=$((SECONDS + secs)); while [ $SECONDS -lt $end ]; do xz -9 -T1 -c "$AGENT_TMP/rand.bin" >/dev/null; done) &
xzloop=$!
(end=$((SECONDS + secs)); while [ $SECONDS -lt $end ]; do gzip -9 -c "$AGENT_TMP/rand.bin" >/dev/null; done) &
gzloop=$!
sleep 0.3
list=$(IFS=,; echo "${pids[*]}")
perf record -q -F 49 --call-graph dwarf,16384 -a -o "$AGENT_TMP/perf.data" -- sleep $((secs - 1)) \
	2>"$AGENT_TMP/perf.err" || { cat "$AGENT_TMP/perf.err"; fail "perf record"; }
wait "${pids[@]}" $xzloop $gzloop
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
agent_stop
perf script -i "$AGENT_TMP/perf.data" --no-inline -F pid,ip,dso >"$AGENT_TMP/perf.txt" 2>/dev/null ||
	fail "perf script"

check() { # NAME PID COMM [unwind_check flags]
	local name=$1 pid=$2 comm=$3; shift 3
	local files
	files=$(ls "$out"/*_"$pid"_"$comm"*.pb.gz 2>/dev/null) || true
	[ -n "$files" ] || fail "$name: no profile for pid $pid ($(ls "$out" | head))"
	python3 "$src/unwind_check.py" --name "$name" --pid "$pid" --agent $files \
		--perf "$AGENT_TMP/perf.txt" --min-complete 0.95 --slack 0.05 --max-junk 0.02 "$@" ||
		bad+=("$name")
}
# A pid of each Debian binary: the one with the most samples.
busiest() { # COMM
	ls "$out" | awk -F_ -v c="$1" '$3 ~ "^"c {n[$2]++} END {for (p in n) print n[p], p}' |
		sort -rn | awk 'NR==1 {print $2}'
}
bad=()
check qsort_nofp "${pids[qsort_nofp]}" qsort_nofp --min-path 0.9 \
	--path cmp_ints:main,msort_with_tmp --path "__mem*:main"
check qsort_fp "${pids[qsort_fp]}" qsort_fp --min-path 0.9 \
	--path cmp_ints:main,msort_with_tmp --path "__mem*:main"
check cxx "${pids[cxx]}" unwind_cxx
check go "${pids[go]}" unwind_go --min-path 0.9 \
	--path main.leaf:runtime.main,main.main,main.mid \
	--path crypto/sha256.block.abi0:main.main,main.hashing
check python3 "${pids[python3]}" python3
xzpid=$(busiest xz); gzpid=$(busiest gzip)
[ -n "$xzpid" ] && [ -n "$gzpid" ] ||
	fail "no xz or gzip profile; profiles by name: $(ls "$out" | awk -F_ '{print $3}' | sort | uniq -c | tr '\n' ' ')"
check xz "$xzpid" xz
check gzip "$gzpid" gzip

echo "$metrics" | grep -E '^kiln_agent_(user_stacks_total|unwind_)'
complete=$(echo "$metrics" | awk '/^kiln_agent_user_stacks_total\{result="complete"\}/ {print $2}')
tables=$(echo "$metrics" | awk '/^kiln_agent_unwind_tables / {print $2}')
[ "${complete:-0}" -gt 100 ] || fail "/metrics counts ${complete:-0} complete stacks"
[ "${tables:-0}" -ge 5 ] || fail "/metrics counts ${tables:-0} unwind tables"
# The walk-time histogram counts every walk (read a moment apart from the
# walk counter, so within a few), and its median lies inside the buckets
# that hold half of them.
echo "$metrics" | python3 -c '
import re, sys
m = sys.stdin.read()
def v(name):
    x = re.search(r"^" + re.escape(name) + r" (\S+)$", m, re.M)
    return float(x.group(1)) if x else None
walks, count = v("kiln_agent_unwind_walks_total"), v("kiln_agent_unwind_walk_duration_seconds_count")
med = v("kiln_agent_unwind_walk_median_seconds")
inf = v("kiln_agent_unwind_walk_duration_seconds_bucket{le=\"+Inf\"}")
assert walks and count == inf and abs(count - walks) <= max(10, walks / 100), (walks, count, inf)
bk = [(float(le), float(c)) for le, c in re.findall(
    r"^kiln_agent_unwind_walk_duration_seconds_bucket\{le=\"([0-9.e+-]+)\"\} (\S+)$", m, re.M)]
lo = max([le for le, c in bk if c < count / 2] + [0])
hi = min([le for le, c in bk if c >= count / 2] + [float("inf")])
assert lo <= med <= hi and med > 0, (lo, med, hi)
assert v("kiln_agent_unwind_frame_median_seconds") > 0
' || fail "/metrics: the walk-time histogram does not agree with the walk count"
[ ${#bad[@]} -eq 0 ] || fail "stacks not as true as perf's: ${bad[*]}"
echo "PASS"
