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
