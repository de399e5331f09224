"""docs/openapi.yaml against a real endpoint: the document is OpenAPI 3.x,
and every documented operation, called with plain http.client, answers a
documented status code with a body that fits the documented schema. Answers
the document does not list (status codes, paths, methods, fields) fail."""

import contextlib
import http.client
import json
import os
import pickle
import re
import secrets
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

SPEC_PATH = Path(__file__).resolve().parent.parent / "docs" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

#: Documented answers this test does not provoke: the bounds on running
#: instances (tests/test_security.py provokes them on a small endpoint).
# The 502s: an instance's process, or an endpoint behind a relay, ending while a request to it is relayed (a race no test can aim at).
NOT_PROVOKED = {
    ("run", "429"),
    ("run", "503"),
    ("store", "502"),
    ("matched", "502"),
    ("withdraw", "502"),
    ("relayed", "502"),
}

#: The endpoint's keys: every scope, `run` only, `files` only, `relay` only.
KEY, KEY_RUN, KEY_FILES, KEY_RELAY = ("k" * 16 + secrets.token_hex(8) for _ in range(4))
#: Paths that take an endpoint key (the rest take a domain token, or nothing).
KEYED = ("/run", "/rendezvous", "/programs", "/jobs", "/files")

#: The jobs layer's programs (NAME=TEMPLATE; {dir} is the fixture's directory).
COUNT = "#!/bin/sh\necho counting\necho 'a note' >&2\nwc -c < \"$1\" | tr -d ' ' > \"$2\"\n"
PROGRAMS = [
    "count={dir}/count.sh [in:file:text:string] [out:file:n:int]",
    "copy=cp [in:file:src:binary] [out:file:dst:binary]",
    "toint=cp [in:file:src:string] [out:file:dst:int]",
    "sleep=sleep [in:val:seconds:float]",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """conftest.py's endpoint (the services in tests/services.py, the same
    limits), also hosting programs, with uploads limited to 1 MiB."""
    import services
    from mpiws.service.serve import Server

    d = tmp_path_factory.mktemp("openapi")
    (d / "count.sh").write_text(COUNT)
    (d / "count.sh").chmod(0o755)
    (d / "keys").write_text(f"{KEY}\n{KEY_RUN} run\n{KEY_FILES} files\n{KEY_RELAY} relay\n")
    (d / "keys").chmod(0o600)
    s = Server(
        services.ALL,
        max_message=1 << 20,
        max_upload=1 << 20,
        workdir=str(d / "work"),
        keys=str(d / "keys"),
        body_timeout=1.0,
        programs=[p.format(dir=d) for p in PROGRAMS],
        max_spawn_body=1 << 20,
        fetch_allow=["127.0.0.1"],
        relay=True,
        relay_max_connections=4,
    )
    s.workdir = d / "work"
    yield s
    s.stop()


@pytest.fixture(scope="module")
def spec():
    with open(SPEC_PATH) as f:
        return yaml.safe_load(f)


# ---- the document on its own ------------------------------------------------


def resolve(spec, node):
    """Follow local $refs ("#/a/b") until a non-reference node."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"only local references: {ref}"
        assert ref not in seen, f"reference loop at {ref}"
        seen.add(ref)
        node = spec
        for part in ref[2:].split("/"):
            assert isinstance(node, dict) and part in node, f"dangling reference {ref}"
            node = node[part]
    return node


def operations(spec):
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_document_is_openapi_3(spec):
    assert re.fullmatch(r"3\.\d+\.\d+", str(spec["openapi"])), spec.get("openapi")
    assert spec["info"]["title"] and spec["info"]["version"]
    assert spec["paths"], "no paths"
    ids = []
    for path, method, op in operations(spec):
        where = f"{method.upper()} {path}"
        assert path.startswith("/"), where
        ids.append(op.get("operationId"))
        responses = op.get("responses")
        assert responses, f"{where} documents no responses"
        for code, resp in responses.items():
            assert re.fullmatch(r"[1-5]\d\d", str(code)), f"{where}: status {code!r}"
            assert resolve(spec, resp).get("description"), f"{where} {code}: no description"
        # every {template} in the path is a declared path parameter
        params = [resolve(spec, p) for p in spec["paths"][path].get("parameters", []) + op.get("parameters", [])]
        declared = {p["name"] for p in params if p["in"] == "path"}
        assert declared == set(re.findall(r"{(\w+)}", path)), where
        for p in params:
            assert p["in"] in ("path", "query", "header", "cookie") and "schema" in p, (where, p)
    assert all(ids) and len(ids) == len(set(ids)), f"operationIds must be present and unique: {ids}"


def test_every_reference_resolves(spec):
    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                resolve(spec, node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)


# ---- a small JSON Schema checker (the subset the document uses) -------------


def check(spec, schema, value, at="$"):
    """Raise AssertionError if ``value`` does not fit ``schema``."""
    schema = resolve(spec, schema)
    if "oneOf" in schema:
        fits = 0
        for alt in schema["oneOf"]:
            try:
                check(spec, alt, value, at)
                fits += 1
            except AssertionError:
                pass
        assert fits == 1, f"{at}: {value!r} fits {fits} of oneOf"
    if "const" in schema:
        assert value == schema["const"] and type(value) is type(schema["const"]), f"{at}: {value!r} != const"
    if "enum" in schema:
        assert value in schema["enum"], f"{at}: {value!r} not in {schema['enum']}"
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        ok = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "null": lambda v: v is None,
        }
        assert any(ok[x](value) for x in types), f"{at}: {value!r} is not {t}"
    if isinstance(value, dict):
        for name in schema.get("required", []):
            assert name in value, f"{at}: required property {name!r} missing in {value!r}"
        props = schema.get("properties", {})
        for name, v in value.items():
            if name in props:
                check(spec, props[name], v, f"{at}.{name}")
            else:
                more = schema.get("additionalProperties", True)
                assert more is not False, f"{at}: undocumented property {name!r}"
                if isinstance(more, dict):
                    check(spec, more, v, f"{at}.{name}")
    if isinstance(value, list):
        assert len(value) >= schema.get("minItems", 0), f"{at}: too few items"
        if "items" in schema:
            for i, v in enumerate(value):
                check(spec, schema["items"], v, f"{at}[{i}]")
    if isinstance(value, str):
        assert len(value) >= schema.get("minLength", 0), f"{at}: too short"
        if "pattern" in schema:
            assert re.search(schema["pattern"], value), f"{at}: {value!r} !~ {schema['pattern']}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert value >= schema.get("minimum", value) and value <= schema.get("maximum", value), (
            f"{at}: {value} out of range"
        )


def test_checker_refuses_what_it_should(spec):
    """The checker itself can fail: a wrong shape is caught."""
    err = {"$ref": "#/components/schemas/Error"}
    check(spec, err, {"error": {"class": 12, "name": "MPI_ERR_ARG", "message": "m"}})
    for bad in (
        {"error": {"class": 12, "message": "m"}},
        {"error": "x"},
        {"error": {"class": "12", "name": "MPI_ERR_ARG", "message": "m"}},
        {"error": {"class": 12, "name": "MPI_ERR_ARG", "message": "m"}, "extra": 1},
    ):
        with pytest.raises(AssertionError):
            check(spec, err, bad)
    # additionalProperties given as a schema is checked too
    outputs = resolve(spec, {"$ref": "#/components/schemas/Results"})["properties"]["outputs"]
    check(spec, outputs, {"n": 5, "b": {"base64": "AP8="}, "r": {"url": "http://h/f", "size": 1}, "none": None})
    for bad in ({"n": True}, {"n": {"url": "http://h/f"}}, {"n": {"base64": "AP8=", "size": 2}}):
        with pytest.raises(AssertionError):
            check(spec, outputs, bad)


# ---- the document against the server ----------------------------------------


class Api:
    """Makes requests and checks each answer against the document."""

    def __init__(self, spec, url, key=KEY):
        self.spec = spec
        u = urlparse(url)
        self.host, self.port, self.url, self.key = u.hostname, u.port, url, key
        self.seen = set()  # (operationId, status) answered

    def find(self, method, path):
        """The documented operation for a concrete request, or None."""
        route = urlparse(path).path
        for template, item in self.spec["paths"].items():
            rx = "^" + re.sub(r"{\w+}", "[^/]+", template) + "$"
            if re.match(rx, route) and method.lower() in item:
                return item[method.lower()]
        if re.match(r"^/relay/[^/]+/.", route):  # documented for GET, "the same holds for every method"
            return self.spec["paths"]["/relay/{name}/{path}"]["get"]
        return None

    def raw(self, method, path, body=None, headers=None, announce=None, cut=False, timeout=30):
        """``announce``: send that Content-Length, then ``body`` if any (only
        headers without); ``cut``: then end the request there (half-close).
        Keyed paths carry the endpoint key unless ``headers`` say otherwise."""
        headers = dict(headers or {})
        if path.startswith(KEYED):
            headers.setdefault("authorization", f"Bearer {self.key}")
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if announce is None:
                try:
                    c.request(method, path, body=body, headers=headers or {})
                except OSError:
                    pass  # the server answered and closed before the whole body was sent
            else:
                c.putrequest(method, path)
                for k, v in {**(headers or {}), "content-length": str(announce)}.items():
                    c.putheader(k, v)
                c.endheaders()
                if body:
                    c.send(body)
                if cut:
                    c.sock.shutdown(socket.SHUT_WR)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def call(self, method, path, body=None, headers=None, expect=None, **kw):
        """Make a documented request; check the answer fits the document."""
        op = self.find(method, path)
        assert op is not None, f"{method} {path} is not documented"
        status, hdrs, data = self.raw(method, path, body, headers, **kw)
        code = str(status)
        responses = op["responses"]
        assert code in responses, (
            f"{method} {path} answered {status}, not documented for {op['operationId']}: {data[:300]!r}"
        )
        if expect is not None:
            assert status == expect, (method, path, status, expect, data[:300])
        resp = resolve(self.spec, responses[code])
        content = resp.get("content")
        if content and "application/json" in content:
            assert "application/json" in hdrs.get("content-type", ""), (method, path, status, hdrs)
            value = json.loads(data)
            check(self.spec, content["application/json"]["schema"], value)
        elif content and "application/octet-stream" in content:
            assert hdrs.get("content-type") == "application/octet-stream", (method, path, status, hdrs)
            value = data
        else:
            assert data == b"", f"{method} {path} {status}: documented without a body, got {data[:200]!r}"
            value = None
        for name, h in (resp.get("headers") or {}).items():
            got = hdrs.get(name.lower())
            assert got is not None, f"{method} {path} {status}: documented header {name} missing"
            check(self.spec, h["schema"], got.lower())
        self.seen.add((op["operationId"], code))
        return status, value

    def undocumented(self, method, path, expect):
        """A request the document does not list: it must be refused with an error."""
        assert self.find(method, path) is None, f"{method} {path} is documented"
        status, _hdrs, data = self.raw(method, path)
        assert status == expect, (method, path, status, data)
        check(self.spec, {"$ref": "#/components/schemas/Error"}, json.loads(data))


@pytest.fixture(scope="module")
def api(spec, server):
    return Api(spec, server.url)


def binding(api, service, rank=0, size=1, domain=None, token=None, params=None):
    return {
        "domain": domain or secrets.token_hex(6),
        "rank": rank,
        "endpoints": [api.url] * size,
        "token": token or secrets.token_hex(8),
        "service": service,
        "params": params or {},
    }


def start(api, service, size=1, params=None, states=("starting", "running")):
    b = binding(api, service, size=size, params=params)
    _status, s = api.call("POST", "/run", json.dumps(b), {"content-type": "application/json"}, expect=201)
    assert (s["domain"], s["rank"], s["service"]) == (b["domain"], 0, service) and s["state"] in states
    return b["domain"], b["token"]


def auth(token):
    return {"authorization": f"Bearer {token}"}


def msg_headers(token, source=0, tag=0, **extra):
    h = {"mpiws-source": str(source), "mpiws-tag": str(tag), "content-type": "application/octet-stream"}
    if token is not None:
        h.update(auth(token))
    h.update({k.replace("_", "-"): v for k, v in extra.items()})
    return h


def test_describe(api):
    domain, token = start(api, "block")
    assert api.call("GET", "/", expect=200)[1]["domains"] == []  # no credential: none
    _, d = api.call("GET", "/", headers=auth(token), expect=200)  # a token: its domain
    assert [x["domain"] for x in d["domains"]] == [domain]
    _, d = api.call("GET", "/", headers=auth(KEY), expect=200)  # admin: all
    assert d["url"] == api.url and "block" in d["services"]
    assert isinstance(d["jobs"], int)  # admin only
    assert "jobs" not in api.call("GET", "/", headers=auth(KEY_RUN), expect=200)[1]
    assert d["programs"] == sorted(p.split("=")[0] for p in PROGRAMS)
    assert d["domains"] == sorted(d["domains"], key=lambda x: x["domain"])
    mine = [x for x in d["domains"] if x["domain"] == domain]
    assert mine and mine[0]["ranks"] == [{"rank": 0, "service": "block", "state": mine[0]["ranks"][0]["state"]}]
    api.call("DELETE", f"/domains/{domain}/ranks/0", headers=auth(token), expect=200)


def test_run(api):
    json_h = {"content-type": "application/json"}
    api.call("POST", "/run", b"{not json", json_h, expect=400)
    api.call("POST", "/run", json.dumps({"domain": "d", "rank": 0}), json_h, expect=400)  # fields missing
    api.call("POST", "/run", json.dumps(binding(api, "block", rank=2, size=2)), json_h, expect=400)
    api.call("POST", "/run", json.dumps(binding(api, "block", domain="bad/id")), json_h, expect=400)
    api.call("POST", "/run", json.dumps(binding(api, "no_such_service")), json_h, expect=404)
    api.call("POST", "/run", b" " * ((1 << 20) + 1), json_h, expect=413)
    api.call("POST", "/run", json.dumps(binding(api, "block")), {**json_h, "authorization": "none"}, expect=401)
    api.call("POST", "/run", json.dumps(binding(api, "block")), {**json_h, **auth("not-a-key")}, expect=401)
    api.call("POST", "/run", json.dumps(binding(api, "block")), {**json_h, **auth(KEY_FILES)}, expect=403)
    api.call("POST", "/run", json.dumps(binding(api, "block")), {"content-type": "text/plain"}, expect=415)
    api.call("POST", "/run", b'{"domain"', json_h, announce=100, expect=408)  # the body stalls
    domain, token = start(api, "block")
    taken = binding(api, "block", domain=domain, token=token)
    api.call("POST", "/run", json.dumps(taken), {**json_h, **auth(KEY_RUN)}, expect=409)  # another key's domain
    again = binding(api, "block", domain=domain, token=token)
    api.call("POST", "/run", json.dumps(again), json_h, expect=201)  # the same binding: a retry
    again["params"] = {"other": 1}
    api.call("POST", "/run", json.dumps(again), json_h, expect=409)  # rank exists
    other = binding(api, "block", rank=0, size=1, domain=domain, token="another-token-0123456789")
    api.call("POST", "/run", json.dumps(other), json_h, expect=409)  # other token
    api.call("DELETE", f"/domains/{domain}/ranks/0", headers=auth(token), expect=200)


def test_rendezvous(api, server):
    json_h = {"content-type": "application/json"}

    def reg(rank, size=2, url="http://10.0.0.9:7070"):
        return json.dumps({"rank": rank, "size": size, "url": url})

    api.call("POST", "/rendezvous", reg(0), json_h, expect=503)  # none open yet
    server.endpoint.open_rendezvous(2)
    assert api.call("GET", "/rendezvous", expect=200)[1] == {"size": 2, "registered": 0, "closed": False}
    api.call("POST", "/rendezvous", reg(1), json_h, expect=200)
    api.call("POST", "/rendezvous", reg(1), json_h, expect=200)  # again: harmless
    api.call("POST", "/rendezvous", reg(1, url="http://10.0.0.8:7070"), json_h, expect=409)  # rank taken
    api.call("POST", "/rendezvous", reg(0, size=3), json_h, expect=409)  # another size
    api.call("POST", "/rendezvous", reg(2), json_h, expect=400)  # rank >= size
    api.call("POST", "/rendezvous", reg(0, url="file:///etc"), json_h, expect=400)
    api.call("POST", "/rendezvous", b"{", json_h, expect=400)
    api.call("POST", "/rendezvous", b" " * 5000, json_h, expect=413)
    api.call("POST", "/rendezvous", reg(0), {"content-type": "text/plain"}, expect=415)
    api.call("POST", "/rendezvous", b'{"rank"', json_h, announce=100, expect=408)
    for method in ("GET", "POST"):
        api.call(
            method, "/rendezvous", reg(0) if method == "POST" else None, {**json_h, "authorization": "none"}, expect=401
        )
        api.call(method, "/rendezvous", reg(0) if method == "POST" else None, {**json_h, **auth(KEY_FILES)}, expect=403)
    assert api.call("GET", "/rendezvous", expect=200)[1] == {"size": 2, "registered": 1, "closed": False}
    server.endpoint.close_rendezvous()
    assert api.call("GET", "/rendezvous", expect=200)[1]["closed"] is True


def test_relay(api):
    from mpiws import _core

    up = {"upgrade": "mpiws-relay/1", "connection": "upgrade"}
    api.call("POST", "/relay/x", b"", {**up, "authorization": "none"}, expect=401)
    api.call("POST", "/relay/x", b"", {**up, **auth(KEY_RUN)}, expect=403)
    api.call("POST", "/relay/x", b"", auth(KEY), expect=400)  # not an upgrade
    api.call("POST", "/relay/a%20b", b"", {**up, **auth(KEY)}, expect=400)  # not a name
    api.call("POST", "/relay/x", b"", {**up, **auth(KEY_RELAY)}, expect=101)  # (and closed at once)
    # an endpoint behind this one (in this process), keeping its connections here
    hidden = _core.Endpoint(keys=f"{KEY}\n", via_relay=f"{api.url}/relay/lab", relay_key=KEY_RELAY)
    # its tunnels (through the relay as /relay/lab/tunnel; here on its own listener), none on the relay itself
    behind = Api(api.spec, f"http://127.0.0.1:{hidden.port}")
    behind.seen = api.seen
    tunnel = {"upgrade": "mpiws-tunnel/1", "connection": "upgrade"}
    api.call("GET", "/tunnel", headers=tunnel, expect=404)
    behind.call("GET", "/tunnel", expect=400)  # not an upgrade
    behind.call("GET", "/tunnel", headers=tunnel, expect=101)  # (and closed before any TLS)
    assert "#sha256=" in hidden.url
    deadline = time.monotonic() + 20
    while api.raw("GET", "/relay/lab/programs", headers=auth(KEY))[0] != 200:
        assert time.monotonic() < deadline, "the endpoint behind the relay never answered"
        time.sleep(0.1)
    assert api.call("GET", "/relay/lab/programs", headers=auth(KEY), expect=200)[1] == []
    api.call("POST", "/relay/lab", b"", {**up, **auth(KEY)}, expect=409)  # KEY_RELAY's name
    api.call("POST", "/relay/lab", b"", {**up, **auth(KEY_RELAY)}, expect=429)  # its 4 connections are there
    # a body that breaks off (shorter than announced) while it is passed on: the client's fault (the relay
    # then drops that connection to the endpoint behind)
    api.call("POST", "/relay/lab/files", b"x" * 10, auth(KEY), announce=100, cut=True, expect=400)
    api.call("GET", "/relay/nobody/programs", headers=auth(KEY), expect=503)  # after 10 s


def test_status_and_cancel(api):
    domain, token = start(api, "block")
    path = f"/domains/{domain}/ranks/0"
    _, s = api.call("GET", path, headers=auth(token), expect=200)
    assert s["result"] is None and s["error"] is None
    _, s = api.call("GET", path + "?wait=0.2", headers=auth(token), expect=200)  # times out, still running
    assert s["state"] in ("starting", "running")
    api.call("GET", path + "?wait=soon", headers=auth(token), expect=400)
    api.call("GET", path + "?wait=-1", headers=auth(token), expect=400)
    api.call("GET", f"/domains/{domain}/ranks/x", headers=auth(token), expect=400)
    api.call("GET", path, expect=401)
    api.call("GET", path, headers=auth("wrong"), expect=403)
    api.call("GET", f"/domains/{domain}/ranks/1", headers=auth(token), expect=404)
    api.call("DELETE", f"/domains/{domain}/ranks/x", headers=auth(token), expect=400)
    api.call("DELETE", path, expect=401)
    api.call("DELETE", path, headers=auth("wrong"), expect=403)
    api.call("DELETE", "/domains/nowhere/ranks/0", headers=auth(token), expect=404)
    _, s = api.call("DELETE", path, headers=auth(token), expect=200)
    assert s["state"] == "cancelled" and s["error"] is None
    _, s = api.call("DELETE", path, headers=auth(token), expect=200)  # idempotent
    assert s["state"] == "cancelled"


def test_status_of_ended_instances(api):
    domain, token = start(api, "fail", states=("starting", "running", "failed"))  # it may fail at once
    _, s = api.call("GET", f"/domains/{domain}/ranks/0?wait=10", headers=auth(token), expect=200)
    assert s["state"] == "failed" and s["result"] is None
    assert s["error"]["name"] == "ValueError" and "Traceback" in s["error"]["traceback"]
    domain, token = start(api, "recv_object")
    api.call("POST", f"/domains/{domain}/ranks/0/messages", pickle.dumps([1, "two"]), msg_headers(token), expect=204)
    _, s = api.call("GET", f"/domains/{domain}/ranks/0?wait=10", headers=auth(token), expect=200)
    assert s["state"] == "done" and s["result"] == [1, "two"] and s["error"] is None


def test_store(api):
    domain, token = start(api, "recv_many", size=2, params={"count": 2})
    path = f"/domains/{domain}/ranks/0/messages"
    api.call("POST", path, pickle.dumps("a"), msg_headers(token, source=1, mpiws_seq="0"), expect=204)
    _, d = api.call("POST", path, pickle.dumps("a"), msg_headers(token, source=1, mpiws_seq="0"), expect=200)
    assert d == {"duplicate": True}
    refused = [
        (msg_headers(None), 401),
        (msg_headers("wrong"), 403),
        (msg_headers(token, source=7), 400),
        (msg_headers(token, tag=-1), 400),
        (msg_headers(token, mpiws_sync="maybe"), 400),
        (msg_headers(token, mpiws_parts="1,1"), 400),
        ({k: v for k, v in msg_headers(token).items() if k != "mpiws-source"}, 400),
    ]
    for headers, code in refused:
        api.call("POST", path, b"x", headers, expect=code)
    api.call("POST", f"/domains/{domain}/ranks/5/messages", b"x", msg_headers(token), expect=400)
    api.call("POST", f"/domains/{domain}/ranks/x/messages", b"x", msg_headers(token), expect=400)
    api.call("POST", path, None, msg_headers(token), announce=(1 << 20) + 1, expect=413)  # the limit is 1 MiB
    api.call("POST", "/domains/nobody/ranks/0/messages", b"x", msg_headers(token), expect=503)  # not yet
    # a synchronous store is answered once the receive took it
    api.call("POST", path, pickle.dumps("b"), msg_headers(token, source=1, mpiws_seq="1", mpiws_sync="1"), expect=204)
    _, s = api.call("GET", f"/domains/{domain}/ranks/0?wait=10", headers=auth(token), expect=200)
    assert s["result"] == ["a", "b"]
    _, body = api.call("POST", path, b"late", msg_headers(token), expect=410)
    assert body["error"]["class"] == 101


def test_store_to_cancelled_instance(api):
    domain, token = start(api, "block")
    api.call("DELETE", f"/domains/{domain}/ranks/0", headers=auth(token), expect=200)
    _, body = api.call("POST", f"/domains/{domain}/ranks/0/messages", b"x", msg_headers(token), expect=410)
    assert body["error"]["name"] == "MPIWS_ERR_CANCELLED"


def test_store_pushback(api):
    """Above the instance's bound on unreceived messages (default 256 MiB), a
    store from a sender no receive waits for is answered 429 and filed later."""
    domain, token = start(api, "block_on_self", size=2)
    path = f"/domains/{domain}/ranks/0/messages"
    mib = bytes(1 << 20)
    stored = 0  # MiB taken before the pushback
    while stored < 1000:
        status, body = api.call("POST", path, mib, msg_headers(token, source=1), expect=None)
        if status == 429:
            break
        assert status == 204, (status, body)
        stored += 1
    assert status == 429 and body["error"]["name"] == "MPI_ERR_OTHER" and 256 <= stored <= 258, (stored, body)
    api.call("DELETE", f"/domains/{domain}/ranks/0", headers=auth(token), expect=200)


def test_stream_upgrade(api):
    domain, token = start(api, "block", size=2)
    path = f"/domains/{domain}/ranks/0/stream"
    up = {"upgrade": "mpiws-stream/1", "connection": "upgrade", "mpiws-source": "1"}
    api.call("POST", path, b"", {**up, **auth(token)}, expect=101)
    api.call("POST", path, b"", {"mpiws-source": "1", **auth(token)}, expect=400)  # no Upgrade
    api.call("POST", path, b"", {**up, "connection": "keep-alive", **auth(token)}, expect=400)  # no Connection: upgrade
    api.call("POST", path, b"", {**up, "mpiws-source": "x", **auth(token)}, expect=400)
    api.call("POST", path, b"", {**up, "mpiws-source": "9", **auth(token)}, expect=400)
    api.call("POST", path, b"", up, expect=401)
    api.call("POST", path, b"", {**up, **auth("wrong")}, expect=403)
    api.call("POST", "/domains/nobody/ranks/0/stream", b"", {**up, **auth(token)}, expect=503)  # not yet
    api.call("DELETE", f"/domains/{domain}/ranks/0", headers=auth(token), expect=200)


def about_message(api, method, suffix):
    """A domain whose rank 0 receives one message; the path template of a
    question about message %s from rank 1, with its bad inputs checked."""
    domain, token = start(api, "recv_many", size=2, params={"count": 1})
    path = f"/domains/{domain}/ranks/0/messages/1/%s{suffix}"
    api.call(method, path % "x", headers=auth(token), expect=400)
    api.call(method, path % 0, expect=401)
    api.call(method, path % 0, headers=auth("wrong"), expect=403)
    api.call(method, f"/domains/nobody/ranks/0/messages/1/0{suffix}", headers=auth(token), expect=503)  # not yet
    return domain, token, path


def test_matched(api):
    domain, token, path = about_message(api, "GET", "/matched")
    # message 0 is refused (too large): never matched
    api.call(
        "POST",
        f"/domains/{domain}/ranks/0/messages",
        headers=msg_headers(token, source=1, mpiws_seq="0"),
        announce=(1 << 20) + 1,
        expect=413,
    )
    api.call("GET", path % 0, headers=auth(token), expect=409)
    _, m = api.call("GET", (path % 1) + "?wait=0.1", headers=auth(token), expect=200)  # not within the wait
    assert m == {"matched": False}
    api.call(
        "POST",
        f"/domains/{domain}/ranks/0/messages",
        pickle.dumps("one"),
        msg_headers(token, source=1, mpiws_seq="1"),
        expect=204,
    )
    assert api.call("GET", path % 1, headers=auth(token), expect=200)[1] == {"matched": True}
    api.call("GET", path % 2, headers=auth(token), expect=410)  # it ended having received one


def test_withdraw(api):
    domain, token, path = about_message(api, "DELETE", "")
    _, w = api.call("DELETE", path % 0, headers=auth(token), expect=200)  # before it was sent
    assert w == {"withdrawn": True}
    api.call(
        "POST",
        f"/domains/{domain}/ranks/0/messages",
        pickle.dumps("one"),
        msg_headers(token, source=1, mpiws_seq="1"),
        expect=204,
    )
    api.call("GET", f"/domains/{domain}/ranks/0?wait=10", headers=auth(token), expect=200)
    _, w = api.call("DELETE", path % 1, headers=auth(token), expect=200)
    assert w == {"withdrawn": False}


# ---- the jobs layer: programs, jobs, files ----------------------------------

JSON = {"content-type": "application/json"}
RAW = {"content-type": "application/octet-stream"}
NO_JOB = "0" * 32


def inputs(**values):
    return json.dumps({"inputs": values})


@contextlib.contextmanager
def obstructed(path):
    """A plain file where the endpoint keeps a directory: it cannot write there."""
    aside = path.with_name(path.name + ".aside")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.rename(aside)
    path.write_bytes(b"")
    try:
        yield
    finally:
        path.unlink()
        if aside.exists():
            aside.rename(path)


def test_programs(api):
    _, programs = api.call("GET", "/programs", expect=200)
    assert [p["name"] for p in programs] == sorted(p.split("=")[0] for p in PROGRAMS)
    _, count = api.call("GET", "/programs/count", expect=200)
    assert count in programs and count["parameters"] == [
        {"name": "text", "direction": "in", "placement": "file", "type": "string"},
        {"name": "n", "direction": "out", "placement": "file", "type": "int"},
    ]
    api.call("GET", "/programs/nope", expect=404)


@pytest.mark.parametrize("how", ["jobs", "call"])
def test_spawn_refusals(api, server, how):
    path = f"/programs/count/{how}"
    api.call("POST", f"/programs/nope/{how}", inputs(text="x"), JSON, expect=404)
    if how == "call":  # a spawn answers no results: it has no by=
        api.call("POST", path + "?by=mail", inputs(text="x"), JSON, expect=400)
    for bad in (
        b"{not json",
        b"",
        b"[1]",
        b'{"inputs": 3}',
        inputs(),
        inputs(text="x", z=1),
        inputs(text=[1]),
        inputs(text={"base64": "***"}),
        inputs(text={"url": "ftp://example.org/x"}),
        inputs(text={"url": f"{api.url}/files/{NO_JOB}"}),  # not a file of this endpoint
        inputs(text={"url": "http://10.0.0.1/x"}),
        inputs(text={"url": "http://127.0.0.2:1/x"}),
    ):  # refused hosts
        api.call("POST", path, bad, JSON, expect=400)
    api.call("POST", "/programs/sleep/jobs", inputs(seconds="soon"), JSON, expect=400)
    api.call("POST", path, b" " * ((1 << 20) + 1), JSON, expect=413)  # the limit is 1 MiB
    with obstructed(server.workdir / "jobs"):
        api.call("POST", path, inputs(text="x"), JSON, expect=500)


def test_job_status_and_kill(api):
    _, job = api.call("POST", "/programs/sleep/jobs", inputs(seconds=30), JSON, expect=201)
    path = f"/jobs/{job['id']}"
    assert job["url"] == api.url + path and job["state"] in ("staging", "running") and job["ended"] is None
    _, listed = api.call("GET", "/jobs", expect=200)  # the key's own jobs
    (entry,) = [j for j in listed if j["id"] == job["id"]]
    assert entry == {
        "id": job["id"],
        "url": job["url"],
        "program": "sleep",
        "state": entry["state"],
        "created": job["started"],
        "owner": 1,
    }
    _, s = api.call("GET", path + "?wait=0.2", expect=200)  # times out, still running
    assert s["state"] == "running" and s["exit_code"] is None
    api.call("GET", path + "?wait=soon", expect=400)
    api.call("GET", path + "?wait=-1", expect=400)
    api.call("GET", path + "/results", expect=409)  # not ended
    api.call("GET", path + "/results?by=mail", expect=400)
    assert api.call("GET", path + "/stdout", expect=200)[1] == b""
    _, s = api.call("DELETE", path, expect=200)
    assert s["state"] == "killed" and s["ended"] is not None
    _, s = api.call("DELETE", path, expect=200)  # ended: unchanged
    assert s["state"] == "killed"
    api.call("DELETE", path + "?remove=maybe", expect=400)
    api.call("DELETE", path + "?remove=true", expect=204)  # and its files
    api.call("GET", path, expect=404)
    api.call("DELETE", path + "?remove=true", expect=404)
    for p in ("", "/results", "/stdout", "/stderr", "/files/n"):
        api.call("GET", f"/jobs/{NO_JOB}{p}", expect=404)
    api.call("DELETE", f"/jobs/{NO_JOB}", expect=404)


def test_call_results_and_job_files(api):
    _, r = api.call("POST", "/programs/count/call", inputs(text="hello"), JSON, expect=200)
    assert (r["state"], r["exit_code"], r["outputs"]) == ("done", 0, {"n": 5})
    assert (r["stdout"], r["stderr"]) == ("counting\n", "a note\n")
    path = f"/jobs/{r['id']}"
    assert api.call("GET", path + "/results?by=value", expect=200)[1] == r
    _, ref = api.call("GET", path + "/results?by=reference", expect=200)
    assert ref["outputs"]["n"] == {"url": f"{api.url}{path}/files/n", "size": 2}
    assert ref["stdout"] == {"url": f"{api.url}{path}/stdout", "size": 9}
    assert api.call("GET", path + "/files/n", expect=200)[1] == b"5\n"
    assert api.call("GET", path + "/files/text", expect=200)[1] == b"hello"  # an input, as staged
    assert api.call("GET", path + "/stdout", expect=200)[1] == b"counting\n"
    assert api.call("GET", path + "/stderr", expect=200)[1] == b"a note\n"
    api.call("GET", path + "/files/nope", expect=404)  # no such parameter
    # binary by value is base64; by reference, passed on to another job
    _, c = api.call("POST", "/programs/copy/call?by=reference", inputs(src={"base64": "AP8="}), JSON, expect=200)
    assert c["outputs"]["dst"]["size"] == 2
    assert api.call("GET", f"/jobs/{c['id']}/results", expect=200)[1]["outputs"]["dst"] == {"base64": "AP8="}
    _, n = api.call("POST", "/programs/count/call", inputs(text={"url": c["outputs"]["dst"]["url"]}), JSON, expect=200)
    assert n["outputs"]["n"] == 2
    # an output that is not of its type is given by reference, with the reason
    _, t = api.call("POST", "/programs/toint/call", inputs(src="seven"), JSON, expect=200)
    assert "not an int" in t["outputs"]["dst"]["error"] and t["outputs"]["dst"]["size"] == 5
    # a job that failed staging: answered all the same, and it never printed
    _, f = api.call("POST", "/programs/count/call", inputs(text={"url": "http://127.0.0.1:1/x"}), JSON, expect=200)
    assert (f["state"], f["exit_code"], f["stdout"], f["outputs"]) == ("failed", None, None, {"n": None})
    assert "input 'text'" in f["error"]
    api.call("GET", f"/jobs/{f['id']}/stdout", expect=404)


def test_files(api, server):
    _, up = api.call("POST", "/files", b"hello", RAW, expect=201)
    path = urlparse(up["url"]).path
    assert up == {"url": api.url + path, "size": 5}
    assert api.call("GET", path, expect=200)[1] == b"hello"
    _, r = api.call("POST", "/programs/count/call", inputs(text={"url": up["url"]}), JSON, expect=200)
    assert r["outputs"]["n"] == 5
    api.call("DELETE", path, expect=204)
    api.call("DELETE", path, expect=404)
    api.call("GET", path, expect=404)
    api.call("GET", "/files/nope", expect=404)
    api.call("POST", "/files", None, RAW, announce=(1 << 20) + 1, expect=413)  # refused on the header
    api.call("POST", "/files", iter([bytes(1 << 19)] * 3), RAW, expect=413)  # chunked, past the limit
    api.call("POST", "/files", b"cut", RAW, announce=100, cut=True, expect=400)
    with obstructed(server.workdir / "files"):
        api.call("POST", "/files", b"x", RAW, expect=500)
    assert not [f for f in os.listdir(server.workdir / "files") if f.endswith(".part")]


def test_keyed_operations_refuse_callers_without_the_key(api):
    """Every operation of the jobs layer: no key 401, a key without the scope 403."""
    calls = [
        ("GET", "/programs"),
        ("GET", "/programs/count"),
        ("POST", "/programs/count/jobs"),
        ("POST", "/programs/count/call"),
        ("GET", "/jobs"),
        ("GET", f"/jobs/{NO_JOB}"),
        ("DELETE", f"/jobs/{NO_JOB}"),
        ("GET", f"/jobs/{NO_JOB}/results"),
        ("POST", "/files"),
        ("DELETE", f"/files/{NO_JOB}"),
    ]
    for method, path in calls:
        body = inputs(text="x") if method == "POST" else None
        api.call(method, path, body, {**JSON, "authorization": "none"}, expect=401)
        wrong = KEY_RUN if path.startswith("/files") else KEY_FILES
        api.call(method, path, body, {**JSON, **auth(wrong)}, expect=403)
    for how in ("jobs", "call"):
        api.call("POST", f"/programs/count/{how}", inputs(text="x"), {"content-type": "text/plain"}, expect=415)
        api.call("POST", f"/programs/count/{how}", b'{"inputs"', JSON, announce=100, expect=408)  # stalls


def test_full_job_table_and_disk(spec, api, tmp_path):
    """A second endpoint with small limits, and two keys: a key's share of
    the job table (429, Retry-After), the whole table (503, Retry-After),
    the disk quota (507) and a key's uploads (429); what it answers counts as seen."""
    from mpiws.service.serve import Server

    one, other = ("j" * 16 + secrets.token_hex(8) for _ in range(2))
    (tmp_path / "keys").write_text(f"{one}\n{other}\n")
    (tmp_path / "keys").chmod(0o600)
    small = Server(
        {},
        programs=["sleep=sleep [in:val:seconds:float]"],
        keys=str(tmp_path / "keys"),
        max_jobs=2,
        max_jobs_per_key=1,
        max_uploads_per_key=2,
        max_disk=1 << 20,
    )
    try:
        a, b = Api(spec, small.url, one), Api(spec, small.url, other)
        a.call("POST", "/programs/sleep/jobs", inputs(seconds=30), JSON, expect=201)
        a.call("POST", "/programs/sleep/jobs", inputs(seconds=30), JSON, expect=429)  # the key's share
        a.call("POST", "/programs/sleep/call", inputs(seconds=30), JSON, expect=429)
        b.call("POST", "/programs/sleep/jobs", inputs(seconds=30), JSON, expect=201)  # another key's is its own
        b.call("POST", "/programs/sleep/jobs", inputs(seconds=30), JSON, expect=503)  # the whole table
        b.call("POST", "/programs/sleep/call", inputs(seconds=30), JSON, expect=503)
        a.call("POST", "/files", None, RAW, announce=(1 << 20) + 1, expect=507)  # refused on the header
        a.call("POST", "/files", iter([bytes(1 << 19)] * 3), RAW, expect=507)  # chunked, past the quota
        b.call("POST", "/files", b"1", RAW, expect=201)
        b.call("POST", "/files", b"2", RAW, expect=201)
        b.call("POST", "/files", b"3", RAW, expect=429)  # the key's uploads
        api.seen |= a.seen | b.seen
    finally:
        small.stop()


def test_undocumented_requests_are_refused(api):
    api.undocumented("GET", "/nowhere", 404)
    api.undocumented("GET", "/domains/d/ranks/0/mailbox", 404)
    api.undocumented("DELETE", "/domains/d/ranks/1/messages//0", 404)  # an empty segment is no parameter
    api.undocumented("PUT", "/run", 405)
    api.undocumented("PUT", "/rendezvous", 405)
    api.undocumented("GET", "/run", 405)
    api.undocumented("POST", "/", 405)
    api.undocumented("POST", "/domains/d/ranks/0", 405)
    api.undocumented("GET", "/domains/d/ranks/0/messages", 405)
    api.undocumented("GET", "/domains/d/ranks/0/stream", 405)
    api.undocumented("GET", "/jobs/x/files", 404)
    api.undocumented("GET", "/programs/count/jobs/x", 404)
    api.undocumented("POST", "/programs", 405)
    api.undocumented("PUT", "/programs/count", 405)
    api.undocumented("GET", "/programs/count/jobs", 405)
    api.undocumented("GET", "/programs/count/call", 405)
    api.undocumented("POST", "/jobs/x", 405)
    api.undocumented("POST", "/jobs/x/results", 405)
    api.undocumented("DELETE", "/jobs/x/stdout", 405)
    api.undocumented("DELETE", "/jobs/x/stderr", 405)
    api.undocumented("PUT", "/jobs/x/files/n", 405)
    api.undocumented("GET", "/files", 405)
    api.undocumented("POST", "/files/x", 405)


def test_every_documented_answer_was_seen(spec, api):
    """Runs last in this module: each documented (operation, status) was
    produced by the server in the tests above."""
    documented = {(op["operationId"], str(code)) for _, _, op in operations(spec) for code in op["responses"]}
    missing = documented - api.seen - NOT_PROVOKED
    assert not missing, f"documented but never answered: {sorted(missing)}"
