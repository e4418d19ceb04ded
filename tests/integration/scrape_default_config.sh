#!/usr/bin/env bash
# The shipped kiln.yaml (what `make run` passes as --config-path) makes the
# server scrape itself on whatever port it listens (${KILN_PORT}), so a fresh
# server shows a process_cpu series within a minute with no agent. Also:
# /debug/pprof/heap is refused with a clear 404 (no fake heap profile), and
# the self-profile is a real pprof that `go tool pprof` reads, naming the
# server's own functions.
set -euo pipefail
source "$(dirname "$0")/../lib/scrape_lib.sh"
KILN=${KILN_BIN:-$root/build/san/bin}/kiln
[ -x "$KILN" ] || fail "$KILN is not built"
command -v go >/dev/null || fail "go (golang-go) is not installed"

read -r port <<<"$(free_ports 1)"
cd "$work" # kiln.yaml's object_storage directory is relative ("./data")
"$KILN" --http-address=127.0.0.1:$port --storage-path="$work/data" \
	--config-path="$root/kiln.yaml" >"$work/server.log" 2>&1 &
spid=$!
pids+=($spid)
wait_port "$port"
api="http://127.0.0.1:$port"

# The target follows the port.
curl -sf "$api/api/v1/targets?state=active" >"$work/targets.json"
python3 - "$work/targets.json" "$port" <<'PY' || fail "targets: $(cat "$work/targets.json")"
import json, sys
t = json.load(open(sys.argv[1]))["active"]
assert [x["url"] for x in t] == [f"http://127.0.0.1:{sys.argv[2]}/debug/pprof/profile?seconds=10"], t
assert t[0]["labels"]["job"] == "kiln" and t[0]["labels"]["instance"] == f"127.0.0.1:{sys.argv[2]}", t
PY

# No heap profile: a 404 that says why, not a made-up profile.
code=$(curl -s -o "$work/heap.json" -w '%{http_code}' "$api/debug/pprof/heap")
[ "$code" = 404 ] || fail "/debug/pprof/heap: status $code"
grep -q 'no heap profile: Kiln is C on glibc malloc' "$work/heap.json" || fail "heap: $(cat "$work/heap.json")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$api/debug/pprof/goroutine")" = 404 ] || fail "goroutine: not 404"

# Keep the server busy so its self-profile has samples (an idle server may
# legitimately have none in a 10 s window). One keep-alive connection per
# curl run: the server's thread for it lives long enough to be sampled.
urls=()
for _ in $(seq 500); do urls+=("$api/metrics" "$api/api/v1/labels"); done
(while :; do curl -s "${urls[@]}" >/dev/null; done) &
loader=$!
pids+=($loader)

start=$(date +%s)
now=$((start * 1000))
found=0
for _ in $(seq 75); do
	if curl -sf -G "$api/api/v1/query_range" \
		--data-urlencode 'query=process_cpu:samples:count:cpu:nanoseconds:delta{job="kiln"}' \
		--data-urlencode "start=$((now - 600000))" --data-urlencode "end=$((now + 600000))" \
		>"$work/series.json" && grep -q "\"instance\":\"127.0.0.1:$port\"" "$work/series.json"; then
		found=1
		break
	fi
	sleep 1
done
[ "$found" = 1 ] || { tail -20 "$work/server.log"; fail "no process_cpu series from the self-scrape"; }
echo "process_cpu series after $(($(date +%s) - start)) s"

# The scraped self-profile, read back as pprof: go tool pprof must name the
# server's own functions (polled: an early window may hold few samples).
own=' (on_request|http_[a-z_]+|listener_run|pool_worker|store_[a-z_]+|scrape_[a-z_]+|drain)$'
for _ in $(seq 40); do
	curl -sf -G "$api/api/v1/query" --data-urlencode mode=merge \
		--data-urlencode 'query=process_cpu:samples:count:cpu:nanoseconds:delta{job="kiln"}' \
		--data-urlencode "start=$((now - 600000))" --data-urlencode "end=$((now + 600000))" \
		--data-urlencode report=pprof -o "$work/self.pb.gz" &&
		pprof_top "$work/self.pb.gz" >"$work/top.txt" && grep -Eq "$own" "$work/top.txt" && break
	sleep 1
done
grep -Eq "$own" "$work/top.txt" ||
	fail "the self-profile names none of the server's functions: $(head -20 "$work/top.txt")"
grep -E "$own" "$work/top.txt" | head -5

kill "$loader" 2>/dev/null || true
kill -TERM $spid
wait $spid || { rc=$?; tail -n 40 "$work/server.log"; fail "server exit status $rc"; }
! grep -q "ERROR\|AddressSanitizer" "$work/server.log" || { cat "$work/server.log"; fail "errors in the server log"; }
echo "ok"
