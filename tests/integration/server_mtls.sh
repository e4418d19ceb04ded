#!/usr/bin/env bash
# Client certificates (mTLS): with --tls-client-ca-file the server completes
# a TLS handshake only with clients whose certificate that CA signed — curl
# (HTTP/1.1 and HTTP/2), python3-grpcio, the real kiln-agent pushing its
# windows and kilnctl reading them back — and refuses a client without one
# or with one from another CA, for every protocol. With
# --tls-client-auth=optional a client without a certificate (a browser) is
# served, and a bad certificate is still refused. Certificates come from the
# openssl CLI.
source "$(dirname "$0")/server_lib.bash"
server_setup
[ "$(id -u)" -eq 0 ] || die "precondition: the agent needs root"
cd "$T"
# A CA, the server's certificate and a client's from it; a second, rogue CA
# with a client certificate of its own.
ossl() { openssl "$@" >/dev/null 2>&1 || die "openssl $1"; }
for ca in ca rogue; do
	ossl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -out $ca.pem -days 2 -subj /CN=$ca
done
ossl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
ossl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
	-extfile san.ext
for c in client:ca stranger:rogue; do
	name=${c%%:*} signer=${c##*:}
	ossl req -newkey rsa:2048 -nodes -keyout $name.key -out $name.csr -subj /CN=$name
	ossl x509 -req -in $name.csr -CA $signer.pem -CAkey $signer.key -CAcreateserial \
		-out $name.pem -days 2
done

mine="--cacert ca.pem --cert client.pem --key client.key"
SERVER_SCHEME=https SERVER_CURL_ARGS="$mine" server_start --tls-cert-file=server.pem \
	--tls-key-file=server.key --tls-client-ca-file=ca.pem
for v in --http1.1 --http2; do
	code=$(curl -s $v $mine -o /dev/null -w '%{http_code}' "https://$ADDR/api/v1/profile-types")
	[ "$code" = 200 ] || die "$v with the client certificate: HTTP $code"
	curl -s $v --cacert ca.pem -m 10 -o /dev/null "https://$ADDR/healthy" &&
		die "$v without a client certificate was served"
	curl -s $v --cacert ca.pem --cert stranger.pem --key stranger.key -m 10 -o /dev/null \
		"https://$ADDR/healthy" && die "$v with another CA's certificate was served"
done

$PY - "$STUBS" "$ADDR" "$T" <<'PYEOF' || die "gRPC with client certificates"
import sys
stubs, addr, d = sys.argv[1:4]
sys.path.insert(0, stubs)
import grpc
from parca.query.v1alpha1 import query_pb2 as q, query_pb2_grpc as qg
rd = lambda n: open(f"{d}/{n}", "rb").read()
def types(cert=None, key=None):
    creds = grpc.ssl_channel_credentials(rd("ca.pem"), key and rd(key), cert and rd(cert))
    ch = grpc.secure_channel(addr, creds)
    return qg.QueryServiceStub(ch).ProfileTypes(q.ProfileTypesRequest(), timeout=10)
types("client.pem", "client.key")
for args in ((), ("stranger.pem", "stranger.key")):
    try:
        types(*args)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e.code()
    else:
        raise SystemExit(f"gRPC call with {args or 'no certificate'} was served")
print("gRPC: served with the client certificate only")
PYEOF

# The agent pushes through mTLS; kilnctl reads back over mTLS.
"$KILN_BIN/kiln-agent" --remote-store-address="https://localhost:$PORT" \
	--remote-store-tls-ca-file=ca.pem --remote-store-tls-cert-file=client.pem \
	--remote-store-tls-key-file=client.key --profiling-duration=2s \
	--profiling-cpu-sampling-frequency=49 --debuginfo-upload-disable --http-address= \
	>"$T/agent.log" 2>&1 &
APID=$!
timeout 5 sh -c 'while :; do :; done' # something to sample
sleep 2.5
kill -INT $APID
wait $APID || die "agent exited $?: $(tail -5 "$T/agent.log")"
grep -qi "warn.*push\|error" "$T/agent.log" && die "agent push failed: $(tail -5 "$T/agent.log")"
out=$("$KILNCTL" query --address="https://localhost:$PORT" --tls-ca-file=ca.pem \
	--tls-cert-file=client.pem --tls-key-file=client.key --since=5m \
	'parca_agent:samples:count:cpu:nanoseconds:delta') || die "kilnctl query over mTLS: $out"
echo "$out" | grep -q "accounting for [1-9]" || die "no agent samples read back: $out"
"$KILNCTL" query --address="https://localhost:$PORT" --tls-ca-file=ca.pem --since=5m \
	'parca_agent:samples:count:cpu:nanoseconds:delta' >/dev/null 2>&1 &&
	die "kilnctl without a client certificate was served"
server_stop

# optional: no certificate is fine, a bad one is not.
SERVER_SCHEME=https SERVER_CURL_ARGS="--cacert ca.pem" server_start --tls-cert-file=server.pem \
	--tls-key-file=server.key --tls-client-ca-file=ca.pem --tls-client-auth=optional
curl -sf --cacert ca.pem -o /dev/null "https://$ADDR/healthy" || die "optional: no certificate refused"
curl -sf $mine -o /dev/null "https://$ADDR/healthy" || die "optional: a good certificate refused"
curl -s --cacert ca.pem --cert stranger.pem --key stranger.key -m 10 -o /dev/null \
	"https://$ADDR/healthy" && die "optional: another CA's certificate was served"
server_stop
# A CA file that holds no certificate stops start-up with a message.
echo garbage >bad.pem
"$KILN" --http-address=127.0.0.1:0 --storage-path="$T/data2" --tls-cert-file=server.pem \
	--tls-key-file=server.key --tls-client-ca-file=bad.pem >bad.log 2>&1 && die "bad CA file accepted"
grep -q "tls-client-ca-file=bad.pem" bad.log || die "no message for a bad CA file: $(cat bad.log)"
echo "server_mtls: ok"
