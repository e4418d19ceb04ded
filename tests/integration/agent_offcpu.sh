#!/usr/bin/env bash
# The agent's off-CPU profile (--off-cpu-threshold) against what a program
# measures of its own waits. offcpu_block (agent_progs) blocks, on three
# threads, in nanosleep (block_in_nanosleep), in a read from a pipe fed
# every 30 ms (block_in_read) and in pthread_cond_wait (block_in_condwait),
# and prints the wall time it spent in each. Three agents run at once on
# it:
#   - --off-cpu-threshold=1ms (every switch-out timed), process layout:
#     its *.offcpu.pb.gz files, read with `go tool pprof -raw`, must have
#     sample type wallclock/nanoseconds and give each place the time the
#     program measured within 5% (offcpu_check.py, by function name from
#     the program's symbols); its /metrics must count the switch-outs and
#     samples, and no drops on a quiet machine's map;
#   - the same in the window layout (bare --off-cpu-threshold: 1ms):
#     TIME.offcpu.pb.gz holding the program's samples under its pid label;
#   - no flag: no off-CPU profile at all, and kiln_agent_off_cpu_enabled 0;
# and bad flag values are refused with a message.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build offcpu_block
bin="$AGENT_TESTBIN"

# Three agents (agent_start runs one): each stopped by the EXIT trap too;
# the new one's pid in STARTED.
start_agent() { # LOG DIR FLAGS...
	local log=$1 dir=$2 pid
	shift 2
	"$KILN_BIN/kiln-agent" --local-store-directory="$dir" "$@" >"$log" 2>&1 &
	pid=$!
	STARTED=$pid
	AGENT_CLEANUP+=("kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null")
	for _ in $(seq 1 200); do
		grep -q "profiling every CPU" "$log" && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "agent exited at start"; }
		sleep 0.1
	done
	cat "$log" >&2
	fail "agent did not start"
}
stop_agent() { # PID LOG
	kill -INT "$1"
	local rc=0
	wait "$1" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$2"; fail "agent exited with $rc"; }
}

# Bad values are refused before anything starts, saying what is expected.
for bad in --off-cpu-threshold=abc --off-cpu-threshold=2h --off-cpu-probability=0 \
	--off-cpu-probability=1.5 --off-cpu-probability=x; do
	rc=0
	out=$("$KILN_BIN/kiln-agent" --local-store-directory="$AGENT_TMP/bad" "$bad" 2>&1) || rc=$?
	[ "$rc" -eq 2 ] && echo "$out" | grep -q -- "${bad%%=*}=.*expected" ||
		fail "$bad: exit $rc, \"$out\""
done

port=$(free_port)
proc="$AGENT_TMP/proc" win="$AGENT_TMP/win" none="$AGENT_TMP/none"
start_agent "$AGENT_TMP/proc.log" "$proc" --local-store-layout=process \
	--profiling-duration=2s --off-cpu-threshold=1ms --off-cpu-probability=1 \
	--http-address=127.0.0.1:$port
p1=$STARTED
start_agent "$AGENT_TMP/win.log" "$win" --local-store-layout=window \
	--profiling-duration=2s --off-cpu-threshold --off-cpu-probability=1 --http-address=
p2=$STARTED
nport=$(free_port)
start_agent "$AGENT_TMP/none.log" "$none" --local-store-layout=process \
	--profiling-duration=2s --http-address=127.0.0.1:$nport
p3=$STARTED

"$bin/offcpu_block" 5 >"$AGENT_TMP/program.txt" &
prog=$!
wait $prog || fail "offcpu_block failed"
cat "$AGENT_TMP/program.txt"
sleep 0.5
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
nmetrics=$(curl -sf "http://127.0.0.1:$nport/metrics") || fail "/metrics not served"
stop_agent "$p1" "$AGENT_TMP/proc.log"
stop_agent "$p2" "$AGENT_TMP/win.log"
stop_agent "$p3" "$AGENT_TMP/none.log"

# Process layout: the numbers.
files=$(ls "$proc"/*_"$prog"_offcpu_block.offcpu.pb.gz 2>/dev/null) ||
	fail "no off-CPU profile for pid $prog: $(ls "$proc" | head)"
python3 "$AGENT_PROGS/offcpu_check.py" --program "$AGENT_TMP/program.txt" --probability 1 \
	--slack 0.05 $files || fail "off-CPU time not where the program blocked"

echo "$metrics" | grep -E '^kiln_agent_off_cpu'
m() { echo "$metrics" | awk -v k="$1" '$1 == k {print $2}'; }
[ "$(m kiln_agent_off_cpu_enabled)" = 1 ] || fail "kiln_agent_off_cpu_enabled is not 1"
[ "$(m kiln_agent_off_cpu_switches_total)" -gt 500 ] || fail "switch-outs not counted"
[ "$(m kiln_agent_off_cpu_switches_recorded_total)" -gt 500 ] || fail "switch-outs not recorded"
[ "$(m kiln_agent_off_cpu_samples_total)" -gt 500 ] || fail "off-CPU samples not counted"
[ "$(m 'kiln_agent_off_cpu_dropped_total{reason="slot_taken"}')" = 0 ] || fail "slot_taken drops"

# Window layout: an off-CPU file per window, the program's samples in it
# under its pid.
ls "$win"/*.offcpu.pb.gz >/dev/null 2>&1 || fail "window layout: no TIME.offcpu.pb.gz"
wtotal=$(go tool pprof -symbolize=none -sample_index=wallclock -tagfocus="pid=^$prog\$" -unit=ms \
	-top "$win"/*.offcpu.pb.gz 2>/dev/null | awk '/accounting for/ {for (i = 1; i < NF; i++) if ($i == "for") {v = $(i + 1); sub(",", "", v); sub("ms", "", v); print v; exit}}')
echo "window layout: ${wtotal:-none} ms off CPU for pid $prog"
awk -v t="${wtotal:-0}" 'BEGIN {exit !(t > 5000)}' ||
	fail "window layout: the program's off-CPU time is missing (${wtotal:-none} ms)"

# No flag: nothing off-CPU.
! ls "$none" | grep -q '\.offcpu\.pb\.gz$' || fail "an agent without --off-cpu-threshold wrote off-CPU files"
echo "$nmetrics" | grep -q '^kiln_agent_off_cpu_enabled 0' ||
	fail "an agent without --off-cpu-threshold says off-CPU is on"
echo "$nmetrics" | grep -q '^kiln_agent_off_cpu_samples_total 0' ||
	fail "an agent without --off-cpu-threshold received off-CPU samples"
echo "PASS"
