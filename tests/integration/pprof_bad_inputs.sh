#!/usr/bin/env bash
# kilnctl pprof on broken files: truncated, bit-flipped, random, empty,
# missing and wrong-typed inputs exit non-zero with one line naming the file,
# and never crash (a sanitizer report or a signal fails the test).
set -euo pipefail
source "$(dirname "$0")/../peers/pprof_env.sh"
gen=$(build_go_peer)
"$gen" cpu -o "$WORK/good.pb.gz" -seconds 0.3
gunzip -c "$WORK/good.pb.gz" >"$WORK/good.pb"

# Expects failure: exit 1, exactly one stderr line that names the file (for
# merge: next to a good file, and nothing written).
expect_error() { # file [subcommand]
	local f=$1 sub=${2:-validate} rc=0 args=("$1")
	[ "$sub" = merge ] && args=(-o "$WORK/merged.pb.gz" "$WORK/good.pb.gz" "$f")
	"$KILNCTL" pprof "$sub" "${args[@]}" >/dev/null 2>"$WORK/err" || rc=$?
	[ "$rc" -eq 1 ] || die "$sub $f: exit $rc (want 1): $(head -3 "$WORK/err")"
	[ "$(wc -l <"$WORK/err")" -eq 1 ] || die "$sub $f: not one line: $(head -5 "$WORK/err")"
	grep -qF "$f" "$WORK/err" || die "$sub $f: message does not name the file: $(cat "$WORK/err")"
	[ ! -e "$WORK/merged.pb.gz" ] || die "merge with $f wrote its output"
}
# One line naming the file and the problem, from every subcommand.
expect_all() { # file
	local sub
	for sub in validate folded top merge; do expect_error "$1" "$sub"; done
}

"$KILNCTL" pprof validate "$WORK/good.pb.gz" "$WORK/good.pb" >/dev/null || die "good file rejected"

: >"$WORK/empty"
expect_all "$WORK/empty"
grep -q "empty" "$WORK/err" || die "empty file: $(cat "$WORK/err")"
expect_all "$WORK/does-not-exist.pb.gz"
grep -qi "no such file" "$WORK/err" || die "missing file: $(cat "$WORK/err")"
head -c 1000000 /dev/urandom >"$WORK/random"
expect_all "$WORK/random"

size=$(stat -c %s "$WORK/good.pb.gz")
raw_size=$(stat -c %s "$WORK/good.pb")
# Truncated gzip: always an error (the trailer is checked).
for cut in 1 2 10 $((size / 3)) $((size / 2)) $((size - 9)) $((size - 1)); do
	head -c "$cut" "$WORK/good.pb.gz" >"$WORK/trunc$cut.pb.gz"
	expect_error "$WORK/trunc$cut.pb.gz"
done
expect_all "$WORK/trunc$((size / 2)).pb.gz"
grep -q "gzip" "$WORK/err" || die "truncated gzip: $(cat "$WORK/err")"
# Truncated raw protobuf: an error or (cut between fields) a valid profile,
# never a crash.
for cut in 1 7 $((raw_size / 4)) $((raw_size / 2)) $((raw_size - 3)); do
	head -c "$cut" "$WORK/good.pb" >"$WORK/rtrunc$cut.pb"
	rc=0
	"$KILNCTL" pprof folded "$WORK/rtrunc$cut.pb" >/dev/null 2>"$WORK/err" || rc=$?
	[ "$rc" -le 1 ] || die "truncated raw ($cut bytes): exit $rc: $(head -3 "$WORK/err")"
done

# Bit flips: a flip in the gzip file is caught by the CRC or inflate unless
# it lands where the format ignores it (mtime/xfl/os, the FTEXT flag, the
# padding bits after the last deflate block). The profile differs per run, so
# zlib decides which flips are harmless: those must still validate, every
# other flip must be rejected.
python3 - "$WORK" "$size" <<'PY'
import random, sys, zlib
work, size = sys.argv[1], int(sys.argv[2])
data = open(f"{work}/good.pb.gz", "rb").read()
raw = open(f"{work}/good.pb", "rb").read()
rnd = random.Random(7)
def harmless(b):
    try:
        d = zlib.decompressobj(31)
        return d.decompress(bytes(b)) == raw and d.eof and not d.unused_data
    except zlib.error:
        return False
with open(f"{work}/harmless", "w") as out:
    for i in range(40):
        pos = rnd.choice([p for p in range(len(data)) if not 4 <= p < 10])
        b = bytearray(data); b[pos] ^= 1 << rnd.randrange(8)
        open(f"{work}/flip{i}.pb.gz", "wb").write(b)
        if harmless(b):
            out.write(f"{i}\n")
for i in range(40):
    b = bytearray(raw); pos = rnd.randrange(len(b)); b[pos] ^= 1 << rnd.randrange(8)
    open(f"{work}/rflip{i}.pb", "wb").write(b)
PY
for i in $(seq 0 39); do
	if grep -qx "$i" "$WORK/harmless"; then
		"$KILNCTL" pprof validate "$WORK/flip$i.pb.gz" >/dev/null ||
			die "flip $i leaves the data and its CRC intact, yet was rejected"
	else
		expect_error "$WORK/flip$i.pb.gz"
	fi
	rc=0
	"$KILNCTL" pprof top "$WORK/rflip$i.pb" >/dev/null 2>"$WORK/err" || rc=$?
	[ "$rc" -le 1 ] || die "raw bit flip $i: exit $rc: $(head -3 "$WORK/err")"
	if [ "$rc" -eq 1 ]; then
		[ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -qF "rflip$i.pb" "$WORK/err" ||
			die "raw bit flip $i: bad message: $(head -3 "$WORK/err")"
	fi
done

# Well-formed protobuf that breaks the invariants: the message names the field.
printf '\x32\x00\x12\x03\x0a\x01\x05' >"$WORK/badref.pb" # sample -> location 5, none exist
expect_all "$WORK/badref.pb"
grep -qF 'sample[0].location_id[0]: no location with id 5' "$WORK/err" || die "badref: $(cat "$WORK/err")"
printf '\x32\x01x' >"$WORK/badstr.pb" # string_table[0] = "x"
expect_all "$WORK/badstr.pb"
grep -qF 'string_table[0]' "$WORK/err" || die "badstr: $(cat "$WORK/err")"

# Unknown sample type: error naming the file and listing the types.
rc=0
"$KILNCTL" pprof folded --sample-type=nope "$WORK/good.pb.gz" >/dev/null 2>"$WORK/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "good.pb.gz: no sample type \"nope\" (available: samples, cpu)" "$WORK/err" ||
	die "unknown sample type: exit $rc: $(cat "$WORK/err")"
# Usage errors exit 2.
rc=0
"$KILNCTL" pprof folded >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || die "no FILE: exit $rc (want 2)"
echo "pprof_bad_inputs: ok"
