#!/usr/bin/env bash
# Pyroscope's push API (POST /ingest) against real peers:
#  - Pyroscope's Node SDK (@pyroscope/nodejs, pinned in tests/peers/node)
#    profiles a Node program and pushes wall/CPU and heap profiles through a
#    recording proxy, with a write token as Authorization: Bearer; every
#    push is answered 200, and per profile type the totals Kiln answers to
#    queries equal the totals of the pprofs the SDK sent, under the app name
#    (service_name) and the SDK's tags as series labels;
#  - format=folded and format=lines with curl: known stacks queried back
#    exactly (CPU scaled by 1e9/sampleRate as Pyroscope does);
#  - format=pprof as a multipart form (the Go SDK's shape) with curl -F;
#  - bad input (broken multipart, a malformed folded line, a bad name, a
#    prev_profile part, no token) gets a 4xx JSON error naming what and
#    where, and loses nothing acknowledged before;
#  - /metrics counts the requests by format, their bytes and the errors.
source "$(dirname "$0")/server_lib.bash"
source "$KILN_ROOT/tests/peers/pprof_env.sh"
setup_node_peer
T=$(mktemp -d /tmp/kiln-pyro-test.XXXXXX)
trap 'server_cleanup; rm -rf "$WORK"' EXIT
W=$($PY -c 'import secrets; print(secrets.token_hex(24))') R=$($PY -c 'import secrets; print(secrets.token_hex(24))')
printf 'write %s\nread %s\n' "$W" "$R" >"$T/tokens"
chmod 600 "$T/tokens"
server_start --auth-tokens-file="$T/tokens"
U=http://$ADDR
q() { "$KILNCTL" query --address="$ADDR" --bearer-token="$R" --since=2h --output=folded "$1"; }
total() { awk '{s += $NF} END {printf "%.0f\n", s}'; }
post() { # URL-suffix curl-args... -> prints "STATUS BODY"
	local url=$1
	shift
	curl -s -o "$T/out" -w '%{http_code}' -H "Authorization: Bearer $W" "$@" "$U/ingest?$url"
	echo " $(cat "$T/out")"
}

# ---- the Node SDK -------------------------------------------------------------
mkdir -p "$T/rec"
node "$KILN_ROOT/tests/peers/node/pyroscope_push.js" "$U" "$T/rec" 3 "$W" >"$T/node.log" 2>&1 ||
	die "node SDK program failed: $(cat "$T/node.log")"
n=0
for j in "$T"/rec/req-*.json; do
	n=$((n + 1))
	grep -q '"status":200' "$j" || die "SDK push refused: $(cat "$j")"
	grep -q "\"authorization\":\"Bearer $W\"" "$j" || die "SDK sent no bearer token: $(cat "$j")"
done
[ $n -ge 2 ] || die "only $n SDK pushes recorded"
# Sums per sample type of what the SDK sent, decoded by pprof-format.
sent() { # sample-type
	local s=0 f v
	for f in "$T"/rec/req-*.pprof; do
		v=$(node "$KILN_ROOT/tests/peers/node/nodeprof.js" fold "$f" "$1" 2>/dev/null | total)
		s=$((s + v))
	done
	echo $s
}
sel='{service_name="kiln-node-peer",env="test",region="eu-1",pyroscope_spy="nodespy",process_runtime_name="nodejs"}'
checked=0
# SAMPLE_TYPE:PROFILE_TYPE
for tq in wall:wall:wall:nanoseconds:wall:nanoseconds cpu:wall:cpu:nanoseconds:wall:nanoseconds \
	samples:wall:samples:count:wall:nanoseconds \
	inuse_space:memory:inuse_space:bytes:inuse_space:bytes \
	inuse_objects:memory:inuse_objects:count:inuse_space:bytes; do
	st=${tq%%:*} type=${tq#*:}
	want=$(sent "$st")
	[ "$want" -gt 0 ] || continue
	got=$(q "$type$sel" | total)
	[ "$got" = "$want" ] || die "$type: Kiln has $got, the SDK sent $want"
	echo "node SDK $type: $got == sent"
	checked=$((checked + 1))
done
[ $checked -ge 3 ] || die "only $checked profile types had data from the SDK"
q "wall:wall:nanoseconds:wall:nanoseconds$sel" >"$T/wall.folded"
grep -q burnA "$T/wall.folded" || die "no burnA stack in the wall profile: $(head "$T/wall.folded")"

# ---- folded and lines ---------------------------------------------------------
now=$(date +%s)
printf 'main;foo;bar 3\nmain;foo;baz 5\r\nmain;qux 2\n\n' >"$T/f.txt"
r=$(post "name=fapp.cpu%7Benv%3Dprod%7D&format=folded&from=$now&until=$((now + 10))&sampleRate=100&spyName=gospy" \
	--data-binary @"$T/f.txt")
[ "${r%% *}" = 200 ] || die "folded push: $r"
q 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{service_name="fapp",env="prod",pyroscope_spy="gospy"}' |
	sort >"$T/f.got"
printf 'main;foo;bar 30000000\nmain;foo;baz 50000000\nmain;qux 20000000\n' >"$T/f.want"
diff -u "$T/f.want" "$T/f.got" || die "folded stacks differ"
printf 'a;b\na;b\nc\na;b\n' >"$T/l.txt"
r=$(post "name=lapp.alloc_space&format=lines&from=$now&until=$((now + 10))" --data-binary @"$T/l.txt")
[ "${r%% *}" = 200 ] || die "lines push: $r"
q 'memory:alloc_space:bytes:space:bytes{service_name="lapp"}' | sort >"$T/l.got"
printf 'a;b 3\nc 1\n' >"$T/l.want"
diff -u "$T/l.want" "$T/l.got" || die "lines stacks differ"

# ---- pprof as a multipart form (curl plays the Go SDK) ---------------------------
node "$KILN_ROOT/tests/peers/node/nodeprof.js" cpu "$T/p.pb.gz" "$T/p.want" 1 >/dev/null
r=$(post "name=mapp%7Bk%3Dv%7D&format=pprof&from=$now&until=$((now + 10))" \
	-F "profile=@$T/p.pb.gz;filename=profile.pprof" -F 'sample_type_config={}')
[ "${r%% *}" = 200 ] || die "multipart pprof push: $r"
want=$(node "$KILN_ROOT/tests/peers/node/nodeprof.js" fold "$T/p.pb.gz" cpu | total)
got=$(q 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{service_name="mapp",k="v"}' | total)
[ "$got" = "$want" ] || die "multipart pprof: Kiln has $got, the file has $want"

# ---- bad input: 4xx with a JSON error, nothing acknowledged lost ---------------
expect() { # status regex url curl-args...
	local st=$1 re=$2
	shift 2
	r=$(post "$@")
	[ "${r%% *}" = "$st" ] || die "want $st for $1, got $r"
	echo "$r" | grep -Eq "$re" || die "error for $1 does not match /$re/: $r"
}
expect 400 'line 2 \(byte 10\): value \\"x\\" is not an integer' "name=bad&format=folded" \
	--data-binary $'a;b 1\na;b x\n'
expect 400 'line 1 \(byte 2\): empty frame name' "name=bad&format=folded" --data-binary $'a;;b 1\n'
expect 400 'name: labels at byte 3 not closed' "name=app%7Ba%3Db&format=folded" --data-binary 'a 1'
expect 400 'name: missing' "format=folded" --data-binary 'a 1'
expect 400 'not closed by' "name=bad&format=pprof" -H 'Content-Type: multipart/form-data; boundary=XyZ' \
	--data-binary $'--XyZ\r\nContent-Disposition: form-data; name="profile"\r\n\r\ntruncated'
expect 400 'prev_profile' "name=bad&format=pprof" -F "profile=@$T/p.pb.gz" -F "prev_profile=@$T/p.pb.gz"
expect 400 'no \\"profile\\" part' "name=bad&format=pprof" -F "other=@$T/p.pb.gz"
expect 400 'profile: ' "name=bad&format=pprof" --data-binary 'not a pprof'
expect 400 'format=' "name=bad&format=trie" --data-binary 'x'
expect 400 'jfr: no JFR chunk' "name=bad&format=jfr" --data-binary 'not a recording, but long enough to hold a whole chunk header of sixty-eight bytes.....'
code=$(curl -s -o "$T/out" -w '%{http_code}' --data-binary 'a 1' "$U/ingest?name=x&format=folded")
[ "$code" = 401 ] || die "no token: want 401, got $code $(cat "$T/out")"
code=$(curl -s -o "$T/out" -w '%{http_code}' -H "Authorization: Bearer $R" --data-binary 'a 1' \
	"$U/ingest?name=x&format=folded")
[ "$code" = 403 ] || die "read token: want 403, got $code $(cat "$T/out")"
q 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{service_name="fapp"}' | sort >"$T/f.again"
diff -u "$T/f.want" "$T/f.again" || die "acknowledged folded data changed after bad input"
curl -s -H "Authorization: Bearer $R" "$U/api/v1/values?label=service_name" >"$T/apps"
grep -q '"bad"' "$T/apps" && die "a refused request stored a series: $(cat "$T/apps")"

# ---- metrics --------------------------------------------------------------------
curl -s -H "Authorization: Bearer $R" "$U/metrics" >"$T/metrics"
grep -Eq '^kiln_pyroscope_ingest_requests_total\{format="folded"\} [1-9]' "$T/metrics" ||
	die "no folded request count: $(grep pyroscope "$T/metrics")"
grep -Eq '^kiln_pyroscope_ingest_requests_total\{format="pprof"\} [1-9]' "$T/metrics" ||
	die "no pprof request count"
grep -Eq '^kiln_pyroscope_ingest_errors_total [1-9]' "$T/metrics" || die "no error count"
grep -Eq '^kiln_pyroscope_ingest_bytes_total [1-9]' "$T/metrics" || die "no byte count"
server_stop
echo "PASS pyroscope_ingest"
