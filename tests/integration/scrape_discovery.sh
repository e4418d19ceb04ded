#!/usr/bin/env bash
# Service discovery as Prometheus and Parca define it: file_sd_configs
# (JSON and YAML files matched by a glob, relative to the config file) and
# http_sd_configs (a JSON list from an HTTP server, here python3's
# http.server). Targets appear with their group labels, follow edits of the
# files and of the HTTP answer within seconds (no SIGHUP), a new file
# matching the glob is picked up and a deleted one's targets go, a file
# that stops parsing keeps its last good targets (and the reason is logged),
# __meta_filepath / __meta_url reach relabel_configs, and the Go target
# found this way is really scraped (health "up").
set -euo pipefail
source "$(dirname "$0")/../lib/scrape_lib.sh"
build_target
KILN=${KILN_BIN:-$root/build/san/bin}/kiln
[ -x "$KILN" ] || fail "$KILN is not built"

read -r p_kiln p_go p_a p_b p_sd <<<"$(free_ports 5)"
start_target "$p_go" work
wait_port "$p_go"
mkdir -p "$work/conf/targets" "$work/sd"
cat >"$work/conf/kiln.yaml" <<YAML
scrape_configs:
  - job_name: "files"
    scrape_interval: "2s"
    file_sd_configs:
      - files: ['targets/*.json', 'targets/*.yaml']
        refresh_interval: 5m
    relabel_configs:
      - source_labels: [__meta_filepath]
        regex: '.*/([a-z]+)\.(json|yaml)'
        target_label: sd_file
        replacement: '\$1'
  - job_name: "http"
    scrape_interval: "2s"
    http_sd_configs:
      - url: 'http://127.0.0.1:$p_sd/sd.json'
        refresh_interval: 1s
    relabel_configs:
      - source_labels: [__meta_url]
        target_label: sd_url
YAML
cat >"$work/conf/targets/go.json" <<JSON
[{"targets": ["127.0.0.1:$p_go"], "labels": {"team": "profiling"}}]
JSON
cat >"$work/sd/sd.json" <<JSON
[{"targets": ["127.0.0.1:$p_a"], "labels": {"zone": "a"}}]
JSON
(cd "$work/sd" && exec python3 -m http.server "$p_sd" --bind 127.0.0.1) >"$work/sd.log" 2>&1 &
pids+=($!)
wait_port "$p_sd"
"$KILN" --http-address=127.0.0.1:$p_kiln --storage-path="$work/data" \
	--config-path="$work/conf/kiln.yaml" >"$work/kiln.log" 2>&1 &
pids+=($!)
wait_port "$p_kiln"

# targets JOB: "instance labels..." lines of the active process_cpu units.
targets() {
	curl -sf "http://127.0.0.1:$p_kiln/api/v1/targets" | python3 -c '
import json, sys
job = sys.argv[1]
for t in json.load(sys.stdin)["active"]:
    l = t["labels"]
    if l.get("job") == job and l.get("__name__") == "process_cpu":
        extra = " ".join(f"{k}={v}" for k, v in sorted(l.items()) if k not in ("job", "__name__", "instance"))
        print(l["instance"], t["health"], extra)' "$1" | sort
}
# expect JOB PATTERN: waits up to 10 s for targets(JOB) to match PATTERN.
expect() {
	local got=""
	for _ in $(seq 50); do
		got=$(targets "$1" 2>/dev/null || true)
		[[ "$got" =~ $2 ]] && return 0
		sleep 0.2
	done
	echo "--- kiln.log"; tail -20 "$work/kiln.log"
	fail "job $1: expected /$2/, got: ${got:-nothing}"
}

expect files "^127.0.0.1:$p_go [a-z]+ sd_file=go team=profiling$"
expect http "^127.0.0.1:$p_a [a-z]+ sd_url=http://127.0.0.1:$p_sd/sd.json zone=a$"
# The Go target found through the file is scraped.
expect files "^127.0.0.1:$p_go up "

# A new YAML file matching the glob; an edit of the HTTP answer.
cat >"$work/conf/targets/more.yaml" <<YAML
- targets: ['127.0.0.1:$p_b']
  labels: {team: other}
YAML
cat >"$work/sd/sd.json.new" <<JSON
[{"targets": ["127.0.0.1:$p_b"], "labels": {"zone": "b"}}]
JSON
mv "$work/sd/sd.json.new" "$work/sd/sd.json"
expect files "127.0.0.1:$p_b [a-z]+ sd_file=more team=other"
expect http "^127.0.0.1:$p_b [a-z]+ sd_url=[^ ]+ zone=b$"

# A file that stops parsing keeps its last targets, and the log says why.
echo '[{"targets": ["127.0.0.1:1"' >"$work/conf/targets/more.yaml"
sleep 2.5
targets files | grep -q "127.0.0.1:$p_b .* team=other" || fail "a broken file dropped its last good targets"
grep -q "more.yaml" "$work/kiln.log" || fail "no log line names the broken file"
# A deleted file's targets go; the other file's stay.
rm "$work/conf/targets/more.yaml"
expect files "^127.0.0.1:$p_go up sd_file=go team=profiling$"
# An HTTP answer that is not 200: the last good targets stay.
rm "$work/sd/sd.json"
sleep 2.5
targets http | grep -q "127.0.0.1:$p_b" || fail "an HTTP 404 dropped the last good targets"
grep -q "HTTP 404" "$work/kiln.log" || fail "no log line for the HTTP 404"
echo "PASS"
