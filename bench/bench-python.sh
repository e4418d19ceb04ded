#!/usr/bin/env bash
# bench-python: kiln-agent with Python frames on a host of busy Python
# processes, next to `perf record -F 19 -a -g` on the same activity at the
# same time (issue 21's goal: the agent's CPU <= 1/4 of perf's).
#
#   bench/bench-python.sh [--duration SECONDS] [--processes N]   (default 60, 200)
#
# Workload: N copies of tests/integration/agent_progs/python_busy.py (a loop through run ->
# busy_outer -> busy_middle -> busy_leaf), spread round-robin over
# Debian's /usr/bin/python3 and every pyenv build of CPython 3.9-3.13
# present, started and past their start-up before the profilers. They run
# at nice 19, as in bench-agent: at equal priority N CPU hogs would leave
# each profiler 1/N of a CPU. Then kiln-agent (defaults: Python frames on,
# 19 Hz, one file per process per window, here in a scratch directory)
# and perf record -F 19 -a -g start together and run DURATION seconds.
#
# Printed:
#   each profiler's CPU (user+sys over its whole life, start-up and
#     shut-down included: its rusage, what /proc/PID/stat says at exit),
#     the agent's as a ratio of perf's, the agent's peak RSS;
#   samples of the workload each profiler took;
#   of the agent's samples of the workload, the share with Python frames
#     and the share whose Python path is complete (the frames from
#     <module> down to where the sample was, with no gap);
#   the agent's Python metrics (/metrics): processes walked, walks, BPF
#     walk time per sample (native and Python frames of a Python process),
#     Python frames per walk, failures by reason; and the BPF program's
#     mean run time per sample (kernel.bpf_stats_enabled, on for the run).
# STORE=disk (default: a fresh journaled ext4, loop-mounted) or tmp: where
# both profilers write. AGENT_BIN=path runs another build (for A/B pairs); AGENT_PERF=FILE records
# the agent with perf record -g -p into FILE meanwhile. Figures only: nothing
# here passes or fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
duration=60 nproc_work=200
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--duration=*) duration=${1#*=}; shift ;;
	--processes) nproc_work=$2; shift 2 ;;
	--processes=*) nproc_work=${1#*=}; shift ;;
	*) echo "usage: $0 [--duration SECONDS] [--processes N]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-python: needs root" >&2; exit 1; }
agent=${AGENT_BIN:-$root/build/bin/kiln-agent}
[ -x "$agent" ] || { echo "bench-python: build first (make)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench-python: perf not installed (make deps)" >&2; exit 1; }
[ -x /usr/bin/python3 ] || { echo "bench-python: /usr/bin/python3 missing" >&2; exit 1; }

interps=(/usr/bin/python3)
pyroot="${PYENV_ROOT:-$HOME/.pyenv}/versions"
for v in 3.9 3.10 3.11 3.12 3.13; do
	d=$(ls -d "$pyroot/$v".* 2>/dev/null | sort -V | tail -1) || true
	[ -n "$d" ] && [ -x "$d/bin/python$v" ] && interps+=("$d/bin/python$v")
done

tmp=$(mktemp -d /tmp/kiln-bench-python.XXXXXX)
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
mounted=
cleanup() {
	sysctl -qw kernel.bpf_stats_enabled="$stats_was" || true
	[ -z "$mounted" ] || umount "$tmp/out" || true
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
# Where both profilers write (STORE=disk|tmp), as in bench-agent: by
# default a fresh journaled ext4 in a loop-mounted image, since creating
# files on this host's /tmp costs what its recent deletions make it cost.
mkdir -p "$tmp/out"
case ${STORE:-disk} in
disk)
	truncate -s 1G "$tmp/ext4.img"
	mkfs.ext4 -q -F -O has_journal "$tmp/ext4.img"
	mount -o loop "$tmp/ext4.img" "$tmp/out" && mounted=1 ;;
tmp) ;;
*) echo "bench-python: STORE=$STORE: expected disk or tmp" >&2; exit 2 ;;
esac

python3 - "$agent" "$tmp" "$duration" "$nproc_work" "$root" "${interps[@]}" <<'PY'
import json, os, re, signal, socket, subprocess, sys, time, urllib.request

agent, tmp, duration, nproc, root = sys.argv[1:6]
interps = sys.argv[6:]
duration, nproc = float(duration), int(nproc)
sys.path.insert(0, os.path.join(root, "tests/integration/agent_progs"))
from python_check import profile_samples

script = os.path.join(root, "tests/integration/agent_progs/python_busy.py")
ready = f"{tmp}/ready"
os.mkdir(ready)
work = []
try:
    for i in range(nproc):
        exe = interps[i % len(interps)]
        work.append((exe, subprocess.Popen(["nice", "-n", "19", exe, script, "3600", ready],
                                           stdout=subprocess.DEVNULL)))
    # Past their start-up (imports): each is in its loop.
    for _ in range(1200):
        if len(os.listdir(ready)) >= nproc:
            break
        time.sleep(0.1)
    time.sleep(1)
    dead = [p.pid for _, p in work if p.poll() is not None]
    if dead:
        sys.exit(f"bench-python: {len(dead)} workload processes exited at start")
    per = {}
    for exe, _ in work:
        per[exe] = per.get(exe, 0) + 1
    print(f"workload: {nproc} Python processes (nice 19) on {os.cpu_count()} CPUs, "
          f"{duration:.0f}s: " + ", ".join(f"{n} x {e}" for e, n in per.items()))

    def bpf_prog():
        progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"],
                                          capture_output=True, text=True).stdout or "[]")
        for p in progs:
            if p.get("name") == "profile_cpu":
                return p.get("run_time_ns", 0), p.get("run_cnt", 0)
        return 0, 0

    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    out = f"{tmp}/out/agent"
    alog = open(f"{tmp}/agent.log", "w")
    t0 = time.time()
    a = subprocess.Popen([agent, f"--local-store-directory={out}",
                          f"--http-address=127.0.0.1:{port}"], stdout=alog,
                         stderr=subprocess.STDOUT)
    p = subprocess.Popen(["perf", "record", "-q", "-F", "19", "-a", "-g", "-o",
                          f"{tmp}/out/perf.data", "--", "sleep", str(duration)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # AGENT_PERF=FILE: the agent itself profiled (perf record -g -p) meanwhile.
    ap = None
    if os.environ.get("AGENT_PERF"):
        ap = subprocess.Popen(["perf", "record", "-q", "-F", "999", "-g", "-p", str(a.pid), "-o",
                               os.environ["AGENT_PERF"]], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(duration)
    if ap:
        ap.send_signal(signal.SIGINT)
        ap.wait()
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    bpf_ns, bpf_n = bpf_prog()
    a.send_signal(signal.SIGINT)
    _, astatus, aru = os.wait4(a.pid, 0)
    _, _, pru = os.wait4(p.pid, 0)
finally:
    for _, w in work:
        w.kill()
    for _, w in work:
        w.wait()
if astatus:
    sys.exit("bench-python: the agent failed:\n" + open(f"{tmp}/agent.log").read()[-3000:])

pids = {w.pid: exe for exe, w in work}
a_cpu = aru.ru_utime + aru.ru_stime
p_cpu = pru.ru_utime + pru.ru_stime

# The agent's samples of the workload: Python path complete or not.
path = ["<module>", "run", "busy_outer", "busy_middle", "busy_leaf"]
total = with_py = complete = 0
by_exe = {}
for f in os.listdir(out):
    m = re.match(r"[^_]+_(\d+)_", f)
    if not m or int(m.group(1)) not in pids:
        continue
    exe = pids[int(m.group(1))]
    for frames, n, _ in profile_samples(os.path.join(out, f)):
        py = [fr[1] for fr in frames if fr[0] == "py"][::-1]  # outermost first
        ok = len(py) >= 2 and py == path[:len(py)]
        total += n
        with_py += n if py else 0
        complete += n if ok else 0
        t = by_exe.setdefault(exe, [0, 0])
        t[0] += n
        t[1] += n if ok else 0
perf_txt = subprocess.run(["perf", "script", "-i", f"{tmp}/out/perf.data", "-F", "pid"],
                          capture_output=True, text=True).stdout
perf_work = sum(1 for l in perf_txt.split() if l.strip().isdigit() and int(l) in pids)

def metric(name, label=None):
    for line in metrics.splitlines():
        if line.startswith("#"):
            continue
        k, _, v = line.rpartition(" ")
        if k == name or (label and k == f'{name}{{{label}}}'):
            return float(v)
    return 0.0

print()
print(f"CPU (s, user+sys, whole life): kiln-agent {a_cpu:.2f} ({100 * a_cpu / duration:.2f}% "
      f"of a core), perf record -F 19 -a -g {p_cpu:.2f} ({100 * p_cpu / duration:.2f}%)")
print(f"agent / perf: {a_cpu / p_cpu if p_cpu else float('inf'):.3f}   (goal <= 0.25)")
print(f"agent peak RSS: {aru.ru_maxrss / 1024:.1f} MB")
print(f"samples of the workload: agent {total}, perf {perf_work}")
if total:
    print(f"agent samples with Python frames: {100 * with_py / total:.1f}%; "
          f"Python path complete: {100 * complete / total:.1f}%")
    print("  complete, by interpreter: " + ", ".join(
        f"{'debian ' if e == '/usr/bin/python3' else ''}{os.path.basename(e)} "
        f"{100 * c / n:.0f}% of {n}" for e, (n, c) in sorted(by_exe.items())))
walks = metric("kiln_agent_python_walks_total")
ws = metric("kiln_agent_python_walk_seconds_total")
frames = metric("kiln_agent_python_frames_total")
print(f"agent Python: {metric('kiln_agent_python_processes_total'):.0f} processes walked, "
      f"{walks:.0f} walks, {1e6 * ws / walks if walks else 0:.1f} us BPF walk per sample "
      f"(native + Python frames), {frames / walks if walks else 0:.1f} Python frames per walk")
fails = [(m.group(1), float(m.group(2))) for m in re.finditer(
    r'^kiln_agent_python_walk_failures_total\{reason="([^"]+)"\} (\S+)$', metrics, re.M)]
print("  failures: " + ", ".join(f"{r} {v:.0f}" for r, v in fails))
if bpf_n:
    print(f"BPF program: {bpf_ns / bpf_n / 1000:.1f} us mean per sample over {bpf_n} samples "
          "(kernel bpf_stats; idle CPUs included)")
PY
