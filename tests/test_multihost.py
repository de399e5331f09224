"""Ranks on separate network hosts.

The test builds a small network of Linux network namespaces: a "switch"
namespace holding a bridge, and three "host" namespaces, each joined to the
bridge by a veth pair and given an address 10.213.0.N/24 that exists only
inside the namespaces. A real endpoint (``mpiws serve --host 10.213.0.N``)
runs in each host namespace, and ``mpiws run --endpoints ...`` started in the
first one runs a domain with one rank per host; the ranks exchange messages
directly over the veth links, inside TLS (a CA and a certificate the test
makes with trustme), and only holders of the endpoints' key may start
anything. Needs root (skipped otherwise); everything is removed afterwards,
also when a test fails.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

NHOSTS = 3
PORT = 8470
SUBNET = "10.213.0"
PAYLOAD = 256 * 1024  # int32 values each rank sends round the ring (1 MiB)
TAG = f"mw{os.getpid()}"  # unique per run; short enough for interface names (<= 15 chars)
SWITCH = f"mpiws-{os.getpid()}-sw"
HOSTS = [f"mpiws-{os.getpid()}-h{i}" for i in range(1, NHOSTS + 1)]
ADDRS = [f"{SUBNET}.{i}" for i in range(1, NHOSTS + 1)]
VETH_HOST = [f"{TAG}h{i}" for i in range(1, NHOSTS + 1)]  # the end inside host i
VETH_SW = [f"{TAG}s{i}" for i in range(1, NHOSTS + 1)]  # the end on the bridge
BRIDGE = f"{TAG}br"
CMD_TIMEOUT = 20

# GET a URL with a timeout, trusting MPIWS_CA_FILE and sending MPIWS_KEY if set;
# prints the body and exits 0, or prints the error and exits 1.
GET = """
import os, ssl, sys, urllib.request
try:
    ctx = ssl.create_default_context(cafile=os.environ.get("MPIWS_CA_FILE"))
    key = os.environ.get("MPIWS_KEY")
    req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + key} if key else {})
    with urllib.request.urlopen(req, timeout=float(sys.argv[2]), context=ctx) as r:
        print(r.status, r.read().decode())
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(1)
"""


def _mpiws():
    exe = Path(sys.executable).parent / "mpiws"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mpiws"]


def sh(*args, check=True, timeout=CMD_TIMEOUT):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def in_ns(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def http_get(url, ns=None, timeout=3.0):
    """GET ``url`` from namespace ``ns`` (None: this namespace); returns (ok, output)."""
    cmd = [sys.executable, "-c", GET, url, str(timeout)]
    p = in_ns(ns, *cmd, check=False) if ns else sh(*cmd, check=False)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def describe(url, ns=None, timeout=3.0):
    """The endpoint description (``GET /``) of the mpiws endpoint at ``url`` seen
    from ``ns``, or None when no mpiws endpoint answers there."""
    ok, out = http_get(url + "/", ns=ns, timeout=timeout)
    if not ok or not out.startswith("200 "):
        return None
    try:
        d = json.loads(out[4:])
    except ValueError:
        return None
    return d if isinstance(d, dict) and "mpiws" in d else None


def link_bytes(ns, dev):
    out = in_ns(ns, "cat", f"/sys/class/net/{dev}/statistics/tx_bytes", f"/sys/class/net/{dev}/statistics/rx_bytes").stdout
    tx, rx = (int(v) for v in out.split())
    return tx, rx


class Net:
    """The namespaces and the endpoint servers started in them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.servers = []  # (name, Popen, stdout path, stderr path)

    def serve(self, ns, *args, name=None):
        """Start ``mpiws serve ARGS`` in ``ns``; returns the URL it reports."""
        name = name or f"{ns}-{len(self.servers)}"
        out, err = self.tmp / f"{name}.out", self.tmp / f"{name}.err"
        with open(out, "w") as o, open(err, "w") as e:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, *_mpiws(), "serve", *args],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1"),
            )
        self.servers.append((name, p, out, err))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = out.read_text()
            if "serving" in line:
                return line.split("\n", 1)[0].rsplit(" ", 1)[1].strip()
            if p.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"server {name} did not start (exit {p.poll()})\n{self.logs()}")

    def logs(self):
        parts = []
        for name, p, out, err in self.servers:
            parts.append(f"--- server {name} (pid {p.pid}, exit {p.poll()})\nstdout:\n{out.read_text()}stderr:\n{err.read_text()}")
        return "\n".join(parts)

    def stop_servers(self):
        for _, p, _, _ in self.servers:
            if p.poll() is None:
                p.terminate()
        for _, p, _, _ in self.servers:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def _teardown(net):
    try:
        if net is not None:
            net.stop_servers()
    finally:
        for ns in [*HOSTS, SWITCH]:
            sh("ip", "netns", "del", ns, check=False)
        for dev in [*VETH_HOST, *VETH_SW, BRIDGE]:  # only if a move into a namespace failed
            if Path(f"/sys/class/net/{dev}").exists():
                sh("ip", "link", "del", dev, check=False)


def _build():
    sh("ip", "netns", "add", SWITCH)
    sh("ip", "-n", SWITCH, "link", "set", "lo", "up")
    sh("ip", "-n", SWITCH, "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "-n", SWITCH, "link", "set", BRIDGE, "up")
    for ns, addr, vh, vs in zip(HOSTS, ADDRS, VETH_HOST, VETH_SW):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", vh, "netns", ns, "type", "veth", "peer", "name", vs, "netns", SWITCH)
        sh("ip", "-n", SWITCH, "link", "set", vs, "master", BRIDGE)
        sh("ip", "-n", SWITCH, "link", "set", vs, "up")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", vh)
        sh("ip", "-n", ns, "link", "set", vh, "up")


@pytest.fixture(scope="module")
def net(request, tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("network namespaces need Linux")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is missing")
    holder = {"net": None}
    request.addfinalizer(lambda: _teardown(holder["net"]))  # registered first: runs even if setup fails
    p = sh("ip", "netns", "add", SWITCH, check=False)
    if p.returncode != 0:
        pytest.skip(f"`ip netns add` is not permitted here: {p.stderr.strip()}")
    sh("ip", "netns", "del", SWITCH)
    try:
        _build()
    except RuntimeError as e:
        pytest.skip(f"cannot build the namespace network (veth/bridge): {e}")
    n = holder["net"] = Net(tmp_path_factory.mktemp("multihost"))
    return n


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A CA and one certificate for the hosts' addresses; clients and
    endpoints (which are clients of each other) trust the CA, and send the
    key the endpoints share (the session's key file, see conftest)."""
    trustme = pytest.importorskip("trustme")
    d = tmp_path_factory.mktemp("multihost-tls")
    ca = trustme.CA()
    cert = ca.issue_cert(*ADDRS)
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert.private_key_pem.write_to_path(str(d / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(d / "cert.pem"))
    saved = {k: os.environ.get(k) for k in ("MPIWS_CA_FILE", "MPIWS_KEY")}
    os.environ["MPIWS_CA_FILE"] = str(d / "ca.pem")
    from mpiws.keys import server_keys

    os.environ["MPIWS_KEY"] = server_keys()[0].split()[0]
    yield d
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def endpoints(net, tls):
    """One endpoint per host namespace, bound to that host's address, serving https."""
    urls = []
    for ns, addr in zip(HOSTS, ADDRS):
        url = net.serve(ns, "--host", addr, "--tls-cert", str(tls / "cert.pem"), "--tls-key", str(tls / "key.pem"),
                        "--port", str(PORT), "--service", "multihost=tests.services:multihost")
        assert url == f"https://{addr}:{PORT}", url
        urls.append(url)
    for url in urls:  # each answers GET / from the first host, across the bridge
        deadline, d = time.monotonic() + 30, None
        while d is None and time.monotonic() < deadline:
            d = describe(url, ns=HOSTS[0])
            if d is None:
                time.sleep(0.2)
        assert d is not None, f"{url} does not answer GET / from {HOSTS[0]}: {http_get(url + '/', HOSTS[0])}\n{net.logs()}"
        assert d["url"] == url and d["services"] == ["multihost"], d
    return urls


def test_ranks_on_separate_hosts_exchange_directly(net, endpoints):
    before = [link_bytes(ns, dev) for ns, dev in zip(HOSTS, VETH_HOST)]
    t = time.monotonic()
    p = in_ns(HOSTS[0], *_mpiws(), "run", "--endpoints", ",".join(endpoints), "--service", "multihost",
              "--params", json.dumps({"payload": PAYLOAD}), check=False, timeout=120)
    elapsed = time.monotonic() - t
    info = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{net.logs()}"
    assert p.returncode == 0, info
    results = {}
    for line in p.stdout.splitlines():
        if line.startswith("rank "):
            rank, body = line[5:].split(": ", 1)
            results[int(rank)] = json.loads(body)
    assert sorted(results) == list(range(NHOSTS)), info
    after = [link_bytes(ns, dev) for ns, dev in zip(HOSTS, VETH_HOST)]

    # every rank ran on its own host: its own endpoint, its own network namespace
    me = [results[r]["me"] for r in range(NHOSTS)]
    assert [m["rank"] for m in me] == list(range(NHOSTS))
    assert [m["url"] for m in me] == endpoints
    netns = [m["netns"] for m in me]
    assert len(set(netns)) == NHOSTS, netns
    assert os.readlink("/proc/self/ns/net") not in netns
    for ns, m in zip(HOSTS, me):  # the namespace a rank reports is that host's namespace
        assert in_ns(ns, "readlink", "/proc/self/ns/net").stdout.strip() == m["netns"]

    for r in range(NHOSTS):
        left = (r - 1) % NHOSTS
        got = results[r]
        # ring of objects: the left neighbour's identity, sent from its host
        assert got["ring_obj"] == me[left], (r, got["ring_obj"])
        # ring of buffers: PAYLOAD int32 values, all left + 1, from the left neighbour
        assert got["ring_buf"] == {"count": PAYLOAD, "source": left, "values": [left + 1], "sum": PAYLOAD * (left + 1)}
        # sendrecv with every other rank
        assert sorted(got["pairs"]) == sorted(str(s) for s in range(NHOSTS) if s != r)
        for s, msg in got["pairs"].items():
            s = int(s)
            assert msg == {"from": s, "to": r, "netns": netns[s], "url": endpoints[s]}, (r, s, msg)

    # the data went over each host's veth link: every host sent and received its buffer (4 bytes per value)
    for ns, (tx0, rx0), (tx1, rx1) in zip(HOSTS, before, after):
        assert tx1 - tx0 >= 4 * PAYLOAD, (ns, tx1 - tx0)
        assert rx1 - rx0 >= 4 * PAYLOAD, (ns, rx1 - rx0)
    print(f"multihost domain of {NHOSTS} ranks ran in {elapsed:.2f}s")


def test_a_loopback_endpoint_is_not_reachable_from_another_host(net, endpoints):
    url = net.serve(HOSTS[0], "--service", "multihost=tests.services:multihost", name="loopback")
    assert url.startswith("http://127.0.0.1:"), url
    port = url.rsplit(":", 1)[1]
    d = describe(url, ns=HOSTS[0])  # served on its own host's loopback
    assert d is not None and d["url"] == url, f"{http_get(url + '/', HOSTS[0])}\n{net.logs()}"
    ok, out = http_get(f"http://{ADDRS[0]}:{port}/", ns=HOSTS[0])  # not on the host's network address ...
    assert not ok and "refused" in out, out
    ok, out = http_get(f"http://{ADDRS[0]}:{port}/", ns=HOSTS[1])  # ... so not from another host
    assert not ok and "refused" in out, out
    ok, out = http_get(url + "/", ns=HOSTS[1])  # another host's loopback is its own
    assert not ok and "refused" in out, out
    # while the same host's endpoint bound to its network address does answer the other host
    d = describe(f"https://{ADDRS[0]}:{PORT}", ns=HOSTS[1])
    assert d is not None and d["url"] == f"https://{ADDRS[0]}:{PORT}", net.logs()


def test_the_hosts_are_unreachable_from_the_root_namespace(net, endpoints):
    # the addresses exist only inside the namespaces: none in the root namespace, no route over our links
    assert SUBNET + "." not in sh("ip", "-o", "addr").stdout
    for addr in ADDRS:
        route = sh("ip", "route", "get", addr).stdout
        assert not any(dev in route for dev in [*VETH_HOST, *VETH_SW, BRIDGE]), route
    # no mpiws endpoint answers there from the root namespace (whatever the root
    # namespace's own network does with the address: refuse, time out, or answer as something else)
    domains = [len(describe(url, ns=HOSTS[0])["domains"]) for url in endpoints]
    for url in endpoints:
        assert describe(url, timeout=2.0) is None, f"{url} answered from the root namespace"
    p = sh(*_mpiws(), "run", "--endpoints", ",".join(endpoints), "--service", "multihost", "--params",
           json.dumps({"payload": 1}), check=False, timeout=60)
    assert p.returncode != 0 and "rank " not in p.stdout, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert p.stderr.startswith("mpiws run:"), p.stderr
    # and nothing reached the endpoints: they still hold the same domains
    assert [len(describe(url, ns=HOSTS[0])["domains"]) for url in endpoints] == domains
