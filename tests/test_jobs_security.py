"""The jobs layer against a client that means harm, on real endpoints over
real HTTP: URL inputs cannot reach the deployer's own network (SSRF), are
bounded in size and time; the disk, the job table and what is kept are
bounded; inputs are copies; job files are never read through symlinks;
a kill ends a job's whole process group; values never become options; the
work directory is private and cannot be planted; jobs and uploads belong to
the key that made them."""

import http.client
import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

from mpiws import MPI
from mpiws.keys import client_key
from mpiws.service.serve import Server


def call(method, url, body=None, headers=None):
    """Every request of this file, with the endpoint key (a JSON body says
    so): (status, headers, body bytes)."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    headers = {
        "authorization": f"Bearer {client_key()}",
        **({"content-type": "application/json"} if isinstance(body, (dict, list)) else {}),
        **(headers or {}),
    }
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        try:
            c.request(method, u.path + (f"?{u.query}" if u.query else ""), body=data, headers=headers or {})
        except OSError:
            pass  # answered (and closed) before the whole body was sent: the answer is still there
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        c.close()


def spawn(server, program, **inputs):
    return call("POST", f"{server.url}/programs/{program}/jobs", {"inputs": inputs})


def run(server, program, **inputs):
    """Call a program; its results (the call must be accepted)."""
    status, _, body = call("POST", f"{server.url}/programs/{program}/call", {"inputs": inputs})
    assert status == 200, body
    return json.loads(body)


def message(body):
    return json.loads(body)["error"]["message"]


def upload(base, data):
    """Upload ``data`` to the endpoint at URL ``base``; its reference."""
    status, _, body = call("POST", f"{base}/files", data, {"content-type": "application/octet-stream"})
    assert status == 201, body
    return json.loads(body)


def script(d, name, text):
    p = d / name
    p.write_text("#!/bin/sh\n" + text)
    p.chmod(0o755)
    return str(p)


def wait_for(check, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture(scope="module")
def secret(tmp_path_factory):
    """A file of the endpoint's user that no client may read."""
    p = tmp_path_factory.mktemp("secret") / "secret.txt"
    p.write_text("the deployer's secret\n")
    return p


@pytest.fixture(scope="module")
def host(tmp_path_factory, secret):
    """An endpoint with the default rules (no --fetch-allow)."""
    d = tmp_path_factory.mktemp("security")
    family = script(
        d, "family.sh", "sleep 300 &\necho $! > $1\n(trap '' TERM; exec sleep 301) &\necho $! >> $1\nwait\n"
    )
    mklink = script(d, "mklink.sh", f"ln -s {secret} out\nrm .stderr\nln -s {secret} .stderr\n")
    programs = [
        "digest=sha256sum [in:file:data:binary]",
        "echo=echo [in:val:text:string]",
        "echodash=printf %s\\n [in:val:text:string:dash-ok]",
        "int=echo [in:val:n:int]",
        "num=echo [in:val:f:float]",
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        f"rewrite={script(d, 'rewrite.sh', 'echo changed > $1')} [in:file:data:string]",
        f"mklink={mklink} [out:file:out:string]",
        f"mkfifo={script(d, 'mkfifo.sh', 'mkfifo out')} [out:file:out:string]",
        f"family={family} [out:file:pids:string]",
        "sleep=sleep [in:val:seconds:float]",
    ]
    s = Server({}, programs=programs)
    yield s
    s.stop()


@pytest.fixture
def listener():
    """A port on loopback that records whether anyone connected."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.3)
    yield sock
    sock.close()


def connected(sock):
    try:
        sock.accept()[0].close()
        return True
    except socket.timeout:
        return False


# ---- 1. server-side request forgery ----------------------------------------


def test_url_inputs_from_loopback_are_refused_however_spelled(host, listener):
    port = listener.getsockname()[1]
    for h in (
        "127.0.0.1",
        "127.1",
        "0x7f000001",
        "2130706433",
        "017700000001",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "127.9.9.9",
        "0.0.0.0",
    ):
        url = f"http://{h}:{port}/secret"
        status, _, body = spawn(host, "digest", data={"url": url})
        assert status == 400, (url, body)
        why = message(body)
        assert "input 'data'" in why and "--fetch-allow" in why, (url, why)
        assert "loopback" in why or "unspecified" in why, (url, why)
    assert not connected(listener), "the endpoint connected to a refused address"


def test_private_link_local_and_metadata_addresses_are_refused(host):
    for h in (
        "10.0.0.1",
        "172.16.5.4",
        "192.168.0.1",
        "100.64.0.1",
        "169.254.169.254",
        "[fd00::1]",
        "[fe80::1]",
        "224.0.0.1",
        "255.255.255.255",
    ):
        status, _, body = spawn(host, "digest", data={"url": f"http://{h}/latest/meta-data/"})
        assert status == 400 and "--fetch-allow" in message(body), (h, body)


def test_the_deployer_allows_a_host_explicitly(tmp_path):
    other = Server({}, programs=[])
    allowing = Server({}, programs=["digest=sha256sum [in:file:data:binary]"], fetch_allow=["127.0.0.1"])
    try:
        ref = upload(other.url, b"shared data")
        r = run(allowing, "digest", data={"url": ref["url"]})
        assert r["state"] == "done", r
        # the default refuses the very same URL
        refusing = Server({}, programs=["digest=sha256sum [in:file:data:binary]"])
        try:
            status, _, body = spawn(refusing, "digest", data={"url": ref["url"]})
            assert status == 400 and "loopback" in message(body) and "--fetch-allow 127.0.0.1:" in message(body)
        finally:
            refusing.stop()
        # an allow entry names an address, not its neighbours
        status, _, body = spawn(allowing, "digest", data={"url": ref["url"].replace("127.0.0.1", "127.0.0.2")})
        assert status == 400, body
    finally:
        allowing.stop()
        other.stop()
    with pytest.raises(MPI.Exception, match="fetch-allow"):
        Server({}, fetch_allow=["10.0.0.0/99"])


class Redirect(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", "http://127.0.0.1:1/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


def test_redirects_are_not_followed_and_pulls_are_bounded_in_size_and_time(listener):
    web = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    other = Server({}, programs=[])
    s = Server(
        {},
        programs=["digest=sha256sum [in:file:data:binary]"],
        fetch_allow=["127.0.0.1"],
        max_fetch=1000,
        fetch_timeout=1.0,
    )
    try:
        r = run(s, "digest", data={"url": f"http://127.0.0.1:{web.server_address[1]}/x"})
        assert r["state"] == "failed" and "redirects are not followed" in r["error"], r
        big = upload(other.url, os.urandom(5000))
        r = run(s, "digest", data=big)
        assert r["state"] == "failed" and "larger than 1000 bytes" in r["error"] and "--max-fetch" in r["error"], r
        t = time.monotonic()
        r = run(s, "digest", data={"url": f"http://127.0.0.1:{listener.getsockname()[1]}/stalled"})  # never answers
        assert r["state"] == "failed" and "not pulled within 1" in r["error"] and "--fetch-timeout" in r["error"], r
        assert time.monotonic() - t < 10
    finally:
        s.stop()
        other.stop()
        web.shutdown()


# ---- 3. disk, job table, expiry, removal -------------------------------------


def test_uploads_and_job_outputs_are_bounded_by_the_disk_quota(tmp_path):
    fill = script(tmp_path, "fill.sh", "head -c 3000000 /dev/zero > $1\n")
    s = Server({}, programs=[f"fill={fill} [out:file:out:binary]"], max_disk=2 << 20, max_upload=2 << 20)
    try:
        first = upload(s.url, bytes(1500 << 10))
        status, _, body = call(
            "POST", f"{s.url}/files", bytes(1000 << 10), {"content-type": "application/octet-stream"}
        )
        assert status == 507 and "--max-disk" in message(body), body
        assert call("DELETE", first["url"])[0] == 204  # gives its bytes back
        second = upload(s.url, bytes(1000 << 10))
        r = run(s, "fill")
        assert r["state"] == "failed" and "disk quota" in r["error"], r
        assert call("DELETE", second["url"])[0] == 204
        assert call("DELETE", f"{s.url}/jobs/{r['id']}?remove=true")[0] == 204
        assert upload(s.url, bytes(1500 << 10))["size"] == 1500 << 10  # all of it was given back
    finally:
        s.stop()


def test_uploads_are_bounded_in_number_per_key(tmp_path):
    s = Server({}, max_uploads_per_key=2)
    try:
        raw = {"content-type": "application/octet-stream"}
        urls = [json.loads(call("POST", s.url + "/files", b"x", raw)[2])["url"] for _ in range(2)]
        status, headers, body = call("POST", s.url + "/files", b"x", raw)
        assert (
            status == 429 and headers["Retry-After"] and "--max-uploads-per-key" in json.loads(body)["error"]["message"]
        )
        assert call("DELETE", urls[0])[0] == 204
        assert call("POST", s.url + "/files", b"x", raw)[0] == 201  # room again
    finally:
        s.stop()


def test_the_default_upload_limit_is_one_gib(tmp_path):
    s = Server({})
    try:
        conn = http.client.HTTPConnection(s.url.split("//")[1], timeout=30)
        conn.putrequest("POST", "/files")
        conn.putheader("Content-Length", str((1 << 30) + 1))
        conn.putheader("Authorization", f"Bearer {s.key}")
        conn.endheaders()
        r = conn.getresponse()
        assert r.status == 413 and "--max-upload" in json.loads(r.read())["error"]["message"]
    finally:
        s.stop()


def test_the_job_table_is_bounded(tmp_path):
    s = Server({}, programs=["sleep=sleep [in:val:seconds:float]"], max_jobs=2)
    try:
        a = json.loads(spawn(s, "sleep", seconds=30)[2])
        spawn(s, "sleep", seconds=30)
        status, headers, body = spawn(s, "sleep", seconds=30)
        assert status == 503 and "--max-jobs" in message(body) and int(headers["Retry-After"]) >= 1, body
        assert call("DELETE", f"{a['url']}?remove=true")[0] == 204
        assert spawn(s, "sleep", seconds=0)[0] == 201
    finally:
        s.stop()


def test_ended_jobs_and_uploads_expire(tmp_path):
    s = Server({}, programs=["copy=cp [in:file:src:binary] [out:file:dst:binary]"], job_ttl=1.0)
    try:
        ref = upload(s.url, b"short-lived")
        r = run(s, "copy", src=ref)
        job_dir = Path(s.endpoint.workdir) / "jobs" / r["id"]
        assert job_dir.is_dir()
        assert wait_for(lambda: call("GET", f"{s.url}/jobs/{r['id']}")[0] == 404, timeout=10)
        assert wait_for(lambda: call("GET", ref["url"])[0] == 404, timeout=10)
        assert not job_dir.exists()
    finally:
        s.stop()


def test_delete_with_remove_kills_and_removes_a_job_and_its_files(host):
    job = json.loads(spawn(host, "sleep", seconds=60)[2])
    job_dir = Path(host.endpoint.workdir) / "jobs" / job["id"]
    assert wait_for(lambda: json.loads(call("GET", job["url"])[2])["state"] == "running")
    assert call("DELETE", f"{job['url']}?remove=maybe")[0] == 400
    assert call("DELETE", f"{job['url']}?remove=true")[0] == 204
    assert not job_dir.exists()
    for path in ("", "/results", "/stdout"):
        assert call("GET", job["url"] + path)[0] == 404
    assert call("DELETE", f"{job['url']}?remove=true")[0] == 404
    # a plain DELETE still only kills
    job = json.loads(spawn(host, "sleep", seconds=60)[2])
    status, _, body = call("DELETE", job["url"])
    assert status == 200 and json.loads(body)["state"] == "killed"
    assert call("GET", f"{job['url']}/stdout")[0] == 200


def test_a_spawn_request_is_bounded():
    s = Server({}, programs=["echo=echo [in:val:text:string]"], max_spawn_body=1000)
    try:
        status, _, body = spawn(s, "echo", text="x" * 2000)
        assert status == 413 and "--max-spawn-body" in message(body), body
        assert spawn(s, "echo", text="x" * 100)[0] == 201
    finally:
        s.stop()


# ---- 4. inputs are copies ----------------------------------------------------


def test_a_program_that_rewrites_its_input_changes_no_one_elses_file(host):
    ref = upload(host.url, b"original")
    r = run(host, "rewrite", data=ref)
    assert r["state"] == "done"
    assert call("GET", ref["url"])[2] == b"original"
    first = run(host, "copy", src="output of the first job")
    r = run(host, "rewrite", data={"url": f"{host.url}/jobs/{first['id']}/files/dst"})
    assert r["state"] == "done"
    assert call("GET", f"{host.url}/jobs/{first['id']}/files/dst")[2] == b"output of the first job"


# ---- 5. symlinks -------------------------------------------------------------


def test_job_files_are_never_served_through_a_symlink(host, secret):
    r = run(host, "mklink")
    assert r["state"] == "done"
    assert r["outputs"]["out"] is None and r["stderr"] is None, r
    for path in ("files/out", "stderr"):
        status, _, body = call("GET", f"{host.url}/jobs/{r['id']}/{path}")
        assert status == 404 and b"secret" not in body, (path, body)
    by_ref = json.loads(call("GET", f"{host.url}/jobs/{r['id']}/results?by=reference")[2])
    assert by_ref["outputs"]["out"] is None
    # nor copied into another job as its input
    status, _, body = spawn(host, "digest", data={"url": f"{host.url}/jobs/{r['id']}/files/out"})
    assert status == 400 and "not a file of this endpoint" in message(body)


def test_a_fifo_is_not_served_and_does_not_hang_the_endpoint(host):
    r = run(host, "mkfifo")
    t = time.monotonic()
    assert call("GET", f"{host.url}/jobs/{r['id']}/files/out")[0] == 404
    assert r["outputs"]["out"] is None and time.monotonic() - t < 5


# ---- 6. kill ends the whole process group ------------------------------------


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] == "Z"  # ended, not yet reaped by init
    except FileNotFoundError:
        return True


def test_kill_ends_the_jobs_grandchildren_too(host):
    job = json.loads(spawn(host, "family")[2])
    pids = []

    def started():
        nonlocal pids
        status, _, body = call("GET", f"{job['url']}/files/pids")
        pids = [int(p) for p in body.split()] if status == 200 else []
        return len(pids) == 2

    assert wait_for(started), "the job did not start its children"
    assert not any(gone(p) for p in pids)
    t = time.monotonic()
    status, _, body = call("DELETE", job["url"])
    assert status == 200 and json.loads(body)["state"] == "killed"
    # one grandchild ignores SIGTERM: it gets SIGKILL after the grace
    assert wait_for(lambda: all(gone(p) for p in pids), timeout=10), f"still alive: {[p for p in pids if not gone(p)]}"
    assert time.monotonic() - t < 8


# ---- 7, 8. values ------------------------------------------------------------


@pytest.mark.parametrize(
    "program, value, why",
    [
        ("echo", "--help", "read as an option"),
        ("echo", "-rf", "read as an option"),
        ("int", -5, "read as an option"),
        ("num", "-1.5", "read as an option"),
        ("echo", "a\u0000b", "NUL"),
        ("int", "+5", "must be an int"),
        ("int", " 5", "must be an int"),
        ("int", 18446744073709551615, "must be an int"),
        ("int", "9223372036854775808", "must be an int"),
        ("int", "0x10", "must be an int"),
        ("num", "inf", "must be a float"),
        ("num", "nan", "must be a float"),
        ("num", "1e999", "must be a float"),
    ],
)
def test_values_that_would_change_the_command_are_refused(host, program, value, why):
    key = {"echo": "text", "int": "n", "num": "f"}[program]
    status, _, body = spawn(host, program, **{key: value})
    assert status == 400 and why in message(body), body
    if why == "read as an option":
        assert "dash-ok" in message(body)


def test_a_template_may_allow_values_with_a_dash(host):
    r = run(host, "echodash", text="--help")
    assert r["state"] == "done" and r["stdout"] == "--help\n"
    u = json.loads(call("GET", f"{host.url}/programs/echodash")[2])
    assert u["parameters"][0]["dash_ok"] is True
    assert run(host, "int", n="42")["stdout"] == "42\n"
    assert run(host, "int", n=7)["stdout"] == "7\n"


# ---- 9. the work directory ---------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_planted_symlink_at_the_old_predictable_name_is_not_followed(tmp_path):
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    port = free_port()
    planted = tempfile.gettempdir() + f"/mpiws-{os.getpid()}-{port}"
    os.symlink(attacker, planted)
    try:
        s = Server({}, port=port, programs=["copy=cp [in:file:src:binary] [out:file:dst:binary]"])
        try:
            upload(s.url, b"private data")
            assert run(s, "copy", src="more")["state"] == "done"
            assert os.listdir(attacker) == []
            work = str(s.endpoint.workdir)
            assert os.path.realpath(work) != str(attacker) and str(port) not in os.path.basename(work)
            assert stat.S_IMODE(os.lstat(work).st_mode) == 0o700
            for sub in ("jobs", "files"):
                assert stat.S_IMODE(os.lstat(os.path.join(work, sub)).st_mode) == 0o700
        finally:
            s.stop()
        assert not os.path.exists(work), "the work directory the endpoint made outlives it"
    finally:
        os.unlink(planted)


def test_a_given_workdir_must_be_private(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(MPI.Exception, match="symlink"):
        Server({}, workdir=str(link))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(MPI.Exception, match="others may write"):
        Server({}, workdir=str(shared))
    made = tmp_path / "new" / "work"
    s = Server({}, workdir=str(made))
    try:
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    finally:
        s.stop()
    kept = Server({}, workdir=str(real))  # an existing private directory is used, and kept
    kept.stop()
    assert real.is_dir()


def test_mpiws_serve_makes_a_fresh_private_workdir_and_removes_it(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    srv = subprocess.Popen(
        [sys.executable, "-m", "mpiws", "serve", "--program", "echo=echo [in:val:text:string]"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(tmp)),
    )
    try:
        url = srv.stdout.readline().split(" at ")[-1].strip()
        assert call("GET", f"{url}/programs/echo")[0] == 200
        assert list(tmp.iterdir()) == []  # made on first use: most endpoints never need one
        upload(url, b"data")
        (work,) = list(tmp.iterdir())
        assert work.name.startswith("mpiws-") and len(work.name) >= 6 + 32
        assert stat.S_IMODE(work.lstat().st_mode) == 0o700
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=20)
    assert list(tmp.iterdir()) == []


# ---- 10. jobs and uploads belong to the key that made them -------------------

KEY_A, KEY_B, KEY_ADMIN = (c * 16 + secrets.token_hex(8) for c in "abc")


def as_key(key):
    return {"authorization": f"Bearer {key}"}


def keys_file(d):
    """Two tenants (jobs, files) and an admin key with no other scope."""
    keys = d / "keys"
    keys.write_text(f"{KEY_A} jobs files\n{KEY_B} jobs,files\n{KEY_ADMIN} admin\n")
    keys.chmod(0o600)
    return str(keys)


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    """An endpoint with keys A and B (``jobs files``) and an ``admin`` key."""
    s = Server(
        {},
        keys=keys_file(tmp_path_factory.mktemp("tenants")),
        programs=["sleep=sleep [in:val:seconds:float]", "copy=cp [in:file:src:binary] [out:file:dst:binary]"],
    )
    yield s
    s.stop()


def spawn_as(key, server, program, **inputs):
    status, _, body = call("POST", f"{server.url}/programs/{program}/jobs", {"inputs": inputs}, as_key(key))
    assert status == 201, body
    return json.loads(body)


def test_another_key_cannot_watch_read_or_kill_a_job_nor_learn_it_exists(tenants):
    job = spawn_as(KEY_A, tenants, "sleep", seconds=60)
    assert wait_for(lambda: json.loads(call("GET", job["url"], headers=as_key(KEY_A))[2])["state"] == "running")
    missing = f"{tenants.url}/jobs/{'0' * 32}"
    for method, suffix in (
        ("GET", ""),
        ("GET", "?wait=30"),
        ("GET", "/results"),
        ("GET", "/results?by=reference"),
        ("DELETE", ""),
        ("DELETE", "?remove=true"),
    ):
        start = time.monotonic()
        theirs = call(method, job["url"] + suffix, headers=as_key(KEY_B))
        assert time.monotonic() - start < 10, "a long poll on another key's job waited"
        none = call(method, missing + suffix, headers=as_key(KEY_B))
        assert theirs[0] == none[0] == 404, (method, suffix, theirs)
        # word for word the answer for a job that does not exist
        assert theirs[2] == none[2].replace(b"0" * 32, job["id"].encode()), (theirs[2], none[2])
    # untouched: still running, its owner sees it
    status, _, body = call("GET", job["url"], headers=as_key(KEY_A))
    assert status == 200 and json.loads(body)["state"] == "running"
    # its files stay capability URLs: whoever holds the URL reads them (no key at all)
    assert call("GET", f"{job['url']}/stdout", headers={"authorization": ""})[0] == 200
    # admin may act on any job
    status, _, body = call("GET", job["url"], headers=as_key(KEY_ADMIN))
    assert status == 200 and json.loads(body)["id"] == job["id"]
    status, _, body = call("DELETE", job["url"], headers=as_key(KEY_ADMIN))
    assert status == 200 and json.loads(body)["state"] == "killed", body
    status, _, body = call("GET", f"{job['url']}/results", headers=as_key(KEY_ADMIN))
    assert status == 200 and json.loads(body)["state"] == "killed", body
    assert call("DELETE", f"{job['url']}?remove=true", headers=as_key(KEY_ADMIN))[0] == 204
    assert call("GET", job["url"], headers=as_key(KEY_A))[0] == 404
    # and the admin key may not spawn: it has no 'jobs' scope
    status, _, body = call("POST", f"{tenants.url}/programs/sleep/jobs", {"inputs": {"seconds": 0}}, as_key(KEY_ADMIN))
    assert status == 403 and "'jobs'" in message(body), body


def test_another_key_cannot_delete_an_upload_but_may_use_it_by_reference(tenants):
    status, _, body = call(
        "POST", f"{tenants.url}/files", b"A's data", {**as_key(KEY_A), "content-type": "application/octet-stream"}
    )
    assert status == 201, body
    ref = json.loads(body)
    missing = f"{tenants.url}/files/{'0' * 32}"
    theirs, none = call("DELETE", ref["url"], headers=as_key(KEY_B)), call("DELETE", missing, headers=as_key(KEY_B))
    assert theirs[0] == none[0] == 404 and theirs[2] == none[2].replace(
        b"0" * 32, ref["url"].rsplit("/", 1)[1].encode()
    )
    assert call("GET", ref["url"], headers={"authorization": ""})[2] == b"A's data"  # still there, by its URL
    # a job of B given A's upload, and A's job output, by reference: linked from disk
    status, _, body = call(
        "POST",
        f"{tenants.url}/programs/copy/call?by=reference",
        {"inputs": {"src": {"url": ref["url"]}}},
        as_key(KEY_B),
    )
    assert status == 200, body
    out = json.loads(body)["outputs"]["dst"]["url"]
    status, _, body = call(
        "POST", f"{tenants.url}/programs/copy/call", {"inputs": {"src": {"url": out}}}, as_key(KEY_A)
    )
    assert status == 200 and json.loads(body)["outputs"]["dst"] == {"base64": "QSdzIGRhdGE="}, body
    assert call("DELETE", ref["url"], headers=as_key(KEY_A))[0] == 204
    # admin may remove anyone's upload
    status, _, body = call(
        "POST", f"{tenants.url}/files", b"B's", {**as_key(KEY_B), "content-type": "application/octet-stream"}
    )
    b_ref = json.loads(body)
    assert call("DELETE", b_ref["url"], headers=as_key(KEY_A))[0] == 404
    assert call("DELETE", b_ref["url"], headers=as_key(KEY_ADMIN))[0] == 204
    assert call("GET", b_ref["url"])[0] == 404


def test_get_jobs_lists_the_callers_own_jobs_and_every_job_to_admin(tenants):
    def listed(key):
        status, _, body = call("GET", f"{tenants.url}/jobs", headers=as_key(key))
        assert status == 200, body
        return json.loads(body)

    a = [spawn_as(KEY_A, tenants, "sleep", seconds=30) for _ in range(2)]
    b = spawn_as(KEY_B, tenants, "sleep", seconds=30)
    try:
        mine = listed(KEY_A)
        ids = [j["id"] for j in mine]
        assert a[0]["id"] in ids and a[1]["id"] in ids and b["id"] not in ids
        assert ids.index(a[0]["id"]) < ids.index(a[1]["id"])  # oldest first
        assert all(j["owner"] == 1 for j in mine)
        entry = next(j for j in mine if j["id"] == a[0]["id"])
        assert set(entry) == {"id", "url", "program", "state", "created", "owner"}
        assert entry["url"] == a[0]["url"] and entry["program"] == "sleep" and entry["created"] == a[0]["started"]
        assert b["id"] in {j["id"] for j in listed(KEY_B)} and not {x["id"] for x in a} & {
            j["id"] for j in listed(KEY_B)
        }
        everyone = listed(KEY_ADMIN)
        assert {x["id"] for x in a + [b]} <= {j["id"] for j in everyone}
        assert [j["created"] for j in everyone] == sorted(j["created"] for j in everyone)  # oldest first
        # GET /: a count of the jobs, to admin only
        for key in (None, KEY_A):
            status, _, body = call("GET", f"{tenants.url}/", headers={"authorization": f"Bearer {key}" if key else ""})
            assert status == 200 and "jobs" not in json.loads(body), body
        status, _, body = call("GET", f"{tenants.url}/", headers=as_key(KEY_ADMIN))
        assert json.loads(body)["jobs"] == len(everyone)
        # a key with neither 'jobs' nor 'admin' lists nothing
        assert call("GET", f"{tenants.url}/jobs", headers={"authorization": ""})[0] == 401
    finally:
        for j in a + [b]:
            call("DELETE", f"{j['url']}?remove=true", headers=as_key(KEY_ADMIN))


def test_a_key_holds_at_most_max_jobs_per_key(tmp_path):
    """`mpiws serve --max-jobs-per-key`: above it, 429 with Retry-After, naming the flag; other keys are not held back."""
    port = free_port()
    srv = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--port",
            str(port),
            "--keys",
            keys_file(tmp_path),
            "--program",
            "sleep=sleep [in:val:seconds:float]",
            "--max-jobs-per-key",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = srv.stdout.readline().split(" at ")[-1].strip()
        server = type("Endpoint", (), {"url": url})
        first = spawn_as(KEY_A, server, "sleep", seconds=60)
        spawn_as(KEY_A, server, "sleep", seconds=60)
        status, headers, body = call("POST", f"{url}/programs/sleep/jobs", {"inputs": {"seconds": 0}}, as_key(KEY_A))
        assert status == 429 and "--max-jobs-per-key" in message(body) and int(headers["Retry-After"]) >= 1, body
        status, _, body = call("POST", f"{url}/programs/sleep/call", {"inputs": {"seconds": 0}}, as_key(KEY_A))
        assert status == 429, body
        spawn_as(KEY_B, server, "sleep", seconds=0)  # another key's share is its own
        assert call("DELETE", f"{first['url']}?remove=true", headers=as_key(KEY_A))[0] == 204
        spawn_as(KEY_A, server, "sleep", seconds=0)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=20)


def test_one_key_cannot_take_the_whole_disk_quota(tmp_path):
    """Issue 28: the quota was shared by all keys; one `files` key filled it
    and locked the others out until its uploads expired."""
    s = Server({}, keys=keys_file(tmp_path), max_disk=3 << 20, max_disk_per_key=(3 << 20) // 2, max_upload=2 << 20)
    raw = {"content-type": "application/octet-stream"}
    try:
        status, _, body = call("POST", f"{s.url}/files", bytes(1 << 20), {**raw, **as_key(KEY_A)})
        assert status == 201, body
        status, _, body = call("POST", f"{s.url}/files", bytes(1 << 20), {**raw, **as_key(KEY_A)})
        assert status == 507 and "this key's share" in message(body) and "--max-disk-per-key" in message(body), body
        status, _, body = call("POST", f"{s.url}/files", bytes(1 << 20), {**raw, **as_key(KEY_B)})
        assert status == 201, body  # the other key still has its share
    finally:
        s.stop()
