# Shared helpers for tests/integration/ui_browser.sh and bench/bench-ui.sh
# (sourced, not run): a real kiln on a free port with a temp storage path,
# Python gRPC stubs generated from proto/, and Go runtime/pprof profiles.
#
#   ui_setup          temp dir $T, cleanup trap, stubs in $STUBS
#   ui_start_kiln     starts $KILN: $PORT, $ADDR, $URL, $SPID; with
#                     $UI_CONFIG_TEMPLATE set, that file with @PORT@ replaced by
#                     kiln's own port is passed as --config-path (pull mode)
#   ui_push NAME FILE [k=v ...]   WriteRaw through python3-grpcio
set -uo pipefail
: "${KILN_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${KILN_BIN:=$KILN_ROOT/build/san/bin}"
KILN=$KILN_BIN/kiln
PY=/usr/bin/python3 # Debian's interpreter, which has python3-grpcio
CLIENT=$KILN_ROOT/tests/integration/server_grpc_client.py
UI_DIR=$KILN_ROOT/build/ui
SPID=

die() {
	echo "FAIL: $*" >&2
	[ -n "${T:-}" ] && [ -f "$T/server.log" ] && tail -n 30 "$T/server.log" >&2
	exit 1
}

ui_cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill -TERM "$SPID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
	[ -n "${T:-}" ] && rm -rf "$T"
}

ui_setup() {
	[ -x "$KILN" ] || die "no $KILN (build it first)"
	[ -f "$UI_DIR/index.html" ] || die "no $UI_DIR/index.html (run make)"
	[ -d "$KILN_ROOT/ui/node_modules/playwright-core" ] || die "ui/node_modules missing (run make)"
	[ -x /usr/bin/chromium ] || die "no /usr/bin/chromium (make deps)"
	T=$(mktemp -d /tmp/kiln-ui-test.XXXXXX)
	trap ui_cleanup EXIT
	STUBS=$T/stubs
	mkdir -p "$STUBS"
	(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
		--grpc_python_out="$STUBS" parca/profilestore/v1alpha1/profilestore.proto \
		parca/query/v1alpha1/query.proto parca/metastore/v1alpha1/metastore.proto \
		pprof/profile.proto) || die "grpc_tools.protoc failed"
	export GOCACHE=${GOCACHE:-$T/gocache} GO111MODULE=off
}

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ui_start_kiln() {
	local tries=0
	while :; do
		PORT=$(free_port)
		ADDR=127.0.0.1:$PORT
		URL=http://$ADDR
		local cfg=()
		# kiln finds the UI beside its binary (<exe>/../ui, <exe>/../../ui); a
		# KILN_BIN outside the build tree gets it explicitly.
		[ -d "$KILN_BIN/../ui" ] || [ -d "$KILN_BIN/../../ui" ] || cfg+=(--ui-path="$UI_DIR")
		if [ -n "${UI_CONFIG_TEMPLATE:-}" ]; then
			sed "s/@PORT@/$PORT/g" "$UI_CONFIG_TEMPLATE" >"$T/kiln.yaml"
			cfg=(--config-path="$T/kiln.yaml")
		fi
		"$KILN" --http-address="$ADDR" --storage-path="$T/data" "${cfg[@]}" "$@" \
			>>"$T/server.log" 2>&1 &
		SPID=$!
		for _ in $(seq 1 100); do
			curl -sf "$URL/ready" >/dev/null 2>&1 && return 0
			kill -0 "$SPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
		SPID=
		tries=$((tries + 1))
		[ $tries -lt 3 ] || die "kiln did not become ready"
	done
}

ui_push() { # NAME FILE [k=v ...]
	local name=$1 file=$2
	shift 2
	local args=()
	for kv in "$@"; do args+=(--label "$kv"); done
	$PY "$CLIENT" write --stubs "$STUBS" --addr "$ADDR" --name "$name" "${args[@]}" \
		--profiles "$file" || die "WriteRaw $file"
}
