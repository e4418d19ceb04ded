#!/usr/bin/env bash
# Durability: a writer streams WriteRaw calls while the server is killed
# with SIGKILL at random moments, many times. After every restart the server
# must start, and every write it acknowledged must be queryable, exactly
# once, with nothing partial (the store fsyncs before acknowledging and
# truncates a torn WAL tail on recovery).
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 server_setup
ROUNDS=${DURABILITY_ROUNDS:-12}
GOOD=$T/prof/cpu-0.pb.gz
ACKED=$T/acked.txt
: >"$ACKED"

server_start
for round in $(seq 1 "$ROUNDS"); do
	client hammer --name kiln_dur --what "r$round" --profile "$GOOD" --out "$ACKED" &
	wpid=$!
	# Kill somewhere between 0.05 s and 1.5 s into the writes.
	sleep "$($PY -c 'import random; print(round(random.uniform(0.05, 1.5), 3))')"
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
