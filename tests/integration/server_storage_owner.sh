#!/usr/bin/env bash
# Issue 24: a data directory whose files belong to another user is reported
# as that, not as "is another kiln using this directory?" (which sent
# operators looking for a second server that did not exist); a second
# server on a directory in use still gets that hint.
source "$(dirname "$0")/server_lib.bash"
T=$(mktemp -d /tmp/kiln-server-test.XXXXXX)
trap server_cleanup EXIT
command -v setpriv >/dev/null || die "precondition: setpriv (util-linux) not installed"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

server_start # creates $T/data as root, files 0600
# The directory is open to all, its files are root's 0600: nobody may not
# open LOCK.
chmod 755 "$T"
chmod 777 "$T/data"
P=$(free_port)
timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups "$KILN" --http-address=127.0.0.1:$P \
	--storage-path="$T/data" >"$T/nobody.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "kiln as nobody on root's files: exit $rc"
grep -q "Permission denied (the files belong to another user" "$T/nobody.log" ||
	die "no owner hint: $(cat "$T/nobody.log")"
grep -q "another kiln" "$T/nobody.log" && die "blamed another kiln: $(cat "$T/nobody.log")"

# The lock held by the running server: the other-kiln hint.
timeout 20 "$KILN" --http-address=127.0.0.1:$P --storage-path="$T/data" >"$T/second.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "a second kiln on the same directory: exit $rc"
grep -q "is another kiln using this directory" "$T/second.log" ||
	die "second server: $(cat "$T/second.log")"
server_stop
echo "PASS: server_storage_owner"
