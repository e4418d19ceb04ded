#!/usr/bin/env bash
# A Python process's first samples carry its Python frames: those taken
# before the agent has the process's unwind tables (their stack copied and
# walked again in user space) get the Python frames the kernel read at the
# sample (python_chain) put in place of the eval loop's native frames.
#
# Two cases, on Debian's /usr/bin/python3 (3.11) and the pyenv builds of
# 3.12 and 3.13 (when present): processes already running when the agent
# starts, profiled for their first seconds under it (the agent
# finds them at start-up); and processes started under the agent (found
# when they map their interpreter). Windows are 1 s: a process's first
# two windows under the agent (its first 1-2 s) are looked at.
# Each runs agent_progs/python_busy.py (a loop through run -> busy_outer ->
# busy_middle -> busy_leaf). At 99 Hz, over the processes found at
# start-up, at least 30% of the samples of their first windows must have
# the Python path from <module> (before this: only those taken after the
# tables were loaded), and no sample of any of them a wrong one (a chain
# put in the wrong place). The share is not higher because user space's
# walk of a held copy gives only the leaf while the unwinder's tables for
# the interpreter are pending: such a sample takes its chain only when it
# is one eval call's frames (3.11+, no C between them; 3.9 and 3.10 make
# one eval call per Python frame). A new process is known from the first
# drain after it maps its interpreter; its share is printed, not checked.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
[ -x /usr/bin/python3 ] || fail "precondition: Debian's /usr/bin/python3 missing"
script="$AGENT_PROGS/python_busy.py"
root="${PYENV_ROOT:-$HOME/.pyenv}/versions"
interps=(/usr/bin/python3)
for v in 3.12 3.13; do
	d=$(ls -d "$root/$v".* 2>/dev/null | sort -V | tail -1) || true
	[ -n "$d" ] && [ -x "$d/bin/python$v" ] && interps+=("$d/bin/python$v")
done
echo "interpreters: ${interps[*]}"

ready="$AGENT_TMP/ready"
mkdir -p "$ready"
before=()
for exe in "${interps[@]}"; do
	"$exe" "$script" 60 "$ready" & before+=($!)
done
AGENT_CLEANUP+=("kill ${before[*]} 2>/dev/null")
for _ in $(seq 1 200); do
	[ "$(ls "$ready" | wc -l)" -ge ${#before[@]} ] && break
	sleep 0.1
done
[ "$(ls "$ready" | wc -l)" -ge ${#before[@]} ] || fail "the Python programs did not start"

out="$AGENT_TMP/profiles"
port=$(free_port)
agent_start "$out" --local-store-layout=process --profiling-duration=1s \
	--profiling-cpu-sampling-frequency=99 --http-address=127.0.0.1:$port \
	--unwind-table-max-bytes=134217728
after=()
for exe in "${interps[@]}"; do
	"$exe" "$script" 60 & after+=($!)
done
AGENT_CLEANUP+=("kill ${after[*]} 2>/dev/null")
sleep 3
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
# Stopped while the programs live: names are read from a live process, and
# a host busy elsewhere may delay the agent's drains for seconds (building
# other programs' unwind tables); what is looked at is the first windows.
agent_stop
kill "${before[@]}" "${after[@]}"
wait "${before[@]}" "${after[@]}" 2>/dev/null || true
echo "$metrics" | grep -E '^kiln_agent_(python_(processes|walks|frames)|unwind_rewalked)'

python3 - "$out" "${before[*]}" "${after[*]}" "$AGENT_PROGS" <<'PY' || fail "first samples without their Python frames"
import os, sys
sys.path.insert(0, sys.argv[4])
from python_check import profile_samples

out, before, after = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
path = ["<module>", "run", "busy_outer", "busy_middle", "busy_leaf"]
ok = True
pooled = [0, 0]
for case, pids in (("running before the agent", before), ("started under the agent", after)):
    for pid in pids:
        total = good = 0
        bad = {}
        files = sorted(f for f in os.listdir(out) if f.split("_")[1:2] == [pid])
        for f in files[:2]:
            for frames, n, _ in profile_samples(os.path.join(out, f)):
                py = [fr[1] for fr in frames if fr[0] == "py"][::-1]
                total += n
                if len(py) >= 2 and py == path[:len(py)]:
                    good += n
                else:
                    bad[tuple(py)] = bad.get(tuple(py), 0) + n
                    # a wrong path (not a start-up sample, nor unnamed)
                    if case.endswith("before the agent") and py and "?" not in py:
                        print(f"pid {pid}: wrong Python path {py}")
                        ok = False
        share = good / total if total else 0
        print(f"{case}: pid {pid}: {good} of {total} samples with the Python path "
              f"({100 * share:.0f}%); others: {sorted(bad.items(), key=lambda x: -x[1])[:3]}")
        if case.endswith("before the agent"):
            pooled[0] += good
            pooled[1] += total
if not pooled[1] or pooled[0] / pooled[1] < 0.3:
    print(f"found at start-up: {pooled[0]} of {pooled[1]} samples with the Python path")
    ok = False
sys.exit(0 if ok else 1)
PY
echo "PASS"
