"""Legacy programs as services: command-line programs deployed with a
one-line template on a real endpoint, jobs spawned, watched, killed, their
files passed by value and by reference (uploads, pulls, links), over the
Python client, plain HTTP and the command line."""

import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from mpiws import MPI
from mpiws.jobs import File, Job, Program, upload
from mpiws.keys import client_key
from mpiws.service.serve import Server

from conftest import ROOT

BUMP = "#!/bin/sh\necho $(( $(cat $1) + 1 )) > $1\n"
FAIL = "#!/bin/sh\necho 'no such thing' >&2\nexit 3\n"


def script(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(0o755)
    return str(p)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    d = tmp_path_factory.mktemp("programs")
    programs = [
        f"add={ROOT / 'examples' / 'add.sh'} [in:val:x:int] [in:file:y:int] [out:file:result:int]",  # the guide's
        f"fail={script(d, 'fail.sh', FAIL)}",
        "sleep=sleep [in:val:seconds:float]",
        "digest=sha256sum [in:file:data:binary]",
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        f"bump={script(d, 'bump.sh', BUMP)} [in_out:file:n:int]",
        "missing=no-such-program-anywhere [in:val:x:int]",
    ]
    # pulls from a second endpoint on loopback: allowed explicitly (refused by default)
    s = Server({}, programs=programs, workdir=str(d / "work"), max_upload=64 << 20, fetch_allow=["127.0.0.1"])
    s.workdir = d / "work"
    yield s
    s.stop()


def request(method, url, body=None, headers=None):
    """A plain HTTP request with the endpoint key (a JSON body says so)."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    headers = {
        "authorization": f"Bearer {client_key()}",
        **({"content-type": "application/json"} if isinstance(body, (dict, list)) else {}),
        **(headers or {}),
    }
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def error_of(status_body):
    return json.loads(status_body[1])["error"]["message"]


def test_the_interface_is_generated_from_the_template(host):
    u = Program(f"{host.url}/programs/add").usage()
    assert [(p["name"], p["direction"], p["placement"], p["type"]) for p in u["parameters"]] == [
        ("x", "in", "val", "int"),
        ("y", "in", "file", "int"),
        ("result", "out", "file", "int"),
    ]
    status, body = request("GET", f"{host.url}/programs")
    assert status == 200 and {"add", "copy", "sleep"} <= {p["name"] for p in json.loads(body)}
    assert "add" in json.loads(request("GET", f"{host.url}/")[1])["programs"]


def test_call_by_value(host):
    r = Program(f"{host.url}/programs/add").call(x=1, y="41")
    assert r["state"] == "done" and r["exit_code"] == 0
    assert r["outputs"] == {"result": 42} and r["stdout"] == "adding 1 and 41\n" and r["stderr"] == ""


def test_spawn_wait_results_and_plain_http(host):
    # any HTTP client can do it: curl's view of the same operations
    status, body = request(
        "POST",
        f"{host.url}/programs/add/jobs",
        {"inputs": {"x": "2", "y": {"base64": "NDA="}}},
        {"content-type": "application/json"},
    )
    assert status == 201, body
    job = json.loads(body)
    assert job["state"] in ("staging", "running", "done") and job["url"].endswith(job["id"])
    status, body = request("GET", f"{job['url']}?wait=30")
    assert status == 200 and json.loads(body)["state"] == "done"
    assert json.loads(request("GET", f"{job['url']}/results")[1])["outputs"]["result"] == 42
    assert request("GET", f"{job['url']}/files/result") == (200, b"42\n")
    assert request("GET", f"{job['url']}/stdout") == (200, b"adding 2 and 40\n")


def test_kill_ends_a_running_job_at_once(host):
    job = Program(f"{host.url}/programs/sleep").spawn(seconds=60)
    assert job.wait(timeout=0.5)["state"] == "running"
    status, _ = request("GET", f"{job.url}/results")
    assert status == 409  # not ended yet: nothing to fetch, and a clear answer
    t = time.monotonic()
    assert job.kill()["state"] == "killed" and time.monotonic() - t < 5
    assert job.status()["state"] == "killed"
    assert job.kill()["state"] == "killed"  # killing an ended job changes nothing


def test_a_failing_program_reports_its_exit_status_and_stderr(host):
    r = Program(f"{host.url}/programs/fail").call()
    assert r["state"] == "failed" and r["exit_code"] == 3 and "status 3" in r["error"]
    assert r["stderr"] == "no such thing\n"
    r = Program(f"{host.url}/programs/missing").call(x=1)
    assert r["state"] == "failed" and "cannot start no-such-program-anywhere" in r["error"]


def test_an_output_passes_to_the_next_job_by_reference_without_a_fetch(host):
    first = Program(f"{host.url}/programs/copy").call(by="reference", src=b"\x00\x01binary\xff" * 1000)
    ref = first["outputs"]["dst"]
    assert ref["size"] == 9000 and ref["url"].startswith(f"{host.url}/jobs/{first['id']}/files/dst")
    # a result's reference object is an input as it stands
    _status, body = request("POST", f"{host.url}/programs/digest/jobs", {"inputs": {"data": ref}})
    second = Job(json.loads(body)["url"])
    assert second.wait()["state"] == "done"
    assert second.results()["stdout"].split()[0] == hashlib.sha256(b"\x00\x01binary\xff" * 1000).hexdigest()
    # the same endpoint: the input is copied from the first job's file on disk (not
    # fetched over HTTP), and it is a copy of its own, which the program cannot change
    # at its source (a hard link it was, until the security review)
    a = os.stat(host.workdir / "jobs" / first["id"] / "dst")
    b = os.stat(host.workdir / "jobs" / second.id / "data")
    assert (a.st_ino, a.st_dev) != (b.st_ino, b.st_dev) and a.st_size == b.st_size == 9000


def test_an_in_out_file_is_copied_so_its_source_is_untouched(host):
    ref = upload(host.url, _write(host.workdir.parent / "n.txt", b"7"))
    r = Program(f"{host.url}/programs/bump").call(n=File(ref["url"]))
    assert r["outputs"]["n"] == 8
    assert request("GET", ref["url"]) == (200, b"7")


def test_a_job_pulls_its_input_from_another_endpoint(host, tmp_path):
    other = Server({}, programs=[], workdir=str(tmp_path / "other"))
    try:
        data = os.urandom(3 << 20)
        ref = upload(other.url, _write(tmp_path / "data.bin", data))
        r = Program(f"{host.url}/programs/digest").call(data=File(ref["url"]))
        assert r["state"] == "done" and r["stdout"].split()[0] == hashlib.sha256(data).hexdigest()
        gone = ref["url"][:-1] + ("0" if ref["url"][-1] != "0" else "1")
        r = Program(f"{host.url}/programs/digest").call(data=File(gone))
        assert r["state"] == "failed" and "input 'data'" in r["error"] and "no file" in r["error"]
    finally:
        other.stop()


def _write(path, data):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "inputs, why",
    [
        ({"y": "1"}, "missing input 'x' (add takes x, y)"),
        ({"x": 1, "y": "1", "z": 2}, "no input 'z'"),
        ({"x": "one", "y": "1"}, "input 'x' must be an int"),
        ({"x": 1, "y": {"base64": "***"}}, "bad base64"),
        ({"x": 1, "y": {"url": "file:///etc/passwd"}}, "is not an http:// or https:// URL"),
        ({"x": 1, "y": {"url": "ftp://example.org/y"}}, "is not an http:// or https:// URL"),
        ({"x": 1, "y": [1, 2]}, "input 'y' is a file"),
    ],
)
def test_bad_inputs_are_refused_with_the_reason(host, inputs, why):
    status_body = request("POST", f"{host.url}/programs/add/jobs", {"inputs": inputs})
    assert status_body[0] == 400 and why in error_of(status_body), status_body
    with pytest.raises(MPI.Exception, match="must be an int"):
        Program(f"{host.url}/programs/add").spawn(x=1.5, y="1")


def test_bad_requests_get_clear_errors(host):
    u = host.url
    assert request("POST", f"{u}/programs/nope/jobs", {"inputs": {}})[0] == 404
    assert request("GET", f"{u}/programs/nope")[0] == 404
    assert request("POST", f"{u}/programs/add/jobs", b"{not json", {"content-type": "application/json"})[0] == 400
    assert request("POST", f"{u}/programs/add/jobs", b'{"inputs": {}}')[0] == 415  # not said to be JSON
    assert request("POST", f"{u}/programs/add/jobs", [1])[0] == 400
    assert request("GET", f"{u}/jobs/0123")[0] == 404
    assert request("GET", f"{u}/jobs/0123/results")[0] == 404
    assert request("DELETE", f"{u}/jobs/0123")[0] == 404
    assert request("GET", f"{u}/files/../../etc/passwd")[0] == 404
    assert request("GET", f"{u}/files/{'0' * 32}")[0] == 404
    assert request("PUT", f"{u}/programs/add")[0] == 405
    job = Program(f"{u}/programs/add").spawn(x=1, y="1")
    job.wait()
    assert "by=value or by=reference" in error_of(request("GET", f"{job.url}/results?by=mail"))
    assert request("GET", f"{job.url}/files/x")[0] == 404  # x is a value, not a file
    assert "wait= takes" in error_of(request("GET", f"{job.url}?wait=soon"))
    # refused on its announced length, before any of it is read
    conn = http.client.HTTPConnection(u.split("//")[1], timeout=30)
    conn.putrequest("POST", "/files")
    conn.putheader("Content-Length", str(65 << 20))
    conn.putheader("Authorization", f"Bearer {client_key()}")
    conn.endheaders()
    big = conn.getresponse()
    assert big.status == 413 and "at most" in json.loads(big.read())["error"]["message"]
    assert not [f for f in os.listdir(host.workdir / "files") if f.endswith(".part")]  # nothing half-kept


def test_bad_templates_are_refused_at_deploy(tmp_path):
    with pytest.raises(MPI.Exception, match="direction"):
        Server({}, programs=["p=echo [up:val:x:int]"])
    with pytest.raises(ValueError, match="NAME=TEMPLATE"):
        Server({}, programs=["echo [in:val:x:int]"])


def test_large_files_stream_through_a_real_server_in_bounded_memory(tmp_path):
    """256 MiB up, through a job and down again; the server's peak memory
    stays far below the file's size."""
    size = 256 << 20
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    srv = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--workdir",
            str(tmp_path / "work"),
            "--program",
            "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = srv.stdout.readline().split(" at ")[-1].strip()
        ref = upload(url, src)
        assert ref["size"] == size
        r = Program(f"{url}/programs/copy").call(src=File(ref["url"]))  # by value: too big to inline
        assert r["state"] == "done" and r["outputs"]["dst"]["size"] == size and "url" in r["outputs"]["dst"]
        assert Job(f"{url}/jobs/{r['id']}").download("dst", tmp_path / "back.bin") == size
        assert _sha(tmp_path / "back.bin") == _sha(src)
        with open(f"/proc/{srv.pid}/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) << 10
        assert peak < 128 << 20, f"server peak RSS {peak >> 20} MiB for a {size >> 20} MiB file"
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def test_the_command_line_calls_a_program(host, tmp_path):
    (tmp_path / "y.txt").write_text("41")
    py = [sys.executable, "-m", "mpiws"]
    p = subprocess.run(py + ["usage", f"{host.url}/programs/add"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "y:@FILE" in p.stdout and "out:result" in p.stdout
    p = subprocess.run(
        py + ["call", f"{host.url}/programs/add", "x=1", "y:@y.txt", "out:result=sum.txt"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outputs"]["result"] == 42 and (tmp_path / "sum.txt").read_text() == "42\n"
    p = subprocess.run(py + ["call", f"{host.url}/programs/fail"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and json.loads(p.stdout)["exit_code"] == 3
    p = subprocess.run(
        py + ["spawn", f"{host.url}/programs/sleep", "seconds=30"], capture_output=True, text=True, timeout=30
    )
    job = p.stdout.strip()
    p = subprocess.run(py + ["job", job, "--kill"], capture_output=True, text=True, timeout=30)
    assert json.loads(p.stdout)["state"] == "killed"
    p = subprocess.run(py + ["call", f"{host.url}/programs/add", "x"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "NAME=VALUE" in p.stderr
