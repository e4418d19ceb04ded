#!/usr/bin/env bash
# make bench-query — flame graph tree, JSON, folded and top from src/query on
# synthetic profiles with ~10k, 100k and 500k tree nodes, next to `go tool
# pprof -top` and `-traces` on the same profile files (the peer).
#
# Prints, per size: tree build and JSON write CPU time, JSON bytes per node, and
# wall times of whole processes: `bench_query top` vs `go tool pprof -top`,
# `bench_query folded` vs `go tool pprof -traces` (ratio = go / kiln). Then the
# server's flame graph query on the same profile written into a store, as CPU
# time: through a pprof profile (store_merge + to_profile + tree, the old path)
# vs folded straight from the store (query_tree_add_store, what kiln does).
# Figures only; never fails on time. SIZES="10000 100000" to choose sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bench/bench_query
[ -x "$bin" ] || { echo "bench-query: $bin missing (run: make bench-query)" >&2; exit 1; }
command -v go >/dev/null || { echo "bench-query: go not found (make deps installs golang-go)" >&2; exit 1; }
dir=$(mktemp -d /tmp/kiln-bench-query-XXXXXX)
trap 'rm -rf "$dir"' EXIT
: "${SIZES:=10000 100000 500000}"
store_rows=()
filter_rows=()

# wall time of a command in ms (best of 3), output discarded
wall_ms() {
	local best="" t0 t1 ms
	for _ in 1 2 3; do
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1
		t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 ))
		if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
	done
	echo "$best"
}

printf '%-8s %8s %7s %9s %9s %11s %9s | %9s %9s %6s | %9s %9s %6s\n' \
	nodes samples height build_ms json_ms json_B/node json_MB \
	top_ms go_top_ms ratio fold_ms go_trc_ms ratio
for n in $SIZES; do
	f=$dir/profile-$n.pb.gz
	"$bin" gen "$n" "$f"
	declare -A m=()
	while read -r k v; do m[$k]=$v; done < <("$bin" measure "$f")
	kt=$(wall_ms "$bin" top "$f")
	gt=$(wall_ms go tool pprof -top -sample_index=cpu "$f")
	kf=$(wall_ms "$bin" folded "$f")
	gf=$(wall_ms go tool pprof -traces -sample_index=cpu "$f")
	printf '%-8s %8s %7s %9s %9s %11s %9.1f | %9s %9s %6.1f | %9s %9s %6.1f\n' \
		"${m[nodes]}" "${m[samples]}" "${m[height]}" "${m[build_ms]}" "${m[json_ms]}" \
		"${m[json_bytes_per_node]}" "$(awk "BEGIN{print ${m[json_bytes]}/1e6}")" \
		"$kt" "$gt" "$(awk "BEGIN{print $gt/($kt>0?$kt:1)}")" \
		"$kf" "$gf" "$(awk "BEGIN{print $gf/($kf>0?$kf:1)}")"
	gfoc=$(wall_ms go tool pprof -top -sample_index=cpu -focus='Component1[0-9]::' "$f")
	gpeek=$(wall_ms go tool pprof -peek="^${m[sandwich_fn]//./\\.}\$" -sample_index=cpu "$f")
	filter_rows+=("$(printf '%-8s %9s %9s %11s | %11s %11s' "${m[nodes]}" "${m[focus_ms]}" \
		"${m[hide_ms]}" "${m[sandwich_ms]}" "$gfoc" "$gpeek")")
	store_rows+=("$(printf '%-8s %14s %9s %14s %9s %6.1f %5s' "${m[nodes]}" \
		"${m[store_via_pprof_first_ms]}" "${m[store_via_pprof_ms]}" \
		"${m[store_direct_first_ms]}" "${m[store_direct_ms]}" \
		"$(awk "BEGIN{print ${m[store_via_pprof_ms]}/(${m[store_direct_ms]}>0?${m[store_direct_ms]}:1)}")" \
		"$([ "${m[store_same_json]}" = 1 ] && echo yes || echo NO)")")
	unset m
done
echo "(build/json: in-process thread CPU time, best of 3; top/fold vs go: whole-process wall time,"
echo " best of 3, each including decoding the gzipped profile; ratio = go tool pprof / kiln)"
echo
echo "server flame graph query on a store holding the profile (thread CPU ms; first and best of 3):"
printf '%-8s %14s %9s %14s %9s %6s %5s\n' nodes via_pprof_1st via_pprof direct_1st direct ratio same
printf '%s\n' "${store_rows[@]}"
echo "(via_pprof: store_merge -> pprof profile -> tree; direct: query_tree_add_store; same = identical JSON)"
echo
echo "frame filters and the sandwich view, tree build (thread CPU ms, best of 3), next to go tool"
echo "pprof's whole-process wall time for -focus and -peek on the same file (decode included):"
printf '%-8s %9s %9s %11s | %11s %11s\n' nodes focus_ms hide_ms sandwich_ms go_focus_ms go_peek_ms
printf '%s\n' "${filter_rows[@]}"
echo "(focus/hide: 'Component1[0-9]::'; sandwich: callers + callees of the widest function)"

# --- The deploy-regression report over 24 h × 200 processes ----------------------
# A store with REGRESS_PROCS processes' CPU profiles over REGRESS_HOURS hours,
# one profile per process every REGRESS_INTERVAL seconds (bench_query_regress;
# a +5-point regression in one function in the second half), served by the
# real server. Timed: GET /api/v1/query?mode=diff&report=regression (first
# half against second half) as a user's curl sees it, with the default 12
# windows a side (1 h each) and with 6 (2 h, the store's block length: the
# range ends on a 2 h boundary, so each window is whole blocks and is read
# from their per-series rollups instead of their rows), while
# `go tool pprof -top -diff_base=A B` runs at the same time on the two
# halves' merged profiles (fetched from the same server), best of 3 each.
# REGRESS=0 skips it.
if [ "${REGRESS:-1}" != 0 ]; then
	: "${REGRESS_PROCS:=200}" "${REGRESS_HOURS:=24}" "${REGRESS_INTERVAL:=60}"
	rbin=build/bench/bench_query_regress
	[ -x "$rbin" ] && [ -x build/bin/kiln ] || { echo "bench-query: $rbin or build/bin/kiln missing" >&2; exit 1; }
	rdir=$(mktemp -d /dev/shm/kiln-bench-regress-XXXXXX 2>/dev/null || mktemp -d /tmp/kiln-bench-regress-XXXXXX)
	kpid=
	trap 'rm -rf "$dir" "$rdir"; [ -n "$kpid" ] && kill "$kpid" 2>/dev/null' EXIT
	end_ms=$(($(date +%s) / 7200 * 7200 * 1000))
	start_ms=$((end_ms - REGRESS_HOURS * 3600000))
	mid_ms=$((start_ms + REGRESS_HOURS * 1800000))
	declare -A fill=()
	while read -r k v; do fill[$k]=$v; done < <("$rbin" "$rdir/data" "$REGRESS_PROCS" \
		"$REGRESS_HOURS" "$REGRESS_INTERVAL" "$end_ms" 2>/dev/null)
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	build/bin/kiln --http-address=127.0.0.1:$port --storage-path="$rdir/data" >"$rdir/kiln.log" 2>&1 &
	kpid=$!
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break; sleep 0.1; done
	rq='bench_regress:cpu:nanoseconds:cpu:nanoseconds:delta{job="regress"}'
	side() { # side a|b START END: the merged pprof of one half
		curl -sf -G "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$rq" \
			--data-urlencode report=pprof --data-urlencode start="$2" --data-urlencode end="$3" \
			-o "$rdir/$1.pb.gz"
	}
	side a "$start_ms" $((mid_ms - 1)) && side b "$mid_ms" "$end_ms" || { echo "bench-query: fetching the halves failed" >&2; exit 1; }
	report() {
		curl -sf -G "http://127.0.0.1:$port/api/v1/query" -o "$rdir/regress.json" -w '%{time_total}' \
			--data-urlencode mode=diff --data-urlencode report=regression \
			--data-urlencode "a_query=$rq" --data-urlencode "a_start=$start_ms" \
			--data-urlencode "a_end=$((mid_ms - 1))" --data-urlencode "b_query=$rq" \
			--data-urlencode "b_start=$mid_ms" --data-urlencode "b_end=$((end_ms - 1))" \
			--data-urlencode "buckets=$1"
	}
	echo
	echo "deploy-regression report, ${REGRESS_HOURS} h x ${REGRESS_PROCS} processes (one profile per process every ${REGRESS_INTERVAL} s:"
	echo " ${fill[profiles]:-?} profiles, written in ${fill[write_s]:-?} s), first half vs second:"
	printf '%-28s %10s | %-40s %9s\n' "kiln report (curl)" wall_ms "go tool pprof -top -diff_base, same time" wall_ms
	for buckets in 12 6; do
		best_k="" best_g=""
		for _ in 1 2 3; do
			g0=$(date +%s%N)
			(go tool pprof -top -diff_base="$rdir/a.pb.gz" "$rdir/b.pb.gz" >/dev/null 2>&1; date +%s%N >"$rdir/g1") &
			gp=$!
			k=$(report "$buckets") || { echo "bench-query: the regression report failed" >&2; exit 1; }
			wait "$gp"
			g=$(( ($(cat "$rdir/g1") - g0) / 1000000 ))
			k=$(awk "BEGIN{printf \"%d\", $k * 1000}")
			if [ -z "$best_k" ] || [ "$k" -lt "$best_k" ]; then best_k=$k; fi
			if [ -z "$best_g" ] || [ "$g" -lt "$best_g" ]; then best_g=$g; fi
		done
		first=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"]; print(r[0]["name"], r[0]["verdict"]) if r else print("none")' "$rdir/regress.json")
		printf '%-28s %10s | %-40s %9s   first: %s\n' "$buckets windows a side" "$best_k" "" "$best_g" "$first"
	done
	kill "$kpid" 2>/dev/null; wait "$kpid" 2>/dev/null; kpid=
	echo "(wall time, best of 3, each report run while go tool pprof runs; 12 windows: 1 h, read from"
	echo " block rows; 6 windows: 2 h on block boundaries, read from block rollups)"
fi
