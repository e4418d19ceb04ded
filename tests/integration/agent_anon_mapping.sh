#!/usr/bin/env bash
# Anonymous executable memory (a JIT's code) is named "[anon]" in the
# agent's pprof files, the way Go's pprof expects: `go tool pprof -top` on
# them prints no symbolization warnings ("Local symbolization failed for
# anon", "Main binary filename not available", "Some binary filenames not
# available"), which the kernel's own names for such memory ("//anon" in perf
# mmap records, "" in /proc/PID/maps) made it print. jit runs code it wrote
# into an anonymous page.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
[ "$(uname -m)" = x86_64 ] || fail "precondition: jit.c writes x86-64 code"
agent_build jit
out="$AGENT_TMP/profiles"
agent_start "$out" --profiling-duration=5m --profiling-cpu-sampling-frequency=199 --http-address=

"$AGENT_TESTBIN/jit" 2 &
jpid=$!
wait $jpid || fail "jit exited with $? (2: could not map an executable page)"
sleep 0.5
agent_stop

files=$(agent_files "$out" "$jpid" jit)
[ -n "$files" ] || fail "no profile for jit (pid $jpid): $(ls "$out")"
# shellcheck disable=SC2086 # one or more files
go tool pprof -raw $files >"$AGENT_TMP/raw.txt" 2>/dev/null || fail "go tool pprof -raw failed"
grep -A100 '^Mappings' "$AGENT_TMP/raw.txt" | grep -q '\[anon\]' ||
	fail "no [anon] mapping: $(grep -A20 '^Mappings' "$AGENT_TMP/raw.txt")"
grep -A100 '^Mappings' "$AGENT_TMP/raw.txt" | grep -E -q '//anon|anon_hugepage' &&
	fail "a mapping is still named by the kernel: $(grep -A20 '^Mappings' "$AGENT_TMP/raw.txt")"
# The samples of jit's page are in the profile (the leaf of most stacks).
n=$(pprof_samples $files)
[ "${n:-0}" -ge 100 ] || fail "only ${n:-0} samples of jit"

# shellcheck disable=SC2086
go tool pprof -symbolize=local -top $files >/dev/null 2>"$AGENT_TMP/stderr.txt" ||
	fail "go tool pprof -top failed: $(cat "$AGENT_TMP/stderr.txt")"
if grep -E -i 'symbolization|filename not available|binary filenames|PPROF_BINARY_PATH' \
	"$AGENT_TMP/stderr.txt"; then
	fail "go tool pprof warned about the mappings above"
fi
echo "ok: $n samples, [anon] mapping, no pprof warnings: $(cat "$AGENT_TMP/stderr.txt")"
