"""Test hosts in Linux network namespaces, for what crosses a network.

``Network`` builds a "switch" namespace holding a bridge and N "host"
namespaces, each joined to the bridge by a veth pair and given an address
SUBNET.i/24 that exists only inside the namespaces; it starts processes
(``mpiws serve``, proxies) in them and removes everything afterwards, also
when a test fails. ``network()`` is the body of a module fixture: it skips,
with the reason, only where namespaces cannot be made (not Linux, not root).
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT

CMD_TIMEOUT = 20

# GET a URL with a timeout, trusting MPIWS_CA_FILE and sending MPIWS_KEY if set,
# never through a proxy; prints the status and body and exits 0, or prints the
# error and exits 1.
GET = """
import os, ssl, sys, urllib.request
try:
    ctx = ssl.create_default_context(cafile=os.environ.get("MPIWS_CA_FILE"))
    key = os.environ.get("MPIWS_KEY")
    req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + key} if key else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    with opener.open(req, timeout=float(sys.argv[2])) as r:
        print(r.status, r.read().decode())
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(1)
"""


def mpiws_cmd():
    exe = Path(sys.executable).parent / "mpiws"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mpiws"]


def sh(*args, check=True, timeout=CMD_TIMEOUT, **kw):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def in_ns(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def install_packages(**packages):
    """The OS packages (program=package), installed with apt-get if a program
    is missing; skips where that is impossible."""
    missing = [pkg for prog, pkg in packages.items() if shutil.which(prog) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"{', '.join(missing)} missing and not installable here (needs root and apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    p = sh("apt-get", "install", "-y", "-q", *missing, check=False, timeout=600, env=env)
    if p.returncode != 0:
        sh("apt-get", "update", "-q", check=False, timeout=600, env=env)
        sh("apt-get", "install", "-y", "-q", *missing, timeout=600, env=env)


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
    out = in_ns(
        ns, "cat", f"/sys/class/net/{dev}/statistics/tx_bytes", f"/sys/class/net/{dev}/statistics/rx_bytes"
    ).stdout
    tx, rx = (int(v) for v in out.split())
    return tx, rx


def rank_results(stdout):
    """{rank: result} from ``mpiws run --endpoints``' output lines ``rank R: JSON``."""
    results = {}
    for line in stdout.splitlines():
        if line.startswith("rank "):
            rank, body = line[5:].split(": ", 1)
            results[int(rank)] = json.loads(body)
    return results


class Network:
    """The namespaces, and the processes started in them."""

    def __init__(self, tmp, name, nhosts, subnet):
        tag = f"{name}{os.getpid() % 100000}"  # short enough for interface names (<= 15 chars)
        self.tmp = tmp
        self.switch = f"mpiws-{tag}-sw"
        self.hosts = [f"mpiws-{tag}-h{i}" for i in range(1, nhosts + 1)]
        self.subnet = subnet
        self.addrs = [f"{subnet}.{i}" for i in range(1, nhosts + 1)]
        self.veth_host = [f"{tag}h{i}" for i in range(1, nhosts + 1)]  # the end inside host i
        self.veth_sw = [f"{tag}s{i}" for i in range(1, nhosts + 1)]  # the end on the bridge
        self.bridge = f"{tag}br"
        self.procs = []  # (name, Popen, stdout path, stderr path)
        # for daemons that drop root (proxies): where any user may write, not pytest's 0700 tree
        self.shared = Path(tempfile.mkdtemp(prefix=f"mpiws-{tag}-"))
        self.shared.chmod(0o777)

    def build(self):
        sh("ip", "netns", "add", self.switch)
        sh("ip", "-n", self.switch, "link", "set", "lo", "up")
        sh("ip", "-n", self.switch, "link", "add", self.bridge, "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", self.bridge, "up")
        for ns, addr, vh, vs in zip(self.hosts, self.addrs, self.veth_host, self.veth_sw):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "add", vh, "netns", ns, "type", "veth", "peer", "name", vs, "netns", self.switch)
            sh("ip", "-n", self.switch, "link", "set", vs, "master", self.bridge)
            sh("ip", "-n", self.switch, "link", "set", vs, "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", vh)
            sh("ip", "-n", ns, "link", "set", vh, "up")

    def start(self, ns, cmd, name, env=None, cwd=ROOT):
        """Start ``cmd`` in namespace ``ns``, its output in files; returns the Popen."""
        out, err = self.tmp / f"{name}.out", self.tmp / f"{name}.err"
        with open(out, "w") as o, open(err, "w") as e:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, *cmd],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                env=dict(env or os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1"),
            )
        self.procs.append((name, p, out, err))
        return p

    def serve(self, ns, *args, name=None, env=None):
        """Start ``mpiws serve ARGS`` in ``ns``; returns the URL it reports."""
        name = name or f"{ns}-{len(self.procs)}"
        p = self.start(ns, [*mpiws_cmd(), "serve", *args], name, env=env)
        out = self.tmp / f"{name}.out"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = out.read_text()
            if "serving" in line:
                return line.split("\n", 1)[0].rsplit(" ", 1)[1].strip()
            if p.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"server {name} did not start (exit {p.poll()})\n{self.logs()}")

    def wait_port(self, ns, addr, port, name):
        """Until something listens on ``addr:port``, seen from ``ns`` (30 s at most)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if in_ns(ns, "bash", "-c", f"exec 3<>/dev/tcp/{addr}/{port}", check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"{name} does not listen on {addr}:{port}\n{self.logs()}")

    def tinyproxy(self, ns, addr, port, credentials=None):
        """Start tinyproxy (the OS package) in ``ns`` on ``addr:port``,
        tunnelling to any port, for this network's hosts, with Basic
        ``credentials`` (user, password) if given. Returns its log's path."""
        logs_dir = self.shared
        log = logs_dir / "tinyproxy.log"
        conf = self.tmp / f"tinyproxy-{port}.conf"
        auth = f"BasicAuth {credentials[0]} {credentials[1]}\n" if credentials else ""
        conf.write_text(f"""
User nobody
Group nogroup
Port {port}
Listen {addr}
Timeout 600
MaxClients 100
Allow {self.subnet}.0/24
{auth}LogFile "{log}"
LogLevel Connect
PidFile "{logs_dir}/tinyproxy.pid"
""")
        self.start(ns, ["tinyproxy", "-d", "-c", str(conf)], "tinyproxy")
        self.wait_port(ns, addr, port, "tinyproxy")
        return log

    def logs(self):
        parts = []
        for name, p, out, err in self.procs:
            parts.append(
                f"--- {name} (pid {p.pid}, exit {p.poll()})\nstdout:\n{out.read_text()}stderr:\n{err.read_text()}"
            )
        return "\n".join(parts)

    def stop(self, name=None):
        """End the processes started here (only ``name``'s if given)."""
        chosen = [p for n, p, _, _ in self.procs if name in (None, n)]
        for p in chosen:
            if p.poll() is None:
                p.terminate()
        for p in chosen:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def teardown(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.shared, ignore_errors=True)
            for ns in [*self.hosts, self.switch]:
                sh("ip", "netns", "del", ns, check=False)
            for dev in [*self.veth_host, *self.veth_sw, self.bridge]:  # only if a move into a namespace failed
                if Path(f"/sys/class/net/{dev}").exists():
                    sh("ip", "link", "del", dev, check=False)


@contextlib.contextmanager
def certificates(d, addrs, **env):
    """A CA and one certificate for ``addrs`` (trustme), written to ``d``
    (ca.pem, cert.pem, key.pem); meanwhile this process, and what it
    starts, trusts the CA (``MPIWS_CA_FILE``) and has ``env`` set."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert(*addrs)
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert.private_key_pem.write_to_path(str(d / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(d / "cert.pem"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPIWS_CA_FILE", str(d / "ca.pem"))
        for k, v in env.items():
            mp.setenv(k, v)
        yield d


def network(request, tmp_path_factory, name, nhosts, subnet):
    """A built ``Network`` torn down at the end of the fixture's scope;
    skips where namespaces cannot be made."""
    if not sys.platform.startswith("linux"):
        pytest.skip("network namespaces need Linux")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is missing")
    net = Network(tmp_path_factory.mktemp(name), name, nhosts, subnet)
    request.addfinalizer(net.teardown)  # registered first: runs even if the build fails half-way
    p = sh("ip", "netns", "add", net.switch, check=False)
    if p.returncode != 0:
        pytest.skip(f"`ip netns add` is not permitted here: {p.stderr.strip()}")
    sh("ip", "netns", "del", net.switch)
    try:
        net.build()
    except RuntimeError as e:
        pytest.skip(f"cannot build the namespace network (veth/bridge): {e}")
    return net
