"""A domain across three machines behind three different firewalls.

Four namespace hosts (``netns.Network``), each with its own nftables rules:

- **A**, a cloud VM: inbound only to its https ports. Its endpoint also
  relays (``mpiws serve --relay``);
- **B**, a university server: inbound only to its ports, outbound only
  through the campus proxy (tinyproxy on host P, ``HTTPS_PROXY``);
- **C**, a laptop behind NAT: nothing inbound at all. Its endpoint binds
  loopback and is reached through A's relay (``mpiws serve --via-relay``):
  it keeps connections open to A, over which A passes requests for it;
- **P**, the proxy.

Peers address C at the relay's URL for it; nobody is told more about the
network. Tested, as docs/deploy.md describes it step by step:

- the firewalls drop what they should (packets counted);
- a domain over A, B and C, https everywhere, started from the laptop, runs
  point-to-point (objects, buffers, every pair, a synchronous send) and
  collectives (``services.multihost``), each rank on its own host;
- the MolDyn example, its ranks started by hand with the rendezvous (rank 0
  on A also relays, over http), reaches the validated energy.
"""

import json
import os
import subprocess
import time

import pytest

from netns import certificates, describe, http_get, in_ns, install_packages, mpiws_cmd, network, rank_results
from services import check_multihost
from test_apps_moldyn import REF_A, result_of

from conftest import ROOT

PORTS = (8443, 8444, 8445)  # what A and B let in
PORT, RENDEZVOUS_PORT, RANK_PORT = PORTS
PROBE_PORT = 8472
PROXY_PORT = 3128
PAYLOAD = 64 * 1024  # int32 values each rank sends round the ring


def _firewall(net, ns, inbound_ports, egress_only_to=None):
    """nftables rules for host ``ns``: inbound, only what it opened and
    ``inbound_ports``; outbound, everything, or only ``egress_only_to``
    (addr, port) and answers. Dropped packets are counted per direction."""
    allow_in = f"tcp dport {{ {', '.join(map(str, inbound_ports))} }} accept" if inbound_ports else ""
    output = ""
    if egress_only_to:
        output = f"""
    chain output {{
        type filter hook output priority 0; policy accept;
        oif "lo" accept
        ct state established,related accept
        ip daddr {egress_only_to[0]} tcp dport {egress_only_to[1]} accept
        counter drop comment "outbound"
    }}"""
    rules = net.tmp / f"{ns}.nft"
    rules.write_text(f"""
table inet mpiws_fw {{
    chain input {{
        type filter hook input priority 0; policy accept;
        iif "lo" accept
        ct state established,related accept
        {allow_in}
        counter drop comment "inbound"
    }}{output}
}}
""")
    in_ns(ns, "nft", "-f", str(rules))


@pytest.fixture(scope="module")
def net(request, tmp_path_factory):
    install_packages(nft="nftables", tinyproxy="tinyproxy")
    n = network(request, tmp_path_factory, "fw", 4, "10.216.0")
    n.a, n.b, n.c, n.p = n.hosts
    n.addr = dict(zip(n.hosts, n.addrs))
    _firewall(n, n.a, PORTS)
    _firewall(n, n.b, PORTS, egress_only_to=(n.addr[n.p], PROXY_PORT))
    _firewall(n, n.c, ())
    n.tinyproxy(n.p, n.addr[n.p], PROXY_PORT)
    proxy = f"http://{n.addr[n.p]}:{PROXY_PORT}"
    n.campus = {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy}  # B's environment
    return n


def _dropped(net, ns, direction="inbound"):
    """Packets host ``ns``'s firewall dropped so far, in ``direction``."""
    rules = json.loads(in_ns(ns, "nft", "-j", "list", "table", "inet", "mpiws_fw").stdout)
    counters = [
        r["rule"]["expr"][0]["counter"]["packets"]
        for r in rules["nftables"]
        if "rule" in r and r["rule"].get("comment") == direction
    ]
    assert len(counters) == 1, rules
    return counters[0]


def _connects(ns, addr, port):
    return in_ns(ns, "timeout", "3", "bash", "-c", f"exec 3<>/dev/tcp/{addr}/{port}", check=False).returncode == 0


def test_the_firewalls_drop_what_they_should(net):
    for ns in (net.a, net.b, net.c):
        net.start(ns, ["python3", "-m", "http.server", "--bind", net.addr[ns], str(PROBE_PORT)], f"probe-{ns}")
        net.start(ns, ["python3", "-m", "http.server", "--bind", net.addr[ns], str(PORT)], f"open-{ns}")
    for ns in (net.a, net.b, net.c):
        net.wait_port(ns, net.addr[ns], PROBE_PORT, "a probe")  # up: its own host reaches it
    before = {ns: _dropped(net, ns) for ns in (net.a, net.b, net.c)}
    for ns in (net.a, net.b, net.c):  # nobody gets in on another port ...
        assert not _connects(net.p, net.addr[ns], PROBE_PORT), ns
        assert _dropped(net, ns) > before[ns]
    assert _connects(net.p, net.addr[net.a], PORT) and _connects(
        net.p, net.addr[net.b], PORT
    )  # ... A and B let theirs in
    assert not _connects(net.p, net.addr[net.c], PORT)  # C none
    out = _dropped(net, net.b, "outbound")
    assert not _connects(net.b, net.addr[net.a], PORT)  # B reaches nothing directly ...
    assert _dropped(net, net.b, "outbound") > out
    assert _connects(net.b, net.addr[net.p], PROXY_PORT)  # ... but the proxy
    assert _connects(net.c, net.addr[net.a], PORT)  # C goes out freely
    for ns in (net.a, net.b, net.c):
        net.stop(f"probe-{ns}")
        net.stop(f"open-{ns}")


@pytest.fixture(scope="module")
def tls(net, tmp_path_factory):
    """A CA and a certificate for the open hosts; everyone trusts the CA and
    sends the key the endpoints share (the session's key file, see conftest)."""
    from mpiws.keys import server_keys

    with certificates(
        tmp_path_factory.mktemp("firewalled-tls"),
        [net.addr[net.a], net.addr[net.b]],
        MPIWS_KEY=server_keys()[0].split()[0],
    ) as d:
        yield d


@pytest.fixture(scope="module")
def endpoints(net, tls):
    service = ("--service", "multihost=tests.services:multihost")
    cert = ("--tls-cert", str(tls / "cert.pem"), "--tls-key", str(tls / "key.pem"), "--port", str(PORT))
    relay = net.serve(net.a, "--host", net.addr[net.a], *cert, "--relay", *service, name="A")
    campus = net.serve(net.b, "--host", net.addr[net.b], *cert, *service, name="B", env=dict(os.environ, **net.campus))
    laptop = net.serve(net.c, "--via-relay", f"{relay}/relay/laptop", *service, name="C")
    assert laptop.startswith(f"https://{net.addr[net.a]}:{PORT}/relay/laptop#sha256="), laptop  # pinned
    deadline, d = time.monotonic() + 30, None
    while d is None and time.monotonic() < deadline:  # it answers through the relay, from another host
        d = describe(laptop, ns=net.p)
        if d is None:
            time.sleep(0.2)
    assert d is not None, f"{laptop} does not answer: {http_get(laptop + '/', net.p)}\n{net.logs()}"
    assert d["url"] == laptop and d["services"] == ["multihost"], d
    return [relay, campus, laptop]


def test_a_domain_across_the_three_firewalls(net, endpoints):
    p = in_ns(
        net.c,
        *mpiws_cmd(),
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
    info = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{net.logs()}"
    assert p.returncode == 0, info
    results = rank_results(p.stdout)
    me = check_multihost(results, endpoints)
    assert all(results[r]["ring_buf"]["count"] == PAYLOAD for r in range(3)), info
    # each rank ran on its own host, behind that host's firewall
    for ns, m in zip((net.a, net.b, net.c), me):
        assert in_ns(ns, "readlink", "/proc/self/ns/net").stdout.strip() == m["netns"]
    # B's messages went out through the proxy, tunnelled (TLS end to end) to A, and to C at A's relay
    log = (net.shared / "tinyproxy.log").read_text()
    assert f"CONNECT {net.addr[net.a]}:{PORT} HTTP/1.1" in log, log[-3000:]


def test_moldyn_across_the_three_firewalls(net, endpoints):
    """Ranks started by hand: rank 0 on A serves the rendezvous and relays,
    rank 1 on B goes out through the proxy, rank 2 on C is reached through A."""
    from mpiws.keys import server_keys

    key = {"MPIWS_KEY": server_keys()[0].split()[0]}
    rendezvous = f"http://{net.addr[net.a]}:{RENDEZVOUS_PORT}"
    program = [str(ROOT / "examples" / "moldyn.py"), "--size", "A"]
    ranks = [
        (net.a, ["--host", net.addr[net.a], "--relay"], {}),
        (net.b, ["--host", net.addr[net.b], "--port", str(RANK_PORT)], net.campus),
        (net.c, ["--via-relay", f"{rendezvous}/relay/rank2"], {}),
    ]
    procs = []
    for rank, (ns, where, env) in enumerate(ranks):
        cmd = [*mpiws_cmd(), "run", "--rendezvous", rendezvous, "--size", "3", "--rank", str(rank), *where, *program]
        procs.append(net.start(ns, cmd, f"moldyn-{rank}", env=dict(os.environ, **key, **env)))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=300))
        except subprocess.TimeoutExpired:  # a hung rank fails the test, with the logs
            p.kill()
            codes.append(None)
    logs = net.logs()
    assert codes == [0, 0, 0], logs
    res = result_of((net.tmp / "moldyn-0.out").read_text())
    assert (res["ranks"], res["valid"]) == (3, True), res
    assert abs(res["ek"] - REF_A) < 1e-9, res
    assert res["interactions"] == 1253101, res
