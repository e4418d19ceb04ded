#!/usr/bin/env bash
# Bad input and bad clients against the kiln server: each gets a clear error
# and the server keeps serving everyone else (under ASan/UBSan in `make
# test`, so memory errors abort the run).
#   - WriteRaw: garbage pprof, corrupt gzip, gzip bomb, oversized message,
#     invalid/reserved/duplicate label names, too many labels, no __name__
#   - queries: unknown profile type, malformed query, missing options,
#     unimplemented report types and methods
#   - malformed gRPC frames and HTTP/2 protocol garbage (nghttp, raw socket)
#   - grpc-timeout deadlines
#   - slow clients: half an HTTP/1.1 request or body, half an HTTP/2
#     preface, a silent socket: none of them blocks other clients
source "$(dirname "$0")/server_lib.bash"
server_setup
server_start --grpc-max-message-size=4MiB --max-profile-size=64MiB ${ROBUSTNESS_FLAGS:-}
P=$T/prof
GOOD=$P/cpu-0.pb.gz
client write --name kiln_rb --label job=rb --profiles "$GOOD" || die "good WriteRaw"

expect() { # CODE WHAT [args]
	local code=$1 what=$2
	shift 2
	client expect-error --code "$code" --what "$what" --profile "$GOOD" "$@" ||
		die "$what did not fail with $code"
	curl -sf "http://$ADDR/healthy" >/dev/null || die "server unhealthy after $what"
}

expect INVALID_ARGUMENT garbage-pprof --contains 'series[0].samples[0]'
expect INVALID_ARGUMENT gzip-garbage --contains gzip
$PY -c "import gzip,sys; sys.stdout.buffer.write(gzip.compress(b'\0' * (80 << 20), 1))" >"$T/bomb.gz"
expect RESOURCE_EXHAUSTED gzip-bomb --file "$T/bomb.gz" --contains limit
expect RESOURCE_EXHAUSTED oversized --size $((5 << 20)) --contains grpc-max-message-size
expect INVALID_ARGUMENT bad-label-name --contains 'bad-name'
expect INVALID_ARGUMENT label-starts-digit --contains '1abc'
expect INVALID_ARGUMENT too-many-labels --contains labels
expect INVALID_ARGUMENT duplicate-label --contains duplicate
expect INVALID_ARGUMENT missing-name --contains __name__
expect NOT_FOUND unknown-profile-type --contains 'unknown profile type'
expect INVALID_ARGUMENT bad-query
expect INVALID_ARGUMENT query-range-bad
expect INVALID_ARGUMENT single-without-time
expect UNIMPLEMENTED unimplemented-report --query 'kiln_rb:samples:count:cpu:nanoseconds:delta'
expect UNIMPLEMENTED series-unimplemented
# Nothing of the rejected writes was stored: one profile's types only.
curl -s "http://$ADDR/api/v1/profile-types" | $PY -c '
import json, sys
keys = sorted(t["key"] for t in json.load(sys.stdin)["types"])
assert all(k.startswith("kiln_rb:") for k in keys), keys' || die "rejected writes were stored"

# Malformed gRPC framing, via a real HTTP/2 client.
grpc_raw() { # BODYFILE PATH [extra nghttp args] -> prints grpc-status
	nghttp -v -d "$1" -H 'content-type: application/grpc' -H 'te: trailers' "${@:3}" \
		"http://$ADDR$2" 2>&1 | sed -n 's/.*recv (stream_id=[0-9]*) grpc-status: \([0-9]*\).*/\1/p' |
		head -1
}
Q=/parca.query.v1alpha1.QueryService/ProfileTypes
printf '\x00\x00\x00\x00\x10abc' >"$T/short.bin"  # prefix says 16, 3 follow
printf '\x07\x00\x00\x00\x00' >"$T/flag.bin"       # invalid compressed flag
printf '\x00\x00' >"$T/tiny.bin"                   # no full prefix
printf '\x01\x00\x00\x00\x03abc' >"$T/nogzip.bin"  # compressed, no grpc-encoding
printf '\x00\x00\x00\x00\x00' >"$T/empty.bin"      # a valid empty message
[ "$(grpc_raw "$T/short.bin" $Q)" = 13 ] || die "short frame not INTERNAL"
[ "$(grpc_raw "$T/flag.bin" $Q)" = 13 ] || die "bad flag not INTERNAL"
[ "$(grpc_raw "$T/tiny.bin" $Q)" = 13 ] || die "tiny frame not INTERNAL"
[ "$(grpc_raw "$T/nogzip.bin" $Q)" = 12 ] || die "compressed without encoding not UNIMPLEMENTED"
[ "$(grpc_raw "$T/empty.bin" /x.Y/Z)" = 12 ] || die "unknown method not UNIMPLEMENTED"
[ "$(grpc_raw "$T/empty.bin" $Q)" = 0 ] || die "valid empty ProfileTypes not OK"
[ "$(grpc_raw "$T/empty.bin" $Q -H 'grpc-timeout: 1n')" = 4 ] || die "expired deadline not DEADLINE_EXCEEDED"
printf '\x00\x00\x00\x00\x05\xff\xff\xff\xff\xff' >"$T/junkmsg.bin"
[ "$(grpc_raw "$T/junkmsg.bin" /parca.query.v1alpha1.QueryService/Query)" = 3 ] ||
	die "undecodable QueryRequest not INVALID_ARGUMENT"
[ "$(grpc_raw "$T/junkmsg.bin" /parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw)" = 3 ] ||
	die "undecodable WriteRawRequest not INVALID_ARGUMENT"

# HTTP/2 protocol garbage: the server answers GOAWAY and closes; others unaffected.
$PY - "$PORT" <<'PYEOF' || die "raw HTTP/2 garbage"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x04\x99\xff\x00\x00\x00\x01garbagegarbage" * 4)
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    sys.exit("server kept a garbage connection open")
# Walk the frames: a GOAWAY (type 7) must be among them.
i, types = 0, []
while i + 9 <= len(data):
    ln = int.from_bytes(data[i:i + 3], "big"); types.append(data[i + 3]); i += 9 + ln
if 7 not in types:
    sys.exit("no GOAWAY, frame types %s" % types)
print("garbage -> GOAWAY")
PYEOF

# Slow clients: each holds a connection with half a request; meanwhile a
# full WriteRaw and queries must complete.
$PY - "$PORT" "$STUBS" "$GOOD" <<'PYEOF' || die "slow clients blocked others"
import socket, sys, time
port, stubs, good = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, stubs)
import grpc
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps, profilestore_pb2_grpc as psg
from parca.query.v1alpha1 import query_pb2 as q, query_pb2_grpc as qg
slow = []
for payload in (b"GET /api/v1/profile-types HTTP/1.1\r\nHost: x\r\n",  # no end of headers
                b"PRI * HTTP/2.0\r\n",                                # half a preface
                b"",                                                  # nothing at all
                b"POST /api/v1/query HTTP/1.1\r\nContent-Length: 100000\r\n\r\nabc"):  # half a body
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(payload)
    slow.append(s)
# Meanwhile, on other connections, real work completes.
t0 = time.time()
for i in range(5):
    ch2 = grpc.insecure_channel("127.0.0.1:%d" % port, options=[("grpc.use_local_subchannel_pool", 1)])
    req = ps.WriteRawRequest()
    s = req.series.add()
    s.labels.labels.add(name="__name__", value="kiln_rb")
    s.labels.labels.add(name="job", value="slow%d" % i)
    s.samples.add(raw_profile=open(good, "rb").read())
    psg.ProfileStoreServiceStub(ch2).WriteRaw(req, timeout=20)
    qg.QueryServiceStub(ch2).ProfileTypes(q.ProfileTypesRequest(), timeout=20)
    import urllib.request
    urllib.request.urlopen("http://127.0.0.1:%d/api/v1/labels" % port, timeout=20).read()
    ch2.close()
for s in slow:
    s.close()
print("5 rounds of writes and queries beside 4 stalled clients in %.1fs" % (time.time() - t0))
PYEOF

# A query of the data written above still answers; server alive and ready.
curl -sf "http://$ADDR/ready" >/dev/null || die "not ready at the end"
curl -sf "http://$ADDR/api/v1/values?label=job" | grep -q slow4 || die "writes beside slow clients missing"
server_stop
echo "server_robustness: ok"
