"""The WAN-emulation harness (benchmarks/wan/toxiproxy.py) does what it says:
latency per direction, intact data, a rate limit, live changes, cut links,
no server left behind.  Behaviour only, with generous bounds: no speed
targets.  Needs toxiproxy-server, built with `go` on first use (skipped if
there is no `go` and no binary)."""

import hashlib
import importlib.util
import os
import shutil
import socket
import statistics
import threading
import time
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "wan" / "toxiproxy.py"
_spec = importlib.util.spec_from_file_location("mpiws_wan_toxiproxy", _PATH)
wan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wan)


@pytest.fixture(scope="module")
def binary():
    try:
        return wan.ensure_installed()
    except wan.ToxiproxyError as e:
        # Only a missing Go toolchain is a reason to skip; a failed build is a failure.
        if shutil.which("go") is None:
            pytest.skip(str(e))
        raise


@pytest.fixture(scope="module")
def tp(binary):
    with wan.Toxiproxy(binary) as tp:
        yield tp


class EchoServer:
    """Loopback TCP server: echoes every byte back, and keeps a SHA-256 of
    what each connection received (to check the upstream direction alone)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.digests = []  # one per connection, when it ends
        self.cv = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        h = hashlib.sha256()
        with conn:
            try:
                while True:
                    data = conn.recv(1 << 16)
                    if not data:
                        break
                    h.update(data)
                    conn.sendall(data)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # cut links reset connections
        with self.cv:
            self.digests.append(h.hexdigest())
            self.cv.notify_all()

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def echo():
    s = EchoServer()
    yield s
    s.close()


def connect(addr, timeout=30):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise ConnectionError(f"EOF after {len(buf)} of {n} bytes")
        buf += part
    return bytes(buf)


def rtts(s, n):
    """n round trips of 8 bytes on connection s, in seconds."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(b"12345678")
        assert recv_exact(s, 8) == b"12345678"
        out.append(time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------- pure parts


def test_mbit_to_kbps_uses_1000_byte_kb():
    assert wan.mbit_to_kbps(1) == 125
    assert wan.mbit_to_kbps(100) == 12500
    assert wan.mbit_to_kbps(1000) == 125000
    assert wan.mbit_to_kbps(0.001) == 1  # never 0: that hangs the toxic
    with pytest.raises(ValueError):
        wan.mbit_to_kbps(0)


def test_url_through():
    listen = "127.0.0.1:40001"
    assert wan.url_through("http://127.0.0.1:8001", listen) == "http://127.0.0.1:40001"
    assert wan.url_through("https://127.0.0.1:8443/a/b?x=1", listen) == "https://127.0.0.1:40001/a/b?x=1"
    assert wan.url_through("http://u:p@localhost:8001/", listen) == "http://u:p@127.0.0.1:40001/"
    assert wan.url_through("https://localhost:8443/", listen, keep_host=True) == "https://localhost:40001/"
    with pytest.raises(ValueError):
        wan.url_through("ftp://127.0.0.1:21", listen)


def test_bad_latency_is_refused():
    with pytest.raises(ValueError):
        wan._toxics(0.5, 0, None)  # toxiproxy has whole milliseconds only
    with pytest.raises(ValueError):
        wan._toxics(-1, 0, None)


# ------------------------------------------------------------ through a link


def test_latency_each_way(tp, echo):
    listen = tp.link(echo.addr, latency_ms=20)
    with connect(listen) as s:
        times = rtts(s, 6)
    # 20 ms one way in each direction: no round trip can be shorter than 40 ms.
    assert min(times) >= 0.040, times
    assert statistics.median(times) < 0.040 + 0.5, times  # and it is not stuck
    with connect(echo.addr) as s:  # the server itself is fast
        assert statistics.median(rtts(s, 6)) < 0.020


def test_data_intact_both_directions(tp, echo):
    listen = tp.link(echo.addr, latency_ms=5, jitter_ms=3, rate_mbit=200)
    payload = os.urandom(3 << 20)
    got = bytearray()
    with connect(listen) as s:
        # Read while sending: the echo comes back as we send.  Read a known
        # length rather than to EOF: Toxiproxy has no TCP half-close (a
        # shutdown(SHUT_WR) makes it close both ways, losing data in flight).
        def reader():
            got.extend(recv_exact(s, len(payload)))

        t = threading.Thread(target=reader)
        t.start()
        for i in range(0, len(payload), 100_000):  # uneven pieces
            s.sendall(payload[i : i + 100_000])
        t.join(30)
        assert not t.is_alive()
    # upstream: what the server received (its digest, when the connection
    # ends); downstream: what came back.
    digest = hashlib.sha256(payload).hexdigest()
    with echo.cv:
        assert echo.cv.wait_for(lambda: digest in echo.digests, 10)
    assert bytes(got) == payload


def test_rate_limit(tp, echo):
    listen = tp.link(echo.addr, rate_mbit=10)
    size = 1 << 20  # 0.84 s at 10 Mbit/s, per direction
    with connect(listen) as s:
        t0 = time.perf_counter()
        s.sendall(os.urandom(size))
        recv_exact(s, size)
        elapsed = time.perf_counter() - t0
    assert 0.6 < elapsed < 10, elapsed


def test_set_link_changes_a_live_connection(tp, echo):
    listen = tp.link(echo.addr, latency_ms=20, name="live")
    with connect(listen) as s:
        assert min(rtts(s, 3)) >= 0.040
        tp.set_link("live", latency_ms=0)  # toxics removed
        assert statistics.median(rtts(s, 5)) < 0.020
        tp.set_link(listen, latency_ms=30, rate_mbit=100)  # added again; by listen address
        assert min(rtts(s, 3)) >= 0.060
        tp.set_link("live", latency_ms=10, rate_mbit=100)  # updated in place
        times = rtts(s, 3)
        assert 0.020 <= min(times) and statistics.median(times) < 0.060 - 0.005
    # Per stream, latency comes before bandwidth.
    order = [(t["stream"], t["type"]) for t in tp.toxics("live")]
    for stream in ("upstream", "downstream"):
        assert [k for st, k in order if st == stream] == ["latency", "bandwidth"]


def test_cut_link_fails_the_connection(tp, echo):
    listen = tp.link(echo.addr, latency_ms=5)
    s = connect(listen, timeout=5)
    assert rtts(s, 1)
    tp.cut(listen)
    # The open connection fails: EOF or a reset, at the latest on the next send/recv.
    with pytest.raises((ConnectionError, OSError)):
        s.sendall(b"12345678")
        recv_exact(s, 8)
    s.close()
    # New connections are refused.
    with pytest.raises(ConnectionRefusedError):
        connect(listen, timeout=5).close()
    tp.restore(listen)
    with connect(listen, timeout=5) as s:
        assert rtts(s, 1)


def test_server_gone_after_exit(binary, echo):
    with wan.Toxiproxy(binary) as tp:
        pid = tp.pid
        api_port = int(tp.api.rsplit(":", 1)[1])
        listen = tp.link(echo.addr, latency_ms=1)
        s = connect(listen, timeout=5)
        assert rtts(s, 1)
    # The process was reaped, not left as a zombie or orphan.
    assert not os.path.exists(f"/proc/{pid}")
    assert tp.pid is None
    # Its open connection is closed, its link and API ports no longer listen.
    with pytest.raises((ConnectionError, OSError)):
        s.sendall(b"12345678")
        recv_exact(s, 8)
    s.close()
    for port in (api_port, int(listen.rsplit(":", 1)[1])):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    tp.stop()  # idempotent
