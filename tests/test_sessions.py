"""Sessions: a client's jobs sharing a directory on the endpoint. Files
pass from job to job where they lie (the same inode: no transfer, no copy),
only the owner sees a session, names cannot lead out of it, its disk is
bounded, it expires when idle, and it survives a restart of an endpoint
with a work directory. Over the Python client, plain HTTP and the command
line."""

import http.client
import json
import os
import subprocess
import sys
import time
import pytest

from mpiws.jobs import Session
from mpiws.keys import client_key
from mpiws.service.serve import Server

from conftest import ROOT
from test_jobs import request, script
from test_jobs_restart import Endpoint


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    d = tmp_path_factory.mktemp("sessions")
    secret = d / "secret.txt"
    secret.write_text("the deployer's secret\n")
    programs = [
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        "inode=stat -c %i [in:file:f:binary]",
        f"inodeof={script(d, 'inodeof.sh', 'stat -c %i $1 > $2')} [in:file:f:binary] [out:file:ino:int]",
        f"add={ROOT / 'examples' / 'add.sh'} [in:val:x:int] [in:file:y:int] [out:file:result:int]",
        f"bump={script(d, 'bump.sh', 'echo $(( $(cat $1) + 1 )) > $1')} [in_out:file:n:int]",
        f"mklink={script(d, 'mklink.sh', f'ln -s {secret} $1')} [out:file:out:string]",
        f"fill={script(d, 'fill.sh', 'head -c 3000000 /dev/zero > $1')} [out:file:out:binary]",
        "sleep=sleep [in:val:seconds:float]",
    ]
    s = Server({}, programs=programs, workdir=str(d / "work"), max_session_disk=2 << 20, fetch_allow=["127.0.0.1"])
    s.workdir = d / "work"
    s.secret = secret
    yield s
    s.stop()


def other_key(tmp_path):
    """A keys file with the user's key and a second `jobs` key (another client)."""
    keys = tmp_path / "keys"
    keys.write_text(f"{client_key()} jobs files\n{'b' * 43} jobs\n")
    keys.chmod(0o600)
    return str(keys), "b" * 43


def on_disk(host, session, name):
    return host.workdir / "sessions" / session.id / "files" / name


def test_files_pass_from_job_to_job_where_they_lie(host, tmp_path):
    data = os.urandom(100_000)
    (tmp_path / "raw").write_bytes(data)
    with Session(host.url) as s:
        assert s.upload(tmp_path / "raw")["size"] == len(data)
        first = s.program("copy").call(src=s.file("raw"), dst=s.file("copied"), by="reference")
        assert first["state"] == "done" and first["outputs"]["dst"]["session"] == "copied", first
        # The next job reads the file the last one wrote: the very same inode, nothing copied.
        seen = s.program("inode").call(f=s.file("copied"))["stdout"]
        assert int(seen) == on_disk(host, s, "copied").stat().st_ino
        # An output's URL (a capability, as any job file's) and the session's own file agree.
        assert request("GET", first["outputs"]["dst"]["url"]) == (200, data)
        s.download("copied", tmp_path / "back")
        assert (tmp_path / "back").read_bytes() == data
        assert {f["name"]: f["size"] for f in s.files()} == {"raw": len(data), "copied": len(data)}
        status = s.status()
        assert status["used"] >= 2 * len(data) and len(status["jobs"]) == 2
        root = host.workdir / "sessions" / s.id
        assert root.is_dir()
    assert not root.exists(), "deleted with its files"
    assert request("GET", s.url)[0] == 404


def test_inputs_by_value_land_in_the_session_and_in_out_files_change_in_place(host):
    with Session(host.url) as s:
        r = s.program("add").call(x=1, y="41", result=s.file("sum"))
        assert r["outputs"]["result"] == 42
        assert {f["name"] for f in s.files()} == {"y", "sum"}, "a value input is written under its parameter's name"
        s.program("bump").call(n=s.file("sum"))
        s.program("bump").call(n=s.file("sum"))
        assert on_disk(host, s, "sum").read_text() == "44\n"
        r = s.program("add").call(x=1, y=s.file("sum"))  # its result under its own name
        assert r["outputs"]["result"] == 45 and on_disk(host, s, "result").read_text().strip() == "45"
        # An input from elsewhere, written into the session under the name given beside it.
        r = s.program("add").call(x=0, y=s.file("seven", "7"), result=s.file("still-seven"))
        assert r["outputs"]["result"] == 7 and on_disk(host, s, "seven").read_text() == "7"
        # A session job's result passes to a job outside the session as any result does: by its URL.
        ref = s.program("copy").call(by="reference", src=s.file("seven"), dst=s.file("copy7"))["outputs"]["dst"]
        status, body = request("POST", f"{host.url}/programs/add/call", {"inputs": {"x": 1, "y": ref}})
        assert status == 200 and json.loads(body)["outputs"]["result"] == 8, body


def test_plain_http_and_the_rules_on_names(host):
    status, body = request("POST", f"{host.url}/sessions", {"idle": 600})
    assert status == 201, body
    s = json.loads(body)
    assert s["idle"] == 600 and s["disk"] == 2 << 20 and s["jobs"] == []
    url = s["url"]
    raw = {"content-type": "application/octet-stream"}
    assert request("PUT", f"{url}/files/in.txt", b"7\n", raw)[0] == 201
    for bad in ["..", ".hidden", "-rf", "a%2Fb", "%2Fetc%2Fpasswd", "a%20b"]:
        status, body = request("PUT", f"{url}/files/{bad}", b"x", raw)
        assert status in (400, 404), (bad, status, body)
    assert not (host.workdir / "sessions" / s["id"] / "files" / "-rf").exists()
    spawn = f"{host.url}/programs/copy/jobs"
    for name in ["../escape", "/etc/passwd", "-rf", ".exit", "a/b"]:
        body = {"session": s["id"], "inputs": {"src": {"session": "in.txt"}, "dst": {"session": name}}}
        status, answer = request("POST", spawn, body)
        assert status == 400 and "session file's name" in answer.decode(), (name, answer)
    status, answer = request("POST", spawn, {"session": s["id"], "inputs": {"src": {"session": "nope"}, "dst": "x"}})
    assert status == 400 and "has no file" in answer.decode()
    status, answer = request("POST", spawn, {"inputs": {"src": {"session": "in.txt"}, "dst": {"session": "o"}}})
    assert status == 400 and "spawn the job in a session" in answer.decode()
    same = {"session": s["id"], "inputs": {"src": {"session": "in.txt"}, "dst": {"session": "in.txt"}}}
    status, answer = request("POST", spawn, same)
    assert status == 400 and "would write the file" in answer.decode()
    status, answer = request("POST", f"{host.url}/sessions", {"disk": 4 << 20})
    assert status == 400 and "--max-session-disk" in answer.decode()
    status, answer = request("POST", f"{host.url}/sessions", {"colour": "red"})
    assert status == 400
    assert request("DELETE", f"{url}/files/in.txt")[0] == 204
    assert request("DELETE", f"{url}/files/in.txt")[0] == 404
    assert request("DELETE", url)[0] == 204


def test_a_job_cannot_make_the_endpoint_read_through_a_link(host):
    with Session(host.url) as s:
        r = s.program("mklink").call(out=s.file("leak"))
        assert r["state"] == "done"
        assert os.path.islink(on_disk(host, s, "leak"))
        assert request("GET", f"{s.url}/files/leak")[0] == 404
        assert "leak" not in {f["name"] for f in s.files()}
        status, body = request(
            "POST",
            f"{host.url}/programs/copy/jobs",
            {"session": s.id, "inputs": {"src": {"session": "leak"}, "dst": "x"}},
        )
        assert status == 400 and "not a regular file" in body.decode()
        assert (
            b"secret"
            not in request("GET", r["outputs"]["out"]["url"] if isinstance(r["outputs"]["out"], dict) else s.url)[1]
        )
        # Writing over the link replaces the link, never the file it points to.
        assert request("PUT", f"{s.url}/files/leak", b"mine", {"content-type": "application/octet-stream"})[0] == 201
        assert host.secret.read_text() == "the deployer's secret\n"
        assert not os.path.islink(on_disk(host, s, "leak"))


def test_nobody_else_sees_a_session(tmp_path):
    keys, other = other_key(tmp_path)
    s = Server({}, keys=keys, programs=["copy=cp [in:file:src:binary] [out:file:dst:binary]"])
    try:
        mine = Session(s.url)
        mine.upload(__file__, "f")
        theirs = {"authorization": f"Bearer {other}"}
        for method, path in [
            ("GET", ""),
            ("DELETE", ""),
            ("GET", "/files"),
            ("GET", "/files/f"),
            ("DELETE", "/files/f"),
        ]:
            status, body = request(method, f"{mine.url}{path}", headers=theirs)
            assert status == 404 and f"no session {mine.id}" in body.decode(), (method, path, body)
        status, _ = request("PUT", f"{mine.url}/files/g", b"x", {**theirs, "content-type": "application/octet-stream"})
        assert status == 404
        status, body = request(
            "POST", f"{s.url}/programs/copy/jobs", {"session": mine.id, "inputs": {"src": "x", "dst": "y"}}, theirs
        )
        assert status == 404
        assert json.loads(request("GET", f"{s.url}/sessions", headers=theirs)[1]) == []
        assert [x["id"] for x in json.loads(request("GET", f"{s.url}/sessions")[1])] == [mine.id]
        assert request("GET", f"{s.url}/sessions", headers={"authorization": "Bearer wrong"})[0] == 401
        mine.delete()
    finally:
        s.stop()


def test_its_disk_is_bounded(host, tmp_path):
    with Session(host.url, disk=1 << 20) as s:
        # Refused on its announced length, before any of it is read.
        conn = http.client.HTTPConnection(host.url.split("//")[1], timeout=30)
        conn.putrequest("PUT", f"/sessions/{s.id}/files/big")
        conn.putheader("Content-Length", str(2 << 20))
        conn.putheader("Authorization", f"Bearer {client_key()}")
        conn.endheaders()
        r = conn.getresponse()
        assert r.status == 507 and "disk is full" in r.read().decode()
        conn.close()
        # And as it arrives, when its length is not announced.
        status, body = request(
            "PUT", f"{s.url}/files/big", iter([bytes(256 << 10)] * 5), {"content-type": "application/octet-stream"}
        )
        assert status == 507 and "disk is full" in body.decode(), body
        assert s.files() == [] and s.status()["used"] == 0, "nothing half-written is left, its bytes given back"
        r = s.program("fill").call(out=s.file("zeros"))
        assert r["state"] == "failed" and "disk is full" in r["error"], r


def test_an_idle_session_expires_but_not_while_a_job_runs(tmp_path):
    s = Server({}, programs=["sleep=sleep [in:val:seconds:float]"], workdir=str(tmp_path / "w"), session_idle=1.0)
    try:
        idle = Session(s.url)
        busy = Session(s.url)
        # The job starts after this instant and sleeps 3 s, so any listing asked for before
        # `ends` must still show its session (a finished job goes with its expired session).
        ends = time.monotonic() + 3
        busy.program("sleep").spawn(seconds=3)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            asked = time.monotonic()
            ids = {x["id"] for x in json.loads(request("GET", f"{s.url}/sessions")[1])}
            if not ids:
                break
            if idle.id not in ids and asked < ends:
                assert busy.id in ids, "a session with a running job stays"
            time.sleep(0.3)
        assert not (tmp_path / "w" / "sessions" / idle.id).exists()
        assert not (tmp_path / "w" / "sessions" / busy.id).exists(), "gone once its job ended and it stayed idle"
    finally:
        s.stop()


def test_sessions_per_key_are_bounded(tmp_path):
    s = Server({}, max_sessions_per_key=2)
    try:
        first, _ = Session(s.url), Session(s.url)
        status, body = request("POST", f"{s.url}/sessions")
        assert status == 429 and "--max-sessions-per-key" in body.decode()
        first.delete()
        assert request("POST", f"{s.url}/sessions")[0] == 201
    finally:
        s.stop()


def test_cwl_tools_are_refused_in_a_session_saying_so(tmp_path):
    tool = {"cwlVersion": "v1.2", "class": "CommandLineTool", "baseCommand": "true", "inputs": {}, "outputs": {}}
    s = Server({}, cwl_programs=[("t", tool)])
    try:
        with Session(s.url) as session:
            status, body = request("POST", f"{s.url}/programs/t/jobs", {"session": session.id, "inputs": {}})
            assert status == 400 and "only template programs run in a session" in body.decode(), body
    finally:
        s.stop()


def test_a_session_and_its_jobs_survive_a_restart(tmp_path):
    ep = Endpoint(tmp_path).start()
    try:
        s = Session(ep.url)
        s.upload(ROOT / "examples" / "add.sh", "script")
        r = s.program("add").call(x=2, y="40", result=s.file("sum"))
        assert r["outputs"]["result"] == 42
        ep.crash()
        ep.start()
        s = Session(url=s.url.replace(s.endpoint, ep.url))
        assert {f["name"] for f in s.files()} == {"script", "y", "sum"}
        status = s.status()
        assert status["jobs"] == [r["id"]] and status["used"] > 0
        assert request("GET", f"{ep.url}/jobs/{r['id']}/results")[0] == 200
        assert s.program("add").call(x=1, y=s.file("sum"), result=s.file("more"))["outputs"]["result"] == 43
        s.delete()
    finally:
        ep.stop()


def test_the_command_line(host, tmp_path):
    def mpiws(*args):
        r = subprocess.run([sys.executable, "-m", "mpiws", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    url = mpiws("session", "new", host.url, "--idle", "60").strip()
    (tmp_path / "in").write_text("5\n")
    mpiws("session", "put", url, str(tmp_path / "in"), "five")
    out = json.loads(
        mpiws("call", "--session", url, f"{host.url}/programs/add", "x=1", "y:@session:five", "result:@session:six")
    )
    assert out["outputs"]["result"] == 6
    # options after the URL, between the inputs (its output `result` is written in the session)
    out = json.loads(mpiws("call", f"{host.url}/programs/add", "x=2", "--session", url, "y:@session:five"))
    assert out["outputs"]["result"] == 7
    r = subprocess.run(
        [sys.executable, "-m", "mpiws", "call", f"{host.url}/programs/add", "x=2", "--bogus"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr, r.stderr
    mpiws("session", "get", url, "six", str(tmp_path / "six"))
    assert (tmp_path / "six").read_text() == "6\n"
    shown = json.loads(mpiws("session", "show", url))
    assert {f["name"] for f in shown["files"]} == {"five", "six", "result"} and shown["idle"] == 60
    mpiws("session", "rm", url, "five")
    mpiws("session", "rm", url)
    assert request("GET", url)[0] == 404


def test_the_workflow_runner_passes_files_where_they_lie_in_a_session(tmp_path):
    from mpiws import workflow
    from mpiws.workflow.values import LocalFile

    flows = ROOT / "examples" / "workflows"
    same = script(
        tmp_path, "same.sh", '[ "$(stat -c %i "$1")" = "$(stat -c %i "$2")" ] && echo yes > "$3" || echo no > "$3"'
    )
    flow = tmp_path / "chain.yml"
    flow.write_text(f"""
inputs: {{text: file}}
steps:
  first:  {{program: "{flows}/copy.sh [in:file:src:binary] [out:file:dst:binary]", in: {{src: text}}, out: [dst]}}
  second: {{program: "{flows}/copy.sh [in:file:src:binary] [out:file:dst:binary]", in: {{src: first/dst}}, out: [dst]}}
  same:   {{program: "{same} [in:file:a:binary] [in:file:b:binary] [out:file:same:string]", in: {{a: second/dst, b: second/dst}}, out: [same]}}
outputs: {{copy: second/dst, same: same/same}}
""")
    text = tmp_path / "in.bin"
    text.write_bytes(os.urandom(300_000))
    for sessions, want in ((True, "yes\n"), (False, "no\n")):
        out, rec = workflow.run(
            flow,
            {"text": LocalFile(str(text))},
            outdir=str(tmp_path / str(sessions)),
            progress=False,
            sessions=sessions,
        )
        assert rec["state"] == "done"
        assert (tmp_path / str(sessions) / "copy").read_bytes() == text.read_bytes()
        # In a session both inputs are the one file the step before wrote; else each job has its own copy.
        assert out["same"] == want, (sessions, out)


def test_standard_clients_place_jobs_in_a_session_with_its_header(host):
    """OWSLib and zeep, unmodified: the `Mpiws-Session` header places their jobs in the caller's session;
    a file of the session (by its URL, or by name in SOAP) is read where it lies."""
    import requests
    import zeep
    from owslib.ogcapi.processes import Processes
    from zeep.transports import Transport

    with Session(host.url) as s:
        s.upload(ROOT / "examples" / "add.sh", "script")
        headers = {"Authorization": f"Bearer {client_key()}", "Mpiws-Session": s.id}
        ogc = Processes(f"{host.url}/ogcapi")
        # (OWSLib's headers= updates its module's defaults, for every later client)
        ogc.headers = {**ogc.headers, **headers}
        assert ogc.execute("add", inputs={"x": 1, "y": "41"}) == {"result": 42}
        assert on_disk(host, s, "result").read_text() == "42\n", "its output written in the session"
        # An output by reference is the session's file, referenced there.
        status, body = request(
            "POST",
            f"{host.url}/ogcapi/processes/add/execution",
            {
                "inputs": {"x": 2, "y": "40"},
                "outputs": {"result": {"transmissionMode": "reference"}},
                "response": "document",
            },
            {"Mpiws-Session": s.id},
        )
        href = json.loads(body)["result"]["href"]
        assert status == 200 and href == f"{s.url}/files/result", body
        assert request("GET", href) == (200, b"42\n")
        # By the URL of a session file: read where it lies (the same inode), not copied.
        ino = ogc.execute("inodeof", inputs={"f": {"href": f"{s.url}/files/script"}})
        assert ino == {"ino": on_disk(host, s, "script").stat().st_ino}
        http = requests.Session()
        http.headers.update(headers)
        add = zeep.Client(f"{host.url}/programs/add?wsdl", transport=Transport(session=http))
        on_disk(host, s, "y").write_text("100\n")  # the OGC job's input, by its parameter's name
        r = add.service.call(x=1, y={"session": "y"})
        assert r.outputs.result.value == 101 and on_disk(host, s, "result").read_text() == "101\n"
        assert len(s.status()["jobs"]) == 4
        # Or the envelope's own header block (`session`, as the WSDL declares it), with no HTTP header.
        keyed = requests.Session()
        keyed.headers["Authorization"] = headers["Authorization"]
        soap_only = zeep.Client(f"{host.url}/programs/add?wsdl", transport=Transport(session=keyed))
        r = soap_only.service.call(x=2, y={"session": "y"}, _soapheaders={"session": s.id})
        assert r.outputs.result.value == 102 and on_disk(host, s, "result").read_text() == "102\n"
        assert len(s.status()["jobs"]) == 5
        with pytest.raises(zeep.exceptions.Fault) as e:  # the two naming two sessions
            add.service.call(x=1, y={"session": "y"}, _soapheaders={"session": "another"})
        assert "two sessions" in e.value.message, e.value.message
        with pytest.raises(zeep.exceptions.Fault) as e:  # a session that is not the caller's
            soap_only.service.call(x=1, y={"session": "y"}, _soapheaders={"session": "nowhere"})
        assert e.value.detail.find(".//{urn:mpiws:fault}status").text == "404", e.value.message
    # Another key's session, or none, is refused as the face refuses.
    status, body = request(
        "POST", f"{host.url}/ogcapi/processes/add/execution", {"inputs": {"x": 1, "y": "1"}}, {"Mpiws-Session": s.id}
    )
    assert status == 404 and "no session" in body.decode()
