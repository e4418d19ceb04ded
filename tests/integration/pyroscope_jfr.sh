#!/usr/bin/env bash
# Pyroscope's format=jfr with a real producer: the JDK's own flight
# recorder records a Java program with known hot methods, allocations and
# monitor contention; the recording is pushed to POST /ingest as Pyroscope's
# Java agent sends it (raw, gzipped, and as the "jfr" part of a multipart
# form). What kiln stores must equal what the JDK's `jfr print` reads from
# the same file: CPU samples per leaf method, allocation count and bytes,
# monitor-wait count and time. Garbage, a truncated recording and a wrong
# magic get clear errors.
source "$(dirname "$0")/server_lib.bash"
command -v javac >/dev/null && command -v jfr >/dev/null || die "javac/jfr missing (make deps)"
T=$(mktemp -d /tmp/kiln-jfr-test.XXXXXX)
trap server_cleanup EXIT
server_start

cp "$KILN_ROOT/tests/peers/java/JfrLoad.java" "$T/" && (cd "$T" && javac JfrLoad.java) || die "javac"
(cd "$T" && java -XX:StartFlightRecording=filename=load.jfr,settings=profile JfrLoad 3000 >/dev/null 2>&1) ||
	die "java with the flight recorder"
jfr print --json --events jdk.ExecutionSample,jdk.ObjectAllocationSample,jdk.JavaMonitorEnter \
	"$T/load.jfr" >"$T/ref.json" || die "jfr print"

U=http://$ADDR
post() { # QUERY CURL-ARGS...
	local q=$1
	shift
	curl -sg -o "$T/resp" -w "%{http_code}" "$U/ingest?$q" "$@"
}
code=$(post 'name=javaapp{env=raw}&format=jfr&sampleRate=100&spyName=javaspy' --data-binary @"$T/load.jfr")
[ "$code" = 200 ] || die "raw jfr: HTTP $code $(cat "$T/resp")"
gzip -c "$T/load.jfr" >"$T/load.jfr.gz"
code=$(post 'name=javaapp{env=gz}&format=jfr&sampleRate=100' --data-binary @"$T/load.jfr.gz")
[ "$code" = 200 ] || die "gzipped jfr: HTTP $code $(cat "$T/resp")"
code=$(post 'name=javaapp{env=multipart}&format=jfr&sampleRate=100' -F "jfr=@$T/load.jfr.gz")
[ "$code" = 200 ] || die "multipart jfr: HTTP $code $(cat "$T/resp")"

curl -sf "$U/api/v1/profile-types" >"$T/types.json" || die "profile types"
now=$(($(date +%s) * 1000))
for env in raw gz multipart; do
	for t in $($PY -c 'import json,sys; print(" ".join(x["key"] for x in json.load(open(sys.argv[1]))["types"]))' "$T/types.json"); do
		curl -sf -G "$U/api/v1/query" --data-urlencode "query=$t{service_name=\"javaapp\",env=\"$env\"}" \
			--data-urlencode "start=$((now - 3600000))" --data-urlencode "end=$((now + 60000))" \
			--data-urlencode report=top >"$T/top-$env-$t.json" || die "top $t"
	done
done
$PY - "$T" <<'PYEOF' || die "kiln's profiles differ from jfr print"
import collections, glob, json, os, re, sys
T = sys.argv[1]
ref = json.load(open(f"{T}/ref.json"))["recording"]["events"]
def name(frame):
    m = frame["method"]
    return (m["type"]["name"] + "." + m["name"]).replace("/", ".")
def dur_ns(s):
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", s)
    h, mi, sec = (float(x) if x else 0 for x in m.groups())
    return round(((h * 60 + mi) * 60 + sec) * 1e9)
cpu = collections.Counter()
alloc_n = alloc_bytes = lock_n = lock_ns = 0
for e in ref:
    v = e["values"]
    if e["type"] == "jdk.ExecutionSample":
        cpu[name(v["stackTrace"]["frames"][0])] += 1
    elif e["type"] == "jdk.ObjectAllocationSample":
        alloc_n += 1
        alloc_bytes += v["weight"]
    elif e["type"] == "jdk.JavaMonitorEnter":
        lock_n += 1
        lock_ns += dur_ns(v["duration"])
assert sum(cpu.values()) >= 5 and alloc_n and lock_n, (cpu, alloc_n, lock_n)
assert cpu.most_common(1)[0][0].startswith("JfrLoad.spin"), cpu
for env in ("raw", "gz", "multipart"):
    tops = {}
    for f in glob.glob(f"{T}/top-{env}-*.json"):
        t = os.path.basename(f)[len(f"top-{env}-"):-5]
        tops[t] = json.load(open(f))
    def top(prefix):
        got = [v for t, v in tops.items() if t.startswith(prefix) and v["total"]]
        assert len(got) == 1, (prefix, list(tops))
        return got[0]
    samples = top("process_cpu:samples:count:")
    flat = {r["name"]: r["flat"] for r in samples["rows"] if r["flat"]}
    assert flat == dict(cpu), (env, flat, dict(cpu))
    assert top("process_cpu:cpu:nanoseconds:")["total"] == sum(cpu.values()) * 10_000_000
    assert top("memory:alloc_objects:count:")["total"] == alloc_n
    assert top("memory:alloc_space:bytes:")["total"] == alloc_bytes
    assert top("mutex:contentions:count:")["total"] == lock_n
    got_ns = top("mutex:delay:nanoseconds:")["total"]
    assert abs(got_ns - lock_ns) <= lock_n * 1000, (got_ns, lock_ns)
    contend = [r for r in top("mutex:contentions:count:")["rows"] if r["name"] == "JfrLoad.contend"]
    assert contend and contend[0]["cum"] == lock_n, top("mutex:contentions:count:")["rows"][:5]
print(f"jfr print and kiln agree: {sum(cpu.values())} CPU samples {dict(cpu.most_common(3))}, "
      f"{alloc_n} allocation samples ({alloc_bytes} bytes), {lock_n} monitor waits ({lock_ns} ns)")
PYEOF
# The series carry Pyroscope's labels.
curl -sf -G "$U/api/v1/labels" --data-urlencode 'query=process_cpu:samples:count:cpu:nanoseconds:delta{env="raw"}' \
	| grep -q pyroscope_spy || die "no pyroscope_spy label"

# Bad input: every recording refused with where it went wrong, nothing stored.
head -c 5000 "$T/load.jfr" >"$T/cut.jfr"
code=$(post 'name=bad&format=jfr' --data-binary @"$T/cut.jfr")
[ "$code" = 400 ] && grep -q 'jfr: chunk at byte 0 claims' "$T/resp" || die "truncated: $code $(cat "$T/resp")"
printf 'FLR\0\0\1\0\0' | cat - <(tail -c +9 "$T/load.jfr") >"$T/v1.jfr"
code=$(post 'name=bad&format=jfr' --data-binary @"$T/v1.jfr")
[ "$code" = 400 ] && grep -q 'Kiln reads 2.x' "$T/resp" || die "version 1: $code $(cat "$T/resp")"
code=$(post 'name=bad&format=jfr' -F "profile=@$T/load.jfr")
[ "$code" = 400 ] && grep -q 'no \\"jfr\\" part' "$T/resp" || die "no jfr part: $code $(cat "$T/resp")"
curl -sf -G "$U/api/v1/values" --data-urlencode label=service_name \
	--data-urlencode 'query=process_cpu:samples:count:cpu:nanoseconds:delta{}' | grep -q '"bad"' &&
	die "a refused recording stored something"
server_stop
echo "PASS: JFR from the JDK's flight recorder, as jfr print reads it"
