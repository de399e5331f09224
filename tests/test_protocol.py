"""The wire protocol, spoken by a plain HTTP client (http.client, no mpiws
code): run, status, cancel, store, describe, and every kind of bad input."""

import http.client
import json
import pickle
import secrets
import threading
import time
from urllib.parse import urlparse

import pytest


class Client:
    def __init__(self, url, key=None):
        u = urlparse(url)
        self.host, self.port, self.key = u.hostname, u.port, key

    def call(self, method, path, body=None, headers=None, timeout=30):
        headers = dict(headers or {})
        if path == "/run":  # creating an instance takes the endpoint key, and JSON
            headers.setdefault("authorization", f"Bearer {self.key}")
            headers.setdefault("content-type", "application/json")
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            ctype = r.getheader("content-type") or ""
            return r.status, (json.loads(data) if "json" in ctype else data)
        finally:
            c.close()

    def run(self, service, rank=0, size=1, params=None, domain=None, token=None, url=None):
        domain = domain or secrets.token_hex(6)
        token = token or secrets.token_hex(8)
        binding = {
            "domain": domain,
            "rank": rank,
            "endpoints": [url] * size,
            "token": token,
            "service": service,
            "params": params or {},
        }
        status, body = self.call("POST", "/run", json.dumps(binding), {"content-type": "application/json"})
        return status, body, domain, token

    def store(self, domain, rank, token, body, source=0, tag=0, extra=None):
        h = {"mpiws-source": str(source), "mpiws-tag": str(tag), "content-type": "application/octet-stream"}
        if token is not None:
            h["authorization"] = f"Bearer {token}"
        h.update(extra or {})
        return self.call("POST", f"/domains/{domain}/ranks/{rank}/messages", body, h)

    def oversized(self, domain, rank, token, length, source=1, extra=None):
        """Announce a body over the limit; the answer comes before any of it is sent."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            c.putrequest("POST", f"/domains/{domain}/ranks/{rank}/messages")
            headers = {
                "mpiws-source": str(source),
                "authorization": f"Bearer {token}",
                "content-length": str(length),
                **(extra or {}),
            }
            for k, v in headers.items():
                c.putheader(k, v)
            c.endheaders()
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def status(self, domain, rank, token, wait=None):
        q = f"?wait={wait}" if wait is not None else ""
        return self.call("GET", f"/domains/{domain}/ranks/{rank}{q}", headers={"authorization": f"Bearer {token}"})


@pytest.fixture
def client(server):
    c = Client(server.url, server.key)
    c.url = server.url
    return c


def start(client, service, size=1, params=None):
    status, body, domain, token = client.run(service, size=size, params=params, url=client.url)
    assert status == 201, body
    assert body["state"] in ("starting", "running") and body["domain"] == domain
    return domain, token


def test_describe(client):
    domain, token = start(client, "block")
    status, d = client.call("GET", "/")
    assert status == 200 and "recv_object" in d["services"] and d["url"] == client.url
    assert d["domains"] == []  # domains are shown to who may see them only
    status, d = client.call("GET", "/", headers={"authorization": f"Bearer {token}"})
    mine = [x for x in d["domains"] if x["domain"] == domain]
    assert mine and mine[0]["ranks"][0]["rank"] == 0 and mine[0]["ranks"][0]["service"] == "block"
    client.call("DELETE", f"/domains/{domain}/ranks/0", headers={"authorization": f"Bearer {token}"})


def test_plain_client_sends_an_object_that_recv_receives(client):
    domain, token = start(client, "recv_object")
    status, body = client.store(domain, 0, token, pickle.dumps({"from": "curl", "n": [1, 2]}), tag=4)
    assert status == 204, body
    status, s = client.status(domain, 0, token, wait=10)
    assert status == 200 and s["state"] == "done" and s["result"] == {"from": "curl", "n": [1, 2]}


def test_plain_client_sends_raw_bytes_that_Recv_receives(client):
    domain, token = start(client, "recv_raw", params={"size": 64})
    status, _ = client.store(domain, 0, token, b"raw payload, no encoding", tag=12)
    assert status == 204
    _, s = client.status(domain, 0, token, wait=10)
    assert s["result"] == {"data": "raw payload, no encoding", "source": 0, "tag": 12}


def test_message_before_its_instance_exists_is_answered_try_again(client):
    domain, token = secrets.token_hex(6), secrets.token_hex(8)
    status, body = client.store(domain, 0, token, pickle.dumps("early bird"))
    assert status == 503 and "try again" in body["error"]["message"]  # nothing is held for it meanwhile
    status, body, _, _ = client.run("recv_object", domain=domain, token=token, url=client.url)
    assert status == 201, body
    assert client.store(domain, 0, token, pickle.dumps("early bird"))[0] == 204
    _, s = client.status(domain, 0, token, wait=10)
    assert s["result"] == "early bird"


def test_sequenced_stores_are_reordered_and_deduplicated(client):
    domain, token = start(client, "recv_many", size=2, params={"count": 3})
    for seq, v in [(2, "c"), (0, "a"), (0, "a"), (2, "c"), (1, "b")]:
        status, body = client.store(domain, 0, token, pickle.dumps(v), source=1, extra={"mpiws-seq": str(seq)})
        assert status in (200, 204), body
        if status == 200:
            assert body == {"duplicate": True}
    _, s = client.status(domain, 0, token, wait=10)
    assert s["result"] == ["a", "b", "c"]


def test_a_sender_learns_by_long_poll_when_its_message_was_received(client):
    domain, token = start(client, "recv_many", size=2, params={"count": 2})
    auth = {"authorization": f"Bearer {token}"}
    path = f"/domains/{domain}/ranks/0/messages/1/%d/matched"
    # bad input: a clear error, nothing waits
    assert client.call("GET", path % 1, headers={"authorization": "Bearer wrong"})[0] == 403
    assert client.call("GET", f"/domains/{domain}/ranks/0/messages/1/x/matched", headers=auth)[0] == 400
    assert client.call("GET", f"/domains/{domain}/ranks/0/messages/7/0/matched", headers=auth)[0] == 400
    answers = {}

    def poll(seq):
        answers[seq] = client.call("GET", path % seq, headers=auth)

    early = threading.Thread(target=poll, args=(1,))  # asked before message 1 exists
    early.start()
    status, _ = client.store(domain, 0, token, pickle.dumps("a"), source=1, extra={"mpiws-seq": "0"})
    assert status == 204
    assert client.call("GET", path % 0, headers=auth) == (200, {"matched": True})
    time.sleep(0.3)
    assert early.is_alive(), "answered before message 1 was received"
    status, _ = client.store(domain, 0, token, pickle.dumps("b"), source=1, extra={"mpiws-seq": "1"})
    early.join(10)
    assert answers[1] == (200, {"matched": True})
    _, s = client.status(domain, 0, token, wait=10)
    assert s["result"] == ["a", "b"]
    # the instance ended: a message it never received never will be
    status, body = client.call("GET", path % 5, headers=auth)
    assert status == 410 and body["error"]["name"] == "MPIX_ERR_PROC_FAILED", body


def test_a_sender_takes_back_a_message_no_receive_took(client):
    domain, token = start(client, "block", size=2)  # receives only tag 99
    auth = {"authorization": f"Bearer {token}"}
    path = f"/domains/{domain}/ranks/0/messages/1/%d"
    status, _ = client.store(domain, 0, token, pickle.dumps("stale"), source=1, tag=5, extra={"mpiws-seq": "0"})
    assert status == 204
    assert client.call("DELETE", path % 0, headers=auth) == (200, {"withdrawn": True})
    assert client.call("DELETE", path % 0, headers=auth) == (200, {"withdrawn": True})  # again: same answer
    # a retry of it arriving later is dropped
    assert client.store(domain, 0, token, pickle.dumps("stale"), source=1, tag=5, extra={"mpiws-seq": "0"}) == (
        200,
        {"duplicate": True},
    )
    status, _ = client.store(domain, 0, token, pickle.dumps("end"), source=1, tag=99, extra={"mpiws-seq": "1"})
    assert status == 204
    _, s = client.status(domain, 0, token, wait=10)
    assert s["state"] == "done"
    assert client.call("DELETE", path % 1, headers=auth) == (200, {"withdrawn": False})  # taken by the receive
    assert client.call("DELETE", path % 9, headers=auth) == (200, {"withdrawn": True})  # never came
    assert client.call("DELETE", path % 0, headers={"authorization": "Bearer wrong"})[0] == 403
    assert client.call("DELETE", f"/domains/{domain}/ranks/0/messages/1/-1", headers=auth)[0] == 400


def test_bad_stores_are_refused_and_change_nothing(client):
    domain, token = start(client, "recv_object", size=2)
    bad = [
        (client.store(domain, 0, None, b"x"), 401),
        (client.store(domain, 0, "wrong-token", b"x"), 403),
        (client.store(domain, 5, token, b"x"), 400),  # rank out of range
        (client.store(domain, 0, token, b"x", source=9), 400),  # source out of range
        (client.store(domain, 0, token, b"x", extra={"mpiws-tag": "abc"}), 400),
        (client.store(domain, 0, token, b"x", extra={"mpiws-tag": "-2"}), 400),
        (client.store(domain, 0, token, b"x", extra={"mpiws-seq": "-1"}), 400),
        (client.store(domain, 0, token, b"x", extra={"mpiws-parts": "1,1"}), 400),
        (client.oversized(domain, 0, token, (1 << 20) + 1), 413),  # this endpoint's limit is 1 MiB
        (client.store("unknown-domain", 0, token, b"x"), 503),  # not yet: try again (Retry-After)
        (client.call("POST", f"/domains/{domain}/ranks/x/messages", b"x", {"mpiws-source": "0"}), 400),
        (client.call("GET", f"/domains/{domain}/ranks/0/messages"), 405),
        (client.call("GET", "/nowhere"), 404),
    ]
    for (status, body), expected in bad:
        assert status == expected, (status, expected, body)
        assert set(body["error"]) == {"class", "name", "message"} and body["error"]["message"]
    # a missing source header is refused too
    status, body = client.call(
        "POST", f"/domains/{domain}/ranks/0/messages", b"x", {"authorization": f"Bearer {token}"}
    )
    assert status == 400 and "mpiws-source" in body["error"]["message"]
    # nothing was filed: the first message the rank receives is the good one
    assert client.store(domain, 0, token, pickle.dumps("the good one"), source=1)[0] == 204
    _, s = client.status(domain, 0, token, wait=10)
    assert s["state"] == "done" and s["result"] == "the good one"


def test_a_refused_message_does_not_hold_back_the_next_from_its_sender(client):
    # seq 0 is refused as too large (reported to its sender), seq 2 arrives
    # early; seq 1 then releases both 1 and 2, in order.
    domain, token = start(client, "recv_many", size=2, params={"count": 2})

    def seq(n):
        return {"mpiws-seq": str(n)}

    assert client.oversized(domain, 0, token, (1 << 20) + 1, extra=seq(0))[0] == 413
    assert client.store(domain, 0, token, pickle.dumps("second"), source=1, extra=seq(2))[0] == 204
    assert client.store(domain, 0, token, pickle.dumps("first"), source=1, extra=seq(1))[0] == 204
    _, s = client.status(domain, 0, token, wait=10)
    assert s["state"] == "done" and s["result"] == ["first", "second"], s


def test_bad_run_requests(client):
    bad = [
        (client.call("POST", "/run", b"{not json"), 400),
        (client.run("no_such_service", url=client.url)[:2], 404),
        (client.run("block", rank=3, size=2, url=client.url)[:2], 400),
        (
            client.call(
                "POST",
                "/run",
                json.dumps({"domain": "d!", "rank": 0, "endpoints": [client.url], "token": "t", "service": "block"}),
            ),
            400,
        ),
        (
            client.call(
                "POST",
                "/run",
                json.dumps({"domain": "d", "rank": 0, "endpoints": ["ftp://x"], "token": "t", "service": "block"}),
            ),
            400,
        ),
        (
            client.call(
                "POST",
                "/run",
                json.dumps({"domain": "d", "rank": 0, "endpoints": [client.url], "token": "", "service": "block"}),
            ),
            400,
        ),
    ]
    for (status, body), expected in bad:
        assert status == expected, (status, expected, body)
        assert body["error"]["message"]
    domain, token = start(client, "block")
    # The same binding again is the same request (a retry): the instance made the first time, not a second one.
    status, body, _, _ = client.run("block", domain=domain, token=token, url=client.url)
    assert status == 201 and body["domain"] == domain and body["state"] in ("starting", "running"), body
    status, body, _, _ = client.run("block", domain=domain, token=token, url=client.url, params={"other": 1})
    assert status == 409 and "already exists" in body["error"]["message"], body
    client.call("DELETE", f"/domains/{domain}/ranks/0", headers={"authorization": f"Bearer {token}"})
    status, body, _, _ = client.run("block", domain=domain, token=token, url=client.url)  # repeated after its end
    assert status == 201 and body["state"] == "cancelled", body


def test_status_and_cancel(client):
    domain, token = start(client, "block")
    status, s = client.status(domain, 0, token)
    assert status == 200 and s["state"] in ("starting", "running")
    assert client.status(domain, 0, "nope")[0] == 403
    assert client.call("GET", f"/domains/{domain}/ranks/0")[0] == 401
    assert client.status("other", 0, token)[0] == 404
    status, s = client.call("DELETE", f"/domains/{domain}/ranks/0", headers={"authorization": f"Bearer {token}"})
    assert status == 200 and s["state"] == "cancelled"
    # the blocked receive failed; stores to the cancelled instance are refused
    status, body = client.store(domain, 0, token, b"late")
    assert status == 410 and body["error"]["name"] == "MPIWS_ERR_CANCELLED"


def test_failed_service_reports_error_and_traceback(client):
    domain, token = start(client, "fail")
    _, s = client.status(domain, 0, token, wait=10)
    assert s["state"] == "failed"
    assert s["error"]["name"] == "ValueError" and "always fails" in s["error"]["message"]
    assert "Traceback" in s["error"]["traceback"] and "services.py" in s["error"]["traceback"]


def test_endpoint_keeps_serving_after_garbage(client):
    import socket

    for junk in (b"\x00\x01garbage\r\n\r\n", b"POST /run HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"):
        s = socket.create_connection((client.host, client.port), timeout=5)
        s.sendall(junk)
        try:
            s.recv(1024)
        except OSError:
            pass
        s.close()
    assert client.call("GET", "/")[0] == 200
