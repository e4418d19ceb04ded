#!/usr/bin/env bash
# kilnctl pprof symbolize on what kiln-agent's local store wrote: user frames
# named on this host, without a server. symburn (agent_progs/symburn.c)
# burns CPU in spin_outer (with mix() inlined), in libc's qsort
# (msort_with_tmp calling back cmp_ints) and in libc's memcpy, as five
# copies profiled together (--local-store-layout=process):
#   symburn        its own DWARF; libc from /usr/lib/debug (libc6-dbg):
#                  msort_with_tmp with msort.c:LINE, the memmove variant
#   symburn-strip  stripped (no .symtab), its debug file only in a test dir:
#                  addresses by default, named with --debug-dir=DIR
#   symburn-noid   linked without a build ID: the file matched by the hash
#                  of its .text, as the agent recorded it
#   symburn-swap   replaced by another build after the run: build IDs differ,
#                  so it stays addresses
#   symburn-fifo   replaced by a FIFO after the run: never opened (no hang)
# Checked with `go tool pprof -symbolize=none` (so every name is ours) and
# kilnctl pprof top: names, inlined frames, file:line, samples and labels
# unchanged, the summary line per file, --in-place, and bad inputs (garbage,
# truncated gzip: exit 1 naming the file, the good files still written).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
# A command failing under set -e says where.
trap 'fail "line $LINENO: $BASH_COMMAND"' ERR
KILNCTL=$KILN_BIN/kilnctl
[ -x "$KILNCTL" ] || fail "precondition: $KILNCTL not built"
build_id() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }
# has REGEX CMD...: CMD's stdout matches (read whole: no SIGPIPE under
# pipefail).
has() {
	local re=$1
	shift
	grep -qE "$re" <<<"$("$@" 2>/dev/null)"
}
libc=$(ldd /bin/true | awk '/libc\.so/ {print $3}')
libc_id=$(build_id "$libc")
[ -f "/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug" ] ||
	fail "precondition: libc's debug file (libc6-dbg) for $libc_id not installed"

B=$AGENT_TMP/bin D=$AGENT_TMP/debug W=$AGENT_TMP/work
mkdir -p "$B" "$D" "$W"
src=$AGENT_PROGS/symburn.c
cc() { gcc -O0 -g -fno-omit-frame-pointer "$@" "$src"; }
cc -o "$B/symburn"
cc -DVARIANT=1 -o "$W/symburn-strip.full"
id=$(build_id "$W/symburn-strip.full")
mkdir -p "$D/.build-id/${id:0:2}"
objcopy --only-keep-debug "$W/symburn-strip.full" "$D/.build-id/${id:0:2}/${id:2}.debug"
objcopy --strip-all "$W/symburn-strip.full" "$B/symburn-strip"
has symtab readelf -S "$B/symburn-strip" && fail "symburn-strip still has a .symtab"
cc -DVARIANT=2 -Wl,--build-id=none -o "$B/symburn-noid"
[ -z "$(build_id "$B/symburn-noid")" ] || fail "symburn-noid has a GNU build ID"
cc -DVARIANT=3 -o "$B/symburn-swap"
swap_id=$(build_id "$B/symburn-swap")
cc -DVARIANT=4 -o "$B/symburn-fifo"

out=$AGENT_TMP/profiles
agent_start "$out" --profiling-duration=5m --http-address= --local-store-layout=process \
	--profiling-cpu-sampling-frequency=199
declare -A pid
for p in symburn symburn-strip symburn-noid symburn-swap symburn-fifo; do
	"$B/$p" 1.2 & pid[$p]=$!
done
for p in "${!pid[@]}"; do wait "${pid[$p]}" || fail "$p failed"; done
agent_stop

# What was profiled is gone from its path now.
cc -DVARIANT=5 -o "$B/symburn-swap"
rm "$B/symburn-fifo" && mkfifo "$B/symburn-fifo"

files_of() { ls "$out"/*_"${pid[$1]}"_*.pb.gz 2>/dev/null || true; }
for p in "${!pid[@]}"; do
	[ -n "$(files_of "$p")" ] || fail "no profile for $p (pid ${pid[$p]}): $(ls "$out")"
done
all=$(for p in "${!pid[@]}"; do files_of "$p"; done)

# pprof_top DIR PROG [FLAGS]: go tool pprof -top of PROG's files in DIR,
# names as the files have them.
pprof_top() {
	local dir=$1 p=$2; shift 2
	go tool pprof -symbolize=none -sample_index=samples -nodecount=1000 -top "$@" \
		$(files_of "$p" | xargs -n1 basename | sed "s|^|$dir/|") 2>/dev/null
}

# --- default: /usr/lib/debug and the mapped files -------------------------
mkdir "$W/named"
timeout 120 "$KILNCTL" pprof symbolize -o "$W/named" $all 2>"$W/summary" ||
	fail "symbolize failed: $(cat "$W/summary")"
cat "$W/summary"
[ "$(wc -l <"$W/summary")" -eq "$(wc -w <<<"$all")" ] || fail "not one summary line per file"
grep -qE ': [0-9]+ of [0-9]+ locations named' "$W/summary" || fail "summary: $(cat "$W/summary")"

top=$(pprof_top "$W/named" symburn)
# A function is shown "(inline)" or "(partial-inline)" when some stacks
# reach it through an inlined call (libc inlines msort_with_tmp in qsort_r).
inl='( \((partial-)?inline\))?$'
for fn in spin_outer cmp_ints msort_with_tmp main; do
	grep -qE " $fn$inl" <<<"$top" || fail "symburn: $fn not named: $top"
done
grep -qE ' mix \(inline\)$' <<<"$top" || fail "symburn: inlined mix not shown: $top"
grep -qE " __(memmove|memcpy)_[a-z0-9_]+$inl" <<<"$top" || fail "symburn: no libc memmove: $top"
# libc's names come from its DWARF in /usr/lib/debug: file and line.
has " msort_with_tmp \S*msort\.c:[0-9]+$inl" pprof_top "$W/named" symburn -lines ||
	fail "msort_with_tmp without msort.c:LINE: $(pprof_top "$W/named" symburn -lines | head -20)"
has " spin_outer $src:[0-9]+\$" pprof_top "$W/named" symburn -lines ||
	fail "spin_outer without its file:line"
# Callers: cmp_ints is called back from msort_with_tmp, mix inlined in
# spin_outer, spin_outer called from main.
go tool pprof -symbolize=none -sample_index=samples -traces $(files_of symburn |
	xargs -n1 basename | sed "s|^|$W/named/|") 2>/dev/null |
	python3 "$AGENT_PROGS/traces.py" >"$W/traces.json"
python3 - "$W/traces.json" <<'PY'
import json, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
def after(a, b):
    return sum(s["n"] for s in samples
               if a in s["frames"] and s["frames"].index(a) + 1 < len(s["frames"])
               and s["frames"][s["frames"].index(a) + 1] == b)
assert after("cmp_ints", "msort_with_tmp") > 0, "cmp_ints never under msort_with_tmp"
assert after("mix (inline)", "spin_outer") > 0, "mix not inlined into spin_outer"
assert after("spin_outer", "main") > 0, "spin_outer not called from main"
for s in samples:
    assert s["labels"].get("comm") == "symburn" or s["labels"].get("comm") == "bash", s["labels"]
print("traces ok:", sum(s["n"] for s in samples), "samples")
PY

# Samples, labels and kernel frames as the agent wrote them.
for p in symburn symburn-strip; do
	before=$(pprof_samples $(files_of "$p"))
	after=$(pprof_samples $(files_of "$p" | xargs -n1 basename | sed "s|^|$W/named/|"))
	[ -n "$before" ] && [ "$before" = "$after" ] || fail "$p: $before samples, $after after"
	a=$(go tool pprof -symbolize=none -tags $(files_of "$p") 2>/dev/null | awk 'NF')
	b=$(go tool pprof -symbolize=none -tags $(files_of "$p" | xargs -n1 basename |
		sed "s|^|$W/named/|") 2>/dev/null | awk 'NF')
	[ "$a" = "$b" ] || fail "$p: labels changed"
	# Kernel locations (named by the agent) keep id, address and name.
	# (awk, not grep: a run may have no kernel frame, and no match is no
	# failure.)
	a=$(go tool pprof -symbolize=none -raw $(files_of "$p") 2>/dev/null |
		awk '/kernel\.kallsyms\]:/')
	b=$(go tool pprof -symbolize=none -raw $(files_of "$p" | xargs -n1 basename |
		sed "s|^|$W/named/|") 2>/dev/null | awk '/kernel\.kallsyms\]:/')
	[ "$a" = "$b" ] || fail "$p: kernel frames changed"
done

# No build ID: named through the hash of .text.
has ' spin_outer$' pprof_top "$W/named" symburn-noid || fail "symburn-noid not named"
# Stripped without its debug file: addresses, and said so.
top=$(pprof_top "$W/named" symburn-strip)
grep -qE ' (spin_outer|cmp_ints)$' <<<"$top" && fail "symburn-strip named without debug file"
grep -qF ' [symburn-strip]' <<<"$top" || fail "symburn-strip: no addresses left: $top"
has ' 0x[0-9a-f]+$' "$KILNCTL" pprof top --sample-type=samples $(files_of symburn-strip |
	xargs -n1 basename | sed "s|^|$W/named/|") || fail "kilnctl pprof top: no address"
grep -qE " msort_with_tmp$inl" <<<"$top" || fail "symburn-strip: libc not named: $top"
grep -qE "_${pid[symburn-strip]}_.*: .* in $B/symburn-strip \(stripped" "$W/summary" ||
	fail "summary does not say symburn-strip is stripped: $(cat "$W/summary")"
# Replaced binary: another build ID, addresses left.
grep -qE ' spin_outer$' <<<"$(pprof_top "$W/named" symburn-swap)" &&
	fail "symburn-swap named from another build"
grep -qE "_${pid[symburn-swap]}_.*: .* in $B/symburn-swap \(build ID [0-9a-f]+, want $swap_id\)" \
	"$W/summary" ||
	fail "summary does not give symburn-swap's build ID mismatch: $(cat "$W/summary")"
# A FIFO in its place: refused, not opened for reading.
grep -qE "_${pid[symburn-fifo]}_.*: .* in $B/symburn-fifo \(not a regular file\)" "$W/summary" ||
	fail "summary does not refuse the FIFO: $(cat "$W/summary")"

# kilnctl's own reports read the result too.
has " msort_with_tmp$inl" "$KILNCTL" pprof top --sample-type=samples $(files_of symburn |
	xargs -n1 basename | sed "s|^|$W/named/|") || fail "kilnctl pprof top: no msort_with_tmp"

# --- --debug-dir: the stripped copy's separate debug file -----------------
# One FILE and -o FILE; in place for the rest.
first=$(files_of symburn-strip | head -1)
"$KILNCTL" pprof symbolize --debug-dir="$D" -o "$W/strip-1.pb.gz" "$first" 2>"$W/summary2" ||
	fail "symbolize --debug-dir: $(cat "$W/summary2")"
grep -qF "$first: " "$W/summary2" || fail "summary: $(cat "$W/summary2")"
has " (spin_outer|cmp_ints) $src:[0-9]+\$" \
	go tool pprof -symbolize=none -sample_index=samples -top -lines "$W/strip-1.pb.gz" ||
	fail "symburn-strip not named from $D: $(go tool pprof -symbolize=none -top "$W/strip-1.pb.gz" 2>&1 | head -20)"
mkdir "$W/inplace"
cp $(files_of symburn-strip) "$W/inplace/"
"$KILNCTL" pprof symbolize --debug-dir="$D" --in-place "$W"/inplace/*.pb.gz 2>/dev/null ||
	fail "symbolize --in-place failed"
"$KILNCTL" pprof validate "$W"/inplace/*.pb.gz >/dev/null || fail "--in-place wrote invalid files"
has ' spin_outer$' go tool pprof -symbolize=none -sample_index=samples -top "$W"/inplace/*.pb.gz ||
	fail "--in-place: spin_outer not named"
# Symbolizing named files again changes nothing.
cp "$W/strip-1.pb.gz" "$W/again.pb.gz"
"$KILNCTL" pprof symbolize --debug-dir="$D" --in-place "$W/again.pb.gz" 2>/dev/null ||
	fail "symbolize of a named file failed"
cmp -s <(gunzip -c "$W/strip-1.pb.gz") <(gunzip -c "$W/again.pb.gz") ||
	fail "a second symbolize changed the profile"

# --- bad input and usage ----------------------------------------------------
head -c 4096 /dev/urandom >"$W/garbage.pb.gz"
good=$(files_of symburn | head -1)
size=$(stat -c %s "$good")
head -c $((size / 2)) "$good" >"$W/truncated.pb.gz"
for bad in "$W/garbage.pb.gz" "$W/truncated.pb.gz"; do
	rm -rf "$W/mixed" && mkdir "$W/mixed"
	rc=0
	"$KILNCTL" pprof symbolize -o "$W/mixed" "$bad" "$good" 2>"$W/err" || rc=$?
	[ "$rc" -eq 1 ] || fail "$bad: exit $rc (want 1): $(cat "$W/err")"
	grep -q "^kilnctl pprof symbolize: $bad: " "$W/err" || fail "$bad not named: $(cat "$W/err")"
	[ ! -e "$W/mixed/$(basename "$bad")" ] || fail "$bad: output written"
	[ -s "$W/mixed/$(basename "$good")" ] || fail "the good file was not written next to $bad"
done
grep -q "gzip" "$W/err" || fail "truncated gzip: $(cat "$W/err")"
rc=0
"$KILNCTL" pprof symbolize "$good" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "no -o nor --in-place: exit $rc (want 2)"
rc=0
"$KILNCTL" pprof symbolize -o "$W/one.pb.gz" "$good" "$good" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "several FILEs into one file: exit $rc (want 2)"
has 'debug-dir=DIR' "$KILNCTL" pprof symbolize --help || fail "symbolize --help"
has symbolize "$KILNCTL" pprof --help || fail "pprof --help lacks symbolize"
echo PASS
