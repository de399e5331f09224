"""HTTP-level fuzz of every route of real `mpiws serve` processes (loopback
only, bounded in count and time).

Two endpoints: the fuzzed one serves the `sum` service, the `add` template
program and CWL tools, relays (`--relay`, a keys file giving `relay` scope)
and holds an open rendezvous; a second, hidden one serves the same behind it
(`--via-relay .../relay/lab`), so `/relay/lab/...` reaches every route
again through the relay.

Random methods; paths built from docs/openapi.yaml's routes (each one, the
relay's too, the OGC face's too) with real and junk segments (ids, ranks,
huge numbers, `..`, percent-encodings); random headers (envelope headers
with junk, huge values, duplicates, Content-Length lies, no key, junk keys,
a domain token, a key with run/jobs/files scopes, `Prefer`); random bodies
(junk, truncated JSON, bindings, rendezvous registrations and job inputs
with absurd fields, CWL job objects with wrong types, huge lists, nested
objects, Files and Directories whose location, path, basename or contents
are junk, `..`, control characters, absolute paths; OGC API - Processes
execute requests with plain, qualified and junk-encoded values, links to
junk URLs, `..`, file:// and huge ones, lists, nested junk, junk `outputs`,
`response`, `mode` and `subscriber`, sometimes `Prefer: respond-async`);
relay registrations (with and without the upgrade, any key); and
raw-socket junk (truncated request lines, malformed framing, bodies that
stall and close, a "hidden endpoint" that answers the relay with junk).
After every batch both endpoints must still answer `GET /`; no answer may
be a 5xx the document does not list for that route; neither server's
stderr may show a panic; a batch sent without an endpoint key may create
no domain, job, upload or registration (the OGC face's jobs are jobs of
the same table, its service runs domains `ogc-...`: the same snapshot
sees them); at the end no file the fuzz named may exist outside the
endpoints' work directories. The per-route counts of requests and
statuses are printed at the end (pytest -s).

MPIWS_FUZZ_HTTP_REQUESTS sets how many requests (default 3,000, about 20
seconds; benchmarks/fuzz/run is the long run); MPIWS_FUZZ_HTTP_SEED replays
a run (the seed is printed)."""

import http.client
import json
import os
import random
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

REQUESTS = int(os.environ.get("MPIWS_FUZZ_HTTP_REQUESTS", "3000"))
SEED = int(os.environ.get("MPIWS_FUZZ_HTTP_SEED", str(secrets.randbits(32))))
BATCH = 100
TIMEOUT = 5.0
RELAY_TIMEOUT = 15.0  # a relay holds a request up to 10 s for a connection of its name
ADD = "add=examples/add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]"
MARK = "fzmark"  # in every file name the fuzz makes up: looked for outside the work directories

KEY_ADMIN = "A" * 16 + secrets.token_hex(8)  # set-up and snapshots only, never the fuzz
KEY_FUZZ = "F" * 16 + secrets.token_hex(8)  # run, jobs, files: what the fuzz may send
KEY_RUN = "R" * 16 + secrets.token_hex(8)
KEY_LAB = "L" * 16 + secrets.token_hex(8)  # the hidden endpoint's: relay=lab
KEY_RELAY = "Y" * 16 + secrets.token_hex(8)  # relay, any name no key claims

# A CWL tool with every kind of input the jobs layer stages or checks.
FUZZ_TOOL = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "baseCommand": ["ls", "-lR"],
    "inputs": {
        "f": {"type": "File?", "inputBinding": {"position": 1}},
        "fs": {"type": "File[]?", "inputBinding": {"position": 2}},
        "d": {"type": "Directory?", "inputBinding": {"position": 3}},
        "s": {"type": "string?", "inputBinding": {"position": 4}},
        "ss": {"type": "string[]?", "inputBinding": {"prefix": "-I", "position": 5}},
        "n": {"type": "int?"},
        "x": {"type": "Any?"},
        "e": {"type": ["null", {"type": "enum", "symbols": ["a", "b"]}]},
        "u": {"type": ["null", "int", "string", "File"], "inputBinding": {"position": 6}},
        "b": {"type": "boolean?", "inputBinding": {"prefix": "-a"}},
    },
    "stdout": "listing.txt",
    "outputs": {"listing": "stdout", "all": {"type": "File[]", "outputBinding": {"glob": "*"}}},
}
CWL_PROGRAMS = ["fuzz", "cat", "options", "echo"]
#: What the OGC face offers as processes: the programs, then the service.
OGC_PROCESSES = ["add", *CWL_PROGRAMS, "sum"]


# ---- the endpoints under test ------------------------------------------------

# `mpiws serve` as the command line runs it, with a rendezvous for 8 ranks
# opened on it (what `mpiws run --rendezvous` does in-process on rank 0).
SERVE_WITH_RENDEZVOUS = """
import sys
from mpiws.service import serve
init = serve.Server.__init__
def opened(self, *a, **k):
    init(self, *a, **k)
    self.endpoint.open_rendezvous(8)
serve.Server.__init__ = opened
from mpiws.cli import main
raise SystemExit(main(["serve", *sys.argv[1:]]))
"""


class Serve:
    """``mpiws serve ARGS`` in a process of its own, its stderr in a file."""

    def __init__(self, d, name, args, env=None, rendezvous=False):
        self.work = d / f"{name}-work"
        self.err_path = d / f"{name}.stderr"
        self.err = open(self.err_path, "w+")
        self.rendezvous = rendezvous
        head = ["-c", SERVE_WITH_RENDEZVOUS] if rendezvous else ["-m", "mpiws", "serve"]
        self.proc = subprocess.Popen(
            [sys.executable, *head, *args, "--workdir", str(self.work)],
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, **(env or {})),
        )
        line = self.proc.stdout.readline()
        assert " at http" in line, f"{line}{self.err_path.read_text()}"
        self.url = line.split(" at ", 1)[1].strip()

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.err.close()


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """(the fuzzed relay endpoint, the hidden endpoint behind it, their folder)."""
    d = tmp_path_factory.mktemp("fuzz_http")
    keys = d / "keys"
    keys.write_text(f"{KEY_ADMIN}\n{KEY_FUZZ} run jobs files\n{KEY_RUN} run\n{KEY_LAB} relay=lab\n{KEY_RELAY} relay\n")
    keys.chmod(0o600)
    tool = d / "fuzz.cwl"
    tool.write_text(json.dumps(FUZZ_TOOL))
    cwl = ["--program-cwl", f"fuzz={tool}"]
    for n in CWL_PROGRAMS[1:]:
        cwl += ["--program-cwl", str(ROOT / "examples" / "workflows" / "cwl" / f"{n}.cwl")]
    common = [
        "--keys",
        str(keys),
        "--service",
        "sum=examples.service_sum:service",
        "--program",
        ADD,
        *cwl,
        "--max-message",
        str(1 << 20),
        "--max-upload",
        str(1 << 20),
        "--max-instances-per-key",
        "6",
        "--max-instance-time",
        "10",
        "--spare-instances",
        "1",
    ]
    main = Serve(d, "relay", [*common, "--relay"], rendezvous=True)
    hidden = None
    try:
        hidden = Serve(d, "hidden", [*common, "--via-relay", f"{main.url}/relay/lab"], env={"MPIWS_RELAY_KEY": KEY_LAB})
        assert hidden.url.startswith(f"{main.url}/relay/lab#sha256="), hidden.url  # pinned: reached end to end
        yield main, hidden, d
    finally:
        for s in (hidden, main):
            if s:
                s.stop()


def call(url, method, target, body=None, headers=(), content_length=None, timeout=TIMEOUT, key=None):
    """Every HTTP request of this file goes through here. ``headers`` is a
    list of pairs (names may repeat); ``key``: sent as the bearer token;
    ``content_length``: announce that length whatever the body is, then
    half-close. Answers (status, body), or None if the server closed the
    connection without an answer."""
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    if key:
        headers = [*headers, ("Authorization", f"Bearer {key}")]
    try:
        c.putrequest(method, target, skip_host=any(k.lower() == "host" for k, _ in headers), skip_accept_encoding=True)
        for k, v in headers:
            c.putheader(k, v)
        if content_length is not None:
            c.putheader("Content-Length", str(content_length))
        elif body is not None:
            c.putheader("Content-Length", str(len(body)))
        c.endheaders()
        try:
            if body:
                c.sock.sendall(body)
            if content_length is not None:
                c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered (and closed) before the whole body was sent
        r = c.getresponse()
        if r.status == 101:
            return r.status, b""  # an upgrade (a relay registration): the connection is dropped at once
        try:
            return r.status, r.read()
        except (http.client.IncompleteRead, ConnectionError) as e:
            # An answer to a request whose body the server did not read
            # (a GET with a body, a refused upload) may be cut short when
            # the server closes: the kernel resets the connection.
            return r.status, getattr(e, "partial", b"")
    except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
        return None
    finally:
        c.close()


def admin(url, method, path, body=None, timeout=30):
    """(status, JSON) of a set-up request with the admin key."""
    status, data = call(
        url,
        method,
        urlparse(url).path + path,
        None if body is None else json.dumps(body).encode(),
        [("content-type", "application/json")],
        timeout=timeout,
        key=KEY_ADMIN,
    )
    return status, json.loads(data or b"null")


def describe(url):
    status, body = admin(url, "GET", "/")
    assert status == 200, (status, body)
    return body


# ---- what the document allows -------------------------------------------------


ROUTES = [
    (
        template,
        re.compile("^" + re.sub(r"{\w+}", "[^/]+", template).replace("/[^/]+/[^/]+$", "/[^/]+/.*$", 1) + "$")
        if template == "/relay/{name}/{path}"
        else re.compile("^" + re.sub(r"{\w+}", "[^/]+", template) + "$"),
        item,
    )
    for template, item in SPEC["paths"].items()
]
DIRECT = [r for r in ROUTES if not r[0].startswith("/relay/")]
RELAY = re.compile(r"^/relay/([^/]+)(/.*)?$")


def bare(target):
    """A target's path as the endpoint routes it: no query, trimmed of `/` at both ends."""
    return "/" + target.split("?", 1)[0].split("#", 1)[0].strip("/")


def relayed(method, target):
    """The path a relay passes on for this request (`/relay/NAME/PATH`: `/PATH`;
    `/relay/NAME` with any method but POST, a registration: `/`), or None."""
    m = RELAY.match(bare(target))
    if not m:
        return None
    if m.group(2) is None:
        return None if method.upper() == "POST" else "/"
    return bare(m.group(2))


def route_of(method, target):
    """The document's template for a request (a relayed one: the relay's, then the one behind), or None."""
    inner = relayed(method, target)
    if inner is not None:
        return "/relay/{name}" + ("" if inner == "/" else route_of(method, inner) or "/(undocumented)")
    path = bare(target)
    for template, rx, _ in ROUTES:
        if rx.match(path):
            return template
    return None


def documented_5xx(method, target):
    """The 5xx statuses docs/openapi.yaml lists for this request's route (none
    for a route or method it does not document). Behind the relay: the
    relay's own (502, 503) and those of the route behind it."""
    inner = relayed(method, target)
    if inner is not None:
        return {502, 503} | documented_5xx(method, inner)
    path = bare(target)
    for _, rx, item in ROUTES:
        if rx.match(path) and method.lower() in item:
            return {int(code) for code in item[method.lower()]["responses"] if str(code).startswith("5")}
    return set()


def may_wait(method, target, headers):
    """Requests that by design wait for something (long polls, a synchronous
    store, a program call): a client timeout is their answer, not a hang."""
    path = target.split("?", 1)[0]
    return (
        "wait=" in target
        or path.endswith(("/matched", "/call"))
        or bare(path).endswith("/execution")  # an OGC execution, synchronous unless asked otherwise
        or any(k.lower() == "mpiws-sync" for k, _ in headers)
        or "/stream" in path
    )


# ---- state: "no state appears without a key", "no file outside the work directory" ----


def snapshot(endpoint):
    """The endpoint's state, as its admin sees it: what is deployed, the
    domains, the rendezvous, and the jobs and uploads in its work directory."""
    d = describe(endpoint.url)

    def listing(sub):
        return set(os.listdir(endpoint.work / sub)) if (endpoint.work / sub).is_dir() else set()

    state = {
        "services": d.get("services"),
        "programs": d.get("programs"),
        "domains": {x["domain"] for x in d.get("domains", [])},
        "jobs": listing("jobs"),
        "files": listing("files"),
    }
    if endpoint.rendezvous:
        status, r = admin(endpoint.url, "GET", "/rendezvous")
        assert status == 200, r
        state["registered"] = r["registered"]
    return state


def assert_nothing_appeared(before, after, where):
    """Requests without an endpoint key (none, junk ones, a domain's token)
    add no domain, job, upload or rendezvous entry and change nothing deployed."""
    for k, was in before.items():
        now = after[k]
        if isinstance(was, set):
            assert now <= was, f"{k} appeared without a key {where}: {sorted(now - was)}"
        elif k == "registered":
            assert now <= was, f"rendezvous entries appeared without a key {where}: {was} -> {now}"
        else:
            assert now == was, f"{k} changed {where}: {was} -> {now}"


def files_outside(base, works):
    """Every path under ``base`` but outside the ``works`` folders, and every
    file named with MARK in the places a path trick could reach (the
    servers' cwd, /tmp, the home folder, /)."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(base):
        if any(Path(dirpath) == w or w in Path(dirpath).parents for w in works):
            dirnames[:] = []
            continue
        found.update(os.path.join(dirpath, n) for n in dirnames + filenames)
    skip = {".git", "target", ".venv", "node_modules", "__pycache__"}
    for top, depth in ((ROOT, 4), (Path("/tmp"), 3), (Path.home(), 2), (Path("/"), 1)):
        for dirpath, dirnames, filenames in os.walk(top):
            p = Path(dirpath)
            if p in works or any(w in p.parents for w in works) or len(p.relative_to(top).parts) >= depth:
                dirnames[:] = []
            dirnames[:] = [n for n in dirnames if n not in skip and not n.startswith("pytest-of")]
            found.update(os.path.join(dirpath, n) for n in dirnames + filenames if MARK in n)
    return found


# ---- real names on the endpoints, so that random requests reach deep checks --


class State:
    """A domain waiting for a message, an upload, a finished job of `add` and
    one of the CWL tool, made with the admin key at ``url`` (an endpoint's
    own, or the hidden one's at the relay)."""

    def __init__(self, url):
        self.url = url
        self.domain, self.token = secrets.token_hex(6), secrets.token_hex(8)
        binding = {
            "domain": self.domain,
            "rank": 0,
            "endpoints": [url, url],
            "token": self.token,
            "service": "sum",
            "params": {"n": 10},
        }
        status, body = admin(url, "POST", "/run", binding)
        assert status == 201, body
        # Until its process is up, a new instance answers "not yet" (503): wait for it to run.
        deadline = time.monotonic() + 30
        while body["state"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.05)
            status, data = call(url, "GET", f"{urlparse(url).path}/domains/{self.domain}/ranks/0", key=self.token)
            body = json.loads(data)
        status, data = call(
            url,
            "POST",
            urlparse(url).path + "/files",
            b"41",
            [("content-type", "application/octet-stream")],
            key=KEY_ADMIN,
        )
        assert status == 201, data
        self.upload = json.loads(data)["url"]
        status, body = admin(url, "POST", "/programs/add/call", {"inputs": {"x": 1, "y": "41"}})
        assert status == 200 and body["outputs"]["result"] == 42, body
        self.job = body["id"]
        status, body = admin(url, "POST", "/programs/fuzz/call", {"inputs": {"f": {"class": "File", "contents": "x"}}})
        assert status == 200 and body["state"] == "done", body
        self.cwl_job = body["id"]
        self.cwl_file = body["outputs"]["listing"]["location"]
        # What OGC executions with the fuzz's key started (jobs and service runs, by id): reached
        # again by status, results and dismissal requests.
        self.ogc_jobs = []


# ---- random requests ----------------------------------------------------------


JUNK_SEGMENTS = [
    "",
    ".",
    "..",
    "%2e%2e",
    "%2E%2E%2F..",
    "..%2F..%2Fetc%2Fpasswd",
    "%00",
    "%ZZ",
    "%",
    "%C3%A9",
    "é",
    "-1",
    "+5",
    "0x10",
    "1e3",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999",
    "~",
    "*",
    ";",
    "a" * 300,
    "a" * 5000,
    "%252e%252e",
    " ",
    "%20",
    "\\",
    "null",
    "[]",
    "{}",
]


def segment(rng, name, st):
    """A path parameter: the real one, a near miss, or junk."""
    real = {
        "domain": st.domain,
        "rank": rng.choice(["0", "1"]),
        "source": rng.choice(["0", "1"]),
        "seq": str(rng.randrange(4)),
        "name": rng.choice(["add", "x", "y", "result", "listing.txt", *CWL_PROGRAMS]),
        "id": rng.choice([st.job, st.cwl_job, st.upload.rsplit("/", 1)[-1]]),
        "processID": rng.choice(OGC_PROCESSES),
        "jobID": rng.choice([st.job, st.cwl_job, f"ogc-{'0' * 32}", *st.ogc_jobs[-10:], *st.ogc_jobs[-3:]]),
    }.get(name, "x")
    pick = rng.random()
    if pick < 0.5:
        s = real
    elif pick < 0.6:
        s = real + rng.choice(JUNK_SEGMENTS)
    elif pick < 0.7:
        s = str(rng.choice([rng.randrange(1 << 64), -rng.randrange(1 << 31), 1 << rng.randrange(70)]))
    else:
        s = rng.choice(JUNK_SEGMENTS)
    return quote(s, safe="%.~+*;-[]{}")  # percent-encodings kept as they are, the rest made legal


QUERIES = [
    "",
    "",
    "",
    "?wait=0.05",
    "?wait=-1",
    "?wait=soon",
    "?wait=1e309",
    "?wait=nan",
    "?wait=inf",
    "?wait=0x10",
    "?wait=99999999999999999999",
    "?wait=0.1&wait=0.2",
    "?by=value",
    "?by=reference",
    "?by=mail",
    "?by=",
    "?&&==",
    "?a=%ZZ",
    "?" + "q" * 4000,
    "#frag",
    "?wait=%00",
    "?limit=1",
    "?limit=0",
    "?limit=-1",
    "?offset=2&limit=1",
    "?offset=99999999999999999999999",
    f"?limit={(1 << 64) - 1}&offset={(1 << 64) - 1}",
    "?limit=1&limit=x",
]

RELAY_NAMES = ["lab"] * 12 + ["nobody", "a" * 65, "..", "%2e", "lab%2F", "x.y-z", "%00", "lab.", "LAB", "é"]


def direct_target(rng, st):
    """A path of an endpoint: a documented route with random segments, or a random path."""
    if rng.random() < 0.9:
        template, _, _ = rng.choice(DIRECT)
        path = re.sub(r"{(\w+)}", lambda m: segment(rng, m.group(1), st), template)
    else:
        parts = [
            rng.choice(
                [
                    "run",
                    "domains",
                    "ranks",
                    "jobs",
                    "files",
                    "programs",
                    "messages",
                    "stream",
                    "relay",
                    "rendezvous",
                    "..",
                    "",
                    "%2F",
                    "results",
                    "stdout",
                    "ogcapi",
                    "processes",
                    "execution",
                    "conformance",
                    "api",
                ]
                + JUNK_SEGMENTS[:12]
            )
            for _ in range(rng.randrange(1, 7))
        ]
        path = "/" + "/".join(quote(p, safe="%.~") for p in parts)
        path = rng.choice([path, "/" + path, path + "/", path.replace("/", "//")])
    return path + rng.choice(QUERIES)


def target(rng, sts):
    """A request target: the fuzzed endpoint's own (70%), or one passed by
    its relay to the hidden endpoint (or to a name that is not there)."""
    if rng.random() < 0.7:
        return direct_target(rng, sts.main)
    name = quote(rng.choice(RELAY_NAMES), safe="%.")
    return f"/relay/{name}" + direct_target(rng, sts.hidden)


ENVELOPE = ["mpiws-source", "mpiws-context", "mpiws-tag", "mpiws-seq", "mpiws-sync", "mpiws-parts", "mpiws-forward"]
JUNK_VALUES = [
    "",
    "0",
    "1",
    "-1",
    "true",
    "maybe",
    "x",
    "1,2,3",
    ",",
    ",,,,",
    "0,",
    " 7 ",
    "1.5",
    "1e3",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "4294967296",
    f"{1 << 40},{(1 << 64) - (1 << 40) + 1}",
    ",".join(["0"] * 70000),
    "9" * 8000,
    "\u00e9".encode().decode("latin-1"),
]
JUNK_AUTH = [
    "Bearer ",
    "Bearer",
    "Basic eDp5",
    "Bearer " + "t" * 10000,
    f"bearer {KEY_FUZZ}",
    f"Bearer {KEY_FUZZ} extra",
    f"Bearer {KEY_FUZZ[:-1]}",
    f"Bearer {KEY_ADMIN[:16]}",
    "Bearer \u00e9".encode().decode("latin-1"),
]


def credential(rng, st, keyed):
    """An Authorization header, or none. ``keyed``: endpoint keys other than the admin's may be sent."""
    r = rng.random()
    if keyed and r < 0.45:
        return ("Authorization", f"Bearer {rng.choice([KEY_FUZZ] * 6 + [KEY_RUN, KEY_RELAY, KEY_LAB])}")
    if r < 0.75:
        return ("Authorization", f"Bearer {st.token}")
    if r < 0.9:
        return ("Authorization", rng.choice(JUNK_AUTH))
    return None


def headers(rng, st, keyed):
    if rng.random() < 0.3:  # a well-formed request, so that its body reaches the deep checks
        key = rng.choice([KEY_FUZZ] * 4 + [KEY_RUN]) if keyed else st.token
        h = [("Authorization", f"Bearer {key}"), ("Content-Type", "application/json")]
        return h + ([("Prefer", prefer(rng))] if rng.random() < 0.2 else [])
    h = []
    for _ in range(rng.randrange(6)):
        h.append((rng.choice(ENVELOPE), rng.choice(JUNK_VALUES)))
    if auth := credential(rng, st, keyed):
        h.append(auth)
    if rng.random() < 0.7:
        h.append(
            (
                "Content-Type",
                rng.choice(
                    [
                        "application/json",
                        "application/json",
                        "application/octet-stream",
                        "text/plain",
                        "json",
                        "application/json; charset=utf-16",
                        "multipart/form-data; boundary=x",
                        "",
                    ]
                ),
            )
        )
    if rng.random() < 0.1:
        h.append(("Upgrade", rng.choice(["mpiws-stream/1", "mpiws-relay/1", "websocket", "h2c", "x" * 100])))
        h.append(("Connection", rng.choice(["upgrade", "Upgrade, keep-alive", "close"])))
    if rng.random() < 0.1:
        h.append(("X-Junk", "j" * rng.choice([10, 8000, 60000])))
    if rng.random() < 0.1:
        h.extend([("X-Many", str(i)) for i in range(rng.choice([50, 200]))])
    if rng.random() < 0.1:
        h.append(("Prefer", prefer(rng)))
    if rng.random() < 0.05:
        h.append(("Transfer-Encoding", rng.choice(["chunked", "gzip", "identity"])))
    if rng.random() < 0.05:
        h.append(("Host", rng.choice(["", "evil.example", "127.0.0.1:1", "a" * 300])))
    rng.shuffle(h)
    return h


def junk_json(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice(
            [
                None,
                True,
                0,
                -1,
                1 << 63,
                1 << 64,
                -(1 << 70),
                1.5,
                1e308,
                "",
                "x" * rng.choice([1, 100, 10000]),
                "-e",
                "--help",
                "../../etc/passwd",
                "\u0000",
                "\ud7ff",
                "é",
            ]
        )
    if r < 0.7:
        return [junk_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["a", "", "domain", "inputs", "x", "y", "url", "base64", "size", "class", "k" * 50]): junk_json(
            rng, depth + 1
        )
        for _ in range(rng.randrange(4))
    }


def binding_body(rng, st):
    """A run request, valid-looking but with absurd fields (never a `sum`
    with a huge n: that is a denial of service of its own, finding 6)."""
    b = {
        "domain": rng.choice([secrets.token_hex(4), st.domain, "..", ".", "a/b", "x" * 200, "é", ""]),
        "rank": rng.choice([0, 1, -1, 1 << 32, 1 << 64, "0", None, 1.5]),
        "endpoints": rng.choice(
            [
                [st.url],
                [st.url] * 2,
                [],
                ["ftp://x"],
                ["http://"],
                [st.url] * rng.choice([100, 5000]),
                ["http://127.0.0.1:1"] * 3,
                [st.url, 5],
                "http://x",
                [st.url.split("/relay/")[0] + "/relay/nobody"] * 2,
            ]
        ),
        "token": rng.choice([st.token, secrets.token_hex(8), "", "t", "t" * 10000, 5, None]),
        "service": rng.choice(["sum", "nope", "", "../sum", 7]),
        "params": rng.choice([{}, {"n": rng.randrange(20)}, junk_json(rng), [1] * 1000]),
    }
    for k in list(b):
        if rng.random() < 0.1:
            del b[k]
    return json.dumps(b).encode()


def registration_body(rng, st):
    """A rendezvous registration (the table is open for 8 ranks)."""
    port = rng.randrange(1, 65536)
    b = {
        "rank": rng.choice([0, 1, 7, rng.randrange(8), 8, -1, 1 << 32, "1", None, 1.5]),
        "size": rng.choice([8, 8, 8, 0, 1, 9, 1 << 32, -8, "8", None]),
        "url": rng.choice(
            [
                f"http://127.0.0.1:{port}",
                f"https://localhost:{port}",
                st.url,
                "http://127.0.0.1:99999",
                "http://127.0.0.1:0",
                "https://[::1]:443",
                "http://[::1:443",
                "http://a b:1",
                "ftp://x:1",
                "http://x",
                "http://x:1/path?q",
                "http://user:pw@x:1",
                "http://" + "a" * 3000 + ":1",
                "http://127.0.0.1:1\r\nX: y",
                "http://é:1",
                "",
                5,
                None,
            ]
        ),
    }
    for k in list(b):
        if rng.random() < 0.05:
            del b[k]
    if rng.random() < 0.05:
        b["extra"] = 1
    return json.dumps(b).encode()


def inputs_body(rng, st):
    x = rng.choice([1, -5, "7", "-e", "+5", 1 << 63, 1 << 64, 1.5, "1e3", None, [], "x" * 5000, " 3 "])
    y = rng.choice(
        [
            "41",
            41,
            {"base64": "NDE="},
            {"base64": "***"},
            {"url": st.upload},
            {"url": st.upload, "size": 2},
            {"url": "http://127.0.0.1:1/nothing"},
            {"url": "file:///etc/passwd"},
            {"url": st.upload + "/../../x"},
            {"url": f"{st.url}/jobs/{st.job}/files/result"},
            {"url": f"{st.url}/jobs/{st.job}/files/../../x"},
            None,
            [1],
        ]
    )
    body = {"inputs": {"x": x, "y": y}}
    if rng.random() < 0.2:
        body["inputs"][rng.choice(["z", "result", ""])] = 1
    if rng.random() < 0.1:
        body = {"inputs": junk_json(rng)}
    return json.dumps(body).encode()


# ---- CWL job objects -------------------------------------------------------------

JUNK_NAMES = [
    MARK,
    f"{MARK}.txt",
    ".",
    "..",
    f"../{MARK}-up",
    f"../../{MARK}-up2",
    f"../../../../../../tmp/{MARK}-tmp",
    f"/tmp/{MARK}-abs",
    f"/{MARK}-root",
    f"a/{MARK}",
    f"{MARK}/",
    f"{MARK}\n",
    f"{MARK}\r\nX: y",
    f"\x00{MARK}",
    f"{MARK}\x1b[31m",
    f"{MARK}\x7f",
    f"{MARK}\u202e",
    f"C:\\{MARK}",
    f"..\\{MARK}",
    "~",
    f"~/{MARK}",
    f"{MARK}" * 60,
    "",
    " ",
    "-rf",
    f"--{MARK}",
    f"$(touch {MARK}-sub)",
    f"`touch {MARK}-tick`",
    f"{MARK};touch {MARK}-semi",
    "*",
    "listing.txt",
    "in",
    "out",
]


def junk_location(rng, st):
    base = st.url
    return rng.choice(
        [
            st.upload,
            st.cwl_file,
            f"{base}/jobs/{st.job}/files/result",
            f"{base}/jobs/{st.cwl_job}/files/listing.txt",
            f"{base}/jobs/{st.cwl_job}/files/../../../{MARK}",
            f"{base}/jobs/{st.cwl_job}/files/%2e%2e/%2e%2e/keys",
            f"{base}/jobs/{st.cwl_job}/stdout",
            f"{base}/files/..",
            f"{st.upload}/..",
            f"{base}/",
            f"{base}/rendezvous",
            "http://127.0.0.1:1/x",
            "http://[::1]:1/x",
            f"file:///tmp/{MARK}-loc",
            "file:///etc/passwd",
            "/etc/passwd",
            f"../{MARK}",
            f"{MARK}.txt",
            "data:text/plain,hello",
            "ftp://127.0.0.1/x",
            "http://",
            "http://%00/",
            "",
            "\n",
            "x" * 5000,
            "keep:abc",
        ]
    )


def junk_file(rng, st, depth=0):
    """A File object, well-formed or not."""
    f = {"class": rng.choice(["File"] * 8 + ["Directory", "file", "", None, 1])}
    source = rng.random()
    if source < 0.4:
        f["location"] = junk_location(rng, st)
    elif source < 0.65:
        f["contents"] = rng.choice(["", "hello\n", "\x00\xff", "x" * rng.choice([10, 70000]), 5, None])
    elif source < 0.8:
        f["base64"] = rng.choice(["aGVsbG8=", "***", "", "=" * 10, 5])
    elif source < 0.9:
        f["location"], f["contents"] = junk_location(rng, st), "both"
    for k in ("basename", "path", "nameroot", "nameext", "checksum", "size", "format", "secondaryFiles", "listing"):
        if rng.random() < {"basename": 0.6, "path": 0.4}.get(k, 0.08):
            f[k] = rng.choice(JUNK_NAMES) if k != "size" else rng.choice([0, -1, 1 << 64, "1", 1.5])
    if rng.random() < 0.05:
        f["secondaryFiles"] = [junk_file(rng, st, depth + 1) for _ in range(2)] if depth < 3 else []
    if rng.random() < 0.05:
        f.pop("class", None)
    return f


def junk_directory(rng, st, depth=0):
    """A Directory object: a listing of Files and Directories, nested, with junk names."""
    d = {"class": "Directory", "basename": rng.choice([f"{MARK}-dir", *JUNK_NAMES[:12]])}
    if rng.random() < 0.1:
        d["location"] = junk_location(rng, st)
    if rng.random() < 0.2:
        d["path"] = rng.choice(JUNK_NAMES)
    if rng.random() < 0.1:
        d.pop("basename")
    n = rng.choice([0, 1, 2, 3, 5]) if depth < 4 else 0
    d["listing"] = [
        junk_directory(rng, st, depth + 1) if rng.random() < 0.3 else junk_file(rng, st, depth + 1) for _ in range(n)
    ]
    if depth == 0 and rng.random() < 0.1:  # a long listing, of one file over and over or of distinct ones
        one = {"class": "File", "contents": "x", "basename": f"{MARK}.txt"}
        d["listing"] = [one] * 3000 if rng.random() < 0.5 else [{**one, "basename": f"{MARK}{i}"} for i in range(3000)]
    if rng.random() < 0.05:
        d["listing"] = rng.choice(["x", None, {"a": 1}, [1, 2]])
    return d


def junk_cwl_value(rng, st, depth=0):
    """Any value a CWL job object might hold in an input's place."""
    r = rng.random()
    if r < 0.25:
        return junk_file(rng, st)
    if r < 0.35:
        return junk_directory(rng, st)
    if r < 0.45 and depth < 3:  # lists, huge ones among them
        n = rng.choice([0, 1, 3, 10])
        if rng.random() < 0.2:  # a huge list of something small (the spawn body's limit is 1 MiB)
            small = rng.choice(
                [1, "a", None, {"class": "File", "contents": "x"}, {"class": "File", "location": st.upload}]
            )
            return [small] * rng.choice([1000, 20000, 100000])
        return [junk_cwl_value(rng, st, depth + 1) for _ in range(n)]
    if r < 0.55:  # nested objects ("records"), deep ones too
        v = junk_json(rng)
        for _ in range(rng.choice([1, 5, 100, 400])):  # deeper: json.dumps recurses
            v = {rng.choice(["a", "class", "fields", "type", "listing"]): v}
        return v
    return rng.choice(
        [
            *JUNK_NAMES,
            0,
            -1,
            1 << 31,
            1 << 63,
            1 << 64,
            1.5,
            float("1e308"),
            True,
            False,
            None,
            "a",
            "b",
            "c",
            "",
            "\u0000",
            "é" * 1000,
            {},
            [],
        ]
    )


def cwl_body(rng, st):
    """A job object for one of the CWL tools: its real input names with
    values of the right type, of wrong types, or junk; sometimes other names."""
    names = list(FUZZ_TOOL["inputs"]) + ["files", "name", "count", "tags", "keys", "csv", "mode", "data", "text"]
    inputs = {}
    for n in rng.sample(names, rng.randrange(1, 6)):
        r = rng.random()
        if r < 0.25 and n in ("f", "u", "data"):
            inputs[n] = {"class": "File", "contents": "ok", "basename": rng.choice(["ok.txt", *JUNK_NAMES])}
        elif r < 0.3 and n in ("fs", "files"):
            inputs[n] = [junk_file(rng, st) for _ in range(rng.choice([1, 3, 30]))]
        elif r < 0.35 and n == "d":
            inputs[n] = junk_directory(rng, st)
        else:
            inputs[n] = junk_cwl_value(rng, st)
    if rng.random() < 0.05:
        inputs[rng.choice(["", "x" * 300, "..", f"{MARK}\n", "$(inputs.f)"])] = 1
    body = {"inputs": inputs}
    if rng.random() < 0.05:
        body = rng.choice([{"inputs": junk_cwl_value(rng, st)}, {"job": inputs}, inputs, [inputs]])
    return json.dumps(body).encode()


def near_valid_cwl_body(rng, st, program):
    """A job object of the right shape for ``program``, its names (basenames,
    strings that become file names or arguments) taken from JUNK_NAMES: what
    passes the checks is staged and run."""

    def name():
        return rng.choice([*JUNK_NAMES, "ok.txt"])

    def file():
        f = {"class": "File", "basename": name()}
        r = rng.random()
        if r < 0.5:
            f["contents"] = "x"
        elif r < 0.75:
            f["location"] = rng.choice([st.upload, st.cwl_file])
        else:
            f["base64"] = "eA=="
        if rng.random() < 0.2:
            f["path"] = name()
        return f

    def directory(depth=0):
        listing = [file() for _ in range(rng.randrange(3))]
        if depth < 2 and rng.random() < 0.5:
            listing.append(directory(depth + 1))
        return {"class": "Directory", "basename": name(), "listing": listing}

    if program == "echo":
        inputs = {"message": name()}
    elif program == "cat":
        inputs = {"files": [file() for _ in range(rng.choice([1, 2, 5]))]}
    elif program == "options":
        inputs = {
            "name": name(),
            "verbose": rng.random() < 0.5,
            "tags": [name()],
            "keys": [name(), name()],
            "csv": [1, -2],
            "mode": rng.choice(["fast", "slow"]),
            "data": file(),
            "note": name(),
        }
    else:
        every = {
            "f": file(),
            "fs": [file() for _ in range(rng.randrange(4))],
            "d": directory(),
            "s": name(),
            "ss": [name() for _ in range(rng.randrange(3))],
            "u": rng.choice([1, name(), file()]),
            "b": rng.random() < 0.5,
            "e": "a",
            "x": junk_json(rng),
        }
        inputs = {k: v for k, v in every.items() if rng.random() < 0.6}
    return json.dumps({"inputs": inputs}).encode()


# ---- OGC API - Processes execute requests -------------------------------------------


def prefer(rng):
    """A `Prefer` header's value: respond-async as RFC 7240 allows it, or not quite."""
    return rng.choice(
        [
            "respond-async",
            "respond-async",
            "Respond-Async ",
            "return=minimal, respond-async; wait=10",
            "respond-async;" * 200,
            "respond-sync",
            "respond-asyncx",
            "wait=-1",
            "",
            ",,,",
            "\u00e9".encode().decode("latin-1"),
        ]
    )


def junk_href(rng, st):
    """A link's `href`: real files, loopback and refused hosts, `..`, file://, junk, huge."""
    return rng.choice(
        [
            st.upload,
            st.cwl_file,
            f"{st.url}/jobs/{st.job}/files/result",
            f"{st.url}/jobs/{st.job}/files/../../keys",
            f"{st.url}/jobs/{st.cwl_job}/files/%2e%2e/%2e%2e/keys",
            f"{st.upload}/..",
            f"{st.url}/ogcapi/jobs/{st.job}/results",
            f"{st.url}/../../{MARK}",
            "http://127.0.0.1:1/x",
            "http://[::1]:1/x",
            "http://10.0.0.1/x",
            "http://169.254.169.254/latest/meta-data/",
            "http://0.0.0.0:1/",
            f"file:///tmp/{MARK}-href",
            "file:///etc/passwd",
            "/etc/passwd",
            f"../{MARK}",
            f"{MARK}.txt",
            "ftp://127.0.0.1/x",
            "data:text/plain,hello",
            "http://",
            "http://%00/",
            "http://127.0.0.1:99999/x",
            "http://127.0.0.1:1/" + "a" * rng.choice([10, 5000, 200000]),
            "",
            "\n",
            5,
            None,
            [st.upload],
            {"href": st.upload},
        ]
    )


def ogc_value(rng, st, depth=0):
    """An input's value as the standard writes them: plain, qualified, a link,
    a list of them, a CWL File, or nested junk."""
    r = rng.random()
    if r < 0.2:
        return rng.choice([1, -5, "7", "41", "-e", 1.5, True, None, "x" * 5000, "", *JUNK_NAMES[:8]])
    if r < 0.45:  # a qualified value, its parts given, left out or wrong
        q = {
            "value": rng.choice(["41", "NDE=", "***", "", "=" * 9, 41, None, [1], {"a": 1}, "x" * 70000]),
            "mediaType": rng.choice(["text/plain", "application/octet-stream", "", "x", 5, None]),
            "encoding": rng.choice(["base64", "BASE64", "binary", "utf-8", "", None, 5, ["base64"]]),
        }
        if rng.random() < 0.3:
            q["format"] = rng.choice(
                [
                    {"encoding": "base64"},
                    {"mediaType": "image/tiff", "encoding": "base64"},
                    {"encoding": 5},
                    "base64",
                    None,
                    [],
                ]
            )
        if rng.random() < 0.1:
            q[rng.choice(["schema", "href", "class", "x"])] = rng.choice([{}, "x", st.upload])
        for k in list(q):
            if rng.random() < 0.25:
                del q[k]
        return q
    if r < 0.7:  # a link
        link = {"href": junk_href(rng, st)}
        for k in ("type", "rel", "title", "hreflang"):
            if rng.random() < 0.15:
                link[k] = rng.choice(["application/json", "", 5, None, "x" * 1000])
        if rng.random() < 0.05:
            link["value"] = "41"  # a link and a value both
        return link
    if r < 0.82 and depth < 3:  # a list (of Files, for the CWL tools' File[])
        if rng.random() < 0.1:
            return [{"href": st.upload}] * rng.choice([1000, 20000])
        return [ogc_value(rng, st, depth + 1) for _ in range(rng.choice([0, 1, 2, 5]))]
    if r < 0.9:
        return junk_file(rng, st) if rng.random() < 0.7 else junk_directory(rng, st)
    return junk_json(rng)


def ogc_service_n(rng, st):
    """The `sum` service's `n`: small, or no number at all (a huge one is a denial of service of its own)."""
    return rng.choice(
        [
            rng.randrange(20),
            {"value": rng.randrange(20)},
            {"value": str(rng.randrange(20)), "mediaType": "text/plain"},
            {"value": "NA==", "encoding": "base64"},
            {"href": junk_href(rng, st)},
            "x",
            "1e3",
            None,
            [1, 2],
            {"a": 1},
            -1,
            1.5,
            True,
        ]
    )


def ogc_body(rng, st, process):
    """An execute request for ``process``: its inputs' names (and others)
    with values in every form the standard knows, and junk; `outputs`,
    `response`, `mode` and `subscriber`, right and wrong."""
    names = {
        "add": ["x", "y"],
        "sum": ["n", "params", "x"],
        "echo": ["message"],
        "cat": ["files"],
        "options": ["name", "verbose", "tags", "keys", "csv", "mode", "data", "note"],
    }.get(process, list(FUZZ_TOOL["inputs"]))
    outs = {"add": ["result"], "sum": ["result"], "fuzz": ["listing", "all"], "echo": ["out"], "cat": ["all"]}.get(
        process, ["line", "out", "said"]
    )
    inputs = {}
    for n in rng.sample(names, rng.randrange(len(names) + 1)) + (["z", "", "$x"] if rng.random() < 0.1 else []):
        inputs[n] = ogc_service_n(rng, st) if process == "sum" and n == "n" else ogc_value(rng, st)
    if process == "sum" and rng.random() < 0.2:  # any JSON as a service's parameters, but never a huge n
        inputs["params"] = junk_json(rng)
    body = {"inputs": inputs}
    if rng.random() < 0.4:
        modes = ["value", "reference", "Value", "", None, 5, "carrier-pigeon", {"x": 1}]
        body["outputs"] = rng.choice(
            [
                {},
                {n: {"transmissionMode": rng.choice(modes)} for n in rng.sample(outs, rng.randrange(1, len(outs) + 1))},
                {n: {} for n in outs},
                {"nope": {}},
                {rng.choice(outs): rng.choice([None, 5, "value", [], {"format": {"mediaType": "x"}}])},
                [outs[0]],
                "all",
                None,
            ]
        )
    if rng.random() < 0.4:
        body["response"] = rng.choice(["raw", "document", "Document", "", None, 5, ["raw"], {"raw": 1}])
    if rng.random() < 0.2:
        body["mode"] = rng.choice(["sync", "async", "auto", "ASYNC", "later", "", None, 1, ["async"]])
    if rng.random() < 0.05:
        body["subscriber"] = rng.choice(
            [{"successUri": junk_href(rng, st), "failedUri": junk_href(rng, st)}, None, "x", {"inProgressUri": 5}]
        )
    if rng.random() < 0.05:
        body = rng.choice([{"inputs": junk_json(rng)}, {"inputs": [inputs]}, [body], inputs, "x", None, 5])
    return json.dumps(body).encode()


def near_valid_ogc_body(rng, st, process):
    """An execute request of the right shape for ``process`` (a CWL tool's
    job object, its Files made links or qualified values now and then; the
    template's inputs in each form it takes; the service's small `n`), with
    `outputs`, `response` and `mode` as the standard has them: what passes
    the checks runs, synchronously or not."""
    if process == "add":
        inputs = {
            "x": rng.choice([1, "2", {"value": 3}, {"value": -4, "mediaType": "text/plain"}]),
            "y": rng.choice(
                [
                    "41",
                    41,
                    {"value": "41"},
                    {"value": "NDE=", "encoding": "base64"},
                    {"value": "NDE=", "format": {"mediaType": "text/plain", "encoding": "base64"}},
                    {"href": st.upload},
                    {"href": f"{st.url}/jobs/{st.job}/files/result"},
                ]
            ),
        }
        outputs = ["result"]
    elif process == "sum":
        inputs = {"n": rng.choice([rng.randrange(20), {"value": rng.randrange(20)}])} if rng.random() < 0.8 else {}
        outputs = ["result"]
    else:
        inputs = json.loads(near_valid_cwl_body(rng, st, process))["inputs"]

        def ogc_file(v):
            if isinstance(v, list):
                return [ogc_file(x) for x in v]
            if isinstance(v, dict) and v.get("class") == "File" and rng.random() < 0.5:
                return rng.choice(
                    [
                        {"href": v.get("location", st.upload)},
                        {"value": v.get("contents", "x")},
                        {"value": "eA==", "encoding": "base64", "mediaType": "application/octet-stream"},
                        v.get("contents", "x"),
                    ]
                )
            return v

        inputs = {k: ogc_file(v) for k, v in inputs.items()}
        outputs = {"echo": ["out"], "cat": ["all"], "options": ["line"]}.get(process, ["listing", "all"])
    body = {"inputs": inputs}
    if rng.random() < 0.5:
        wanted = rng.sample(outputs, rng.randrange(1, len(outputs) + 1))
        body["outputs"] = {n: {"transmissionMode": rng.choice(["value", "reference"])} for n in wanted}
    if rng.random() < 0.5:
        body["response"] = rng.choice(["raw", "document"])
    if rng.random() < 0.3:
        body["mode"] = rng.choice(["sync", "async", "auto"])
    return json.dumps(body).encode()


def body(rng, st, method, path):
    r = rng.random()
    if method in ("GET", "HEAD", "DELETE") and r < 0.7:
        return None
    inner = relayed(method, path)
    route = route_of(method, path if inner is None else inner)
    if route == "/rendezvous" and rng.random() < 0.7:
        return registration_body(rng, st)
    if route in ("/programs/{name}/jobs", "/programs/{name}/call") and rng.random() < 0.7:
        program = path.split("?")[0].rstrip("/").split("/")[-2]
        if program in CWL_PROGRAMS and rng.random() < 0.5:
            return near_valid_cwl_body(rng, st, program)
        return (cwl_body if program in CWL_PROGRAMS or rng.random() < 0.3 else inputs_body)(rng, st)
    if route == "/ogcapi/processes/{processID}/execution":
        process = path.split("?")[0].rstrip("/").split("/")[-2]
        # the service only ever gets these (the others may give it a huge n)
        if process == "sum" or rng.random() < 0.7:
            whole = (near_valid_ogc_body if rng.random() < 0.3 else ogc_body)(rng, st, process)
            return whole[: rng.randrange(len(whole))] if rng.random() < 0.1 else whole
    if r < 0.25:
        return binding_body(rng, st)
    if r < 0.4:
        return inputs_body(rng, st)
    if r < 0.45:
        return cwl_body(rng, st)
    if r < 0.55:
        whole = rng.choice([binding_body, inputs_body, cwl_body, registration_body])(rng, st)
        return whole[: rng.randrange(len(whole))]  # truncated JSON
    if r < 0.65:
        return json.dumps(junk_json(rng)).encode()
    if r < 0.75:
        return b"[" * rng.choice([10, 200, 100000])  # deep nesting
    if r < 0.95:
        return rng.randbytes(rng.choice([0, 1, 10, 1000, 100000]))
    return b"x" * ((1 << 20) + rng.randrange(2))  # about the limit


def method(rng, path):
    inner = RELAY.match(bare(path))
    p = bare(inner.group(2) or "/") if inner else bare(path)
    documented = [m.upper() for _, rx, item in DIRECT if rx.match(p) for m in item if m in METHODS]
    if documented and rng.random() < 0.75:
        return rng.choice(documented)
    return rng.choice(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO", "get"])


def registration(rng, keyed):
    """A relay registration, `POST /relay/NAME` (the fuzz drops a 101's connection at once)."""
    name = rng.choice(["lab", "lab", f"{MARK}{rng.randrange(3)}", "nobody", "a" * 65, "a%2Fb", "..", "", "é"])
    h = []
    if rng.random() < 0.8:
        h += [("Connection", rng.choice(["upgrade", "Upgrade", "keep-alive, upgrade", "close"]))]
    if rng.random() < 0.8:
        h += [("Upgrade", rng.choice(["mpiws-relay/1", "MPIWS-RELAY/1", "mpiws-relay/2", "mpiws-stream/1", ""]))]
    keys = [KEY_RELAY, KEY_LAB, KEY_FUZZ, KEY_RUN] if keyed else []
    r = rng.random()
    if r < 0.6 and keys:
        h.append(("Authorization", f"Bearer {rng.choice(keys)}"))
    elif r < 0.8:
        h.append(("Authorization", rng.choice(JUNK_AUTH)))
    return "POST", f"/relay/{quote(name, safe='%.')}", h, rng.choice([None, b"", b"x" * 10])


def focused(rng, st, keyed):
    """A request whose method, path and headers are right, so that its body
    reaches the deepest checks: a job of a program (a CWL tool's, mostly),
    an OGC execution (of a program or the service), or a rendezvous
    registration. (method, target, headers, body)."""
    key = rng.choice([KEY_FUZZ] * 6 + [KEY_RUN]) if keyed else rng.choice([st.token, None])
    h = [("Content-Type", "application/json")] + ([("Authorization", f"Bearer {key}")] if key else [])
    if rng.random() < 0.15:
        return "POST", "/rendezvous", h, registration_body(rng, st)
    if rng.random() < 0.35:
        process = rng.choice(OGC_PROCESSES)
        if rng.random() < 0.4:
            h.append(("Prefer", prefer(rng)))
        b = (near_valid_ogc_body if rng.random() < 0.6 else ogc_body)(rng, st, process)
        return "POST", f"/ogcapi/processes/{process}/execution", h, b
    program = rng.choice(CWL_PROGRAMS * 3 + ["add"])
    how = rng.choice(["jobs"] * 4 + ["call"])
    if program == "add":
        b = inputs_body(rng, st)
    else:
        b = near_valid_cwl_body(rng, st, program) if rng.random() < 0.6 else cwl_body(rng, st)
    return "POST", f"/programs/{program}/{how}", h, b


def remove_ended_jobs(url):
    """The fuzz's key removes its ended jobs (it may keep only so many):
    those the OGC face started too, jobs of the same table. (The service
    runs it started are domains, `ogc-...`: they end within
    --max-instance-time, and the endpoint keeps only so many ended ones.)"""
    path = urlparse(url).path
    status, data = call(url, "GET", f"{path}/jobs", key=KEY_FUZZ, timeout=30)
    assert status == 200, data
    for job in json.loads(data):
        if job["state"] in ("done", "failed", "killed"):
            answer = call(url, "DELETE", f"{path}/jobs/{job['id']}", key=KEY_FUZZ, timeout=30)
            assert answer and answer[0] in (200, 204, 404), answer


# ---- raw sockets ----------------------------------------------------------------


def raw_cases(url, st):
    """Malformed requests an HTTP client would never send: (name, bytes, stall)."""
    host = urlparse(url).netloc
    store = f"/domains/{st.domain}/ranks/0/messages"
    # From rank 1 with tag 1: what the `sum` rank 0 waits for, so a store that passes is received.
    head = f"POST {store} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {st.token}\r\nmpiws-source: 1\r\nmpiws-tag: 1\r\n"
    return [
        ("truncated request line", b"GET /ru", 0),
        ("request line only", b"GET / HTTP/1.1\r\n", 0),
        ("garbage", b"\x00\xff\x13garbage\r\n\r\n", 0),
        ("no version", b"GET /\r\n\r\n", 0),
        ("HTTP/0.9", b"GET /\n", 0),
        ("HTTP/3.0", b"GET / HTTP/3.0\r\n\r\n", 0),
        ("h2 preface then junk", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00" * 50, 0),
        ("huge header", f"GET / HTTP/1.1\r\nHost: {host}\r\nX: {'a' * 200000}\r\n\r\n".encode(), 0),
        ("thousands of headers", (f"GET / HTTP/1.1\r\nHost: {host}\r\n" + "X: y\r\n" * 5000 + "\r\n").encode(), 0),
        ("header without colon", f"GET / HTTP/1.1\r\nHost: {host}\r\nbroken\r\n\r\n".encode(), 0),
        ("body shorter than announced, then close", (head + "Content-Length: 100\r\n\r\n").encode() + b"x" * 10, 0),
        ("body that stalls, then closes", (head + "Content-Length: 100\r\n\r\n").encode() + b"x" * 10, 1.0),
        (
            "run body that stalls",
            f'POST /run HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{{"domain"'.encode(),
            1.0,
        ),
        (
            "upload that stalls",
            f"POST /files HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100000\r\n\r\n".encode() + b"z" * 1000,
            1.0,
        ),
        ("negative length", (head + "Content-Length: -1\r\n\r\nx").encode(), 0),
        ("length past u64", (head + "Content-Length: 99999999999999999999999\r\n\r\nx").encode(), 0),
        ("two lengths", (head + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nxx").encode(), 0),
        (
            "length and chunked",
            (head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n").encode(),
            0,
        ),
        ("bad chunk size", (head + "Transfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n").encode(), 0),
        (
            "chunk size past u64",
            (head + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\nx\r\n").encode(),
            0,
        ),
        ("chunked, cut off", (head + "Transfer-Encoding: chunked\r\n\r\n10\r\nabc").encode(), 0),
        (
            "chunked store with overflowing parts",
            (
                head
                + f"mpiws-parts: {1 << 40},{(1 << 64) - (1 << 40) + 1}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
            ).encode(),
            0,
        ),
        (
            "upgrade, then junk frames",
            (
                f"POST /domains/{st.domain}/ranks/0/stream HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {st.token}\r\nmpiws-source: 1\r\nConnection: upgrade\r\n"
                "Upgrade: mpiws-stream/1\r\nContent-Length: 0\r\n\r\n"
            ).encode()
            + os.urandom(200),
            0,
        ),
        (
            "relay registration with a body, then junk",
            (
                f"POST /relay/{MARK}r HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY_RELAY}\r\n"
                "Connection: upgrade\r\nUpgrade: mpiws-relay/1\r\nContent-Length: 5\r\n\r\nhello"
            ).encode()
            + os.urandom(200),
            0,
        ),
        (
            "relayed request with a chunked body cut off",
            f"POST /relay/lab/files HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY_FUZZ}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n10\r\nabc".encode(),
            0,
        ),
        (
            "relayed stream upgrade, then junk frames",
            (
                f"POST /relay/lab/domains/x/ranks/0/stream HTTP/1.1\r\nHost: {host}\r\n"
                "mpiws-source: 1\r\nConnection: upgrade\r\nUpgrade: mpiws-stream/1\r\nContent-Length: 0\r\n\r\n"
            ).encode()
            + os.urandom(200),
            0,
        ),
        (
            "pipelined junk after a good request",
            f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() + os.urandom(100),
            0,
        ),
    ]


def send_raw(url, data, stall):
    """Send ``data``, wait ``stall`` seconds, half-close; the status of any answer."""
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=RELAY_TIMEOUT) as s:
        try:
            s.sendall(data)
            time.sleep(stall)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while len(answer) < 64 and (more := s.recv(4096)):
                answer += more
        except OSError:  # reset, or closed before the half-close (a stalled request is not held)
            return None
    m = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return int(m.group(1)) if m else None


# Answers a false hidden endpoint gives the relay, over a connection it
# registered, and the statuses the relay may answer (None: it closes). The
# relay passes a well-formed head on as it comes, so a body cut short after
# it reaches the client cut short; an answer that is no answer to the
# request (a status hyper reads but HTTP has not, a 101 to a request that
# asked for no upgrade) is a 502.
FALSE_ANSWERS = [
    ("nothing (closes)", b"", {502}),
    ("junk", b"\x00\xffjunk\r\n\r\n", {502}),
    ("a status line only", b"HTTP/1.1 200 OK\r\n", {502}),
    ("a length it does not send", b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nabc", {200}),
    ("a bad chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", {200, None}),
    (
        "a 101 nobody asked for",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\njunk",
        {502},
    ),
    ("a 999 status", b"HTTP/1.1 999 What\r\nContent-Length: 0\r\n\r\n", {502}),
    ("a 103 status", b"HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n", {502}),
    ("a 500 of its own", b"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\nno", {500}),
    ("a header of 100 KB", b"HTTP/1.1 200 OK\r\nX: " + b"a" * 100000 + b"\r\nContent-Length: 0\r\n\r\n", {200}),
    ("two answers", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", {200}),
]


def false_hidden_endpoint(url, name, answer):
    """Register ``name`` at the relay with the `relay` key, then answer the
    first request the relay passes with ``answer`` and close; the socket's thread."""
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=RELAY_TIMEOUT)
    s.sendall(
        (
            f"POST /relay/{name} HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {KEY_RELAY}\r\n"
            "Connection: upgrade\r\nUpgrade: mpiws-relay/1\r\nContent-Length: 0\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        more = s.recv(4096)
        assert more, head
        head += more
    assert head.startswith(b"HTTP/1.1 101"), head

    def serve():
        with s:
            try:
                s.recv(65536)  # the relayed request's head
                s.sendall(answer)
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


# ---- the tests ------------------------------------------------------------------


class Both:
    def __init__(self, main, hidden):
        self.main, self.hidden = State(main.url), State(hidden.url)


def alive(servers, where):
    for s in servers:
        assert s.proc.poll() is None, f"the endpoint {s.url} died (exit {s.proc.returncode}) {where}"
        describe(s.url)
        log = s.stderr()
        assert "panicked" not in log, f"a panic in {s.url} {where}:\n{log[-3000:]}"


def report(counts):
    """Per route: requests and their statuses (a table, printed with -s)."""
    lines = [f"{'route':<58} {'requests':>8}  statuses"]
    for route in sorted(counts):
        c = counts[route]
        total = sum(c.values())
        lines.append(f"{route:<58} {total:>8}  " + " ".join(f"{k}:{v}" for k, v in sorted(c.items(), key=str)))
    return "\n".join(lines)


def test_random_requests_leave_the_endpoints_alive_and_answer_no_undocumented_5xx(endpoints):
    main, hidden, base = endpoints
    print(f"MPIWS_FUZZ_HTTP_SEED={SEED} MPIWS_FUZZ_HTTP_REQUESTS={REQUESTS}")
    rng = random.Random(SEED)
    sts = Both(main, hidden)
    works = [main.work, hidden.work]
    outside = files_outside(base, works)
    counts = defaultdict(Counter)
    statuses = Counter()
    fives = {}  # (route, status, its message's shape): an example request
    started = time.monotonic()
    deadline = started + max(90.0, REQUESTS * 0.1)
    keyed = True
    before = None
    for i in range(REQUESTS):
        if i % BATCH == 0:
            # A batch either may send endpoint keys (not the admin's) or sends none.
            keyed = rng.random() < 0.6
            before = None if keyed else (snapshot(main), snapshot(hidden))
        kind = rng.random()
        if kind < 0.02:
            m, t, h, b = registration(rng, keyed)
            st, lie, timeout = sts.main, None, RELAY_TIMEOUT
            route = "/relay/{name}"
        elif kind < 0.17:  # a job (mostly of a CWL tool) or a rendezvous registration, well-formed but for its body
            relayed = rng.random() < 0.3
            st = sts.hidden if relayed else sts.main
            m, t, h, b = focused(rng, st, keyed)
            t = f"/relay/lab{t}" if relayed else t
            lie, timeout = None, RELAY_TIMEOUT if relayed else TIMEOUT
            route = route_of(m, t)
        else:
            t = target(rng, sts)
            relayed = t.startswith("/relay/")
            st = sts.hidden if relayed else sts.main
            m = method(rng, t)
            h = headers(rng, st, keyed)
            b = body(rng, st, m, t)
            lie = None
            if b is not None and rng.random() < 0.1:
                lie = max(0, len(b) + rng.choice([-5, -1, 1, 100, 1 << 40]))
            timeout = RELAY_TIMEOUT if relayed else TIMEOUT
            route = route_of(m, t) or "(undocumented)"
        where = f"at request {i} (seed {SEED}): {m} {t[:200]} headers={[(k, v[:80]) for k, v in h]} body={(b or b'')[:200]!r} announce={lie}"
        try:
            answer = call(main.url, m, t, b, h, content_length=lie, timeout=timeout)
            if answer is None:
                counts[route]["closed"] += 1
        except (socket.timeout, TimeoutError):
            # A body announced and never sent (a longer Content-Length, or
            # Transfer-Encoding without chunks) is waited for, up to the
            # endpoint's --body-timeout (longer than this client waits).
            lied = (lie is not None and lie > len(b)) or any(k == "Transfer-Encoding" for k, _ in h)
            assert lied or may_wait(m, t, h), f"no answer within {timeout} s {where}"
            answer = None
            counts[route]["timeout"] += 1
        if answer is not None:
            status, data = answer
            statuses[status] += 1
            counts[route][status] += 1
            if status == 201 and route.endswith("/ogcapi/processes/{processID}/execution"):
                st.ogc_jobs.append(json.loads(data)["jobID"])  # the fuzz's key's: its status, results, dismissal
                del st.ogc_jobs[:-20]
            if status >= 500:
                assert status in documented_5xx(m, t), f"undocumented {status} {where}: {data[:300]!r}"
                try:
                    e = json.loads(data)
                    reason = (
                        e["detail"] if "detail" in e else e["error"]["message"]
                    )  # the OGC face's exceptions: detail
                except (ValueError, KeyError, TypeError):
                    reason = data[:100].decode(errors="replace")
                reason = re.sub(r'"[^"]*"|\S*[0-9]\S*', "_", reason)  # its names and numbers out: one line per kind
                fives.setdefault((route, status, reason), f"{m} {t[:100]}")
        if i % BATCH == BATCH - 1 or i == REQUESTS - 1:
            alive([main, hidden], where)
            if keyed:
                for s in (main, hidden):
                    remove_ended_jobs(s.url)
            if before is not None:
                for s, was in zip((main, hidden), before):
                    assert_nothing_appeared(was, snapshot(s), f"in the keyless batch ending {where}")
        assert time.monotonic() < deadline, f"the fuzz ran out of time {where}"
    alive([main, hidden], "at the end")
    for st, s in ((sts.main, main), (sts.hidden, hidden)):  # what the admin made is still there
        now = snapshot(s)
        assert st.domain in now["domains"] and st.job in now["jobs"] and st.cwl_job in now["jobs"], now
    new = files_outside(base, works) - outside
    assert not new, f"files outside the work directories: {sorted(new)[:20]}"
    took = time.monotonic() - started
    print(f"{REQUESTS} requests in {took:.0f} s ({REQUESTS / took:.0f}/s); statuses: {dict(sorted(statuses.items()))}")
    print(report(counts))
    print("5xx answers (documented ones), by message, with an example:")
    for (route, status, reason), example in sorted(fives.items(), key=str):
        print(f"  {status} {route}: {reason[:110]}  e.g. {example}")
    documented = {t for t, _, _ in DIRECT} | {"/relay/{name}"}
    missed = documented - set(counts)
    if REQUESTS >= 2000:
        assert not missed, f"routes the fuzz did not reach: {sorted(missed)}"
        relayed = {r for r in counts if r.startswith("/relay/{name}/")}
        assert len(relayed) >= len(DIRECT) // 2, sorted(relayed)
    # The fuzz reached past the first checks: refusals and successes both.
    assert statuses[400] > 0 and statuses[404] > 0 and any(200 <= s < 300 for s in statuses)


def test_raw_socket_junk_leaves_the_endpoints_alive(endpoints):
    main, hidden, _ = endpoints
    st = State(main.url)
    before = (snapshot(main), snapshot(hidden))
    for name, data, stall in raw_cases(main.url, st):
        status = send_raw(main.url, data, stall)
        assert status is None or status < 500 or status in (502, 503), f"{name}: answered {status}"
        alive([main, hidden], f"after raw case {name!r}")
    for s, was in zip((main, hidden), before):
        assert_nothing_appeared(was, snapshot(s), "after the raw cases")


def relayed_status(url, method, name, body=b""):
    """The status the relay answers ``method /relay/NAME/jobs`` with (None: no answer)."""
    u = urlparse(url)
    head = f"{method} /relay/{name}/jobs HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {KEY_FUZZ}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n" if body else "\r\n"
    with socket.create_connection((u.hostname, u.port), timeout=RELAY_TIMEOUT) as s:
        s.sendall(head.encode() + body)
        m = re.match(rb"HTTP/1\.[01] (\d{3})", s.recv(64))
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_request_over_a_connection_that_closes_unanswered_goes_again_over_another_if_it_may(endpoints, method):
    """The endpoint behind may close an idle connection just as the relay takes
    it: a GET is sent again over another idle one (RFC 9110 lets a proxy repeat
    an idempotent request); a POST with a body is not repeated (502)."""
    main, hidden, _ = endpoints
    name = f"{MARK}again{method}"
    ok = false_hidden_endpoint(main.url, name, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    time.sleep(0.3)  # the relay takes the most recent idle connection first: this one
    closes = false_hidden_endpoint(main.url, name, b"")
    time.sleep(0.3)
    status = relayed_status(main.url, method, name, b"{}" if method == "POST" else b"")
    closes.join(RELAY_TIMEOUT)
    assert status == (200 if method == "GET" else 502), status
    if method == "POST":
        assert relayed_status(main.url, "GET", name) == 200  # the other connection is still there
    ok.join(RELAY_TIMEOUT)
    alive([main, hidden], f"after a relayed {method} over a connection that closed")


@pytest.mark.parametrize("case", range(len(FALSE_ANSWERS)), ids=[n for n, _, _ in FALSE_ANSWERS])
def test_a_false_hidden_endpoint_gets_the_relay_to_answer_502(endpoints, case):
    main, hidden, _ = endpoints
    name, answer, expected = FALSE_ANSWERS[case]
    t = false_hidden_endpoint(main.url, f"{MARK}{case}", answer)
    host = urlparse(main.url).netloc
    request = f"GET /relay/{MARK}{case}/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY_FUZZ}\r\n\r\n"
    with socket.create_connection(
        (main.url.split("//")[1].split(":")[0], urlparse(main.url).port), timeout=RELAY_TIMEOUT
    ) as s:
        s.sendall(request.encode())  # no half-close: a client that waits for its answer
        head = s.recv(64)
    m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    status = int(m.group(1)) if m else None
    t.join(RELAY_TIMEOUT)
    assert status in expected, (name, status)
    alive([main, hidden], f"after the false hidden endpoint's {name!r}")
