#!/usr/bin/env bash
# kilnctl diff, the deploy-regression report, end to end: CPU profiles of a
# known workload (each 10 s window a multinomial draw of 400 samples over
# three functions) are pushed with their timestamps; after a "deploy" f1
# takes 5 points more of the CPU. The report must rank f1 first as a
# regression (exit 3, for CI), f2 as an improvement, leave f3 alone, find
# nothing between two windows of the unchanged workload (exit 0), compare
# two label values over one range the same way, and say "not enough data"
# when a side has too few windows.
source "$(dirname "$0")/server_lib.bash"
PROFILE_PAIRS=1 server_setup
server_start

now_ms=$(($(date +%s) * 1000))
t0=$((now_ms - 30 * 60 * 1000))
$PY "$KILN_ROOT/tests/peers/python/deploy_profiles.py" "$STUBS" "$T" "$t0" || die "making profiles"
"$KILNCTL" push --address="$ADDR" --labels=job=deploy,version=v1 "$T"/v1/*.pb.gz 2>/dev/null || die "push v1"
"$KILNCTL" push --address="$ADDR" --labels=job=deploy,version=v2 "$T"/v2/*.pb.gz 2>/dev/null || die "push v2"
"$KILNCTL" push --address="$ADDR" --labels=job=same "$T"/same/*.pb.gz 2>/dev/null || die "push same"

T_CPU='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'
a_start=$t0 a_end=$((t0 + 300000 - 1)) b_start=$((t0 + 300000)) b_end=$((t0 + 600000 - 1))

# 1. Two time ranges of one query.
rc=0
"$KILNCTL" diff --address="$ADDR" "$T_CPU{job=\"deploy\"}" --a-start=$a_start --a-end=$a_end \
	--b-start=$b_start --b-end=$b_end >"$T/deploy.txt" 2>&1 || rc=$?
cat "$T/deploy.txt"
[ "$rc" = 3 ] || die "a regression must exit 3, not $rc"
awk 'NR == 3 && $1 == "regression" && $NF == "f1" { ok = 1 } END { exit !ok }' "$T/deploy.txt" ||
	die "f1 is not the first row, as a regression"
grep -Eq '^improvement .* f2$' "$T/deploy.txt" || die "f2 is not an improvement"
grep -Eq '^unchanged .* f3$' "$T/deploy.txt" || die "f3 is not unchanged"

# 2. The same workload on both sides: nothing, exit 0.
"$KILNCTL" diff --address="$ADDR" "$T_CPU{job=\"same\"}" --a-start=$a_start --a-end=$a_end \
	--b-start=$b_start --b-end=$b_end >"$T/same.txt" 2>&1 || { cat "$T/same.txt"; die "unchanged workload flagged"; }
if grep -Eq '^(regression|improvement) ' "$T/same.txt"; then cat "$T/same.txt"; die "false finding"; fi

# 3. Two label values over one range (the whole 10 minutes: 30 s buckets,
# ten of which hold each version).
rc=0
"$KILNCTL" diff --address="$ADDR" --a-query="$T_CPU{version=\"v1\"}" \
	--b-query="$T_CPU{version=\"v2\"}" --a-start=$a_start --a-end=$b_end --b-start=$a_start \
	--b-end=$b_end --buckets=20 >"$T/labels.txt" 2>&1 || rc=$?
[ "$rc" = 3 ] && grep -Eq '^regression .* f1$' "$T/labels.txt" || { cat "$T/labels.txt"; die "label comparison"; }

# 4. Three windows a side cannot tell: not enough data, exit 0.
"$KILNCTL" diff --address="$ADDR" "$T_CPU{job=\"deploy\"}" --a-start=$a_start --a-end=$a_end \
	--b-start=$b_start --b-end=$b_end --buckets=3 >"$T/few.txt" 2>&1 || { cat "$T/few.txt"; die "few windows"; }
grep -q '^not_enough_data' "$T/few.txt" && grep -q 'Not enough data' "$T/few.txt" ||
	{ cat "$T/few.txt"; die "no not-enough-data verdict"; }

# 5. Usage and server errors.
rc=0
"$KILNCTL" diff --address="$ADDR" "$T_CPU{job=\"same\"}" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || die "one query over one range must be a usage error, not $rc"
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query" \
	--data-urlencode "query=$T_CPU" --data-urlencode report=regression)
[ "$code" = 400 ] && grep -q 'mode=diff' "$T/bad.json" || die "regression without diff: HTTP $code"
code=$(curl -s -o "$T/bad2.json" -w '%{http_code}' -G "http://$ADDR/api/v1/query" \
	--data-urlencode mode=diff --data-urlencode "a_query=$T_CPU" --data-urlencode "b_query=$T_CPU" \
	--data-urlencode report=regression --data-urlencode buckets=1000)
[ "$code" = 400 ] && grep -q 'buckets' "$T/bad2.json" || die "buckets=1000: HTTP $code"
server_stop
echo "PASS: kilnctl diff finds the injected regression and nothing else"
