#!/usr/bin/env bash
# Authentication and authorization (docs/SECURITY.md), on real processes over
# loopback: a server with --auth-tokens-file holding a read, a write and an
# admin token. For gRPC (python3-grpcio) and HTTP/JSON (curl, HTTP/1.1 and
# HTTP/2): no token and a bad token are UNAUTHENTICATED / 401 with
# WWW-Authenticate: Bearer and the JSON error; read queries but cannot write,
# write pushes but cannot query, admin does both and deletes debuginfo.
# kilnctl passes its --bearer-token-file; SIGHUP after editing the file
# revokes a token and admits a new one (a broken file keeps the old ones);
# the server's scrape of itself needs no token; kiln-agent pushes with
# --bearer-token-file. A non-loopback address without tokens refuses to
# start with the message, and starts with --auth-disable (no traffic is sent
# to it).
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 server_setup
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
	--grpc_python_out="$STUBS" parca/debuginfo/v1alpha1/debuginfo.proto) ||
	die "grpc_tools.protoc debuginfo failed"
AUTHC="$PY $KILN_ROOT/tests/integration/server_auth_client.py"

R=read-$(openssl rand -hex 12)
W=write-$(openssl rand -hex 12)
A=admin-$(openssl rand -hex 12)
TOK=$T/tokens
cat >"$TOK" <<EOF
# Kiln tokens for server_auth.sh
read  $R
write $W
admin $A
EOF
chmod 600 "$TOK"
echo "$R" >"$T/read.tok"
echo "$W" >"$T/write.tok"

# A self-scrape every second: it must work without a token in the config.
cat >"$T/kiln.yaml" <<'EOF'
scrape_configs:
  - job_name: "self"
    scrape_interval: "1s"
    static_configs:
      - targets: ["127.0.0.1:${KILN_PORT}"]
    profiling_config:
      pprof_config:
        process_cpu: {enabled: true}
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        goroutine: {enabled: false}
EOF
server_start --auth-tokens-file="$TOK" --config-path="$T/kiln.yaml"
K=http://$ADDR
grep -q "auth: 3 token(s) from $TOK: 1 read, 1 write, 1 admin" "$T/server.log" ||
	die "no token summary in the log"
for s in "$R" "$W" "$A"; do
	grep -qF -- "$s" "$T/server.log" && die "a token appears in the log"
done

# ---- HTTP: status, WWW-Authenticate and the JSON body -------------------------
# http_expect STATUS PATH [TOKEN] [curl args...]
http_expect() {
	local want=$1 path=$2 tok=${3:-}
	shift 3 2>/dev/null || shift $#
	local auth=()
	[ -n "$tok" ] && auth=(-H "Authorization: Bearer $tok")
	local got
	got=$(curl -s -D "$T/h.txt" -o "$T/b.txt" -w '%{http_code}' "${auth[@]}" "$@" "$K$path")
	[ "$got" = "$want" ] || die "$* $path with token ${tok:0:5}: HTTP $got, want $want: $(cat "$T/b.txt")"
	if [ "$want" = 401 ]; then
		grep -qi '^WWW-Authenticate: Bearer' "$T/h.txt" || die "$path: 401 without WWW-Authenticate"
		$PY -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"]' "$T/b.txt" ||
			die "$path: 401 body is not the JSON error: $(cat "$T/b.txt")"
	fi
	if [ "$want" = 403 ]; then
		grep -q '"error":".*needs a token with role' "$T/b.txt" || die "$path: 403 body: $(cat "$T/b.txt")"
	fi
}
for proto in --http1.1 --http2-prior-knowledge; do
	http_expect 401 /api/v1/profile-types "" $proto
	http_expect 401 /api/v1/profile-types "not-a-token-at-all-0000" $proto
	http_expect 200 /api/v1/profile-types "$R" $proto
	http_expect 403 /api/v1/profile-types "$W" $proto
	http_expect 200 /api/v1/profile-types "$A" $proto
	http_expect 200 /healthy "" $proto
	http_expect 200 /ready "" $proto
	http_expect 200 / "" $proto # the UI's files: it must load to ask for a token
	http_expect 401 /metrics "" $proto
	http_expect 200 /metrics "$R" $proto
	http_expect 403 /debug/pprof/heap "$R" $proto
	http_expect 404 /debug/pprof/heap "$A" $proto # admin passes the gate
done
grep -q "needs a bearer token" <(curl -s "$K/api/v1/labels") || die "401 message lacks the reason"
# Basic credentials are not a bearer token.
http_expect 401 /api/v1/labels "" -u "user:$R"
# A refused request's body is never read: a large upload gets its 401 quickly.
head -c 8000000 /dev/zero >"$T/big"
http_expect 401 /api/v1/labels "" -X GET --data-binary @"$T/big"
echo "ok: HTTP/1.1 and HTTP/2 gates"

# ---- gRPC ------------------------------------------------------------------------
call() { $AUTHC call --stubs "$STUBS" --addr "$ADDR" "$@" || die "gRPC: $*"; }
P=$T/prof/cpu-0.pb.gz
call --rpc write --profile "$P" --token "" --expect UNAUTHENTICATED --contains "bearer token"
call --rpc write --profile "$P" --token "bad-token-0123456789" --expect UNAUTHENTICATED \
	--contains "invalid bearer token"
call --rpc write --profile "$P" --token "$R" --expect PERMISSION_DENIED --contains "role write"
call --rpc write --profile "$P" --token "$W" --expect OK
call --rpc write --profile "$P" --token "$A" --expect OK
call --rpc types --token "" --expect UNAUTHENTICATED
call --rpc types --token "bad-token-0123456789" --expect UNAUTHENTICATED
call --rpc types --token "$W" --expect PERMISSION_DENIED --contains "role read"
call --rpc types --token "$R" --expect OK --want-type kiln_auth
call --rpc types --token "$A" --expect OK --want-type kiln_auth
call --rpc should-upload --token "" --expect UNAUTHENTICATED
call --rpc should-upload --token "$R" --expect PERMISSION_DENIED
call --rpc should-upload --token "$W" --expect OK
echo "ok: gRPC gates"

# ---- kilnctl -------------------------------------------------------------------------
Q='kiln_auth:cpu:nanoseconds:cpu:nanoseconds:delta'
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h >"$T/q.txt" 2>&1 && die "kilnctl query without a token worked"
grep -q "HTTP 401" "$T/q.txt" || die "kilnctl without a token: $(cat "$T/q.txt")"
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --bearer-token-file="$T/read.tok" >"$T/q.txt" 2>&1 ||
	die "kilnctl query with the read token: $(cat "$T/q.txt")"
grep -q 'spin' "$T/q.txt" || die "kilnctl query output: $(cat "$T/q.txt")"
"$KILNCTL" query --address="$ADDR" "$Q" --since=24h --bearer-token="$W" >"$T/q.txt" 2>&1 &&
	die "kilnctl query with the write token worked"
grep -q "HTTP 403" "$T/q.txt" || die "kilnctl with the write token: $(cat "$T/q.txt")"

# Debuginfo: write uploads, read lists, only admin deletes.
ELF=$KILN_ROOT/build/san/tests/server/test_auth
[ -x "$ELF" ] || ELF=/usr/bin/true
id=$(readelf -n "$ELF" | awk '/Build ID/ {print $3}')
"$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure "$ELF" >"$T/up.txt" 2>&1 &&
	die "debuginfo upload without a token worked"
"$KILNCTL" debuginfo upload --store-address="$ADDR" --insecure --bearer-token-file="$T/write.tok" \
	"$ELF" >"$T/up.txt" 2>&1 || die "debuginfo upload: $(cat "$T/up.txt")"
"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure --bearer-token-file="$T/read.tok" |
	grep -q "$id" || die "debuginfo ls lacks $id"
http_expect 401 "/api/v1/debuginfo/$id" "" -X DELETE
http_expect 403 "/api/v1/debuginfo/$id" "$R" -X DELETE
http_expect 403 "/api/v1/debuginfo/$id" "$W" -X DELETE
http_expect 200 "/api/v1/debuginfo/$id" "$A" -X DELETE
http_expect 404 "/api/v1/debuginfo/$id" "$A" -X DELETE
"$KILNCTL" debuginfo ls --store-address="$ADDR" --insecure --bearer-token="$R" |
	grep -q "$id" && die "deleted debuginfo still listed"
echo "ok: kilnctl and debuginfo roles"

# ---- the server's own scrape needs no token ---------------------------------------
ok=0
for _ in $(seq 1 60); do
	curl -s -H "Authorization: Bearer $R" "$K/api/v1/targets?state=active" >"$T/targets.json"
	if $PY - "$T/targets.json" <<'PYEOF'; then
import json, sys
t = json.load(open(sys.argv[1]))["active"][0]
if t["last_scrape"] == 0:
    sys.exit(1)
# Perf events may be forbidden here (503); what matters is that the gate let it in.
assert "401" not in t["last_error"] and "403" not in t["last_error"], t
print("ok: self-scrape:", t["health"], t["last_error"] or "no error")
PYEOF
		ok=1
		break
	fi
	sleep 0.5
done
[ $ok = 1 ] || die "self-scrape: $(cat "$T/targets.json")"

# ---- SIGHUP: revoke one token, admit another ------------------------------------------
R2=read2-$(openssl rand -hex 12)
sed -i "s/^read .*/read $R2/" "$TOK"
kill -HUP "$SPID"
for _ in $(seq 1 50); do grep -q "SIGHUP: reloaded $TOK" "$T/server.log" && break; sleep 0.1; done
grep -q "SIGHUP: reloaded $TOK" "$T/server.log" || die "no reload after SIGHUP"
http_expect 401 /api/v1/labels "$R"
http_expect 200 /api/v1/labels "$R2"
call --rpc types --token "$R" --expect UNAUTHENTICATED
call --rpc types --token "$R2" --expect OK
# A broken file is refused with FILE:LINE; the tokens in force stay.
echo "reader $R" >>"$TOK"
kill -HUP "$SPID"
for _ in $(seq 1 50); do grep -q "tokens not reloaded" "$T/server.log" && break; sleep 0.1; done
grep -q "tokens not reloaded, the old ones stay in effect: $TOK:5: unknown role \"reader\"" \
	"$T/server.log" || die "bad file on SIGHUP: $(grep -i sighup "$T/server.log")"
http_expect 200 /api/v1/labels "$R2"
sed -i '/^reader /d' "$TOK"
echo "ok: SIGHUP"

# ---- kiln-agent pushes with --bearer-token-file ---------------------------------------
if [ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ]; then
	"$KILN_BIN/kiln-agent" --remote-store-address="$ADDR" --remote-store-insecure \
		--bearer-token-file="$T/write.tok" --profiling-duration=1s \
		--profiling-cpu-sampling-frequency=49 --http-address= >"$T/agent.log" 2>&1 &
	APID=$!
	found=0
	for _ in $(seq 1 100); do
		kill -0 $APID 2>/dev/null || die "agent exited: $(cat "$T/agent.log")"
		if curl -s -H "Authorization: Bearer $R2" "$K/api/v1/profile-types" |
			grep -q '"parca_agent:samples:count:cpu:nanoseconds:delta"'; then
			found=1
			break
		fi
		sleep 0.2
	done
	kill -INT $APID
	wait $APID
	[ $found = 1 ] || die "no agent profiles: $(cat "$T/agent.log")"
	grep -qi "unauthenticated\|permission_denied\|status 16\|status 7\b" "$T/agent.log" &&
		die "agent was refused: $(cat "$T/agent.log")"
	echo "ok: kiln-agent pushed with --bearer-token-file"
else
	die "precondition: the kiln-agent case needs root and /sys/kernel/btf/vmlinux"
fi
server_stop

# ---- the loopback rule -------------------------------------------------------------------
ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep -v ':' | head -n1)
[ -n "$ip" ] || ip=0.0.0.0
for addr in "$ip:0" ":0"; do
	if "$KILN" --http-address="$addr" --storage-path="$T/d-refuse" >"$T/refuse.log" 2>&1; then
		die "--http-address=$addr without tokens started"
	fi
	[ "$(grep -c . "$T/refuse.log")" = 1 ] || die "refusal is not one line: $(cat "$T/refuse.log")"
	grep -q "listens beyond loopback without authentication: pass --auth-tokens-file=FILE" \
		"$T/refuse.log" || die "refusal message: $(cat "$T/refuse.log")"
	grep -q -- "--auth-disable" "$T/refuse.log" || die "refusal lacks --auth-disable"
done
echo "ok: refused: $(cat "$T/refuse.log")"
"$KILN" --http-address="$ip:0" --storage-path="$T/d-open" --auth-disable >"$T/open.log" 2>&1 &
OPID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$T/open.log" && break; sleep 0.1; done
grep -q "listening on $ip:0" "$T/open.log" || die "--auth-disable did not start: $(cat "$T/open.log")"
grep -q "auth-disable: anyone who reaches" "$T/open.log" || die "no warning with --auth-disable"
kill -TERM $OPID
wait $OPID || die "--auth-disable server exited $?"
# Tokens on a non-loopback address: starts.
"$KILN" --http-address="$ip:0" --storage-path="$T/d-tok" --auth-tokens-file="$TOK" >"$T/tok.log" 2>&1 &
OPID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$T/tok.log" && break; sleep 0.1; done
grep -q "listening on $ip:0" "$T/tok.log" || die "with tokens it did not start: $(cat "$T/tok.log")"
kill -TERM $OPID
wait $OPID || die "server with tokens exited $?"
# A bad tokens file stops start-up with FILE:LINE.
printf 'read short\n' >"$T/bad-tokens"
"$KILN" --http-address=127.0.0.1:0 --storage-path="$T/d-bad" --auth-tokens-file="$T/bad-tokens" \
	>"$T/bad.log" 2>&1 && die "a bad tokens file was accepted"
grep -q "$T/bad-tokens:1: the token is shorter than 16 characters" "$T/bad.log" ||
	die "bad tokens file: $(cat "$T/bad.log")"
echo "ok: loopback rule"
echo "PASS"
