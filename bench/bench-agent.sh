#!/usr/bin/env bash
# bench-agent: kiln-agent's cost on a busy host, next to `perf record -F 19
# -a -g` on the same workload in the same run.
#
#   bench/bench-agent.sh [--duration SECONDS] [--processes N]   (default 60, 200)
#
# Workload: N copies of the agent tests' burn program (frame pointers, two
# hot functions), which keep every CPU busy. They run at nice 19, as batch
# work would: at equal priority 200 CPU hogs would leave each profiler (and
# anything else on the host) 1/100 of a CPU. The profilers all run at the
# same time for DURATION seconds on that workload, so that each sees the
# same host activity (on a shared host, runs one after another did not:
# other work came and went between them); each one's CPU time (user+sys, from
# wait4's rusage, start-up included) is reported as % of one core, with
# its peak RSS, samples handled per second and samples lost. The agent's
# steady-state CPU (after a 3 s warm-up, from /proc/PID/stat) is shown too.
# Beside the agent writing files (PUSH=0 leaves these out), one agent
# pushes to a kiln server started here: the production path, over the
# streaming protocol (IngestService/Push); another pushes the same way
# with --remote-store-protocol=writeraw. PUSH_FLAGS adds flags to both
# (PUSH_FLAGS=--debuginfo-upload-disable: the push alone, without the
# one-off upload of each binary's debug info).
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
#
# Off-CPU case (bench/bench-agent.sh --off-cpu [--duration SECONDS], default
# 20): instead of the burners, bench_pingpong (two threads passing a byte
# over pipes, paced to ~100k context switches a second; TRIPS=N per second
# changes the pace), and the agent with --off-cpu-threshold (its default,
# 1ms) at the default --off-cpu-probability, then at probability 1, each
# running at the same time as `perf record -e sched:sched_switch -a -g`
# on the same activity. Per run: each profiler's CPU (rusage, % of one
# core), the time the kernel spent in the agent's off-CPU BPF programs
# (kernel.bpf_stats_enabled, switched on for the run; that time is paid
# by the switching threads, not the agent), context switches a second
# (/proc/stat) and the workload's round trips a second.
# Figures only: nothing here passes or fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
duration=60 nproc_work=200 offcpu=0
while [ $# -gt 0 ]; do
	case $1 in
	--off-cpu) offcpu=1; shift ;;
	--duration) duration=$2; shift 2 ;;
	--duration=*) duration=${1#*=}; shift ;;
	--processes) nproc_work=$2; shift 2 ;;
	--processes=*) nproc_work=${1#*=}; shift ;;
	*) echo "usage: $0 [--duration SECONDS] [--processes N] [--off-cpu]" >&2; exit 2 ;;
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
if [ "$offcpu" = 1 ]; then
	[ "$duration" = 60 ] && duration=20
	gcc -O2 -pthread -o build/agent-test/pingpong bench/bench_pingpong.c
	stats_was=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -qw kernel.bpf_stats_enabled=1
	trap 'sysctl -qw kernel.bpf_stats_enabled=$stats_was; cleanup' EXIT
	python3 - "$agent" "$tmp" "$duration" "$tmp/out" "${TRIPS:-50000}" <<'PY'
import json, os, re, signal, subprocess, sys, time

agent, tmp, duration, out, trips = sys.argv[1:6]
duration = float(duration)

def ctxt():
    for line in open("/proc/stat"):
        if line.startswith("ctxt "):
            return int(line.split()[1])

def bpf_stats():
    """{program name: (run time ns, runs)} of the off-CPU programs loaded now
    (only this agent has them)."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True,
                                      text=True).stdout or "[]")
    return {p["name"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in progs
            if p.get("name", "").startswith("offcpu_")}

def workload(secs):
    return subprocess.Popen(["build/agent-test/pingpong", str(secs), "1", trips],
                            stdout=subprocess.PIPE, text=True)

def trips_of(w):
    o = w.communicate()[0]
    m = re.search(r"(\d+) round trips/s", o)
    return int(m.group(1)) if m else -1

if bpf_stats():
    sys.exit("bench-agent: another agent's off-CPU programs are loaded; stop it first")
# The workload alone, for its pace.
c0 = ctxt(); w = workload(5); alone = trips_of(w); alone_ctxt = (ctxt() - c0) / 5
print(f"workload alone: {alone} round trips/s, {alone_ctxt:,.0f} context switches/s")

def run(label, flags):
    log = open(f"{tmp}/agent.log", "w+")
    a = subprocess.Popen([agent, f"--local-store-directory={out}/{label}", "--http-address=",
                          "--off-cpu-threshold"] + flags, stdout=log, stderr=subprocess.STDOUT)
    while "profiling every CPU" not in open(f"{tmp}/agent.log").read():
        if a.poll() is not None:
            sys.exit("agent exited at start:\n" + open(f"{tmp}/agent.log").read())
        time.sleep(0.05)
    w = workload(duration + 4)
    time.sleep(1)
    b0 = bpf_stats(); c0 = ctxt(); t0 = time.time()
    p = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_switch", "-a", "-g", "-o",
                          f"{out}/perf.data", "--", "sleep", str(duration)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    st0 = open(f"/proc/{a.pid}/stat").read().rsplit(")", 1)[1].split()
    _, _, pru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    st1 = open(f"/proc/{a.pid}/stat").read().rsplit(")", 1)[1].split()
    b1 = bpf_stats(); c1 = ctxt()
    a.send_signal(signal.SIGINT)
    _, _, aru = os.wait4(a.pid, 0)
    wtrips = trips_of(w)
    tick = os.sysconf("SC_CLK_TCK")
    a_cpu = (int(st1[11]) + int(st1[12]) - int(st0[11]) - int(st0[12])) / tick
    p_cpu = pru.ru_utime + pru.ru_stime
    perf_size = os.path.getsize(f"{out}/perf.data") / 1e6
    d = {k: (b1[k][0] - b0[k][0], b1[k][1] - b0[k][1]) for k in b1}
    sw, rs = d["offcpu_switch"], d["offcpu_resume_tp"]
    m = re.search(r"(\d+) off-CPU samples", log.read() if not log.seek(0) else "")
    return dict(label=label, agent=100 * a_cpu / wall, agent_total=aru.ru_utime + aru.ru_stime,
                bpf=100 * (sw[0] + rs[0]) / 1e9 / wall, sw_ns=sw[0] / max(sw[1], 1),
                rs_ns=rs[0] / max(rs[1], 1), samples=int(m.group(1)) / wall if m else -1,
                perf=100 * p_cpu / wall, ctxt=(c1 - c0) / wall, trips=wtrips, perf_mb=perf_size,
                files=len([f for f in os.listdir(f"{out}/{label}") if "offcpu" in f]))

rows = [run("default", []), run("p=1", ["--off-cpu-probability=1"])]
print(f"{'':44}" + "".join(f"{r['label']:>14}" for r in rows))
def line(name, fmt, key):
    print(f"{name:44}" + "".join(fmt.format(r[key]) for r in rows))
line("agent CPU, % of one core (same window)", "{:13.3f}%", "agent")
line("agent off-CPU BPF programs, % of one core", "{:13.3f}%", "bpf")
line("  ns per run: offcpu_switch", "{:14.0f}", "sw_ns")
line("  ns per run: offcpu_resume_tp (walks included)", "{:14.0f}", "rs_ns")
line("agent off-CPU samples/s (all processes)", "{:14.1f}", "samples")
line("perf record -e sched:sched_switch -a -g, %", "{:13.3f}%", "perf")
line("  perf.data, MB", "{:14.1f}", "perf_mb")
line("context switches/s (both profilers on)", "{:14,.0f}", "ctxt")
line("workload round trips/s", "{:14d}", "trips")
line("agent off-CPU files written", "{:14d}", "files")
PY
	exit 0
fi
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
kiln=$root/build/bin/kiln port=0 port2=0
# One server per pushing agent: each uploads its own debug info, as it
# would alone (with one server the first agent to ask would upload for
# both).
start_kiln() { # NAME: sets kport
	kport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$kiln" --http-address=127.0.0.1:$kport --storage-path="$tmp/kiln-$1" >"$tmp/kiln-$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$kport/ready" >/dev/null && break; sleep 0.1; done
	curl -sf "http://127.0.0.1:$kport/ready" >/dev/null || { cat "$tmp/kiln-$1.log"; exit 1; }
}
if [ "${PUSH:-1}" != 0 ] && [ -x "$kiln" ]; then
	start_kiln stream
	port=$kport
	start_kiln writeraw
	port2=$kport
fi

echo "agent: --local-store-layout=${LAYOUT:-process} (LAYOUT=window|process)"
case $store in
disk) echo "files: a fresh journaled ext4 (loop-mounted image) for both profilers (STORE=disk|tmp|tmpfs)" ;;
tmpfs) echo "files: a tmpfs for both profilers (STORE=disk|tmp|tmpfs)" ;;
tmp) echo "files: $tmp on /tmp's file system for both profilers (STORE=disk|tmp|tmpfs)" ;;
esac
python3 - "$agent" "$tmp" "$duration" "${LAYOUT:-process}" "$port" "$tmp/out" "$port2" \
	"${PUSH_FLAGS:-}" <<'PY'
import os, re, signal, subprocess, sys, time

agent, tmp, duration, layout = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
port = int(sys.argv[5])
port2 = int(sys.argv[7])
push_flags = sys.argv[8].split()
out = sys.argv[6]
tick = os.sysconf("SC_CLK_TCK")

def stat_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def start(name, argv, stop_with_sigint, ready=None):
    log = open(f"{tmp}/{name}.log", "w+")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    while ready and ready not in open(f"{tmp}/{name}.log").read():
        if p.poll() is not None:
            sys.exit("profiler exited at start:\n" + open(f"{tmp}/{name}.log").read())
        time.sleep(0.05)
    return dict(p=p, log=log, sigint=stop_with_sigint, t0=time.time())

def run_together(profilers):
    """Runs every profiler at the same time for DURATION seconds (started
    one after the other, each timed from its own start), so that all see
    the same host activity."""
    runs = [start(*x) for x in profilers]
    time.sleep(3)
    warm = [stat_cpu(x["p"].pid) for x in runs]
    time.sleep(max(duration - 3, 0))
    late = [stat_cpu(x["p"].pid) for x in runs]
    for x in runs:
        if x["sigint"]:
            x["p"].send_signal(signal.SIGINT)
    res = []
    for i, x in enumerate(runs):
        _, status, ru = os.wait4(x["p"].pid, 0)
        x["log"].seek(0)
        res.append(dict(cpu=ru.ru_utime + ru.ru_stime, rss_mb=ru.ru_maxrss / 1024,
                        wall=time.time() - x["t0"],
                        steady=(late[i] - warm[i]) / max(duration - 3, 1e-9), out=x["log"].read()))
    return res

def totals(x):
    m = re.search(r"stopped: (\d+) samples received, (\d+) taken in the kernel, (\d+) lost",
                  x["out"])
    if not m:
        sys.exit("agent did not report its totals:\n" + x["out"])
    return map(int, m.groups())

# Every profiler at once: the same activity for each (perf's own CPU is
# part of what the agents see, and theirs of what perf sees, equally).
ready = "profiling every CPU"
profilers = [("local", [agent, f"--local-store-directory={out}/profiles",
                        f"--local-store-layout={layout}", "--http-address="], True, ready)]
if port:
    profilers.append(("push", [agent, f"--remote-store-address=127.0.0.1:{port}",
                               "--remote-store-insecure", "--http-address="] + push_flags, True,
                      ready))
    # The same push over WriteRaw (one gzipped pprof per process per window).
    profilers.append(("writeraw", [agent, f"--remote-store-address=127.0.0.1:{port2}",
                                   "--remote-store-insecure", "--remote-store-protocol=writeraw",
                                   "--http-address="] + push_flags, True, ready))
profilers.append(("perf", ["perf", "record", "-F", "19", "-a", "-g", "-o", f"{out}/perf.data",
                           "--", "sleep", str(duration)], False))
res = run_together(profilers)
a, p = res[0], res[-1]
a_samples, a_kernel, a_lost = totals(a)
nfiles = len(os.listdir(f"{out}/profiles"))
r = None
if port:
    r, w = res[1], res[2]
    r_samples, r_kernel, r_lost = totals(r)
    if re.search(r"WriteRaw failed|push failed|dropping", r["out"]):
        sys.exit("the push failed:\n" + r["out"])
    w_samples, w_kernel, w_lost = totals(w)
    if re.search(r"push failed|dropping", w["out"]):
        sys.exit("the WriteRaw push failed:\n" + w["out"])

m = re.search(r"\((\d+) samples\)", p["out"])
p_samples = int(m.group(1)) if m else -1
lost = re.search(r"lost (\d+)", p["out"], re.I)
p_lost = int(lost.group(1)) if lost else 0

def pct(x):
    return 100.0 * x["cpu"] / x["wall"]

cols = [("kiln-agent", a, a_samples, a_kernel - a_samples + a_lost)]
if r:
    cols.append(("agent->kiln", r, r_samples, r_kernel - r_samples + r_lost))
    cols.append(("kiln WriteRaw", w, w_samples, w_kernel - w_samples + w_lost))
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
    upload = "off" if "--debuginfo-upload-disable" in push_flags else "on"
    print(f"agent->kiln/perf CPU ratio: {r['cpu'] / p['cpu']:.3f}   (pushing to kiln on 127.0.0.1, "
          f"stream protocol, debuginfo upload {upload})")
    print(f"agent->kiln WriteRaw/perf CPU ratio: {w['cpu'] / p['cpu']:.3f}   "
          "(--remote-store-protocol=writeraw)")
PY
