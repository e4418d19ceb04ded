#!/usr/bin/env bash
# make bench-symbols: symbolizer throughput on real binaries, next to binutils'
# addr2line -i -f and elfutils' eu-addr2line -i -f resolving the same
# addresses in the same run. Prints figures and ratios; never fails on time.
#
# Addresses: for each binary, up to $N distinct addresses spread over its
# function symbols (a uniformly random offset inside each sampled function,
# seeded, so runs are comparable) — the shape of a day of all-process
# profiles, where every hot function contributes a handful of locations.
# Kiln's cold pass is one symbolizer_resolve_batch of all the addresses, as
# the server's background pass resolves an object's pending locations
# (bench_symbols -1 runs it address by address instead), on two threads for
# a large object as the server's (BENCH_SYMBOLS_THREADS=1: on one); warm
# passes are address by address, answered by the result cache.
# Binaries: glibc (through its Debian debug file, libc6-dbg: full DWARF),
# the kiln server binary (DWARF, -O2 -g), and Debian's libLLVM-14 (a large
# C++ library: 60k+ exported symbols, no DWARF -> the symbol-table path).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${BENCH_SYMBOLS_N:-20000}
EU_N=${BENCH_SYMBOLS_EU_N:-2000}
RUNS=${BENCH_SYMBOLS_RUNS:-3}
THREADS=${BENCH_SYMBOLS_THREADS:-0}
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

rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.0f", (t > 0 ? n / t : 0) }'; }
# timed IN CMD...: runs CMD with stdin from IN, prints "WALL_S CPU_S" (CPU:
# user + system of the command, which a loaded machine inflates far less).
timed() {
	# (The difference of two readings: the interpreter may start with
	# children's time already counted.)
	python3 -c 'import resource, subprocess, sys, time
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.monotonic()
subprocess.run(sys.argv[2:], stdin=open(sys.argv[1]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
w = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.4f %.4f" % (w, r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime))' "$@"
}

printf '%-34s %7s %11s %11s %11s %11s %8s %8s %9s %9s\n' binary addrs kiln_cold/s kiln_warm/s \
	addr2line/s eu-a2l/s cold/a2l cold/eu cpu/a2l rss_MB
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

	# Best of $RUNS for kiln and for addr2line, alternating, so that both
	# see the same machine (shared CI cores are noisy).
	cold=0 cold_cpu=0 warm=0 rss=0 a2l=0 a2l_cpu=0 out=
	for _ in $(seq 1 "$RUNS"); do
		o=$("$driver" -t "$THREADS" "$bin" "$tmp/addrs")
		c=$(sed 's/.*cold_per_s=\([0-9]*\).*/\1/' <<<"$o")
		[ "$c" -gt "$cold" ] && cold=$c out=$o
		c=$(sed 's/.*cold_per_cpu_s=\([0-9]*\).*/\1/' <<<"$o")
		[ "$c" -gt "$cold_cpu" ] && cold_cpu=$c
		c=$(sed 's/.*warm_per_s=\([0-9]*\).*/\1/' <<<"$o")
		[ "$c" -gt "$warm" ] && warm=$c
		c=$(sed 's/.*maxrss_kb=\([0-9]*\).*/\1/' <<<"$o")
		[ "$c" -gt "$rss" ] && rss=$c
		read -r w u < <(timed "$tmp/addrs" addr2line -i -f -e "$bin")
		c=$(rate "$n" "$w")
		[ "$c" -gt "$a2l" ] && a2l=$c
		c=$(rate "$n" "$u")
		[ "$c" -gt "$a2l_cpu" ] && a2l_cpu=$c
	done
	# eu-addr2line is slow on large symbol-table-only objects (about 100
	# addresses/s on libLLVM): it gets the first $EU_N addresses.
	head -n "$EU_N" "$tmp/addrs" >"$tmp/addrs.eu"
	read -r eu_wall _ < <(timed "$tmp/addrs.eu" eu-addr2line -i -f -e "$bin")
	eu=$(rate "$(wc -l <"$tmp/addrs.eu")" "$eu_wall")
	label=$(basename "$bin")
	[ "$bin" = "$libc_debug" ] && label="libc.so.6 (libc6-dbg debug file)"
	printf '%-34s %7d %11d %11d %11d %11d %7.1fx %7.1fx %8.1fx %9.1f\n' "${label:0:34}" "$n" \
		"$cold" "$warm" "$a2l" "$eu" "$(echo "$cold / $a2l" | bc -l)" "$(echo "$cold / $eu" | bc -l)" \
		"$(echo "$cold_cpu / $a2l_cpu" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
	echo "  ($out)"
done
echo "goals: kiln_warm >= 200000/s; kiln_cold >= 10x addr2line (eu-addr2line timed on the first $EU_N addresses)"
echo "cpu/a2l: the same ratio in CPU time (kiln's cold pass vs addr2line's user+system time;"
echo "  kiln's on all of its threads: a large object's batch takes two, BENCH_SYMBOLS_THREADS=1 one)"
