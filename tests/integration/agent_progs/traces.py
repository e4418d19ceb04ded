"""Parses `go tool pprof -traces` output (stdin) into JSON lines, one per
sample: {"n": count, "frames": [leaf, ..., root], "labels": {k: v}}."""
import json
import re
import sys

def main():
    blocks = sys.stdin.read().split("-----------+-------------------------------------------------------")
    for block in blocks[1:]:
        labels, frames, n = {}, [], None
        for line in block.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*):\s+(.*)$", line)
            if n is None and m:
                labels[m.group(1)] = m.group(2).strip()
                continue
            m = re.match(r"^\s+(\d+)\s+(.*)$", line)
            if n is None and m:
                n = int(m.group(1))
                frames.append(m.group(2).strip())
                continue
            if n is not None:
                frames.append(line.strip())
        if n is not None:
            print(json.dumps({"n": n, "frames": frames, "labels": labels}))

main()
