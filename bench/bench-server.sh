#!/usr/bin/env bash
# make bench-server — the embedded store under a synthetic agent fleet
# (bench/bench_store.c; the generator runs as a separate process, so CPU and
# RSS figures are the server process alone): ingest rate per core, merge latency (1 h of one
# process; everything), on-disk bytes per sample row, peak RSS; then the same
# merges done by `go tool pprof -proto` on the same profiles written as
# files (the peer), with kiln/go totals compared and the time ratio; then
# OTLP profiles ingest next to WriteRaw on the same profiles (bench_otlp.c),
# with python3-protobuf parsing the same OTLP bytes as its peer.
#
#   make bench-server SCALE=1       24 h of data (~170M rows; long)
#   bench/bench-server.sh --scale 1 the same, straight from the script
#   SCALE=0.02 (default)            ~0.5 h of data, about two minutes
#   THREADS=64 / --threads 64       concurrent writers (group commit)
#   INGEST_THREADS=8 (default)      server threads serving them in turn, as the
#                                   server's ingest pool (8 threads) does; 0 = one
#                                   thread per connection
#   SHAPE=agent (default)           profiles as kiln-agent pushes them: user frames
#                                   as addresses in their mappings, named kernel
#                                   frames, thread labels; SHAPE=symbolized: every
#                                   frame with function, file and line, as Go's
#                                   runtime/pprof writes them (--symbolized)
# Figures only; never fails on time.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bench/bench_store
[ -x "$bin" ] || { echo "bench-server: $bin missing (run: make bench-server)" >&2; exit 1; }
command -v go >/dev/null || { echo "bench-server: go not found (make deps installs golang-go)" >&2; exit 1; }
: "${SCALE:=0.02}" "${THREADS:=64}" "${BENCH_DIR:=}" "${INGEST_THREADS:=8}" "${SHAPE:=agent}"
while [ $# -gt 0 ]; do
	case $1 in
	--scale) SCALE=$2; shift 2 ;;
	--scale=*) SCALE=${1#*=}; shift ;;
	--threads) THREADS=$2; shift 2 ;;
	--threads=*) THREADS=${1#*=}; shift ;;
	--ingest-threads) INGEST_THREADS=$2; shift 2 ;;
	--ingest-threads=*) INGEST_THREADS=${1#*=}; shift ;;
	*) echo "usage: $0 [--scale S] [--threads N] [--ingest-threads M]" >&2; exit 2 ;;
	esac
done
if [ -n "$BENCH_DIR" ]; then dir=$BENCH_DIR; rm -rf "$dir"; mkdir -p "$dir"; else
	dir=$(mktemp -d /var/tmp/kiln-bench-server-XXXXXX); fi
trap 'rm -rf "$dir"' EXIT

case $SHAPE in
agent) shape=() ;;
symbolized) shape=(--symbolized) ;;
*) echo "bench-server: SHAPE=$SHAPE: expected agent or symbolized" >&2; exit 2 ;;
esac
echo "== kiln store: $bin run $dir --scale $SCALE --threads $THREADS --ingest-threads $INGEST_THREADS ${shape[*]}"
out=$(MALLOC_ARENA_MAX=4 "$bin" run "$dir" --scale "$SCALE" --threads "$THREADS" \
	--ingest-threads "$INGEST_THREADS" "${shape[@]}")
echo "$out" | grep -v '^peer-'

# The peer: go tool pprof -proto merging the same profiles from files.
peer() { # name, files dir
	local name=$1 files=("$2"/*.pb.gz) t0 t1 ms gototal kline ktotal kms
	t0=$(date +%s%N)
	go tool pprof -proto "${files[@]}" >"$dir/$name.go.pb.gz" 2>/dev/null
	t1=$(date +%s%N)
	ms=$(( (t1 - t0) / 1000000 ))
	gototal=$("$bin" total "$dir/$name.go.pb.gz")
	kline=$(echo "$out" | grep "^$name ")
	ktotal=$(echo "$kline" | awk '{print $3}')
	kms=$(echo "$kline" | awk '{print $5}')
	echo "peer $name: go tool pprof -proto on ${#files[@]} files: ${ms} ms, total $gototal;" \
		"kiln merge+encode ${kms} ms, total $ktotal; totals $([ "$gototal" = "$ktotal" ] && echo equal || echo DIFFER);" \
		"go/kiln = $(awk -v a="$ms" -v b="$kms" 'BEGIN { printf "%.1f", a / (b > 0 ? b : 0.001) }')x"
}
echo "== peer: go tool pprof -proto ($(go version | awk '{print $3}'))"
peer peer-1h "$dir/peer-1h"
peer peer-node0 "$dir/peer-node0"

# What one profile of this shape costs to decode, next to what the ingest
# goal (1M sample rows/s per core) allows per profile: the inflate and
# parse floor of the wire format, with Kiln's inflater and two peers.
echo "== one profile's decode against the 1M rows/s per core budget: $bin anatomy 60 ${shape[*]}"
"$bin" anatomy 60 "${shape[@]}" | head -2

# OTLP profiles next to WriteRaw on the same profiles (bench/bench_otlp.c:
# decode and conversion CPU per request, the store's share being the same),
# and a peer: Debian's python3-protobuf (C++ backend) parsing the same OTLP
# bytes, with messages generated from proto/opentelemetry/ by grpc_tools.
otlp_bin=build/bench/bench_otlp
if [ -x "$otlp_bin" ]; then
	echo "== OTLP ingest next to WriteRaw: $otlp_bin run"
	"$otlp_bin" run --out "$dir/otlp.pb"
	if /usr/bin/python3 -c 'import grpc_tools' 2>/dev/null; then
		mkdir -p "$dir/stubs"
		(cd proto && /usr/bin/python3 -m grpc_tools.protoc -I. --python_out="$dir/stubs" \
			opentelemetry/proto/common/v1/common.proto opentelemetry/proto/resource/v1/resource.proto \
			opentelemetry/proto/profiles/v1development/profiles.proto \
			opentelemetry/proto/collector/profiles/v1development/profiles_service.proto)
		/usr/bin/python3 - "$dir/stubs" "$dir/otlp.pb" <<'PYEOF'
import sys, time
sys.path.insert(0, sys.argv[1])
from google.protobuf.internal import api_implementation
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as s
data = open(sys.argv[2], "rb").read()
best = 1e9
for _ in range(5):
    t0 = time.process_time()
    r = s.ExportProfilesServiceRequest()
    r.ParseFromString(data)
    best = min(best, time.process_time() - t0)
n = sum(len(p.samples) for rp in r.resource_profiles for sp in rp.scope_profiles for p in sp.profiles)
print("peer python3-protobuf (%s) parse of the same %d bytes: %.2f CPU ms (%d samples; parse only, no conversion)"
      % (api_implementation.Type(), len(data), best * 1e3, n))
PYEOF
	fi
fi

# kiln-agent's streaming ingest next to WriteRaw on the same simulated agents,
# and 1,000 agents held by one server (bench/bench-stream.sh; STREAM=0 skips).
if [ "${STREAM:-1}" != 0 ]; then
	echo
	bench/bench-stream.sh
fi
