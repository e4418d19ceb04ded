#!/usr/bin/env bash
# make bench-scaleout — the ClickHouse backend next to the embedded store on
# the same synthetic fleet (bench/bench_store.c, the bench-server fleet: 10
# nodes x 20 processes, ~100 stacks per profile per 10 s window). One run of
# bench_store on the embedded store, then one on a ClickHouse 18.16 this
# script starts on loopback (tests/lib/clickhouse.bash), written through two
# store instances (two stateless kiln servers) and queried from one of them.
# Prints, side by side: sample rows/s per core of kiln and of ClickHouse,
# bytes per sample row on disk (and per ClickHouse column), merge of 1 h of
# one process and of everything.
#
# Then the fleet: FLEET simulated agents (bench/stream_loadgen.c, the
# agent's own stream encoder) pushing one window per 10 s each over real
# connections, spread over two real kiln servers (release build) on the
# same ClickHouse, for FLEET_S seconds: lost windows, p50/p99 push latency,
# the windows and rows ClickHouse holds afterwards, and the CPU of the two
# servers and of ClickHouse.
#
#   SCALE=0.02 (default)  ~0.5 h of data; SCALE=1 is 24 h (long)
#   THREADS=16            writer connections
#   FLEET=1000 FLEET_S=60 FLEET_PROCS=2 FLEET_STACKS=100 FLEET_THREADS=64
#                         the fleet (FLEET_S=600: the issue's 10 minutes)
#   PART=all|store|fleet  which half to run
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=build}" "${SCALE:=0.02}" "${THREADS:=16}" "${PART:=all}"
: "${FLEET:=1000}" "${FLEET_S:=60}" "${FLEET_PROCS:=2}" "${FLEET_STACKS:=100}" "${FLEET_THREADS:=64}"
bin=$OUT/bench/bench_store
gen=$OUT/bench/stream_loadgen
kiln=$OUT/bin/kiln
for f in "$bin" "$gen" "$kiln"; do
	[ -x "$f" ] || { echo "bench-scaleout: $f missing (run: make bench-scaleout)" >&2; exit 1; }
done
source tests/lib/clickhouse.bash
ch_available || { echo "bench-scaleout: clickhouse-server missing (make deps)" >&2; exit 1; }
D=$(mktemp -d /tmp/kiln-bench-scaleout.XXXXXX)
chmod 711 "$D"
KPIDS=()
cleanup() {
	for p in "${KPIDS[@]}"; do kill "$p" 2>/dev/null && { wait "$p" 2>/dev/null || true; }; done
	ch_stop || true # its pkill finds nothing when the server already exited
	rm -rf "$D"
}
trap cleanup EXIT
ch_start "$D/ch" >/dev/null

ch_cpu() { # utime + stime of the clickhouse-server process, seconds
	local pid
	pid=$(pgrep -P "$CH_PID" | head -1)
	awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/${pid:-$CH_PID}/stat"
}


ch_cpu_of() { # utime + stime of process $1, seconds
	awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
kiln_up() { # PORT NAME: a release kiln on the ClickHouse, database fleet
	"$kiln" --http-address=127.0.0.1:$1 --storage-path="$D/$2" --storage=clickhouse \
		--clickhouse-url="$CH_URL" --clickhouse-database=fleet --max-connections=4096 \
		--max-connections-per-client=0 --log-level=warn >"$D/$2.log" 2>&1 &
	KPIDS+=($!)
	for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$1/ready" >/dev/null && return; sleep 0.1; done
	echo "bench-scaleout: kiln $2 not ready: $(cat "$D/$2.log")" >&2
	exit 1
}

fleet() {
	echo
	echo "== fleet: $FLEET agents x $FLEET_PROCS processes x $FLEET_STACKS stacks, one window / 10 s each, ${FLEET_S} s, stream protocol, two kiln servers on one ClickHouse =="
	local p1 p2 c0 c1 k0 k1 line
	p1=$(ch_free_port)
	p2=$(ch_free_port)
	kiln_up "$p1" k1
	kiln_up "$p2" k2
	c0=$(ch_cpu)
	k0=$(echo "$(ch_cpu_of "${KPIDS[0]}") + $(ch_cpu_of "${KPIDS[1]}")" | bc)
	line=$("$gen" "127.0.0.1:$p1,127.0.0.1:$p2" stream "$FLEET" "$FLEET_PROCS" "$FLEET_STACKS" \
		$((FLEET_S / 10)) 10000 "$FLEET_THREADS" 2>"$D/fleet.err") || true
	c1=$(ch_cpu)
	k1=$(echo "$(ch_cpu_of "${KPIDS[0]}") + $(ch_cpu_of "${KPIDS[1]}")" | bc)
	echo "loadgen: $line"
	if [ -s "$D/fleet.err" ]; then
		echo "loadgen errors (first 5):"
		head -5 "$D/fleet.err" | sed 's/^/  /'
	fi
	local windows rows
	windows=$(ch_query "SELECT count() FROM fleet.samples WHERE type_hash = 0 AND series_hash = 0 AND stack_hash != 0")
	rows=$(ch_query "SELECT count() FROM fleet.samples WHERE type_hash > 1")
	awk -v line="$line" -v w="$windows" -v r="$rows" -v kc="$(echo "$k1 - $k0" | bc)" \
		-v cc="$(echo "$c1 - $c0" | bc)" -v s="$FLEET_S" 'BEGIN {
		split(line, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
		printf "fleet: windows acknowledged %s, lost %s; in ClickHouse: %d windows, %d sample rows; push latency p50 %s ms, p99 %s ms, max %s ms; CPU over the run: two kiln servers %.1f s, ClickHouse %.1f s (%.0f%% of one core together)\n",
		v["windows_acked"], v["windows_lost"], w, r, v["push_p50_ms"], v["push_p99_ms"], v["push_max_ms"], kc, cc, 100 * (kc + cc) / (v["wall_ms"] / 1000) }'
}

if [ "$PART" != fleet ]; then
echo "== embedded store =="
"$bin" run "$D/emb" --scale "$SCALE" --threads "$THREADS" --ingest-threads 8 | tee "$D/emb.txt"
echo
echo "== ClickHouse $(ch_query 'SELECT version()') through two kiln store instances =="
c0=$(ch_cpu)
BENCH_CLICKHOUSE_URL=$CH_URL "$bin" run "$D/ch-run" --scale "$SCALE" --threads "$THREADS" \
	--ingest-threads 8 | tee "$D/ch.txt"
c1=$(ch_cpu)
rows=$(ch_query "SELECT count() FROM kiln.samples WHERE type_hash > 1")
totals=$(ch_query "SELECT count() FROM kiln.samples WHERE type_hash <= 1")
ch_query "SELECT table, name, sum(data_compressed_bytes) FROM system.columns WHERE database = 'kiln' GROUP BY table, name ORDER BY table, name FORMAT TSV" >"$D/columns.tsv"
ch_query "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = 'kiln' AND active GROUP BY table ORDER BY table FORMAT TSV" >"$D/parts.tsv"
bytes=$(awk '{b += $3} END {print b}' "$D/parts.tsv")
sbytes=$(awk '$1 == "samples" {print $3}' "$D/parts.tsv")
echo
echo "ClickHouse tables (rows, bytes on disk):"
sed 's/^/  /' "$D/parts.tsv"
echo "ClickHouse columns (bytes per sample row, compressed):"
awk -v r="$rows" '{printf "  %s.%s %.2f\n", $1, $2, $3 / r}' "$D/columns.tsv"
echo
echo "== side by side (SCALE=$SCALE) =="
pick() { grep -m1 "$2" "$1" | sed 's/^ *//'; }
echo "embedded:   $(pick "$D/emb.txt" '^ingest:')"
echo "clickhouse: $(pick "$D/ch.txt" '^ingest:')"
awk -v c="$(echo "$c1 - $c0" | bc)" -v r="$rows" \
	'BEGIN {printf "clickhouse-server CPU during ingest and merges: %.1f s = %.0f sample rows per CPU-second\n", c, r / (c > 0 ? c : 1)}'
echo "embedded:   $(pick "$D/emb.txt" '^disk:')"
awk -v b="$bytes" -v s="$sbytes" -v r="$rows" -v t="$totals" 'BEGIN {
	printf "clickhouse: %d sample rows (+ %d profile-total and batch-marker rows): %.2f bytes per sample row on disk, all tables; samples table alone %.2f\n", r, t, b / r, s / r }'
for what in '^merge one process' '^merge everything'; do
	echo "embedded:   $(pick "$D/emb.txt" "$what")"
	echo "clickhouse: $(pick "$D/ch.txt" "$what")"
done
# The figure above is the parts as the run left them; ClickHouse keeps
# merging parts in the background, which shrinks the LowCardinality
# dictionaries (one per part). Merged into one part per partition:
for t in samples stacks locations functions mappings series; do
	ch_query "OPTIMIZE TABLE kiln.$t FINAL" >/dev/null
done
bytes=$(ch_query "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'kiln' AND active")
sbytes=$(ch_query "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'kiln' AND table = 'samples' AND active")
awk -v b="$bytes" -v s="$sbytes" -v r="$rows" 'BEGIN {
	printf "clickhouse, parts merged (OPTIMIZE FINAL): %.2f bytes per sample row on disk, all tables; samples table alone %.2f\n", b / r, s / r }'
fi
[ "$PART" = store ] || fleet
