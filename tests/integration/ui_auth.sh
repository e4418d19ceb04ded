#!/usr/bin/env bash
# The web UI with a server that requires tokens (docs/SECURITY.md): headless
# Chromium (ui_auth.mjs) sees the token form, a wrong token is refused, a
# read token is accepted and kept for the session, and the UI shows the
# profile pushed with a write token.
source "$(dirname "$0")/ui_lib.bash"
ui_setup
mkdir -p "$T/prof"
(cd "$KILN_ROOT/tests/peers/go/uiload" && go build -o "$T/uiload" main.go) || die "go build uiload"
"$T/uiload" -out "$T/prof" -n 1 -units 40 || die "uiload"

R=read-$(openssl rand -hex 12)
W=write-$(openssl rand -hex 12)
printf 'read %s\nwrite %s\n' "$R" "$W" >"$T/tokens"
chmod 600 "$T/tokens"
ui_start_kiln --auth-tokens-file="$T/tokens"

# The UI's files load without a token; its API does not.
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/")" = 200 ] || die "/ needs a token"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/profile-types")" = 401 ] || die "API open"

$PY - "$STUBS" "$ADDR" "$W" "$T/prof/cpu-0.pb.gz" <<'PYEOF' || die "WriteRaw with the write token"
import sys
sys.path.insert(0, sys.argv[1])
import grpc
from parca.profilestore.v1alpha1 import profilestore_pb2 as ps, profilestore_pb2_grpc as psg
req = ps.WriteRawRequest()
s = req.series.add()
s.labels.labels.add(name="__name__", value="uiload")
s.labels.labels.add(name="job", value="ui")
s.samples.add(raw_profile=open(sys.argv[4], "rb").read())
psg.ProfileStoreServiceStub(grpc.insecure_channel(sys.argv[2])).WriteRaw(
    req, metadata=[("authorization", "Bearer " + sys.argv[3])], timeout=30)
PYEOF

UI_TYPE=uiload:cpu:nanoseconds:cpu:nanoseconds:delta timeout 300 \
	node "$KILN_ROOT/tests/integration/ui_auth.mjs" "$URL" "$R" || die "browser steps failed"
echo "PASS"
