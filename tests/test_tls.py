"""TLS: ``mpiws serve`` over https (certificates made here with trustme, or
self-signed by the endpoint), clients that verify it, and domains whose
ranks are partly https, partly http, with streams running inside TLS."""

import hashlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, assert_ok, mpiws_run

trustme = pytest.importorskip("trustme")

TESTS = Path(__file__).resolve().parent
MPIWS = [sys.executable, "-m", "mpiws"]
SERVICE = "mixed=tls_services:mixed"


def call(method, url, body=None, headers=None, ca=None, timeout=10.0):
    """One HTTP request (https verified against ``ca``): (status, parsed JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    context = ssl.create_default_context(cafile=ca) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA of the test's own and a certificate it issued for loopback: paths."""
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost", "::1")
    paths = {"ca": d / "ca.pem", "cert": d / "cert.pem", "key": d / "key.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    cert.private_key_pem.write_to_path(str(paths["key"]))
    with open(paths["cert"], "wb") as f:
        for blob in cert.cert_chain_pems:
            f.write(blob.bytes())
    return {k: str(v) for k, v in paths.items()}


class Served:
    """An ``mpiws serve`` process; ``lines`` is what it printed at start-up."""

    def __init__(self, *args, env=None, lines=1):
        e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), **(env or {}))
        self.proc = subprocess.Popen(
            [*MPIWS, "serve", "--service", SERVICE, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=TESTS,
            env=e,
        )
        self.lines = [self.proc.stdout.readline() for _ in range(lines)]
        if not self.lines[0].startswith("mpiws: serving"):
            self.stop()
            raise RuntimeError(f"mpiws serve did not start: {self.lines} {self.proc.stderr.read()}")
        self.url = self.lines[0].split(" at ")[-1].strip()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serve():
    started = []

    def _serve(*args, **kw):
        s = Served(*args, **kw)
        started.append(s)
        return s

    yield _serve
    for s in started:
        s.stop()


def mpiws(*args, env=None, timeout=60):
    e = {k: v for k, v in os.environ.items() if k != "MPIWS_CA_FILE"}  # trust only what the test gives
    e.update(env or {})
    return subprocess.run([*MPIWS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=e)


def run_domain(urls, ca=None, payload=4096, timeout=90):
    """``mpiws run --endpoints`` of the mixed service: each rank's result."""
    args = ["run", "--endpoints", ",".join(urls), "--service", "mixed", "--params", json.dumps({"payload": payload})]
    p = mpiws(*args, *(["--ca", ca] if ca else []), timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    results = {}
    for line in p.stdout.splitlines():
        rank, _, result = line.partition(": ")
        results[int(rank.split()[1])] = json.loads(result)
    assert sorted(results) == list(range(len(urls))), p.stdout
    return results


def test_endpoint_serves_https_to_a_client_trusting_its_ca(serve, pki):
    s = serve("--tls-cert", pki["cert"], "--tls-key", pki["key"], "--ca", pki["ca"])
    assert s.url.startswith("https://127.0.0.1:")
    status, body = call("GET", s.url + "/", ca=pki["ca"])
    assert status == 200 and body["url"] == s.url and body["services"] == ["mixed"]
    # The core's own client, told of the CA by --ca, runs a domain there.
    results = run_domain([s.url, s.url], ca=pki["ca"])
    assert results[0]["collectives"]["allgather"] == [0, 10]


def test_client_without_the_ca_refuses_clearly(serve, pki):
    s = serve("--tls-cert", pki["cert"], "--tls-key", pki["key"])
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        call("GET", s.url + "/")
    started = time.monotonic()
    p = mpiws("run", "--endpoints", s.url, "--service", "mixed", "--params", "{}", timeout=30)
    assert p.returncode != 0
    assert s.url in p.stderr and "certificate is not trusted" in p.stderr and "--ca" in p.stderr, p.stderr
    assert time.monotonic() - started < 15, "an untrusted certificate must fail at once, not be retried"


def test_cleartext_client_on_the_https_port_gets_an_answer(serve, pki):
    s = serve("--tls-cert", pki["cert"], "--tls-key", pki["key"])
    plain = s.url.replace("https://", "http://")
    status, body = call("GET", plain + "/")
    assert status == 400 and body["error"]["message"] == f"this endpoint serves https only: use {s.url}"
    started = time.monotonic()
    p = mpiws("run", "--endpoints", plain, "--service", "mixed", "--params", "{}", timeout=30)
    assert p.returncode != 0 and "serves https only" in p.stderr, p.stderr
    assert time.monotonic() - started < 15


def test_tls_client_on_a_cleartext_port_is_told(serve, pki):
    s = serve()
    tls_url = s.url.replace("http://", "https://")
    p = mpiws("run", "--endpoints", tls_url, "--service", "mixed", "--params", "{}", "--ca", pki["ca"], timeout=30)
    assert p.returncode != 0 and "TLS handshake failed" in p.stderr and tls_url in p.stderr, p.stderr


def test_stalled_connection_blocks_nobody_and_is_closed(serve, pki):
    s = serve("--tls-cert", pki["cert"], "--tls-key", pki["key"], "--tls-handshake-timeout", "1")
    port = int(s.url.rsplit(":", 1)[1])
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"\x16\x03\x01")  # the start of a TLS record, then nothing
    try:
        started = time.monotonic()
        status, _ = call("GET", s.url + "/", ca=pki["ca"], timeout=5)
        assert status == 200 and time.monotonic() - started < 2
        for sock in stalled + [half]:
            sock.settimeout(5)
            assert sock.recv(1) == b"", "the server closes a connection whose handshake does not come in time"
    finally:
        for sock in stalled + [half]:
            sock.close()


def test_self_signed_quick_start(serve, tmp_path):
    out = tmp_path / "cert.pem"
    s = serve("--tls-self-signed", "--tls-cert-out", str(out), lines=5)  # serving, key file, certificate (3)
    assert s.url.startswith("https://")
    text = "".join(s.lines)
    der = ssl.PEM_cert_to_DER_cert(out.read_text())
    fingerprint = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    assert f"SHA-256 fingerprint {fingerprint}" in text
    assert f"export MPIWS_CA_FILE={out}" in text
    status, body = call("GET", s.url + "/", ca=str(out))
    assert status == 200 and body["url"] == s.url
    # Valid for localhost too.
    status, _ = call("GET", s.url.replace("127.0.0.1", "localhost") + "/", ca=str(out))
    assert status == 200
    # The endpoint trusts its own certificate: its ranks reach each other.
    results = run_domain([s.url, s.url], ca=str(out))
    assert results[1]["collectives"]["allreduce"] == 1


@pytest.mark.parametrize("streams", ["1", "0"])
def test_mixed_domain_over_http_and_https(serve, pki, streams):
    # The network path: same-host rings would take the streams off TLS.
    env = {"MPIWS_STREAMS": streams, "MPIWS_NOLOCAL": "1"}
    # Every endpoint is a client of the https ones: it trusts their CA.
    tls, ca = ["--tls-cert", pki["cert"], "--tls-key", pki["key"]], ["--ca", pki["ca"]]
    servers = [serve(*tls, *ca, env=env), serve(*ca, env=env), serve(*tls, *ca, env=env), serve(*ca, env=env)]
    urls = [s.url for s in servers]
    assert [u.split(":")[0] for u in urls] == ["https", "http", "https", "http"]
    n, payload = len(urls), 64 * 1024
    results = run_domain(urls, ca=pki["ca"], payload=payload)
    for rank, r in results.items():
        left = (rank - 1) % n
        assert r["me"]["url"] == urls[rank]
        assert r["ring_obj"]["rank"] == left and r["ring_obj"]["url"] == urls[left]
        assert r["ring_buf"] == {"count": payload, "source": left, "values": [left + 1], "sum": payload * (left + 1)}
        assert sorted(r["pairs"]) == sorted(str(p) for p in range(n) if p != rank)
        c = r["collectives"]
        assert c["bcast"] == {"root": "hello"} and c["allreduce"] == sum(range(n))
        assert c["allgather"] == [10 * i for i in range(n)]
        assert c["alltoall"] == [[i, rank] for i in range(n)]
        assert c["Allreduce"] == [float(sum(range(1, n + 1)))] * 4
        # A TLS session a rank's own process holds is encrypted and decrypted
        # by the stream's threads: no pump, no local socket pair. Only the
        # streams into an https endpoint's instance process are handed over
        # pumped (the session stays in the endpoint): one local socket each.
        # (A stream still opening in the background under load may be
        # missing from the count: at least one, never more.)
        handed, u = (n - 1 if urls[rank].startswith("https:") and streams == "1" else 0), r["unix_sockets"]
        assert (0 < u <= handed) if handed else u == 0, [(k, v["unix_sockets"]) for k, v in results.items()]


RANKS_OVER_TLS = """
import os
import numpy as np
from mpiws import MPI


def unix_sockets():
    with open("/proc/self/net/unix") as f:
        inodes = {cols[6] for cols in (line.split() for line in list(f)[1:]) if len(cols) > 6}
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target[8:-1] in inodes:
            held.add(target)
    return len(held)


before = unix_sockets()
comm = MPI.COMM_WORLD
me, n = comm.rank, comm.size
right, left = (me + 1) % n, (me - 1) % n
# Around the ring at once, sizes from one TLS record to many (a session then
# holds plaintext a read did not take: the poller must still see it).
for size in (8, 40_000, 1 << 20, 5 << 20):
    buf = ((np.arange(size) + me) % 251).astype(np.uint8)
    got = np.empty_like(buf)
    comm.Sendrecv(buf, dest=right, recvbuf=got, source=left, timeout=60)
    assert (got == (np.arange(size) + left) % 251).all(), size
# A burst of small messages read by the progress thread, then received.
reqs = [comm.isend((me, i), dest=right, tag=i) for i in range(300)]
assert [comm.recv(source=left, tag=i) for i in range(300)] == [(left, i) for i in range(300)]
MPI.Request.Waitall(reqs)
comm.barrier()
c = comm._core
print("OK", unix_sockets() - before, c.endpoints[c.group[right]].split(":")[0], flush=True)
"""


def test_ranks_stream_inside_tls_sessions_their_own_threads_hold(pki, tmp_path):
    """``mpiws run`` ranks serving https: streams (network path) carry every
    size and a burst, in order, with no pump (no local socket pair)."""
    env = {"MPIWS_NOLOCAL": "1", "MPIWS_CA_FILE": pki["ca"], "MPIWS_TLS_CERT": pki["cert"], "MPIWS_TLS_KEY": pki["key"]}
    p = mpiws_run(3, RANKS_OVER_TLS, tmp_path, env=env, timeout=120)
    assert_ok(p, 3)
    assert p.stdout.count("] OK 0 https") == 3, p.stdout  # https peers, no local sockets: no pumps
