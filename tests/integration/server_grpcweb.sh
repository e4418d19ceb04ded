#!/usr/bin/env bash
# gRPC-Web and Connect on the server's one port, against real clients:
# @connectrpc/connect-node (gRPC-Web over HTTP/1.1 and HTTP/2, Connect proto
# and JSON) and @parca/client over @protobuf-ts/grpcweb-transport (binary
# and text), plus Python framing of each protocol and curl over HTTP/2.
# Every QueryService call must answer exactly what native gRPC answers.
# Then Grafana's Parca data source's request sequence (connect-go's
# gRPC-Web over HTTP/1.1) and the flame graph it draws, server reflection
# (grpc-reflection-js, and a Python bidirectional stream), CORS, the token
# gate, malformed requests, and the per-protocol counts in /metrics.
source "$(dirname "$0")/server_lib.bash"
bash "$KILN_ROOT/tests/peers/node/install.sh" || die "node peer install"
NODE_PEER=$KILN_ROOT/build/node-peer
server_setup
WEB="$PY $KILN_ROOT/tests/integration/server_grpcweb_client.py"
MAX=1048576
ORIGIN=http://ui.example
server_start --cors-allowed-origins="$ORIGIN" --grpc-max-message-size=$MAX

P=$T/prof
client write --name kiln_web --label job=web --label node=n1 \
	--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" || die "WriteRaw 0"
client write --name kiln_web --label job=web --label node=n2 \
	--profiles "$P/cpu-1.pb.gz" "$P/heap-1.pb.gz" || die "WriteRaw 1"
TYPE=kiln_web:samples:count:cpu:nanoseconds:delta
# The first CPU profile's time (SINGLE queries), the ingested total of the
# samples type, and a Grafana time range around both profiles.
read -r TIME TOTAL START END < <($PY - "$STUBS" "$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" <<'PYEOF'
import datetime, gzip, sys
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
total, times = 0, []
for f in sys.argv[2:]:
    p = profile_pb2.Profile(); p.ParseFromString(gzip.decompress(open(f, "rb").read()))
    i = [p.string_table[s.type] for s in p.sample_type].index("samples")
    total += sum(s.value[i] for s in p.sample)
    times.append(p.time_nanos)
t = datetime.datetime.fromtimestamp(times[0] // 10**9, datetime.timezone.utc)
ms = (times[0] // 10**6) % 1000
print(t.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % ms, total,
      min(times) // 10**9 - 3600, max(times) // 10**9 + 3600)
PYEOF
)
[ -n "$END" ] || die "cannot read the test profiles"

# Node's clients take their message types from Kiln's protos.
(cd "$KILN_ROOT/proto" && protoc -I. --include_imports --descriptor_set_out="$T/desc.pb" \
	parca/query/v1alpha1/query.proto) || die "protoc descriptor set"
$WEB calls --stubs "$STUBS" --type "$TYPE" --time "$TIME" --out "$T/calls.json" || die "calls"
cp "$KILN_ROOT/tests/peers/node/webrpc_calls.mjs" "$KILN_ROOT/tests/peers/node/webrpc_loader.mjs" \
	"$NODE_PEER/" || die "copy node scripts"
(cd "$NODE_PEER" && timeout 300 node --import ./webrpc_loader.mjs webrpc_calls.mjs \
	"http://$ADDR" "$T/desc.pb" "$T/calls.json") >"$T/node.json" 2>"$T/node.err" ||
	{ cat "$T/node.err"; die "node clients"; }
$WEB compare --stubs "$STUBS" --addr "$ADDR" --calls "$T/calls.json" --node "$T/node.json" ||
	die "answers differ from native gRPC"

$WEB grafana --stubs "$STUBS" --addr "$ADDR" --type "$TYPE" --total "$TOTAL" \
	--start "$START" --end "$END" --limit 100 --function main.spinAlpha || die "Grafana's sequence"
$WEB badinput --stubs "$STUBS" --addr "$ADDR" --max $MAX || die "bad input"

# Server reflection: Python's bidirectional stream (several requests, each
# answered before the next) and grpc-reflection-js, which lists the services
# and reads every method's types from the descriptors it is sent.
(cd "$KILN_ROOT/proto" && protoc -I. --include_imports --descriptor_set_out="$T/all.pb" \
	$(find . -name '*.proto' | sed 's|^\./||' | sort) &&
	$PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
		grpc/reflection/v1/reflection.proto grpc/reflection/v1alpha/reflection.proto) ||
	die "protoc for reflection"
$WEB reflect --stubs "$STUBS" --addr "$ADDR" --desc "$T/all.pb" || die "reflection"
cp "$KILN_ROOT/tests/peers/node/reflection_list.js" "$NODE_PEER/" || die "copy"
(cd "$NODE_PEER" && timeout 120 node reflection_list.js "$ADDR") >"$T/refl.json" ||
	die "grpc-reflection-js"
$PY - "$T/refl.json" <<'PYEOF' || die "grpc-reflection-js answers"
import json, sys
d = json.load(open(sys.argv[1]))
q = "parca.query.v1alpha1.QueryService"
if q not in d["services"] or len(set(d["services"])) != len(d["services"]):
    sys.exit("services: %s" % d["services"])
if d["methods"][q] != ["Labels", "ProfileTypes", "Query", "QueryRange", "Series", "ShareProfile",
                       "Values"]:
    sys.exit("QueryService methods: %s" % d["methods"][q])
if d["types"][q + "/Query"] != ["parca.query.v1alpha1.QueryRequest",
                                "parca.query.v1alpha1.QueryResponse"]:
    sys.exit("Query's types: %s" % d["types"][q + "/Query"])
print("grpc-reflection-js: %d services, %d methods described" % (
    len(d["services"]), len(d["types"])))
PYEOF

# CORS: a preflight from the allowed origin is granted what gRPC-Web and
# Connect clients send; another origin gets no CORS header; answers expose
# the gRPC status headers.
M=http://$ADDR/parca.query.v1alpha1.QueryService/Labels
for proto in --http1.1 --http2-prior-knowledge; do
	curl -s -D "$T/pre.h" -o /dev/null $proto -X OPTIONS -H "Origin: $ORIGIN" \
		-H 'Access-Control-Request-Method: POST' \
		-H 'Access-Control-Request-Headers: content-type,x-grpc-web,x-user-agent' "$M" ||
		die "preflight $proto"
	grep -qi "^HTTP/[0-9.]* 204" "$T/pre.h" || { cat "$T/pre.h"; die "preflight $proto: not 204"; }
	grep -qi "^access-control-allow-origin: $ORIGIN" "$T/pre.h" || die "preflight $proto: origin"
	grep -qi "^access-control-allow-headers:.*X-Grpc-Web" "$T/pre.h" ||
		die "preflight $proto: allowed headers"
	grep -qi "^access-control-allow-methods:.*POST" "$T/pre.h" || die "preflight $proto: methods"
	printf '\0\0\0\0\0' | curl -s -D "$T/post.h" -o /dev/null $proto -H "Origin: $ORIGIN" \
		-H 'Content-Type: application/grpc-web+proto' --data-binary @- "$M" || die "POST $proto"
	grep -qi "^access-control-expose-headers:.*Grpc-Status" "$T/post.h" ||
		{ cat "$T/post.h"; die "POST $proto: exposed headers"; }
	curl -s -D "$T/other.h" -o /dev/null $proto -X OPTIONS -H 'Origin: http://evil.example' "$M"
	if grep -qi "^access-control-allow-origin" "$T/other.h"; then
		die "preflight $proto from another origin was allowed"
	fi
done
echo "cors: preflight and exposed headers over HTTP/1.1 and HTTP/2"

# /metrics counts the calls per protocol.
curl -sf "http://$ADDR/metrics" >"$T/metrics.txt" || die "/metrics"
for p in grpc grpc-web connect http; do
	n=$(awk -v k="kiln_protocol_requests_total{protocol=\"$p\"}" '$1 == k {print $2}' "$T/metrics.txt")
	[ -n "$n" ] && [ "$n" -gt 0 ] || die "kiln_protocol_requests_total for $p is '${n:-missing}'"
done
server_stop

# The token gate: the same roles as over native gRPC.
R=read-$(openssl rand -hex 12)
W=write-$(openssl rand -hex 12)
printf 'read %s\nwrite %s\n' "$R" "$W" >"$T/tokens"
chmod 600 "$T/tokens"
server_start --auth-tokens-file="$T/tokens"
$WEB auth --stubs "$STUBS" --addr "$ADDR" --read "$R" --write "$W" || die "auth"
server_stop
echo "server_grpcweb: ok"
