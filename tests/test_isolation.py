"""Isolation between the instances of one endpoint (finding 6 of the
security review): each instance of ``mpiws serve`` runs in a process of its
own, so one that holds the GIL, crashes, runs out of memory or never ends
does not stop the others, and a cancel ends its code within seconds."""

import os
import time

import pytest

import services
from mpiws.keys import client_key
from mpiws.service.serve import Server
from test_security import Api

SERVICES = dict(
    services.ALL,
    hold_gil=services.hold_gil,
    crash=services.crash,
    allocate=services.allocate,
    hold=services.hold,
    origin=services.origin,
)


def sandboxes():
    """Pids of this process's instance processes (`mpiws.service.sandbox`):
    its children (the fork server, and interpreters started when it cannot
    fork) and the fork server's (spares started ahead of need included)."""
    parent = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"mpiws.service.sandbox" in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0"):
                parent[int(pid)] = parent_of(pid)
        except OSError:
            continue
    ours = {pid for pid, ppid in parent.items() if ppid == os.getpid()}
    return ours | {pid for pid, ppid in parent.items() if ppid in ours}


def parent_of(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def cancel(api, domain, token, pids):
    """Cancel rank 0 of ``domain``; the seconds until none of ``pids`` is left (at most 10)."""
    t0 = time.monotonic()
    status, body, _ = api.call("DELETE", f"/domains/{domain}/ranks/0", auth=token)
    assert status == 200 and body["state"] == "cancelled", body
    while sandboxes() & pids and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert not sandboxes() & pids, "the cancelled instance's process is gone"
    return time.monotonic() - t0


def fork_servers():
    """Pids of this process's fork servers (`mpiws.service.forks`, one per endpoint)."""
    found = set()
    for pid in sandboxes():
        try:
            if b"MPIWS_SANDBOX_FORKS=1" in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                found.add(pid)
        except OSError:
            continue
    return found


def new_fork_server(before):
    """The fork server started since ``before`` (the set of those there were)."""
    deadline = time.monotonic() + 30
    while not (fork_servers() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    new = fork_servers() - before
    assert len(new) == 1, "the endpoint started its fork server"
    return new.pop()


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def start(api, service, size=1, params=None):
    """Start every rank of a domain of ``service`` on the one endpoint; (domain, token)."""
    domain, token = None, None
    for rank in range(size):
        status, body, domain, token = api.run(service, domain=domain, token=token, rank=rank, size=size, params=params)
        assert status == 201, body
    return domain, token


def ended(api, domain, token, rank=0, wait=30):
    status, body = api.status(domain, rank, token, wait=wait)
    assert status == 200, body
    assert body["state"] in ("done", "failed", "cancelled"), body
    return body


@pytest.fixture(scope="module")
def server():
    s = Server(SERVICES, max_instance_memory=1 << 30, max_instance_time=20.0)
    yield s
    s.stop()


@pytest.fixture
def api(server):
    return Api(server.url, client_key())


def test_an_instance_holding_the_gil_starves_nobody_and_cancel_ends_it(api):
    hog, hog_token = start(api, "hold_gil")
    # Inside sum(), holding its interpreter's GIL; on a loaded machine its
    # CPU time grows slower than the clock, so wait for it (bounded).
    deadline = time.monotonic() + 15
    while True:
        time.sleep(0.25)
        busiest = max(sandboxes(), key=cpu_seconds)
        if cpu_seconds(busiest) > 0.5 or time.monotonic() > deadline:
            break
    assert cpu_seconds(busiest) > 0.5, "the hog computes in a process of its own"
    hog_pid = {busiest}
    # Another domain of two ranks starts, communicates and ends meanwhile.
    domain, token = start(api, "array_sum", size=2, params={"n": 1000})
    for rank in range(2):
        body = ended(api, domain, token, rank)
        assert body["state"] == "done" and body["result"] == 499500.0 + rank, body
    assert cancel(api, hog, hog_token, hog_pid) < 5, "within the grace of SIGTERM then SIGKILL"


def test_a_crashed_instance_is_reported_and_its_peer_fails_instead_of_hanging(api):
    domain, token = start(api, "crash", size=2)
    dead = ended(api, domain, token, rank=1)
    assert dead["state"] == "failed" and dead["error"]["name"] == "InstanceDied", dead
    assert "signal 6" in dead["error"]["message"]
    waiting = ended(api, domain, token, rank=0)
    assert waiting["state"] == "failed" and "PROC_FAILED" in waiting["error"]["name"], waiting
    # The endpoint goes on.
    d2, t2 = start(api, "array_sum", params={"n": 10})
    assert ended(api, d2, t2)["result"] == 45.0


def test_memory_is_bounded_per_instance(api):
    domain, token = start(api, "allocate", params={"bytes": 2 << 30})
    body = ended(api, domain, token)
    assert body["state"] == "failed" and body["error"]["name"] == "MemoryError", body
    domain, token = start(api, "allocate", params={"bytes": 64 << 20})
    assert ended(api, domain, token)["result"] == 64 << 20


def test_one_key_cannot_hold_more_memory_than_its_share():
    """Each instance within its address-space bound, one key's instances
    together could still take the machine (issue 28): past the key's share
    of resident memory, its largest instance is ended, and says why."""
    s = Server(SERVICES, max_instances_memory_per_key=250 << 20)
    try:
        api = Api(s.url, client_key())
        runs = [start(api, "hold", params={"bytes": 160 << 20, "seconds": 4}) for _ in range(2)]
        bodies = [ended(api, domain, token) for domain, token in runs]
        over = [b for b in bodies if b["state"] == "failed" and b["error"]["name"] == "MemoryLimitExceeded"]
        assert len(over) == 1, bodies
        assert "--max-instances-memory-per-key" in over[0]["error"]["message"], over
        assert [b["state"] for b in bodies if b not in over] == ["done"], bodies
        # Within its share, the key runs as before.
        domain, token = start(api, "hold", params={"bytes": 16 << 20, "seconds": 0})
        assert ended(api, domain, token)["result"] == 16 << 20
    finally:
        s.stop()


def test_time_is_bounded_per_instance(tmp_path):
    s = Server(SERVICES, max_instance_time=1.0)
    try:
        api = Api(s.url, client_key())
        t0 = time.monotonic()
        domain, token = start(api, "block")
        body = ended(api, domain, token)
        assert body["state"] == "failed" and body["error"]["name"] == "TimeLimitExceeded", body
        assert "--max-instance-time" in body["error"]["message"]
        assert time.monotonic() - t0 < 10
    finally:
        s.stop()


def test_a_service_another_process_cannot_import_is_refused_at_start():
    with pytest.raises(ValueError, match="module-level function"):
        Server({"f": lambda comm, params: None})
    Server({"f": lambda comm, params: None}, isolation="thread").stop()  # on threads it may be anything


def test_services_of_a_sandboxed_endpoint_communicate_as_before(api):
    # exchange: two ranks swap objects, over streams handed to the children.
    domain, token = start(api, "exchange", size=3, params={"marker": "m"})
    for rank in range(3):
        body = ended(api, domain, token, rank)
        assert body["state"] == "done", body
        assert body["result"] == [["m", r] for r in range(3) if r != rank]


def test_a_burst_of_instances_is_forked_from_the_warm_fork_server():
    """With no spare ready, 8 instances at once are forked from the one
    server that imported the services: each in its own process, with random
    generators of its own (numpy's is not reseeded by a fork by itself)."""
    before = fork_servers()
    s = Server(SERVICES, spare_instances=0)
    try:
        api = Api(s.url, client_key())
        server = new_fork_server(before)
        domain, token = start(api, "origin", size=8)
        bodies = [ended(api, domain, token, rank) for rank in range(8)]
        assert all(b["state"] == "done" for b in bodies), bodies
        got = [b["result"] for b in bodies]
        assert {g["parent"] for g in got} == {server}, got
        assert len({g["pid"] for g in got}) == 8
        assert len({g["numpy"] for g in got}) == 8, "numpy's generator reseeded in each child"
        assert len({g["random"] for g in got}) == 8
    finally:
        s.stop()
    deadline = time.monotonic() + 15  # its children linger 5 s for their peers' questions
    while server in sandboxes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server not in sandboxes(), "the fork server ends with its endpoint and its last child"


def test_instances_start_and_end_when_the_fork_server_is_gone():
    """A fork server that dies is given up: an instance it forked is still
    followed to its end (and cancelled), new instances start as new
    interpreters."""
    before = fork_servers()
    s = Server(SERVICES, spare_instances=0)
    try:
        api = Api(s.url, client_key())
        server = new_fork_server(before)
        domain, token = start(api, "block")
        deadline = time.monotonic() + 30
        forked = set()
        while not forked and time.monotonic() < deadline:
            forked = {pid for pid in sandboxes() if parent_of(pid) == server}
            time.sleep(0.05)
        assert forked, "the blocked instance runs in a forked process"
        os.kill(server, 9)
        cancel(api, domain, token, forked)  # the orphan is ended by its group
        d2, t2 = start(api, "origin", size=2)
        got = [ended(api, d2, t2, rank) for rank in range(2)]
        assert all(b["state"] == "done" for b in got), got
        assert {b["result"]["parent"] for b in got} == {os.getpid()}, "started as new interpreters"
    finally:
        s.stop()
