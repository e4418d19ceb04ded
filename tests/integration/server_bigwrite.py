#!/usr/bin/python3
"""Big WriteRaw requests for tests/integration/server_memory.sh.

  gen   --stubs DIR --out FILE --series N --bytes B
        writes one serialized WriteRawRequest of about B bytes: N series
        (distinct labels), each one uncompressed pprof CPU profile of about
        B/N bytes with its own functions, locations and stacks, so that the
        server has real decoding and storing to do.
  copy  --in FILE --out FILE --job NAME
        the same request with its job label renamed (same length)
  send  --stubs DIR --addr A --file FILE... [--timeout S]
        sends each file as a WriteRaw at once (one thread each) and prints
        one line per request: OK or the status code name, then its message.
"""
import argparse
import random
import sys
import threading
import time


def gen(args):
    from parca.profilestore.v1alpha1 import profilestore_pb2 as ps_pb2
    from pprof import profile_pb2 as prof_pb2

    rnd = random.Random(args.seed)
    per = args.bytes // args.series
    req = ps_pb2.WriteRawRequest()
    now_ns = int(time.time() * 1e9)
    template = None
    for i in range(args.series):
        if template is None or i % 1000 == 0:
            p = prof_pb2.Profile()
            p.string_table.append("")

            def s(x):
                p.string_table.append(x)
                return len(p.string_table) - 1
            st = p.sample_type.add(type=s("samples"), unit=s("count"))
            st2 = p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
            p.period_type.type = s("cpu")
            p.period_type.unit = s("nanoseconds")
            p.period = 10000000
            p.duration_nanos = 10 * 10**9
            m = p.mapping.add(id=1, memory_start=0x400000, memory_limit=0x800000,
                              filename=s(f"/usr/bin/app{i}"))
            nfun = max(8, per // 90)
            for f in range(1, nfun + 1):
                p.function.add(id=f, name=s(f"pkg{i}.function_{f}_{rnd.randrange(1 << 30):x}"),
                               system_name=0, filename=s(f"src/file{f % 17}.c"))
                loc = p.location.add(id=f, mapping_id=1, address=0x400000 + f * 16)
                loc.line.add(function_id=f, line=f * 3)
            while p.ByteSize() < per:
                depth = rnd.randrange(4, 24)
                p.sample.add(location_id=[rnd.randrange(1, nfun + 1) for _ in range(depth)],
                             value=[rnd.randrange(1, 100), rnd.randrange(1, 10**9)])
            template = p
        template.time_nanos = now_ns - 60 * 10**9 + i
        se = req.series.add()
        se.labels.labels.add(name="__name__", value="kiln_mem")
        se.labels.labels.add(name="series", value=str(i))
        se.labels.labels.add(name="job", value=args.job)
        se.samples.add(raw_profile=template.SerializeToString())
    data = req.SerializeToString()
    open(args.out, "wb").write(data)
    print(f"{args.out}: {len(data)} bytes, {args.series} series")


def copy(args):
    data = open(args.inp, "rb").read()
    old = b"\x0a\x03job\x12" + bytes([len(args.from_job)]) + args.from_job.encode()
    new = b"\x0a\x03job\x12" + bytes([len(args.job)]) + args.job.encode()
    if len(old) != len(new) or data.count(old) == 0:
        sys.exit("copy: jobs must have the same length and be in the request")
    open(args.out, "wb").write(data.replace(old, new))


def send(args):
    import grpc
    from parca.profilestore.v1alpha1 import profilestore_pb2 as ps_pb2
    from parca.profilestore.v1alpha1 import profilestore_pb2_grpc as ps_grpc

    out = [None] * len(args.file)

    def one(k, path):
        ch = grpc.insecure_channel(args.addr, options=[
            ("grpc.max_send_message_length", 1 << 30),
            ("grpc.max_receive_message_length", 1 << 30)])
        req = ps_pb2.WriteRawRequest.FromString(open(path, "rb").read())
        try:
            ps_grpc.ProfileStoreServiceStub(ch).WriteRaw(req, timeout=args.timeout)
            out[k] = "OK"
        except grpc.RpcError as e:
            out[k] = f"{e.code().name} {e.details()}"
    ts = [threading.Thread(target=one, args=(k, f)) for k, f in enumerate(args.file)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for line in out:
        print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["gen", "copy", "send"])
    ap.add_argument("--in", dest="inp")
    ap.add_argument("--from-job", default="mem0")
    ap.add_argument("--stubs", default=".")
    ap.add_argument("--out")
    ap.add_argument("--series", type=int, default=10000)
    ap.add_argument("--bytes", type=int, default=62 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--job", default="mem0")
    ap.add_argument("--addr")
    ap.add_argument("--file", nargs="*", default=[])
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    {"gen": gen, "copy": copy, "send": send}[args.cmd](args)


if __name__ == "__main__":
    main()
