#!/usr/bin/env bash
# Pull mode in the server: a bad --config-path is refused with file:line;
# the server scrapes itself (/debug/pprof/profile, perf-event self-profiling)
# and a Go net/http/pprof target, next to targets that are down, hang past
# the timeout, answer garbage, an endless body or HTML; the targets (healthy
# and not, with their last errors) are listed over HTTP/JSON and over gRPC
# (python3-grpcio); the scraped data is queryable via /api/v1/query with the
# Go program's function names; SIGHUP with a bad file keeps the old config
# and logs why, with a good one adds a job and loses no data.
set -euo pipefail
source "$(dirname "$0")/../lib/scrape_lib.sh"
build_target
KILN=${KILN_BIN:-$root/build/san/bin}/kiln
[ -x "$KILN" ] || fail "$KILN is not built"
PY=/usr/bin/python3

# 1. A bad config is refused at start, naming file, line and column.
cat >"$work/bad.yaml" <<'YAML'
scrape_configs:
  - job_name: "x"
    scrape_interval: "often"
YAML
read -r p_bad <<<"$(free_ports 1)"
if "$KILN" --http-address=127.0.0.1:$p_bad --storage-path="$work/d0" \
	--config-path="$work/bad.yaml" >"$work/bad.log" 2>&1; then
	fail "the server started with a bad config"
fi
grep -q "bad.yaml:3:22: scrape_interval: \"often\" is not a duration" "$work/bad.log" ||
	{ cat "$work/bad.log"; fail "no file:line:column reason for the bad config"; }

# 2. Server scraping itself and a Go target.
read -r p_kiln p_go p_hang p_garbage p_huge p_html p_down <<<"$(free_ports 7)"
start_target "$p_go" work
start_target "$p_hang" hang
start_target "$p_garbage" garbage
start_target "$p_huge" huge
start_target "$p_html" html
for p in $p_go $p_hang $p_garbage $p_huge $p_html; do wait_port "$p"; done
write_config() { # extra job name (optional)
	cat >"$work/kiln.yaml" <<YAML
object_storage:
  bucket:
    type: "FILESYSTEM"
    config:
      directory: "$work/data"
scrape_configs:
  - job_name: "kiln"
    scrape_interval: "3s"
    static_configs:
      - targets: ['127.0.0.1:$p_kiln']
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        goroutine: {enabled: false}
  - job_name: "app"
    scrape_interval: "2s"
    static_configs:
      - targets: ['127.0.0.1:$p_go']
        labels: {env: "test"}
    relabel_configs:
      - {source_labels: [__name__], regex: "block|mutex", action: drop}
  - job_name: "bad"
    scrape_interval: "2s"
    scrape_timeout: "5s"
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        process_cpu: {enabled: false}
    static_configs:
      - targets: ['127.0.0.1:$p_hang', '127.0.0.1:$p_garbage', '127.0.0.1:$p_huge',
                  '127.0.0.1:$p_html', '127.0.0.1:$p_down']
YAML
	if [ -n "${1:-}" ]; then
		cat >>"$work/kiln.yaml" <<YAML
  - job_name: "$1"
    static_configs:
      - targets: ['127.0.0.1:$p_go']
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        process_cpu: {enabled: false}
YAML
	fi
}
write_config
"$KILN" --http-address=127.0.0.1:$p_kiln --storage-path="$work/data" --max-profile-size=4MiB \
	--config-path="$work/kiln.yaml" >"$work/server.log" 2>&1 &
spid=$!
pids+=($spid)
wait_port "$p_kiln"
api="http://127.0.0.1:$p_kiln"

# Wait until every good target has been scraped successfully and each bad
# one is down with its clear reason (polled: on a loaded machine one scrape
# of a bad target may first fail otherwise, e.g. time out).
check_targets() {
	$PY - "$work/all.json" "$p_hang" "$p_garbage" "$p_huge" "$p_html" "$p_down" <<'PY'
import json, sys
all_t = json.load(open(sys.argv[1]))["active"]
good = [x for x in all_t if x["job"] != "bad"]
assert len(good) == 4 and all(x["health"] == "up" for x in good), good
t = {x["labels"]["instance"].split(":")[1]: x for x in all_t if x["job"] == "bad"}
hang, garbage, huge, html, down = sys.argv[2:]
want = {hang: "timeout after 5s", huge: "body exceeds 4 MiB",
        html: "not a pprof profile: looks like HTML", down: "connection refused"}
for port, err in want.items():
    assert t[port]["health"] == "down" and t[port]["last_error"] == err, t[port]
assert t[garbage]["health"] == "down" and t[garbage]["last_error"].startswith("not a pprof profile: "), t[garbage]
for x in t.values():
    assert x["last_scrape"] > 0, x
PY
}
for _ in $(seq 60); do
	curl -sf "$api/api/v1/targets?state=active" >"$work/all.json" || true
	check_targets 2>/dev/null && break
	sleep 1
done
check_targets || fail "targets: $(cat "$work/all.json")"
$PY -c 'import json,sys; json.dump({"active": [x for x in json.load(open(sys.argv[1]))["active"] if x["job"] != "bad"]}, open(sys.argv[2], "w"))' \
	"$work/all.json" "$work/targets.json"
$PY - "$work/targets.json" "$p_kiln" "$p_go" <<'PY' || fail "targets: $(cat "$work/targets.json")"
import json, sys
t = json.load(open(sys.argv[1]))["active"]
kiln, go = sys.argv[2], sys.argv[3]
urls = sorted(x["url"] for x in t)
want = sorted([f"http://127.0.0.1:{kiln}/debug/pprof/profile?seconds=3",
               f"http://127.0.0.1:{go}/debug/pprof/allocs",
               f"http://127.0.0.1:{go}/debug/pprof/goroutine",
               f"http://127.0.0.1:{go}/debug/pprof/profile?seconds=2"])
assert urls == want, urls
for x in t:
    assert x["health"] == "up", x
    assert x["last_error"] == "", x
    assert x["last_scrape"] > 0 and x["last_scrape_duration_ms"] >= 0, x
    assert x["labels"]["instance"] == x["url"].split("/")[2], x
    if x["job"] == "app":
        assert x["labels"]["env"] == "test", x
PY
curl -sf "$api/api/v1/targets?state=dropped" >"$work/dropped.json"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1]))["dropped"]; assert len(d)==2 and all(x["discovered_labels"]["__name__"] in ("block","mutex") for x in d), d' "$work/dropped.json" ||
	fail "dropped targets: $(cat "$work/dropped.json")"

# The same over gRPC.
stubs=$work/stubs
mkdir -p "$stubs"
(cd "$root/proto" && $PY -m grpc_tools.protoc -I. --python_out="$stubs" --grpc_python_out="$stubs" \
	parca/scrape/v1alpha1/scrape.proto parca/profilestore/v1alpha1/profilestore.proto \
	google/protobuf/timestamp.proto google/protobuf/duration.proto) || fail "protoc failed"
$PY "$root/tests/integration/scrape_targets_client.py" --stubs "$stubs" --addr "127.0.0.1:$p_kiln" \
	--state active >"$work/grpc.txt" || fail "ScrapeService/Targets failed"
cat "$work/grpc.txt"
[ "$(grep -c $'\tup\t' "$work/grpc.txt")" = 4 ] || fail "gRPC: not 4 healthy targets"
[ "$(grep -c $'^bad\t.*\tdown\t' "$work/grpc.txt")" = 5 ] || fail "gRPC: not 5 unhealthy targets"
grep -q "^bad"$'\t'"http://127.0.0.1:$p_hang/debug/pprof/goroutine"$'\t'"down"$'\t'".*"$'\t'"timeout after 5s\$" \
	"$work/grpc.txt" || fail "gRPC: the hanging target's error"
grep -q "^bad"$'\t'"http://127.0.0.1:$p_html/debug/pprof/goroutine"$'\t'"down"$'\t'".*"$'\t'"not a pprof profile: looks like HTML\$" \
	"$work/grpc.txt" || fail "gRPC: the HTML target's error"
grep -q "^app"$'\t'"http://127.0.0.1:$p_go/debug/pprof/allocs"$'\t'"up"$'\t'"__name__=memory,env=test,instance=127.0.0.1:$p_go,job=app" \
	"$work/grpc.txt" || fail "gRPC: the memory target's labels"
$PY "$root/tests/integration/scrape_targets_client.py" --stubs "$stubs" --addr "127.0.0.1:$p_kiln" \
	--state dropped | grep -c . | grep -qx 2 || fail "gRPC: dropped targets"

# 3. The data is queryable, with the Go program's functions.
sleep 5
now=$(($(date +%s) * 1000))
q() { curl -sf -G "$api/api/v1/query" --data-urlencode "mode=merge" --data-urlencode "query=$1" \
	--data-urlencode "start=$((now - 600000))" --data-urlencode "end=$((now + 60000))" \
	--data-urlencode "report=top"; }
# Polls (data lands with each scrape) until the report names the function.
expect_fn() { # query function
	for _ in $(seq 30); do
		q "$1" >"$work/q.json" && grep -q "\"name\":\"$2\"" "$work/q.json" && return 0
		sleep 1
	done
	fail "$2 not in the report of $1: $(head -c 600 "$work/q.json")"
}
expect_fn 'process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="app",env="test"}' main.burnCPU
expect_fn 'memory:alloc_space:bytes:space:bytes:delta{job="app"}' main.allocSmall
q 'memory:inuse_space:bytes:space:bytes{job="app"}' >/dev/null || fail "inuse_space gauge"
# The server's own CPU profile is stored as a series (an idle server may have
# no samples in a window, so only the series is asserted).
curl -sf -G "$api/api/v1/query_range" \
	--data-urlencode 'query=process_cpu:samples:count:cpu:nanoseconds:delta{job="kiln"}' \
	--data-urlencode "start=$((now - 600000))" --data-urlencode "end=$((now + 60000))" >"$work/self.json"
grep -q "\"instance\":\"127.0.0.1:$p_kiln\"" "$work/self.json" || fail "no self-profile series: $(cat "$work/self.json")"
# /metrics reports the pull-mode CPU by phase and the work done (counts
# only: CPU figures vary with the machine).
curl -sf "$api/metrics" >"$work/metrics.txt" || fail "/metrics"
for phase in schedule_http decode delta queue ingest; do
	grep -q "^kiln_scrape_cpu_seconds_total{phase=\"$phase\"} " "$work/metrics.txt" ||
		fail "no scrape CPU for phase $phase: $(grep kiln_scrape "$work/metrics.txt")"
done
$PY - "$work/metrics.txt" <<'PY' || fail "scrape metrics: $(grep kiln_scrape "$work/metrics.txt")"
import sys
v = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1]) if l.startswith("kiln_scrape_")}
assert v["kiln_scrape_active_targets"] == 9, v
assert v["kiln_scrape_scrapes_total"] >= 9 and v["kiln_scrape_errors_total"] >= 5, v
assert v["kiln_scrape_profiles_ingested_total"] >= 3, v
assert v['kiln_scrape_cpu_seconds_total{phase="decode"}'] > 0, v
PY

# 4. SIGHUP: a bad file keeps the old config; a good one is applied.
cp "$work/bad.yaml" "$work/kiln.yaml"
kill -HUP $spid
for _ in $(seq 50); do grep -q "not reloaded" "$work/server.log" && break; sleep 0.2; done
grep -q "config not reloaded, the old one stays in effect: .*kiln.yaml:3:22" "$work/server.log" ||
	fail "bad reload not reported"
[ "$(curl -sf "$api/api/v1/targets?state=active" | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["active"]))')" = 9 ] ||
	fail "the old config did not stay"
points() { # query -> "N_POINTS LAST_TS" of the stored profiles so far
	curl -sf -G "$api/api/v1/query_range" --data-urlencode "query=$1" \
		--data-urlencode "start=$((now - 600000))" --data-urlencode "end=$(($(date +%s) * 1000 + 600000))" |
		$PY -c 'import json,sys; p=[x for s in json.load(sys.stdin)["series"] for x in s["points"]]; print(len(p), max([x[0] for x in p] or [0]))'
}
mem='memory:alloc_space:bytes:space:bytes:delta{job="app"}'
read -r n_before last_before <<<"$(points "$mem")"
[ "$n_before" -ge 1 ] || fail "no memory deltas stored before the reload"
write_config extra
kill -HUP $spid
for _ in $(seq 50); do
	curl -sf "$api/api/v1/targets?state=active" | grep -q '"job":"extra"' && break
	sleep 0.2
done
curl -sf "$api/api/v1/targets?state=active" | grep -q '"job":"extra"' || fail "reload did not add the job"
# The kept targets kept their state (health up right after the reload).
curl -sf "$api/api/v1/targets?state=active" | $PY -c '
import json, sys
t = [x for x in json.load(sys.stdin)["active"] if x["job"] == "app"]
assert len(t) == 3 and all(x["health"] == "up" for x in t), t' || fail "kept targets lost their state"
# No data lost: the points stored before the reload are all still there, the
# kept memory target goes on adding deltas (its baseline was kept: no gap),
# and the new job's profiles arrive.
for _ in $(seq 60); do
	read -r n_after last_after <<<"$(points "$mem")"
	read -r n_extra _ <<<"$(points 'goroutine:goroutine:count:goroutine:count{job="extra"}')"
	[ "$n_after" -gt "$n_before" ] && [ "$n_extra" -ge 1 ] && break
	sleep 1
done
[ "$n_after" -gt "$n_before" ] && [ "$last_after" -gt "$last_before" ] ||
	fail "memory deltas: $n_before points before the reload, $n_after after"
[ "$n_extra" -ge 1 ] || fail "no goroutine profile from the job added by the reload"
kill -TERM $spid
wait $spid || {
	rc=$?
	grep -A16 "Direct leak\|ERROR: AddressSanitizer" "$work/server.log" | head -120
	tail -n 20 "$work/server.log"
	fail "server exit status $rc"
}
grep -q "ERROR\|AddressSanitizer" "$work/server.log" && { cat "$work/server.log"; fail "errors in the server log"; }
echo "ok"
