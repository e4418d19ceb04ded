"""A real gRPC server (python3-grpcio) for the client tests.

Service kiln.test.Echo with raw-bytes methods:
  Unary   -> "<authorization metadata>|<grpc-timeout present>|<request>"; "fail" aborts with
             INVALID_ARGUMENT and a message needing percent-encoding
  Concat  -> client-streaming: the concatenation of every request message
  Slow    -> sleeps 3 s (deadline test)
Prints the port it listens on, then serves until killed.
"""
import concurrent.futures
import sys
import time

import grpc


def unary(req, ctx):
    md = dict(ctx.invocation_metadata())
    if req == b"fail":
        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad input: \u00fc 100%")
    remaining = ctx.time_remaining()
    has_deadline = b"1" if remaining is not None and remaining < 3600 else b"0"
    return md.get("authorization", "").encode() + b"|" + has_deadline + b"|" + req


def concat(it, ctx):
    return b"".join(it)


def slow(req, ctx):
    time.sleep(3)
    return req


handler = grpc.method_handlers_generic_handler(
    "kiln.test.Echo",
    {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Concat": grpc.stream_unary_rpc_method_handler(concat),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
    },
)
server = grpc.server(
    concurrent.futures.ThreadPoolExecutor(4),
    options=[("grpc.max_receive_message_length", 64 << 20)],
)
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()  # exits when the test closes our stdin (or kills us)
server.stop(0)
