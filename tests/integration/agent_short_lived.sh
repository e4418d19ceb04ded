#!/usr/bin/env bash
# A process that lives less than one window (1 s of a 6 s window) and has
# exited when the window is cut is still in that window's profiles, with its
# labels and its mappings: its frames symbolize from the binary. Then a run
# of processes that live ~60 ms each (a build's compilers, a cron job's
# commands): their mappings must be read while they live, so the agent is
# woken for each new process within MIN_WAKE_NS (agent.c), not after the
# old 250 ms, when most of them were gone and their frames stayed bare
# addresses. Then processes of ~4 ms (an assembler on a small file): gone
# before any wakeup, they keep their mappings only through the kernel's
# mmap records (mmapwatch.c). Last, children of 4 ms forked without exec,
# through the fork records.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
out="$AGENT_TMP/profiles"
agent_start "$out" --profiling-duration=6s --profiling-cpu-sampling-frequency=49 --http-address=
"$AGENT_TESTBIN/burn" 0.8 >/dev/null & bpid=$!
wait $bpid
# The window ends within 6 s of the agent's start; wait for its file
# without stopping the agent (no flush on exit helps here).
for _ in $(seq 1 100); do
	[ -n "$(agent_files "$out" "$bpid" burn)" ] && break
	sleep 0.1
done
files=$(agent_files "$out" "$bpid" burn)
[ -n "$files" ] || fail "no profile for the short-lived pid $bpid: $(ls "$out")"
kill -0 "$AGENT_PID" || fail "agent died"
agent_traces $files >"$AGENT_TMP/traces.json"
python3 - "$AGENT_TMP/traces.json" "$bpid" <<'PY'
import json, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
total = sum(s["n"] for s in samples)
burn = sum(s["n"] for s in samples if s["frames"][0] in ("burn_two", "burn_one"))
print(f"{burn} of {total} samples symbolized into burn_two/burn_one")
assert total >= 10, f"only {total} samples for 0.8 CPU s at 49 Hz (~39 expected)"
assert burn >= 0.7 * total, "frames did not resolve: mappings were not captured"
for s in samples:
    assert s["labels"]["pid"] == sys.argv[2] and s["labels"]["executable"].endswith("/burn")
PY
agent_stop

# check_burns NAME MIN_SAMPLES MIN_SHARE FILE...: the samples of the burns
# in FILEs number at least MIN_SAMPLES, at least MIN_SHARE of them
# symbolize into burn_one/burn_two, and each is labelled with the burn
# executable.
check_burns() {
	local name=$1 min_samples=$2 min_share=$3
	shift 3
	[ $# -gt 0 ] || fail "no profile for any of the $name burns"
	agent_traces "$@" >"$AGENT_TMP/traces-$name.json"
	python3 - "$AGENT_TMP/traces-$name.json" "$name" "$min_samples" "$min_share" <<'PY'
import json, sys
name, min_samples, min_share = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
samples = [json.loads(l) for l in open(sys.argv[1])]
total = sum(s["n"] for s in samples)
burn = sum(s["n"] for s in samples if s["frames"][0] in ("burn_two", "burn_one"))
print(f"{name} burns: {burn} of {total} samples symbolized into burn_two/burn_one")
assert total >= min_samples, f"only {total} samples, expected at least {min_samples}"
assert burn >= min_share * total, "short-lived processes' mappings were not captured"
for s in samples:
    assert s["labels"]["executable"].endswith("/burn"), s["labels"]
PY
}

# burn_many NAME COUNT SECONDS MIN_SAMPLES MIN_SHARE: runs COUNT burns of
# SECONDS of CPU one after another under an agent at 499 Hz, then
# check_burns their profiles.
burn_many() {
	local name=$1 count=$2 secs=$3 min_samples=$4 min_share=$5 out="$AGENT_TMP/profiles-$1" p f
	local pids=() files=()
	agent_start "$out" --profiling-duration=3s --profiling-cpu-sampling-frequency=499 --http-address=
	for _ in $(seq 1 "$count"); do
		"$AGENT_TESTBIN/burn" "$secs" >/dev/null & pids+=($!)
		wait $!
	done
	agent_stop
	for p in "${pids[@]}"; do
		for f in $(agent_files "$out" "$p" burn); do files+=("$f"); done
	done
	check_burns "$name" "$min_samples" "$min_share" "${files[@]}"
}

# 40 x 60 ms at 499 Hz: ~1200 samples.
burn_many short 40 0.06 300 0.75
# 100 x 4 ms: ~200 samples. The rest is the kernel (exec, page faults) and
# the dynamic loader starting each process: named, not lost. Before the
# mmap records ~10% resolved.
burn_many tiny 100 0.004 60 0.6

# 100 children of 4 ms forked without exec by one burn process (a shell's
# subshells): no exec, so no mmap records of their own; their fork records
# give them their parent's code (its entry, or its own notes once it has
# exited too).
out="$AGENT_TMP/profiles-forked"
agent_start "$out" --profiling-duration=3s --profiling-cpu-sampling-frequency=499 --http-address=
"$AGENT_TESTBIN/burn" 0.004 1 100 >"$AGENT_TMP/forked.txt" || fail "burn with forks failed"
agent_stop
files=()
for p in $(awk '$1 == "forked" {print $2}' "$AGENT_TMP/forked.txt"); do
	for f in $(agent_files "$out" "$p" burn); do files+=("$f"); done
done
check_burns forked 60 0.6 "${files[@]}"
echo PASS
