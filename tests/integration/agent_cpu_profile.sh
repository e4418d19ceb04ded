#!/usr/bin/env bash
# kiln-agent on a known workload: burn (2 threads) spends CPU in burn_two and
# burn_one at 2:1 (fixed work per call, and it measures the CPU time each
# function really used), both called from burn_caller. Checks, on the files
# the agent writes (symbolized independently by `go tool pprof -symbolize=local`
# from the binary on disk): sample count ~ frequency x CPU seconds (+-25%),
# the burn_two share of samples against the measured CPU share (a binomial
# bound: sampling at 199 Hz gives ~1000 samples, so noise is a few percent
# and a loaded machine cannot push the ratio out of bounds by chance; at
# 19 Hz the ~110 samples of the old test made 2:1 vs 1.5:1 a 2-sigma
# event), burn_caller in every burn stack, per-sample thread labels, the
# build ID of the mapping, -tagfocus on series labels, SIGINT flushing the
# partial window (the window is longer than the test), and /metrics.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
out="$AGENT_TMP/profiles"
port=$(free_port)
agent_start "$out" --profiling-duration=5m --profiling-cpu-sampling-frequency=199 \
	--http-address=127.0.0.1:$port \
	--metadata-external-labels=team=kiln,env=test

cpu=$("$AGENT_TESTBIN/burn" 2.5 2 & bp=$!; echo $bp >"$AGENT_TMP/burn.pid"; wait $bp)
bpid=$(cat "$AGENT_TMP/burn.pid")
sleep 0.5
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
agent_stop

files=$(agent_files "$out" "$bpid" burn)
[ -n "$files" ] || fail "no profile for burn (pid $bpid): $(ls "$out")"
agent_traces $files >"$AGENT_TMP/traces.json"
python3 - "$AGENT_TMP/traces.json" "$cpu" "$bpid" <<'PY'
import json, math, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
cpu, cpu_two, cpu_one = (float(x) for x in sys.argv[2].split())
pid = sys.argv[3]
total = sum(s["n"] for s in samples)
expect = 199 * cpu
print(f"samples {total}, expected ~{expect:.0f} from {cpu:.2f} CPU s")
assert abs(total - expect) <= 0.25 * expect, f"sample count {total} not within 25% of {expect:.0f}"
two = sum(s["n"] for s in samples if s["frames"][0] == "burn_two")
one = sum(s["n"] for s in samples if s["frames"][0] == "burn_one")
print(f"burn_two {two}, burn_one {one}")
assert two + one >= 0.8 * total, f"only {two + one} of {total} samples in burn_two/burn_one"
# The burn_two share of the two functions' samples against the share of
# CPU time burn measured in burn_two: binomial, so within 4.5 standard
# deviations except once in ~150000 runs.
p = cpu_two / (cpu_two + cpu_one)
n = two + one
share = two / n
sd = math.sqrt(p * (1 - p) / n)
print(f"burn_two:burn_one samples {two / max(one, 1):.2f}, CPU {cpu_two / cpu_one:.2f}; "
      f"share {share:.3f} vs {p:.3f} (z = {(share - p) / sd:+.2f})")
assert abs(share - p) <= 4.5 * sd, f"burn_two share {share:.3f}, CPU share {p:.3f}"
# burn's own split: 2:1 in work, but on a shared VM its measured CPU ratio
# runs from ~1.1 to 2 with no profiler at all (cache and frequency
# effects, and the host's other tenants); the check above compares the
# profile with what burn measured, so this one only asks that burn_two was
# the heavier.
assert 1.0 < cpu_two / cpu_one <= 2.5, "burn itself did not spend more in burn_two"
for s in samples:
    f = s["frames"]
    if f[0] in ("burn_two", "burn_one"):
        assert len(f) > 1 and f[1] == "burn_caller", f"stack without burn_caller: {f}"
        assert "thread_main" in f, f"stack without thread_main: {f}"
    l = s["labels"]
    assert l.get("pid") == pid and l.get("comm") == "burn", l
    assert l.get("executable", "").endswith("/build/agent-test/burn"), l
    assert l.get("team") == "kiln" and l.get("env") == "test", l
    assert l.get("node") and l.get("kernel_release") and l.get("cgroup"), l
    assert l.get("thread_name") == "burn" and l.get("thread_id", "").isdigit(), l
tids = {s["labels"]["thread_id"] for s in samples}
assert len(tids) == 2, f"want samples from 2 threads, got {tids}"
PY

# The mapping carries the binary's GNU build ID (compared with readelf's).
want=$(readelf -n "$AGENT_TESTBIN/burn" | awk '/Build ID/ {print $3}')
go tool pprof -raw $files 2>/dev/null | grep -q "build/agent-test/burn $want" ||
	fail "mapping of burn lacks build ID $want: $(go tool pprof -raw $files 2>/dev/null | grep -A5 Mappings)"

# -tagfocus on a series label selects exactly burn's samples among the
# pid's files (the pid also ran as "bash" between fork and exec; other
# agents' burners on a shared host may be in the other files).
all=$(pprof_samples -tagfocus=comm=burn $(agent_files "$out" "$bpid"))
mine=$(pprof_samples $files)
[ -n "$mine" ] && [ "$all" = "$mine" ] || fail "-tagfocus=comm=burn gave $all samples, burn has $mine"

# /metrics counts what was seen.
grep -q '^kiln_agent_samples_total [1-9]' <<<"$metrics" || fail "metrics: $metrics"
grep -q '^kiln_agent_processes_tracked ' <<<"$metrics" || fail "metrics: $metrics"
grep -q 'kiln_agent_dropped_samples_total{reason="ringbuf_full"} 0' <<<"$metrics" ||
	fail "samples dropped: $metrics"
echo PASS
