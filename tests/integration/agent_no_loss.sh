#!/usr/bin/env bash
# Windows lose no samples on a busy host. Four burners (2 threads each, 8
# threads on the host's CPUs) run under an agent cutting 1 s windows, so
# dozens of window boundaries pass while samples stream in. Then:
#   - every sample the BPF program took was received (kernel count ==
#     received count, zero ring-buffer drops: the agent's exit line);
#   - every received sample is in exactly one written profile (the sum over
#     all files == received);
#   - the burners' samples summed over their windows ~ frequency x their
#     CPU time (the CPU time each burner measured, not wall time).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
# 49 Hz: ~150 samples per burner keeps the per-burner check far from noise.
HZ=49
out="$AGENT_TMP/profiles"
agent_start "$out" --profiling-duration=1s --profiling-cpu-sampling-frequency=$HZ --http-address=
pids=()
for i in 1 2 3 4; do
	"$AGENT_TESTBIN/burn" 1.5 2 >"$AGENT_TMP/cpu.$i" &
	pids+=($!)
done
wait "${pids[@]}"
agent_stop

line=$(grep "stopped:" "$AGENT_LOG") || fail "no exit summary: $(cat "$AGENT_LOG")"
echo "$line"
received=$(echo "$line" | sed -n 's/.*stopped: \([0-9]*\) samples received.*/\1/p')
kernel=$(echo "$line" | sed -n 's/.* \([0-9]*\) taken in the kernel.*/\1/p')
lost=$(echo "$line" | sed -n 's/.* \([0-9]*\) lost.*/\1/p')
[ "$lost" = 0 ] || fail "$lost samples lost"
[ "$received" = "$kernel" ] || fail "kernel took $kernel samples, agent received $received"

sum=$(pprof_samples "$out"/*.pb.gz)
[ "$sum" = "$received" ] || fail "profiles hold $sum samples, agent received $received"

# Per burner within 50% (a gross misattribution), all four within 25%: a
# burner's ~150 samples vary by ~sqrt(150) when 8 threads share the CPUs, so
# the sum is the sharp check.
total_n=0 total_cpu=0
for i in 0 1 2 3; do
	pid=${pids[$i]}
	cpu=$(awk '{print $1}' "$AGENT_TMP/cpu.$((i + 1))")
	files=$(agent_files "$out" "$pid")
	n=$(pprof_samples $files)
	windows=$(echo "$files" | wc -w)
	echo "pid $pid: $n samples in $windows windows, $cpu CPU s"
	python3 -c "assert abs($n - $HZ * $cpu) <= 0.5 * $HZ * $cpu" || fail "pid $pid: $n samples"
	[ "$windows" -ge 2 ] || fail "pid $pid spans only $windows window(s)"
	total_n=$((total_n + n))
	total_cpu=$(python3 -c "print($total_cpu + $cpu)")
done
python3 -c "
n, cpu = $total_n, $total_cpu
print(f'burners: {n} samples, expected ~{$HZ * cpu:.0f} from {cpu:.2f} CPU s')
assert abs(n - $HZ * cpu) <= 0.25 * $HZ * cpu
" || fail "burners' samples off by more than 25%"
echo PASS
