"""Splits the agent's window files (one pprof per window, every sample
labelled with its process's pid and comm) into one file per process per
window, named as the agent's --local-store-layout=process names them:
OUT/TIME_PID_COMM.pb.gz (comm reduced to [A-Za-z0-9._-]).

    python3 split.py OUTDIR WINDOW.pb.gz...

Works on the protobuf wire format directly (no generated code): every
top-level field but the samples is copied as is, and each output keeps the
samples of one (pid, comm). Unused locations and strings stay; pprof tools
do not mind. Files already split are skipped."""
import gzip
import os
import re
import sys


def varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field number, wire type, value or bytes, raw bytes) of a message."""
    i = 0
    while i < len(buf):
        start = i
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("bad wire type %d" % wt)
        yield num, wt, v, buf[start:i]


def split(path, outdir):
    data = gzip.decompress(open(path, "rb").read())
    strings, other, samples = [], [], []
    for num, wt, v, raw in fields(data):
        if num == 6:  # string_table
            strings.append(v.decode("utf-8", "replace"))
        if num == 2:  # sample
            samples.append((v, raw))
        else:
            other.append(raw)
    groups = {}
    for v, raw in samples:
        labels = {}
        for num, wt, lv, _ in fields(v):
            if num == 3:  # label {key = 1, str = 2}
                kv = {n: x for n, _, x, _ in fields(lv)}
                labels[strings[kv.get(1, 0)]] = strings[kv.get(2, 0)]
        key = (labels.get("pid", "0"), labels.get("comm", ""))
        groups.setdefault(key, []).append(raw)
    stem = os.path.basename(path)[:-len(".pb.gz")]
    for (pid, comm), raws in groups.items():
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", comm)
        with open(os.path.join(outdir, "%s_%s_%s.pb.gz" % (stem, pid, safe)), "wb") as f:
            f.write(gzip.compress(b"".join(other + raws), compresslevel=1))


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    done = os.path.join(outdir, ".done")
    seen = set(open(done).read().split()) if os.path.exists(done) else set()
    with open(done, "a") as d:
        for path in sys.argv[2:]:
            name = os.path.basename(path)
            if name in seen or not name.endswith(".pb.gz"):
                continue
            split(path, outdir)
            d.write(name + "\n")


main()
