"""How accurate is Toxiproxy's WAN emulation on this machine?  Plain TCP, no mpiws.

    python benchmarks/wan/calibrate.py [--size MiB] [--quick]

For each configuration (one-way latency, rate), through a link of
benchmarks/wan/toxiproxy.py to a server in this process:

* RTT: 8-byte ping-pong over one persistent connection (TCP_NODELAY on
  both ends), median and 10th/90th percentiles of many round trips, beside
  the nominal 2 x one-way latency;
* bulk: 64 MiB one way (client -> server, the ``upstream`` stream) over one
  fresh connection: throughput from the first send() to the last byte
  received, beside the nominal time latency + size / rate.  "send done" is
  when the sender's sendall() returned: far earlier than the last byte when
  the proxy buffers the data (Toxiproxy's latency toxic holds up to 1024
  chunks per connection).

Reference rows: direct loopback, the proxy without toxics, latency or rate
alone (to see whether the two toxics interact), jitter, and two parallel
connections (is the rate per link or per connection?).  Whole run: about a
minute.
"""

import argparse
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toxiproxy import Toxiproxy, ensure_installed  # noqa: E402

MIB = 1 << 20
CHUNK = 1 * MIB  # sender's sendall() size and receiver's recv_into() size


# ----------------------------------------------------------- TCP servers


class Server:
    """A loopback TCP server: echoes 8-byte pings ("P" + 7 bytes) and sinks
    bulk data ("B" + 8-byte length), noting when the last byte arrived.
    One thread per connection; recv/send release the GIL."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.done = {}  # connection id -> perf_counter() of its last byte
        self.cv = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            kind = _recv_exact(conn, 1)
            if kind == b"P":
                conn.sendall(b"P" + _recv_exact(conn, 7))
                while True:
                    msg = _recv_exact(conn, 8, eof_ok=True)
                    if msg is None:
                        return
                    conn.sendall(msg)
            elif kind == b"B":
                cid = int.from_bytes(_recv_exact(conn, 4), "big")
                left = int.from_bytes(_recv_exact(conn, 8), "big")
                buf = bytearray(CHUNK)
                while left:
                    n = conn.recv_into(buf, min(left, CHUNK))
                    if not n:
                        raise ConnectionError("bulk: early EOF")
                    left -= n
                with self.cv:
                    self.done[cid] = time.perf_counter()
                    self.cv.notify_all()
                conn.sendall(b"k")

    def wait_done(self, cid, timeout=120):
        with self.cv:
            if not self.cv.wait_for(lambda: cid in self.done, timeout):
                raise TimeoutError(f"bulk {cid}: not all bytes arrived")
            return self.done.pop(cid)

    def close(self):
        self.sock.close()


def _recv_exact(conn, n, eof_ok=False):
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            if eof_ok and not data:
                return None
            raise ConnectionError("early EOF")
        data += part
    return data


def _connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ---------------------------------------------------------- measurements


def ping_pong(addr, budget_s, max_n=2000, min_n=15):
    """8-byte round trips over one connection: sorted RTTs in ms."""
    with _connect(addr) as s:
        s.sendall(b"P1234567")
        _recv_exact(s, 8)  # connection set up, first bytes through
        for _ in range(3):  # warm-up
            s.sendall(b"12345678")
            _recv_exact(s, 8)
        rtts = []
        end = time.perf_counter() + budget_s
        while len(rtts) < max_n and (len(rtts) < min_n or time.perf_counter() < end):
            t0 = time.perf_counter()
            s.sendall(b"12345678")
            _recv_exact(s, 8)
            rtts.append((time.perf_counter() - t0) * 1e3)
    return sorted(rtts)


_cids = iter(range(1, 1 << 30))


def bulk(server, addr, size, conns=1):
    """``size`` bytes one way, split over ``conns`` parallel connections.
    Returns (seconds to the last byte, seconds until every sendall returned)."""
    per = size // conns
    payload = memoryview(os.urandom(CHUNK))
    socks = []
    for _ in range(conns):
        cid = next(_cids)
        s = _connect(addr)
        s.sendall(b"B" + cid.to_bytes(4, "big") + per.to_bytes(8, "big"))
        socks.append((cid, s))
    sent = {}

    def send(cid, s):
        left = per
        while left:
            n = min(left, CHUNK)
            s.sendall(payload[:n])
            left -= n
        sent[cid] = time.perf_counter()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=send, args=cs) for cs in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last = max(server.wait_done(cid) for cid, _ in socks)
    for _, s in socks:
        _recv_exact(s, 1)  # the server's "k": it has everything
        s.close()
    return last - t0, max(sent.values()) - t0


def chain(tp, n, size, latency_ms, rate_mbit):
    """A broadcast's best case with plain TCP: ``size`` bytes passed down a
    chain of ``n`` nodes, each reached through a link of its own (as the
    suite's endpoints are), every node forwarding each chunk as soon as it
    has it (a pipeline: what a segmented broadcast does at best). Returns
    the seconds from the first send to the last byte at the chain's end."""
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(n - 1)]
    links = [tp.link("127.0.0.1:%d" % s.getsockname()[1], latency_ms=latency_ms, rate_mbit=rate_mbit) for s in socks]
    done = threading.Event()
    ended = {}
    errors = []

    def node(i):  # node i + 1 of the chain
        try:
            conn, _ = socks[i].accept()
            out = _connect(links[i + 1]) if i + 1 < len(links) else None
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            left = size
            while left:
                k = conn.recv_into(buf, min(left, CHUNK))
                if not k:
                    raise ConnectionError("chain: early EOF")
                if out is not None:
                    out.sendall(view[:k])
                left -= k
            ended[i] = time.perf_counter()
            if out is not None:
                out.close()
            conn.close()
        except OSError as e:
            errors.append(e)
        finally:
            if i == len(links) - 1 or errors:
                done.set()

    threads = [threading.Thread(target=node, args=(i,), daemon=True) for i in range(len(links))]
    for t in threads:
        t.start()
    payload = memoryview(os.urandom(CHUNK))
    try:
        with _connect(links[0]) as s:
            t0 = time.perf_counter()
            left = size
            while left:
                k = min(left, CHUNK)
                s.sendall(payload[:k])
                left -= k
            if not done.wait(600) or errors:
                raise RuntimeError("chain: %s" % (errors or "did not finish"))
        return ended[len(links) - 1] - t0
    finally:
        for link in links:
            tp.remove(link)
        for sk in socks:
            sk.close()


# ----------------------------------------------------------------- main

# (label, one-way latency ms, jitter ms, rate Mbit/s or None, via proxy, parallel connections)
CONFIGS = [
    ("direct loopback", 0, 0, None, False, 1),
    ("proxy, no toxics", 0, 0, None, True, 1),
    ("10 ms", 10, 0, None, True, 1),
    ("50 ms", 50, 0, None, True, 1),
    ("100 Mbit/s", 0, 0, 100, True, 1),
    ("1 Gbit/s", 0, 0, 1000, True, 1),
    ("10 ms, 100 Mbit/s", 10, 0, 100, True, 1),
    ("10 ms, 1 Gbit/s", 10, 0, 1000, True, 1),
    ("50 ms, 100 Mbit/s", 50, 0, 100, True, 1),
    ("50 ms, 1 Gbit/s", 50, 0, 1000, True, 1),
    ("50 ms +-10 jitter", 50, 10, None, True, 1),
    ("10 ms, 100 Mbit/s, 2 conns", 10, 0, 100, True, 2),
]
REQUIRED = {"10 ms, 100 Mbit/s", "10 ms, 1 Gbit/s", "50 ms, 100 Mbit/s", "50 ms, 1 Gbit/s"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=64, help="bulk size in MiB (default 64)")
    ap.add_argument("--quick", action="store_true", help="only the four required configurations")
    args = ap.parse_args()
    size = args.size * MIB

    ensure_installed()
    server = Server()
    rows = []
    started = time.perf_counter()
    with Toxiproxy() as tp:
        for label, lat, jit, rate, proxied, conns in CONFIGS:
            if args.quick and label not in REQUIRED:
                continue
            addr = tp.link(server.addr, latency_ms=lat, jitter_ms=jit, rate_mbit=rate) if proxied else server.addr
            rtts = ping_pong(addr, budget_s=1.5)
            t_last, t_sent = bulk(server, addr, size, conns)
            rows.append((label, lat, rate, rtts, t_last, t_sent, conns))
            print(
                f"  {label}: RTT median {statistics.median(rtts):.2f} ms, {size * 8 / t_last / 1e6:.0f} Mbit/s",
                file=sys.stderr,
                flush=True,
            )
    server.close()

    print(
        f"\nToxiproxy calibration: 8 B ping-pong RTT and {args.size} MiB one-way bulk, "
        f"{os.cpu_count()} CPUs, {time.perf_counter() - started:.0f} s\n"
    )
    print(
        "| link | RTT nominal ms | RTT median ms | p10 / p90 ms | n | rate nominal Mbit/s "
        "| throughput Mbit/s | % of nominal | time nominal s | last byte s | send done s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, lat, rate, rtts, t_last, t_sent, _conns in rows:
        p10 = rtts[len(rtts) // 10]
        p90 = rtts[len(rtts) * 9 // 10]
        mbit = size * 8 / t_last / 1e6
        if rate:
            # The rate is per connection (toxics are per connection): nominal
            # for one shared bottleneck is `rate`, Toxiproxy gives conns x rate.
            nominal_t = lat / 1e3 + size * 8 / (rate * 1e6)
            pct = f"{100 * mbit / rate:.0f}"
            nom_t, nom_r = f"{nominal_t:.2f}", f"{rate}"
        else:
            pct, nom_t, nom_r = "", "", "-"
        print(
            f"| {label} | {2 * lat} | {statistics.median(rtts):.2f} | {p10:.2f} / {p90:.2f} | {len(rtts)} "
            f"| {nom_r} | {mbit:.0f} | {pct} | {nom_t} | {t_last:.2f} | {t_sent:.2f} |"
        )


if __name__ == "__main__":
    main()
