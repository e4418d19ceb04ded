#!/usr/bin/env bash
# OTLP profiles into a kiln on ClickHouse (--storage=clickhouse): OTLP
# takes the store's row path (one stack table per request, rows written by
# store_write_groups), which must reach ClickHouse as it reaches the
# embedded store. The request of server_otlp.sh, using every dictionary
# table, goes over gRPC; the folded stacks, totals, labels and frame-type
# mappings kilnctl reads back must equal the input.
source "$(dirname "$0")/clickhouse_lib.bash"
OTLP_CLIENT=$KILN_ROOT/tests/integration/otlp_client.py
ch_available || die "clickhouse-server is not installed (make deps installs it)"
[ -x "$KILN" ] || die "no $KILN (build it first)"
T=$(mktemp -d /tmp/kiln-otlp-ch-test.XXXXXX)
trap ch_cleanup EXIT
chmod o+x "$T" # the clickhouse user reaches $T/ch
ch_start "$T/ch" || die "cannot start clickhouse-server"
STUBS=$T/stubs
mkdir -p "$STUBS"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
	--grpc_python_out="$STUBS" opentelemetry/proto/common/v1/common.proto \
	opentelemetry/proto/resource/v1/resource.proto \
	opentelemetry/proto/profiles/v1development/profiles.proto \
	opentelemetry/proto/collector/profiles/v1development/profiles_service.proto \
	pprof/profile.proto) || die "grpc_tools.protoc failed"
kiln_start a $(ch_kiln_flags)
otlp() { $PY "$OTLP_CLIENT" "$1" --stubs="$STUBS" --addr="$ADDR_a" --kilnctl="$KILNCTL" "${@:2}"; }
otlp send --run=grpc --via=grpc --expect="$T/grpc.json" || die "send over gRPC"
otlp verify --expect="$T/grpc.json" --out="$T" || die "what was sent does not read back"
kiln_stop a
echo "PASS clickhouse_otlp"
