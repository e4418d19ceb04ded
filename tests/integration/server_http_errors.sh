#!/usr/bin/env bash
# Every HTTP/1.1 error is Kiln's documented JSON ({"error": "..."}), those
# the listener answers before libmicrohttpd sees a request included: a
# request line over --max-request-header-size (414), a header over it (431),
# garbage (400, where the connection used to be closed without a word) and
# a header that does not arrive within --request-header-timeout (408); and
# the same 431 on a kept-alive connection's later request, which
# libmicrohttpd parses (it used to answer 414 and 431 with its own HTML).
source "$(dirname "$0")/server_lib.bash"
T=$(mktemp -d /tmp/kiln-server-test.XXXXXX)
trap server_cleanup EXIT
server_start --max-request-header-size=8KiB --request-header-timeout=2s

$PY - "$PORT" <<'PYEOF' || die "HTTP errors"
import json, socket, sys, time

port = int(sys.argv[1])

def exchange(data, keep=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        out += d
        if keep and out.count(b"HTTP/1.1 ") >= 1 and b"\r\n\r\n" in out:
            head, _, body = out.partition(b"\r\n\r\n")
            n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
            if len(body) >= n:
                s.sendall(keep)
                keep = None
                out = b""
    s.close()
    return out

def check(what, resp, status, contains):
    head, _, body = resp.partition(b"\r\n\r\n")
    line = head.split(b"\r\n")[0].decode(errors="replace")
    if not line.startswith(f"HTTP/1.1 {status} "):
        sys.exit(f"{what}: status line {line!r}, expected {status}; response {resp[:200]!r}")
    if b"application/json" not in head:
        sys.exit(f"{what}: not JSON: {head!r}")
    err = json.loads(body)["error"]
    if contains not in err:
        sys.exit(f"{what}: error {err!r} does not mention {contains!r}")
    print(f"ok: {what}: {status} {err}")

check("long request line",
      exchange(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"), 414,
      "--max-request-header-size")
check("large header",
      exchange(b"GET /healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n"), 431,
      "--max-request-header-size")
check("garbage", exchange(b"garbage\r\n\r\n"), 400, "request line")
check("binary garbage", exchange(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(64))),
      400, "request line")
check("bad header line", exchange(b"GET /healthy HTTP/1.1\r\nno colon here\r\n\r\n"), 400, "header")
t0 = time.monotonic()
check("slow header", exchange(b"GET /healthy HTTP/1.1\r\nHost: x\r\n"), 408,
      "--request-header-timeout")
# A kept-alive connection's second request is parsed by libmicrohttpd.
check("large header on a kept-alive connection",
      exchange(b"GET /healthy HTTP/1.1\r\nHost: x\r\n\r\n",
               keep=b"GET /healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 12000 + b"\r\n\r\n"),
      431, "--max-request-header-size")
PYEOF
curl -sf --max-time 5 "http://$ADDR/healthy" >/dev/null || die "unhealthy after the bad requests"
server_stop
echo "PASS: server_http_errors"
