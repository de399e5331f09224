"""Ranks whose host reaches the network only through an HTTP proxy.

Four namespace hosts (``netns.Network``): three run endpoints, the fourth a
real proxy (tinyproxy or squid, from the OS packages, installed if missing).
Host 3's firewall (nftables) drops every outbound connection except to the
proxy: its rank, its endpoint's outbound stores and streams, and the client
(``mpiws run``) started on it reach the other hosts only through the proxy
that ``HTTP_PROXY``/``HTTPS_PROXY`` name. The domain then runs point-to-point
and collectives (``services.multihost``), and the proxy's own log shows the
traffic went through it:

- tinyproxy with credentials: streams tunnel with ``CONNECT``;
- squid as distributions ship it (``CONNECT`` only to TLS ports): plain http
  streams are refused a tunnel, and stores, forwarded in absolute form, carry
  the messages instead;
- squid with https endpoints: TLS end to end inside ``CONNECT``;
- a wrong proxy password is a clear error naming the proxy.
"""

import hashlib
import json
import os
import sys
import time

import pytest

from netns import certificates, describe, http_get, in_ns, install_packages, mpiws_cmd, network, rank_results
from services import check_multihost

PROXY_PORT = 3128
HTTP_PORT, HTTPS_PORT = 8470, 8471
USER, PASSWORD = "mpiws", "pr0xy-s3cret"


@pytest.fixture(scope="module")
def net(request, tmp_path_factory):
    install_packages(tinyproxy="tinyproxy", squid="squid", nft="nftables")
    n = network(request, tmp_path_factory, "px", 4, "10.214.0")
    n.gw = n.hosts[3]
    n.proxy_addr = n.addrs[3]
    # host 3 (index 2): nothing leaves it but to the proxy (and answers on connections others opened)
    rules = n.tmp / "egress.nft"
    rules.write_text(f"""
table inet mpiws_egress {{
    chain output {{
        type filter hook output priority 0; policy drop;
        oif "lo" accept
        ct state established,related accept
        ip daddr {n.proxy_addr} tcp dport {{ {PROXY_PORT}, {PROXY_PORT + 1} }} accept
    }}
}}
""")
    in_ns(n.hosts[2], "nft", "-f", str(rules))
    return n


@pytest.fixture(scope="module")
def tls(net, tmp_path_factory):
    with certificates(tmp_path_factory.mktemp("proxy-tls"), net.addrs[:3]) as d:
        yield d


@pytest.fixture(scope="module")
def tinyproxy(net):
    """tinyproxy on the gateway host, with Basic credentials, tunnelling to any port."""
    return net.tinyproxy(net.gw, net.proxy_addr, PROXY_PORT, credentials=(USER, PASSWORD))


@pytest.fixture(scope="module")
def squid(net):
    """squid on the gateway host, configured as shipped: CONNECT only to TLS
    ports (here the https endpoints' port), plain requests forwarded."""
    d = net.shared / "squid"
    d.mkdir()
    d.chmod(0o777)
    conf = d / "squid.conf"
    conf.write_text(f"""
http_port {net.proxy_addr}:{PROXY_PORT + 1}
acl SSL_ports port 443 {HTTPS_PORT}
acl CONNECT method CONNECT
http_access deny CONNECT !SSL_ports
acl hosts src {net.subnet}.0/24
http_access allow hosts
http_access deny all
cache deny all
access_log stdio:{d}/access.log
cache_log {d}/cache.log
pid_filename {d}/squid.pid
coredump_dir {d}
shutdown_lifetime 1 seconds
""")
    net.start(net.gw, ["squid", "-N", "-f", str(conf)], "squid")
    net.wait_port(net.gw, net.proxy_addr, PROXY_PORT + 1, "squid")
    return d / "access.log"


def _serve(net, i, scheme, env, tls=None):
    args = ["--host", net.addrs[i], "--service", "multihost=tests.services:multihost"]
    if scheme == "https":
        args += ["--port", str(HTTPS_PORT), "--tls-cert", str(tls / "cert.pem"), "--tls-key", str(tls / "key.pem")]
    else:
        args += ["--port", str(HTTP_PORT), "--insecure"]
    name = f"{scheme}-{i}-{len(net.procs)}"
    return net.serve(net.hosts[i], *args, name=name, env=env), name


def _domain(net, env, scheme, tls=None):
    """Endpoints on hosts 1-3 (host 3's with ``env``: its proxy settings), a
    domain over them started from host 3 (with ``env``), every rank's results
    checked; the endpoints are stopped afterwards."""
    served = [_serve(net, i, scheme, dict(os.environ), tls) for i in (0, 1)] + [
        _serve(net, 2, scheme, dict(os.environ, **env), tls)
    ]
    urls = [u for u, _ in served]
    try:
        for url in urls:
            deadline = time.monotonic() + 30
            while describe(url, ns=net.hosts[0]) is None:
                assert time.monotonic() < deadline, f"{url} does not answer from {net.hosts[0]}\n{net.logs()}"
                time.sleep(0.2)
        p = in_ns(
            net.hosts[2],
            *mpiws_cmd(),
            "run",
            "--endpoints",
            ",".join(urls),
            "--service",
            "multihost",
            "--params",
            json.dumps({"payload": 65536}),
            check=False,
            timeout=180,
            env=dict(os.environ, **env),
        )
        assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{net.logs()}"
        check_multihost(rank_results(p.stdout), urls)
    finally:
        for _, name in served:
            net.stop(name)


def _new_lines(log, run):
    """``run()``'s result, and what it added to the log file ``log``."""
    before = len(log.read_text()) if log.exists() else 0
    result = run()
    return result, log.read_text()[before:]


def _proxy_env(url, scheme="http"):
    return {f"{scheme.upper()}_PROXY": url, "NO_PROXY": ""}


def test_the_firewall_lets_host_3_reach_only_the_proxy(net, tinyproxy):
    url, name = _serve(net, 0, "http", dict(os.environ))
    try:
        assert describe(url, ns=net.hosts[1]) is not None, net.logs()  # other hosts reach host 1 directly
        ok, out = http_get(url + "/", ns=net.hosts[2], timeout=2.0)  # host 3 does not
        assert not ok and "timed out" in out, out
    finally:
        net.stop(name)


def test_a_domain_through_tinyproxy_with_credentials(net, tinyproxy):
    env = _proxy_env(f"http://{USER}:{PASSWORD}@{net.proxy_addr}:{PROXY_PORT}")
    _, log = _new_lines(tinyproxy, lambda: _domain(net, env, "http"))
    # host 3's streams to hosts 1 and 2 were tunnelled through the proxy
    for addr in net.addrs[:2]:
        assert "Request (file descriptor" in log and f"CONNECT {addr}:{HTTP_PORT} HTTP/1.1" in log, log[-3000:]


def test_a_domain_through_squid_that_tunnels_only_to_tls_ports(net, squid):
    env = _proxy_env(f"http://{net.proxy_addr}:{PROXY_PORT + 1}")
    _, log = _new_lines(squid, lambda: _domain(net, env, "http"))
    # the streams' tunnels were refused; the messages went as forwarded stores
    assert "TCP_DENIED/403" in log and f"CONNECT {net.addrs[0]}:{HTTP_PORT}" in log, log[-3000:]
    for addr in net.addrs[:2]:
        assert f"POST http://{addr}:{HTTP_PORT}/domains/" in log, log[-3000:]


def test_an_https_domain_through_squid(net, squid, tls):
    env = _proxy_env(f"http://{net.proxy_addr}:{PROXY_PORT + 1}", "https")
    _, log = _new_lines(squid, lambda: _domain(net, env, "https", tls))
    for addr in net.addrs[:2]:
        assert "TCP_TUNNEL/200" in log and f"CONNECT {addr}:{HTTPS_PORT}" in log, log[-3000:]


# Run from host 2 (which reaches host 3 directly): a job on host 3 whose input
# is a URL on host 1, which host 3's endpoint pulls through the proxy.
PULL = """
import sys
from mpiws.jobs import File, Program
r = Program(sys.argv[1]).call(data=File(sys.argv[2]))
print(r["state"], r.get("stdout", ""), r.get("error", ""))
"""


def test_a_job_pulls_its_url_input_through_the_proxy(net, tinyproxy):
    www = net.tmp / "www"
    www.mkdir()
    data = os.urandom(256 * 1024)
    (www / "data.bin").write_bytes(data)
    net.start(
        net.hosts[0],
        [sys.executable, "-m", "http.server", "--bind", net.addrs[0], "8480", "--directory", str(www)],
        "www",
    )
    net.wait_port(net.hosts[0], net.addrs[0], 8480, "the web server")
    env = dict(os.environ, **_proxy_env(f"http://{USER}:{PASSWORD}@{net.proxy_addr}:{PROXY_PORT}"))
    url = net.serve(
        net.hosts[2],
        "--host",
        net.addrs[2],
        "--port",
        "8472",
        "--insecure",
        "--fetch-allow",
        f"{net.subnet}.0/24",
        "--program",
        "digest=sha256sum [in:file:data:binary]",
        name="jobs",
        env=env,
    )
    source = f"http://{net.addrs[0]}:8480/data.bin"
    p, log = _new_lines(
        tinyproxy,
        lambda: in_ns(
            net.hosts[1], sys.executable, "-c", PULL, f"{url}/programs/digest", source, check=False, timeout=60
        ),
    )
    assert p.returncode == 0 and p.stdout.startswith("done "), f"{p.stdout}\n{p.stderr}\n{net.logs()}"
    assert hashlib.sha256(data).hexdigest() in p.stdout, p.stdout
    assert f"GET {source}" in log, log


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_wrong_proxy_password_is_a_clear_error(net, tinyproxy, scheme):
    # http: the request forwarded to the proxy is refused; https: its CONNECT is
    env = _proxy_env(f"http://{USER}:wrong@{net.proxy_addr}:{PROXY_PORT}", scheme)
    urls = [f"{scheme}://{a}:{HTTP_PORT}" for a in net.addrs[:2]]
    t = time.monotonic()
    p = in_ns(
        net.hosts[2],
        *mpiws_cmd(),
        "run",
        "--endpoints",
        ",".join(urls),
        "--service",
        "multihost",
        check=False,
        timeout=120,
        env=dict(os.environ, **env),
    )
    assert p.returncode != 0, p.stdout
    assert f"the proxy http://{net.proxy_addr}:{PROXY_PORT} refused" in p.stderr, p.stderr
    assert "give the proxy's user and password" in p.stderr, p.stderr
    assert PASSWORD not in p.stderr and "wrong" not in p.stderr  # credentials never appear in messages
    assert time.monotonic() - t < 60, "a refusal is final, not retried until the failure timeout"
