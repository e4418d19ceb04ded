#!/usr/bin/python3
"""ScrapeService/Targets with python3-grpcio (a third-party gRPC client).

  scrape_targets_client.py --stubs DIR --addr HOST:PORT --state any|active|dropped

Prints one line per target: "job<TAB>url<TAB>health<TAB>labels<TAB>last_error"
(labels as k=v,k=v sorted). Stubs are generated at test time from proto/.
"""
import argparse
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--stubs", required=True)
ap.add_argument("--addr", required=True)
ap.add_argument("--state", default="any")
a = ap.parse_args()
sys.path.insert(0, a.stubs)
import grpc  # noqa: E402
from parca.scrape.v1alpha1 import scrape_pb2, scrape_pb2_grpc  # noqa: E402

states = {"any": 0, "active": 1, "dropped": 2}
health = {0: "unknown", 1: "up", 2: "down"}
with grpc.insecure_channel(a.addr) as ch:
    resp = scrape_pb2_grpc.ScrapeServiceStub(ch).Targets(
        scrape_pb2.TargetsRequest(state=states[a.state]), timeout=10)
for job, ts in sorted(resp.targets.items()):
    for t in ts.targets:
        labels = ",".join(sorted(f"{l.name}={l.value}" for l in t.labels.labels))
        print(f"{job}\t{t.url}\t{health[t.health]}\t{labels}\t{t.last_error}")
