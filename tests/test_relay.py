"""The relay role on loopback: who may register a name, what a hidden
endpoint's URL gives, and what it says when it cannot get through.
(Across real firewalled hosts: test_firewalled.py.)"""

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

KEY_ALL = "r" * 16 + secrets.token_hex(8)
KEY_RUN = "u" * 16 + secrets.token_hex(8)
KEY_OTHER = "o" * 16 + secrets.token_hex(8)
ADD = "add=examples/add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]"


class Serve:
    """``mpiws serve ARGS`` in a process of its own, ended at exit."""

    def __init__(self, tmp, name, *args, env=None):
        self.err_path = tmp / f"{name}.err"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mpiws", "serve", *args],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=open(self.err_path, "w"),
            env=dict(os.environ, **(env or {})),
        )
        line = self.proc.stdout.readline()
        assert " at http" in line, f"{line}{self.err_path.read_text()}"
        self.url = line.split(" at ", 1)[1].strip()
        # Without its pin (#sha256=..., which urllib would not verify): through the relay, trusting it.
        self.base = self.url.split("#", 1)[0]

    def stderr(self):
        return self.err_path.read_text()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    path = tmp_path_factory.mktemp("relay-keys") / "keys"
    path.write_text(f"{KEY_ALL}\n{KEY_RUN} run\n{KEY_OTHER}\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def relay(tmp_path_factory, keys):
    s = Serve(tmp_path_factory.mktemp("relay"), "relay", "--keys", keys, "--relay", "--relay-max-connections", "6")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hidden(tmp_path_factory, keys, relay):
    s = Serve(
        tmp_path_factory.mktemp("hidden"),
        "hidden",
        "--keys",
        keys,
        "--program",
        ADD,
        "--via-relay",
        f"{relay.url}/relay/lab",
        env={"MPIWS_RELAY_KEY": KEY_ALL},
    )
    yield s
    s.stop()


def call(method, url, key=None, body=None, headers=None, timeout=15):
    """(status, JSON body) of one request."""
    h = dict(headers or {})
    if key:
        h["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def register(relay_url, name, key=None, upgrade=True, keep=None):
    """Send a registration by hand; the answer's status and the rest of its
    head and body. The connection is closed, or appended to ``keep``."""
    host, port = relay_url.split("//", 1)[1].rsplit(":", 1)
    head = f"POST /relay/{name} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 0\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    if upgrade:
        head += "Connection: upgrade\r\nUpgrade: mpiws-relay/1\r\n"
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall((head + "\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    if keep is None:
        s.close()
    else:
        keep.append(s)
    status_line, _, rest = answer.decode(errors="replace").partition("\r\n")
    return int(status_line.split()[1]), rest


def test_a_hidden_endpoint_answers_at_the_relay(relay, hidden):
    assert hidden.url.startswith(f"{relay.url}/relay/lab#sha256="), hidden.url
    deadline = time.monotonic() + 20
    while True:
        status, d = call("GET", hidden.base + "/", KEY_ALL)
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200 and d["url"] == hidden.url and d["programs"] == ["add"], (status, d, hidden.stderr())
    # its own checks, through the relay: no key, no job
    status, body = call("POST", f"{hidden.base}/programs/add/jobs", None, {"inputs": {"x": 1, "y": 2}})
    assert status == 401, body


def test_jobs_and_their_files_by_reference_go_through_the_relay(relay, hidden):
    status, job = call("POST", f"{hidden.base}/programs/add/jobs", KEY_ALL, {"inputs": {"x": 40, "y": 2}})
    # the endpoint's URLs carry its pin, last
    job_url, _, pin = job["url"].partition("#")
    assert status == 201 and job_url.startswith(hidden.base + "/jobs/") and hidden.url.endswith(pin), (status, job)
    status, done = call("GET", job_url + "?wait=30", KEY_ALL)
    assert status == 200 and done["state"] == "done", done
    status, results = call("GET", job_url + "/results?by=reference", KEY_ALL)
    assert status == 200, results
    url = results["outputs"]["result"]["url"]
    assert url.startswith(hidden.base + "/jobs/") and url.endswith("#" + pin), url  # a URL any peer can pull
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=15) as r:
        assert r.read().decode().strip() == "42"


def test_soap_reaches_the_service_interface_of_a_hidden_endpoint(relay, hidden):
    """The WSDL's address of a hidden endpoint's service interface is its relay URL: a POST there that asks
    for no relay upgrade is passed on as `POST /` (zeep, through the relay, gets the endpoint's own fault)."""
    import requests
    import zeep
    from zeep.transports import Transport

    call("GET", hidden.base + "/", KEY_ALL)  # connected
    keyed = requests.Session()
    keyed.trust_env = False
    keyed.headers["Authorization"] = f"Bearer {KEY_ALL}"
    client = zeep.Client(f"{hidden.base}/?wsdl", transport=Transport(session=keyed))
    port = client.wsdl.services["ServicesService"].ports["ServicesSoap12Port"]
    assert port.binding_options["address"] == hidden.base, port.binding_options
    with pytest.raises(zeep.exceptions.Fault) as e:
        client.service.run(domain="d", rank=0, endpoints=[hidden.base], token="t" * 32, service="nothing")
    assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "404", e.value.message
    assert "nothing" in e.value.message, e.value.message


def test_registering_a_name_needs_a_key_with_the_relay_scope(relay):
    assert register(relay.url, "x")[0] == 401
    status, body = register(relay.url, "x", KEY_RUN)
    assert status == 403 and "'relay'" in body, body
    status, body = register(relay.url, "a%2fb", KEY_ALL)
    assert status in (400, 404), body  # not a name: one plain path segment
    # without the upgrade it is no registration but a request passed on to the name (none here)
    status, body = register(relay.url, "x", KEY_ALL, upgrade=False)
    assert status == 503 and "no endpoint named" in body, body


def test_a_name_belongs_to_the_key_that_holds_it(relay, hidden):
    call("GET", hidden.base + "/", KEY_ALL)  # connected
    status, body = register(relay.url, "lab", KEY_OTHER)
    assert status == 409 and "taken by another key" in body, body
    assert register(relay.url, "lab2", KEY_OTHER)[0] == 101  # another name is free


def test_a_name_keeps_at_most_its_connections(relay, hidden):
    # the hidden endpoint keeps spares there; more than the relay's cap are refused
    held = []
    try:
        answers = [register(relay.url, "lab", KEY_ALL, keep=held) for _ in range(7)]
    finally:
        for s in held:
            s.close()
    statuses = [status for status, _ in answers]
    assert statuses[-1] == 429 and set(statuses) <= {101, 429}, statuses
    assert "maximum of 6 connections" in answers[-1][1] and "--relay-max-connections" in answers[-1][1], answers[-1]


def test_an_unknown_name_is_not_there_yet(relay):
    # waited for a while (its endpoint may be connecting just now), then "not yet", to be tried again
    status, body = call("GET", f"{relay.url}/relay/nobody/", KEY_ALL, timeout=30)
    assert status == 503 and 'no endpoint named "nobody"' in body["error"]["message"], body


def test_an_endpoint_that_is_no_relay_has_no_relay_routes(tmp_path, keys):
    s = Serve(tmp_path, "plain", "--keys", keys)
    try:
        assert call("GET", f"{s.url}/relay/lab/", KEY_ALL)[0] == 404
        assert register(s.url, "lab", KEY_ALL)[0] == 404
    finally:
        s.stop()


def test_a_refused_hidden_endpoint_says_why(tmp_path, keys, relay):
    s = Serve(
        tmp_path, "refused", "--keys", keys, "--via-relay", f"{relay.url}/relay/lab3", env={"MPIWS_RELAY_KEY": KEY_RUN}
    )
    try:
        deadline = time.monotonic() + 20
        while "cannot reach the relay" not in s.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        err = s.stderr()
        assert "cannot reach the relay" in err and "does not grant 'relay'" in err and KEY_RUN not in err, err
        assert err.count("cannot reach the relay") == 1, err  # said once, not at every attempt
    finally:
        s.stop()


def _port_outside_ephemeral_range():
    """A free loopback port the kernel never picks for a connection's own
    end: the relay restarts on it while the hidden endpoint keeps dialling,
    and one of those dials could otherwise hold it just then."""
    low, high = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    for port in [*range(20000, min(low, 30000)), *range(high + 1, 65536)]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return str(port)
            except OSError:
                continue
    pytest.skip("no free port outside the ephemeral range")


def test_a_hidden_endpoint_comes_back_when_its_relay_does(tmp_path, keys):
    port = _port_outside_ephemeral_range()
    relay = Serve(tmp_path, "relay-a", "--keys", keys, "--relay", "--port", port)
    hidden = Serve(
        tmp_path, "back", "--keys", keys, "--via-relay", f"{relay.url}/relay/back", env={"MPIWS_RELAY_KEY": KEY_ALL}
    )

    def answers(timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if call("GET", hidden.base + "/", KEY_ALL, timeout=12)[0] == 200:
                    return True
            except OSError:
                pass  # the relay is not there (yet)
            time.sleep(0.2)
        return False

    try:
        assert answers(20), hidden.stderr()
        relay.stop()
        deadline = time.monotonic() + 20
        while "cannot reach the relay" not in hidden.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        relay = Serve(tmp_path, "relay-b", "--keys", keys, "--relay", "--port", port)
        assert answers(30), hidden.stderr()  # it tries again (at most every 10 s) and is reached again
        # Said once the connection's registration reaches the endpoint's
        # keeper, which may be just after the connection served the call.
        deadline = time.monotonic() + 5
        while "through to the relay" not in hidden.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "through to the relay" in hidden.stderr(), hidden.stderr()
    finally:
        hidden.stop()
        relay.stop()
