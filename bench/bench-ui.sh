#!/usr/bin/env bash
# bench-ui: the web UI in headless Chromium (Playwright) against a real kiln:
# time from Search to a painted icicle graph for ~10k, ~100k and ~500k-node
# profiles, the client's share of it, API bytes per node, and frame times
# while zooming. Peer: go tool pprof -http's flame graph page on the same
# profiles (10k and 100k; BENCH_PEER_SIZES to change: its 500k page takes
# minutes). Prints figures; never passes or fails on time.
set -uo pipefail
KILN_ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KILN_BIN:=$KILN_ROOT/build/bin}"
source "$KILN_ROOT/tests/integration/ui_lib.bash"
ui_setup
mkdir -p "$T/prof"
ui_start_kiln --grpc-max-message-size=256MiB

PEERS=()
PPIDS=()
cleanup_peers() { for p in "${PPIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; ui_cleanup; }
trap cleanup_peers EXIT
for spec in 10k:10:4 100k:10:5 500k:26:4; do
	IFS=: read -r label b d <<<"$spec"
	nodes=$($PY "$KILN_ROOT/bench/ui_bigprofile.py" --stubs "$STUBS" --out "$T/prof/$label.pb.gz" \
		--branch "$b" --depth "$d") || die "profile generator"
	echo "profile $label: $nodes tree nodes, $(stat -c %s "$T/prof/$label.pb.gz") bytes gzipped"
	ui_push bench "$T/prof/$label.pb.gz" size="$label"
	if [[ " ${BENCH_PEER_SIZES-10k 100k} " == *" $label "* ]]; then
		pp=$(free_port)
		go tool pprof -http="127.0.0.1:$pp" -no_browser "$T/prof/$label.pb.gz" >"$T/pprof-$label.log" 2>&1 &
		PPIDS+=($!)
		PEERS+=("$label=http://127.0.0.1:$pp/ui/flamegraph")
	fi
done
# Wait until each peer listens (its pages are rendered on request; the timed load is the driver's).
for p in "${PEERS[@]}"; do
	hp=${p#*=http://}; hp=${hp%%/*}
	for _ in $(seq 1 300); do
		$PY -c "import socket,sys; socket.create_connection(('${hp%:*}', ${hp#*:}), 1)" 2>/dev/null && break
		sleep 0.5
	done
done
echo "command: make bench-ui   (kiln $KILN, Chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'), $(nproc) cores)"
node "$KILN_ROOT/bench/bench_ui.mjs" "$URL" bench:samples:count:cpu:nanoseconds:delta 10k 100k 500k -- "${PEERS[@]}"
