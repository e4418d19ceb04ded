#!/usr/bin/env bash
# Debuginfo upload end to end: kilnctl debuginfo upload talks Parca's
# DebuginfoService to a real kiln server (ShouldInitiateUpload,
# InitiateUpload, client-streaming Upload, MarkUploadFinished); the server
# stores the extracted file content-addressed, refuses a second upload, and
# kilnctl debuginfo ls / GET /api/v1/debuginfo list it. Bad uploads from a
# third-party client (python3-grpcio) are refused with a clear status and
# nothing is stored: a wrong build ID, a file that is no ELF, a declared size
# and a stream over the limit (--grpc-max-message-size), an upload never
# initiated, a MarkUploadFinished for an unknown upload, a path-like build ID.
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
# An ELF file larger than the server's limit (its data is in the file).
printf 'char big[400000] = {1};\nint main(void) { return big[7]; }\n' >"$T/big.c"
gcc -O2 -Wl,--build-id -o "$T/big" "$T/big.c" || die "gcc big"

server_start --grpc-max-message-size=256KiB
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

# A third-party client's bad uploads.
$PY - "$ADDR" "$T/prog" "$T/big" "$(readelf -n "$T/big" | awk '/Build ID/ {print $3}')" <<'PY' ||
import sys, grpc
addr, path, big, big_id = sys.argv[1:5]
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
def refused(what, code, text, fn):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, (what, e.code(), e.details())
        assert text in e.details(), (what, e.details())
        print("refused %s: %s: %s" % (what, e.code().name, e.details()))
        return
    sys.exit(what + " accepted")
def varint(n):
    out = b""
    while True:
        b = n & 0x7F; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out
def initiate(build_id, size=0):
    resp = unary("InitiateUpload")(s(1, build_id) + (b"\x10" + varint(size) if size else b""), timeout=10)
    uid = resp.split(b"\x12", 1)[1]
    return uid[1:1 + uid[0]].decode()
def upload(build_id, upload_id, data, chunk=64 * 1024):
    msgs = [s(1, s(1, build_id) + s(2, upload_id))]
    msgs += [s(2, data[i:i + chunk]) for i in range(0, len(data), chunk)]
    return stream(iter(msgs), timeout=30)
text_id = "cd" * 20
refused("a file that is no ELF", grpc.StatusCode.INVALID_ARGUMENT, "ELF",
        lambda: upload(text_id, initiate(text_id), b"#!/bin/sh\necho not an ELF file\n" * 10))
big_data = open(big, "rb").read()
assert len(big_data) > 256 * 1024
refused("a declared size over the limit", grpc.StatusCode.RESOURCE_EXHAUSTED, "exceeds the limit",
        lambda: initiate(big_id, len(big_data)))
refused("a stream over the limit", grpc.StatusCode.RESOURCE_EXHAUSTED, "",
        lambda: upload(big_id, initiate(big_id), big_data))
refused("an upload never initiated", grpc.StatusCode.FAILED_PRECONDITION, "InitiateUpload",
        lambda: upload(text_id, "f" * 32, open(path, "rb").read()))
mark = ch.unary_unary(svc + "MarkUploadFinished", request_serializer=None, response_deserializer=None)
refused("MarkUploadFinished of an unknown upload", grpc.StatusCode.NOT_FOUND, "no upload",
        lambda: mark(s(1, text_id) + s(2, "f" * 32), timeout=10))
PY
	die "bad uploads were not refused properly"
for b in "$(printf '00%.0s' $(seq 20))" "$(printf 'cd%.0s' $(seq 20))" "$(readelf -n "$T/big" | awk '/Build ID/ {print $3}')"; do
	[ ! -e "$T/data/debuginfo/$b" ] || die "bad upload stored under $b"
done
"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure | grep -v "^$id \|^BUILD_ID" | grep -q . &&
	die "ls lists more than the one good upload"
curl -sf "http://$ADDR/ready" >/dev/null || die "server unhealthy after the bad uploads"
server_stop
echo ok
