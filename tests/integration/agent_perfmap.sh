#!/usr/bin/env bash
# JIT code named through perf maps (/tmp/perf-PID.map).
#   node      /usr/bin/node --perf-basic-prof runs perfmap_hot.js, whose hot
#             function kilnHotArith (arithmetic in a loop, its caller kept
#             interpreted so that it is not inlined) must be the name of
#             most of the process's samples in JIT code, in the local files
#             (go tool pprof, no symbolization warning) and on a real `kiln`
#             the agent pushes to (the server keeps the names).
#   perfmap_jit (C) copies two loops into an anonymous executable page and
#             names them in its own perf map, in every way a file can go
#             wrong (see perfmap_jit.c): good, garbage lines, huge (past the
#             agent's caps), vanishing or truncated mid-run, owned by
#             another user, a FIFO, a symlink to /etc/shadow. Named modes
#             must name every sample in the page exactly; the last three
#             none, without blocking the agent; /metrics counts each.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
[ "$(uname -m)" = x86_64 ] || fail "precondition: perfmap_jit.c writes x86-64 code"
[ -x /usr/bin/node ] || fail "precondition: /usr/bin/node (nodejs) not installed"
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
agent_build perfmap_jit

kport=$(free_port)
"$KILN_BIN/kiln" --http-address=127.0.0.1:$kport --storage-path="$AGENT_TMP/data" \
	>"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid; wait $kiln_pid")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$kport/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$kport/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"

out="$AGENT_TMP/profiles"
mport=$(free_port)
agent_start "$out" --profiling-duration=2s --profiling-cpu-sampling-frequency=99 \
	--http-address=127.0.0.1:$mport --remote-store-address=127.0.0.1:$kport \
	--remote-store-insecure --node=perfmap-test
metrics() { curl -sf "http://127.0.0.1:$mport/metrics"; }
metric() { # NAME{LABELS} as printed
	metrics | awk -v k="$1" '$1 == k {print $2}'
}

# Node first, alone (the C programs would take its CPU). Eight seconds:
# a perf map can only be read while its process lives, and on a loaded
# host the agent may handle a process's first samples seconds late.
# (In the scratch directory: with these flags V8 writes an isolate log to
# the current one.)
(cd "$AGENT_TMP" && exec /usr/bin/node --perf-basic-prof --allow-natives-syntax \
	"$AGENT_PROGS/perfmap_hot.js" 8 >/dev/null) &
npid=$!
AGENT_CLEANUP+=("rm -f /tmp/perf-$npid.map")
wait $npid || fail "node exited with $?"

# The C modes together; the largest perf-map memory is watched meanwhile.
modes=(good garbage huge vanish truncate owner fifo symlink)
declare -A pids
for m in "${modes[@]}"; do
	"$AGENT_TESTBIN/perfmap_jit" 8 "$m" & pids[$m]=$!
done
maxbytes=0
while kill -0 "${pids[good]}" 2>/dev/null; do
	b=$(metric kiln_agent_perf_map_bytes)
	[ "${b:-0}" -gt "$maxbytes" ] && maxbytes=$b
	sleep 0.5
done
for m in "${modes[@]}"; do
	wait "${pids[$m]}" || fail "perfmap_jit $m exited with $? (2: could not map an executable page)"
done
sleep 2.5 # the last window, pushed
metrics >"$AGENT_TMP/metrics.txt" || fail "/metrics not served (the agent blocked?)"
agent_stop
grep '^kiln_agent_perf_map' "$AGENT_TMP/metrics.txt"

# leaves FILES...: "count leaf" lines of the samples' leaf frames.
leaves() {
	agent_traces "$@" | python3 -c '
import collections, json, sys
c = collections.Counter()
for line in sys.stdin:
    d = json.loads(line)
    c[d["frames"][0] if d["frames"] else "-"] += d["n"]
for k, v in c.most_common():
    print(v, k)'
}
bad=()

# Node: the share of its JIT-code samples (leaf named by the perf map, or
# left as anonymous memory) that name kilnHotArith.
files=$(agent_files "$out" "$npid" node)
[ -n "$files" ] || fail "no profile for node (pid $npid)"
# shellcheck disable=SC2086
leaves $files >"$AGENT_TMP/node.txt"
hot=$(awk '$2 ~ /^JS:[*^~]?kilnHotArith$/ {n += $1} END {print n + 0}' "$AGENT_TMP/node.txt")
jit=$(awk '$2 ~ /^JS:/ || $2 == "[[anon]]" || $2 ~ /^0x[0-9a-f]+$/ {n += $1} END {print n + 0}' \
	"$AGENT_TMP/node.txt")
all=$(awk '{n += $1} END {print n + 0}' "$AGENT_TMP/node.txt")
echo "node: $hot of $jit samples in JIT code name kilnHotArith ($all samples in all)"
[ "$jit" -ge 50 ] || fail "node: only $jit samples in JIT code: $(head -5 "$AGENT_TMP/node.txt")"
[ $((hot * 100)) -ge $((jit * 70)) ] ||
	bad+=("node: kilnHotArith names $hot of $jit JIT samples: $(head -5 "$AGENT_TMP/node.txt")")
# shellcheck disable=SC2086
go tool pprof -symbolize=local -top $files >/dev/null 2>"$AGENT_TMP/stderr.txt" ||
	fail "go tool pprof -top failed: $(cat "$AGENT_TMP/stderr.txt")"
if grep -E -i 'jit|symbolization failed' "$AGENT_TMP/stderr.txt"; then
	bad+=("go tool pprof warned about the [jit] mapping")
fi

# check_named MODE NAME...: every sample in the page is named, by NAMEs only.
check_named() {
	local m=$1 pid=${pids[$1]} f
	shift
	f=$(agent_files "$out" "$pid" perfmap_jit)
	[ -n "$f" ] || { bad+=("$m: no profile (pid $pid)"); return; }
	# shellcheck disable=SC2086
	leaves $f >"$AGENT_TMP/$m.txt"
	local named unnamed
	named=$(awk -v names=" $* " 'index(names, " " $2 " ") {n += $1} END {print n + 0}' \
		"$AGENT_TMP/$m.txt")
	unnamed=$(awk '$2 == "[[anon]]" || $2 ~ /^0x[0-9a-f]+$/ || $2 ~ /^jit_/ {n += $1} END {print n + 0}' \
		"$AGENT_TMP/$m.txt")
	unnamed=$((unnamed - named))
	echo "$m: $named samples named $*, $unnamed in the page otherwise"
	[ "$named" -ge 10 ] && [ "$unnamed" -eq 0 ] ||
		bad+=("$m: $named named, $unnamed not: $(head -5 "$AGENT_TMP/$m.txt" | tr '\n' ' ')")
}
# check_unnamed MODE: samples in the page, none named.
check_unnamed() {
	local m=$1 pid=${pids[$1]} f
	f=$(agent_files "$out" "$pid" perfmap_jit)
	[ -n "$f" ] || { bad+=("$m: no profile (pid $pid)"); return; }
	# shellcheck disable=SC2086
	leaves $f >"$AGENT_TMP/$m.txt"
	local anon named
	anon=$(awk '$2 == "[[anon]]" {n += $1} END {print n + 0}' "$AGENT_TMP/$m.txt")
	named=$(awk '$2 ~ /^jit_|root:/ {n += $1} END {print n + 0}' "$AGENT_TMP/$m.txt")
	echo "$m: $anon samples in the page, unnamed; $named named"
	[ "$anon" -ge 10 ] && [ "$named" -eq 0 ] ||
		bad+=("$m: $anon unnamed, $named named: $(head -5 "$AGENT_TMP/$m.txt" | tr '\n' ' ')")
}
check_named good jit_alpha_loop jit_beta_loop
check_named garbage jit_alpha_loop jit_beta_loop
check_named huge jit_alpha_loop jit_beta_loop
check_named vanish jit_alpha_loop jit_beta_loop
check_named truncate jit_before_alpha jit_before_beta jit_after_alpha jit_after_beta
grep -q ' jit_after_' "$AGENT_TMP/truncate.txt" ||
	bad+=("truncate: the rewritten names were not read: $(cat "$AGENT_TMP/truncate.txt")")
# alpha runs four times as long as beta.
a=$(awk '$2 == "jit_alpha_loop" {print $1}' "$AGENT_TMP/good.txt")
b=$(awk '$2 == "jit_beta_loop" {print $1}' "$AGENT_TMP/good.txt")
[ "${a:-0}" -gt "${b:-0}" ] || bad+=("good: alpha $a samples, beta $b")
check_unnamed owner
check_unnamed fifo
check_unnamed symlink

m() { awk -v k="$1" '$1 == k {print $2}' "$AGENT_TMP/metrics.txt"; }
f() { m "kiln_agent_perf_map_read_failures_total{reason=\"$1\"}"; }
[ "$(m 'kiln_agent_perf_map_frames_total{result="named"}')" -gt 0 ] || bad+=("no named frames counted")
[ "$(m kiln_agent_perf_map_lines_rejected_total)" -ge 7 ] || bad+=("garbage lines not counted")
[ "$(m kiln_agent_perf_map_symbols_dropped_total)" -gt 0 ] || bad+=("huge: nothing dropped")
[ "$(f wrong_owner)" -ge 1 ] || bad+=("owner: not counted")
[ "$(f not_regular)" -ge 1 ] || bad+=("fifo: not counted")
[ "$(f symlink)" -ge 1 ] || bad+=("symlink: not counted")
# One process's table stays within its cap (16 MiB) whatever it writes.
echo "largest perf-map memory seen: $maxbytes bytes"
[ "$maxbytes" -le $(((16 + 2) << 20)) ] || bad+=("perf maps took $maxbytes bytes")

# The server keeps the names the agent put in (no symbolization of its own).
T="parca_agent:samples:count:cpu:nanoseconds:delta"
K="http://127.0.0.1:$kport"
for q in "$npid:node:kilnHotArith" "${pids[good]}:perfmap_jit:jit_alpha_loop"; do
	IFS=: read -r pid comm name <<<"$q"
	sel="%7Bpid=%22$pid%22,comm=%22$comm%22%7D"
	resp=$(curl -sf "$K/api/v1/query?mode=merge&query=$T$sel&start=0&end=9999999999999&report=top") ||
		{ bad+=("server query for $comm failed"); continue; }
	grep -q "$name" <<<"$resp" || bad+=("server: no $name for $comm: ${resp:0:400}")
done

[ ${#bad[@]} -eq 0 ] || fail "$(printf '%s\n' "${bad[@]}")"
echo PASS
