#!/usr/bin/python3
"""Hostile clients for tests/integration/server_slowloris.sh.

Keeps COUNT connections of each KIND open from each source address (any of
127/8 is loopback), opening a new one whenever the server closes one, for
DURATION seconds; then prints one JSON line of what happened:

  slowloris   an HTTP/1.1 request header, one byte a second
  slowbody    a whole header with Content-Length: 1000000, then one body
              byte a second
  h2idle      the HTTP/2 preface and SETTINGS, then a PING a second and
              nothing else
  h2slowbody  an HTTP/2 POST stream (HEADERS without END_STREAM), then one
              DATA byte a second

Output: {"opened": N, "closed_by_server": N, "refused": N,
         "oldest_alive_s": S, "longest_lived_s": S}
oldest_alive_s is the age of the oldest connection still open at the end;
longest_lived_s the longest time any connection stayed open.
"""
import argparse
import json
import selectors
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    # Literal header field without indexing, new name, no Huffman coding.
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


class Conn:
    def __init__(self, kind, src, port, now):
        self.kind, self.src, self.opened = kind, src, now
        self.sock = socket.socket()
        self.sock.bind((src, 0))
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))
        self.next_send = now
        self.started = False
        self.drip = b"X-Slow: " + b"a" * 10000
        self.pos = 0

    def first_bytes(self):
        if self.kind == "slowloris":
            return b"GET /healthy HTTP/1.1\r\nHost: x\r\n"
        if self.kind == "slowbody":
            return (b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 1000000\r\n\r\n")
        settings = frame(4, 0, 0, b"")
        if self.kind == "h2idle":
            return PREFACE + settings
        block = b"".join([
            hpack_literal(b":method", b"POST"),
            hpack_literal(b":scheme", b"http"),
            hpack_literal(b":path",
                          b"/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"),
            hpack_literal(b":authority", b"x"),
            hpack_literal(b"content-type", b"application/grpc"),
        ])
        return PREFACE + settings + frame(1, 4, 1, block)  # END_HEADERS

    def drip_bytes(self):
        if self.kind == "slowloris":
            b = self.drip[self.pos:self.pos + 1]
            self.pos += 1
            return b
        if self.kind == "slowbody":
            return b"x"
        if self.kind == "h2idle":
            return frame(6, 0, 0, b"12345678")  # PING
        return frame(0, 0, 1, b"x")  # DATA on stream 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sources", required=True, help="comma-separated 127.x.y.z")
    ap.add_argument("--kinds", default="slowloris,slowbody,h2idle,h2slowbody")
    ap.add_argument("--count", type=int, default=10, help="per kind per source")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--interval", type=float, default=1.0)
    a = ap.parse_args()

    sel = selectors.DefaultSelector()
    live = []
    stats = {"opened": 0, "closed_by_server": 0, "refused": 0, "longest_lived_s": 0.0}
    start = time.monotonic()
    last_reopen = 0.0
    wanted = [(k, s) for k in a.kinds.split(",") for s in a.sources.split(",")
              for _ in range(a.count)]

    def close(c, now, by_server):
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        live.remove(c)
        life = now - c.opened
        stats["longest_lived_s"] = max(stats["longest_lived_s"], round(life, 2))
        key = "longest_" + c.kind
        stats[key] = max(stats.get(key, 0.0), round(life, 2))
        if by_server:
            stats["closed_by_server"] += 1
            if not c.started or life < 0.2:
                stats["refused"] += 1

    while True:
        now = time.monotonic()
        if now - start > a.duration:
            break
        # Reopen what the server closed, a few times a second.
        reopen = now - last_reopen >= 0.25
        if reopen:
            last_reopen = now
        have = {}
        for c in live:
            have[(c.kind, c.src)] = have.get((c.kind, c.src), 0) + 1
        need = {}
        for k in wanted:
            need[k] = need.get(k, 0) + 1
        for k, n in need.items():
            for _ in range(n - have.get(k, 0) if reopen else 0):
                try:
                    c = Conn(k[0], k[1], a.port, now)
                except OSError:
                    continue
                live.append(c)
                sel.register(c.sock, selectors.EVENT_READ, c)
                stats["opened"] += 1
        for c in list(live):
            if now < c.next_send:
                continue
            try:
                c.sock.send(c.drip_bytes() if c.started else c.first_bytes())
                c.started = True
                c.next_send = now + a.interval
            except BlockingIOError:
                pass
            except OSError:
                close(c, now, True)
        for key, _ in sel.select(timeout=0.1):
            c = key.data
            try:
                d = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if not d:
                close(c, time.monotonic(), True)
    now = time.monotonic()
    stats["oldest_alive_s"] = round(max([now - c.opened for c in live], default=0.0), 2)
    stats["still_open"] = len(live)
    for c in list(live):
        key = "oldest_alive_" + c.kind
        stats[key] = max(stats.get(key, 0.0), round(now - c.opened, 2))
        close(c, now, False)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
