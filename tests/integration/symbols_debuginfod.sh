#!/usr/bin/env bash
# Symbolization through a real debuginfod (Debian's elfutils server) on
# loopback: it serves an unstripped build of a test program; Kiln is given
# only the stripped copy, fetches the debuginfo by GNU build ID, caches it
# under its storage path, and resolves function names, files, lines and the
# inlined frame exactly as binutils' addr2line does on the unstripped build.
# A build ID debuginfod does not know stays unresolved ("[binary] +0x...").
set -euo pipefail
: "${KILN_BIN:=$(cd "$(dirname "$0")/../.." && pwd)/build/san/bin}"
kilnctl=$KILN_BIN/kilnctl
command -v debuginfod >/dev/null || { echo "debuginfod not installed (make deps)"; exit 77; }

work=$(mktemp -d /tmp/kiln-debuginfod-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/srv" "$work/cache"
cp "$(dirname "$0")/symbols_progs/hot_loop.c" "$work/prog.c"
gcc -g -O2 -Wl,--build-id -o "$work/srv/prog" "$work/prog.c"
strip -o "$work/prog.stripped" "$work/srv/prog"
build_id=$(readelf -n "$work/srv/prog" | awk '/Build ID/ {print $3}')

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
debuginfod -F "$work/srv" -p "$port" -d "$work/db.sqlite" -t 1 >"$work/debuginfod.log" 2>&1 &
pid=$!
url=http://127.0.0.1:$port
# Wait until debuginfod has scanned the directory and serves the build ID.
for i in $(seq 1 120); do
	curl -sf -o /dev/null "$url/buildid/$build_id/debuginfo" && break
	sleep 0.5
done
curl -sf -o /dev/null "$url/buildid/$build_id/debuginfo" || { echo "debuginfod never served $build_id"; tail "$work/debuginfod.log"; exit 1; }

# Every instruction of hot_loop, within its symbol size.
read -r start size < <(nm -S "$work/srv/prog" | awk '$4 == "hot_loop" {print $1, $2}')
addrs=$(objdump -d --no-show-raw-insn "$work/srv/prog" | awk '/<hot_loop>:/,/^$/' |
	grep -oE '^ +[0-9a-f]+:' | tr -d ' :' |
	while read -r a; do (( 16#$a >= 16#$start && 16#$a < 16#$start + 16#$size )) && echo "0x$a"; done)
[ -n "$addrs" ] || { echo "no addresses"; exit 1; }

# Without debuginfo the stripped binary resolves nothing in hot_loop.
first=$(echo "$addrs" | head -1)
"$kilnctl" debuginfo symbolize -e "$work/prog.stripped" "$first" | head -1 | grep -q '^\[prog.stripped\] +0x' ||
	{ echo "stripped binary unexpectedly resolved"; exit 1; }

# With debuginfod: identical to addr2line on the unstripped build.
# shellcheck disable=SC2086
"$kilnctl" debuginfo symbolize -e "$work/prog.stripped" --debuginfod-url="$url" \
	--cache-dir="$work/cache" --timeout=20 $addrs >"$work/kiln.out"
# shellcheck disable=SC2086
addr2line -i -f -e "$work/srv/prog" $addrs | sed 's/ (discriminator [0-9]*)//' >"$work/addr2line.out"
if ! diff -u "$work/addr2line.out" "$work/kiln.out"; then
	echo "kiln and addr2line disagree"
	exit 1
fi
grep -qx hot_loop "$work/kiln.out"
grep -qx mix "$work/kiln.out" # the inlined frame
[ -s "$work/cache/debuginfo/$build_id/debuginfo" ] || { echo "fetched debuginfo not cached"; exit 1; }

# A build ID no upstream has: unresolved, and the answer comes back.
gcc -O2 -Wl,--build-id=0x0123456789abcdef -o "$work/other" "$work/prog.c"
strip "$work/other"
out=$("$kilnctl" debuginfo symbolize -e "$work/other" --debuginfod-url="$url" --cache-dir="$work/cache" \
	--timeout=5 0x1000 | head -1)
case "$out" in "[other] +0x1000") ;; *) echo "unexpected: $out"; exit 1 ;; esac

# Served from the cache, with debuginfod gone.
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
# shellcheck disable=SC2086
"$kilnctl" debuginfo symbolize -e "$work/prog.stripped" --debuginfod-url="$url" \
	--cache-dir="$work/cache" --timeout=5 $addrs | cmp - "$work/kiln.out"

echo "ok: $(grep -c . "$work/kiln.out") lines match addr2line via debuginfod"
