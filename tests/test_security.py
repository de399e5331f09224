"""Secure by default: each finding of the security review, tried as an
attacker would (a plain HTTP client, another local process), against real
endpoints. Each test failed on the code before the fix."""

import http.client
import json
import os
import pickle
import secrets
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

import pytest

from conftest import ROOT

import services
from mpiws.keys import client_key


class Api:
    """A plain HTTP client of one endpoint, with a default Authorization."""

    def __init__(self, url, auth=None):
        u = urlparse(url)
        self.url, self.host, self.port, self.auth = url, u.hostname, u.port, auth

    def call(self, method, path, body=None, headers=None, auth="default", timeout=30):
        h = {"content-type": "application/json"} if body is not None else {}
        auth = self.auth if auth == "default" else auth
        if auth:
            h["authorization"] = f"Bearer {auth}"
        h.update(headers or {})
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            try:
                c.request(method, path, body=body, headers=h)
            except OSError:
                pass  # answered and closed before the whole body was sent
            r = c.getresponse()
            data = r.read()
            is_json = "json" in (r.getheader("content-type") or "")
            return r.status, (json.loads(data) if is_json and data else data), r
        finally:
            c.close()

    def run(self, service, domain=None, token=None, rank=0, size=1, params=None, **kw):
        domain, token = domain or secrets.token_hex(6), token or secrets.token_hex(8)
        b = {
            "domain": domain,
            "rank": rank,
            "endpoints": [self.url] * size,
            "token": token,
            "service": service,
            "params": params or {},
        }
        status, body, _r = self.call("POST", "/run", json.dumps(b), **kw)
        return status, body, domain, token

    def store(self, domain, rank, token, payload, source=0):
        h = {"mpiws-source": str(source), "content-type": "application/octet-stream"}
        return self.call("POST", f"/domains/{domain}/ranks/{rank}/messages", payload, h, auth=token)

    def status(self, domain, rank, token, wait=None):
        q = "" if wait is None else f"?wait={wait}"
        return self.call("GET", f"/domains/{domain}/ranks/{rank}{q}", auth=token)[:2]


KEY_A = "a" * 16 + secrets.token_hex(8)
KEY_B = "b" * 16 + secrets.token_hex(8)
KEY_FILES = "f" * 16 + secrets.token_hex(8)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """An endpoint with three keys: A (every scope), B (run only), one for files only."""
    from mpiws.service.serve import Server

    d = tmp_path_factory.mktemp("keys")
    keys = d / "keys"
    keys.write_text(f"{KEY_A}\n{KEY_B} run\n{KEY_FILES} files\n")
    keys.chmod(0o600)
    s = Server(
        services.ALL,
        keys=str(keys),
        max_message=1 << 20,
        body_timeout=1.0,
        header_timeout=1.5,
        max_instances=6,
        max_instances_per_key=4,
        max_ranks=64,
        max_connections=16,
    )
    yield s
    s.stop()


@pytest.fixture
def api(server):
    return Api(server.url, KEY_A)


# ---- 1. code execution without a credential ----------------------------------------------


class Boom:
    """Unpickling this runs a shell command: what an attacker sends."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_nothing_runs_without_a_key(api):
    for auth in (None, "not-a-key-of-this-endpoint", KEY_A[:-1]):
        status, body, _, _ = api.run("recv_object", auth=auth)
        assert status == 401, body
    assert api.run("recv_object", auth=KEY_FILES)[0] == 403  # a key without the 'run' scope
    status, body, domain, token = api.run("recv_object")
    assert status == 201, body
    api.call("DELETE", f"/domains/{domain}/ranks/0", auth=token)


def test_a_pickled_payload_cannot_run_code_in_a_service(api, tmp_path):
    marker = tmp_path / "pwned"
    status, _, domain, token = api.run("recv_object")
    assert status == 201
    assert api.store(domain, 0, token, pickle.dumps(Boom(marker)))[0] == 204
    _, s = api.status(domain, 0, token, wait=10)
    assert s["state"] == "failed"
    assert (
        "refusing to unpickle posix.system" in s["error"]["message"]
        or "refusing to unpickle os.system" in s["error"]["message"]
    )
    assert not marker.exists()


def test_plain_data_and_numpy_arrays_still_arrive(api):
    import numpy as np

    value = {
        "a": [1, 2.5, "x", (3, 4)],
        "b": b"bytes",
        "c": {1, 2},
        "n": None,
        "arr": np.arange(5.0),
        "big": np.ones(100_000, dtype="i4"),
        "scalar": np.float32(2.5),
    }
    status, _, domain, token = api.run("recv_repr")
    assert status == 201
    assert api.store(domain, 0, token, pickle.dumps(value, protocol=5))[0] == 204
    _, s = api.status(domain, 0, token, wait=10)
    assert s["state"] == "done", s
    assert s["result"] == repr(value)


# ---- 2. local takeover of `mpiws run -n N` ---------------------------------------------------


def test_a_rank_process_runs_only_its_launchers_domain(tmp_path):
    """A rank process of `mpiws run` (started here as the launcher starts
    it) accepts a run request only with the key its launcher piped to it."""
    prog = tmp_path / "prog.py"
    ran = tmp_path / "ran"
    prog.write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    url_r, url_w = os.pipe()
    hold_r, hold_w = os.pipe()
    key_r, key_w = os.pipe()
    key = secrets.token_hex(32)
    os.write(key_w, key.encode())
    os.close(key_w)
    env = dict(os.environ, MPIWS_URL_FD=str(url_w), MPIWS_HOLD_FD=str(hold_r), MPIWS_KEY_FD=str(key_r))
    p = subprocess.Popen(
        [sys.executable, "-m", "mpiws.launch.worker", str(prog)], env=env, pass_fds=(url_w, hold_r, key_r), cwd=ROOT
    )
    for fd in (url_w, hold_r, key_r):
        os.close(fd)
    try:
        url = os.read(url_r, 1024).decode().strip()
        attacker = Api(url)
        # another local process, first: no key, the user's own key file, a guess
        for auth in (None, client_key() or "x" * 32, secrets.token_hex(32)):
            status, body, _, _ = attacker.run("script", auth=auth)
            assert status == 401, body
        time.sleep(0.3)
        assert not ran.exists()
        status, body, domain, token = Api(url, key).run("script")
        assert status == 201, body
        _, s = Api(url).status(domain, 0, token, wait=10)
        assert s["state"] == "done", s
        assert ran.read_text() == "ran"
    finally:
        os.close(hold_w)
        p.wait(10)


# ---- 5. memory: bounded run requests, stalled bodies -----------------------------------------


def test_run_requests_are_bounded(api):
    many = {"domain": "big", "rank": 0, "endpoints": [api.url] * 1_000_000, "token": "t" * 16, "service": "block"}
    status, body, _ = api.call("POST", "/run", json.dumps(many))
    assert status == 413 and "--max-binding" in body["error"]["message"]
    some = dict(many, endpoints=[api.url] * 65)
    status, body, _ = api.call("POST", "/run", json.dumps(some))
    assert status == 400 and "at most 64 ranks" in body["error"]["message"]
    fat = dict(many, endpoints=[api.url], params={"x": "y" * (2 << 20)})
    assert api.call("POST", "/run", json.dumps(fat))[0] == 413
    assert api.call("GET", "/")[0] == 200


def test_a_stalled_body_is_refused_not_held(api):
    s = socket.create_connection((api.host, api.port))
    try:
        s.sendall(
            f"POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY_A}\r\n"
            f'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"domain"'.encode()
        )
        s.settimeout(10)
        t0 = time.monotonic()
        answer = s.recv(4096).decode()
        assert answer.startswith("HTTP/1.1 408"), answer
        assert time.monotonic() - t0 < 5
    finally:
        s.close()


# ---- 7. instances bounded per endpoint and per key ----------------------------------------


def test_instances_are_bounded_per_key_and_per_endpoint(server, api):
    started = []
    try:
        for _ in range(4):
            status, body, d, t = api.run("block")
            assert status == 201, body
            started.append((d, t))
        status, body, r = api.call(
            "POST",
            "/run",
            json.dumps({"domain": "x", "rank": 0, "endpoints": [api.url], "token": "t" * 16, "service": "block"}),
        )
        assert status == 429 and r.getheader("retry-after") and "--max-instances-per-key" in body["error"]["message"]
        b = Api(api.url, KEY_B)
        for _ in range(2):
            status, body, d, t = b.run("block")
            assert status == 201, body
            started.append((d, t))
        status, body, d, t = b.run("block")
        assert status == 503 and "--max-instances" in body["error"]["message"], body
    finally:
        for d, t in started:
            api.call("DELETE", f"/domains/{d}/ranks/0", auth=t)
    time.sleep(0.5)
    status, _, domain, token = api.run("recv_object")
    assert status == 201  # room again once they ended
    api.call("DELETE", f"/domains/{domain}/ranks/0", auth=token)


# ---- 8. connections: head size, idle time, a cap ---------------------------------------------


def test_idle_connections_are_closed_and_do_not_lock_clients_out(api):
    idle = [socket.create_connection((api.host, api.port)) for _ in range(40)]  # more than the cap of 16
    try:
        t0 = time.monotonic()
        assert api.call("GET", "/", timeout=20)[0] == 200  # answered once idle ones are dropped
        assert time.monotonic() - t0 < 10
        idle[0].settimeout(5)
        assert idle[0].recv(100) == b""  # the endpoint closed it
    finally:
        for s in idle:
            s.close()


def test_an_idle_http2_connection_is_closed(api):
    # h2c with prior knowledge: the preface and an empty SETTINGS frame, then nothing.
    s = socket.create_connection((api.host, api.port))
    try:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        s.settimeout(10)
        t0 = time.monotonic()
        while s.recv(4096):  # the server's SETTINGS, its ack, then GOAWAY and a ping this client ignores
            pass
        assert time.monotonic() - t0 < 8, "closed after twice the head timeout (1.5 s here)"
    finally:
        s.close()


def test_an_oversized_head_is_refused(api):
    status, _, _ = api.call("GET", "/", headers={"x-junk": "j" * (100 << 10)})
    assert status == 431
    assert api.call("GET", "/")[0] == 200


# ---- 9. nothing is held for messages to instances that do not exist -------------------------


def test_stores_for_unknown_instances_hold_nothing(api):
    answers = []

    def probe():
        answers.append(api.store(secrets.token_hex(6), 0, secrets.token_hex(8), b"x"))

    t0 = time.monotonic()
    threads = [threading.Thread(target=probe) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert time.monotonic() - t0 < 10
    assert all(a[0] == 503 and a[2].getheader("retry-after") for a in answers)
    # a real domain is not starved: its early message is taken once it exists
    domain, token = secrets.token_hex(6), secrets.token_hex(8)
    assert api.store(domain, 0, token, pickle.dumps("early"))[0] == 503
    assert api.run("recv_object", domain=domain, token=token)[0] == 201
    assert api.store(domain, 0, token, pickle.dumps("early"))[0] == 204
    assert api.status(domain, 0, token, wait=10)[1]["result"] == "early"


# ---- 12. domains belong to their key; GET / shows them only to who may see them -------------


def test_a_domain_cannot_be_joined_or_listed_by_another_key(api):
    status, _, domain, token = api.run("block", size=2)
    assert status == 201
    try:
        b = Api(api.url, KEY_B)
        status, body, _, _ = b.run("block", domain=domain, token=token, rank=1, size=2)
        assert status == 409 and "taken" in body["error"]["message"]
        assert domain not in json.dumps(b.call("GET", "/")[1])
        assert domain not in json.dumps(api.call("GET", "/", auth=None)[1])
        listed = api.call("GET", "/", auth=token)[1]["domains"]
        assert [d["domain"] for d in listed] == [domain]  # the token holder sees its domain only
        assert domain in json.dumps(api.call("GET", "/")[1])  # admin sees all
        for bad in (".", ".."):
            status, body, _, _ = api.run("block", domain=bad)
            assert status == 400, body
    finally:
        api.call("DELETE", f"/domains/{domain}/ranks/0", auth=token)


# ---- 13. web pages cannot drive an endpoint ------------------------------------------------


def test_web_pages_cannot_drive_a_local_endpoint(api):
    b = {"domain": "web", "rank": 0, "endpoints": [api.url], "token": "t" * 16, "service": "block"}
    status, body, _ = api.call("POST", "/run", json.dumps(b), headers={"host": "attacker.example:80"})
    assert status == 403 and "--allow-host" in body["error"]["message"]
    status, body, _ = api.call("POST", "/run", json.dumps(b), headers={"origin": "http://attacker.example"})
    assert status == 403 and "Origin" in body["error"]["message"]
    status, body, _ = api.call("POST", "/run", json.dumps(b), headers={"content-type": "text/plain"})
    assert status == 415
    assert api.call("GET", "/", headers={"host": f"localhost:{api.port}"})[0] == 200


# ---- the command line and the key file -------------------------------------------------------


def test_sigterm_ends_an_endpoint_whose_service_holds_the_gil(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))
    p = subprocess.Popen(
        [sys.executable, "-m", "mpiws", "serve", "--service", "hold=services:hold_gil"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        url = p.stdout.readline().split(" at ")[-1].strip()
        status, body, _domain, _token = Api(url, client_key()).run("hold")
        assert status == 201, body
        time.sleep(1.0)  # the service is now inside sum(), holding the GIL
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        p.kill()
        p.wait()


def test_serve_refuses_a_public_address_without_tls():
    p = subprocess.run(
        [sys.executable, "-m", "mpiws", "serve", "--host", "0.0.0.0", "--service", "s=services:block"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert p.returncode != 0 and "without TLS" in p.stderr and "--insecure" in p.stderr


def test_the_generated_key_file_is_private_and_shared_by_clients(tmp_path):
    env = dict(os.environ, MPIWS_KEY_FILE=str(tmp_path / "cfg" / "key"))
    p = subprocess.Popen(
        [sys.executable, "-m", "mpiws", "serve", "--service", "sum=examples.service_sum:service"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        lines = [p.stdout.readline(), p.stdout.readline()]
        assert str(tmp_path / "cfg" / "key") in lines[1]
        url = lines[0].split(" at ")[-1].strip()
        key_file = tmp_path / "cfg" / "key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mpiws",
                "run",
                "--endpoints",
                f"{url},{url}",
                "--service",
                "sum",
                "--params",
                '{"n": 10}',
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=ROOT,
        )
        assert r.returncode == 0 and '"total": 55' in r.stdout, r.stderr
        r = subprocess.run(
            [sys.executable, "-m", "mpiws", "run", "--endpoints", url, "--service", "sum", "--key", "x" * 20],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=ROOT,
        )
        assert r.returncode != 0 and "not a key of this endpoint" in r.stderr
        key_file.chmod(0o644)
        r = subprocess.run(
            [sys.executable, "-m", "mpiws", "run", "--endpoints", url, "--service", "sum"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=ROOT,
        )
        assert r.returncode != 0 and "readable by others" in r.stderr
    finally:
        p.terminate()
        p.wait(10)
