#!/usr/bin/env bash
# Flags written for Parca start Kiln unchanged: kiln takes Parca server's
# flags (and its older --port and --storage-tsdb-retention-time names), and
# kiln-agent Parca agent's, each one either doing what Parca's does or
# logged once with what Kiln does instead. --log-format=json gives one JSON
# object per line and logfmt one logfmt record per line (checked by
# parsing every line); an unknown format is refused with exit status 2.
source "$(dirname "$0")/server_lib.bash"
T=$(mktemp -d /tmp/kiln-parca-flags.XXXXXX)
trap server_cleanup EXIT
server_flags=(--enable-persistence --storage-enable-wal=true --storage-active-memory=536870912
	--storage-snapshot-trigger-size=134217728 --storage-row-group-size=8192
	--storage-index-on-disk --storage-granule-size=8196 --path-prefix=/parca --mode=all
	--otlp-address=127.0.0.1:4317 --symbolizer-demangle-mode=simple
	--symbolizer-number-of-tries=3 --metastore=badger --profile-share-server=api.pprof.me:443
	--experimental-arrow --insecure)
port=$(free_port)
"$KILN" --port=127.0.0.1:$port --storage-path="$T/data" --storage-tsdb-retention-time=6h \
	--log-format=json "${server_flags[@]}" >"$T/server.log" 2>&1 &
SPID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/ready" >/dev/null || die "kiln with Parca's flags did not start (--port)"
kill -TERM $SPID; wait $SPID || die "kiln exited $?"
SPID=
for f in "${server_flags[@]}"; do
	name=${f%%=*}
	[ "$(grep -c -- "$name[= ].*accepted for Parca compatibility" "$T/server.log")" -eq 1 ] ||
		die "kiln: not one log line for $name"
done
$PY - "$T/server.log" <<'PY' || die "kiln --log-format=json: a line is not a JSON record"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no log lines"
for l in lines:
    r = json.loads(l)
    assert set(r) == {"ts", "level", "msg"}, r
PY
grep -q '"msg":"listening on 127.0.0.1:'"$port" "$T/server.log" || die "--port did not set the address"

agent_flags=(--config-path=/etc/parca-agent/parca-agent.yaml --otlp-address=127.0.0.1:4317
	--otlp-exporter=grpc --analytics-opt-out --telemetry-disable-panic-reporting
	--remote-store-batch-write-interval=10s --remote-store-rpc-unary-timeout=5m
	--debuginfo-upload-cache-duration=5m --metadata-container-runtime-socket-path=/run/x.sock
	--metadata-disable-caching --bpf-verbose-logging --bpf-events-buffer-size=8192)
"$KILN_BIN/kiln-agent" --local-store-directory="$T/profiles" --profiling-duration=1s \
	--http-address= --log-format=logfmt "${agent_flags[@]}" >"$T/agent.log" 2>&1 &
APID=$!
for _ in $(seq 100); do grep -q "profiling every CPU" "$T/agent.log" && break; sleep 0.1; done
kill -INT $APID; wait $APID || die "agent exited $?: $(tail -3 "$T/agent.log")"
for f in "${agent_flags[@]}"; do
	name=${f%%=*}
	[ "$(grep -c -- "$name[= ].*accepted for Parca compatibility" "$T/agent.log")" -eq 1 ] ||
		die "kiln-agent: not one log line for $name: $(cat "$T/agent.log")"
done
grep -qv '^ts=[0-9TZ:.-]* level=[a-z]* msg="' "$T/agent.log" &&
	die "kiln-agent --log-format=logfmt: $(grep -v '^ts=[0-9TZ:.-]* level=[a-z]* msg="' "$T/agent.log" | head -2)"
grep -q 'msg="profiling every CPU' "$T/agent.log" || die "no logfmt start line"

rc=0
"$KILN" --log-format=xml >"$T/bad.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "expected text, logfmt or json" "$T/bad.log" || die "kiln --log-format=xml: exit $rc"
rc=0
"$KILN_BIN/kiln-agent" --log-format=xml --local-store-directory="$T/p" >"$T/bad.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "expected text, logfmt or json" "$T/bad.log" || die "kiln-agent --log-format=xml: exit $rc"
echo "PASS"
