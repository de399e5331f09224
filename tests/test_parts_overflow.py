"""Finding 4 of the security review: a part table whose lengths overflow a
u64 once passed the "adds up to the body length" check (the sum wrapped
round), and the receiving rank then tried to allocate terabytes (process
abort). Sent here as an attacker would, to a real `mpiws serve` process:
over a plain store and over an upgraded stream. Each is refused, and the
endpoint goes on serving the domain it was sent to."""

import http.client
import json
import pickle
import secrets
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from mpiws.keys import client_key

ROOT = Path(__file__).resolve().parent.parent

#: 1 TiB, then what makes the table wrap round to the body's length.
HUGE = 1 << 40


def wrapping_table(length):
    """Two part lengths whose u64 sum wraps round to ``length``."""
    return [HUGE, (1 << 64) - HUGE + length]


@pytest.fixture
def endpoint(tmp_path):
    """A `mpiws serve` process with the `sum` example; its stderr is kept to
    check that nothing panicked."""
    err = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--service",
            "sum=examples.service_sum:service",
            "--workdir",
            str(tmp_path / "work"),
        ],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        cwd=ROOT,
    )
    try:
        url = proc.stdout.readline().split(" at ")[-1].strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield proc, url
        err.seek(0)
        assert "panicked" not in err.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        err.close()


def call(method, url, body=None, headers=None, timeout=30):
    """Every HTTP request of this file (one place to add credentials)."""
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request(method, u.path + (f"?{u.query}" if u.query else ""), body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


def start_sum(url, n=10):
    """Rank 0 of a 2-rank `sum` domain, waiting for rank 1's partial sum."""
    b = {
        "domain": secrets.token_hex(6),
        "rank": 0,
        "endpoints": [url, url],
        "token": secrets.token_hex(8),
        "service": "sum",
        "params": {"n": n},
    }
    status, body = call(
        "POST",
        f"{url}/run",
        json.dumps(b),
        {"content-type": "application/json", "authorization": f"Bearer {client_key()}"},
    )
    assert status == 201, body
    return b["domain"], b["token"]


def store_headers(token, **extra):
    return {
        "authorization": f"Bearer {token}",
        "mpiws-source": "1",
        "mpiws-tag": "1",
        "content-type": "application/octet-stream",
        **extra,
    }


def still_serves(proc, url, domain, token):
    """The process lives, answers, and the domain completes with a good message."""
    assert proc.poll() is None, f"the endpoint died (exit {proc.returncode})"
    assert call("GET", f"{url}/")[0] == 200
    status, body = call("POST", f"{url}/domains/{domain}/ranks/0/messages", pickle.dumps(30), store_headers(token))
    assert status == 204, body
    status, s = call("GET", f"{url}/domains/{domain}/ranks/0?wait=20", headers={"authorization": f"Bearer {token}"})
    assert status == 200 and s["state"] == "done", s
    assert s["result"] == {"total": sum(range(1, 11, 2)) + 30, "ranks": 2}


def test_a_store_whose_parts_overflow_is_refused_and_the_endpoint_survives(endpoint):
    proc, url = endpoint
    domain, token = start_sum(url)
    payload = b"x"
    parts = ",".join(map(str, wrapping_table(len(payload))))
    status, body = call(
        "POST", f"{url}/domains/{domain}/ranks/0/messages", payload, store_headers(token, **{"mpiws-parts": parts})
    )
    assert status == 400, body
    assert body["error"]["name"] == "MPI_ERR_ARG" and "mpiws-parts" in body["error"]["message"]
    time.sleep(0.5)  # the old code aborted when rank 0 split the payload
    still_serves(proc, url, domain, token)


def upgrade(url, domain, token):
    """An upgraded stream to rank 0 from rank 1 (docs/protocol.md, "A stream client in Python")."""
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=20)
    s.sendall(
        f"POST /domains/{domain}/ranks/0/stream HTTP/1.1\r\nHost: {u.netloc}\r\n"
        f"Authorization: Bearer {token}\r\nmpiws-source: 1\r\nConnection: upgrade\r\n"
        "Upgrade: mpiws-stream/1\r\nContent-Length: 0\r\n\r\n".encode()
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = s.recv(1)
        assert byte, head
        head += byte
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            break
        data += more
    return data


def test_a_stream_frame_whose_parts_overflow_is_refused_and_the_endpoint_survives(endpoint):
    proc, url = endpoint
    domain, token = start_sum(url)
    s = upgrade(url, domain, token)
    payload = b"x"
    table = wrapping_table(len(payload))
    #                kind flags 0 tag context seq length  nparts nforward
    head = struct.pack("<BBHiQQQII", 1, 2 | 4, 0, 1, 1, 0, len(payload), len(table), 0)
    s.sendall(head + struct.pack(f"<{len(table)}Q", *table) + payload)
    ack = recv_exactly(s, 24)
    assert len(ack) == 24, ack
    kind, _, _, _, cls, seq, tlen, _ = struct.unpack("<BBBBiQII", ack)
    text = recv_exactly(s, tlen).decode()
    assert (kind, cls, seq) == (4, 12, 0) and "part lengths" in text, (kind, cls, seq, text)
    assert recv_exactly(s, 1) == b"", "the stream is closed after a refused frame"
    s.close()
    time.sleep(0.5)
    still_serves(proc, url, domain, token)
