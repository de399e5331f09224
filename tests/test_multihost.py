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
import time

import pytest

from services import check_multihost
from netns import certificates, describe, http_get, in_ns, link_bytes, network, rank_results, sh
from netns import mpiws_cmd as _mpiws

NHOSTS = 3
PORT = 8470
PAYLOAD = 256 * 1024  # int32 values each rank sends round the ring (1 MiB)


@pytest.fixture(scope="module")
def net(request, tmp_path_factory):
    return network(request, tmp_path_factory, "mh", NHOSTS, "10.213.0")


@pytest.fixture(scope="module")
def tls(net, tmp_path_factory):
    """A CA and one certificate for the hosts' addresses; clients and
    endpoints (which are clients of each other) trust the CA, and send the
    key the endpoints share (the session's key file, see conftest)."""
    from mpiws.keys import server_keys

    with certificates(tmp_path_factory.mktemp("multihost-tls"), net.addrs, MPIWS_KEY=server_keys()[0].split()[0]) as d:
        yield d


@pytest.fixture(scope="module")
def endpoints(net, tls):
    """One endpoint per host namespace, bound to that host's address, serving https."""
    urls = []
    for ns, addr in zip(net.hosts, net.addrs):
        url = net.serve(
            ns,
            "--host",
            addr,
            "--tls-cert",
            str(tls / "cert.pem"),
            "--tls-key",
            str(tls / "key.pem"),
            "--port",
            str(PORT),
            "--service",
            "multihost=tests.services:multihost",
        )
        assert url == f"https://{addr}:{PORT}", url
        urls.append(url)
    for url in urls:  # each answers GET / from the first host, across the bridge
        deadline, d = time.monotonic() + 30, None
        while d is None and time.monotonic() < deadline:
            d = describe(url, ns=net.hosts[0])
            if d is None:
                time.sleep(0.2)
        assert d is not None, (
            f"{url} does not answer GET / from {net.hosts[0]}: {http_get(url + '/', net.hosts[0])}\n{net.logs()}"
        )
        assert d["url"] == url and d["services"] == ["multihost"], d
    return urls


def test_ranks_on_separate_hosts_exchange_directly(net, endpoints):
    before = [link_bytes(ns, dev) for ns, dev in zip(net.hosts, net.veth_host)]
    t = time.monotonic()
    p = in_ns(
        net.hosts[0],
        *_mpiws(),
        "run",
        "--endpoints",
        ",".join(endpoints),
        "--service",
        "multihost",
        "--params",
        json.dumps({"payload": PAYLOAD}),
        check=False,
        timeout=120,
    )
    elapsed = time.monotonic() - t
    info = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{net.logs()}"
    assert p.returncode == 0, info
    results = rank_results(p.stdout)
    me = check_multihost(results, endpoints)
    after = [link_bytes(ns, dev) for ns, dev in zip(net.hosts, net.veth_host)]
    assert all(results[r]["ring_buf"]["count"] == PAYLOAD for r in range(NHOSTS)), info

    # every rank ran on its own host: its own endpoint, its own network namespace
    netns = [m["netns"] for m in me]
    assert len(set(netns)) == NHOSTS, netns
    assert os.readlink("/proc/self/ns/net") not in netns
    for ns, m in zip(net.hosts, me):  # the namespace a rank reports is that host's namespace
        assert in_ns(ns, "readlink", "/proc/self/ns/net").stdout.strip() == m["netns"]

    # the data went over each host's veth link: every host sent and received its buffer (4 bytes per value)
    for ns, (tx0, rx0), (tx1, rx1) in zip(net.hosts, before, after):
        assert tx1 - tx0 >= 4 * PAYLOAD, (ns, tx1 - tx0)
        assert rx1 - rx0 >= 4 * PAYLOAD, (ns, rx1 - rx0)
    print(f"multihost domain of {NHOSTS} ranks ran in {elapsed:.2f}s")


def test_a_loopback_endpoint_is_not_reachable_from_another_host(net, endpoints):
    url = net.serve(net.hosts[0], "--service", "multihost=tests.services:multihost", name="loopback")
    assert url.startswith("http://127.0.0.1:"), url
    port = url.rsplit(":", 1)[1]
    d = describe(url, ns=net.hosts[0])  # served on its own host's loopback
    assert d is not None and d["url"] == url, f"{http_get(url + '/', net.hosts[0])}\n{net.logs()}"
    ok, out = http_get(f"http://{net.addrs[0]}:{port}/", ns=net.hosts[0])  # not on the host's network address ...
    assert not ok and "refused" in out, out
    ok, out = http_get(f"http://{net.addrs[0]}:{port}/", ns=net.hosts[1])  # ... so not from another host
    assert not ok and "refused" in out, out
    ok, out = http_get(url + "/", ns=net.hosts[1])  # another host's loopback is its own
    assert not ok and "refused" in out, out
    # while the same host's endpoint bound to its network address does answer the other host
    d = describe(f"https://{net.addrs[0]}:{PORT}", ns=net.hosts[1])
    assert d is not None and d["url"] == f"https://{net.addrs[0]}:{PORT}", net.logs()


def test_the_hosts_are_unreachable_from_the_root_namespace(net, endpoints):
    # the addresses exist only inside the namespaces: none in the root namespace, no route over our links
    assert net.subnet + "." not in sh("ip", "-o", "addr").stdout
    for addr in net.addrs:
        route = sh("ip", "route", "get", addr).stdout
        assert not any(dev in route for dev in [*net.veth_host, *net.veth_sw, net.bridge]), route
    # no mpiws endpoint answers there from the root namespace (whatever the root
    # namespace's own network does with the address: refuse, time out, or answer as something else)
    domains = [len(describe(url, ns=net.hosts[0])["domains"]) for url in endpoints]
    for url in endpoints:
        assert describe(url, timeout=2.0) is None, f"{url} answered from the root namespace"
    p = sh(
        *_mpiws(),
        "run",
        "--endpoints",
        ",".join(endpoints),
        "--service",
        "multihost",
        "--params",
        json.dumps({"payload": 1}),
        check=False,
        timeout=60,
    )
    assert p.returncode != 0 and "rank " not in p.stdout, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert p.stderr.startswith("mpiws run:"), p.stderr
    # and nothing reached the endpoints: they still hold the same domains
    assert [len(describe(url, ns=net.hosts[0])["domains"]) for url in endpoints] == domains
