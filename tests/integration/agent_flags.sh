#!/usr/bin/env bash
# kiln-agent's command line: --help lists every flag with its default, and
# mistakes (unknown flag, bad value, no output, not root) are one-line
# errors with a non-zero exit, never a crash or a silent start.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent="$KILN_BIN/kiln-agent"

help=$("$agent" --help) || fail "--help exited non-zero"
for f in --node --log-level --http-address --profiling-duration \
	--profiling-cpu-sampling-frequency --local-store-directory --local-store-layout \
	--metadata-external-labels \
	--remote-store-address --store-address --remote-store-insecure --insecure \
	--remote-store-insecure-skip-verify --remote-store-bearer-token \
	--remote-store-bearer-token-file --remote-store-buffer-bytes --debuginfo-upload-disable \
	--debuginfo-upload-max-parallel --debuginfo-upload-timeout-duration \
	--debuginfo-upload-max-bytes-per-second --debuginfo-temp-dir --debuginfo-strip; do
	grep -q -- "$f" <<<"$help" || fail "--help does not list $f"
done
for d in "default: 127.0.0.1:7071" "default: process" "default: 10s" "default: 19" "default: info" "default: the hostname"; do
	grep -q "$d" <<<"$help" || fail "--help does not show \"$d\""
done

expect_error() { # expected-substring args...
	local want=$1; shift
	local err rc=0
	err=$(timeout 20 "$agent" "$@" 2>&1 >/dev/null) || rc=$?
	[ "$rc" -ne 0 ] || fail "kiln-agent $* succeeded"
	[ "$(echo "$err" | wc -l)" -eq 1 ] || fail "kiln-agent $*: not one line: $err"
	grep -q -- "$want" <<<"$err" || fail "kiln-agent $*: \"$err\" lacks \"$want\""
	echo "ok: $* -> $err"
}
expect_error "unknown flag" --no-such-flag
expect_error "profiling-duration" --profiling-duration=soon --local-store-directory=/tmp/x
expect_error "1..10000" --profiling-cpu-sampling-frequency=0 --local-store-directory=/tmp/x
expect_error "label name" --metadata-external-labels=bad-name=1 --local-store-directory=/tmp/x
expect_error "window or process" --local-store-layout=pid --local-store-directory=/tmp/x
expect_error "1..16" --debuginfo-upload-max-parallel=0 --remote-store-address=127.0.0.1:1
expect_error "cannot read the token" --remote-store-address=127.0.0.1:1 \
	--remote-store-bearer-token-file=/nonexistent/token
expect_error "--local-store-directory" --node=x
expect_error "unexpected argument" --local-store-directory=/tmp/x extra

# Without the capabilities (nobody, no ambient set): a clear message naming
# them, before touching anything.
err=$(timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups "$agent" \
	--local-store-directory="$AGENT_TMP/p" 2>&1) && fail "agent ran as nobody"
grep -q "lacks CAP_BPF" <<<"$err" || fail "as nobody: $err"
[ "$(echo "$err" | wc -l)" -eq 1 ] || fail "as nobody, not one line: $err"

# The /metrics port in use: a clear message too.
port=$(free_port)
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$port)); s.listen(); time.sleep(30)" &
AGENT_CLEANUP+=("kill $!")
for _ in $(seq 1 100); do ss -ltn | grep -q "127.0.0.1:$port " && break; sleep 0.1; done
expect_error "cannot listen" --local-store-directory="$AGENT_TMP/p" --http-address=127.0.0.1:$port
echo PASS
