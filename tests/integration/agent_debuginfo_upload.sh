#!/usr/bin/env bash
# The agent uploads the debuginfo of what it profiles to a real `kiln`
# (Parca's DebuginfoService), in the background:
#   - the server is down when the first window is pushed, so the first
#     attempt fails and is retried (with backoff) once it is up;
#   - afterwards `kilnctl debuginfo ls` lists the test program's build ID,
#     and what was stored is the extracted debug part (smaller than the
#     binary, same build ID, still has burn_two in its symbol table);
#   - each build ID is uploaded once, however many windows show it;
#   - a stripped program (nothing to symbolize from) is not uploaded, but
#     one with a local debug file (.gnu_debuglink) gets that file uploaded;
#   - with --debuginfo-upload-disable, a second program is not uploaded;
#   - with --debuginfo-strip=false, the whole binary is uploaded.
source "$(dirname "$0")/../lib/agent_test.bash"
agent_setup
agent_build burn
[ -x "$KILN_BIN/kiln" ] && [ -x "$KILN_BIN/kilnctl" ] || fail "precondition: kiln, kilnctl not built"
bin="$AGENT_TESTBIN/burn"
want=$(readelf -n "$bin" | awk '/Build ID/ {print $3}')
[ -n "$want" ] || fail "burn has no build ID"
port=$(free_port)
K=127.0.0.1:$port
start_kiln() {
	"$KILN_BIN/kiln" --http-address=$K --storage-path="$AGENT_TMP/data" \
		>>"$AGENT_TMP/kiln.log" 2>&1 &
	kiln_pid=$!
	AGENT_CLEANUP+=("kill $kiln_pid 2>/dev/null; wait $kiln_pid 2>/dev/null")
	for _ in $(seq 1 100); do curl -sf "http://$K/ready" >/dev/null && return 0; sleep 0.1; done
	fail "kiln not ready: $(cat "$AGENT_TMP/kiln.log")"
}
listed() { "$KILN_BIN/kilnctl" debuginfo ls --store-address=$K --insecure 2>/dev/null | grep -q "^$1 "; }

mport=$(free_port)
agent_start "$AGENT_TMP/profiles" --remote-store-address=$K --remote-store-insecure \
	--profiling-duration=1s --http-address=127.0.0.1:$mport
"$bin" 0.5 >/dev/null
# The window with burn in it is pushed while nobody listens.
for _ in $(seq 1 100); do grep -q "debuginfo: $want .*retrying" "$AGENT_LOG" && break; sleep 0.1; done
grep -q "debuginfo: $want .*retrying" "$AGENT_LOG" || fail "no failed first attempt: $(cat "$AGENT_LOG")"
start_kiln
# burn shows up in more windows; the retry (10 s backoff, jittered) lands.
for i in $(seq 1 60); do
	[ $((i % 5)) = 1 ] && "$bin" 0.2 >/dev/null
	listed "$want" && break
	sleep 1
done
listed "$want" || fail "build ID $want never uploaded: $(cat "$AGENT_LOG")"
# A stripped program has nothing to upload (its extract would only shadow
# debuginfod on the server): profiled, not uploaded.
gcc -O0 -g -fno-omit-frame-pointer -pthread -DVARIANT=3 -o "$AGENT_TESTBIN/burn3" "$AGENT_PROGS/burn.c"
strip "$AGENT_TESTBIN/burn3"
want3=$(readelf -n "$AGENT_TESTBIN/burn3" | awk '/Build ID/ {print $3}')
# A stripped program whose debug file sits where its .gnu_debuglink says
# (.debug/ beside it): that file is what gets uploaded, unchanged.
gcc -O0 -g -fno-omit-frame-pointer -pthread -DVARIANT=4 -o "$AGENT_TESTBIN/burn4" "$AGENT_PROGS/burn.c"
mkdir -p "$AGENT_TESTBIN/.debug"
objcopy --only-keep-debug "$AGENT_TESTBIN/burn4" "$AGENT_TESTBIN/.debug/burn4.debug"
strip "$AGENT_TESTBIN/burn4"
(cd "$AGENT_TESTBIN/.debug" && objcopy --add-gnu-debuglink=burn4.debug "$AGENT_TESTBIN/burn4")
want4=$(readelf -n "$AGENT_TESTBIN/burn4" | awk '/Build ID/ {print $3}')
"$AGENT_TESTBIN/burn3" 0.3 >/dev/null
"$AGENT_TESTBIN/burn4" 0.3 >/dev/null
"$bin" 0.3 >/dev/null
for _ in $(seq 1 40); do listed "$want4" && break; sleep 0.25; done
sleep 1
metrics=$(curl -sf "http://127.0.0.1:$mport/metrics")
agent_stop
n=$(grep -c "debuginfo: uploaded $want" "$AGENT_LOG" || true)
[ "$n" = 1 ] || fail "build ID $want uploaded $n times: $(grep debuginfo "$AGENT_LOG")"
grep -q 'kiln_agent_debuginfo_uploads_total{result="uploaded"} [1-9]' <<<"$metrics" ||
	fail "metrics: $(echo "$metrics" | grep debuginfo)"
grep -q 'kiln_agent_debuginfo_uploads_total{result="no_symbols"} [1-9]' <<<"$metrics" ||
	fail "metrics: $(echo "$metrics" | grep debuginfo)"
listed "$want3" && fail "stripped burn3 ($want3) was uploaded"
listed "$want4" || fail "burn4's debug file ($want4) was not uploaded: $(grep debuginfo "$AGENT_LOG")"
cmp "$AGENT_TMP/data/debuginfo/$want4/debuginfo" "$AGENT_TESTBIN/.debug/burn4.debug" ||
	fail "the server did not get burn4's local debug file as is"
ls "$(agent_split "$AGENT_TMP/profiles")"/*_burn3.pb.gz >/dev/null 2>&1 || fail "burn3 was not profiled"

# What the server stored: a debug-only extract of burn.
stored="$AGENT_TMP/data/debuginfo/$want/debuginfo"
[ -f "$stored" ] || fail "nothing at $stored: $(find "$AGENT_TMP/data" -maxdepth 3)"
[ "$(readelf -n "$stored" | awk '/Build ID/ {print $3}')" = "$want" ] || fail "stored file has another build ID"
[ "$(stat -c %s "$stored")" -lt "$(stat -c %s "$bin")" ] || fail "stored file is not smaller than the binary"
readelf -sW "$stored" | grep -q " burn_two$" || fail "stored file lacks the symbol table"
readelf -SW "$stored" | grep -q " .debug_info " || fail "stored file lacks .debug_info"
readelf -SW "$stored" | grep " .text " | grep -q NOBITS || fail "stored file still carries .text"

# Disabled: a different build of burn is profiled and pushed, not uploaded.
gcc -O0 -g -fno-omit-frame-pointer -pthread -DVARIANT=2 -o "$AGENT_TESTBIN/burn2" "$AGENT_PROGS/burn.c"
want2=$(readelf -n "$AGENT_TESTBIN/burn2" | awk '/Build ID/ {print $3}')
[ "$want2" != "$want" ] || fail "variant has the same build ID"
agent_start "$AGENT_TMP/profiles2" --remote-store-address=$K --remote-store-insecure \
	--profiling-duration=1s --http-address= --debuginfo-upload-disable
"$AGENT_TESTBIN/burn2" 0.5 >/dev/null
sleep 2.5
agent_stop
[ -n "$(ls "$AGENT_TMP/profiles2")" ] || fail "disabled run wrote no profiles"
listed "$want2" && fail "uploaded $want2 despite --debuginfo-upload-disable"
grep -q "debuginfo" "$AGENT_LOG" && fail "disabled agent logged uploads: $(grep debuginfo "$AGENT_LOG")"

# --debuginfo-strip=false: the whole binary goes up, byte for byte.
gcc -O0 -g -fno-omit-frame-pointer -pthread -DVARIANT=5 -o "$AGENT_TESTBIN/burn5" "$AGENT_PROGS/burn.c"
want5=$(readelf -n "$AGENT_TESTBIN/burn5" | awk '/Build ID/ {print $3}')
agent_start "$AGENT_TMP/profiles3" --remote-store-address=$K --remote-store-insecure \
	--profiling-duration=1s --http-address= --debuginfo-strip=false
"$AGENT_TESTBIN/burn5" 0.4 >/dev/null
for _ in $(seq 1 40); do listed "$want5" && break; sleep 0.25; done
agent_stop
listed "$want5" || fail "burn5 ($want5) not uploaded: $(grep debuginfo "$AGENT_LOG")"
cmp "$AGENT_TMP/data/debuginfo/$want5/debuginfo" "$AGENT_TESTBIN/burn5" ||
	fail "--debuginfo-strip=false did not upload the whole binary"
echo PASS
