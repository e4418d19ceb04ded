#!/usr/bin/env bash
# Debuginfo upload end to end: kilnctl debuginfo upload talks Parca's
# DebuginfoService to a real kiln server (ShouldInitiateUpload,
# InitiateUpload, client-streaming Upload, MarkUploadFinished); the server
# stores the extracted file content-addressed, refuses a second upload and a
# bad one (wrong build ID, from python3-grpcio as a third-party client), and
# kilnctl debuginfo ls / GET /api/v1/debuginfo list it.
set -uo pipefail
. "$(dirname "$0")/server_lib.bash"

T=$(mktemp -d /tmp/kiln-symbols-upload.XXXXXX)
trap server_cleanup EXIT
cat >"$T/prog.c" <<'C'
#include <stdio.h>
__attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }
int main(int argc, char **argv) { printf("%d\n", work(argc * 10)); return 0; }
C
gcc -g -O2 -Wl,--build-id -o "$T/prog" "$T/prog.c" || die "gcc"
id=$(readelf -n "$T/prog" | awk '/Build ID/ {print $3}')

server_start
out=$("$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure "$T/prog") || die "upload failed: $out"
grep -q "$id.*uploaded" <<<"$out" || die "unexpected upload output: $out"
stored=$T/data/debuginfo/$id/debuginfo
[ -s "$stored" ] || die "no $stored"
[ "$(readelf -n "$stored" | awk '/Build ID/ {print $3}')" = "$id" ] || die "stored file has another build ID"
readelf -SW "$stored" | grep -q ' .text .*NOBITS' || die "stored file is not the extracted debuginfo"
addr2line -f -e "$stored" "0x$(nm "$T/prog" | awk '$3 == "work" {print $1}')" | grep -qx work ||
	die "stored debuginfo does not symbolize"

out=$("$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure "$T/prog") || die "second upload: $out"
grep -q "skipped: debuginfo already exists" <<<"$out" || die "second upload not skipped: $out"
out=$("$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure --force "$T/prog") || die "forced: $out"
grep -q uploaded <<<"$out" || die "forced upload: $out"

"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure | grep -q "^$id " || die "ls does not list $id"
curl -sf "http://$ADDR/api/v1/debuginfo" | grep -q "\"build_id\":\"$id\"" || die "API does not list $id"

# A third-party client uploading a file under the wrong build ID.
$PY - "$ADDR" "$T/prog" <<'PY' || die "bad upload was not refused properly"
import sys, grpc
addr, path = sys.argv[1], sys.argv[2]
def s(field, v):  # a length-delimited protobuf field
    v = v.encode() if isinstance(v, str) else v
    n, out = len(v), b""
    while True:
        b = n & 0x7F; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: break
    return bytes([field << 3 | 2]) + out + v
ch = grpc.insecure_channel(addr)
svc = "/parca.debuginfo.v1alpha1.DebuginfoService/"
unary = lambda m: ch.unary_unary(svc + m, request_serializer=None, response_deserializer=None)
wrong = "00" * 20
resp = unary("InitiateUpload")(s(1, wrong), timeout=10)
upload_id = resp.split(b"\x12", 1)[1]  # UploadInstructions -> upload_id (field 2)
upload_id = upload_id[1:1 + upload_id[0]].decode()
stream = ch.stream_unary(svc + "Upload", request_serializer=None, response_deserializer=None)
msgs = [s(1, s(1, wrong) + s(2, upload_id)), s(2, open(path, "rb").read())]
try:
    stream(iter(msgs), timeout=10)
    sys.exit("wrong build ID accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert "mismatch" in e.details(), e.details()
try:
    unary("ShouldInitiateUpload")(s(1, "../../etc/passwd"), timeout=10)
    sys.exit("path-like build ID accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
PY
[ ! -e "$T/data/debuginfo/$(printf '00%.0s' $(seq 20))/debuginfo" ] || die "bad upload stored"
server_stop
echo ok
