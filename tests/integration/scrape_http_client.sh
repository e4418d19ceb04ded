#!/usr/bin/env bash
# The scrape client for plain http:// address targets (src/scrape/http.c)
# against Python's http.server (tests/peers/python/http_modes.py) answering
# a real Go heap profile in every HTTP/1.x shape it may meet: HTTP/1.0 with
# a close per response, HTTP/1.1 keep-alive, chunked with Content-Encoding
# gzip, a body delimited by the close, and a server that closes a kept
# connection when the next request arrives (the request is retried on a new
# connection). A "localhost" target goes through libcurl as before.
#
# Every target must be up after every scrape, each body handed to the
# decoder must be the served bytes exactly, and the keep-alive target must
# have been scraped over one connection.
set -euo pipefail
source "$(dirname "$0")/../lib/scrape_lib.sh"
driver=${KILN_TESTBIN:-$root/build/san/tests}/scrape/scrape_driver
[ -x "$driver" ] || fail "$driver is not built"
profile=$root/fuzz/corpus/fuzz_scrape_delta/go-heap.pb.gz
[ -f "$profile" ] || fail "$profile missing"

read -r p10 pka pch puc pst pcurl <<<"$(free_ports 6)"
python3 "$root/tests/peers/python/http_modes.py" "$profile" "$work/counts.json" \
	http10="$p10" keepalive="$pka" chunked="$pch" untilclose="$puc" stale="$pst" \
	keepalive="$pcurl" >"$work/py.out" 2>"$work/py.err" &
pids+=($!)
for p in $p10 $pka $pch $puc $pst $pcurl; do wait_port "$p"; done

cat >"$work/kiln.yaml" <<YAML
scrape_configs:
  - job_name: "py"
    scrape_interval: "1s"
    scrape_timeout: "5s"
    profiling_config:
      pprof_config:
        memory: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        process_cpu: {enabled: false}
    static_configs:
      - targets: ['127.0.0.1:$p10', '127.0.0.1:$pka', '127.0.0.1:$pch', '127.0.0.1:$puc',
                  '127.0.0.1:$pst', 'localhost:$pcurl']
YAML
mkdir -p "$work/out"
"$driver" --config "$work/kiln.yaml" --out "$work/out" --duration 8 \
	--status "$work/status" >"$work/driver.log" 2>&1 || { cat "$work/driver.log"; fail "driver failed"; }
cat "$work/status"
tail -1 "$work/driver.log"

for p in $p10 $pka $pch $puc $pst $pcurl; do
	line=$(awk -F'\t' -v u=":$p/" 'index($2, u)' "$work/status")
	[ -n "$line" ] || fail "no status for port $p"
	IFS=$'\t' read -r _ url _ health _ err <<<"$line"
	[ "$health" = up ] || fail "$url: $health ($err)"
done
grep -q ' errors=0 ' "$work/driver.log" || fail "scrapes failed: $(tail -1 "$work/driver.log")"

# The decoder saw the served bytes (after Content-Encoding) every time.
n=0
for f in "$work"/out/raw-*; do
	cmp -s "$f" "$profile" || fail "$f differs from the served profile"
	n=$((n + 1))
done
[ "$n" -ge 1 ] || fail "no raw bodies written"

python3 - "$work/counts.json" <<'PY' || fail "connection counts: $(cat "$work/counts.json")"
import json, sys
c = json.load(open(sys.argv[1]))
print(c)
# Connections include the one wait_port made to each port. Bounds are loose
# where a loaded machine may make a scrape time out (a new connection then).
# keepalive: two targets (http.c's and libcurl's) on kept connections.
ka = c["keepalive"]
assert ka["requests"] >= 6 and ka["connections"] - 2 <= ka["requests"] // 2, ka
assert c["chunked"]["requests"] >= 3, c["chunked"]
assert c["http10"]["requests"] >= 3 and c["http10"]["connections"] >= c["http10"]["requests"] + 1, c["http10"]
assert c["untilclose"]["requests"] >= 3, c["untilclose"]
# stale: each request after the first met a close on the kept connection
# and was answered on a new one (all scrapes succeeded, checked above).
st = c["stale"]
assert st["requests"] >= 3 and st["connections"] >= st["requests"] + 1, st
PY
echo "ok: $n bodies identical to the served profile over every HTTP shape"
