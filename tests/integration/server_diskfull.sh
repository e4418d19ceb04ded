#!/usr/bin/env bash
# A full disk: the store lives on a 1 MiB tmpfs; a writer streams WriteRaw
# until the disk fills. The failing write gets RESOURCE_EXHAUSTED with a
# message (not a crash, not a hang), reads keep being served, and every
# acknowledged write is queryable exactly once.
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 server_setup
mkdir -p "$T/data"
mount -t tmpfs -o size=1m tmpfs "$T/data" || die "cannot mount a tmpfs (the test needs root)"
cleanup_mount() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill -KILL "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
	SPID=
	umount "$T/data" 2>/dev/null
	server_cleanup
}
trap cleanup_mount EXIT
server_start
# Leave ~192 KiB free, so that the disk fills after a few hundred writes
# however slow the machine is (1 MiB took >60 s of writes at load 20).
avail=$(df -k --output=avail "$T/data" | tail -1)
[ "$avail" -gt 256 ] && dd if=/dev/zero of="$T/data/filler" bs=1k count=$((avail - 192)) status=none

# Big profiles fill the disk fast: a fresh Go CPU profile per write is
# small, so write the heap profile (many distinct stacks) under many series.
client hammer --name kiln_full --what f --profile "$T/prof/heap-0.pb.gz" --out "$T/acked.txt" \
	>"$T/hammer.txt" 2>&1 &
hpid=$!
for _ in $(seq 1 600); do
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$hpid" 2>/dev/null && { kill "$hpid"; die "the disk never filled"; }
wait "$hpid"
cat "$T/hammer.txt"
grep -q 'RESOURCE_EXHAUSTED' "$T/hammer.txt" || die "a full disk did not give RESOURCE_EXHAUSTED"
[ -s "$T/acked.txt" ] || die "nothing was written before the disk filled"
# Reads keep working, with every acknowledged write.
curl -sf "http://$ADDR/ready" >/dev/null || die "not ready with a full disk"
client verify --name kiln_full --profile "$T/prof/heap-0.pb.gz" --out "$T/acked.txt" ||
	die "reads after the disk filled"
# Another write still fails cleanly, and the server is alive.
client write --name kiln_full --label job=again --profiles "$T/prof/heap-0.pb.gz" 2>"$T/again.txt" &&
	die "a write succeeded on a full disk"
curl -sf "http://$ADDR/healthy" >/dev/null || die "server died"
server_stop
echo "server_diskfull: ok ($(wc -l <"$T/acked.txt") writes before the disk filled)"
