#!/usr/bin/env bash
# The kiln server against a third-party gRPC client (Debian's python3-grpcio,
# messages generated from proto/ at test time) and real Go runtime/pprof
# profiles: WriteRaw, then every QueryService RPC; merged totals must equal
# the sums of the ingested values exactly; the PPROF report must be read by
# `go tool pprof`; kilnctl query renders the same data; SIGTERM exits cleanly.
source "$(dirname "$0")/server_lib.bash"
server_setup
server_start

P=$T/prof
client write --name kiln_test --label job=grpc --label node=n1 \
	--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" || die "WriteRaw 0"
client write --name kiln_test --label job=grpc --label node=n1 \
	--profiles "$P/cpu-1.pb.gz" "$P/heap-1.pb.gz" || die "WriteRaw 1"
# Another series that the matchers must exclude.
client write --name kiln_test --label job=other --label node=n2 \
	--profiles "$P/cpu-0.pb.gz" || die "WriteRaw other"

mkdir -p "$T/out"
client check --name kiln_test --label job=grpc --label node=n1 \
	--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" "$P/cpu-1.pb.gz" "$P/heap-1.pb.gz" \
	--other job=other --other node=n2 --out "$T/out" || die "QueryService checks"

# go tool pprof reads the PPROF report and finds the Go program's functions.
CPU=$T/out/kiln_test_cpu_nanoseconds_cpu_nanoseconds_delta.pb.gz
[ -s "$CPU" ] || die "no PPROF report saved"
go tool pprof -top "$CPU" >"$T/top.txt" 2>&1 || { cat "$T/top.txt"; die "go tool pprof failed"; }
grep -q 'main.spinAlpha' "$T/top.txt" || { cat "$T/top.txt"; die "pprof top lacks main.spinAlpha"; }
# Every PPROF report (SINGLE, MERGE, DIFF of every type) is read by
# `go tool pprof -raw`, and the values it lists sum to the ingested total.
[ -s "$T/out/manifest.txt" ] || die "no PPROF manifest"
n=0
while read -r f want; do
	go tool pprof -raw "$T/out/$f" >"$T/raw.txt" 2>&1 || { cat "$T/raw.txt"; die "go tool pprof -raw $f"; }
	got=$($PY - "$T/raw.txt" <<'PYEOF'
import re, sys
total, on = 0, False
for line in open(sys.argv[1]):
    if line.startswith("Samples:"):
        on = True
        continue
    if on and re.match(r"^(Locations|Mappings)", line):
        break
    m = re.match(r"^\s*(-?\d+)(\s+-?\d+)*:\s", line) if on else None
    if m:
        total += int(m.group(1))
print(total)
PYEOF
	)
	[ "$got" = "$want" ] || die "go tool pprof -raw $f: values sum to $got, ingested $want"
	n=$((n + 1))
done <"$T/out/manifest.txt"
[ "$n" -ge 12 ] || die "only $n PPROF reports checked"
echo "go tool pprof read $n PPROF reports; every total exact"

# kilnctl query: the same profile, top and folded and pprof.
Q='kiln_test:cpu:nanoseconds:cpu:nanoseconds:delta{job="grpc"}'
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=top >"$T/ktop.txt" ||
	die "kilnctl query top"
grep -q 'main.spinAlpha' "$T/ktop.txt" || { cat "$T/ktop.txt"; die "kilnctl top lacks spinAlpha"; }
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=folded >"$T/folded.txt" ||
	die "kilnctl query folded"
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --output=pprof -o "$T/k.pb.gz" ||
	die "kilnctl query pprof"
go tool pprof -top "$T/k.pb.gz" >/dev/null 2>&1 || die "go tool pprof cannot read kilnctl's pprof"
# Folded values sum to the same total as the gRPC PPROF report.
$PY - "$STUBS" "$CPU" "$T/folded.txt" "$T/k.pb.gz" <<'PYEOF' || die "kilnctl totals differ"
import gzip, sys
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
def total(path):
    p = profile_pb2.Profile(); p.ParseFromString(gzip.decompress(open(path, "rb").read()))
    return sum(s.value[0] for s in p.sample)
want = total(sys.argv[2])
folded = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[3]) if l.strip())
got = total(sys.argv[4])
if folded != want or got != want:
    sys.exit("folded %d, kilnctl pprof %d, gRPC pprof %d" % (folded, got, want))
print("kilnctl totals ok:", want)
PYEOF
# A malformed query is an error pointing at the position, exit status 1.
if "$KILNCTL" query --address="$ADDR" 'kiln_test:cpu{' --since=1h 2>"$T/err.txt"; then
	die "kilnctl accepted a malformed query"
fi
grep -q '\^' "$T/err.txt" || { cat "$T/err.txt"; die "kilnctl error lacks a position caret"; }

# Metrics counted the ingestion and the calls, exactly: 5 profiles, their
# sample rows (samples x sample types) and raw bytes; 3 WriteRaw calls with
# their latencies; store sizes and WAL fsyncs are reported.
curl -sf "http://$ADDR/metrics" >"$T/metrics.txt" || die "/metrics"
$PY - "$STUBS" "$T/metrics.txt" "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" "$P/cpu-1.pb.gz" \
	"$P/heap-1.pb.gz" "$P/cpu-0.pb.gz" <<'PYEOF' || die "/metrics figures"
import gzip, os, re, sys
sys.path.insert(0, sys.argv[1])
from pprof import profile_pb2
m = {}
for line in open(sys.argv[2]):
    if line.startswith("#") or not line.strip():
        continue
    k, v = line.rsplit(" ", 1)
    m[k] = float(v)
rows = nbytes = 0
for f in sys.argv[3:]:
    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(open(f, "rb").read()))
    rows += len(p.sample) * len(p.sample_type)
    nbytes += os.path.getsize(f)
w = 'method="/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"'
want = {
    "kiln_ingested_profiles_total": 5,
    "kiln_ingested_samples_total": rows,
    "kiln_ingested_bytes_total": nbytes,
    "kiln_grpc_requests_total{%s}" % w: 3,
    "kiln_grpc_request_duration_seconds_count{%s}" % w: 3,
}
for k, v in want.items():
    if m.get(k) != v:
        sys.exit("%s = %s, want %s" % (k, m.get(k), v))
if m.get('kiln_grpc_request_duration_seconds_bucket{%s,le="+Inf"}' % w) != 3:
    sys.exit("WriteRaw latency histogram lacks its +Inf bucket of 3")
if not m.get("kiln_grpc_request_duration_seconds_sum{%s}" % w, 0) > 0:
    sys.exit("WriteRaw latency sum is 0")
q = 'kiln_grpc_requests_total{method="/parca.query.v1alpha1.QueryService/Query"}'
if not m.get(q, 0) >= 60:
    sys.exit("%s = %s, want >= 60" % (q, m.get(q)))
for k in ("kiln_store_series", "kiln_store_sample_rows", "kiln_store_disk_bytes",
          "kiln_store_stacks", "kiln_store_locations", "kiln_wal_fsync_duration_seconds_count",
          "kiln_wal_fsync_duration_seconds_sum"):
    if not m.get(k, 0) > 0:
        sys.exit("%s = %s, want > 0" % (k, m.get(k)))
print("metrics ok: %d sample rows, %d bytes" % (rows, nbytes))
PYEOF
# Graceful shutdown under load: SIGTERM while a client streams writes. The
# client sees UNAVAILABLE (never another error), the server exits 0, and
# after a restart every acknowledged write is there.
client hammer --name kiln_stop --what s1 --profile "$P/cpu-0.pb.gz" --out "$T/acked.txt" \
	>"$T/hammer.txt" 2>&1 &
hpid=$!
sleep 1
server_stop
wait "$hpid"
grep -q 'UNAVAILABLE' "$T/hammer.txt" || { cat "$T/hammer.txt"; die "writer did not see UNAVAILABLE"; }
grep -q 'stopped' "$T/server.log" || die "no clean stop in the log"
server_start
client verify --name kiln_stop --profile "$P/cpu-0.pb.gz" --out "$T/acked.txt" ||
	die "acknowledged writes lost over a graceful restart"
server_stop
echo "server_grpc: ok"
