#!/usr/bin/env bash
# grpc.health.v1.Health with python3-grpcio as the client (stubs generated
# from proto/grpc/health/v1/health.proto): Check answers SERVING for the
# server ("") and each of Kiln's services and NOT_FOUND for another one,
# without a token although the server has tokens (AUTH_OPEN, like /ready);
# Watch sends SERVING at once, stays open, and sends NOT_SERVING and ends
# the stream when the server is stopped with SIGTERM (which still exits 0);
# /metrics counts both.
source "$(dirname "$0")/server_lib.bash"
T=$(mktemp -d /tmp/kiln-health-test.XXXXXX)
trap server_cleanup EXIT
HSTUBS=$T/hstubs
mkdir -p "$HSTUBS" "$T/p"
cp "$KILN_ROOT/proto/grpc/health/v1/health.proto" "$T/p/"
$PY -m grpc_tools.protoc -I"$T/p" --python_out="$HSTUBS" --grpc_python_out="$HSTUBS" \
	"$T/p/health.proto" || die "grpc_tools.protoc failed"
HC=$KILN_ROOT/tests/integration/server_health_client.py
R=$($PY -c 'import secrets; print(secrets.token_hex(24))')
printf 'read %s\n' "$R" >"$T/tokens"
chmod 600 "$T/tokens"
server_start --auth-tokens-file="$T/tokens"

for svc in "" parca.profilestore.v1alpha1.ProfileStoreService parca.query.v1alpha1.QueryService \
	parca.debuginfo.v1alpha1.DebuginfoService grpc.health.v1.Health; do
	$PY "$HC" "$HSTUBS" check "$ADDR" "$svc" SERVING || die "Check($svc)"
done
$PY "$HC" "$HSTUBS" check "$ADDR" no.such.Service NOT_FOUND || die "Check(no.such.Service)"

# Two watchers: the server as a whole and one service.
$PY "$HC" "$HSTUBS" watch "$ADDR" "" >"$T/w1" 2>&1 &
w1=$!
$PY "$HC" "$HSTUBS" watch "$ADDR" parca.query.v1alpha1.QueryService >"$T/w2" 2>&1 &
w2=$!
for _ in $(seq 1 100); do
	grep -q SERVING "$T/w1" && grep -q SERVING "$T/w2" && break
	sleep 0.1
done
[ "$(cat "$T/w1")" = SERVING ] || die "watch: want SERVING first, got: $(cat "$T/w1")"
[ "$(cat "$T/w2")" = SERVING ] || die "watch(QueryService): want SERVING, got: $(cat "$T/w2")"
curl -s -H "Authorization: Bearer $R" "http://$ADDR/metrics" >"$T/metrics"
grep -Eq '^kiln_grpc_health_requests_total\{method="Check"\} 6$' "$T/metrics" ||
	die "Check count: $(grep health "$T/metrics")"
grep -Eq '^kiln_grpc_health_requests_total\{method="Watch"\} 2$' "$T/metrics" ||
	die "Watch count: $(grep health "$T/metrics")"
sleep 0.5
[ "$(cat "$T/w1")" = SERVING ] || die "watch sent more while nothing changed: $(cat "$T/w1")"

server_stop # SIGTERM; fails unless the server exits 0
wait $w1 || die "watcher 1 failed: $(cat "$T/w1")"
wait $w2 || die "watcher 2 failed: $(cat "$T/w2")"
printf 'SERVING\nNOT_SERVING\nEND OK\n' >"$T/want"
diff -u "$T/want" "$T/w1" || die "watch of the server on shutdown"
diff -u "$T/want" "$T/w2" || die "watch of QueryService on shutdown"
echo "PASS server_health"
