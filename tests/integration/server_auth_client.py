#!/usr/bin/python3
"""gRPC calls with (or without) a bearer token, for server_auth.sh.

Runs with Debian's python3-grpcio; stubs are generated into --stubs by the
test. Each call is one RPC with `authorization: Bearer TOKEN` metadata
(none when --token is empty) and must end with the --expect status name
(OK, UNAUTHENTICATED, PERMISSION_DENIED, ...); --contains checks the status
message. Exits non-zero with a message otherwise.

  call --addr A --stubs DIR --rpc write|types|should-upload --token T --expect CODE
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--rpc", required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--expect", required=True)
    ap.add_argument("--contains", default="")
    ap.add_argument("--profile")
    ap.add_argument("--want-type", default="")
    a = ap.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    from parca.profilestore.v1alpha1 import profilestore_pb2 as ps
    from parca.profilestore.v1alpha1 import profilestore_pb2_grpc as psg
    from parca.query.v1alpha1 import query_pb2 as q
    from parca.query.v1alpha1 import query_pb2_grpc as qg
    from parca.debuginfo.v1alpha1 import debuginfo_pb2 as d
    from parca.debuginfo.v1alpha1 import debuginfo_pb2_grpc as dg

    ch = grpc.insecure_channel(a.addr)
    md = [("authorization", "Bearer " + a.token)] if a.token else []
    resp = None
    try:
        if a.rpc == "write":
            req = ps.WriteRawRequest()
            s = req.series.add()
            s.labels.labels.add(name="__name__", value="kiln_auth")
            s.labels.labels.add(name="job", value="auth")
            s.samples.add(raw_profile=open(a.profile, "rb").read())
            resp = psg.ProfileStoreServiceStub(ch).WriteRaw(req, metadata=md, timeout=30)
        elif a.rpc == "types":
            resp = qg.QueryServiceStub(ch).ProfileTypes(q.ProfileTypesRequest(), metadata=md,
                                                        timeout=30)
        elif a.rpc == "should-upload":
            resp = dg.DebuginfoServiceStub(ch).ShouldInitiateUpload(
                d.ShouldInitiateUploadRequest(build_id="0123456789abcdef0123456789abcdef01234567"),
                metadata=md, timeout=30)
        else:
            sys.exit("unknown --rpc " + a.rpc)
        code, msg = "OK", ""
    except grpc.RpcError as e:
        code, msg = e.code().name, e.details() or ""
    if code != a.expect:
        sys.exit("FAIL: %s with token %r: %s %r, want %s" % (a.rpc, a.token[:4], code, msg,
                                                             a.expect))
    if a.contains and a.contains not in msg:
        sys.exit("FAIL: %s: message %r lacks %r" % (a.rpc, msg, a.contains))
    if a.want_type:
        names = [t.name for t in resp.types]
        if a.want_type not in names:
            sys.exit("FAIL: ProfileTypes %s lacks %s" % (names, a.want_type))
    print("ok: %s token=%s... -> %s %s" % (a.rpc, a.token[:4], code, msg[:80]))


if __name__ == "__main__":
    main()
