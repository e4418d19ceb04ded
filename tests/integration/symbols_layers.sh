#!/usr/bin/env bash
# src/symbols stays layered (symbols.h has the map): each object file of
# the module calls only files below it in this order, never one above it
# or one that calls it back. Read from the compiled objects (nm), so it
# checks what the code does, not what its comments say.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KILN_BIN:=$PWD/build/san/bin}"
fail() { echo "FAIL: $*" >&2; exit 1; }
obj=$(dirname "$KILN_BIN")/obj/symbols
[ -f "$obj/symbolizer.o" ] || fail "precondition: $obj/symbolizer.o not built"
# Bottom first; a file may call only files listed before it (a line is
# one layer, symbols.h's map).
order=(
	dwarf_form dwarf_line_header dwarf_line dwarf_abbrev dwarf_die dwarf_walk dwarf_info
	hugemem rcache inflate
	demangle elfinfo debuginfo extract
	symtab cu_index symfile
	resolve
	batch stream_batch
	symbolizer
)
declare -A rank
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
for o in "$obj"/*.o; do
	f=$(basename "$o" .o)
	[ -n "${rank[$f]+x}" ] || fail "$f.o: not in the layer order of this test (add it where it belongs)"
done
declare -A def
for o in "$obj"/*.o; do
	f=$(basename "$o" .o)
	while read -r s; do def[$s]=$f; done < <(nm --defined-only "$o" | awk '$2 ~ /^[TDRB]$/ {print $3}')
done
bad=0
for o in "$obj"/*.o; do
	f=$(basename "$o" .o)
	while read -r s; do
		t=${def[$s]:-}
		[ -n "$t" ] && [ "$t" != "$f" ] || continue
		if [ "${rank[$t]}" -gt "${rank[$f]}" ]; then
			echo "$f calls $s in $t, a layer above it" >&2
			bad=1
		fi
	done < <(nm -u "$o" | awk '{print $2}')
done
[ "$bad" -eq 0 ] || fail "src/symbols calls up a layer"
echo "PASS: ${#order[@]} files of src/symbols, every call goes down"
