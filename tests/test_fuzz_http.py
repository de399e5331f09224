"""HTTP-level fuzz of every route of a real `mpiws serve` process (loopback
only, bounded in count and time).

Random methods; paths built from docs/openapi.yaml's routes with real and
junk segments (ids, ranks, huge numbers, `..`, percent-encodings); random
headers (envelope headers with junk, huge values, duplicates, Content-Length
lies); random bodies (junk, truncated JSON, bindings and job inputs with
absurd fields); and raw-socket junk (truncated request lines, malformed
framing, bodies that stall and close). After every batch the endpoint must
still answer `GET /`; no answer may be a 5xx the document does not list for
that route; the server's stderr must show no panic.

MPIWS_FUZZ_HTTP_REQUESTS sets how many requests (default 4,000, about 20
seconds); MPIWS_FUZZ_HTTP_SEED replays a run (the seed is printed)."""

import http.client
import json
import os
import random
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
import yaml

from mpiws.keys import client_key

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

REQUESTS = int(os.environ.get("MPIWS_FUZZ_HTTP_REQUESTS", "4000"))
SEED = int(os.environ.get("MPIWS_FUZZ_HTTP_SEED", str(secrets.randbits(32))))
BATCH = 100
TIMEOUT = 5.0
ADD = "add=examples/add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]"


# ---- the endpoint under test ------------------------------------------------


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """`mpiws serve` with the `sum` example service and the `add` program."""
    d = tmp_path_factory.mktemp("fuzz_http")
    err = open(d / "stderr.txt", "w+")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--service",
            "sum=examples.service_sum:service",
            "--program",
            ADD,
            "--workdir",
            str(d / "work"),
            "--max-message",
            str(1 << 20),
            "--max-upload",
            str(1 << 20),
        ],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        cwd=ROOT,
    )
    try:
        url = proc.stdout.readline().split(" at ")[-1].strip()
        assert urlparse(url).hostname == "127.0.0.1", url
        proc.work = d / "work"
        yield proc, url, err
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        err.close()


def call(url, method, target, body=None, headers=(), content_length=None, timeout=TIMEOUT, key=None):
    """Every HTTP request of this file goes through here; only the set-up
    and the state snapshots send the endpoint ``key``, never the fuzz.
    ``headers`` is a list of pairs (names may repeat);
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


def describe(url):
    status, body = call(url, "GET", "/", key=client_key())  # as the admin key sees it
    assert status == 200, (status, body[:300])
    return json.loads(body)


# ---- what the document allows -------------------------------------------------


ROUTES = [
    (template, re.compile("^" + re.sub(r"{\w+}", "[^/]+", template) + "$"), item)
    for template, item in SPEC["paths"].items()
]


def documented_5xx(method, target):
    """The 5xx statuses docs/openapi.yaml lists for this request's route (none
    for a route or method it does not document)."""
    path = target.split("?", 1)[0].split("#", 1)[0]
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
        or any(k.lower() == "mpiws-sync" for k, _ in headers)
        or "/stream" in path
    )


# ---- state: "no state changes without a key" ----------------------------------


def snapshot(proc, url):
    """The endpoint's state, as its admin sees it: what is deployed, the
    domains, and the jobs and uploads in its work directory."""
    d = describe(url)

    def listing(sub):
        return sorted(os.listdir(proc.work / sub)) if (proc.work / sub).is_dir() else []

    return {
        "services": d.get("services"),
        "programs": d.get("programs"),
        "domains": sorted(x["domain"] for x in d.get("domains", [])),
        "jobs": listing("jobs"),
        "files": listing("files"),
    }


def assert_no_state_change_without_key(before, after):
    """The fuzz never sends an endpoint key (sometimes a domain's token, with
    which the domain's own instance may rightly change): no domain, job or
    upload may appear or go, and nothing deployed may change."""
    assert after == before, f"a request without a key changed the endpoint's state: {before} -> {after}"


# ---- random requests ----------------------------------------------------------


class State:
    """Real names on the endpoint, so that random requests reach deep checks."""

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
        key = client_key()
        status, body = call(
            url, "POST", "/run", json.dumps(binding).encode(), [("content-type", "application/json")], key=key
        )
        assert status == 201, body
        # Until its process is up, a new instance answers "not yet" (503): wait for it to run.
        deadline = time.monotonic() + 30
        while json.loads(body)["state"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.05)
            status, body = call(url, "GET", f"/domains/{self.domain}/ranks/0", None, [], key=self.token)
        status, body = call(url, "POST", "/files", b"41", [("content-type", "application/octet-stream")], key=key)
        assert status == 201, body
        self.upload = json.loads(body)["url"]
        status, body = call(
            url,
            "POST",
            "/programs/add/call",
            json.dumps({"inputs": {"x": 1, "y": "41"}}).encode(),
            [("content-type", "application/json")],
            timeout=30,
            key=key,
        )
        assert status == 200 and json.loads(body)["outputs"]["result"] == 42, body
        self.job = json.loads(body)["id"]


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
        "name": rng.choice(["add", "x", "y", "result"]),
        "id": rng.choice([st.job, st.upload.rsplit("/", 1)[-1]]),
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
]


def target(rng, st):
    """A request target: a documented route with random segments, or a random path."""
    if rng.random() < 0.85:
        template, _, _ = rng.choice(ROUTES)
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
                    "..",
                    "",
                    "%2F",
                    "results",
                    "stdout",
                ]
                + JUNK_SEGMENTS[:12]
            )
            for _ in range(rng.randrange(1, 7))
        ]
        path = "/" + "/".join(quote(p, safe="%.~") for p in parts)
        path = rng.choice([path, "/" + path, path + "/", path.replace("/", "//")])
    return path + rng.choice(QUERIES)


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


def headers(rng, st):
    h = []
    for _ in range(rng.randrange(6)):
        h.append((rng.choice(ENVELOPE), rng.choice(JUNK_VALUES)))
    auth = rng.random()
    if auth < 0.4:
        h.append(("Authorization", f"Bearer {st.token}"))
    elif auth < 0.6:
        h.append(
            (
                "Authorization",
                rng.choice(
                    [
                        "Bearer ",
                        "Bearer",
                        "Basic eDp5",
                        "Bearer " + "t" * 10000,
                        f"bearer {st.token}",
                        f"Bearer {st.token} extra",
                        "Bearer \u00e9".encode().decode("latin-1"),
                    ]
                ),
            )
        )
    if rng.random() < 0.7:
        h.append(
            (
                "Content-Type",
                rng.choice(
                    [
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
        h.append(("Upgrade", rng.choice(["mpiws-stream/1", "websocket", "h2c", "x" * 100])))
        h.append(("Connection", rng.choice(["upgrade", "Upgrade, keep-alive", "close"])))
    if rng.random() < 0.1:
        h.append(("X-Junk", "j" * rng.choice([10, 8000, 60000])))
    if rng.random() < 0.1:
        h.extend([("X-Many", str(i)) for i in range(rng.choice([50, 200]))])
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
        rng.choice(["a", "", "domain", "inputs", "x", "y", "url", "base64", "size", "k" * 50]): junk_json(
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
            ]
        ),
        "token": rng.choice([st.token, "", "t", "t" * 10000, 5, None]),
        "service": rng.choice(["sum", "nope", "", "../sum", 7]),
        "params": rng.choice([{}, {"n": rng.randrange(20)}, junk_json(rng), [1] * 1000]),
    }
    for k in list(b):
        if rng.random() < 0.1:
            del b[k]
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


def body(rng, st, method):
    r = rng.random()
    if method in ("GET", "HEAD", "DELETE") and r < 0.7:
        return None
    if r < 0.25:
        return binding_body(rng, st)
    if r < 0.45:
        return inputs_body(rng, st)
    if r < 0.55:
        whole = rng.choice([binding_body, inputs_body])(rng, st)
        return whole[: rng.randrange(len(whole))]  # truncated JSON
    if r < 0.65:
        return json.dumps(junk_json(rng)).encode()
    if r < 0.75:
        return b"[" * rng.choice([10, 200, 100000])  # deep nesting
    if r < 0.95:
        return rng.randbytes(rng.choice([0, 1, 10, 1000, 100000]))
    return b"x" * ((1 << 20) + rng.randrange(2))  # about the limit


def method(rng, path):
    documented = [m.upper() for _, rx, item in ROUTES if rx.match(path.split("?")[0]) for m in item if m in METHODS]
    if documented and rng.random() < 0.75:
        return rng.choice(documented)
    return rng.choice(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO", "get"])


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
            "pipelined junk after a good request",
            f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() + os.urandom(100),
            0,
        ),
    ]


def send_raw(url, data, stall):
    """Send ``data``, wait ``stall`` seconds, half-close; the status of any answer."""
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=TIMEOUT) as s:
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


# ---- the tests ------------------------------------------------------------------


def alive(proc, url, err, where):
    assert proc.poll() is None, f"the endpoint died (exit {proc.returncode}) {where}"
    describe(url)
    err.seek(0)
    log = err.read()
    assert "panicked" not in log, f"a panic {where}:\n{log[-3000:]}"


def test_random_requests_leave_the_endpoint_alive_and_answer_no_undocumented_5xx(endpoint):
    proc, url, err = endpoint
    print(f"MPIWS_FUZZ_HTTP_SEED={SEED} MPIWS_FUZZ_HTTP_REQUESTS={REQUESTS}")
    rng = random.Random(SEED)
    st = State(url)
    before = snapshot(proc, url)
    statuses = {}
    deadline = time.monotonic() + max(60.0, REQUESTS * 0.1)
    for i in range(REQUESTS):
        t = target(rng, st)
        m = method(rng, t)
        h = headers(rng, st)
        b = body(rng, st, m)
        lie = None
        if b is not None and rng.random() < 0.1:
            lie = max(0, len(b) + rng.choice([-5, -1, 1, 100, 1 << 40]))
        where = f"at request {i} (seed {SEED}): {m} {t[:200]} headers={[(k, v[:80]) for k, v in h]} body={(b or b'')[:200]!r} announce={lie}"
        try:
            answer = call(url, m, t, b, h, content_length=lie)
        except (socket.timeout, TimeoutError):
            # A body announced and never sent (a longer Content-Length, or
            # Transfer-Encoding without chunks) is waited for, up to the
            # endpoint's --body-timeout (longer than this client waits).
            lied = (lie is not None and lie > len(b)) or any(k == "Transfer-Encoding" for k, _ in h)
            assert lied or may_wait(m, t, h), f"no answer within {TIMEOUT} s {where}"
            answer = None
        if answer is not None:
            status, data = answer
            statuses[status] = statuses.get(status, 0) + 1
            if status >= 500:
                assert status in documented_5xx(m, t), f"undocumented {status} {where}: {data[:300]!r}"
        if i % BATCH == BATCH - 1:
            alive(proc, url, err, where)
        assert time.monotonic() < deadline, f"the fuzz ran out of time {where}"
    alive(proc, url, err, "at the end")
    assert_no_state_change_without_key(before, snapshot(proc, url))
    print("statuses:", dict(sorted(statuses.items())))
    # The fuzz reached past the first checks: refusals and successes both.
    assert statuses.get(400, 0) > 0 and statuses.get(404, 0) > 0 and any(200 <= s < 300 for s in statuses)


def test_raw_socket_junk_leaves_the_endpoint_alive(endpoint):
    proc, url, err = endpoint
    st = State(url)
    before = snapshot(proc, url)
    for name, data, stall in raw_cases(url, st):
        status = send_raw(url, data, stall)
        assert status is None or status < 500, f"{name}: answered {status}"
        alive(proc, url, err, f"after raw case {name!r}")
    assert_no_state_change_without_key(before, snapshot(proc, url))
