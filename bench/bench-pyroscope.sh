#!/usr/bin/env bash
# make bench-pyroscope — Pyroscope's push API (POST /ingest, format=pprof
# and format=folded) next to WriteRaw, the reference path, on the same
# profile: a real Go CPU profile (tests/peers/go/serverload) and its stacks
# folded by kilnctl. A release kiln on loopback; the driver
# (bench/pyroscope_ingest.py, python3-grpcio and http.client) pushes
# REQUESTS profiles with THREADS concurrent clients each way and prints
# req/s, MB/s and the server's CPU per request. Figures only; never fails on
# time.
#   REQUESTS=2000 (default)  THREADS=8 (default)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REQUESTS:=2000}" "${THREADS:=8}"
PY=/usr/bin/python3
KILN=build/bin/kiln KILNCTL=build/bin/kilnctl
dir=$(mktemp -d /var/tmp/kiln-bench-pyroscope-XXXXXX)
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
mkdir -p "$dir/stubs" "$dir/prof"
(cd proto && $PY -m grpc_tools.protoc -I. --python_out="$dir/stubs" --grpc_python_out="$dir/stubs" \
	parca/profilestore/v1alpha1/profilestore.proto)
(cd tests/peers/go/serverload && GOCACHE=${GOCACHE:-$PWD/../../../../build/go/cache} GOFLAGS=-mod=mod \
	GO111MODULE=off go build -o "$dir/serverload" main.go)
"$dir/serverload" -out "$dir/prof" -cpu 1s -n 1 >/dev/null
pprof=$dir/prof/cpu-0.pb.gz
"$KILNCTL" pprof folded --sample-type=cpu "$pprof" >"$dir/cpu.folded"
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$KILN" --http-address=127.0.0.1:$port --storage-path="$dir/data" >"$dir/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
echo "== $("$KILN" --version 2>&1 | head -1), $(nproc) CPUs, $REQUESTS requests per path"
$PY bench/pyroscope_ingest.py "$dir/stubs" "127.0.0.1:$port" "$spid" "$pprof" "$dir/cpu.folded" \
	"$REQUESTS" "$THREADS"
