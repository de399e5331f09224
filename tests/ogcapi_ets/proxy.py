#!/usr/bin/env python3
"""Test-harness reverse proxy for running the OGC ETS against an mpiws endpoint.

    proxy.py LISTEN_PORT UPSTREAM_HOST:PORT KEYFILE LOGFILE

Forwards every request (method, path, headers, body) to the upstream endpoint and adds
`Authorization: Bearer KEY` (first word of KEYFILE's first line) unless the client sent one.
The Host header is set to the upstream's host:port.

Because `mpiws serve` has no option for its public/advertised URL (it builds links from the
address it is bound to), the proxy also rewrites the upstream's `http://HOST:PORT` to its own
`http://127.0.0.1:LISTEN_PORT` in response bodies and in the Location, Link and
Content-Location headers (Content-Length is recomputed). Nothing else is changed.
Every exchange is logged (JSON lines) to LOGFILE, with the key masked.
"""

import http.client
import http.server
import json
import sys
import threading
import time

LISTEN_PORT = int(sys.argv[1])
UPSTREAM = sys.argv[2]
KEY = open(sys.argv[3]).read().split()[0]
LOG = open(sys.argv[4], "a", buffering=1)
LOCK = threading.Lock()

UP_URL = f"http://{UPSTREAM}".encode()
MY_URL = f"http://127.0.0.1:{LISTEN_PORT}".encode()
REWRITE_HEADERS = {"location", "link", "content-location"}
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def show(b, limit=200000):
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        s = repr(b)
    return s if len(s) <= limit else s[:limit] + f"... [{len(s)} chars]"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = []
        for k, v in self.headers.items():
            if k.lower() in HOP or k.lower() == "host":
                continue
            headers.append((k, v))
        headers.append(("Host", UPSTREAM))
        if not any(k.lower() == "authorization" for k, _ in headers):
            headers.append(("Authorization", f"Bearer {KEY}"))
        conn = http.client.HTTPConnection(UPSTREAM, timeout=120)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers:
            conn.putheader(k, v)
        if body or self.command in ("POST", "PUT", "PATCH"):
            if not any(k.lower() == "content-length" for k, _ in headers):
                conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body if body else None)
        resp = conn.getresponse()
        rbody = resp.read().replace(UP_URL, MY_URL)
        self.send_response_only(resp.status, resp.reason)
        out_headers = []
        for k, v in resp.getheaders():
            if k.lower() in HOP or k.lower() == "content-length":
                continue
            if k.lower() in REWRITE_HEADERS:
                v = v.replace(UP_URL.decode(), MY_URL.decode())
            out_headers.append((k, v))
            self.send_header(k, v)
        if not (resp.status in (204, 304) or 100 <= resp.status < 200):
            self.send_header("Content-Length", str(len(rbody)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(rbody)
        conn.close()
        entry = {
            "t": time.strftime("%H:%M:%S"),
            "method": self.command,
            "path": self.path,
            "req_headers": [(k, v) for k, v in self.headers.items() if k.lower() != "authorization"],
            "req_body": show(body),
            "status": resp.status,
            "resp_headers": out_headers,
            "resp_body": show(rbody),
        }
        with LOCK:
            LOG.write(json.dumps(entry) + "\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = forward


if __name__ == "__main__":
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN_PORT), Handler)
    srv.daemon_threads = True
    print(f"proxy: http://127.0.0.1:{LISTEN_PORT} -> http://{UPSTREAM}", flush=True)
    srv.serve_forever()
