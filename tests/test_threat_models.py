"""The threat models of the surfaces issue 28 had not attacked yet
(docs/security.md, "Threat models of the remaining surfaces"): the
workflow runner's local endpoint, futures workers under ``--pickle full``,
the rendezvous beyond registration, one-sided traffic from a malicious
peer, the sandbox hand-over wire. One test per promise, each an attack on
real endpoints and processes."""

import http.client
import json
import os
import secrets
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import psutil
import pytest

from conftest import ROOT, mpiws_run, mpiws_serve

from mpiws import MPI, _core, binding

KEY = secrets.token_hex(16)


def call(url, method, path, key=None, body=None, headers=None, timeout=30):
    """(status, decoded JSON or text) of one request."""
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = dict(headers or {})
    if key is not None:
        h["authorization"] = f"Bearer {key}"
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        h.setdefault("content-type", "application/json")
    try:
        c.request(method, path, body, h)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode(errors="replace")
    finally:
        c.close()


def keys_file(d, text):
    p = d / "keys"
    p.write_text(text)
    p.chmod(0o600)
    return p


# ---- the workflow runner's local endpoint ---------------------------------------------------


@pytest.fixture
def workflow_run(tmp_path):
    """A run of examples/workflows/squares.yml made as `mpiws workflow run --key KEY` makes it,
    its local endpoint up (nothing run yet)."""
    from mpiws.workflow.manager import Run
    from mpiws.workflow.spec import load

    wf = load(str(ROOT / "examples" / "workflows" / "squares.yml"))
    r = Run(wf, {"xs": [1, 2], "offset": 0}, "direct", key=KEY, progress=False)
    yield r
    r.close()


def test_the_workflow_local_endpoint_takes_the_runs_key_only_on_loopback(workflow_run):
    url = workflow_run.local.url
    assert urlparse(url).hostname == "127.0.0.1", url
    binding_ = {
        "domain": "wf-attack",
        "rank": 0,
        "endpoints": [url],
        "token": secrets.token_urlsafe(24),
        "service": "steps.square",
    }
    # A local process without the key, or with another (the user's own key file's, say): nothing starts.
    for key in (None, secrets.token_hex(16)):
        status, body = call(url, "POST", "/run", key, binding_)
        assert status == 401, (status, body)
        assert call(url, "GET", "/jobs", key)[0] == 401
    status, listing = call(url, "GET", "/")
    assert not listing.get("domains") and "jobs" not in listing, listing
    # The run's key is the way in (the check that the refusals above are about the key).
    assert call(url, "GET", "/jobs", KEY)[0] == 200


def test_the_workflow_local_endpoints_key_file_is_private_and_removed(workflow_run):
    (keys,) = Path(workflow_run.scratch).glob("keys-*")
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600 and stat.S_IMODE(keys.parent.stat().st_mode) == 0o700
    assert keys.read_text().strip() == KEY
    workflow_run.close()
    assert not keys.exists() and not keys.parent.exists()


def test_the_workflow_local_endpoint_is_gone_when_the_run_ends(workflow_run):
    url = workflow_run.local.url
    workflow_run.close()
    b = {"domain": "late", "rank": 0, "endpoints": [url], "token": secrets.token_urlsafe(24), "service": "steps.square"}
    try:
        status, _ = call(url, "POST", "/run", KEY, b, timeout=5)
    except OSError:
        return
    assert status != 201, "the run's key still starts the workflow's services after the run"


def test_the_workflow_managers_endpoint_accepts_no_key(workflow_run):
    from mpiws.workflow.domain import StepDomain

    # The manager (rank 0) is an instance on this process's own endpoint: reached with its domain's token only.
    dom = StepDomain([workflow_run.local.url], key=KEY)
    try:
        url = dom.urls[0]
        b = {"domain": "wf-x", "rank": 0, "endpoints": [url], "token": secrets.token_urlsafe(24), "service": "x"}
        for key in (None, KEY):
            assert call(url, "POST", "/run", key, b)[0] == 401
        path = f"/domains/{dom.instance.domain}/ranks/0"
        assert call(url, "GET", path, KEY)[0] in (401, 403)
    finally:
        dom.close()


# ---- futures workers under --pickle full ------------------------------------------------------


def test_a_full_pickle_worker_starts_only_for_a_key_with_run(tmp_path):
    run_key, other_run_key, jobs_key = secrets.token_hex(16), secrets.token_hex(16), secrets.token_hex(16)
    keys = keys_file(tmp_path, f"{run_key} run\n{other_run_key} run\n{jobs_key} jobs\n")
    proc, url = mpiws_serve(
        ["--keys", str(keys), "--service", "futures=mpiws.futures.endpoints:worker", "--pickle", "full"]
    )
    try:
        token = secrets.token_urlsafe(24)
        b = {"domain": "futures-x", "rank": 1, "endpoints": ["http://127.0.0.1:9", url], "token": token}
        b["service"] = "futures"
        assert call(url, "POST", "/run", None, b)[0] == 401
        assert call(url, "POST", "/run", secrets.token_hex(16), b)[0] == 401
        status, body = call(url, "POST", "/run", jobs_key, b)
        assert status == 403 and "'run'" in body["error"]["message"], body
        # Nothing started for them: the domain is still free for the key with `run`.
        status, body = call(url, "POST", "/run", run_key, b)
        assert status == 201, body
        # Another key cannot take over that worker's domain (its tasks, its code).
        other = dict(b, token=secrets.token_urlsafe(24))
        status, body = call(url, "POST", "/run", other_run_key, other)
        assert status == 409 and "another key" in body["error"]["message"], body
        assert call(url, "DELETE", "/domains/futures-x/ranks/1", secrets.token_urlsafe(24))[0] in (401, 403)
        assert call(url, "DELETE", "/domains/futures-x/ranks/1", token)[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


FUTURES_PROGRAM = """
import os, sys, time
from mpiws.futures import MPIPoolExecutor, BrokenExecutor

def forever():
    time.sleep(3600)

def die():
    os.kill(os.getpid(), 9)

def square(x):
    return x * x

if __name__ == "__main__":
    url = sys.argv[1]
    t = time.monotonic()
    with MPIPoolExecutor(endpoints=[url]) as ex:
        e = ex.submit(die).exception(timeout=60)
        print("died:", type(e).__name__, flush=True)
    with MPIPoolExecutor(endpoints=[url]) as ex:
        e = ex.submit(forever).exception(timeout=60)
        print("forever:", type(e).__name__, round(time.monotonic() - t), flush=True)
    with MPIPoolExecutor(endpoints=[url]) as ex:
        print("after:", list(ex.map(square, range(5))), flush=True)
"""


def test_a_full_pickle_task_can_neither_take_down_nor_hold_the_endpoint(tmp_path):
    env = dict(os.environ, MPIWS_KEY_FILE=str(tmp_path / "key"), MPIWS_FAILURE_TIMEOUT="2")
    env.pop("MPIWS_KEY", None)
    args = ["--service", "futures=mpiws.futures.endpoints:worker", "--pickle", "full", "--max-instance-time", "4"]
    proc, url = mpiws_serve(args, env=env)
    try:
        prog = tmp_path / "farm.py"
        prog.write_text(FUTURES_PROGRAM)
        out = subprocess.run(
            [sys.executable, str(prog), url], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        info = out.stdout + out.stderr[-3000:]
        lost = ("BrokenExecutor", "WorkerLost")
        died = [line for line in out.stdout.splitlines() if line.startswith("died: ")]
        forever = [line for line in out.stdout.splitlines() if line.startswith("forever: ")]
        assert died and died[0].split()[1] in lost, info
        assert forever and forever[0].split()[1] in lost, info
        assert "after: [0, 1, 4, 9, 16]" in out.stdout, info
        assert proc.poll() is None, "the endpoint went down"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- the rendezvous beyond registration -------------------------------------------------------


@pytest.fixture
def rendezvous():
    ep = _core.Endpoint(keys=KEY)
    ep.open_rendezvous(3)
    return ep


def register(ep, key, rank, url, size=3):
    return call(ep.url, "POST", "/rendezvous", key, {"rank": rank, "size": size, "url": url})


def test_the_rendezvous_answers_nothing_without_the_key(rendezvous):
    for key in (None, secrets.token_hex(16)):
        assert register(rendezvous, key, 0, "http://127.0.0.1:7001")[0] == 401
        assert call(rendezvous.url, "GET", "/rendezvous", key)[0] == 401
    status, state = call(rendezvous.url, "GET", "/rendezvous", KEY)
    assert status == 200 and state == {"size": 3, "registered": 0, "closed": False}, state


def test_a_registered_rank_cannot_be_replaced_or_read(rendezvous):
    assert register(rendezvous, KEY, 1, "http://10.0.0.1:7001")[0] == 200
    # Its place cannot be taken by a second URL, before the domain starts or after.
    status, body = register(rendezvous, KEY, 1, "http://10.6.6.6:7001")
    assert status == 409 and "already registered" in body["error"]["message"], body
    # No other rank's address is ever shown: the state is counts only.
    status, state = call(rendezvous.url, "GET", "/rendezvous", KEY)
    assert state == {"size": 3, "registered": 1, "closed": False} and "10.0.0.1" not in json.dumps(state)
    # Nor a rank outside the domain, a size that differs, a URL that is not an origin, a body beyond 4 KiB.
    assert register(rendezvous, KEY, 3, "http://10.0.0.3:7001")[0] == 400
    assert register(rendezvous, KEY, 2, "http://10.0.0.3:7001", size=4)[0] == 409
    assert register(rendezvous, KEY, 2, "http://10.0.0.3:7001/internal/reset?x=")[0] == 400
    status, _ = call(
        rendezvous.url, "POST", "/rendezvous", KEY, {"rank": 2, "size": 3, "url": "http://a:1", "pad": "x" * 5000}
    )
    assert status == 413
    with pytest.raises(TimeoutError, match=r"\[0, 2\]"):
        rendezvous.rendezvous_wait(0.2)
    # A retry of the same registration is harmless.
    assert register(rendezvous, KEY, 1, "http://10.0.0.1:7001")[0] == 200
    assert register(rendezvous, KEY, 0, "http://10.0.0.0:7001")[0] == 200
    assert register(rendezvous, KEY, 2, "http://10.0.0.2:7001")[0] == 200
    assert rendezvous.rendezvous_wait(5) == ["http://10.0.0.0:7001", "http://10.0.0.1:7001", "http://10.0.0.2:7001"]


def test_a_rank_that_never_comes_holds_the_rendezvous_for_its_timeout_only(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = dict(os.environ, MPIWS_KEY=KEY, MPIWS_RENDEZVOUS_TIMEOUT="3", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "mpiws", "run", "--rendezvous", url, "--size", "2", "--rank", "0"]
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    t = time.monotonic()
    p = subprocess.run([*cmd, str(prog)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "ranks [1] did not register" in p.stderr, p.stderr
    assert time.monotonic() - t < 30, "held past MPIWS_RENDEZVOUS_TIMEOUT"


# ---- one-sided traffic from a malicious peer ---------------------------------------------------

RMA_TAG = 2**31 - 2
PUT, GET, ACC, CAS, LOCK, UNLOCK = 1, 2, 3, 5, 6, 7


def frame(kind, disp=0, length=0, data=b"", op=0, dtype=b"", ident=1):
    return struct.pack("<BBHiQQQ8s", kind, op, 0, 0, ident, disp, length, dtype) + data


class Target:
    """Rank 0 of a domain of two on an endpoint of this process, with a
    64-byte window over COMM_SELF between two guard zones; rank 1 is the
    attacker (the domain token's holder, at an address where nothing answers)."""

    def __init__(self):
        self.ep = _core.Endpoint()
        self.domain, self.token = "rma-" + secrets.token_hex(4), secrets.token_urlsafe(24)
        self.instance = self.ep.create_instance(self.domain, 0, [self.ep.url, "http://127.0.0.1:9"], self.token)
        self.instance.set_running()
        self.all = np.full(96, 0xAA, dtype=np.uint8)
        self.mem = self.all[16:80]
        self.mem[:] = 0
        with binding.bound_to(self.instance):
            self.win = MPI.Win.Create(self.mem, 1, comm=MPI.COMM_SELF)
        self.key = self.win._state().core.comm.context | (1 << 63)

    def send(self, body, key=None):
        h = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/octet-stream",
            "mpiws-source": "1",
            "mpiws-context": str(self.key if key is None else key),
            "mpiws-tag": str(RMA_TAG),
        }
        u = urlparse(self.ep.url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            c.request("POST", f"/domains/{self.domain}/ranks/0/messages", body, h)
            r = c.getresponse()
            r.read()
            return r.status
        finally:
            c.close()

    def guards_intact(self):
        return bool((self.all[:16] == 0xAA).all() and (self.all[80:] == 0xAA).all())


def test_rma_frames_from_a_peer_reach_only_the_window():
    t = Target()
    # The frames do reach the window: an in-range put lands.
    assert t.send(frame(PUT, 8, 4, b"\x01\x02\x03\x04")) == 204
    assert bytes(t.mem[8:12]) == b"\x01\x02\x03\x04"
    before = bytes(t.mem)
    attacks = [
        frame(PUT, 62, 4, b"\xff" * 4),  # past the end
        frame(PUT, 2**64 - 1, 2, b"\xff" * 2),  # displacement + length wraps round
        frame(PUT, 8, 2**64 - 1, b"\xff" * 4),  # a length that overflows
        frame(PUT, 2**63, 4, b"\xff" * 4),
        frame(PUT, 0, 4, b"\xff" * 8),  # more data than the length says
        frame(PUT, 0, 8, b"\xff" * 4),  # less
        frame(GET, 0, 2**40),  # a read far larger than the window: refused, not allocated
        frame(ACC, 0, 3, b"\xff" * 3, op=0, dtype=b"f8"),  # 3 bytes of 8-byte elements
        frame(ACC, 0, 8, b"\xff" * 8, op=99, dtype=b"f8"),  # no such operation
        frame(ACC, 0, 8, b"\xff" * 8, op=0, dtype=b"evil"),  # no such element type
        frame(CAS, 0, 4, b"\xff" * 4),  # a compare-and-swap without its compare value
        frame(UNLOCK),  # a lock it does not hold
        frame(42, 0, 4, b"\xff" * 4),  # no such operation kind
        b"\x01" * 10,  # shorter than a header
        b"",
    ]
    for body in attacks:
        assert t.send(body) == 204
    # A window that does not exist, or was freed.
    assert t.send(frame(PUT, 0, 4, b"\xff" * 4), key=t.key + 2) == 204
    assert bytes(t.mem) == before and t.guards_intact()
    # The target's own use goes on.
    with binding.bound_to(t.instance):
        t.win.Lock(0)
        out = np.zeros(4, dtype=np.uint8)
        t.win.Get(out, 0, 8)
        t.win.Unlock(0)
        assert bytes(out) == b"\x01\x02\x03\x04"
        t.win.Free()
    assert t.send(frame(PUT, 0, 4, b"\xff" * 4)) == 204
    assert bytes(t.mem) == before and t.guards_intact()


def test_a_lock_held_by_a_gone_peer_is_let_go_within_the_failure_timeout():
    t = Target()
    # The attacker takes the exclusive lock and is gone (nothing answers at its address).
    assert t.send(frame(LOCK, op=1)) == 204
    got = {}

    def lock():
        with binding.bound_to(t.instance):
            t0 = time.monotonic()
            try:
                t.win.Lock(0)
                got["after"] = time.monotonic() - t0
                t.win.Unlock(0)
            except Exception as e:  # noqa: BLE001 - reported below
                got["error"] = e

    th = threading.Thread(target=lock, daemon=True)
    th.start()
    th.join(20)
    assert "after" in got, f"the target's own Lock still waits for the gone holder ({got})"
    assert got["after"] < 15, got


DEAD_HOLDER = """
import os, time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
r = comm.Get_rank()
win = MPI.Win.Create(np.zeros(4, dtype="i4"), comm=comm)
if r == 1:
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
comm.Barrier()
if r == 1:
    os._exit(3)  # dies holding rank 0's lock
if r == 2:
    time.sleep(0.5)
    t = time.monotonic()
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    print(f"GRANTED after {time.monotonic() - t:.1f} s", flush=True)
    win.Unlock(0)
    comm.send("done", dest=0)
if r == 0:
    print("OK", comm.recv(source=2), flush=True)
os._exit(0)
"""

DEAD_TARGET = """
import os, sys, time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
r = comm.Get_rank()
win = MPI.Win.Create(np.zeros(4, dtype="i4"), comm=comm)
if r == 2:
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
comm.Barrier()
if r == 0:
    time.sleep(1.0)
    os._exit(3)  # dies while rank 1 waits for its lock, then for its answer
if r == 1:
    for what in ("lock", "get"):
        t = time.monotonic()
        try:
            if what == "lock":
                win.Lock(0, MPI.LOCK_SHARED)
            else:
                out = np.zeros(4, dtype="i4")
                win.Get(out, 0)
                win.Flush(0)
            print(f"NO ERROR {what}", flush=True)
        except MPI.Exception as e:
            print(f"ERROR {what} after {time.monotonic() - t:.1f} s: {e.Get_error_class() == MPI.ERR_PROC_FAILED}", flush=True)
if r == 2:
    time.sleep(4.0)  # holds the lock while rank 1 waits, past rank 0's end (the launcher tells the others at once)
os._exit(0)
"""


PSCW_DEAD_ORIGIN = """
import os, time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
r = comm.Get_rank()
win = MPI.Win.Create(np.zeros(4, dtype="i4"), comm=comm)
if r == 1:
    os._exit(3)  # dies before its access epoch
if r == 0:
    win.Post(comm.Get_group().Incl([1]))
    try:
        win.Wait()
        print("NO ERROR", flush=True)
    except MPI.Exception as e:
        print("ERROR", e.Get_error_class() == MPI.ERR_PROC_FAILED, flush=True)
os._exit(0)
"""


def test_a_start_or_wait_on_a_gone_peer_fails(tmp_path):
    try:
        p = mpiws_run(2, PSCW_DEAD_ORIGIN, tmp_path, keep_going=True, timeout=60, env={"MPIWS_FAILURE_TIMEOUT": "2"})
    except subprocess.TimeoutExpired:
        pytest.fail("Win.Wait still waits for a rank that is gone")
    assert "ERROR True" in p.stdout, p.stdout + p.stderr[-3000:]


def test_a_rank_that_dies_holding_a_lock_does_not_hold_it_for_ever(tmp_path):
    p = mpiws_run(3, DEAD_HOLDER, tmp_path, keep_going=True, timeout=60, env={"MPIWS_FAILURE_TIMEOUT": "2"})
    assert "GRANTED after" in p.stdout and "OK done" in p.stdout, p.stdout + p.stderr[-3000:]


def test_an_origin_whose_target_dies_gets_an_error_not_a_hang(tmp_path):
    p = mpiws_run(3, DEAD_TARGET, tmp_path, keep_going=True, timeout=60, env={"MPIWS_FAILURE_TIMEOUT": "2"})
    lines = {line.split("] ", 1)[-1].split(" after")[0]: line for line in p.stdout.splitlines()}
    info = p.stdout + p.stderr[-3000:]
    assert lines.get("ERROR lock", "").endswith(": True"), info  # within the failure timeout
    assert lines.get("ERROR get", "").endswith("after 0.0 s: True"), info  # known gone: at once


# ---- the sandbox hand-over wire ---------------------------------------------------------------

FDS_SERVICE = """
import os

def fds(comm, params):
    def sockets():
        out = {}
        for fd in (3, 4):
            try:
                link = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            inode = link.removeprefix("socket:[").removesuffix("]")
            with open("/proc/net/unix") as f:
                paths = [line.split()[7:] for line in f if line.split()[6:7] == [inode]]
            out[fd] = {"link": link, "path": paths[0] if paths else None}
        return out

    # What a program the service runs (os.system, as any shell-out) inherits.
    os.system(f"ls /proc/$$/fd > {params['out']}")
    with open(params["out"]) as f:
        inherited = sorted(int(x) for x in f.read().split())
    return {"mine": sockets(), "inherited": inherited}
"""


def test_the_hand_over_wire_is_the_instance_process_own(tmp_path):
    (tmp_path / "fdsvc.py").write_text(FDS_SERVICE)
    keys = keys_file(tmp_path, KEY + "\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc, url = mpiws_serve(["--keys", str(keys), "--service", "fds=fdsvc:fds", "--spare-instances", "1"], env=env)
    try:
        b = {"domain": "fds", "rank": 0, "endpoints": [url], "token": secrets.token_urlsafe(24), "service": "fds"}
        b["params"] = {"out": str(tmp_path / "inherited")}
        assert call(url, "POST", "/run", KEY, b)[0] == 201
        status, s = call(url, "GET", "/domains/fds/ranks/0?wait=30", b["token"])
        assert status == 200 and s["state"] == "done", s
        mine, inherited = s["result"]["mine"], s["result"]["inherited"]
        # The instance's process has both ends, unnamed: no path another process could connect to.
        assert set(mine) == {"3", "4"} and all(v["link"].startswith("socket:") for v in mine.values()), mine
        assert all(not v["path"] for v in mine.values()), mine
        # A program it runs has neither.
        assert 3 not in inherited and 4 not in inherited, inherited
        # The instance process's own endpoint (a spare's, here) takes no key, not even the endpoint's.
        children = psutil.Process(proc.pid).children(recursive=True)
        ports = [c.laddr.port for ch in children for c in ch.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        assert ports, "no instance process listens"
        for port in ports:
            assert call(f"http://127.0.0.1:{port}", "POST", "/run", KEY, b)[0] == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)
