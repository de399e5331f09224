"""WAN emulation on loopback with Toxiproxy (this kernel has no netem).

Toxiproxy is a TCP proxy with a REST API: each *proxy* listens on a port and
forwards every accepted connection to an upstream ``host:port``, passing the
bytes through chains of *toxics* (latency, bandwidth, ...), one chain per
direction: ``upstream`` (client -> server) and ``downstream`` (server ->
client).  An mpiws endpoint on loopback is reached through a *link* (one
proxy) by rewriting its URL with :func:`url_through`.

    with Toxiproxy() as tp:
        listen = tp.link("127.0.0.1:8001", latency_ms=20, rate_mbit=100, name="r1")
        url = url_through("http://127.0.0.1:8001", listen)   # http://127.0.0.1:4xxxx
        ...
        tp.set_link("r1", latency_ms=50)      # change it live
        tp.cut("r1")                          # a dead link (fault tests)
        tp.restore("r1")

What Toxiproxy emulates, and what it does not (read from its source, v2.12,
and measured by calibrate.py):

* It *terminates* TCP: the client's connection ends at the proxy on
  loopback, the proxy opens a second one to the upstream.  Neither TCP sees
  the emulated round-trip time, so there is no slow start over the WAN RTT
  and no window limit (bandwidth-delay product); the proxy's buffers stand in
  for the network's.
* Toxics act on *chunks* (whatever one read() from the socket returned, up
  to 32 KiB), not packets.  The latency toxic delays each chunk to
  ``read time + latency (+ jitter)``, in order (jitter never reorders: a
  chunk drawn shorter waits behind the one before).  Jitter is uniform in
  ``[latency - jitter, latency + jitter)`` per chunk.
* The bandwidth toxic's ``rate`` is in KB/s with KB = 1000 bytes (it sleeps
  ``len / rate`` milliseconds per chunk), so 1 Mbit/s = 125 KB/s.
* Toxics are instantiated per TCP connection: a rate limit applies to each
  connection (and direction) separately, N parallel connections through one
  link get N times the rate.  It is not a shared bottleneck.
* No TCP half-close: when one side shuts down its write half, the proxy
  closes the whole connection once it has forwarded that side's data, and
  whatever the other side is still sending is lost (its peer sees an early
  EOF).  HTTP clients do not half-close; raw-socket tests must not rely on it.
* The latency toxic buffers up to 1024 chunks per connection and direction
  (up to 32 MiB): behind a rate limit the sender's send() returns long
  before the data arrives, and a message queued behind bulk data waits for
  all of it.

Standard library only.
"""

import atexit
import fcntl
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# Latest v2 release that the Go module proxy serves (v2.12.0, 2025-03-18).
# Bumping it rebuilds the cached binary (see ensure_installed).
TOXIPROXY_VERSION = "v2.12.0"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"

# The repository root is two levels above benchmarks/wan; target/ is ignored
# by git, so the built tool lives there (a `cargo clean` just rebuilds it).
ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS_BIN = ROOT / "target" / "tools" / "bin"
BINARY = TOOLS_BIN / "toxiproxy-server"
STAMP = TOOLS_BIN / "toxiproxy-server.version"

# Environment override: use this binary instead of building one.
BINARY_ENV = "MPIWS_TOXIPROXY_SERVER"


class ToxiproxyError(RuntimeError):
    """Toxiproxy cannot be built or started, or its API refused a request."""


def mbit_to_kbps(rate_mbit):
    """Mbit/s (10^6 bit/s) -> the bandwidth toxic's ``rate``: KB/s with
    KB = 1000 bytes (the toxic sleeps len(chunk) / rate milliseconds).
    1 Mbit/s = 10^6 / 8 / 1000 = 125 KB/s; 1 Gbit/s = 125000."""
    if rate_mbit is None or rate_mbit <= 0:
        raise ValueError("rate_mbit must be > 0 (None: no limit)")
    # rate <= 0 makes v2.12's toxic loop forever: never round down to 0.
    return max(1, round(rate_mbit * 125))


# --------------------------------------------------------------- building


def ensure_installed(quiet=False):
    """Path of a ``toxiproxy-server`` binary of TOXIPROXY_VERSION; builds it
    with ``go install`` into ``target/tools/bin`` the first time (about a
    minute with a cold Go module cache).  Raises ToxiproxyError if it is
    missing and there is no ``go`` to build it."""
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        if not os.access(path, os.X_OK):
            raise ToxiproxyError(f"{BINARY_ENV}={override} is not an executable file")
        return path
    if _installed():
        return BINARY
    go = shutil.which("go")
    if go is None:
        raise ToxiproxyError(
            f"toxiproxy-server is not built ({BINARY}) and `go` is not on PATH to build it: "
            f"install Go (https://go.dev/dl/, or apt-get install golang) or set {BINARY_ENV}"
        )
    TOOLS_BIN.mkdir(parents=True, exist_ok=True)
    # A lock, so that concurrent first uses (parallel tests) build once.
    with open(TOOLS_BIN / ".toxiproxy-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed():
            return BINARY
        _build(go, quiet)
    return BINARY


def _installed():
    try:
        return os.access(BINARY, os.X_OK) and STAMP.read_text().strip() == TOXIPROXY_VERSION
    except OSError:
        return False


def _build(go, quiet):
    if not quiet:
        print(
            f"building toxiproxy-server {TOXIPROXY_VERSION} with go install (once, into {TOOLS_BIN}) ...",
            file=sys.stderr,
            flush=True,
        )
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=TOOLS_BIN, prefix=".build-") as gobin:
        # GOBIN: install straight into our directory, not ~/go/bin.
        # GOTOOLCHAIN=local: never download another Go toolchain behind our back.
        env = dict(os.environ, GOBIN=gobin, GOTOOLCHAIN="local")
        proc = subprocess.run(
            [go, "install", f"{TOXIPROXY_MODULE}@{TOXIPROXY_VERSION}"],
            env=env,
            cwd=gobin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        built = Path(gobin) / "server"  # go names the binary after cmd/server
        if proc.returncode != 0 or not built.exists():
            raise ToxiproxyError(
                f"go install {TOXIPROXY_MODULE}@{TOXIPROXY_VERSION} failed "
                f"(exit {proc.returncode}):\n{proc.stdout[-4000:]}"
            )
        # Rename within one file system: atomic, a reader never sees half a binary.
        os.replace(built, BINARY)
    STAMP.write_text(TOXIPROXY_VERSION + "\n")
    if not quiet:
        print(f"built {BINARY} in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- running


def free_port(host="127.0.0.1"):
    """A port free right now (another process may take it before we do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def url_through(url, listen, keep_host=False):
    """``url`` (http(s)://host:port/...) rewritten to reach its server
    through the link listening on ``listen`` ("127.0.0.1:PORT").  Scheme,
    path, query and credentials are kept.  ``keep_host``: keep the URL's
    host name and change only the port, for TLS certificates issued to a
    name (e.g. ``localhost``) rather than to 127.0.0.1 -- the name must then
    resolve to 127.0.0.1, where the link listens."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    lhost, _, lport = listen.rpartition(":")
    host = parts.hostname if keep_host else lhost
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"{host}:{lport}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class Toxiproxy:
    """A private toxiproxy-server on 127.0.0.1 (free port), for the ``with``
    block: started on enter (when its API answers), stopped on exit, with
    every proxy and connection it made."""

    def __init__(self, binary=None, startup_timeout=15.0, log_level="error"):
        self.binary = Path(binary) if binary else None
        self.startup_timeout = startup_timeout
        self.log_level = log_level  # toxiproxy's LOG_LEVEL; it warns on every closed link
        self.proc = None
        self.api = None  # "http://127.0.0.1:PORT"
        self.links = {}  # name -> listen address
        self._names = itertools.count(1)
        self._log = None
        # Never through an HTTP proxy from the environment: the API is on loopback.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # -- lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        if self.proc is not None:
            return
        binary = self.binary or ensure_installed()
        self._log = tempfile.TemporaryFile()
        # The port can be taken between free_port() and the server's bind: retry.
        for _attempt in range(3):
            port = free_port()
            self.proc = subprocess.Popen(
                [str(binary), "-host", "127.0.0.1", "-port", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, LOG_LEVEL=self.log_level),
            )
            self.api = f"http://127.0.0.1:{port}"
            if self._wait_ready():
                # A crashed test run must not leave the server behind.
                atexit.register(self.stop)
                return
            self._kill()
        log, self._log = self._read_log(), None
        raise ToxiproxyError(f"toxiproxy-server did not start ({binary}):\n{log}")

    def _wait_ready(self):
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                self._request("GET", "/version", timeout=1)
                return True
            except (OSError, ValueError, ToxiproxyError):
                time.sleep(0.05)
        return False

    def stop(self):
        """Stop the server (SIGTERM, then SIGKILL): its proxies and their
        connections go with it.  Idempotent."""
        if self.proc is None:
            return
        atexit.unregister(self.stop)
        self._kill()
        self.links.clear()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _kill(self):
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def _read_log(self):
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    # -- REST API

    def _request(self, method, path, body=None, timeout=10):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.api + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace").strip()
            raise ToxiproxyError(f"toxiproxy {method} {path}: HTTP {e.code}: {detail}") from None
        return json.loads(raw) if raw.strip() else None

    # -- links

    def link(self, upstream, latency_ms=0, jitter_ms=0, rate_mbit=None, name=None):
        """A new link to ``upstream`` ("host:port"): a proxy on a free
        loopback port whose connections get ``latency_ms`` (+- ``jitter_ms``)
        of ONE-WAY delay in each direction (so RTT = 2 x latency) and at most
        ``rate_mbit`` Mbit/s in each direction, per connection.  Returns the
        listen address "127.0.0.1:PORT"; the link is named ``name`` (default
        link1, link2, ...) for set_link/cut/restore/remove, which also
        accept the listen address."""
        if name is None:
            name = f"link{next(self._names)}"
            while name in self.links:
                name = f"link{next(self._names)}"
        # Port 0: the server binds a free port itself and reports it, no race.
        proxy = self._request(
            "POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": upstream, "enabled": True}
        )
        self.links[name] = proxy["listen"]
        try:
            self.set_link(name, latency_ms=latency_ms, jitter_ms=jitter_ms, rate_mbit=rate_mbit)
        except Exception:
            self.remove(name)
            raise
        return proxy["listen"]

    def set_link(self, link, latency_ms=0, jitter_ms=0, rate_mbit=None):
        """Give a link (live connections included) this latency, jitter and
        rate; 0/None remove them.  Keeps existing toxics and updates them
        in place when it can; otherwise recreates the chains, so that
        latency always comes before bandwidth (see _toxics)."""
        name = self._name(link)
        want = _toxics(latency_ms, jitter_ms, rate_mbit)
        have = self._request("GET", f"/proxies/{name}/toxics") or []
        if {t["name"] for t in have} == {t["name"] for t in want}:
            for t in want:
                if next(h for h in have if h["name"] == t["name"])["attributes"] != t["attributes"]:
                    self._request("POST", f"/proxies/{name}/toxics/{t['name']}", {"attributes": t["attributes"]})
            return
        for t in have:
            self._request("DELETE", f"/proxies/{name}/toxics/{t['name']}")
        for t in want:
            self._request("POST", f"/proxies/{name}/toxics", t)

    def toxics(self, link):
        """The link's toxics as the API lists them (for inspection)."""
        return self._request("GET", f"/proxies/{self._name(link)}/toxics") or []

    def cut(self, link):
        """Cut a link: the proxy is disabled, its open connections are closed
        (peers see EOF or a reset) and new connections are refused."""
        self._request("POST", f"/proxies/{self._name(link)}", {"enabled": False})

    def restore(self, link):
        """Undo cut(): the link listens again on the same address."""
        self._request("POST", f"/proxies/{self._name(link)}", {"enabled": True})

    def remove(self, link):
        """Delete a link (its connections are closed)."""
        name = self._name(link)
        self._request("DELETE", f"/proxies/{name}")
        self.links.pop(name, None)

    def _name(self, link):
        if link in self.links:
            return link
        for name, listen in self.links.items():
            if listen == link:
                return name
        raise KeyError(f"no link named or listening on {link!r}")


def _toxics(latency_ms, jitter_ms, rate_mbit):
    """The toxics of one link, in chain order for each stream.

    Latency comes first: it delays each chunk to read time + latency and
    hands it on; the bandwidth toxic then spaces chunks by their size / rate,
    so a message of S bytes arrives after latency + S / rate, as on a real
    link.  The other order is subtly wrong: the latency toxic measures from
    the time the proxy read the chunk, so the time a chunk queued in the
    bandwidth toxic would be counted against the latency instead of added to
    it (measured: 4 MiB at 50 ms / 100 Mbit/s arrived ~8 ms early)."""
    for v, what in ((latency_ms, "latency_ms"), (jitter_ms, "jitter_ms")):
        if v < 0 or v != int(v):
            raise ValueError(f"{what} must be a whole number >= 0 (toxiproxy works in ms): {v!r}")
    out = []
    for stream in ("upstream", "downstream"):
        if latency_ms or jitter_ms:
            out.append(
                {
                    "name": f"latency_{stream}",
                    "type": "latency",
                    "stream": stream,
                    "toxicity": 1.0,
                    "attributes": {"latency": int(latency_ms), "jitter": int(jitter_ms)},
                }
            )
        if rate_mbit is not None:
            out.append(
                {
                    "name": f"bandwidth_{stream}",
                    "type": "bandwidth",
                    "stream": stream,
                    "toxicity": 1.0,
                    "attributes": {"rate": mbit_to_kbps(rate_mbit)},
                }
            )
    return out


def own_endpoint_link(api, latency_ms, rate_mbit, name):
    """A link (of the server at ``api``, run by a driver) to this process's own mpiws endpoint, for peers to
    reach it through (``advertise=``): (its URL, a function that removes it). Never starts or stops the server."""
    from mpiws import binding

    tp = Toxiproxy()
    tp.api = api
    own = binding.process_endpoint().url  # made on first use
    listen = tp.link(own.split("//", 1)[1].rstrip("/"), latency_ms=latency_ms, rate_mbit=rate_mbit, name=name)

    def remove():
        try:
            tp.remove(name)
        except Exception:  # noqa: BLE001 - the driver's server goes with its links anyway
            pass

    return url_through(own, listen), remove
