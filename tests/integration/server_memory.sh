#!/usr/bin/env bash
# What one big request costs the server, and what it gives back. Runs the
# release build (build/bin/kiln, from `make`): ASan's redzones and
# quarantine would make resident sizes meaningless.
#
# 1. One ~62 MiB WriteRaw of 10,000 series: the peak resident size (VmHWM)
#    may grow by at most 6x the request, and once answered the resident
#    size (VmRSS) must fall back to within 2.5x the request of where it
#    started (what stays is the store's in-memory head: the 10,000 series
#    just written). Before: 10.6x at the peak (every profile of the request
#    held decoded at once), and all of it kept (the heap never trimmed).
# 2. Four such requests at once against --max-inflight-request-bytes=150MiB:
#    some are refused RESOURCE_EXHAUSTED, naming the flag; at least one is
#    stored; every acknowledged one is stored whole and no refused one is
#    stored at all.
source "$(dirname "$0")/server_lib.bash"
KILN=$KILN_ROOT/build/bin/kiln
[ -x "$KILN" ] || die "no $KILN: this test needs the release build (make)"
T=$(mktemp -d /tmp/kiln-server-test.XXXXXX)
trap server_cleanup EXIT
STUBS=$T/stubs
mkdir -p "$STUBS"
(cd "$KILN_ROOT/proto" && $PY -m grpc_tools.protoc -I. --python_out="$STUBS" \
	--grpc_python_out="$STUBS" parca/profilestore/v1alpha1/profilestore.proto \
	pprof/profile.proto) || die "grpc_tools.protoc failed"
BIG=$KILN_ROOT/tests/integration/server_bigwrite.py
$PY "$BIG" gen --stubs "$STUBS" --out "$T/mem0.bin" --series 10000 --bytes $((62 << 20)) \
	--job mem0 || die "generating the request"
for j in 1 2 3; do
	$PY "$BIG" copy --in "$T/mem0.bin" --out "$T/mem$j.bin" --job mem$j || die "copy"
done
SIZE_KB=$(($(stat -c %s "$T/mem0.bin") / 1024))

kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$SPID/status"; }

# 1. One request.
server_start --grpc-max-message-size=128MiB
BASE=$(kb VmRSS)
out=$($PY "$BIG" send --stubs "$STUBS" --addr "$ADDR" --file "$T/mem0.bin") || die "send"
[ "$out" = OK ] || die "the 62 MiB WriteRaw failed: $out"
PEAK=$(kb VmHWM)
AFTER=$(kb VmRSS)
echo "request ${SIZE_KB} KiB: RSS ${BASE} KiB before, peak ${PEAK} KiB, ${AFTER} KiB after"
[ $((PEAK - BASE)) -le $((6 * SIZE_KB)) ] ||
	die "peak grew by $((PEAK - BASE)) KiB for a ${SIZE_KB} KiB request (bound: 6x)"
[ $((AFTER - BASE)) -le $((SIZE_KB * 5 / 2)) ] ||
	die "kept $((AFTER - BASE)) KiB after a ${SIZE_KB} KiB request (bound: 2.5x)"
server_stop

# 2. Four at once, over the in-flight budget.
rm -rf "$T/data"
server_start --grpc-max-message-size=128MiB --max-inflight-request-bytes=150MiB
$PY "$BIG" send --stubs "$STUBS" --addr "$ADDR" \
	--file "$T/mem0.bin" "$T/mem1.bin" "$T/mem2.bin" "$T/mem3.bin" >"$T/four.txt" ||
	die "send"
echo "four at once: $(tr '\n' '|' <"$T/four.txt")"
echo "peak ${PEAK} KiB with one; $(kb VmHWM) KiB with four"
ok=$(grep -c '^OK$' "$T/four.txt")
refused=$(grep -c '^RESOURCE_EXHAUSTED .*--max-inflight-request-bytes' "$T/four.txt")
[ "$ok" -ge 1 ] || die "no request of four was stored"
[ "$refused" -ge 1 ] || die "four 62 MiB requests fit a 150 MiB budget?"
[ $((ok + refused)) -eq 4 ] || die "unexpected answers: $(cat "$T/four.txt")"
# Exactly the acknowledged requests' jobs are stored, each with all its series.
expect_jobs=$(paste -d' ' <(printf 'mem%s\n' 0 1 2 3) "$T/four.txt" | awk '$2 == "OK" {print $1}' |
	sort | tr '\n' ' ')
got_jobs=$(curl -sf "http://$ADDR/api/v1/values?label=job" |
	$PY -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin)["values"])) + " ")')
[ "$got_jobs" = "$expect_jobs" ] || die "stored jobs '$got_jobs', acknowledged '$expect_jobs'"
profiles=$(curl -sf "http://$ADDR/metrics" | awk '$1 == "kiln_ingested_profiles_total" {print $2}')
[ "$profiles" = $((ok * 10000)) ] || die "$profiles profiles stored for $ok acknowledged requests"
server_stop
echo "PASS: server_memory"
