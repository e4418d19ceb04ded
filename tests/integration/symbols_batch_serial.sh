#!/usr/bin/env bash
# The symbolizer's batch (symbolizer_resolve_batch: the server's cold pass,
# CU by CU, on two threads, the first batch of a file streaming its units
# while .debug_info inflates) answers exactly as the serial reference path
# (symbolizer_resolve, address by address) and as a batch on one thread,
# byte for byte, on big binaries: glibc's debug file, python3.11, cc1 and
# the kiln binary under test (tests/symbols/dump_resolutions.sh picks the
# addresses and prints the frames).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KILN_BIN:=$PWD/build/san/bin}"
fail() { echo "FAIL: $*" >&2; exit 1; }
driver=$KILN_BIN/bench_symbols
if [ ! -x "$driver" ]; then
	san=0
	[[ "$KILN_BIN" == */san/* ]] && san=1
	make -s SAN=$san "${driver#"$PWD"/}" >/dev/null || fail "precondition: cannot build $driver"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$KILN_BIN/kiln" "$tmp/kiln.frozen"
DUMP_N=${DUMP_N:-4000} BENCH_SYMBOLS=$driver tests/symbols/dump_resolutions.sh "$tmp/out" >"$tmp/log"
cat "$tmp/log"
n=0
for b in "$tmp"/out/*.batch; do
	name=$(basename "$b" .batch)
	[ -s "$b" ] || fail "$name: no answers"
	grep -q '^0x[0-9a-f]* [^?]' "$b" || fail "$name: no address named"
	cmp "$b" "$tmp/out/$name.serial" || fail "$name: batch and serial answers differ"
	cmp "$b" "$tmp/out/$name.t1" || fail "$name: batch on one thread differs"
	n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "only $n binaries dumped"
echo "PASS: $n binaries, batch = serial = one thread"
