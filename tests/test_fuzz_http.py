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
(junk, truncated JSON, bindings, rendezvous registrations, session
requests and job inputs with absurd fields, jobs in a session or none
naming session files by junk names, CWL job objects with wrong types, huge lists, nested
objects, Files and Directories whose location, path, basename or contents
are junk, `..`, control characters, absolute paths; OGC API - Processes
execute requests with plain, qualified and junk-encoded values, links to
junk URLs, `..`, file:// and huge ones, lists, nested junk, junk `outputs`,
`response`, `mode` and `subscriber`, sometimes `Prefer: respond-async`;
SOAP 1.2 requests to the three SOAP faces: a program's, `POST
/programs/{name}` (near-valid operations, plain and MTOM; well-formed
envelopes with junk operations and children), the service interface's,
`POST /` (`run` with junk bindings: domains, ranks past u32, huge
endpoint lists, junk tokens and services, params that are junk JSON texts
or none; `status` and `cancel` of real and junk ranks; other operations),
and a running rank's, `POST /domains/{domain}/ranks/{rank}` (`store` and
`bStore` with junk sources, tags past 2^31, contexts and sequence numbers
past u64, forward lists long, short and wrong, payloads of junk base64 or
about the message limit, MTOM parts with junk includes), each with and
without the right key or token; and for all three malformed XML
(truncated, unbalanced, other encodings, huge attributes, nesting past 64
levels, over 100,000 elements, DTDs with entity expansion and external
entities, processing instructions, undeclared prefixes, CDATA, character
references to no character or to characters XML forbids, raw control
characters), SOAP 1.1 envelopes, mustUnderstand headers, MTOM packages
with junk boundaries, missing or duplicate Content-IDs, a missing or wrong
start, parts without CRLF, junk base64, xop:Include with junk hrefs, and
random content types); relay registrations (with and without the
upgrade, any key); and raw-socket junk (truncated request lines,
malformed framing, bodies that stall and close, a "hidden endpoint" that
answers the relay with junk). Each endpoint keeps a running rank (made
again with the admin key at each batch once it ended) for stores to reach
past the instance's checks, and a session of the fuzz's key (made again if
the fuzz deleted it) for the session routes to reach past theirs; after a
batch that may send keys, the fuzz's key deletes the other sessions it made.
After every batch both endpoints must still answer `GET /`; no answer may
be a 5xx the document does not list for that route; an answer of a SOAP
face must be well-formed XML 1.0 (no character it forbids), a SOAP 1.2
envelope, a fault (its code and status the HTTP status's) for an error,
its operation's answer (in its WSDL's namespace) otherwise; neither
server's stderr may show a panic; a batch sent without an endpoint key
may create no domain, job, upload, session or registration (the OGC face's jobs
are jobs of the same table, its service runs domains `ogc-...`; a SOAP
`run`, as `POST /run`, makes a domain only with a key: the same snapshot
sees them); at the end no file the fuzz named may exist outside the
endpoints' work directories. The per-route counts of requests and
statuses are printed at the end (pytest -s).

MPIWS_FUZZ_HTTP_REQUESTS sets how many requests (default 3,000, about 20
seconds; benchmarks/fuzz/run is the long run); MPIWS_FUZZ_HTTP_SEED replays
a run (the seed is printed)."""

import base64
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
import xml.etree.ElementTree as ET
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


def asks_relay_upgrade(headers):
    """Whether ``headers`` ask for the relay's upgrade (`Connection: upgrade`, `Upgrade: mpiws-relay/1`)."""
    h = {k.lower(): v.lower() for k, v in headers}
    return h.get("upgrade") == "mpiws-relay/1" and "upgrade" in h.get("connection", "")


def relayed(method, target, headers=None):
    """The path a relay passes on for this request (`/relay/NAME/PATH`: `/PATH`;
    `/relay/NAME`: `/`, but a POST asking the relay's upgrade, a registration;
    without ``headers``, any POST there is taken for one), or None."""
    m = RELAY.match(bare(target))
    if not m:
        return None
    if m.group(2) is None:
        registers = method.upper() == "POST" and (headers is None or asks_relay_upgrade(headers))
        return None if registers else "/"
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


def documented_5xx(method, target, headers=None):
    """The 5xx statuses docs/openapi.yaml lists for this request's route (none
    for a route or method it does not document). Behind the relay: the
    relay's own (502, 503) and those of the route behind it."""
    inner = relayed(method, target, headers)
    if inner is not None:
        return {502, 503} | documented_5xx(method, inner)
    path = bare(target)
    for _, rx, item in ROUTES:
        if rx.match(path) and method.lower() in item:
            return {int(code) for code in item[method.lower()]["responses"] if str(code).startswith("5")}
    return set()


def may_wait(method, target, headers, body=None):
    """Requests that by design wait for something (long polls, a synchronous
    store, a program call, over SOAP too: a program's call, a rank's synchronous store): a client timeout is
    their answer, not a hang."""
    path = target.split("?", 1)[0]
    return (
        "wait=" in target
        or path.endswith(("/matched", "/call"))
        or bare(path).endswith("/execution")  # an OGC execution, synchronous unless asked otherwise
        or any(k.lower() == "mpiws-sync" for k, _ in headers)
        or "/stream" in path
        or (soap_route(method, target) == "program" and re.search(rb"<(\w+:)?call[\s/>]", body or b"") is not None)
        # a synchronous SOAP store: answered once a receive took it
        or (
            soap_route(method, target) == "rank"
            and re.search(rb"<(\w+:)?sync>\s*(true|1)\s*<", body or b"") is not None
        )
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
        "sessions": listing("sessions"),
    }
    if endpoint.rendezvous:
        status, r = admin(endpoint.url, "GET", "/rendezvous")
        assert status == 200, r
        state["registered"] = r["registered"]
    return state


def assert_nothing_appeared(before, after, where):
    """Requests without an endpoint key (none, junk ones, a domain's token)
    add no domain, job, upload, session or rendezvous entry and change nothing deployed."""
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
    own, or the hidden one's at the relay); and a session of the fuzz's key
    (only its owner gets past a session's first check) with a file in it."""

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
        # Jobs the SOAP face spawned with the fuzz's key: reached again by running, results and kill.
        self.soap_jobs = []
        # A running rank for stores (JSON and SOAP) to reach past the instance's checks: `refresh`.
        self.live, self.born = None, 0.0
        # The fuzz's key's session, made again if the fuzz deleted it (or it expired): `refresh`.
        self.session = None
        self.refresh()

    def refresh(self):
        """Made again (the last one cancelled) once it is 2 s old or ended: a running rank 0 of a `sum`
        domain of 8 ranks, with the same token, made with the admin key. The other ranks never come: it
        waits for rank 1 (tag 1), and fails once rank 1 has stayed unreachable for the failure timeout
        (3 s); junk filed as what it waits for ends it too. The session too, if it is gone, and its file
        `seeded` written again."""
        self.refresh_session()
        path = urlparse(self.url).path
        if self.live is not None:
            status_path = f"{path}/domains/{self.live}/ranks/0"
            if time.monotonic() - self.born < 2.0:
                status, data = call(self.url, "GET", status_path, key=self.token, timeout=30)
                if status == 200 and json.loads(data)["state"] == "running":
                    return
            call(self.url, "DELETE", status_path, key=self.token, timeout=30)
        self.live, self.born = secrets.token_hex(6), time.monotonic()
        binding = {
            "domain": self.live,
            "rank": 0,
            "endpoints": [self.url] * 8,
            "token": self.token,
            "service": "sum",
            "params": {"n": 10},
        }
        status, body = admin(self.url, "POST", "/run", binding)
        assert status == 201, body
        deadline = time.monotonic() + 30
        while body["state"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.02)
            status, data = call(self.url, "GET", f"{path}/domains/{self.live}/ranks/0", key=self.token, timeout=30)
            body = json.loads(data)

    def refresh_session(self):
        path = urlparse(self.url).path
        if (
            self.session is None
            or call(self.url, "GET", f"{path}/sessions/{self.session}", key=KEY_FUZZ, timeout=30)[0] != 200
        ):
            status, data = call(self.url, "POST", f"{path}/sessions", b"", key=KEY_FUZZ, timeout=30)
            assert status == 201, data
            self.session = json.loads(data)["id"]
        status, data = call(
            self.url,
            "PUT",
            f"{path}/sessions/{self.session}/files/seeded",
            b"41",
            [("content-type", "application/octet-stream")],
            key=KEY_FUZZ,
            timeout=30,
        )
        assert status in (201, 409), data  # 409: a job of the fuzz's made a directory of that name


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


def segment(rng, name, st, template=""):
    """A path parameter (of the route ``template``): the real one, a near miss, or junk."""
    ids = [st.job, st.cwl_job, st.upload.rsplit("/", 1)[-1], st.session]
    names = ["add", "x", "y", "result", "listing.txt", *CWL_PROGRAMS]
    if template.startswith("/sessions/"):  # mostly the fuzz's key's session, and the files a session job makes
        ids, names = [st.session] * 6 + ids, ["seeded"] * 3 + ["y", "result", f"{MARK}.txt", "-rf", ".x"] + names
    real = {
        "domain": rng.choice([st.domain, st.live]),
        "rank": rng.choice(["0", "1"]),
        "source": rng.choice(["0", "1"]),
        "seq": str(rng.randrange(4)),
        "name": rng.choice(names),
        "id": rng.choice(ids),
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
        path = re.sub(r"{(\w+)}", lambda m: segment(rng, m.group(1), st, template), template)
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
                    "sessions",
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
    if rng.random() < 0.3:  # in a session (mostly the fuzz's key's own), its files named, junk names among them
        body["session"] = rng.choice([st.session] * 6 + ["0" * 32, st.job, "", None, 5, ["x"], "../" + st.session])
        named = rng.choice(["seeded", "seeded", "y", "result", *JUNK_NAMES, 5, None, ""])
        r = rng.random()
        if r < 0.4:
            body["inputs"]["y"] = {"session": named}
        elif r < 0.6:
            body["inputs"]["y"] = {rng.choice(["base64", "url"]): rng.choice(["NDE=", st.upload]), "session": named}
        if rng.random() < 0.5:
            body["inputs"]["result"] = {"session": rng.choice(["out", "seeded", *JUNK_NAMES])}
    elif rng.random() < 0.05:  # a session file outside a session
        body["inputs"]["y"] = {"session": "seeded"}
    if rng.random() < 0.2:
        body["inputs"][rng.choice(["z", "result", ""])] = 1
    if rng.random() < 0.1:
        body = {"inputs": junk_json(rng)}
    return json.dumps(body).encode()


def session_body(rng):
    """What `POST /sessions` is asked: a quota and an idle time, absurd ones among them."""
    b = {
        "disk": rng.choice([1, 1000, 1 << 20, 5 << 30, (5 << 30) + 1, 0, -1, 1 << 64, 1.5, "1", None, [1]]),
        "idle": rng.choice([1, 60, 3600, 3601, 0, -1, 1e-9, float("inf"), float("nan"), "soon", None]),
    }
    for k in list(b):
        if rng.random() < 0.3:
            del b[k]
    if rng.random() < 0.1:
        b[rng.choice(["colour", "", "inputs", "session"])] = 1
    if rng.random() < 0.05:
        return json.dumps(rng.choice([[b], junk_json(rng), "x" * 5000])).encode()
    return json.dumps(b).encode()


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


# ---- SOAP 1.2 requests: a program's operations (POST /programs/{name}) ----------------

SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
XOP = "http://www.w3.org/2004/08/xop/include"
FAULT = "urn:mpiws:fault"
SOAP_OPERATIONS = ["call", "spawn", "running", "results", "kill"]
#: Each program's inputs by XML name (a CWL name that is no XML name gets `_`), and what each takes.
SOAP_INPUTS = {
    "add": {"x": "int", "y": "file"},
    "fuzz": {
        "f": "file",
        "fs": "file",
        "d": "text",
        "s": "text",
        "ss": "text",
        "n": "int",
        "x": "text",
        "e": "text",
        "u": "text",
        "b": "bool",
    },
    "cat": {"files": "file"},
    "options": {
        "name": "text",
        "count": "int",
        "ratio": "float",
        "verbose": "bool",
        "quiet": "bool",
        "tags": "text",
        "keys": "text",
        "csv": "int",
        "mode": "text",
        "note": "text",
        "data": "file",
    },
    "echo": {"message": "text"},
}
#: Characters XML 1.0 forbids: refused in a request (a 400 fault), never in an answer (U+FFFD in their place).
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
BAD_CHAR_REFS = ["&#0;", "&#1;", "&#x1b;", "&#xD800;", "&#xDFFF;", "&#xFFFE;", "&#xFFFF;", "&#x110000;"]
BAD_CHAR_REFS += ["&#99999999999999999999;", "&#x;", "&#-1;", "&#x-1;", "&#1a;", "&#;", "&#65"]


def xml_text(s):
    """Text as XML content (the five predefined entities where needed)."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def junk_xml_text(rng):
    """A text node: plain, escaped, CDATA, character references (valid and not), entities (none declared)."""
    return rng.choice(
        [
            "1",
            "41",
            " 7 ",
            "-5",
            "1e3",
            "1.5",
            "nan",
            "inf",
            "true",
            "",
            "x" * rng.choice([10, 5000]),
            xml_text(rng.choice(JUNK_NAMES)),
            "<![CDATA[<raw> & ]]>",
            "<![CDATA[41]]>",
            "4<![CDATA[1]]>",
            "&#52;&#49;",
            "&#x34;1",
            "&lt;&gt;&amp;&quot;&apos;",
            rng.choice(BAD_CHAR_REFS),
            "&nbsp;",
            "&unknown;",
            "é",
            "\u202e",
            "\ud7ff",
            "NDE=",
            "***",
        ]
    )


def xop_include(rng, st, attachments):
    """An xop:Include of an MTOM part, sent (in ``attachments``) or not, with a good or junk href, in XOP's
    namespace or not."""
    cid = rng.choice(["part1@fz", "a b", "é", "x" * 300, "root@fz", MARK])
    if rng.random() < 0.8:
        attachments[cid] = rng.choice([b"41", b"\x00\xff\x01", os.urandom(rng.choice([1, 100, 5000])), b""])
    href = rng.choice(
        [
            "cid:" + quote(cid, safe="@"),
            "cid:" + quote(cid, safe="@"),
            "cid:%ZZ",
            "cid:%",
            "cid:%e9",
            "cid:%C3%A9",
            "cid:%+1",
            "cid:%00",
            "cid:",
            "CID:" + cid,
            "cid:root@fz",
            "http://127.0.0.1:1/x",
            f"file:///tmp/{MARK}-xop",
            st.upload,
            "",
            "cid:" + "%41" * 2000,
        ]
    )
    attr = f' href="{xml_text(href)}"' if rng.random() < 0.9 else ""
    prefix = rng.choice([f'xop:Include xmlns:xop="{XOP}"'] * 3 + [f'Include xmlns="{XOP}"', "xop:Include", "Include"])
    return f"<{prefix}{attr}/>"


def soap_file(rng, st, attachments):
    """A file input's children: its `value` (text, base64, an MTOM part's xop:Include) or `url`; both, neither, junk."""
    r = rng.random()
    if r < 0.25:
        return f"<value>{rng.choice(['NDE=', 'eA==', '***', '', '=' * 9, 'NDE', 'N D E =', '41'])}</value>"
    if r < 0.45:  # an xop:Include, of a part sent or not, with a good or junk href
        return f"<value>{xop_include(rng, st, attachments)}</value>"
    if r < 0.7:
        return f"<url>{xml_text(str(junk_location(rng, st)))}</url>"
    if r < 0.8:
        return f"<value>{junk_xml_text(rng)}</value><url>{xml_text(st.upload)}</url>"
    return rng.choice(["", junk_xml_text(rng), "<value/>", "<url/>", "<value><value>1</value></value>", "<z>1</z>"])


def soap_operation(rng, st, program, attachments):
    """An operation element for ``program``: mostly one of its five in its namespace, with its
    inputs (or a jobId) in every form, and junk children; sometimes another name or namespace.
    Half of them tame: each input once, of its kind, junk only in a file's (its value, URL, part)."""
    tame = rng.random() < 0.5
    ns = f"urn:mpiws:program:{program}"
    if not tame and rng.random() < 0.3:
        ns = rng.choice(["urn:mpiws:program:add", "urn:mpiws:program:", "", "urn:x", SOAP12, ns + " ", ns.upper()])
    name = rng.choice(SOAP_OPERATIONS * 6 + ([] if tame else ["Call", "callResponse", "run", "_call", "x" * 300]))
    children = []
    if name in ("call", "spawn") or rng.random() < 0.1:
        ports = SOAP_INPUTS.get(program, SOAP_INPUTS["fuzz"])
        for port in rng.sample(list(ports), min(len(ports), rng.choice([0, 1, 1, 1, 2, 3, 99]))):
            for _ in range(1 if tame else rng.choice([1, 1, 1, 2, 3])):  # a list's elements repeat; others twice
                kind = ports[port] if tame or rng.random() < 0.8 else rng.choice(["int", "file", "text", "bool"])
                if kind == "file":
                    inner = soap_file(rng, st, attachments)
                elif tame:
                    inner = {"int": "2", "float": "1.5", "bool": "true"}.get(kind, rng.choice(["a", "ok", "b"]))
                else:
                    inner = junk_xml_text(rng)
                    if kind == "bool" and rng.random() < 0.6:
                        inner = rng.choice(["true", "false", "1", "0", "yes", "TRUE"])
                children.append((port, inner))
    if name in ("running", "results", "kill") or rng.random() < 0.1:
        for _ in range(1 if tame else rng.choice([1, 1, 1, 0, 2])):
            job = rng.choice(
                [*st.soap_jobs[-5:], *st.soap_jobs[-5:], st.job, st.cwl_job, "0" * 32, "", " " * 3, "x" * 5000]
                + [f" {st.job} ", st.job.upper(), "../" + st.job, "&#48;" * 32]
            )
            children.append(("jobId", job))
        if rng.random() < 0.5:
            children.append(("byReference", rng.choice(["true", "1", "false", "0", "yes", "", "<b/>"])))
    for _ in range(0 if tame else rng.choice([0] * 8 + [1, 3])):
        children.append((rng.choice(["z", "jobId", "value", "url", "Include", "_1st", "x" * 200]), junk_xml_text(rng)))
    if rng.random() < 0.2:
        rng.shuffle(children)
    elif rng.random() < 0.5:  # files first: a refusal names the first input it refuses
        children.sort(key=lambda c: "<value>" not in c[1] and "<url>" not in c[1])
    return element_of(rng, ns, name, children)


def soap_header(rng):
    """A SOAP Header: blocks marked mustUnderstand (true, 1: a fault) or not, in either SOAP's namespace."""
    blocks = []
    for _ in range(rng.choice([0, 1, 1, 2, 50])):
        must = rng.choice(
            [
                "",
                ' s:mustUnderstand="true"',
                ' s:mustUnderstand="1"',
                ' s:mustUnderstand="false"',
                ' s:mustUnderstand="0"',
                ' s:mustUnderstand="maybe"',
                ' s:relay="true"',
                f' e:mustUnderstand="1" xmlns:e="{SOAP11}"',
            ]
        )
        name = rng.choice(["session", "Security", "To", "x" * 200])
        blocks.append(f'<h:{name} xmlns:h="urn:h"{must}>{junk_xml_text(rng)}</h:{name}>')
    return "<s:Header>" + "".join(blocks) + "</s:Header>"


def soap_document(rng, operation):
    """An envelope around ``operation``: SOAP 1.2 (mostly), 1.1 or none; with a Header now and then;
    a Body of one element, or of none, two or text."""
    ns = rng.choice([SOAP12] * 10 + [SOAP11, SOAP11, "", "urn:x", SOAP12 + "/"])
    header = soap_header(rng) if rng.random() < 0.25 else ""
    r = rng.random()
    body = operation if r < 0.9 else rng.choice(["", operation * 2, "text", f"{operation}<x/>", "<!-- only -->"])
    if rng.random() < 0.05:  # the Body first, the Header after, or the Body twice
        doc = f'<s:Envelope xmlns:s="{ns}"><s:Body>{body}</s:Body>{header}<s:Body/></s:Envelope>'
    elif rng.random() < 0.05:
        doc = f'<s:Envelope xmlns:s="{ns}">{header}</s:Envelope>'  # no Body
    else:
        doc = f'<s:Envelope xmlns:s="{ns}">{header}<s:Body>{body}</s:Body></s:Envelope>'
    if rng.random() < 0.1:  # the default namespace, or another prefix
        doc = doc.replace("<s:", "<soap:").replace("</s:", "</soap:").replace("xmlns:s=", "xmlns:soap=")
        doc = doc.replace("s:mustUnderstand", "soap:mustUnderstand")
    if rng.random() < 0.3:
        decl = rng.choice(
            [
                '<?xml version="1.0" encoding="UTF-8"?>',
                "<?xml version='1.0'?>",
                '<?xml version="1.1"?>',
                '<?xml version="2.0"?>',
                '<?xml version="1.0" encoding="ISO-8859-1"?>',
                '<?xml version="1.0" encoding="EBCDIC-junk"?>',
                '<?xml version="1.0" standalone="no"?>',
                "\ufeff",
                " \n",
            ]
        )
        doc = decl + doc
    return doc.encode()


def billion_laughs(levels):
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefghijk", "bcdefghijkl"[:levels])
    )
    return f"<!DOCTYPE s:Envelope [{entities}]>", f"&{'bcdefghijkl'[levels - 1]};"


def malformed(rng, doc):
    """``doc`` made malformed, or made into what the parser refuses: truncated, unbalanced, in another
    encoding or none, huge, deep, wide, with a DTD, processing instructions, undeclared prefixes,
    CDATA, character references to no character, comments, NULs."""
    text = doc.decode("utf-8", "replace")
    at = text.find("<s:Body>")
    at = at + len("<s:Body>") if at >= 0 else len(text) // 2
    cut = rng.randrange(len(doc) + 1)
    k = rng.randrange(14)
    if k == 0:
        return doc[:cut]
    if k == 1:
        return rng.choice(
            [
                doc.replace(b"</s:Body>", b"", 1),
                doc.replace(b"</s:Body>", b"</s:body>", 1),
                doc + b"</x>",
                doc[:cut] + b"</a>" + doc[cut:],
                b"<a>" + doc,
            ]
        )
    if k == 2:  # bad encodings
        return rng.choice(
            [
                b"\xff\xfe" + text.encode("utf-16-le"),
                b"\xfe\xff" + text.encode("utf-16-be"),
                '<?xml version="1.0" encoding="UTF-16"?>'.encode("utf-16"),
                doc[:cut]
                + rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"])
                + doc[cut:],
                b'<?xml version="1.0" encoding="ISO-8859-1"?>'
                + text.replace("Body>", "Body>\xe9", 1).encode("latin-1", "replace"),
                text.encode("utf-32"),
            ]
        )
    if k == 3:  # a huge attribute value
        big = "v" * rng.choice([10_000, 300_000]) + rng.choice(["", "&amp;", "&#0;", "<"])
        return text.replace("<s:Envelope ", f'<s:Envelope a="{big}" ', 1).encode()
    if k == 4:  # deep nesting, about the limit of 64 levels and past it
        n = rng.choice([60, 61, 62, 63, 64, 65, 200, 20_000])
        return (text[:at] + "<d>" * n + "</d>" * n + text[at:]).encode()
    if k == 5:  # about the limit of 100,000 elements
        n = rng.choice([99_995, 99_997, 100_001, 130_000])
        return (text[:at] + "<w>" + "<e/>" * n + "</w>" + text[at:]).encode()
    if k == 6:  # DTDs: entity expansion, external entities, parameter entities
        dtd, ref = billion_laughs(rng.choice([2, 5, 9]))
        dtd = rng.choice(
            [
                dtd,
                '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>',
                f'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///tmp/{MARK}-xxe">]>',
                '<!DOCTYPE x [<!ENTITY e SYSTEM "http://127.0.0.1:1/x">]>',
                '<!DOCTYPE x [<!ENTITY % p SYSTEM "http://127.0.0.1:1/p.dtd"> %p;]>',
                '<!DOCTYPE x SYSTEM "http://127.0.0.1:1/x.dtd">',
                '<!DOCTYPE x PUBLIC "-//x//y" "file:///etc/passwd">',
                "<!DOCTYPE x>",
                "<!DOCTYPE",
            ]
        )
        ref = ref if dtd.startswith("<!DOCTYPE s:") else "&e;"
        return (dtd + text[:at] + f"<v>{ref}</v>" + text[at:]).encode()
    if k == 7:  # processing instructions, and declarations out of place
        pi = rng.choice(
            [
                '<?xml-stylesheet href="http://127.0.0.1:1/x.xsl"?>',
                "<?php system('id'); ?>",
                "<?x?>",
                "<?xml version='1.0'?>",
                "<??>",
                "<?",
            ]
        )
        return rng.choice([pi + text, text[:at] + pi + text[at:], text + pi, " " + text]).encode()
    if k == 8:  # undeclared prefixes, bound and unbound wrongly
        return (
            text[:at]
            + rng.choice(
                [
                    "<q:x/>",
                    '<x q:a="1"/>',
                    '<x xmlns:q=""><q:y/></x>',
                    '<x xmlns:xml="urn:x"/>',
                    '<x xmlns:xmlns="urn:x"/>',
                    "<:x/>",
                    '<x xmlns:="urn:x"/>',
                    '<x a="1" a="2"/>',
                ]
            )
            + text[at:]
        ).encode()
    if k == 9:  # CDATA, also where it may not be
        return (
            text[:at]
            + rng.choice(
                [
                    "<![CDATA[x]]>",
                    "<![CDATA[unterminated",
                    "]]>",
                    "<c><![CDATA[]]]]><![CDATA[>]]></c>",
                    "<![CDATA[" + "<" * 10_000 + "]]>",
                ]
            )
            + text[at:]
        ).encode()
    if k == 10:  # character references to no character, entities never declared
        refs = [*BAD_CHAR_REFS, "&unknown;", "&;", "&amp", "&#", "&lt"]
        return (text[:at] + f"<v>{rng.choice(refs)}</v>" + text[at:]).encode()
    if k == 11:  # comments
        return (
            text[:at] + rng.choice(["<!-- a -- b -->", "<!-- unterminated", "<!--->", "<!---->"]) + text[at:]
        ).encode()
    if k == 12:  # NUL and control bytes, raw
        return doc[:cut] + rng.choice([b"\x00", b"\x01\x02", b"\x1b[31m", b"\x7f", b"\x0c"]) + doc[cut:]
    return rng.choice(
        [b"", b" ", b"<", b"<x/><y/>", b"text" + doc, doc + b"text", rng.randbytes(rng.choice([10, 1000])), doc * 2]
    )


def soap_content_type(rng):
    """A plain request's Content-Type: SOAP 1.2's, with junk parameters; SOAP 1.1's; others; none."""
    if rng.random() < 0.6:
        return "application/soap+xml; charset=utf-8"
    return rng.choice(
        [
            "application/soap+xml",
            "application/soap+xml; charset=utf-8",
            "application/soap+xml; charset=utf-8",
            'application/soap+xml; charset=UTF-8; action="urn:mpiws:program:add/call"',
            "APPLICATION/SOAP+XML",
            " application/soap+xml ",
            "application/soap+xml; charset=utf-16",
            "application/soap+xml; charset=junk",
            "application/soap+xml;;;==;",
            'application/soap+xml; charset="unterminated',
            "application/soap+xml; action=" + "a" * 5000,
            "application/soap+xml; " + "; ".join(f"p{i}=v" for i in range(200)),
            "text/xml",
            "text/xml; charset=utf-8",
            "application/xml",
            "application/xop+xml",
            "application/json",
            "multipart/related",
            "multipart/related; boundary=",
            'multipart/related; type="application/xop+xml"',
            "",
            None,
        ]
    )


def soap_package(rng, root, attachments):
    """An MTOM package: the envelope and the parts the operation names (and others); half of them
    well-formed, the rest with junk boundaries, missing or duplicate Content-IDs, a missing or wrong
    start, parts without CRLF, base64 parts with junk, junk encodings, too many parts, one part over
    the upload limit; (its Content-Type, its bytes)."""
    junk = rng.random() < 0.5

    def either(clean, *junks):
        return rng.choice(junks) if junk and rng.random() < 0.3 else clean

    boundary = either(
        rng.choice(["MIMEBoundary_fz", "uuid:" + secrets.token_hex(8), "=_Part_0_" + secrets.token_hex(4)]),
        "B",
        "x" * 200,
        "x" * 201,
        "a b",
        "--",
        "</s:Body>",
        "e",
    )
    nl = either(b"\r\n", b"\n", b"\r", b"")
    root_id = either("<root@fz>", "root@fz", "<>", "", None, "<" + "r" * 1000 + ">")
    head = [b'Content-Type: application/xop+xml; charset=UTF-8; type="application/soap+xml"']
    if root_id is not None:
        head.append(f"Content-ID: {root_id}".encode())
    enc = either(None, b"binary", b"base64", b"8bit", b"quoted-printable")
    if enc is not None:
        head.append(b"Content-Transfer-Encoding: " + enc)
    parts = [(head, root)]
    for cid, content in attachments.items():
        for _ in range(either(1, 2, 3)):  # a duplicate Content-ID now and then
            head = [b"Content-Type: application/octet-stream"]
            named = either(f"<{cid}>", cid, f"<{cid}", None, f"<{cid}> <{cid}>")
            if named is not None:
                head.append(f"Content-ID: {named}".encode())
            enc = either(rng.choice(["binary", "base64", None]), "8bit", "7bit", "quoted-printable", "x-junk", "BASE64")
            if enc is not None:
                head.append(f"Content-Transfer-Encoding: {enc}".encode())
            if enc and enc.lower() == "base64":
                b64 = base64.encodebytes(content)
                content = either(b64, b64.replace(b"\n", b"\r\n"), b64 + b"!!", b"***", b64[:-2], b" " + b64)
            parts.append((head, content))
    if junk and rng.random() < 0.05:  # more parts than a package may have (1000)
        parts += [([b"Content-ID: <n" + str(i).encode() + b">"], b"x") for i in range(rng.choice([999, 1001, 1500]))]
    if junk and rng.random() < 0.05:
        parts.append(([rng.choice([b"no colon", b"\xff\xfe: x", b": empty name", b"X:" + b"y" * 10_000])], b"x"))
    if rng.random() < 0.01:  # a part past the upload limit (1 MiB)
        parts.append(([b"Content-ID: <big@fz>"], bytes((1 << 20) + 1)))
    if junk and rng.random() < 0.2:
        rng.shuffle(parts)  # the root not first
    delimiter = b"--" + boundary.encode()
    data = either(b"", b"a preamble\r\n", b"\r\n")
    for head, content in parts:
        data += delimiter + nl + nl.join(head) + nl + nl + content + nl
    data += either(delimiter + b"--" + nl, delimiter + b"--", delimiter, b"", delimiter + b"--" + nl + b"an epilogue")
    if junk and rng.random() < 0.1:
        data = data[: rng.randrange(len(data) + 1)]
    ct = ['multipart/related; type="application/xop+xml"']
    bound = either(
        f'boundary="{boundary}"', f"boundary={boundary}", 'boundary=""', None, f'boundary="{boundary}"; boundary="x"'
    )
    if bound is not None:
        ct.append(bound)
    start = either(root_id, "<nobody@fz>", "root@fz", "", None)
    if start is not None:
        ct.append(f'start="{start}"')
    if rng.random() < 0.5:
        ct.append('start-info="application/soap+xml"')
    ct[0] = either(ct[0], "Multipart/Related", "multipart/related", "multipart/mixed", "application/soap+xml")
    if junk and rng.random() < 0.1:
        rng.shuffle(ct)  # the media type not first
    return "; ".join(ct), data


def near_valid_soap(rng, st, program):
    """A request of the right shape for ``program``: call or spawn with its inputs (the job objects
    near_valid_cwl_body makes, as XML; a File by value, base64 or an MTOM part, or by URL), or
    running, results or kill of a job the fuzz's key spawned; (its Content-Type, its bytes)."""
    ns = f"urn:mpiws:program:{program}"
    attachments = {}
    op = rng.choice(["call", "spawn", "spawn", "running", "results", "kill"])
    if op in ("running", "results", "kill") and st.soap_jobs:
        more = "<p:byReference>true</p:byReference>" if op == "results" and rng.random() < 0.5 else ""
        children = f"<p:jobId>{rng.choice(st.soap_jobs[-10:])}</p:jobId>{more}"
    else:
        op = rng.choice(["call", "spawn"])
        if program == "add":
            y = rng.choice(["<p:value>41</p:value>", f"<p:url>{xml_text(st.upload)}</p:url>"])
            children = f"<p:x>{rng.choice(['1', '-2', '3'])}</p:x><p:y>{y}</p:y>"
        else:
            inputs = json.loads(near_valid_cwl_body(rng, st, program))["inputs"]

            def element(name, v):
                if isinstance(v, list):
                    return "".join(element(name, x) for x in v)
                if isinstance(v, dict) and v.get("class") == "File":
                    if "location" in v:
                        inner = f"<p:url>{xml_text(v['location'])}</p:url>"
                    else:
                        data = base64.b64decode(v["base64"]) if "base64" in v else v.get("contents", "").encode()
                        if rng.random() < 0.3:
                            cid = f"{name}{len(attachments)}@fz"
                            attachments[cid] = data
                            inner = (
                                f'<p:value><xop:Include xmlns:xop="{XOP}" href="cid:{quote(cid, safe="@")}"/></p:value>'
                            )
                        else:
                            inner = f"<p:value>{base64.b64encode(data).decode()}</p:value>"
                elif isinstance(v, bool):
                    inner = "true" if v else "false"
                elif isinstance(v, (dict, type(None))):
                    inner = xml_text(json.dumps(v))
                else:
                    inner = xml_text(str(v))
                tag = name if name[0].isalpha() or name[0] == "_" else "_" + name
                return f"<p:{tag}>{inner}</p:{tag}>"

            children = "".join(element(k, v) for k, v in inputs.items())
    body = f'<s:Envelope xmlns:s="{SOAP12}"><s:Body><p:{op} xmlns:p="{ns}">{children}</p:{op}></s:Body></s:Envelope>'
    if attachments:
        return soap_package(rng, body.encode(), attachments) if rng.random() < 0.3 else mtom(body.encode(), attachments)
    return "application/soap+xml; charset=utf-8", body.encode()


def mtom(root, attachments):
    """A well-formed MTOM package, as CXF or Axis2 send one."""
    b = "MIMEBoundary_" + secrets.token_hex(6)
    data = f'--{b}\r\nContent-Type: application/xop+xml; charset=UTF-8; type="application/soap+xml"\r\n'
    data = (data + "Content-ID: <root@fz>\r\n\r\n").encode() + root
    for cid, content in attachments.items():
        data += f"\r\n--{b}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n".encode()
        data += f"Content-ID: <{cid}>\r\n\r\n".encode() + content
    data += f"\r\n--{b}--\r\n".encode()
    return f'multipart/related; type="application/xop+xml"; boundary="{b}"; start="<root@fz>"', data


def soap_request(rng, st, program):
    """A SOAP request for ``program``: near-valid (30%), or a junk operation in an envelope of any
    version, malformed now and then, plain or in an MTOM package; (its Content-Type or None, its bytes)."""
    if rng.random() < 0.3:
        return near_valid_soap(rng, st, program)
    attachments = {}
    doc = soap_document(rng, soap_operation(rng, st, program, attachments))
    if rng.random() < 0.35:
        doc = malformed(rng, doc)
    if (attachments and rng.random() < 0.8) or rng.random() < 0.1:
        return soap_package(rng, doc, attachments)
    return soap_content_type(rng), doc


# ---- SOAP 1.2 requests: the service interface (POST /) and a rank's store (POST /domains/{d}/ranks/{r}) ----

SERVICES = "urn:mpiws:services"
SOAP_CT = "application/soap+xml; charset=utf-8"
#: Numbers as a SOAP element's text: whole ones about every bound (u32, i32's tag, u64), and not numbers at all.
JUNK_NUMBERS = ["0", "1", "2", "7", "8", " 1 ", "-1", "+1", "01", "1.0", "1e3", "0x10", "&#49;", "", "x", "١"]
JUNK_NUMBERS += [str(1 << 31), str((1 << 31) - 1), str(1 << 32), str((1 << 32) - 1), str((1 << 64) - 1)]
JUNK_NUMBERS += [str(1 << 64), "9" * 300, "<![CDATA[1]]>", "1<x/>"]


def params_text(rng):
    """`run`'s params, a JSON text: small ones the `sum` service takes, any JSON (never a huge `n`: a denial
    of service of its own, finding 6), JSON numbers past what parses, and no JSON at all."""
    return rng.choice(
        [
            json.dumps({"n": rng.randrange(20)}),
            json.dumps({"n": str(rng.randrange(20))}),
            json.dumps(junk_json(rng)),
            json.dumps([1] * rng.choice([1, 1000])),
            "null",
            "{}",
            "",
            " ",
            "{",
            '{"n": 5',
            "[" * 200,
            "1e999",
            "-1e999",
            "NaN",
            '"\\ud800"',
            "{'n': 1}",
            '{"n": 1} trailing',
            "x" * 5000,
        ]
    )


def junk_endpoints(rng, st):
    """`run`'s repeated endpoints: the endpoint's own URL (1, 2, many, past --max-ranks), and junk URLs."""
    one = rng.choice([st.url, st.url, "http://127.0.0.1:1", "ftp://x", "http://", "", "x" * 5000, "http://a b/"])
    n = rng.choice([0, 1, 1, 2, 2, 3, 100, 5000, 16385])  # 16385: past --max-ranks, within --max-binding
    urls = [st.url] * n if rng.random() < 0.7 else [one] * min(n, 3)
    if urls and rng.random() < 0.2:
        urls[rng.randrange(len(urls))] = one
    return urls


def services_operation(rng, st):
    """An operation of the service interface: `run` with its binding's elements (right, junk, missing, repeated),
    `status` and `cancel` of real and junk ranks; now and then another name or namespace, junk children."""
    tame = rng.random() < 0.5
    ns = SERVICES
    if not tame and rng.random() < 0.3:
        ns = rng.choice(["urn:mpiws:program:add", "urn:mpiws:service", "", "urn:x", SOAP12, SERVICES.upper()])
    name = rng.choice(
        ["run"] * 8 + ["status", "cancel"] * 4 + ([] if tame else ["Run", "runResponse", "store", "x" * 300])
    )
    children = []
    if (name == "run" or rng.random() < 0.1) and tame:  # a binding run takes: a new domain, or one taken here
        size = rng.choice([1, 1, 2, 3])
        children += [
            ("domain", rng.choice([secrets.token_hex(4)] * 4 + [st.domain, st.live])),
            ("rank", str(rng.randrange(size))),
            *[("endpoints", xml_text(st.url))] * size,
            ("token", rng.choice([st.token, secrets.token_hex(8)])),
            ("service", "sum"),
            ("params", rng.choice([json.dumps({"n": rng.randrange(20)}), "null", "{}"])),
        ]
    elif name == "run" or rng.random() < 0.1:
        domain = rng.choice([secrets.token_hex(4), st.domain, st.live, "..", "a/b", "x" * 200, "é", ""])
        fields = {
            "domain": rng.choice([xml_text(domain), junk_xml_text(rng)]),
            "rank": rng.choice(JUNK_NUMBERS),
            "token": rng.choice([st.token, secrets.token_hex(8), "", "t" * 10000]),
            "service": rng.choice(["sum", "nope", "", "../sum", "SUM", junk_xml_text(rng)]),
            "params": xml_text(params_text(rng)),
        }
        for field, value in fields.items():
            if rng.random() < 0.9:
                children += [(field, value)] * (1 if rng.random() < 0.9 else 2)
            if field == "rank":
                children += [("endpoints", xml_text(u)) for u in junk_endpoints(rng, st)]
    if name in ("status", "cancel") or rng.random() < 0.1:
        domain = rng.choice([st.domain, st.live, st.live] + ([] if tame else ["nowhere", "", "..", "x" * 300]))
        if tame or rng.random() < 0.9:
            children.append(
                ("domain", xml_text(domain) if tame else rng.choice([xml_text(domain), junk_xml_text(rng)]))
            )
        if tame or rng.random() < 0.9:
            children.append(("rank", rng.choice(["0", "0", "0", "1"]) if tame else rng.choice(JUNK_NUMBERS)))
    for _ in range(0 if tame else rng.choice([0] * 8 + [1, 3])):
        children.append((rng.choice(["z", "rank", "endpoints", "payload", "x" * 200]), junk_xml_text(rng)))
    if not tame and rng.random() < 0.2:
        rng.shuffle(children)
    return element_of(rng, ns, name, children)


def element_of(rng, ns, name, children):
    """An operation element of ``ns`` with ``children`` (name, inner XML): its children in its namespace (as
    zeep sends them), or unqualified."""
    qualified = rng.random() < 0.5
    p = "p:" if qualified else ""
    body = "".join(f"<{p}{n}>{inner}</{p}{n}>" for n, inner in children)
    if qualified:
        return f'<p:{name} xmlns:p="{ns}">{body}</p:{name}>'
    attrs = rng.choice(["", ' a="1"', ' xml:lang="en"', f' s:mustUnderstand="1" xmlns:s="{SOAP12}"'])
    return f'<{name} xmlns="{ns}"{attrs}>{body}</{name}>'


def payload(rng, st, attachments, tame):
    """A message's payload: base64 (right, junk, about the limit), or an xop:Include of an MTOM part."""
    if rng.random() < 0.25:
        cid = f"msg{len(attachments)}@fz"
        if tame:
            attachments[cid] = rng.choice([b"x", os.urandom(rng.choice([1, 100, 5000]))])
            return f'<xop:Include xmlns:xop="{XOP}" href="cid:{quote(cid, safe="@")}"/>'
        return xop_include(rng, st, attachments)
    if tame or rng.random() < 0.5:
        data = rng.choice([b"", b"x", os.urandom(rng.choice([1, 100, 5000]))])
        if rng.random() < 0.01:  # about the limit of --max-message (1 MiB)
            data = bytes((1 << 20) + rng.choice([-1, 0, 1]))
        text = base64.b64encode(data).decode()
        if not tame and rng.random() < 0.3:
            text = rng.choice([text[:-1], text + "=", " \n".join(text[i : i + 76] for i in range(0, len(text), 76))])
        return text
    return rng.choice(["***", "=", "====", "NDE", "N\x09DE=", "&#78;DE=", "<![CDATA[NDE=]]>", "<x/>", "é", ""])


def rank_operation(rng, st, attachments):
    """A rank's `store` or `bStore`: its envelope's elements (right, junk: sources and ranks past u32, tags past
    2^31, sequence numbers past u64, forward lists long, short and wrong), its payload (base64, junk, an MTOM
    part); now and then another name or namespace, elements missing, repeated or unknown."""
    tame = rng.random() < 0.5
    ns = SERVICES
    if not tame and rng.random() < 0.3:
        ns = rng.choice(["urn:mpiws:program:add", "", "urn:x", SOAP12, SERVICES + "/"])
    name = rng.choice(["store"] * 4 + ["bStore"] + ([] if tame else ["Store", "storeResponse", "run", "x" * 300]))
    children = []

    def number(good):
        return good if tame else rng.choice([good, good, *JUNK_NUMBERS])

    if tame or rng.random() < 0.9:
        children.append(("source", number(str(rng.choice([1, 1, 2, 7])))))
    if rng.random() < 0.5:
        # never tag 1 from source 1 when tame: what the live `sum` rank waits for (junk would end it)
        children.append(("tag", number(str(rng.choice([0, 2, 5, (1 << 31) - 1])))))
    if rng.random() < 0.3:
        children.append(("context", number(rng.choice(["1", "2", str(1 << 63)]))))
    if rng.random() < 0.5:
        children.append(("seq", number(str(rng.randrange(4)))))
    if rng.random() < 0.2:  # synchronous: answered once a receive took it (rarely: it may be waited for)
        children.append(("sync", rng.choice(["false", "0", "no", ""] * 3 + ["true", "1"])))
    if name == "bStore" or rng.random() < 0.05:
        # Never a list that forwards to another rank (this one first, every rank in the domain): filing it
        # opens a link to that rank from the store's own runtime thread, which then waits for ever (the bug
        # test_openapi.py::test_a_store_that_forwards_is_answered shows). Lists that forward to this rank
        # alone, and refused ones (not this rank first, a rank past the domain, longer than the domain).
        forward = rng.choice([[0], [0, 0], [0, 0, 0, 0], [1, 0], [0, 8], [], [0] * 9, [2, 3], [0, 1 << 32]])
        if not tame and rng.random() < 0.2:
            forward = rng.choice([["x"], ["-1"], [str(1 << 32)], ["0"] * rng.choice([100, 20000])])
        children += [("forward", str(f)) for f in forward]
    if tame or rng.random() < 0.9:
        children.append(("payload", payload(rng, st, attachments, tame)))
    for _ in range(0 if tame else rng.choice([0] * 8 + [1, 3])):
        children.append((rng.choice(["z", "source", "payload", "forward", "x" * 200]), junk_xml_text(rng)))
    if not tame and rng.random() < 0.2:
        rng.shuffle(children)
    return element_of(rng, ns, name, children)


def envelope_of(rng, operation):
    """``operation`` in a plain SOAP 1.2 envelope (half the time), or in any `soap_document` makes."""
    if rng.random() < 0.5:
        return f'<s:Envelope xmlns:s="{SOAP12}"><s:Body>{operation}</s:Body></s:Envelope>'.encode()
    return soap_document(rng, operation)


def services_request(rng, st):
    """A request of the service interface's SOAP face: an operation (junk or not) in an envelope of any version,
    malformed now and then, plain or (rarely) as an MTOM package; (its Content-Type or None, its bytes)."""
    doc = envelope_of(rng, services_operation(rng, st))
    if rng.random() < 0.2:
        doc = malformed(rng, doc)
    if rng.random() < 0.1:
        return soap_package(rng, doc, {})
    return SOAP_CT if rng.random() < 0.5 else soap_content_type(rng), doc


def rank_request(rng, st):
    """A SOAP store for a rank: a store or bStore (junk or not) in an envelope, malformed now and then, plain or
    in an MTOM package with the parts its payload names (and junk ones); (its Content-Type or None, its bytes)."""
    attachments = {}
    doc = envelope_of(rng, rank_operation(rng, st, attachments))
    if rng.random() < 0.2:
        doc = malformed(rng, doc)
    if attachments and rng.random() < 0.9:
        if rng.random() < 0.5 and all(c.endswith("@fz") and c.startswith("msg") for c in attachments):
            return mtom(doc, attachments)
        return soap_package(rng, doc, attachments)
    if rng.random() < 0.05:
        return soap_package(rng, doc, attachments)
    return SOAP_CT if rng.random() < 0.5 else soap_content_type(rng), doc


def soap_route(method, target):
    """Which SOAP face a request goes to (behind the relay too): "program", "services", "rank", or None."""
    inner = relayed(method, target)
    route = route_of(method, target if inner is None else inner) if method == "POST" else None
    return {"/programs/{name}": "program", "/": "services", "/domains/{domain}/ranks/{rank}": "rank"}.get(route)


def soap_body(rng, st, method, target):
    """A SOAP request for the face ``target`` goes to: (its Content-Type or None, its bytes)."""
    face = soap_route(method, target)
    if face == "services":
        return services_request(rng, st)
    if face == "rank":
        return rank_request(rng, st)
    return soap_request(rng, st, program_of(target))


def focused_soap(rng, st, keyed, face):
    """A request to the SOAP ``face`` whose path and credential are right (mostly), so that its body reaches
    the deepest checks: a program's (the `jobs` key), the service interface's (a key for `run`, the domain's
    token for `status` and `cancel`), a running rank's (its domain's token). (method, target, headers, body)."""
    if face == "program":
        program = rng.choice(list(SOAP_INPUTS))
        ct, b = soap_request(rng, st, program)
        key = rng.choice([KEY_FUZZ] * 9 + [KEY_RUN]) if keyed else rng.choice([st.token, None])
        t = f"/programs/{program}"
    elif face == "services":
        ct, b = services_request(rng, st)
        keys = [KEY_FUZZ] * 5 + [KEY_RUN] if keyed else []
        key = rng.choice(keys + [st.token] * 3 + [None, "t" * 32])
        t = "/"
    else:
        ct, b = rank_request(rng, st)
        key = rng.choice([st.token] * 8 + [None, "t" * 32] + ([KEY_FUZZ] if keyed else []))
        rank = rng.choice(["0"] * 8 + ["1", "9", "x", str(1 << 32)])
        t = f"/domains/{rng.choice([st.live] * 8 + [st.domain, 'nobody'])}/ranks/{rank}"
    h = [("Content-Type", ct)] if ct is not None else []
    h += [("Authorization", f"Bearer {key}")] if key else []
    return "POST", t, h, b


def is_soap(method, target):
    """Whether the request goes to one of the SOAP faces (behind the relay too)."""
    return soap_route(method, target) is not None


def program_of(target):
    return target.split("?")[0].split("#")[0].rstrip("/").split("/")[-1]


def soap_answer(status, data, faults, where, face):
    """A SOAP answer is well-formed XML 1.0 (no character it forbids: the face writes U+FFFD in their
    place), a SOAP 1.2 envelope holding one element: a fault for an error status (its code and `m:status`
    the status's), otherwise the operation's answer, in the namespace of the face's WSDL (``face``, as
    `soap_route` names it). ``faults``: a Counter of (face, status, code, the reason's shape), and of
    (face, status, "(answer)", the answer's name)."""
    if not data.startswith(b"<?xml"):
        return  # hyper's own refusal of a malformed request (no body), or the relay's JSON
    if not data.endswith(b"</soap:Envelope>"):
        return  # an answer cut short: a refusal sent before the body was read, then the connection reset
    text = data.decode("utf-8")
    bad = NOT_XML.search(text)
    assert bad is None, f"{bad.group()!r}, which XML 1.0 forbids, in a SOAP answer {status} {where}: {data[:500]!r}"
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise AssertionError(f"a SOAP answer {status} that is no XML ({e}) {where}: {data[:500]!r}") from None
    assert root.tag == f"{{{SOAP12}}}Envelope", f"{root.tag} {where}"
    (body,) = [c for c in root if c.tag == f"{{{SOAP12}}}Body"]
    (answer,) = list(body)
    if status < 400:
        ns = "{urn:mpiws:program:" if face == "program" else f"{{{SERVICES}}}"
        assert answer.tag.startswith(ns) and answer.tag.endswith("Response"), f"{answer.tag} answered {status} {where}"
        faults[(face, status, "(answer)", answer.tag.split("}")[1])] += 1
        return
    assert answer.tag == f"{{{SOAP12}}}Fault", f"{answer.tag} answered {status} {where}"
    code = answer.find(f"{{{SOAP12}}}Code/{{{SOAP12}}}Value").text
    reason = answer.find(f"{{{SOAP12}}}Reason/{{{SOAP12}}}Text").text or ""
    # Cut first: the pattern is quadratic over a long run of non-space (a reason quoting a long name).
    faults[(face, status, code, re.sub(r'"[^"]*"|\S*[0-9]\S*|[{<][^}>]*[}>]', "_", reason[:200])[:90])] += 1
    expected = ("soap:Sender",) if status < 500 else ("soap:Receiver", "soap:VersionMismatch", "soap:MustUnderstand")
    assert code in expected, f"{code} answered {status} {where}"
    assert answer.find(f".//{{{FAULT}}}status").text == str(status), f"{ET.tostring(answer)[:300]} {where}"


def body(rng, st, method, path):
    r = rng.random()
    if method in ("GET", "HEAD", "DELETE") and r < 0.7:
        return None
    inner = relayed(method, path)
    route = route_of(method, path if inner is None else inner)
    if route == "/rendezvous" and rng.random() < 0.7:
        return registration_body(rng, st)
    if route == "/sessions" and method == "POST" and rng.random() < 0.7:
        return session_body(rng)
    if route == "/sessions/{id}/files/{name}" and method == "PUT" and rng.random() < 0.5:
        return rng.choice([b"", b"41", b"x" * 1000, rng.randbytes(rng.choice([10, 100000]))])
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
    """A relay registration, `POST /relay/NAME` (the fuzz drops a 101's connection at once); one
    that does not ask the upgrade is passed on instead: then to `lab` or to no name an endpoint
    could hold (answered at once; a free name's would wait 10 s for its endpoint)."""
    h = []
    if rng.random() < 0.8:
        h += [("Connection", rng.choice(["upgrade", "Upgrade", "keep-alive, upgrade", "close"]))]
    if rng.random() < 0.8:
        h += [("Upgrade", rng.choice(["mpiws-relay/1", "MPIWS-RELAY/1", "mpiws-relay/2", "mpiws-stream/1", ""]))]
    names = ["lab", "lab", "a" * 65, "a%2Fb", "..", "", "é"]
    if asks_relay_upgrade(h):
        names += [f"{MARK}{rng.randrange(3)}", "nobody"]
    name = rng.choice(names)
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
    an OGC execution (of a program or the service), a rendezvous
    registration, or a session's (mostly on the fuzz's key's session).
    (method, target, headers, body)."""
    key = rng.choice([KEY_FUZZ] * 6 + [KEY_RUN]) if keyed else rng.choice([st.token, None])
    h = [("Content-Type", "application/json")] + ([("Authorization", f"Bearer {key}")] if key else [])
    if rng.random() < 0.15:
        return "POST", "/rendezvous", h, registration_body(rng, st)
    if rng.random() < 0.25:
        return focused_session(rng, st, h)
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


def focused_session(rng, st, h):
    """A session request with headers ``h``: one made with junk asks, or on the fuzz's key's session (mostly)
    its file put (junk names, bodies of any size), read or removed, it or its files listed, it deleted."""
    base = f"/sessions/{rng.choice([st.session] * 8 + ['0' * 32, st.job])}"
    plain = ["seeded", "y", "result", "out", f"{MARK}.txt", f"{MARK}+1=a,b@c"]
    name = quote(rng.choice(plain) if rng.random() < 0.5 else rng.choice(JUNK_NAMES), safe="")
    r = rng.random()
    if r < 0.2:
        return "POST", "/sessions", h, session_body(rng)
    if r < 0.5:
        data = rng.choice([b"", b"41", b"x" * 1000, rng.randbytes(rng.choice([10, 100000])), b"x" * ((1 << 20) + 1)])
        return "PUT", f"{base}/files/{name}", h, data
    if r < 0.75:
        return "GET", f"{base}/files/{name}", h, None
    if r < 0.85:
        return "DELETE", f"{base}/files/{name}", h, None
    if r < 0.98:
        return "GET", rng.choice([base, f"{base}/files", "/sessions"]), h, None
    return "DELETE", base, h, None


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


def remove_sessions(url, keep):
    """The fuzz's key deletes the sessions it made (it may keep only so many), all but ``keep``."""
    path = urlparse(url).path
    status, data = call(url, "GET", f"{path}/sessions", key=KEY_FUZZ, timeout=30)
    assert status == 200, data
    for session in json.loads(data):
        if session["id"] != keep:
            answer = call(url, "DELETE", f"{path}/sessions/{session['id']}", key=KEY_FUZZ, timeout=30)
            assert answer and answer[0] in (204, 404), answer


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
    soap_faults = Counter()  # the SOAP faces' faults (face, status, code, the reason's shape), and answers
    started = time.monotonic()
    deadline = started + max(90.0, REQUESTS * 0.1)
    keyed = True
    before = None
    for i in range(REQUESTS):
        if i % BATCH == 0:
            # A batch either may send endpoint keys (not the admin's) or sends none.
            keyed = rng.random() < 0.6
            for st in (sts.main, sts.hidden):
                st.refresh()  # a running rank for the stores, made before the snapshot
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
        elif kind < 0.32:  # a SOAP face (MTOM too), its route and credential right (mostly) but for its body
            face = rng.choice(["program", "services", "rank"])
            # (`POST /relay/NAME` is a registration: the service interface of the endpoint behind is not reached)
            relayed = face != "services" and rng.random() < 0.3
            st = sts.hidden if relayed else sts.main
            m, t, h, b = focused_soap(rng, st, keyed, face)
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
            if is_soap(m, t) and rng.random() < 0.8:  # a SOAP request, its Content-Type said or not
                ct, b = soap_body(rng, st, m, t)
                h = [(k, v) for k, v in h if k.lower() != "content-type" or rng.random() < 0.2]
                h += [("Content-Type", ct)] if ct is not None else []
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
            assert lied or may_wait(m, t, h, b), f"no answer within {timeout} s {where}"
            answer = None
            counts[route]["timeout"] += 1
        if answer is not None:
            status, data = answer
            statuses[status] += 1
            counts[route][status] += 1
            if status == 201 and route.endswith("/ogcapi/processes/{processID}/execution"):
                st.ogc_jobs.append(json.loads(data)["jobID"])  # the fuzz's key's: its status, results, dismissal
                del st.ogc_jobs[:-20]
            if is_soap(m, t):
                soap_answer(status, data, soap_faults, where, soap_route(m, t))
                spawned = re.search(rb"<p:(?:spawn|call)Response[^>]*><p:jobId>([0-9a-f]{32})</p:jobId>", data)
                if status == 200 and spawned:
                    st.soap_jobs.append(spawned.group(1).decode())  # the fuzz's key's: running, results, kill
                    del st.soap_jobs[:-20]
            if status >= 500:
                assert status in documented_5xx(m, t, h), f"undocumented {status} {where}: {data[:300]!r}"
                try:
                    e = json.loads(data)
                    reason = (
                        e["detail"] if "detail" in e else e["error"]["message"]
                    )  # the OGC face's exceptions: detail
                except (ValueError, KeyError, TypeError):
                    fault = re.search(rb"<soap:Text[^>]*>(.*?)</soap:Text>", data)  # the SOAP face's faults: the reason
                    reason = (fault.group(1) if fault else data[:100]).decode(errors="replace")
                reason = re.sub(
                    r'"[^"]*"|\S*[0-9]\S*', "_", reason[:200]
                )  # its names and numbers out: one line per kind
                fives.setdefault((route, status, reason), f"{m} {t[:100]}")
        if i % BATCH == BATCH - 1 or i == REQUESTS - 1:
            alive([main, hidden], where)
            if keyed:
                for s, st in ((main, sts.main), (hidden, sts.hidden)):
                    remove_ended_jobs(s.url)
                    remove_sessions(s.url, st.session)
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
    print("SOAP answers and faults, by face, status, code and reason:")
    for (face, status, code, reason), n in sorted(soap_faults.items()):
        print(f"  {face:<8} {status} {code} {n:>5}  {reason}")
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
