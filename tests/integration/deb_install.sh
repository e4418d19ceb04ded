#!/usr/bin/env bash
# The Debian packages as an operator meets them: `make deb` builds kiln,
# kiln-agent and kilnctl; they install on this machine (users, data and
# config directories, units, defaults), the services run as their units say
# (with systemd when it is PID 1; else each unit's ExecStart, Environment
# and EnvironmentFile as its User, with exactly its capabilities, as
# systemd would), profiles flow from the agent to the server and back out
# through kilnctl, and a purge leaves nothing behind.
set -uo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "precondition: installing packages needs root"
for p in kiln kiln-agent kilnctl; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" &&
		fail "precondition: package $p is installed on this machine; this test would replace it"
done
tmp=$(mktemp -d /tmp/kiln-deb-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
	sleep 1
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	dpkg --purge kiln kiln-agent kilnctl >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

MAKEFLAGS= make --no-print-directory -C "$KILN_ROOT" deb >"$tmp/deb.log" 2>&1 ||
	{ tail -30 "$tmp/deb.log"; fail "make deb"; }
debs=("$KILN_ROOT"/build/deb/*.deb)
[ ${#debs[@]} -eq 3 ] || fail "make deb built ${#debs[@]} packages, not 3"
dpkg-deb -f "$KILN_ROOT"/build/deb/kiln_*.deb Depends | grep -q libmicrohttpd ||
	fail "kiln's Depends lacks its shared libraries: $(dpkg-deb -f "$KILN_ROOT"/build/deb/kiln_*.deb Depends)"
dpkg -i "${debs[@]}" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "dpkg -i"; }

# What the packages put in place.
for u in kiln kiln-agent; do getent passwd $u >/dev/null || fail "no user $u"; done
[ "$(stat -c '%U %a' /var/lib/kiln)" = "kiln 700" ] || fail "/var/lib/kiln: $(stat -c '%U %a' /var/lib/kiln)"
for f in /usr/bin/kiln /usr/bin/kiln-agent /usr/bin/kilnctl /usr/share/kiln/ui/index.html \
	/lib/systemd/system/kiln.service /lib/systemd/system/kiln-agent.service; do
	[ -e "$f" ] || fail "missing $f"
done
dpkg-query -W -f='${Conffiles}\n' kiln | grep -q /etc/default/kiln || fail "/etc/default/kiln is not a conffile"
/usr/bin/kiln --version | grep -q . || fail "kiln --version"

# The operator's step: a port of our own (7070 may be taken on this host).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -i "s|^KILN_FLAGS=.*|KILN_FLAGS=\"--http-address=127.0.0.1:$port\"|" /etc/default/kiln
sed -i "s|^KILN_AGENT_FLAGS=.*|KILN_AGENT_FLAGS=\"--remote-store-address=127.0.0.1:$port --remote-store-insecure --profiling-duration=3s\"|" \
	/etc/default/kiln-agent

# unit_run UNIT LOG: runs the installed unit's ExecStart as systemd would
# (no systemd here): Environment=, then EnvironmentFile=, as User= with
# exactly AmbientCapabilities= (and that bounding set), in /.
unit_run() {
	local unit=/lib/systemd/system/$1.service log=$2 user caps exec env envfile
	user=$(sed -n 's/^User=//p' "$unit")
	caps=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr ' ' '\n' | sed -n 's/^CAP_\(.*\)/+\L\1/p' | paste -sd,)
	exec=$(sed -n 's/^ExecStart=//p' "$unit")
	env=$(sed -n 's/^Environment=//p' "$unit" | sed 's/^"\(.*\)"$/\1/')
	envfile=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
	(
		cd /
		export "${env%%=*}=${env#*=}"
		set -a; [ -f "$envfile" ] && . "$envfile"; set +a
		# shellcheck disable=SC2086 # systemd splits $VAR on whitespace
		exec setpriv --reuid="$user" --regid="$user" --init-groups \
			--inh-caps=-all${caps:+,$caps} ${caps:+--ambient-caps=$caps} \
			--bounding-set=-all${caps:+,$caps} $(eval echo "$exec")
	) >"$log" 2>&1 &
	pids+=($!)
}

if [ "$(cat /proc/1/comm)" = systemd ]; then
	systemctl daemon-reload && systemctl restart kiln kiln-agent || fail "systemctl restart"
	svc=systemd
else
	unit_run kiln "$tmp/kiln.log"
	for _ in $(seq 1 100); do
		curl -fsS --max-time 1 "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS --max-time 2 "http://127.0.0.1:$port/ready" >/dev/null || { cat "$tmp/kiln.log"; fail "kiln did not become ready"; }
	[ "$(stat -c %U /proc/${pids[0]})" = kiln ] || fail "kiln does not run as user kiln"
	unit_run kiln-agent "$tmp/agent.log"
	svc=setpriv
fi
# A busy process with a name of its own, then the agent's windows.
timeout 8 python3 -c 'import os; os.sched_yield
def kiln_deb_busy():
    while True: pass
kiln_deb_busy()' &
sleep 9
[ "$svc" = setpriv ] && grep -q "lacks" "$tmp/agent.log" && { cat "$tmp/agent.log"; fail "the agent lacks capabilities under its unit"; }
top=$(/usr/bin/kilnctl query --address=127.0.0.1:$port --since=5m --nodecount=0 \
	'parca_agent:samples:count:cpu:nanoseconds:delta{comm="python3"}' 2>&1)
echo "$top" | head -8
echo "$top" | grep -q "_PyEval_EvalFrameDefault\|python" ||
	{ cat "$tmp/agent.log" "$tmp/kiln.log" 2>/dev/null | tail -20; fail "no python3 samples reached kiln"; }
curl -fsS --max-time 5 "http://127.0.0.1:$port/" | grep -qi "<html" || fail "the UI is not served from /usr/share/kiln/ui"

# Purge: nothing left.
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
pids=()
dpkg --purge kiln kiln-agent kilnctl >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg --purge"; }
for f in /usr/bin/kiln /usr/bin/kiln-agent /usr/bin/kilnctl /var/lib/kiln /etc/default/kiln \
	/etc/default/kiln-agent /lib/systemd/system/kiln.service /usr/share/kiln; do
	[ ! -e "$f" ] || fail "$f left after purge"
done
echo "PASS"
