#!/usr/bin/env bash
# Acknowledged writes on ClickHouse survive (docs/SCALE-OUT.md, guarantees):
#   1. kill -9 of a kiln server under load: every acknowledged write is
#      queryable exactly once from another kiln server;
#   2. a ClickHouse restart under load: the same (writes in flight retry
#      with their batch id, so none is lost and none counted twice);
#   3. ClickHouse down: a write fails with UNAVAILABLE naming ClickHouse, a
#      query fails with a clear error, and nothing acknowledged is lost
#      once it is back.
source "$(dirname "$0")/clickhouse_lib.bash"
ch_setup
GOOD=$T/prof/cpu-0.pb.gz
ACKED=$T/acked.txt
: >"$ACKED"

# 1. kill -9 of a kiln server under load, three rounds.
kiln_start reader $(ch_kiln_flags)
for round in 1 2 3; do
	kiln_start w$round $(ch_kiln_flags)
	on_bg w$round hammer --name kiln_dur --what "k$round" --profile "$GOOD" --out "$ACKED"
	HPID=$!
	sleep 2
	kiln_kill w$round
	wait $HPID
	on reader verify --name kiln_dur --profile "$GOOD" --out "$ACKED" || die "kill -9 round $round"
done

# 2. ClickHouse restarted (SIGTERM, then started again on the same ports)
# under load.
kiln_start w4 $(ch_kiln_flags)
on_bg w4 hammer --name kiln_dur --what c1 --profile "$GOOD" --out "$ACKED"
HPID=$!
sleep 2
ch_stop
sleep 0.5
ch_start "$T/ch" || die "clickhouse did not come back"
sleep 2
kill -TERM $HPID 2>/dev/null
wait $HPID 2>/dev/null
# SIGTERM drains the write in flight, so nothing lands during verify.
kiln_stop w4
on reader verify --name kiln_dur --profile "$GOOD" --out "$ACKED" || die "after a ClickHouse restart"
n_acked=$(wc -l <"$ACKED")
[ "$n_acked" -gt 10 ] || die "only $n_acked writes acknowledged: the load did not run"

# 3. ClickHouse down: clear errors, not acknowledgements.
kiln_start w5 $(ch_kiln_flags)
ch_stop
out=$(on w5 write --name kiln_down --label job=down --profiles "$GOOD" 2>&1) &&
	die "a write was acknowledged with ClickHouse down"
echo "$out" | grep -q UNAVAILABLE || die "write with ClickHouse down: want UNAVAILABLE, got: $out"
echo "$out" | grep -qi clickhouse || die "the error does not name ClickHouse: $out"
code=$(curl -s -o "$T/down.json" -w '%{http_code}' "http://$ADDR_w5/api/v1/labels")
[ "$code" = 503 ] && grep -qi clickhouse "$T/down.json" ||
	die "query with ClickHouse down: $code $(cat "$T/down.json")"
ch_start "$T/ch" || die "clickhouse did not come back"
on reader verify --name kiln_dur --profile "$GOOD" --out "$ACKED" || die "after ClickHouse was down"
kiln_stop w5
kiln_stop reader
echo "PASS: clickhouse_durability ($n_acked acknowledged writes, none lost or doubled)"
