#!/usr/bin/python3
"""Checks a /metrics page with Prometheus' own Python parser (Debian's
python3-prometheus-client): no family of type "unknown" (a sample away from
its family's HELP/TYPE lines is parsed as one), and the named families exist.

usage: metrics_check.py FILE FAMILY...   (exit 0 = ok, 1 = failures listed)
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    path, want = sys.argv[1], sys.argv[2:]
    with open(path, encoding="utf-8") as f:
        families = list(text_string_to_metric_families(f.read()))
    errors = []
    unknown = [f for f in families if f.type == "unknown"]
    if unknown:
        samples = sum(len(f.samples) for f in unknown)
        names = sorted({f.name for f in unknown})
        errors.append(f"{len(unknown)} families ({samples} samples) of type unknown: "
                      + ", ".join(names[:10]))
    # The parser names a counter family without its _total suffix.
    have = {f.name for f in families} | {f.name + "_total" for f in families}
    for name in want:
        if name not in have:
            errors.append(f"no family {name}")
    for e in errors:
        print(f"{path}: {e}")
    if not errors:
        print(f"{path}: {len(families)} families, none unknown; "
              f"{len(want)} wanted families present")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
