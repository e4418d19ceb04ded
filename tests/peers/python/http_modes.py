#!/usr/bin/env python3
"""A pprof target served by Python's http.server in several HTTP/1.x shapes,
for the scrape client's integration test (tests/integration/scrape_http_client.sh).

  http_modes.py PROFILE COUNTS_FILE MODE=PORT [MODE=PORT ...]

Every GET answers PROFILE's bytes. Modes:
  http10      HTTP/1.0, Content-Length, the server closes after each response
  keepalive   HTTP/1.1, Content-Length, the connection is kept
  chunked     HTTP/1.1, Transfer-Encoding: chunked (1000-byte chunks) and
              Content-Encoding: gzip (the body gzipped once more)
  untilclose  HTTP/1.1, no length: the body ends when the server closes
  stale       HTTP/1.1, Content-Length, keep-alive announced, but a second
              request on a connection is met with a close and no answer
COUNTS_FILE gets {mode: {"connections": n, "requests": n}} after every
request. Prints "ready" once all ports listen.
"""
import gzip
import http.server
import json
import socketserver
import sys
import threading

profile = open(sys.argv[1], "rb").read()
counts_path = sys.argv[2]
counts = {}
lock = threading.Lock()


def bump(mode, key):
    with lock:
        c = counts.setdefault(mode, {"connections": 0, "requests": 0})
        c[key] += 1
        with open(counts_path + ".tmp", "w") as f:
            json.dump(counts, f)
        import os
        os.replace(counts_path + ".tmp", counts_path)


def handler_for(mode):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0" if mode == "http10" else "HTTP/1.1"

        def setup(self):
            super().setup()
            self.n = 0
            bump(mode, "connections")

        def log_message(self, *a):
            pass

        def do_GET(self):
            self.n += 1
            if mode == "stale" and self.n >= 2:
                self.close_connection = True  # closes without an answer
                return
            bump(mode, "requests")
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if mode == "chunked":
                body = gzip.compress(profile)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                for i in range(0, len(body), 1000):
                    part = body[i:i + 1000]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
            elif mode == "untilclose":
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(profile)
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(len(profile)))
                self.end_headers()
                self.wfile.write(profile)
    return H


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


servers = []
for arg in sys.argv[3:]:
    mode, port = arg.split("=")
    s = Server(("127.0.0.1", int(port)), handler_for(mode))
    threading.Thread(target=s.serve_forever, daemon=True).start()
    servers.append(s)
print("ready", flush=True)
threading.Event().wait()
