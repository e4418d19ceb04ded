#!/usr/bin/env bash
# The HTTP/JSON API on the same port as gRPC: every route of docs/API.md
# with curl, checked with python's json module against the ingested Go
# profiles (totals exact), error bodies with positions, CORS, the static UI
# with its single-page-app fallback, /metrics, /healthy, /ready.
source "$(dirname "$0")/server_lib.bash"
server_setup
mkdir -p "$T/ui/assets"
echo '<!doctype html><title>kiln-ui-test</title>' >"$T/ui/index.html"
echo 'console.log("kiln")' >"$T/ui/assets/app.js"
echo 'body{}' >"$T/ui/assets/app.css"
server_start --ui-path="$T/ui" --cors-allowed-origins=http://ui.example

P=$T/prof
client write --name kiln_http --label job=web --label node=a \
	--profiles "$P/cpu-0.pb.gz" "$P/heap-0.pb.gz" || die "WriteRaw 0"
client write --name kiln_http --label job=web --label node=b --profiles "$P/cpu-1.pb.gz" ||
	die "WriteRaw 1"
K=http://$ADDR

get() { # URL OUTFILE -> prints the HTTP status
	curl -sg -o "$2" -w '%{http_code}' "$1"
}

[ "$(curl -s "$K/healthy")" = ok ] || die "/healthy"
[ "$(curl -s "$K/ready")" = ready ] || die "/ready"

for path in /api/v1/profile-types "/api/v1/labels?query=kiln_http:samples:count:cpu:nanoseconds:delta" \
	"/api/v1/values?label=node&query=kiln_http:samples:count:cpu:nanoseconds:delta"; do
	n=$(basename "${path%%\?*}")
	[ "$(get "$K$path" "$T/$n.json")" = 200 ] || die "GET $path"
done
T_CPU='kiln_http:samples:count:cpu:nanoseconds:delta'
# Repeated query arguments are a union (like the gRPC match[]); each alone
# narrows; a malformed one is a 400 naming it.
u() { $PY -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
QA=$(u "$T_CPU{node=\"a\"}") QB=$(u "$T_CPU{node=\"b\"}")
[ "$(curl -sf "$K/api/v1/values?label=node&query=$QA&query=$QB")" = '{"values":["a","b"]}' ] ||
	die "values over two queries is not the union"
[ "$(curl -sf "$K/api/v1/values?label=node&query=$QB")" = '{"values":["b"]}' ] ||
	die "values with one matcher"
[ "$(curl -sf "$K/api/v1/labels?query=$QA&query=$QB")" = '{"names":["job","node"]}' ] ||
	die "labels over two queries"
[ "$(curl -sf "$K/api/v1/values?label=node&query=$QA&start=0&end=1")" = '{"values":[]}' ] ||
	die "values outside the time range is not empty"
code=$(get "$K/api/v1/labels?query=$QA&query=$(u '{node=}')" "$T/badq.json")
[ "$code" = 400 ] && grep -q 'query #2' "$T/badq.json" || die "bad second query: $code $(cat "$T/badq.json")"
code=$(get "$K/api/v1/query_range?query=$T_CPU&start=0&end=9999999999999" "$T/range.json")
[ "$code" = 200 ] || die "query_range $code"
code=$(get "$K/api/v1/query_range?query=$T_CPU&start=0&end=9999999999999&step=3600000" "$T/range_step.json")
[ "$code" = 200 ] || die "query_range step $code"
for r in flamegraph top folded pprof; do
	code=$(get "$K/api/v1/query?mode=merge&query=$T_CPU&start=0&end=9999999999999&report=$r" "$T/merge.$r")
	[ "$code" = 200 ] || die "query report=$r: $code $(cat "$T/merge.$r")"
done
code=$(get "$K/api/v1/query?mode=merge&query=$T_CPU{node=\"a\"}&start=0&end=9999999999999&report=top&filter=spinAlpha" "$T/filtered.json")
[ "$code" = 200 ] || die "filtered query"
go tool pprof -top "$T/merge.pprof" >"$T/pprof.txt" 2>&1 || die "go tool pprof on report=pprof"
grep -q main.spinAlpha "$T/pprof.txt" || die "report=pprof lacks main.spinAlpha"

$PY - "$STUBS" "$T" "$P" "$K" "$T_CPU" <<'PYEOF' || die "JSON checks"
import gzip, json, sys, urllib.request, urllib.error, urllib.parse
stubs, t, prof, base, typ = sys.argv[1:6]
sys.path.insert(0, stubs)
from pprof import profile_pb2

def load(p):
    m = profile_pb2.Profile(); m.ParseFromString(gzip.decompress(open(p, "rb").read())); return m
def samples_total(m):  # the "samples" sample type of a Go CPU profile
    i = [m.string_table[st.type] for st in m.sample_type].index("samples")
    return sum(s.value[i] for s in m.sample)
c0, c1 = load(prof + "/cpu-0.pb.gz"), load(prof + "/cpu-1.pb.gz")
want = samples_total(c0) + samples_total(c1)
def j(name): return json.load(open(t + "/" + name))
def check(cond, msg):
    if not cond: sys.exit("FAIL: " + msg)

types = {x["key"]: x for x in j("profile-types.json")["types"]}
check(typ in types, "profile-types lacks " + typ)
check(types[typ]["delta"] is True and types[typ]["sample_unit"] == "count", "type fields")
check(any(not x["delta"] for x in types.values()), "heap types must not be delta")
check({"job", "node"} <= set(j("labels.json")["names"]), "labels")
check(sorted(j("values.json")["values"]) == ["a", "b"], "values: %s" % j("values.json"))

rng = j("range.json")
check(rng["unit"] == "count", "range unit")
check(sum(p[1] for s in rng["series"] for p in s["points"]) == want, "query_range sum")
check(len(rng["series"]) == 2, "two series (node a, b)")
for s in rng["series"]:
    check(s["labels"]["job"] == "web", "series labels")
stepped = j("range_step.json")
check(sum(p[1] for s in stepped["series"] for p in s["points"]) == want, "stepped sum")
for s in stepped["series"]:
    for ts, _ in s["points"]:
        check(ts % 3600000 == 0, "step-aligned timestamps")

fg = json.load(open(t + "/merge.flamegraph"))
check(fg["total"] == want and fg["filtered"] == want, "flamegraph total %s want %d" % (fg["total"], want))
n = fg["nodes"]
check(n["cum"][0] == want and n["parent"][0] == -1 and fg["strings"][n["name"][0]] == "total", "root node")
check(sum(n["self"]) == want, "flamegraph self sum")
names = {fg["strings"][i] for i in n["name"]}
check("main.spinAlpha" in names and "main.recurse" in names, "flamegraph function names")
top = json.load(open(t + "/merge.top"))
check(sum(r["flat"] for r in top["rows"]) == want and top["total"] == want, "top sums")
folded = open(t + "/merge.folded").read().splitlines()
check(sum(int(l.rsplit(" ", 1)[1]) for l in folded) == want, "folded sum")
check(any(l.startswith("runtime.main;main.main;main.spinAlpha") for l in folded), "folded stack")
m = load(t + "/merge.pprof")
check(samples_total(m) == want, "pprof report total")

# The filter keeps only stacks through spinAlpha (node a = cpu-0 only).
f = j("filtered.json")
check(f["total"] == samples_total(c0) and 0 < f["filtered"] < f["total"], "filter: %s" % f)

def get(path):
    try:
        with urllib.request.urlopen(base + path) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers
q = urllib.parse.quote
# single: each profile at its own time.
for prof_msg, node in ((c0, "a"), (c1, "b")):
    ts = prof_msg.time_nanos // 1000000
    code, body, _ = get("/api/v1/query?mode=single&report=top&time=%d&query=%s" % (ts, q(typ + '{node="%s"}' % node)))
    check(code == 200 and json.loads(body)["total"] == samples_total(prof_msg), "single %s: %s" % (node, body[:200]))
# diff: A = node a, B = node b; root diff = B - A.
code, body, _ = get("/api/v1/query?mode=diff&a_mode=merge&a_start=0&a_end=9999999999999&a_query=%s&b_mode=merge&b_start=0&b_end=9999999999999&b_query=%s" % (q(typ + '{node="a"}'), q(typ + '{node="b"}')))
check(code == 200, "diff: %s" % body[:300])
d = json.loads(body)
check(d["nodes"]["diff"][0] == samples_total(c1) - samples_total(c0), "diff root")
code, body, _ = get("/api/v1/query?mode=diff&report=folded&a_mode=merge&a_start=0&a_query=%s&b_mode=merge&b_start=0&b_query=%s" % (q(typ), q(typ)))
check(code == 200 and all(len(l.split(" ")) >= 3 for l in body.decode().splitlines()), "diff folded")

# Errors: JSON with a message, and the position of a parse error.
code, body, _ = get("/api/v1/query?query=" + q(typ + "{comm}"))
e = json.loads(body)
check(code == 400 and e["position"] == len(typ) + 5 and "comm" in e["error"], "parse error: %s" % body)
code, body, _ = get("/api/v1/query?query=" + q("nope:a:b:c:d"))
check(code == 404 and "unknown profile type" in json.loads(body)["error"], "unknown type: %s %s" % (code, body))
code, body, _ = get("/api/v1/query?mode=single&query=" + q(typ))
check(code == 400 and "time" in json.loads(body)["error"], "single without time")
code, body, _ = get("/api/v1/query?report=nope&query=" + q(typ))
check(code == 400, "bad report")
code, body, _ = get("/api/v1/values?query=" + q(typ))
check(code == 400 and "label" in json.loads(body)["error"], "values without label")
code, body, _ = get("/api/v1/query_range?query=" + q(typ) + "&start=abc")
check(code == 400 and "start" in json.loads(body)["error"], "bad integer")
code, body, _ = get("/api/v1/nope")
check(code == 404 and "error" in json.loads(body), "unknown API route")
code, body, _ = get("/api/v1/labels?query=" + q('{job=~"("}'))
check(code == 400, "bad regex: %s %s" % (code, body))

# UI: files with content types; unknown non-API paths fall back to index.html.
code, body, h = get("/")
check(code == 200 and b"kiln-ui-test" in body and h["Content-Type"].startswith("text/html"), "ui index")
code, body, h = get("/assets/app.js")
check(code == 200 and h["Content-Type"].startswith("text/javascript"), "ui js")
code, body, h = get("/assets/app.css")
check(code == 200 and h["Content-Type"].startswith("text/css"), "ui css")
code, body, h = get("/flamegraph/some/route")
check(code == 200 and b"kiln-ui-test" in body, "spa fallback")
code, body, h = get("/../../etc/passwd")
check(b"root:" not in body, "path traversal")

# CORS for the allowed origin only.
req = urllib.request.Request(base + "/api/v1/profile-types", headers={"Origin": "http://ui.example"})
with urllib.request.urlopen(req) as r:
    check(r.headers["Access-Control-Allow-Origin"] == "http://ui.example", "CORS allowed")
req = urllib.request.Request(base + "/api/v1/profile-types", headers={"Origin": "http://evil.example"})
with urllib.request.urlopen(req) as r:
    check(r.headers["Access-Control-Allow-Origin"] is None, "CORS denied")
print("http checks ok, total", want)
PYEOF

# An oversized body is refused with 413; the server keeps serving.
head -c $((70 << 20)) /dev/zero >"$T/big.bin"
code=$(curl -s -o "$T/big.out" -w '%{http_code}' --data-binary @"$T/big.bin" "$K/api/v1/query")
[ "$code" = 413 ] || die "oversized POST: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$K/healthy")
[ "$code" = 405 ] || die "POST /healthy: $code"
curl -sf "$K/metrics" >"$T/metrics.txt" || die "/metrics"
for m in kiln_ingested_samples_total kiln_ingested_bytes_total kiln_store_series \
	kiln_wal_fsync_duration_seconds_count 'kiln_http_request_duration_seconds_bucket{route="/api/v1/query",le="+Inf"}'; do
	grep -qF "$m" "$T/metrics.txt" || die "/metrics lacks $m"
done
grep -Eq '^kiln_http_requests_total\{route="/api/v1/query"\} [1-9]' "$T/metrics.txt" ||
	die "HTTP query requests not counted"
server_stop

# --help lists every flag with its default; bad flags are refused.
"$KILN" --help >"$T/help.txt" || die "kiln --help"
for f in --http-address --storage-path --storage-retention --config-path --cors-allowed-origins \
	--log-level --grpc-max-message-size --ui-path --tls-cert-file --tls-key-file; do
	grep -q -- "$f" "$T/help.txt" || die "--help lacks $f"
done
grep -q '15d' "$T/help.txt" && grep -q ':7070' "$T/help.txt" || die "--help lacks defaults"
"$KILN" --storage-retention=15x 2>/dev/null && die "accepted --storage-retention=15x"
"$KILN" --grpc-max-message-size=abc 2>/dev/null && die "accepted a bad size"
"$KILN" --config-path="$T/no-such.yaml" --storage-path="$T/d2" --http-address=127.0.0.1:0 \
	2>"$T/cfg.txt" && die "accepted a missing --config-path"
grep -q 'no-such.yaml' "$T/cfg.txt" || die "missing --config-path error unclear"

# Without a UI directory, / explains how to build it.
server_start --ui-path="$T/no-such-dir"
curl -s "http://$ADDR/" | grep -q 'make ui' || die "/ without UI"
server_stop
echo "server_http: ok"
