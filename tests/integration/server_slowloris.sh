#!/usr/bin/env bash
# Clients that hold connections without using them, against small limits
# (--max-connections=64, 10 per client address, 3 s deadlines) so that the
# test is quick. From eight loopback addresses (all of 127/8 is loopback):
# slowloris (an HTTP/1.1 header, one byte a second) and idle HTTP/2 (the
# preface and SETTINGS, then only PINGs), more than the per-client and the
# total limit allow, reopened as soon as the server closes them; from eight
# more, as many slow bodies over HTTP/1.1 and HTTP/2 as there are slots
# (requests in flight, never idle). While they run, a new client
# must be served: curl on /healthy and a gRPC WriteRaw, each within a bound
# it fails past. Every attacker's connection must be closed by the server
# within a few times the deadlines. Before the connection table
# (conn_limits.c) the server kept 1,024 such connections for as long as
# they pinged or dripped, and served no one else.
source "$(dirname "$0")/server_lib.bash"
server_setup
server_start --max-connections=64 --max-connections-per-client=10 --handshake-timeout=3s \
	--request-header-timeout=3s --connection-idle-timeout=3s --request-body-min-rate=1KiB
ATTACK=$KILN_ROOT/tests/integration/server_attack.py
FLOOD_SRC=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9

# 8 addresses x 2 kinds x 8 = 128 wanted: over the 10 per address and the 64 in all.
$PY "$ATTACK" --port "$PORT" --sources "$FLOOD_SRC" --kinds slowloris,h2idle --count 8 \
	--duration 14 >"$T/flood.json" &
FLOOD=$!
# 8 more x 2 kinds x 4 = 64 slow bodies: alone they would keep every slot busy.
SLOW_SRC=127.0.0.10,127.0.0.11,127.0.0.12,127.0.0.13,127.0.0.14,127.0.0.15,127.0.0.16,127.0.0.17
$PY "$ATTACK" --port "$PORT" --sources "$SLOW_SRC" --kinds slowbody,h2slowbody \
	--count 4 --duration 14 >"$T/slow.json" &
SLOW=$!
sleep 3 # the attackers hold their connections by now

for i in 1 2 3 4; do
	curl -sf --max-time 5 "http://$ADDR/healthy" >/dev/null ||
		die "probe $i: /healthy not served within 5 s during the flood"
	timeout 15 $PY "$CLIENT" write --stubs "$STUBS" --addr "$ADDR" --name kiln_sl \
		--label job=sl --label probe="$i" --profiles "$T/prof/cpu-0.pb.gz" ||
		die "probe $i: WriteRaw not served within 15 s during the flood"
	sleep 1
done
wait $FLOOD || die "the flood script failed"
wait $SLOW || die "the slow-body script failed"
echo "flood: $(cat "$T/flood.json")"
echo "slow bodies: $(cat "$T/slow.json")"

# Every attacker was disconnected, and soon: the deadlines are 3 s, so no
# connection may have stayed 9 s (the scripts ran 14 s, reopening).
$PY - "$T/flood.json" "$T/slow.json" <<'PYEOF' || die "attackers were not disconnected"
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    if s["closed_by_server"] < s["opened"] // 2:
        sys.exit(f"{path}: the server closed only {s['closed_by_server']} of {s['opened']}")
    for k, v in s.items():
        if (k.startswith("longest_") or k.startswith("oldest_alive")) and v > 9:
            sys.exit(f"{path}: {k} = {v} s: a connection outlived the deadlines")
PYEOF

M=$(curl -sf "http://$ADDR/metrics") || die "/metrics"
for m in kiln_connections_refused_total kiln_connections_evicted_total \
	kiln_connections_timed_out_total; do
	v=$(awk -v m="$m" '$1 == m {print $2}' <<<"$M")
	[ "${v:-0}" -gt 0 ] || die "$m is ${v:-missing}: that limit never acted"
done
curl -sf --max-time 5 "http://$ADDR/healthy" >/dev/null || die "unhealthy after the flood"
server_stop
echo "PASS: server_slowloris"
