#!/usr/bin/env bash
# OpenTelemetry profiles (OTLP v1development) into the kiln server, from a
# python3 producer whose messages are generated from proto/opentelemetry/
# at test time (no published package reachable here carries the profiles
# protos; see otlp_client.py). The same request, using every dictionary
# table, goes over gRPC, HTTP protobuf and HTTP JSON with gzip; the folded
# stacks and totals kilnctl reads back must equal the input, with resource
# attributes as series labels and frame types on the mappings. Then every
# bad input: an out-of-range index in each table, a truncated body, JSON of
# the wrong types; each names what is wrong and stores nothing. /metrics
# counts it all.
source "$(dirname "$0")/server_lib.bash"

OTLP_CLIENT=$KILN_ROOT/tests/integration/otlp_client.py
[ -x "$KILN" ] || die "no $KILN (build it first)"
T=$(mktemp -d /tmp/kiln-otlp-test.XXXXXX)
trap server_cleanup EXIT
STUBS=$T/stubs
mkdir -p "$STUBS"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
	--grpc_python_out="$STUBS" opentelemetry/proto/common/v1/common.proto \
	opentelemetry/proto/resource/v1/resource.proto \
	opentelemetry/proto/profiles/v1development/profiles.proto \
	opentelemetry/proto/collector/profiles/v1development/profiles_service.proto \
	pprof/profile.proto) || die "grpc_tools.protoc failed"
server_start

otlp() { $PY "$OTLP_CLIENT" "$1" --stubs="$STUBS" --addr="$ADDR" --kilnctl="$KILNCTL" "${@:2}"; }

for via in grpc http-pb http-json-gz; do
	otlp send --run="$via" --via="$via" --expect="$T/$via.json" || die "send over $via"
	otlp verify --expect="$T/$via.json" --out="$T" || die "what $via sent does not read back"
done
otlp bad || die "bad inputs"

# /metrics: 3 good requests of 4 profiles and 10 samples; the 2 partial ones
# stored 3 profiles (6 samples) each and rejected 1 (4 samples); the 6
# refused with a bad dictionary had 4 profiles (10 samples) each; the 5
# undecodable bodies (and 2 nested too deep, 1 with a NUL) are requests
# with errors but no profiles.
curl -sf "http://$ADDR/metrics" >"$T/metrics.txt" || die "GET /metrics"
want() {
	grep -qx "$1 $2" "$T/metrics.txt" || {
		grep kiln_otlp "$T/metrics.txt" >&2
		die "/metrics: want $1 $2"
	}
}
want kiln_otlp_profiles_accepted_total 18
want kiln_otlp_samples_accepted_total 42
want kiln_otlp_profiles_rejected_total 26
want kiln_otlp_samples_rejected_total 68
want kiln_otlp_requests_total 19
want kiln_otlp_request_errors_total 14
grep kiln_otlp "$T/metrics.txt"

# The stored profiles survive a restart (they went through the WAL).
server_stop
server_start
otlp verify --expect="$T/grpc.json" --out="$T" || die "OTLP profiles lost across a restart"
server_stop
echo "PASS"
