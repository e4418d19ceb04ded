#!/usr/bin/env bash
# The streaming ingest protocol (IngestService/Push) against WriteRaw on the
# same simulated agent data, each against a fresh real server (release
# build), run by `make bench-server` (or alone: bench/bench-stream.sh):
#   rate   AGENTS agents pushing windows back to back: rows/s per core of the
#          server's CPU (network receive -> WAL fsync -> queryable), for both
#          protocols; request bytes per row in steady state
#   fleet  FLEET agents x 20 processes x 100 stacks, one window per 10 s each,
#          for FLEET_S seconds (stream protocol): server CPU share of one
#          core from the second window on, lost windows, session memory per
#          agent (kiln_stream_session_bytes), server RSS
# CPU is the server process's (utime+stime from /proc) during the run.
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${AGENTS:=32}" "${WINDOWS:=8}" "${FLEET:=1000}" "${FLEET_S:=40}" "${THREADS:=8}"
kiln=build/bin/kiln
gen=build/bench/stream_loadgen
[ -x "$kiln" ] && [ -x "$gen" ] || { echo "bench-stream: build first (make && make build/bench/stream_loadgen)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/kiln-bench-stream.XXXXXX)
spid=""
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
start_server() {
	local p=$1 d=$2
	"$kiln" --http-address=127.0.0.1:$p --storage-path="$d" --max-connections=4096 \
		--max-connections-per-client=0 --log-level=warn >"$tmp/kiln.log" 2>&1 &
	spid=$!
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$p/ready" >/dev/null && return; sleep 0.1; done
	echo "server not ready: $(cat "$tmp/kiln.log")" >&2
	exit 1
}
stop_server() { kill "$spid"; wait "$spid" 2>/dev/null || true; spid=""; }
hz=$(getconf CLK_TCK)

echo "== stream ingest vs WriteRaw: $AGENTS agents x 20 processes x 100 stacks, $WINDOWS windows each, back to back"
for proto in writeraw stream; do
	p=$(port)
	start_server $p "$tmp/$proto"
	c0=$(cpu_ticks $spid)
	line=$("$gen" 127.0.0.1:$p $proto "$AGENTS" 20 100 "$WINDOWS" 0 "$THREADS")
	c1=$(cpu_ticks $spid)
	stop_server
	rows=$(sed 's/.* rows=\([0-9]*\).*/\1/' <<<"$line")
	bpr=$(sed 's/.*steady_bytes_per_row=\([0-9.]*\).*/\1/' <<<"$line")
	lost=$(sed 's/.*windows_lost=\([0-9]*\).*/\1/' <<<"$line")
	wall=$(sed 's/.*wall_ms=\([0-9]*\).*/\1/' <<<"$line")
	awk -v p=$proto -v r=$rows -v c=$((c1 - c0)) -v hz=$hz -v b=$bpr -v l=$lost -v w=$wall 'BEGIN {
		cpu = c / hz; printf "%-8s rows=%d server_cpu_s=%.2f rows_per_s_per_core=%.0f wall_rows_per_s=%.0f bytes_per_row=%.2f lost_windows=%d\n",
		p, r, cpu, (cpu > 0 ? r / cpu : 0), (w > 0 ? r * 1000 / w : 0), b, l }'
done

echo "== fleet: $FLEET agents x 20 processes x 100 stacks, one window / 10 s each, ${FLEET_S}s (stream)"
p=$(port)
start_server $p "$tmp/fleet"
"$gen" 127.0.0.1:$p stream "$FLEET" 20 100 $((FLEET_S / 10)) 10000 "$THREADS" >"$tmp/fleet.out" &
gpid=$!
# The first window of each agent describes its 2,000 stacks; the steady
# state (rows by reference) is measured from the second on.
sleep 12
c0=$(cpu_ticks $spid)
t0=$(date +%s.%N)
wait $gpid || true
t1=$(date +%s.%N)
c1=$(cpu_ticks $spid)
line=$(cat "$tmp/fleet.out")
sess=$(curl -sf "http://127.0.0.1:$p/metrics" | awk '/^kiln_stream_sessions / {n=$2} /^kiln_stream_session_bytes / {b=$2} END {printf "%d %d", n, b}')
rss=$(rss_kb $spid)
stop_server
awk -v c=$((c1 - c0)) -v hz=$hz -v t0=$t0 -v t1=$t1 -v rss=$rss -v n=$FLEET -v sess="$sess" -v line="$line" 'BEGIN {
	split(line, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
	split(sess, sb, " ")
	printf "fleet    agents=%d windows_acked=%s lost_windows=%s steady_server_cpu_share_of_one_core=%.1f%% sessions=%d session_bytes_per_agent=%.0f server_rss_mib=%.0f bytes_per_row=%s\n",
	n, v["windows_acked"], v["windows_lost"], 100 * c / hz / (t1 - t0), sb[1], sb[1] ? sb[2] / sb[1] : 0, rss / 1024, v["steady_bytes_per_row"] }'
