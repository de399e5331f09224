"""The launcher: output, exit status, failures that stop the domain, and
domains started on running endpoints."""

import json
import os
import subprocess
import sys
import threading
import time

from conftest import ROOT, assert_ok


def test_prefixed_output_and_success(run):
    p = run(
        3,
        """
from mpiws import MPI
print("line from", MPI.COMM_WORLD.Get_rank())
""",
    )
    assert_ok(p)
    for r in range(3):
        assert f"[{r}] line from {r}" in p.stdout


def test_arguments_reach_the_program(run):
    p = run(
        2,
        """
import sys
print("OK", sys.argv[1:])
""",
        args=("a", "--b", "3"),
    )
    assert_ok(p, 2)
    assert "['a', '--b', '3']" in p.stdout


def test_a_raising_rank_stops_the_domain(run):
    t = time.monotonic()
    p = run(
        4,
        """
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.Get_rank() == 2:
    raise ValueError("boom on two")
comm.recv(source=MPI.ANY_SOURCE, tag=1)   # would wait for ever
""",
        timeout=60,
    )
    assert p.returncode != 0
    assert "rank 2 failed first" in p.stderr and "boom on two" in p.stderr and "ValueError" in p.stderr
    assert time.monotonic() - t < 30


def test_a_busy_rank_is_killed_after_a_failure(run):
    t = time.monotonic()
    p = run(
        2,
        """
import time
from mpiws import MPI
if MPI.COMM_WORLD.Get_rank() == 0:
    raise RuntimeError("rank zero gives up")
while True:          # never calls MPI again: cannot notice the cancellation
    time.sleep(0.05)
""",
        timeout=60,
    )
    # rank 1 is cancelled through the service interface and its process ended
    assert p.returncode != 0 and "rank zero gives up" in p.stderr
    assert time.monotonic() - t < 30


def test_a_crashing_process_is_reported(run):
    p = run(
        2,
        """
import os
from mpiws import MPI
if MPI.COMM_WORLD.Get_rank() == 1:
    os._exit(7)
MPI.COMM_WORLD.recv(source=1)
""",
        timeout=60,
    )
    assert p.returncode != 0
    # whether it died before or after its endpoint answered the run request
    assert "rank 1" in p.stderr and "status 7" in p.stderr, p.stderr


def test_sys_exit_codes(run):
    assert_ok(run(2, "import sys; sys.exit(0)"))
    # like mpiexec: the status passes through, and a deliberate exit is no traceback
    p = run(2, "import sys\nfrom mpiws import MPI\nsys.exit(3 if MPI.COMM_WORLD.rank == 1 else 0)")
    assert p.returncode == 3 and "rank 1 exited with status 3" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = run(
        2,
        "import sys\nfrom mpiws import MPI\nif MPI.COMM_WORLD.rank == 0: sys.exit('bad input')\nMPI.COMM_WORLD.Barrier()",
    )
    assert p.returncode == 1 and "rank 0 exited with status 1: bad input" in p.stderr, p.stderr


def test_atexit_handlers_run_while_the_ranks_can_still_communicate(run):
    # mpi4py runs them before MPI_Finalize (dask-mpi stops its scheduler
    # from one); a rank ends with os._exit, so they run after the program.
    p = run(
        2,
        """
import atexit, sys
from mpiws import MPI
comm = MPI.COMM_WORLD
def farewell():
    got = comm.sendrecv(f"bye from {comm.rank}", dest=1 - comm.rank, source=1 - comm.rank)
    print("atexit:", got, flush=True)
atexit.register(farewell)
atexit.register(lambda: 1 / 0)  # runs first; reported, the others still run
if comm.rank == 1:
    sys.exit(0)  # a clean exit runs them too
""",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[0] atexit: bye from 1" in p.stdout and "[1] atexit: bye from 0" in p.stdout, p.stdout + p.stderr
    assert "ZeroDivisionError" in p.stderr, p.stderr
    # A failed program's handlers do not run: its peers are told it failed.
    p = run(2, "import atexit\natexit.register(print, 'ran anyway')\nraise ValueError('no')")
    assert p.returncode == 1 and "ran anyway" not in p.stdout, p.stdout


def test_python_dash_m_and_usage_errors(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("from mpiws import MPI\nprint('size', MPI.COMM_WORLD.Get_size())\n")
    p = subprocess.run(
        [sys.executable, "-m", "mpiws", "run", "-n", "2", str(prog)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0 and p.stdout.count("size 2") == 2
    p = subprocess.run([sys.executable, "-m", "mpiws", "run", "-n", "2"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "prog.py" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "mpiws", "run", "--endpoints", "http://127.0.0.1:9", "--service", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "unreachable" in p.stderr


def test_plain_python_is_a_singleton_domain(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(
        "from mpiws import MPI\nc = MPI.COMM_WORLD\nc.send('hi', dest=0)\nprint(c.Get_size(), c.recv(source=0))\n"
    )
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "1 hi"


def _serve(port_file_dir, name):
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mpiws",
            "serve",
            "--service",
            "sum=examples.service_sum:service",
            "--service",
            "exchange=services:exchange",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)])),
    )
    line = p.stdout.readline()
    assert "serving" in line, line + p.stderr.read()
    return p, line.rsplit(" ", 1)[1].strip()


def test_endpoints_form_runs_a_deployed_service():
    a, url_a = _serve(None, "a")
    b, url_b = _serve(None, "b")
    try:
        eps = ",".join([url_a, url_b, url_a, url_b])
        p = subprocess.run(
            [sys.executable, "-m", "mpiws", "run", "--endpoints", eps, "--service", "sum", "--params", '{"n": 100}'],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        assert 'rank 0: {"ranks": 4, "total": 5050}' in p.stdout
        parts = [
            json.loads(line.split(": ", 1)[1])["part"]
            for line in p.stdout.splitlines()
            if line.startswith("rank ") and '"part"' in line
        ]
        assert sorted(parts) == sorted(sum(range(r + 1, 101, 4)) for r in (1, 2, 3))
        p = subprocess.run(
            [sys.executable, "-m", "mpiws", "run", "--endpoints", eps, "--service", "nope"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2 and "no service" in p.stderr
    finally:
        for s in (a, b):
            s.terminate()
            s.wait(timeout=10)


def test_two_domains_through_the_same_endpoints_stay_apart(server):
    from mpiws.launch.domain import Domain

    results = {}

    def go(marker):
        d = Domain([server.url] * 4)
        d.start("exchange", {"marker": marker})
        statuses, failure = d.wait()
        assert failure is None, failure
        results[marker] = [s["result"] for s in statuses]

    threads = [threading.Thread(target=go, args=(m,)) for m in ("A", "B", "C")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == ["A", "B", "C"]
    for marker, per_rank in results.items():
        for rank, got in enumerate(per_rank):
            assert got == [[marker, r] for r in range(4) if r != rank]


def test_the_rank_that_failed_is_reported_not_the_peer_that_found_it_gone():
    """Under load the peer's consequence (MPIX_ERR_PROC_FAILED) can be told
    before the cause (the rank's own exit): the cause is reported."""
    import queue

    from mpiws.launch.domain import Domain, exit_status

    class Told(Domain):  # statuses as the ranks' watchers would tell them
        def __init__(self):
            self.endpoints = ["http://127.0.0.1:1"] * 2

        def watch(self, events):
            pass

        def cancel_all(self, except_rank=None):
            pass

    events = queue.Queue()
    gone = {"name": "MPIX_ERR_PROC_FAILED", "message": "rank 0 has ended", "traceback": ""}
    events.put((1, {"rank": 1, "state": "failed", "error": gone}))
    events.put((0, {"rank": 0, "state": "failed", "error": {"name": "SystemExit", "message": "bad input"}}))
    statuses, failure = Told().wait(extra_events=events)
    said = []
    assert exit_status(statuses, failure, said.append, grace=5.0) == 1
    assert said == ["rank 0 exited with status 1: bad input"], said
