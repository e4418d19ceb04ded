#!/usr/bin/env bash
# Least privilege: kiln-agent runs as an unprivileged user holding exactly
# the capabilities its systemd unit grants (AmbientCapabilities= of
# contrib/systemd/kiln-agent.service, read from the file so that the unit
# and this test cannot drift apart), and its stacks are as whole as root's:
# a -fomit-frame-pointer program run by root is unwound through libc's
# qsort to main. Without CAP_BPF or CAP_PERFMON (as nobody, or as root with
# them dropped) it refuses to start with a message naming each; without
# CAP_SYS_PTRACE it starts and says what is lost. Both units pass
# `systemd-analyze verify` with no complaint.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
command -v setpriv >/dev/null || fail "precondition: setpriv (util-linux) not installed"
command -v capsh >/dev/null || fail "precondition: capsh (libcap2-bin) not installed"
units="$KILN_ROOT/contrib/systemd"

# 1. The units, with ExecStart pointing at this build.
if command -v systemd-analyze >/dev/null; then
	for u in kiln kiln-agent; do
		sed "s|/usr/bin/kiln|$KILN_BIN/kiln|" "$units/$u.service" >"$AGENT_TMP/$u.service"
	done
	systemd-analyze verify "$AGENT_TMP/kiln.service" "$AGENT_TMP/kiln-agent.service" \
		>"$AGENT_TMP/verify.log" 2>&1 || { cat "$AGENT_TMP/verify.log"; fail "systemd-analyze verify"; }
	[ ! -s "$AGENT_TMP/verify.log" ] || { cat "$AGENT_TMP/verify.log"; fail "systemd-analyze complains"; }
fi

# 2. The unit's set, as setpriv spells it: "+bpf,+perfmon,...".
unitcaps=$(sed -n 's/^AmbientCapabilities=//p' "$units/kiln-agent.service")
bound=$(sed -n 's/^CapabilityBoundingSet=//p' "$units/kiln-agent.service")
[ -n "$unitcaps" ] && [ "$unitcaps" = "$bound" ] ||
	fail "kiln-agent.service: AmbientCapabilities ($unitcaps) and CapabilityBoundingSet ($bound) differ"
setcaps() { # CAP_A CAP_B ... -> +a,+b
	local c out=""
	for c in "$@"; do c=${c#CAP_}; out+="${out:+,}+${c,,}"; done
	echo "$out"
}
caps=$(setcaps $unitcaps)
echo "unit capabilities: $unitcaps ($caps)"
as_nobody() { # CAPS CMD...: CMD as nobody holding exactly CAPS
	local c=$1; shift
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,$c --ambient-caps=$c \
		--bounding-set=-all,$c "$@"
}

out="$AGENT_TMP/profiles"
mkdir -p "$out" && chown 65534:65534 "$out"
bin="$AGENT_TESTBIN"
mkdir -p "$bin"
gcc -O2 -g -fomit-frame-pointer -o "$bin/qsort_nofp" "$AGENT_PROGS/unwind_qsort.c"
# LeakSanitizer stops the process's threads with ptrace, which an
# unprivileged, non-dumpable process may not do; leaks are checked by
# every other agent test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
port=$(free_port)
AGENT_PREFIX=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,$caps
	--ambient-caps=$caps --bounding-set=-all,$caps)
# A table budget that other programs on a busy host (LLVM's 16 MiB of
# tables) cannot fill: this test is about capabilities, not the budget.
agent_start "$out" --local-store-layout=process --profiling-duration=2s \
	--profiling-cpu-sampling-frequency=49 --http-address=127.0.0.1:$port \
	--unwind-table-max-bytes=134217728
agent_uid=$(awk '/^Uid:/ {print $3}' "/proc/$AGENT_PID/status" 2>/dev/null || true)
# The agent is setpriv's exec: the same pid.
[ "$agent_uid" = 65534 ] || fail "agent runs as uid '$agent_uid', not nobody"
"$bin/qsort_nofp" 5 >/dev/null & qpid=$!
wait $qpid
sleep 2.5 # the window holding the program's last samples
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
agent_stop
grep -q "lacks" "$AGENT_LOG" && { cat "$AGENT_LOG"; fail "the unit's set is not enough for the agent"; }
files=$(ls "$out"/*_"$qpid"_qsort_nofp*.pb.gz 2>/dev/null) || true
[ -n "$files" ] || fail "no profile of the root-owned program (pid $qpid): $(ls "$out" | head)"
python3 "$AGENT_PROGS/unwind_check.py" --name qsort_nofp --pid "$qpid" --agent $files \
	--min-complete 0.9 --max-junk 0.02 --min-path 0.9 --path cmp_ints:main,msort_with_tmp ||
	fail "stacks as nobody with $caps are not whole"
complete=$(echo "$metrics" | awk '/^kiln_agent_user_stacks_total\{result="complete"\}/ {print $2}')
[ "${complete:-0}" -gt 50 ] || fail "/metrics counts ${complete:-0} complete stacks"

# 3. Refusals name what is missing.
without() { # CAP: the unit's set less CAP
	local c keep=()
	for c in $unitcaps; do [ "$c" = "$1" ] || keep+=("$c"); done
	setcaps "${keep[@]}"
}
for missing in CAP_BPF CAP_PERFMON; do
	rc=0
	as_nobody "$(without $missing)" timeout 20 "$KILN_BIN/kiln-agent" \
		--local-store-directory="$out" >"$AGENT_TMP/refused.log" 2>&1 || rc=$?
	[ "$rc" -eq 1 ] || { cat "$AGENT_TMP/refused.log"; fail "without $missing: exit $rc, not 1"; }
	grep -q "lacks.*$missing" "$AGENT_TMP/refused.log" ||
		{ cat "$AGENT_TMP/refused.log"; fail "without $missing: the message does not name it"; }
done
rc=0
capsh --drop=cap_bpf,cap_perfmon,cap_sys_admin -- -c \
	"timeout 20 '$KILN_BIN/kiln-agent' --local-store-directory='$out'" >"$AGENT_TMP/root.log" 2>&1 ||
	rc=$?
[ "$rc" -eq 1 ] && grep -q "lacks CAP_BPF.*CAP_PERFMON" "$AGENT_TMP/root.log" ||
	{ cat "$AGENT_TMP/root.log"; fail "root without CAP_BPF/CAP_PERFMON: exit $rc"; }

# 4. Without CAP_SYS_PTRACE it runs and says what is lost.
AGENT_PREFIX=(setpriv --reuid=65534 --regid=65534 --clear-groups
	--inh-caps=-all,$(without CAP_SYS_PTRACE) --ambient-caps=$(without CAP_SYS_PTRACE)
	--bounding-set=-all,$(without CAP_SYS_PTRACE))
agent_start "$out" --profiling-duration=1s
agent_stop
grep -q "lacks CAP_SYS_PTRACE" "$AGENT_LOG" || { cat "$AGENT_LOG"; fail "no warning without CAP_SYS_PTRACE"; }
echo "PASS"
