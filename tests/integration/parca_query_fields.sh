#!/usr/bin/env bash
# Parca's newer QueryService fields over gRPC with Debian's python3-grpcio:
# QueryRange sum_by, Query group_by (labels.NAME), filter (stack and frame
# filters with Parca's string conditions), sandwich_by_function with and
# without invert_call_stack. Every answer must equal the HTTP/JSON API's
# answer to the same question (sum_by, group_by, focus/ignore/hide,
# sandwich, which the query_* tests check against go tool pprof), and what
# kiln cannot answer as asked is refused with INVALID_ARGUMENT naming the
# field.
# Then the same requests through @parca/client (Parca's own generated
# messages, so its field numbers) over gRPC-Web binary and text, and
# through @connectrpc's gRPC-Web and Connect clients: every answer must
# equal native gRPC's.
source "$(dirname "$0")/server_lib.bash"
bash "$KILN_ROOT/tests/peers/node/install.sh" || die "node peer install"
NODE_PEER=$KILN_ROOT/build/node-peer
PROFILE_PAIRS=3 server_setup
server_start

P=$T/prof
for comm in api db; do
	for pid in 1 2; do
		case $comm in api) files=("$P/cpu-0.pb.gz" "$P/cpu-1.pb.gz" "$P/cpu-2.pb.gz") ;;
		db) files=("$P/cpu-$pid.pb.gz") ;; esac
		"$KILNCTL" push --address="$ADDR" --labels=job=pf,comm=$comm,pid=$pid "${files[@]}" \
			2>/dev/null || die "push $comm $pid"
	done
done
Q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="pf"}'
now=$(($(date +%s) * 1000))
$PY "$(dirname "$0")/parca_query_fields_client.py" --stubs "$STUBS" --addr "$ADDR" --query "$Q" \
	--start $((now - 86400000)) --end $((now + 60000)) --sandwich main.spinAlpha \
	--calls-out "$T/calls.json" || die "gRPC answers differ from HTTP's"

(cd "$KILN_ROOT/proto" && protoc -I. --include_imports --descriptor_set_out="$T/desc.pb" \
	parca/query/v1alpha1/query.proto) || die "protoc descriptor set"
cp "$KILN_ROOT/tests/peers/node/webrpc_calls.mjs" "$KILN_ROOT/tests/peers/node/webrpc_loader.mjs" \
	"$NODE_PEER/" || die "copy node scripts"
(cd "$NODE_PEER" && timeout 300 node --import ./webrpc_loader.mjs webrpc_calls.mjs \
	"http://$ADDR" "$T/desc.pb" "$T/calls.json") >"$T/node.json" 2>"$T/node.err" ||
	{ cat "$T/node.err"; die "node clients"; }
$PY "$KILN_ROOT/tests/integration/server_grpcweb_client.py" compare --stubs "$STUBS" \
	--addr "$ADDR" --calls "$T/calls.json" --node "$T/node.json" ||
	die "@parca/client or Connect answers differ from native gRPC"
server_stop
echo "PASS: Parca's query fields over gRPC"
