#!/usr/bin/env bash
# TLS on the one port: ALPN "h2" carries gRPC (python3-grpcio with TLS
# credentials) and plain HTTP/2 requests (curl --http2), "http/1.1" goes to
# libmicrohttpd through the relay (curl --http1.1). Also plaintext HTTP/2
# with prior knowledge for HTTP routes. Certificates from the openssl CLI.
source "$(dirname "$0")/server_lib.bash"
server_setup
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 2 \
	-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1 ||
	die "openssl req"

# Plaintext first: HTTP routes over HTTP/2 with prior knowledge.
server_start
out=$(curl -s --http2-prior-knowledge -w ' %{http_version}' "http://$ADDR/healthy")
[ "$out" = "ok
 2" ] || die "h2c /healthy: $out"
server_stop

SERVER_SCHEME=https SERVER_CURL_ARGS="--cacert $T/cert.pem" \
	server_start --tls-cert-file="$T/cert.pem" --tls-key-file="$T/key.pem" --handshake-timeout=2s
v2=$(curl -s --http2 --cacert "$T/cert.pem" -o "$T/h2.txt" -w '%{http_version} %{http_code}' "https://$ADDR/healthy")
[ "$v2" = "2 200" ] && grep -q ok "$T/h2.txt" || die "TLS h2 /healthy: $v2"
v1=$(curl -s --http1.1 --cacert "$T/cert.pem" -o "$T/h1.txt" -w '%{http_version} %{http_code}' "https://$ADDR/api/v1/profile-types")
[ "$v1" = "1.1 200" ] && grep -q types "$T/h1.txt" || die "TLS http/1.1: $v1 $(cat "$T/h1.txt")"

$PY - "$STUBS" "$ADDR" "$T/cert.pem" "$T/prof/cpu-0.pb.gz" <<'PYEOF' || die "gRPC over TLS"
import sys
stubs, addr, cert, prof = sys.argv[1:5]
sys.path.insert(0, stubs)
import grpc
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps, profilestore_pb2_grpc as psg
from parca.query.v1alpha1 import query_pb2 as q, query_pb2_grpc as qg
ch = grpc.secure_channel(addr, grpc.ssl_channel_credentials(open(cert, "rb").read()))
req = ps.WriteRawRequest()
s = req.series.add()
s.labels.labels.add(name="__name__", value="kiln_tls")
s.samples.add(raw_profile=open(prof, "rb").read())
psg.ProfileStoreServiceStub(ch).WriteRaw(req, timeout=20)
types = [t.name for t in qg.QueryServiceStub(ch).ProfileTypes(q.ProfileTypesRequest(), timeout=20).types]
assert "kiln_tls" in types, types
print("gRPC over TLS ok")
PYEOF
# A TLS handshake dribbled a byte a second is cut off at --handshake-timeout
# (2 s), not kept while bytes arrive (it used to be a per-read timeout).
$PY - "${ADDR%:*}" "${ADDR##*:}" <<'PYEOF' || die "slow TLS handshake not cut off"
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
hello = b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03" + bytes(200)
t0 = time.monotonic()
for b in hello:
    if time.monotonic() - t0 > 10:
        sys.exit("still open after 10 s of a byte a second")
    try:
        s.send(bytes([b]))
        s.settimeout(1)
        if s.recv(1) == b"":
            break
    except socket.timeout:
        continue
    except OSError:
        break
print(f"slow handshake closed after {time.monotonic() - t0:.1f} s")
PYEOF
# A plaintext client on the TLS port is refused without harming the server.
curl -s -m 5 "http://$ADDR/healthy" >/dev/null && die "plaintext accepted on the TLS port"
curl -sf --cacert "$T/cert.pem" "https://$ADDR/healthy" >/dev/null || die "unhealthy after a plaintext client"
server_stop
echo "server_tls: ok"
