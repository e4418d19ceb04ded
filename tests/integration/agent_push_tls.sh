#!/usr/bin/env bash
# Push transport options against a real `kiln` serving TLS (self-signed
# certificate from the openssl CLI):
#   - TLS is the default: --store-address (the older spelling) without
#     --insecure speaks TLS, and the unverifiable certificate is refused
#     (logged, nothing stored);
#   - --insecure-skip-verify (alias of --remote-store-insecure-skip-verify)
#     delivers, and the server holds the process's samples;
#   - the push buffer is bounded: with the server unreachable and
#     --remote-store-buffer-bytes small, windows are dropped and counted in
#     kiln_agent_profiles_dropped_total while sampling loses nothing.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
[ -x "$KILN_BIN/kiln" ] || fail "precondition: $KILN_BIN/kiln not built"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$AGENT_TMP/key.pem" -out "$AGENT_TMP/cert.pem" \
	-days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
	>/dev/null 2>&1 || fail "openssl req"
port=$(free_port)
K=127.0.0.1:$port
"$KILN_BIN/kiln" --http-address=$K --storage-path="$AGENT_TMP/data" \
	--tls-cert-file="$AGENT_TMP/cert.pem" --tls-key-file="$AGENT_TMP/key.pem" \
	>"$AGENT_TMP/kiln.log" 2>&1 &
kiln_pid=$!
AGENT_CLEANUP+=("kill $kiln_pid; wait $kiln_pid")
for _ in $(seq 1 100); do curl -skf "https://$K/ready" >/dev/null && break; sleep 0.1; done
curl -skf "https://$K/ready" >/dev/null || fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"
T="parca_agent:samples:count:cpu:nanoseconds:delta"
server_samples() { # pid: the server's sample total (0 when it has none of the type yet)
	curl -sk "https://$K/api/v1/query?mode=merge&query=$T%7Bpid=%22$1%22%7D&start=0&end=9999999999999&report=top" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("total", 0))' 2>/dev/null || echo 0
}

# Verification on: refused.
agent_start "$AGENT_TMP/p1" --store-address=$K --profiling-duration=1s --http-address= \
	--debuginfo-upload-disable
"$AGENT_TESTBIN/burn" 0.3 >/dev/null & p1=$!
wait $p1
for _ in $(seq 1 50); do grep -q "push failed" "$AGENT_LOG" && break; sleep 0.1; done
agent_stop
grep "push failed" "$AGENT_LOG" | head -1
grep -qi "push failed.*\(certificate\|SSL\|verify\)" "$AGENT_LOG" ||
	fail "no certificate failure logged: $(cat "$AGENT_LOG")"
[ "$(server_samples $p1)" = 0 ] || fail "samples stored through an unverified connection"

# Verification off: delivered over TLS.
agent_start "$AGENT_TMP/p2" --store-address=$K --insecure-skip-verify --profiling-duration=1s \
	--http-address= --debuginfo-upload-disable
"$AGENT_TESTBIN/burn" 0.5 >/dev/null & p2=$!
wait $p2
sleep 1.5
agent_stop
grep -q "push failed" "$AGENT_LOG" && fail "push failed: $(cat "$AGENT_LOG")"
n=$(server_samples $p2)
echo "over TLS: $n samples for pid $p2"
[ "${n:-0}" -gt 0 ] || fail "no samples for pid $p2 on the server"

# Bounded buffer: nobody listens on dead; windows pile up and are dropped.
# A window holding burn's samples is ~1 KB gzipped, so 2 s of burn on two
# threads (~7 such windows) overflows 2,500 bytes on any host, quiet or busy;
# the retries back off for seconds meanwhile.
dead=$(free_port)
mport=$(free_port)
agent_start "$AGENT_TMP/p3" --remote-store-address=127.0.0.1:$dead --remote-store-insecure \
	--remote-store-buffer-bytes=2500 --profiling-duration=300ms \
	--http-address=127.0.0.1:$mport --debuginfo-upload-disable
"$AGENT_TESTBIN/burn" 2 2 >/dev/null
for _ in $(seq 1 50); do
	d=$(curl -sf "http://127.0.0.1:$mport/metrics" | awk '$1 == "kiln_agent_profiles_dropped_total" {print $2}')
	[ "${d:-0}" -gt 0 ] && break
	sleep 0.2
done
echo "dropped: ${d:-0} profiles"
[ "${d:-0}" -gt 0 ] || fail "nothing dropped with a 2500-byte buffer and no server"
agent_stop
line=$(grep "stopped:" "$AGENT_LOG")
echo "$line"
grep -q " 0 lost" <<<"$line" || fail "sampling lost data while the push was stuck"
echo PASS
