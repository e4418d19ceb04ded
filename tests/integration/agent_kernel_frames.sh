#!/usr/bin/env bash
# A syscall-heavy process (read /dev/zero, write /dev/null) must show named
# kernel frames: the read path (vfs_read or ksys_read) above the process's
# user frames (libc's syscall wrapper), every kernel name being a real
# /proc/kallsyms text symbol. The agent writes the per-process layout here
# (--local-store-layout=process: TIME_PID_COMM.pb.gz, one per process).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build syscalls
out="$AGENT_TMP/profiles"
agent_start "$out" --profiling-duration=5m --http-address= --local-store-layout=process

"$AGENT_TESTBIN/syscalls" 2 >/dev/null & spid=$!
wait $spid
agent_stop

files=$(ls "$out"/*_"$spid"_syscalls.pb.gz 2>/dev/null) || true
[ -n "$files" ] || fail "no profile file for syscalls (pid $spid): $(ls "$out")"
agent_traces $files >"$AGENT_TMP/traces.json"
awk '$2 ~ /^[tTwW]$/ {print $3}' /proc/kallsyms | sort -u >"$AGENT_TMP/ksyms"
python3 - "$AGENT_TMP/traces.json" "$AGENT_TMP/ksyms" <<'PY'
import json, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
ksyms = set(open(sys.argv[2]).read().split())
total = sum(s["n"] for s in samples)
read_path = 0
for s in samples:
    f = s["frames"]
    hits = [i for i, name in enumerate(f) if name in ("vfs_read", "ksys_read")]
    if not hits:
        continue
    read_path += s["n"]
    user = [i for i, name in enumerate(f) if name not in ksyms]
    assert user and user[0] > hits[0], f"no user frames below the kernel ones: {f}"
    # Every frame down to the read path is a kernel function by name.
    for name in f[: hits[0] + 1]:
        assert name in ksyms, f"kernel frame {name!r} is not a kallsyms symbol: {f}"
print(f"{read_path} of {total} samples in the read path")
assert total > 0 and read_path >= 0.4 * total, f"only {read_path}/{total} samples show vfs_read/ksys_read"
PY
echo PASS
