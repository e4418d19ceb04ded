#!/usr/bin/python3
"""grpc.health.v1 client for the kiln server tests (Debian's python3-grpcio).

The message classes are generated at test time by grpc_tools.protoc from
proto/grpc/health/v1/health.proto into --stubs (as health_pb2, top level, so
that they do not shadow the grpc package).

  check ADDR SERVICE WANT    Check; WANT is a status name or a gRPC code name
                             (NOT_FOUND) that the call must fail with
  watch ADDR SERVICE         Watch; prints each status on its own line as it
                             arrives, then "END <code>" when the stream ends
"""
import sys


def main():
    stubs, cmd, addr, service = sys.argv[1:5]
    sys.path.insert(0, stubs)
    import grpc
    import health_pb2
    import health_pb2_grpc

    names = health_pb2.HealthCheckResponse.ServingStatus.Name
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(addr))
    req = health_pb2.HealthCheckRequest(service=service)
    if cmd == "check":
        want = sys.argv[5]
        try:
            got = names(stub.Check(req, timeout=10).status)
        except grpc.RpcError as e:
            got = e.code().name
        if got != want:
            print("FAIL: Check(%r): want %s, got %s" % (service, want, got), file=sys.stderr)
            sys.exit(1)
        return
    if cmd == "watch":
        code = "OK"
        try:
            for resp in stub.Watch(req):
                print(names(resp.status), flush=True)
        except grpc.RpcError as e:
            code = e.code().name
        print("END " + code, flush=True)
        return
    print("usage: see the docstring", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
