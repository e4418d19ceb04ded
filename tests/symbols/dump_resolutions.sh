#!/usr/bin/env bash
# dump_resolutions.sh OUTDIR [BINARY...] — the symbolizer's answers for many
# addresses of a few big binaries, one file per binary and path, to compare
# byte for byte before and after a change to src/symbols:
#
#   tests/symbols/dump_resolutions.sh /tmp/before   # on the old commit
#   tests/symbols/dump_resolutions.sh /tmp/after    # on the new one
#   diff -r /tmp/before /tmp/after
#
# Binaries (default): glibc's debug file (libc6-dbg: full DWARF) else libc,
# python3.11 and GCC's cc1 (symbol tables), and a copy of the kiln server
# binary frozen in OUTDIR/../kiln.frozen on the first run (rebuilding kiln
# moves its addresses, so both runs must read the same copy).
# Each binary's addresses: up to $DUMP_N (default 20000) seeded random offsets
# inside its function symbols, as bench-symbols.sh picks them. Each is
# resolved three ways, each file "0xADDR function [system_name] file:line
# decl N" per frame, a blank line after each address:
#   NAME.batch    one symbolizer_resolve_batch (the server's cold pass);
#   NAME.serial   address by address (symbolizer_resolve): the reference
#                 path the batch must agree with (tests/integration/
#                 symbols_batch_serial.sh checks that they do);
#   NAME.t1       one batch on one thread.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: dump_resolutions.sh OUTDIR [BINARY...]}
shift
N=${DUMP_N:-20000}
driver=${BENCH_SYMBOLS:-build/bin/bench_symbols}
[ -x "$driver" ] || make -s "$driver"
mkdir -p "$out"

if [ $# -eq 0 ]; then
	libc=$(ldd /bin/true | awk '/libc.so/ {print $3}')
	id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID/ {print $3}')
	dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
	[ -n "$id" ] && [ -f "$dbg" ] && set -- "$dbg" || set -- "$libc"
	[ -x /usr/bin/python3.11 ] && set -- "$@" /usr/bin/python3.11
	cc1=$(ls /usr/lib/gcc/x86_64-linux-gnu/*/cc1 2>/dev/null | head -1 || true)
	[ -n "$cc1" ] && set -- "$@" "$cc1"
	frozen="$out/../kiln.frozen"
	[ -f "$frozen" ] || cp build/bin/kiln "$frozen"
	set -- "$@" "$(readlink -f "$frozen")"
fi

for bin in "$@"; do
	name=$(basename "$bin")
	{ nm -S --defined-only "$bin" 2>/dev/null; nm -D -S --defined-only "$bin" 2>/dev/null; } |
		awk '$3 ~ /^[tTwWiI]$/ && NF == 4 && $2 != "0000000000000000" {print $1, $2}' |
		sort -u >"$out/$name.syms"
	python3 - "$N" "$out/$name.syms" >"$out/$name.addrs" <<'PY'
import random, sys
n = int(sys.argv[1])
syms = [tuple(int(x, 16) for x in l.split()) for l in open(sys.argv[2])]
rng, seen = random.Random(7), set()
for _ in range(n * 4):
    if not syms or len(seen) >= n:
        break
    start, size = rng.choice(syms)
    a = start + rng.randrange(size)
    if a not in seen:
        seen.add(a)
        print(hex(a))
PY
	rm -f "$out/$name.syms"
	"$driver" -w 0 -p "$bin" "$out/$name.addrs" | sed '$d' >"$out/$name.batch"
	"$driver" -w 0 -p -1 "$bin" "$out/$name.addrs" | sed '$d' >"$out/$name.serial"
	"$driver" -w 0 -p -t 1 "$bin" "$out/$name.addrs" | sed '$d' >"$out/$name.t1"
	echo "$name: $(wc -l <"$out/$name.addrs") addresses, $(grep -c . "$out/$name.batch") frames"
done
