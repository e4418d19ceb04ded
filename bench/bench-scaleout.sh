#!/usr/bin/env bash
# make bench-scaleout — the ClickHouse backend next to the embedded store on
# the same synthetic fleet (bench/bench_store.c, the bench-server fleet: 10
# nodes x 20 processes, ~100 stacks per profile per 10 s window). One run of
# bench_store on the embedded store, then one on a ClickHouse 18.16 this
# script starts on loopback (tests/lib/clickhouse.bash), written through two
# store instances (two stateless kiln servers) and queried from one of them.
# Prints, side by side: sample rows/s per core of kiln and of ClickHouse,
# bytes per sample row on disk, merge of 1 h of one process and of
# everything.
#
#   SCALE=0.02 (default)  ~0.5 h of data; SCALE=1 is 24 h (long)
#   THREADS=16            writer connections
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=build}" "${SCALE:=0.02}" "${THREADS:=16}"
bin=$OUT/bench/bench_store
[ -x "$bin" ] || { echo "bench-scaleout: $bin missing (run: make bench-scaleout)" >&2; exit 1; }
source tests/lib/clickhouse.bash
ch_available || { echo "bench-scaleout: clickhouse-server missing (make deps)" >&2; exit 1; }
D=$(mktemp -d /tmp/kiln-bench-scaleout.XXXXXX)
chmod 711 "$D"
trap 'ch_stop; rm -rf "$D"' EXIT
ch_start "$D/ch" >/dev/null

ch_cpu() { # utime + stime of the clickhouse-server process, seconds
	local pid
	pid=$(pgrep -P "$CH_PID" | head -1)
	awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/${pid:-$CH_PID}/stat"
}

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
ch_query "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = 'kiln' AND active GROUP BY table ORDER BY table FORMAT TSV" >"$D/parts.tsv"
bytes=$(awk '{b += $3} END {print b}' "$D/parts.tsv")
sbytes=$(awk '$1 == "samples" {print $3}' "$D/parts.tsv")
echo
echo "ClickHouse tables (rows, bytes on disk):"
sed 's/^/  /' "$D/parts.tsv"
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
