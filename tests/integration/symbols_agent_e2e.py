"""Queries a kiln server over gRPC for symbols_agent_e2e.sh (python3-grpcio).

usage:
  symbols_agent_e2e.py total STUBS ADDR SELECTOR
      samples the server holds for parca_agent samples matching SELECTOR
      (e.g. pid="123"); a server that is down counts as -1
  symbols_agent_e2e.py wait-total STUBS ADDR SELECTOR TIMEOUT_S
      waits until the server holds samples for SELECTOR; prints how many
  symbols_agent_e2e.py caught-up STUBS ADDR LOCAL_DIR TIMEOUT_S PID...
      waits until, for every PID, the server holds at least the samples of
      the agent's local files for it (LOCAL_DIR/*_PID_*.pb.gz); a window
      written just before a server crash but not acknowledged is sent again,
      so the server may hold more (at-least-once), never less
  symbols_agent_e2e.py check STUBS ADDR COMM SRCDIR TIMEOUT_S
      waits until the merged profile of COMM shows, with file:line inside the
      function's source (BEGIN/END markers in SRCDIR/prog.c, lib.c):
        - a location whose lines are inlined_mix then outer_function (the
          inlined frame first, one location), called from main;
        - kspin::Spinner::run(long) (C++, in libkspin.so) called from main,
          demangled for display with the mangled name as system_name;
      then prints the stacks it saw and exits 0; exits 1 at the timeout.
"""
import gzip
import re
import sys
import time

cmd, stubs = sys.argv[1], sys.argv[2]
sys.path.insert(0, stubs)
import grpc  # noqa: E402
from google.protobuf import timestamp_pb2  # noqa: E402
from parca.query.v1alpha1 import query_pb2 as q_pb2  # noqa: E402
from parca.query.v1alpha1 import query_pb2_grpc as q_grpc  # noqa: E402
from pprof import profile_pb2  # noqa: E402

TYPE = "parca_agent:samples:count:cpu:nanoseconds:delta"


def parse(raw):
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = profile_pb2.Profile()
    p.ParseFromString(raw)
    return p


def merged(addr, selector):
    q = q_grpc.QueryServiceStub(grpc.insecure_channel(addr))
    now = int(time.time() * 1000)
    start, end = timestamp_pb2.Timestamp(), timestamp_pb2.Timestamp()
    start.FromMilliseconds(now - 3600 * 1000)
    end.FromMilliseconds(now + 3600 * 1000)
    r = q.Query(q_pb2.QueryRequest(mode=q_pb2.QueryRequest.MODE_MERGE,
                                   merge=q_pb2.MergeProfile(query="%s{%s}" % (TYPE, selector),
                                                            start=start, end=end),
                                   report_type=q_pb2.QueryRequest.REPORT_TYPE_PPROF), timeout=60)
    return parse(r.pprof)


def total(p):
    return sum(s.value[0] for s in p.sample)


def stacks(p):
    """Each sample as (count, [(function, file, line), ...] leaf first, with
    every inlined frame, and the location index of each frame)."""
    st = p.string_table
    funcs = {f.id: f for f in p.function}
    locs = {}
    for loc in p.location:
        locs[loc.id] = [(st[funcs[ln.function_id].name], st[funcs[ln.function_id].filename], ln.line,
                         st[funcs[ln.function_id].system_name])
                        for ln in loc.line] or [("<unsymbolized 0x%x>" % loc.address, "", 0, "")]
    return [(s.value[0], [locs[i] for i in s.location_id]) for s in p.sample]


def ranges(srcdir):
    r = {}
    for f in ("prog.c", "lib.cc"):
        for n, line in enumerate(open("%s/%s" % (srcdir, f)), 1):
            m = re.search(r"/\* (BEGIN|END) ([\w:]+) \*/", line)
            if m:
                r.setdefault(m.group(2), [f, 0, 0])[1 if m.group(1) == "BEGIN" else 2] = n
    return r


def frame_ok(frame, name, rng):
    fn, file, line, _ = frame
    f, lo, hi = rng[name]
    return fn.split("(")[0] == name and file.endswith("/" + f) and lo <= line <= hi


def findings(p, rng):
    inl = lib = False
    for _, locs in stacks(p):
        flat = [fr for loc in locs for fr in loc]
        # main somewhere above (outer frames) the function
        has_main = any(frame_ok(fr, "main", rng) for fr in flat)
        for loc in locs:
            if (len(loc) >= 2 and frame_ok(loc[0], "inlined_mix", rng)
                    and frame_ok(loc[1], "outer_function", rng) and has_main):
                inl = True
            if (loc and frame_ok(loc[0], "kspin::Spinner::run", rng) and has_main
                    and loc[0][0] == "kspin::Spinner::run(long)"
                    and loc[0][3] == "_ZN5kspin7Spinner3runEl"):
                lib = True
    return inl, lib


def show(p):
    seen = {}
    for n, locs in stacks(p):
        key = " <- ".join("+".join("%s@%s:%d" % (fn, file.rsplit("/", 1)[-1], ln) for fn, file, ln, _ in loc)
                          for loc in locs[:4])
        seen[key] = seen.get(key, 0) + n
    for k, n in sorted(seen.items(), key=lambda kv: -kv[1])[:15]:
        print("  %5d  %s" % (n, k))


if cmd == "total":
    try:
        print(total(merged(sys.argv[3], sys.argv[4])))
    except grpc.RpcError:
        print(-1)
elif cmd == "wait-total":
    addr, sel, deadline = sys.argv[3], sys.argv[4], time.time() + float(sys.argv[5])
    while True:
        try:
            n = total(merged(addr, sel))
        except grpc.RpcError:
            n = 0
        if n > 0 or time.time() > deadline:
            print(n)
            sys.exit(0)
        time.sleep(0.2)
elif cmd == "caught-up":
    import glob
    addr, local, deadline = sys.argv[3], sys.argv[4], time.time() + float(sys.argv[5])
    while True:
        status = []
        for pid in sys.argv[6:]:
            files = glob.glob("%s/*_%s_*.pb.gz" % (local, pid))
            want = sum(total(parse(open(f, "rb").read())) for f in files)
            try:
                got = total(merged(addr, 'pid="%s"' % pid))
            except grpc.RpcError as e:
                got = -1
            status.append((pid, len(files), want, got))
        if all(want > 0 and got >= want for _, _, want, got in status):
            for pid, n, want, got in status:
                print("pid %s: %d local files with %d samples, server %d" % (pid, n, want, got))
            sys.exit(0)
        if time.time() > deadline:
            for pid, n, want, got in status:
                print("FAIL: pid %s: %d local files with %d samples, server %d" % (pid, n, want, got))
            sys.exit(1)
        time.sleep(1)
elif cmd == "check":
    addr, comm, srcdir, timeout = sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
    rng = ranges(srcdir)
    deadline = time.time() + timeout
    while True:
        p = merged(addr, 'comm="%s"' % comm)
        inl, lib = findings(p, rng)
        if inl and lib:
            print("ok: %s: inlined_mix+outer_function <- main and kspin::Spinner::run(long) <- main, "
                  "with file:line" % comm)
            show(p)
            sys.exit(0)
        if time.time() > deadline:
            print("FAIL: %s: inlined frame found: %s, kspin::Spinner::run found: %s; %d samples; stacks:" %
                  (comm, inl, lib, total(p)))
            show(p)
            sys.exit(1)
        time.sleep(1)
else:
    sys.exit("unknown command " + cmd)
