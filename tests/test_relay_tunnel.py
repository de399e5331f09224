"""Pinned relayed URLs (``https://R/relay/NAME#sha256=PIN``) on loopback:
clients reach the endpoint behind a relay through a TLS tunnel they verify
by the pin, so the relay never sees a key or a token, and cannot put
another endpoint under the name. A tap between the client and a plain-http
relay records every byte the client sends it."""

import re
import secrets
import socket
import threading

import pytest
from test_relay import Serve

from services import check_multihost

KEY = "k" * 16 + secrets.token_hex(8)
KEY_OTHER = "o" * 16 + secrets.token_hex(8)
SERVICE = ("--service", "multihost=tests.services:multihost")
PIN = re.compile(r"#sha256=([A-Za-z0-9_-]{43})$")


class Tap:
    """A TCP forwarder to ``port`` that keeps every byte clients send through it."""

    def __init__(self, port):
        self.port_to = port
        self.sent = bytearray()
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port_to))
            threading.Thread(target=self._copy, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._copy, args=(upstream, client, False), daemon=True).start()

    def _copy(self, src, dst, record):
        try:
            while data := src.recv(65536):
                if record:
                    with self.lock:
                        self.sent += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def saw(self, secret):
        with self.lock:
            return secret.encode() in self.sent

    def close(self):
        self.server.close()


def port_of(url):
    return int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    path = tmp_path_factory.mktemp("tunnel-keys") / "keys"
    path.write_text(f"{KEY}\n{KEY_OTHER}\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def relay(tmp_path_factory, keys):
    s = Serve(tmp_path_factory.mktemp("relay"), "relay", "--keys", keys, "--relay")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hidden(tmp_path_factory, keys, relay):
    tmp = tmp_path_factory.mktemp("hidden")
    s = Serve(
        tmp,
        "hidden",
        "--keys",
        keys,
        *SERVICE,
        "--via-relay",
        f"{relay.url}/relay/lab",
        "--tunnel-key",
        str(tmp / "tunnel.key"),
        env={"MPIWS_RELAY_KEY": KEY},
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def direct(tmp_path_factory, keys):
    s = Serve(tmp_path_factory.mktemp("direct"), "direct", "--keys", keys, *SERVICE)
    yield s
    s.stop()


def via(tap, url):
    """``url`` (at the relay) at the tap instead."""
    return tap.url + "/" + url.split("//", 1)[1].split("/", 1)[1]


def run_domain(urls, token):
    from mpiws.launch.domain import Domain

    d = Domain(urls, token=token, key=KEY)
    d.start("multihost", {"payload": 3000})
    statuses, failure = d.wait()
    assert failure is None, failure
    return {r: s["result"] for r, s in enumerate(statuses)}


def test_the_url_is_pinned_and_the_pin_outlives_a_restart(tmp_path, keys, relay, hidden):
    assert hidden.url.startswith(f"{relay.url}/relay/lab#sha256="), hidden.url
    assert PIN.search(hidden.url), hidden.url
    # the same key file, the same pin
    again = Serve(
        tmp_path,
        "again",
        "--keys",
        keys,
        "--via-relay",
        f"{relay.url}/relay/lab-again",
        "--tunnel-key",
        str(tmp_path / "k"),
        env={"MPIWS_RELAY_KEY": KEY},
    )
    first = PIN.search(again.url).group(1)
    again.stop()
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    again = Serve(
        tmp_path,
        "again2",
        "--keys",
        keys,
        "--via-relay",
        f"{relay.url}/relay/lab-again",
        "--tunnel-key",
        str(tmp_path / "k"),
        env={"MPIWS_RELAY_KEY": KEY},
    )
    try:
        assert PIN.search(again.url).group(1) == first
        assert first != PIN.search(hidden.url).group(1)
    finally:
        again.stop()


def test_a_domain_runs_through_the_tunnel_and_the_relay_sees_no_secret(relay, hidden, direct):
    tap = Tap(port_of(relay.url))
    token = secrets.token_urlsafe(24)
    try:
        urls = [direct.url, via(tap, hidden.url)]
        assert PIN.search(urls[1]), urls
        results = run_domain(urls, token)
        check_multihost(results, urls)  # point to point both ways, collectives, a synchronous send
        assert b"GET /relay/lab/tunnel HTTP/1.1" in tap.sent and b"mpiws-tunnel/1" in tap.sent
        assert not tap.saw(KEY) and not tap.saw(token) and b"/domains/" not in tap.sent
    finally:
        tap.close()


def test_without_a_pin_the_relay_sees_the_keys_and_tokens(relay, hidden, direct):
    tap = Tap(port_of(relay.url))
    token = secrets.token_urlsafe(24)
    try:
        urls = [direct.url, via(tap, hidden.url.split("#")[0])]
        check_multihost(run_domain(urls, token), urls)
        assert tap.saw(KEY) and tap.saw(token)  # what the pin keeps from the relay
    finally:
        tap.close()


def test_a_wrong_pin_is_refused_before_any_key_is_sent(relay, hidden, direct):
    from mpiws.launch.domain import Domain

    tap = Tap(port_of(relay.url))
    real = PIN.search(hidden.url).group(1)
    wrong = ("A" if real[0] != "A" else "B") + real[1:-1] + "A"
    try:
        url = via(tap, hidden.url.split("#")[0]) + f"#sha256={wrong}"
        d = Domain([url], key=KEY)
        with pytest.raises(Exception) as e:
            d.start("multihost", {"payload": 1})
        message = str(e.value)
        assert real in message and wrong in message and "not the endpoint" in message, message
        assert tap.sent and not tap.saw(KEY) and not tap.saw(d.token)
    finally:
        tap.close()


def test_a_relay_cannot_put_another_endpoint_under_the_name(tmp_path, keys, hidden):
    """Another relay, where another key holds the name "lab" (plain relay
    scope, the name unclaimed) for an endpoint of its own: a client with
    the real endpoint's pin refuses it; without a pin it would be fooled."""
    from mpiws.launch.domain import Domain

    other_relay = Serve(tmp_path, "other-relay", "--keys", keys, "--relay")
    impostor = Serve(
        tmp_path,
        "impostor",
        "--keys",
        keys,
        *SERVICE,
        "--via-relay",
        f"{other_relay.url}/relay/lab",
        "--tunnel-key",
        str(tmp_path / "impostor.key"),
        env={"MPIWS_RELAY_KEY": KEY_OTHER},
    )
    try:
        real = PIN.search(hidden.url).group(1)
        presented = PIN.search(impostor.url).group(1)
        url = f"{other_relay.url}/relay/lab#sha256={real}"
        d = Domain([url], key=KEY)
        with pytest.raises(Exception) as e:
            d.start("multihost", {"payload": 1})
        message = str(e.value)
        assert real in message and presented in message, message
        # the impostor's own pinned URL is answered (by the impostor)
        check_multihost(run_domain([impostor.url], secrets.token_urlsafe(24)), [impostor.url])
    finally:
        impostor.stop()
        other_relay.stop()
