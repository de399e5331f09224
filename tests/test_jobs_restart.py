"""Jobs survive a restart. An endpoint with `--workdir` is killed (SIGKILL:
no chance to tidy up) with jobs staging, running and ended, and started
again on the same work directory: every job is answered as it should be
(ended ones as they ended, with their files; running ones adopted and
watched to their end, or `lost` with when they were last seen), uploads
and expiry too; a kill in the middle of an upload, or of a job's output
write, leaves no corrupt record and no half file under a name."""

import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mpiws.keys import client_key

from conftest import ROOT
from test_jobs import FAIL, script


# Writes N numbered lines to its output, a line every 50 ms.
SLOW_WRITE = '#!/bin/sh\ni=0\nwhile [ $i -lt $1 ]; do echo "line $i" >> out; i=$((i + 1)); sleep 0.05; done\n'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Endpoint:
    """`mpiws serve` on a fixed port and work directory, started (again) at will."""

    def __init__(self, tmp_path, extra=()):
        self.workdir = tmp_path / "work"
        self.port = free_port()
        self.args = [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--port",
            str(self.port),
            "--workdir",
            str(self.workdir),
            "--fetch-allow",
            "127.0.0.1",
            "--program",
            f"add={ROOT / 'examples' / 'add.sh'} [in:val:x:int] [in:file:y:int] [out:file:result:int]",
            "--program",
            f"fail={script(tmp_path, 'fail.sh', FAIL)}",
            "--program",
            "sleep=sleep [in:val:seconds:float]",
            "--program",
            f"write={script(tmp_path, 'write.sh', SLOW_WRITE)} [in:val:n:int] [out:file:out:string]",
            *extra,
        ]
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert " at " in line, line + self.proc.stderr.read()
        self.url = line.split(" at ")[-1].strip()
        return self

    def crash(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def ask(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "authorization": f"Bearer {client_key()}",
                **({"content-type": "application/json"} if isinstance(body, dict) else {}),
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def json(self, method, path, body=None):
        status, data = self.ask(method, path, body)
        return status, json.loads(data) if data else None

    def spawn(self, program, **inputs):
        status, job = self.json("POST", f"/programs/{program}/jobs", {"inputs": inputs})
        assert status == 201, job
        return job["id"]

    def status(self, job, wait=None):
        return self.json("GET", f"/jobs/{job}" + (f"?wait={wait}" if wait else ""))[1]

    def wait_for(self, job, state, timeout=20):
        deadline = time.monotonic() + timeout
        while (s := self.status(job))["state"] != state:
            assert time.monotonic() < deadline, s
            time.sleep(0.05)
        return s


@pytest.fixture
def endpoint(tmp_path):
    ep = Endpoint(tmp_path)
    yield ep
    ep.stop()


class SlowInput(ThreadingHTTPServer):
    """Serves a URL input that never finishes arriving: a job pulling it stays staging."""

    def __init__(self):
        release = self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("content-length", "100")
                self.end_headers()
                self.wfile.write(b"1")
                self.wfile.flush()
                release.wait(60)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self):
        self.release.set()
        self.shutdown()


def group_running_in(directory):
    """The process group of the job process whose working directory is `directory`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(directory):
                return os.getpgid(int(pid))
        except OSError:
            continue
    return None


def group_members_running(pgid):
    """The processes of group `pgid` that have not ended (zombies excluded)."""
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            running.append(int(pid))
    return running


def test_a_crashed_endpoint_answers_for_every_job_when_started_again(endpoint, tmp_path):
    ep = endpoint.start()
    slow = SlowInput()
    try:
        (tmp_path / "y.txt").write_text("41")
        added = ep.json("POST", "/programs/add/call", {"inputs": {"x": 1, "y": 41}})[1]
        assert (added["state"], added["outputs"]["result"]) == ("done", 42)
        failed = ep.json("POST", "/programs/fail/call", {"inputs": {}})[1]
        assert (failed["state"], failed["exit_code"]) == ("failed", 3)
        status, up = ep.json("POST", "/files", b"kept across the restart")
        assert status == 201
        upload_id = up["url"].rsplit("/", 1)[-1]
        short = ep.spawn("sleep", seconds=1.5)  # ends while the endpoint is down
        long = ep.spawn("sleep", seconds=8)  # still runs after the restart: adopted
        killed_later = ep.spawn("sleep", seconds=60)  # adopted, then killed through the restarted endpoint
        vanished = ep.spawn("sleep", seconds=60)  # killed by someone else while the endpoint is down
        staging = ep.spawn("add", x=1, y={"url": f"http://127.0.0.1:{slow.server_port}/y"})
        for job in (short, long, killed_later, vanished):
            ep.wait_for(job, "running")
        assert ep.status(staging)["state"] == "staging"
        before = {j: ep.status(j) for j in (added["id"], failed["id"])}
        time.sleep(0.3)

        ep.crash()
        gone = group_running_in(ep.workdir / "jobs" / vanished)
        assert gone, "the job's processes outlive the endpoint (a group of their own)"
        os.killpg(gone, signal.SIGKILL)
        time.sleep(2)  # `short` ends meanwhile
        crashed_at = time.time()
        ep.start()

        # Ended jobs: as they ended, with their results and files.
        for job, was in before.items():
            now = ep.status(job)
            assert {k: now[k] for k in ("state", "exit_code", "error", "started", "ended")} == {
                k: was[k] for k in ("state", "exit_code", "error", "started", "ended")
            }
        results = ep.json("GET", f"/jobs/{added['id']}/results")[1]
        assert results["outputs"]["result"] == 42
        assert ep.ask("GET", f"/jobs/{added['id']}/files/result") == (200, b"42\n")
        # The upload, by its URL.
        assert ep.ask("GET", f"/files/{upload_id}") == (200, b"kept across the restart")
        # Ended while the endpoint was down: its exit status was kept by its wrapper.
        s = ep.status(short)
        assert (s["state"], s["exit_code"]) == ("done", 0), s
        # Still running: adopted, and watched to its end.
        assert ep.status(long)["state"] == "running"
        s = ep.status(long, wait=30)
        assert (s["state"], s["exit_code"]) == ("done", 0), s
        # An adopted job is killed as any other: its whole group ends.
        pgid = group_running_in(ep.workdir / "jobs" / killed_later)
        assert pgid
        assert ep.json("DELETE", f"/jobs/{killed_later}")[1]["state"] == "killed"
        # Ended: none of its processes runs. (Its zombies are no child of the
        # endpoint's: they stay in the group until the process that adopted
        # them, PID 1 or a subreaper, reaps them; SIGKILL takes a moment.)
        deadline = time.monotonic() + 5
        while group_members_running(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_members_running(pgid)
        # Gone without a word, or never started: lost, saying when it was last seen.
        for job, why in ((vanished, "without an exit status"), (staging, "never started")):
            s = ep.status(job)
            assert s["state"] == "lost" and why in s["error"], s
            assert s["started"] <= s["last_seen"] <= crashed_at, s
        # Every job is still its key's, and the endpoint takes new ones.
        status, listed = ep.json("GET", "/jobs")
        assert status == 200
        assert {j["id"] for j in listed} >= {added["id"], failed["id"], short, long, vanished, staging}
        again = ep.json("POST", "/programs/add/call", {"inputs": {"x": 2, "y": 40}})[1]
        assert again["outputs"]["result"] == 42
    finally:
        slow.stop()


def test_a_kill_in_the_middle_of_an_upload_or_an_output_write_loses_nothing_kept(endpoint):
    ep = endpoint.start()
    writer = ep.spawn("write", n=60)  # about 3 s of writing
    ep.wait_for(writer, "running")
    # An upload cut off by the crash: announced whole, half sent.
    conn = http.client.HTTPConnection("127.0.0.1", ep.port, timeout=10)
    conn.putrequest("POST", "/files")
    conn.putheader("authorization", f"Bearer {client_key()}")
    conn.putheader("content-length", str(8 << 20))
    conn.endheaders()
    conn.send(os.urandom(1 << 20))
    time.sleep(0.5)
    ep.crash()
    with pytest.raises(OSError):  # the client is told: its upload did not arrive
        conn.send(os.urandom(4 << 20))
        conn.send(os.urandom(4 << 20))
        conn.getresponse()
    conn.close()
    ledger = ep.workdir / "jobs.sqlite"
    with sqlite3.connect(ledger) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert oct(ledger.stat().st_mode & 0o777) == oct(0o600)
    ep.start()
    # No half upload under any name, and none recorded.
    assert not list((ep.workdir / "files").iterdir())
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT count(*) FROM uploads").fetchone() == (0,)
    # The job went on writing while the endpoint was down: its file is whole.
    s = ep.status(writer, wait=30)
    assert (s["state"], s["exit_code"]) == ("done", 0), s
    status, out = ep.ask("GET", f"/jobs/{writer}/files/out")
    assert status == 200 and out.decode().splitlines() == [f"line {i}" for i in range(60)]


def test_expiry_counts_from_before_the_restart(tmp_path):
    ep = Endpoint(tmp_path, extra=["--job-ttl", "3"]).start()
    try:
        job = ep.json("POST", "/programs/add/call", {"inputs": {"x": 1, "y": 1}})[1]["id"]
        up = ep.json("POST", "/files", b"short-lived")[1]
        ep.crash()
        ep.start()
        assert ep.status(job)["state"] == "done"
        deadline = time.monotonic() + 10
        while ep.ask("GET", f"/jobs/{job}")[0] != 404:
            assert time.monotonic() < deadline, "an ended job kept past its time to live"
            time.sleep(0.2)
        assert not (ep.workdir / "jobs" / job).exists()
        assert ep.ask("GET", "/files/" + up["url"].rsplit("/", 1)[-1])[0] == 404
    finally:
        ep.stop()
