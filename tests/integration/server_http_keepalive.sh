#!/usr/bin/env bash
# Every request on a kept-alive HTTP/1.1 connection is judged by Kiln, not
# only the first: a valid request, then garbage on the same socket (sent
# after the answer, or pipelined in the same write), gets the 200 and then
# Kiln's JSON 400 — libmicrohttpd used to answer the second with its HTML
# page or close without a word. The same for the other ways a later request
# can be wrong (bad chunk, bad or conflicting Content-Length, an unknown
# Transfer-Encoding: 501, no Host, a head over the size limit: 431, a head
# that trickles: 408), over plaintext and over TLS (whose first request
# also went to libmicrohttpd unchecked). Valid traffic still flows:
# pipelined requests, chunked bodies with extensions and trailers, a
# "Connection: close" request ends the connection.
source "$(dirname "$0")/server_lib.bash"
T=$(mktemp -d /tmp/kiln-server-test.XXXXXX)
trap server_cleanup EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 2 \
	-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1 ||
	die "openssl req"

check_server() { # tls(0/1)
	$PY - "$PORT" "$1" "$T/cert.pem" <<'PYEOF'
import json, socket, ssl, sys, time

port, tls, cert = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
OK = b"GET /healthy HTTP/1.1\r\nHost: x\r\n\r\n"

def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls:
        ctx = ssl.create_default_context(cafile=cert)
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
    return s

def read_response(s, buf):
    """One response from s (buf: bytes already read); (response, rest) or
    (None, buf) when the connection closed first."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    hdrs = {l.split(b":")[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:]}
    n = int(hdrs.get(b"content-length", b"0"))
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return (int(lines[0].split()[1]), hdrs, rest[:n]), rest[n:]

def session(parts, expect_close=True):
    """Sends each part after the answers to the ones before; returns every
    response read until the server closed (or, if not expect_close, until
    the answers stop)."""
    s = connect()
    out, buf = [], b""
    for i, p in enumerate(parts):
        s.sendall(p)
        if i + 1 < len(parts):
            r, buf = read_response(s, buf)
            if r is None:
                sys.exit(f"closed after {out!r}, before part {i + 1} was sent")
            out.append(r)
    s.settimeout(None if expect_close else 1.5)
    try:
        while True:
            r, buf = read_response(s, buf)
            if r is None:
                break
            out.append(r)
    except socket.timeout:
        if expect_close:
            sys.exit(f"the server did not close; got {out!r}")
    s.close()
    return out

def expect(what, got, statuses, about=None):
    codes = [r[0] for r in got]
    if codes != statuses:
        sys.exit(f"{what}: statuses {codes}, expected {statuses}: {got!r}")
    last = got[-1]
    if about is not None:
        if last[1].get(b"content-type") != b"application/json":
            sys.exit(f"{what}: answer {last[0]} is not JSON: {last!r}")
        err = json.loads(last[2])["error"]
        if about not in err:
            sys.exit(f"{what}: error {err!r} does not mention {about!r}")
        print(f"ok: {what}: {codes} {err}")
    else:
        print(f"ok: {what}: {codes}")

# The issue's case: a valid request, then garbage on the same socket.
expect("garbage after a valid request", session([OK, b"garbage\r\n\r\n"]), [200, 400], "request line")
expect("garbage pipelined behind a valid request", session([OK + b"garbage\r\n\r\n"]), [200, 400],
       "request line")
expect("binary garbage after two", session([OK, OK, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc"]),
       [200, 200, 400], "request line")
expect("garbage first", session([b"garbage\r\n\r\n"]), [400], "request line")
CH = b"POST /healthy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
later = [
    ("a bad chunk size", CH + b"zz\r\n", 400, "chunk size"),
    ("chunk data longer than its size", CH + b"3\r\nabcd\r\n", 400, "longer than its size"),
    ("a bad Content-Length", b"POST /healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
     400, "Content-Length"),
    ("Content-Length and chunked", b"POST /healthy HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "both"),
    ("Transfer-Encoding: gzip", b"POST /healthy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
     501, "gzip"),
    ("no Host", b"GET /healthy HTTP/1.1\r\n\r\n", 400, "Host"),
    ("a header line without a colon", b"GET /healthy HTTP/1.1\r\nHost: x\r\nbad\r\n\r\n", 400, "header"),
    ("a large header", b"GET /healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 12000 + b"\r\n\r\n",
     431, "--max-request-header-size"),
    ("a long request line", b"GET /" + b"a" * 12000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     414, "--max-request-header-size"),
]
for what, second, status, about in later:
    expect(what + " on a later request", session([OK, second]), [200, status], about)
t0 = time.monotonic()
expect("a later head that trickles", session([OK, b"GET /healthy HTTP/1.1\r\nHost: x\r\n"]),
       [200, 408], "--request-header-timeout")

# Valid traffic flows: pipelined requests, chunked bodies with extensions
# and trailers, and "Connection: close" ends it all.
expect("five pipelined", session([OK * 5], expect_close=False), [200] * 5)
expect("chunked with an extension and a trailer, then more",
       session([CH + b"3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n" + OK], expect_close=False),
       [405, 200])
expect("Connection: close", session([OK + b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                                     + b"garbage after the last request"]), [200, 200])
PYEOF
}

server_start --max-request-header-size=8KiB --request-header-timeout=2s
check_server 0 || die "plaintext HTTP/1.1"
curl -sf --max-time 5 "http://$ADDR/healthy" >/dev/null || die "unhealthy after the bad requests"
server_stop

SERVER_SCHEME=https SERVER_CURL_ARGS="--cacert $T/cert.pem" \
	server_start --tls-cert-file="$T/cert.pem" --tls-key-file="$T/key.pem" \
	--max-request-header-size=8KiB --request-header-timeout=2s
check_server 1 || die "HTTP/1.1 over TLS"
curl -sf --max-time 5 --cacert "$T/cert.pem" "https://$ADDR/healthy" >/dev/null ||
	die "unhealthy after the bad requests over TLS"
server_stop
echo "PASS: server_http_keepalive"
