#!/usr/bin/env bash
# Issue 24, item 4, end to end over the real protocols:
#   - WriteRaw with a label value holding NUL ("a\0b") is refused with
#     INVALID_ARGUMENT naming the label, and "a\0b", "a\0c" and "a" never
#     become one series (only "a" is stored);
#   - a profile older than 2000-01-01 or more than --ingest-max-future-skew
#     ahead is refused with INVALID_ARGUMENT saying so;
#   - a sample of INT64_MAX written twice sums to INT64_MAX in the top
#     report (/api/v1/query), never a wrapped number;
#   - /api/v1/query_range with step <= 0 is a 400 with the JSON error body;
#   - the store's files are created 0600 and its directories 0700.
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"

T=$(mktemp -d /tmp/kiln-server-integrity.XXXXXX)
trap server_cleanup EXIT
STUBS=$T/stubs
mkdir -p "$STUBS"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" --grpc_python_out="$STUBS" \
	parca/profilestore/v1alpha1/profilestore.proto pprof/profile.proto) || die "grpc_tools.protoc failed"

server_start --ingest-max-future-skew=10m

$PY - "$STUBS" "$ADDR" <<'PY' || die "WriteRaw checks failed"
import gzip, sys, time
sys.path.insert(0, sys.argv[1])
import grpc
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps, profilestore_pb2_grpc as psg
from pprof import profile_pb2

def profile(time_ns, value=1):
    p = profile_pb2.Profile()
    p.string_table.extend(["", "samples", "count", "cpu", "nanoseconds", "hot"])
    p.sample_type.add(type=1, unit=2)
    p.period_type.type, p.period_type.unit, p.period = 3, 4, 10000000
    p.time_nanos, p.duration_nanos = time_ns, 10**10
    p.function.add(id=1, name=5, system_name=5)
    p.location.add(id=1, address=0x1000).line.add(function_id=1, line=1)
    p.sample.add(location_id=[1], value=[value])
    return gzip.compress(p.SerializeToString())

stub = psg.ProfileStoreServiceStub(grpc.insecure_channel(sys.argv[2]))
now = time.time_ns()

def write(labels, raw):
    req = ps.WriteRawRequest()
    s = req.series.add()
    for k, v in labels:
        s.labels.labels.add(name=k, value=v)
    s.samples.add(raw_profile=raw)
    stub.WriteRaw(req, timeout=30)

def refused(what, labels, raw, needle):
    try:
        write(labels, raw)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (what, e.code(), e.details())
        assert needle in e.details(), (what, e.details())
        print("refused as it should be:", what, "->", e.details())
        return
    raise SystemExit("accepted: " + what)

for v in ["a\0b", "a\0c"]:
    refused("label value %r" % v, [("__name__", "nul_test"), ("k", v)], profile(now),
            "holds a NUL byte")
write([("__name__", "nul_test"), ("k", "a")], profile(now))
refused("time in 1999", [("__name__", "time_test")], profile(915148800 * 10**9),
        "before 2000-01-01")
refused("time 1 h ahead", [("__name__", "time_test")], profile(now + 3600 * 10**9),
        "too far in the future")
write([("__name__", "time_test")], profile(now + 5 * 60 * 10**9))  # within 10m
for i in range(2):
    write([("__name__", "max_test"), ("i", str(i))], profile(now, 2**63 - 1))
PY

# Only "a" is a value of k: nothing was stored under a cut-short name.
vals=$(curl -s "http://$ADDR/api/v1/values?label=k") || die "values"
echo "$vals" | grep -q '"a"' || die "the series k=a is missing: $vals"
[ "$(echo "$vals" | grep -o '"a' | wc -l)" -eq 1 ] || die "more than one value of k: $vals"

# Saturated, not wrapped: the total of two INT64_MAX samples.
q='max_test:samples:count:cpu:nanoseconds:delta{}'
top=$(curl -s -G "http://$ADDR/api/v1/query" --data-urlencode "query=$q" \
	--data-urlencode "start=0" --data-urlencode "end=$(($(date +%s) * 1000 + 600000))" \
	--data-urlencode "report=top") || die "top query"
echo "$top" | grep -q 9223372036854775807 || die "top total is not INT64_MAX: ${top:0:400}"

# step <= 0: 400 with the JSON error body.
for step in 0 -5; do
	code=$(curl -s -o "$T/step.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query_range" \
		--data-urlencode "query=$q" --data-urlencode "step=$step")
	[ "$code" = 400 ] || die "step=$step: HTTP $code"
	grep -q '"error":"parameter step' "$T/step.json" || die "step=$step: $(cat "$T/step.json")"
done
server_stop

# Private files: 0600, directories 0700 (the umask cannot widen them).
bad=$(find "$T/data" \( -type f ! -perm 0600 \) -o \( -type d ! -perm 0700 \) -printf '%m %p\n')
[ -z "$bad" ] || die "store files not private: $bad"
echo ok
