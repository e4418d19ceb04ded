#!/usr/bin/env bash
# grpc.health.v1.Health/Watch over gRPC-Web and Connect streaming, with
# @connectrpc/connect-node as the client (gRPC-Web and Connect, binary
# over HTTP/1.1 and HTTP/2, JSON over HTTP/1.1) and @protobuf-ts/
# grpcweb-transport (Parca's UI's, binary and text, on Node's fetch over
# HTTP/1.1): each watcher must get
# SERVING at once, nothing more while nothing changes, then NOT_SERVING
# and a clean end when the server stops, as over native gRPC
# (server_health.sh). Connect's unary protocol, which has no streams,
# answers the status once; a malformed request is refused in the
# protocol's own form.
source "$(dirname "$0")/server_lib.bash"
bash "$KILN_ROOT/tests/peers/node/install.sh" || die "node peer install"
NODE_PEER=$KILN_ROOT/build/node-peer
[ -x "$KILN" ] || die "no $KILN (build it first)"
T=$(mktemp -d /tmp/kiln-webwatch-test.XXXXXX)
trap server_cleanup EXIT
(cd "$KILN_ROOT/proto" && protoc -I. --include_imports --descriptor_set_out="$T/health.pb" \
	grpc/health/v1/health.proto) || die "protoc descriptor set"
cp "$KILN_ROOT/tests/peers/node/health_watch.mjs" "$NODE_PEER/" || die "copy node script"
server_start

TRANSPORTS="grpcweb-h1 grpcweb-h2 connect-h1 connect-h2 connect-json-h1 protobuf-ts-binary protobuf-ts-text"
pids=()
for tr in $TRANSPORTS; do
	svc=
	[ "$tr" = connect-h2 ] && svc=parca.query.v1alpha1.QueryService
	(cd "$NODE_PEER" && exec timeout 120 node health_watch.mjs "http://$ADDR" "$T/health.pb" \
		"$tr" "$svc") >"$T/w-$tr" 2>&1 &
	pids+=($!)
done
for _ in $(seq 1 300); do
	all=1
	for tr in $TRANSPORTS; do grep -q SERVING "$T/w-$tr" || all=0; done
	[ $all = 1 ] && break
	sleep 0.1
done
for tr in $TRANSPORTS; do
	[ "$(cat "$T/w-$tr")" = SERVING ] || die "watch over $tr: want SERVING first, got: $(cat "$T/w-$tr")"
done

# Connect's unary form has no stream: the status, once.
out=$(curl -s -H 'Content-Type: application/json' -d '{}' \
	"http://$ADDR/grpc.health.v1.Health/Watch") || die "curl unary Watch"
[ "$out" = '{"status":"SERVING"}' ] || die "unary Watch: $out"
# A gRPC-Web body that is not a HealthCheckRequest: refused in gRPC-Web's form.
# (one framed message: field 1 claims 255 bytes and has none).
printf '\0\0\0\0\2\n\377' >"$T/bad.req"
curl -s -o "$T/bad.b" -H 'Content-Type: application/grpc-web+proto' --data-binary @"$T/bad.req" \
	"http://$ADDR/grpc.health.v1.Health/Watch" || die "curl bad Watch"
grep -aq 'grpc-status: 3' "$T/bad.b" || die "bad Watch: want INVALID_ARGUMENT, got: $(cat -v "$T/bad.b")"
grep -aq 'not a HealthCheckRequest' "$T/bad.b" || die "bad Watch: $(cat -v "$T/bad.b")"

sleep 0.5
for tr in $TRANSPORTS; do
	[ "$(cat "$T/w-$tr")" = SERVING ] || die "watch over $tr sent more while nothing changed: $(cat "$T/w-$tr")"
done
curl -s "http://$ADDR/metrics" >"$T/metrics"
grep -Eq '^kiln_grpc_health_requests_total\{method="Watch"\} 7$' "$T/metrics" ||
	die "Watch count: $(grep health "$T/metrics")"

server_stop # SIGTERM; fails unless the server exits 0
printf 'SERVING\nNOT_SERVING\nEND OK\n' >"$T/want"
i=0
for tr in $TRANSPORTS; do
	wait "${pids[$i]}" || die "watcher over $tr failed: $(cat "$T/w-$tr")"
	diff -u "$T/want" "$T/w-$tr" || die "watch over $tr on shutdown"
	i=$((i + 1))
done
echo "PASS server_grpcweb_watch"
