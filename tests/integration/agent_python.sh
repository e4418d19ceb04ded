#!/usr/bin/env bash
# Python frames in the agent's profiles: the same program with known call
# paths (agent_progs/python_paths.py: nested functions, a thread with its
# own hot function, a generator driven by sum(), sorted() calling a key
# function back) on Debian's /usr/bin/python3 and on every pyenv build of
# 3.9-3.13 present, all at once. python_check.py reads the agent's files
# (nothing symbolized afterwards: the names, files and lines are the
# agent's) and requires, in >= 95% of each function's samples, the whole
# Python path with the right names, file and lines, the C function's
# native frames between sort_key and sort_cb, and each hot function on its
# own thread. Also: an unsupported version (pyenv's 3.8, else 3.7) gets
# native frames and a counted reason in /metrics; a Python process that
# execs mid-run, and short ones that exit, break nothing (and the one that
# exec'd keeps its Python names in the window it ran in). The same windows
# pushed to a real `kiln` come back from its query API with the agent's
# names, files and lines (the server does not symbolize them again).
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
[ -x /usr/bin/python3 ] || fail "precondition: Debian's /usr/bin/python3 missing"
script="$AGENT_PROGS/python_paths.py"
root="${PYENV_ROOT:-$HOME/.pyenv}/versions"
declare -A interp
interp[debian]=/usr/bin/python3
for v in 3.9 3.10 3.11 3.12 3.13; do
	d=$(ls -d "$root/$v".* 2>/dev/null | sort -V | tail -1) || true
	[ -n "$d" ] && [ -x "$d/bin/python$v" ] && interp[$v]="$d/bin/python$v"
done
[ ${#interp[@]} -ge 2 ] || fail "precondition: no pyenv build of 3.9-3.13 under $root"
old=""
for v in 3.8 3.7; do
	d=$(ls -d "$root/$v".* 2>/dev/null | sort -V | tail -1) || true
	if [ -n "$d" ] && [ -x "$d/bin/python$v" ]; then old="$d/bin/python$v"; break; fi
done
echo "interpreters: ${interp[*]} (unsupported: ${old:-none})"

[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
kport=$(free_port)
"$KILN_BIN/kiln" --http-address=127.0.0.1:$kport --storage-path="$AGENT_TMP/data" \
	>"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid; wait $kiln_pid")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$kport/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$kport/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"

out="$AGENT_TMP/profiles"
port=$(free_port)
# Room for the tables of whatever else the host runs meanwhile: Python
# frames need the eval loop's native frames walked by table.
agent_start "$out" --local-store-layout=process --profiling-duration=3s \
	--profiling-cpu-sampling-frequency=99 --http-address=127.0.0.1:$port \
	--unwind-table-max-bytes=134217728 \
	--remote-store-address=127.0.0.1:$kport --remote-store-insecure
# The programs run until PY_STOP_FILE appears: 8 s after the agent has
# found every interpreter and walked a few thousand Python frames (a
# loaded host may take a while to get there; samples before carry no
# Python frames and are not counted).
export PY_STOP_FILE="$AGENT_TMP/stop"
declare -A pids
for k in "${!interp[@]}"; do
	"${interp[$k]}" "$script" 120 & pids[$k]=$!
done
if [ -n "$old" ]; then "$old" "$script" 120 & oldpid=$!; fi
# One that execs a shell when stopped, and short ones that exit while sampled.
/usr/bin/python3 "$script" 120 exec & execpid=$!
(for _ in $(seq 1 15); do PY_STOP_FILE= /usr/bin/python3 "$script" 0.2; done) & shortloop=$!
want=$((${#interp[@]} + 1))
for _ in $(seq 1 600); do
	n=$(curl -sf "http://127.0.0.1:$port/metrics" |
		awk '$1 == "kiln_agent_python_processes_total" {print $2}') || true
	[ "${n:-0}" -ge $want ] && break
	sleep 0.1
done
echo "the agent walks ${n:-0} CPython processes (want $want)"
# Then until their frames flow (their eval loop's unwind tables built),
# and some more.
for _ in $(seq 1 400); do
	n=$(curl -sf "http://127.0.0.1:$port/metrics" |
		awk '$1 == "kiln_agent_python_frames_total" {print $2}') || true
	[ "${n:-0}" -ge 3000 ] && break
	sleep 0.1
done
echo "${n:-0} Python frames so far"
sleep 8
touch "$PY_STOP_FILE"
wait "${pids[@]}" $execpid $shortloop ${oldpid:-}
sleep 0.5
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics not served"
agent_stop

bad=()
check() { # NAME PID [checks]
	local name=$1 pid=$2; shift 2
	local files
	files=$(ls "$out"/*_"$pid"_python*.pb.gz 2>/dev/null) || true
	[ -n "$files" ] || fail "$name: no profile for pid $pid ($(ls "$out" | head))"
	python3 "$AGENT_PROGS/python_check.py" --name "$name" --script "$script" --pid "$pid" \
		--min 0.95 "$@" $files || bad+=("$name")
}
for k in "${!interp[@]}"; do
	check "$k" "${pids[$k]}" --path hot:middle,outer,main --path thread_hot:worker \
		--path gen_values:consume_gen,main --path sort_key:sort_cb,main \
		--native-between sort_key --native-between gen_values \
		--thread hot=main --thread thread_hot=other
done
check exec "$execpid" --path hot:middle,outer,main

echo "$metrics" | grep -E '^kiln_agent_python'
metric() { echo "$metrics" | awk -v k="$1" '$1 == k {print $2}'; }
frames=$(metric kiln_agent_python_frames_total)
[ "${frames:-0}" -gt 1000 ] || fail "/metrics counts ${frames:-0} Python frames"
if [ -n "$old" ]; then
	unsup=$(metric 'kiln_agent_python_walk_failures_total{reason="unsupported_version"}')
	[ "${unsup:-0}" -ge 1 ] || fail "$old: no unsupported_version counted in /metrics"
	files=$(ls "$out"/*_"$oldpid"_python*.pb.gz 2>/dev/null) || true
	[ -n "$files" ] || fail "$old: no profile (native frames expected)"
	pyframes=$(go tool pprof -symbolize=none -raw $files 2>/dev/null | grep '\[python\]' | head -3) || true
	[ -z "$pyframes" ] || fail "$old: Python frames from a version without offsets: $pyframes"
fi
T="parca_agent:samples:count:cpu:nanoseconds:delta"
sel="%7Bpid=%22${pids[debian]}%22%7D"
top=$(curl -sf "http://127.0.0.1:$kport/api/v1/query?mode=merge&query=$T$sel&start=0&end=9999999999999&report=top") ||
	fail "kiln query failed"
echo "$top" | python3 -c '
import json, os, sys
rows = json.load(sys.stdin)["rows"]
want = {"hot", "middle", "outer", "main", "thread_hot", "worker"}
got = {r["name"] for r in rows if r["binary"] == "[python]" and
       os.path.realpath(r["file"]) == os.path.realpath(sys.argv[1]) and r["line"] > 0}
missing = want - got
print("kiln names %d Python functions of the script" % len(got))
sys.exit("kiln lost Python names: %s (rows: %s)" % (sorted(missing), rows[:5]) if missing else 0)
' "$script" || bad+=("kiln")
[ ${#bad[@]} -eq 0 ] || fail "Python paths wrong or missing: ${bad[*]}"
echo "PASS"
