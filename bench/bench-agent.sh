#!/usr/bin/env bash
# bench-agent: kiln-agent's cost on a busy host, next to `perf record -F 19
# -a -g` on the same workload in the same run.
#
#   bench/bench-agent.sh [--duration SECONDS] [--processes N]   (default 60, 200)
#
# Workload: N copies of the agent tests' burn program (frame pointers, two
# hot functions), which keep every CPU busy. They run at nice 19, as batch
# work would: at equal priority 200 CPU hogs would leave each profiler (and
# anything else on the host) 1/100 of a CPU. Each profiler then runs alone
# for DURATION seconds on that workload; its CPU time (user+sys, from
# wait4's rusage, start-up included) is reported as % of one core, with
# its peak RSS, samples handled per second and samples lost. The agent's
# steady-state CPU (after a 3 s warm-up, from /proc/PID/stat) is shown too.
# A third run (PUSH=0 skips it) has the agent push to a kiln server
# started here instead of writing files: the production path.
#
# Where the files go (STORE=disk|tmp|tmpfs): both profilers write to the
# same place. disk (the default) is a fresh ext4 file system with a journal,
# as a production host has, made in an image file and loop-mounted for this
# run; tmp is /tmp itself; tmpfs is memory. Why not /tmp by default: the
# root file system of the machines this runs on is ext4 without a journal,
# where each file create scans the inode group for recently deleted inodes
# (30 us in a quiet group, 200-300 us for minutes after anything deleted
# files nearby, this bench's own clean-up included), so the agent's ~1,000
# files a minute made its figure follow the host's recent deletions.
# Figures only: nothing here passes or fails on time.
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
[ "$(id -u)" -eq 0 ] || { echo "bench-agent: needs root" >&2; exit 1; }
agent=${AGENT_BIN:-$root/build/bin/kiln-agent} # AGENT_BIN: another build, for before/after pairs
[ -x "$agent" ] || { echo "bench-agent: build first (make)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench-agent: perf not installed (make deps)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/kiln-bench-agent.XXXXXX)
pids=()
mounted=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -z "$mounted" ] || umount "$tmp/out" || true
	rm -rf "$tmp"
}
trap cleanup EXIT

store=${STORE:-disk}
mkdir -p "$tmp/out"
case $store in
disk)
	truncate -s 1G "$tmp/ext4.img"
	mkfs.ext4 -q -F -O has_journal "$tmp/ext4.img"
	mount -o loop "$tmp/ext4.img" "$tmp/out" && mounted=1 ;;
tmpfs) mount -t tmpfs -o size=1G kiln-bench "$tmp/out" && mounted=1 ;;
tmp) ;;
*) echo "bench-agent: STORE=$store: expected disk, tmp or tmpfs" >&2; exit 2 ;;
esac

mkdir -p build/agent-test
gcc -O0 -g -fno-omit-frame-pointer -pthread -o build/agent-test/burn \
	tests/integration/agent_progs/burn.c
for _ in $(seq 1 "$nproc_work"); do
	nice -n 19 build/agent-test/burn 1000000 >/dev/null &
	pids+=($!)
done
sleep 2
echo "workload: $nproc_work burn processes on $(nproc) CPUs; ${duration}s per profiler"

# The production path: the agent pushing to a real kiln server on this
# host (PUSH=0 skips it). Only the agent's CPU is counted; the server's is
# part of the workload, as on a host running both.
kiln=$root/build/bin/kiln port=0
if [ "${PUSH:-1}" != 0 ] && [ -x "$kiln" ]; then
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$kiln" --http-address=127.0.0.1:$port --storage-path="$tmp/kiln-data" >"$tmp/kiln.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
	curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { cat "$tmp/kiln.log"; exit 1; }
fi

echo "agent: --local-store-layout=${LAYOUT:-process} (LAYOUT=window|process)"
case $store in
disk) echo "files: a fresh journaled ext4 (loop-mounted image) for both profilers (STORE=disk|tmp|tmpfs)" ;;
tmpfs) echo "files: a tmpfs for both profilers (STORE=disk|tmp|tmpfs)" ;;
tmp) echo "files: $tmp on /tmp's file system for both profilers (STORE=disk|tmp|tmpfs)" ;;
esac
python3 - "$agent" "$tmp" "$duration" "${LAYOUT:-process}" "$port" "$tmp/out" <<'PY'
import os, re, signal, subprocess, sys, time

agent, tmp, duration, layout = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
port = int(sys.argv[5])
out = sys.argv[6]
tick = os.sysconf("SC_CLK_TCK")

def stat_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def run(argv, stop_with_sigint, ready=None):
    log = open(f"{tmp}/log", "w+")
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    while ready and ready not in open(f"{tmp}/log").read():
        if p.poll() is not None:
            sys.exit("profiler exited at start:\n" + open(f"{tmp}/log").read())
        time.sleep(0.05)
    time.sleep(3)
    warm = stat_cpu(p.pid)
    time.sleep(max(duration - 3, 0))
    late = stat_cpu(p.pid)
    if stop_with_sigint:
        p.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    log.seek(0)
    out = log.read()
    return dict(cpu=ru.ru_utime + ru.ru_stime, rss_mb=ru.ru_maxrss / 1024, wall=wall,
                steady=(late - warm) / max(duration - 3, 1e-9), out=out)

def totals(x):
    m = re.search(r"stopped: (\d+) samples received, (\d+) taken in the kernel, (\d+) lost",
                  x["out"])
    if not m:
        sys.exit("agent did not report its totals:\n" + x["out"])
    return map(int, m.groups())

a = run([agent, f"--local-store-directory={out}/profiles", f"--local-store-layout={layout}",
          "--http-address="], True,
        "profiling every CPU")
a_samples, a_kernel, a_lost = totals(a)
nfiles = len(os.listdir(f"{out}/profiles"))
r = None
if port:
    r = run([agent, f"--remote-store-address=127.0.0.1:{port}", "--remote-store-insecure",
             "--http-address="], True, "profiling every CPU")
    r_samples, r_kernel, r_lost = totals(r)
    if re.search(r"WriteRaw failed|dropping", r["out"]):
        sys.exit("the push failed:\n" + r["out"])

p = run(["perf", "record", "-F", "19", "-a", "-g", "-o", f"{out}/perf.data", "--",
         "sleep", str(duration)], False)
m = re.search(r"\((\d+) samples\)", p["out"])
p_samples = int(m.group(1)) if m else -1
lost = re.search(r"lost (\d+)", p["out"], re.I)
p_lost = int(lost.group(1)) if lost else 0

def pct(x):
    return 100.0 * x["cpu"] / x["wall"]

cols = [("kiln-agent", a, a_samples, a_kernel - a_samples + a_lost)]
if r:
    cols.append(("agent->kiln", r, r_samples, r_kernel - r_samples + r_lost))
cols.append(("perf record", p, p_samples, p_lost))
print(f"{'':28}" + "".join(f"{c[0]:>14}" for c in cols))
print(f"{'CPU, % of one core':28}" + "".join(f"{pct(c[1]):13.3f}%" for c in cols))
print(f"{'  steady state (after 3 s)':28}" + "".join(f"{100 * c[1]['steady']:13.3f}%" for c in cols))
print(f"{'CPU seconds':28}" + "".join(f"{c[1]['cpu']:14.3f}" for c in cols))
print(f"{'peak RSS, MB':28}" + "".join(f"{c[1]['rss_mb']:14.1f}" for c in cols))
print(f"{'samples/s handled':28}" + "".join(f"{c[2] / c[1]['wall']:14.1f}" for c in cols))
print(f"{'samples lost':28}" + "".join(f"{c[3]:14d}" for c in cols))
print(f"agent/perf CPU ratio: {a['cpu'] / p['cpu']:.3f}   (agent wrote {nfiles} files to its local store)")
if r:
    print(f"agent->kiln/perf CPU ratio: {r['cpu'] / p['cpu']:.3f}   (pushing to kiln on 127.0.0.1, "
          "debuginfo upload on)")
PY
