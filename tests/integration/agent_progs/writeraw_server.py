"""A real grpcio ProfileStoreService server for the agent's push test.

Usage: writeraw_server.py PORT OUT.jsonl STUBS_DIR
It also answers DebuginfoService.ShouldInitiateUpload ("no, thanks"),
appending {"debuginfo": build_id, "authorization": ...} to OUT.jsonl.
Appends one JSON line per WriteRaw request: the authorization metadata and,
per series, its labels (in order), the raw profiles (hex of the bytes) and
each profile's executable_info as [elf_type, has_load_segment, offset, vaddr].
"""
import json
import sys
from concurrent import futures

sys.path.insert(0, sys.argv[3])
import grpc  # noqa: E402
from parca.profilestore.v1alpha1 import profilestore_pb2, profilestore_pb2_grpc  # noqa: E402
from parca.debuginfo.v1alpha1 import debuginfo_pb2, debuginfo_pb2_grpc  # noqa: E402


class Store(profilestore_pb2_grpc.ProfileStoreServiceServicer):
    def WriteRaw(self, request, context):
        md = dict(context.invocation_metadata())
        rec = {"authorization": md.get("authorization", ""), "series": []}
        for s in request.series:
            rec["series"].append({
                "labels": [[l.name, l.value] for l in s.labels.labels],
                "profiles": [r.raw_profile.hex() for r in s.samples],
                "executable_info": [[[e.elf_type, e.HasField("load_segment"),
                                      e.load_segment.offset, e.load_segment.vaddr]
                                     for e in r.executable_info] for r in s.samples],
            })
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(rec) + "\n")
        return profilestore_pb2.WriteRawResponse()


class Debuginfo(debuginfo_pb2_grpc.DebuginfoServiceServicer):
    def ShouldInitiateUpload(self, request, context):
        md = dict(context.invocation_metadata())
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"debuginfo": request.build_id,
                                "authorization": md.get("authorization", "")}) + "\n")
        return debuginfo_pb2.ShouldInitiateUploadResponse(should_initiate_upload=False,
                                                          reason="test server")


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
profilestore_pb2_grpc.add_ProfileStoreServiceServicer_to_server(Store(), server)
debuginfo_pb2_grpc.add_DebuginfoServiceServicer_to_server(Debuginfo(), server)
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()
print("serving", flush=True)
server.wait_for_termination()
