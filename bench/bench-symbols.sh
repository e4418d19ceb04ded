#!/usr/bin/env bash
# make bench-symbols: symbolizer throughput on real binaries, next to binutils'
# addr2line -i -f and elfutils' eu-addr2line -i -f resolving the same
# addresses in the same run. Prints figures and ratios; never fails on time.
#
# Addresses: for each binary, up to $N distinct addresses spread over its
# function symbols (a uniformly random offset inside each sampled function,
# seeded, so runs are comparable) — the shape of a day of all-process
# profiles, where every hot function contributes a handful of locations.
# Binaries: glibc (through its Debian debug file, libc6-dbg: full DWARF),
# the kiln server binary (DWARF, -O2 -g), and Debian's libLLVM-14 (a large
# C++ library: 60k+ exported symbols, no DWARF -> the symbol-table path).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_SYMBOLS_N:-20000}
EU_N=${BENCH_SYMBOLS_EU_N:-2000}
driver=build/bin/bench_symbols
[ -x "$driver" ] || make -s "$driver"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

libc_debug=""
libc=$(ldd /bin/true | awk '/libc.so/ {print $3}')
if id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID/ {print $3}') &&
	[ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
	libc_debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
fi
llvm=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-1*.so.1 /usr/lib/llvm-*/lib/libLLVM-*.so.1 2>/dev/null | head -1 || true)
binaries=()
[ -n "$libc_debug" ] && binaries+=("$libc_debug") || binaries+=("$libc")
binaries+=("$(pwd)/build/bin/kiln")
[ -n "$llvm" ] && binaries+=("$(readlink -f "$llvm")")

now() { date +%s.%N; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.0f", (t > 0 ? n / t : 0) }'; }

printf '%-34s %7s %11s %11s %11s %11s %8s %8s %9s\n' binary addrs kiln_cold/s kiln_warm/s \
	addr2line/s eu-a2l/s cold/a2l cold/eu rss_MB
for bin in "${binaries[@]}"; do
	# Function symbols with a size (.symtab, else .dynsym), N distinct addresses.
	{ nm -S --defined-only "$bin" 2>/dev/null; nm -D -S --defined-only "$bin" 2>/dev/null; } |
		awk '$3 ~ /^[tTwWiI]$/ && NF == 4 && $2 != "0000000000000000" {print $1, $2}' | sort -u >"$tmp/syms"
	python3 - "$N" "$tmp/syms" <<'PY' >"$tmp/addrs"
import random, sys
n = int(sys.argv[1])
syms = [tuple(int(x, 16) for x in l.split()) for l in open(sys.argv[2])]
rng, seen = random.Random(42), set()
for _ in range(n * 4):
    if not syms or len(seen) >= n:
        break
    start, size = rng.choice(syms)
    a = start + rng.randrange(size)
    if a not in seen:
        seen.add(a)
        print(hex(a))
PY

	n=$(wc -l <"$tmp/addrs")
	[ "$n" -gt 0 ] || { echo "$bin: no function symbols, skipped"; continue; }

	out=$("$driver" "$bin" "$tmp/addrs")
	cold=$(sed 's/.*cold_per_s=\([0-9]*\).*/\1/' <<<"$out")
	warm=$(sed 's/.*warm_per_s=\([0-9]*\).*/\1/' <<<"$out")
	rss=$(sed 's/.*maxrss_kb=\([0-9]*\).*/\1/' <<<"$out")

	t0=$(now); addr2line -i -f -e "$bin" <"$tmp/addrs" >/dev/null || true; t1=$(now)
	a2l=$(rate "$n" "$(echo "$t1 - $t0" | bc)")
	# eu-addr2line is slow on large symbol-table-only objects (about 100
	# addresses/s on libLLVM): it gets the first $EU_N addresses.
	head -n "$EU_N" "$tmp/addrs" >"$tmp/addrs.eu"
	t0=$(now); eu-addr2line -i -f -e "$bin" <"$tmp/addrs.eu" >/dev/null || true; t1=$(now)
	eu=$(rate "$(wc -l <"$tmp/addrs.eu")" "$(echo "$t1 - $t0" | bc)")
	printf '%-34s %7d %11d %11d %11d %11d %7.1fx %7.1fx %9.1f\n' "$(basename "$bin" | cut -c1-34)" "$n" \
		"$cold" "$warm" "$a2l" "$eu" "$(echo "$cold / $a2l" | bc -l)" "$(echo "$cold / $eu" | bc -l)" \
		"$(echo "$rss / 1024" | bc -l)"
	echo "  ($out)"
done
echo "goals: kiln_warm >= 200000/s; kiln_cold >= 10x addr2line (eu-addr2line timed on the first $EU_N addresses)"
