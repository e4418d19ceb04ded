#!/usr/bin/env bash
# Durability: a writer streams WriteRaw calls while the server is killed
# with SIGKILL at random moments, many times. After every restart the server
# must start, and every write it acknowledged must be queryable, exactly
# once, with nothing partial (the store fsyncs before acknowledging and
# truncates a torn WAL tail on recovery).
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 server_setup
ROUNDS=${DURABILITY_ROUNDS:-8}
GOOD=$T/prof/cpu-0.pb.gz
ACKED=$T/acked.txt
: >"$ACKED"

server_start
for round in $(seq 1 "$ROUNDS"); do
	client hammer --name kiln_dur --what "r$round" --profile "$GOOD" --out "$ACKED" &
	wpid=$!
	# Once writes flow, kill somewhere within the next second.
	before=$(wc -l <"$ACKED")
	for _ in $(seq 1 100); do
		[ "$(wc -l <"$ACKED")" -gt "$before" ] && break
		sleep 0.05
	done
	sleep "$($PY -c 'import random; print(round(random.uniform(0, 1.0), 3))')"
	kill -KILL "$SPID"
	wait "$SPID" 2>/dev/null
	SPID=
	wait "$wpid" || die "writer crashed in round $round"
	server_start || die "restart $round failed"
	client verify --name kiln_dur --profile "$GOOD" --out "$ACKED" || die "round $round"
done
n=$(wc -l <"$ACKED")
[ "$n" -gt 0 ] || die "no write was ever acknowledged"
grep -q 'level=error' "$T/server.log" && { grep 'level=error' "$T/server.log" | head; die "errors logged"; }
server_stop
echo "server_durability: ok ($ROUNDS kills, $n acknowledged writes)"
