#!/usr/bin/python3
"""Drives a running kiln with the same profile three ways, one after the
other, and prints figures (never pass/fail):

  WriteRaw (python3-grpcio, the Parca protocol)   the reference path
  POST /ingest format=pprof (Pyroscope's SDK shape, raw body)
  POST /ingest format=folded (the same stacks as folded text)

  pyroscope_ingest.py STUBS ADDR PID PPROF FOLDED REQUESTS THREADS

Each request pushes the profile under its own series label (so nothing is
deduplicated); the time is wall time of all threads together, and the
server CPU is read from /proc/PID/stat before and after.
"""
import http.client
import os
import sys
import threading
import time


def cpu_seconds(pid):
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(name, pid, n, threads, make_worker, nbytes):
    counter = iter(range(n))
    lock = threading.Lock()
    errors = []

    def loop():
        push = make_worker()
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            try:
                push(i)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(str(e))
                return

    c0, t0 = cpu_seconds(pid), time.monotonic()
    ts = [threading.Thread(target=loop) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, cpu = time.monotonic() - t0, cpu_seconds(pid) - c0
    print("%-22s %5d req  %7.0f req/s  %6.1f MB/s in  server CPU %.2f ms/req%s" % (
        name, n, n / wall, n * nbytes / wall / 1e6, cpu * 1000 / n,
        ("  ERRORS: %d, first: %s" % (len(errors), errors[0])) if errors else ""))


def main():
    stubs, addr, pid, pprof_path, folded_path, n, threads = sys.argv[1:8]
    n, threads = int(n), int(threads)
    sys.path.insert(0, stubs)
    import grpc
    from parca.profilestore.v1alpha1 import profilestore_pb2 as ps
    from parca.profilestore.v1alpha1 import profilestore_pb2_grpc as psg

    pprof = open(pprof_path, "rb").read()
    folded = open(folded_path, "rb").read()
    host, port = addr.rsplit(":", 1)

    def grpc_worker():
        stub = psg.ProfileStoreServiceStub(grpc.insecure_channel(addr))

        def push(i):
            labels = ps.LabelSet(labels=[ps.Label(name="__name__", value="bench_writeraw"),
                                         ps.Label(name="i", value=str(i))])
            stub.WriteRaw(ps.WriteRawRequest(series=[ps.RawProfileSeries(
                labels=labels, samples=[ps.RawSample(raw_profile=pprof)])]), timeout=60)
        return push

    def http_worker(fmt, body):
        def make():
            conn = http.client.HTTPConnection(host, int(port), timeout=60)

            def push(i):
                now = int(time.time())
                conn.request("POST", "/ingest?name=bench_%s.cpu%%7Bi%%3D%d%%7D&format=%s&from=%d"
                             "&until=%d" % (fmt, i, fmt, now - 10, now), body=body,
                             headers={"Content-Type": "application/octet-stream"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise RuntimeError("HTTP %d: %s" % (r.status, data[:200]))
            return push
        return make

    print("profile: %d bytes pprof, %d bytes folded (%d stacks); %d threads" % (
        len(pprof), len(folded), folded.count(b"\n"), threads))
    run("WriteRaw (gRPC)", pid, n, threads, grpc_worker, len(pprof))
    run("/ingest format=pprof", pid, n, threads, http_worker("pprof", pprof), len(pprof))
    run("/ingest format=folded", pid, n, threads, http_worker("folded", folded), len(folded))


if __name__ == "__main__":
    main()
