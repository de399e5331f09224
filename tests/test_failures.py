"""A rank whose process dies: every survivor gets MPI.ERR_PROC_FAILED within
the failure timeout instead of hanging — in receives from it (named or any
source), sends to it, and collectives that include it (an intercommunicator's
and a topology's neighbourhood too) — and afterwards the
survivors still talk among themselves. The launcher (with --keep-going, so
the survivors run to their own end) reports which rank failed first and
exits non-zero."""

import re

import pytest

FAILURE_TIMEOUT = 1.0
# detection takes the failure timeout plus a look or two (0.2 s each); the
# rest is slack for a loaded machine
BOUND = FAILURE_TIMEOUT + 4.0

PROGRAM = """
import os, signal, sys, time
import numpy as np
from mpiws import MPI

comm = MPI.COMM_WORLD
rank, n = comm.rank, comm.size
dead = n - 1
what = sys.argv[1]
if what == "inter":          # evens and odds: the dead rank is in one group
    inter = comm.Split(rank % 2, rank).Create_intercomm(0, comm, 1 - rank % 2)
elif what == "neighbor":
    ring = comm.Create_cart([n], periods=[True])
comm.Barrier()
if rank == dead:
    time.sleep(0.3)          # the survivors are in the middle of it by now
    os.kill(os.getpid(), signal.SIGKILL)

t0 = time.monotonic()
try:
    if what == "recv":       # rank 0 waits for the dead rank by name
        if rank == 0:
            comm.recv(source=dead)
        else:
            comm.Recv(np.zeros(4), source=dead, tag=3)
    elif what == "anysource":  # only the dead rank would ever send
        comm.recv(source=MPI.ANY_SOURCE, tag=7) if n == 2 else comm.recv(source=dead, tag=7)
    elif what == "send":
        while True:
            comm.send(b"x" * 4096, dest=dead)
    elif what == "allreduce":
        while True:
            comm.allreduce(rank)
    elif what == "bcast":    # every root in turn: the dead rank is a root, or a forwarder
        i = 0
        while True:
            comm.Bcast(np.zeros(1 << 16), root=i % n)
            i += 1
    elif what == "barrier":
        while True:
            comm.Barrier()
    elif what == "inter":    # both groups fail, the dead rank's and the other
        while True:
            inter.allreduce(rank)
            inter.Barrier()
    elif what == "neighbor":  # the dead rank's neighbours, and theirs in turn
        while True:
            ring.neighbor_allgather(rank)
    print("NOERROR", flush=True)
except MPI.Exception as e:
    took = time.monotonic() - t0
    print(f"FAILED class={e.Get_error_class()} took={took:.2f} msg={e.Get_error_string()}", flush=True)

# the survivors go on among themselves
if n > 2:
    alive = comm.Create_group(comm.Get_group().Excl([dead]))
    total = alive.allreduce(rank)
    assert total == sum(range(n - 1)), total
    right, left = (rank + 1) % (n - 1), (rank - 1) % (n - 1)
    got = alive.sendrecv(rank, dest=right, source=left)
    assert got == left, got
print("SURVIVED", flush=True)
"""

CASES = [
    ("recv", 2),
    ("recv", 4),
    ("anysource", 2),
    ("anysource", 3),
    ("send", 3),
    ("allreduce", 2),
    ("allreduce", 5),
    ("allreduce", 8),
    ("bcast", 4),
    ("barrier", 7),
    ("inter", 4),
    ("neighbor", 4),
]


@pytest.mark.parametrize("what,n", CASES, ids=[f"{w}-{n}" for w, n in CASES])
def test_dead_rank_fails_survivors(run, what, n):
    env = {"MPIWS_FAILURE_TIMEOUT": str(FAILURE_TIMEOUT)}
    p = run(n, PROGRAM, args=(what,), env=env, timeout=120, keep_going=True)
    out = p.stdout
    assert p.returncode != 0, out
    assert re.search(rf"rank {n - 1} failed first", p.stderr), p.stderr
    for r in range(n - 1):
        m = re.search(rf"^\[{r}\] FAILED class=(\d+) took=([\d.]+) msg=(.*)$", out, re.M)
        assert m, f"rank {r} got no error\n{out}\n{p.stderr}"
        assert int(m.group(1)) == 101, m.group(0)  # MPI.ERR_PROC_FAILED
        assert float(m.group(2)) < BOUND, m.group(0)
        assert f"rank {n - 1}" in m.group(3), m.group(0)  # names the dead rank
        assert re.search(rf"^\[{r}\] SURVIVED$", out, re.M), f"rank {r}\n{out}\n{p.stderr}"


def test_sends_to_a_gone_rank_fail_at_once(run):
    """Once a rank is known gone, sends to it fail at once (no connection attempt)."""
    p = run(
        3,
        """
import os, signal, time
from mpiws import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 2:
    os.kill(os.getpid(), signal.SIGKILL)
try:
    comm.recv(source=2)
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_PROC_FAILED
t = time.monotonic()
try:
    comm.send("late", dest=2)
    print("NOERROR")
except MPI.Exception as e:
    print(f"SENDFAILED {time.monotonic() - t:.3f} {e.Get_error_class()}")
""",
        env={"MPIWS_FAILURE_TIMEOUT": "0.5"},
        keep_going=True,
    )
    lines = [line for line in p.stdout.splitlines() if "SENDFAILED" in line]
    assert len(lines) == 2, p.stdout + p.stderr
    for line in lines:
        _, took, cls = line.split("] ", 1)[1].split()
        assert float(took) < 0.5 and int(cls) == 101, line


def test_isend_to_an_unreachable_rank_returns_at_once_and_fails_within_the_bound(run):
    """A first connection refused does not block the caller: the send is
    queued while the link retries in the background; then its failed event
    fires, naming the rank, and later sends fail at once."""
    p = run(
        3,
        """
import os, signal, threading, time
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.rank == 2:
    os.kill(os.getpid(), signal.SIGKILL)   # before anyone connected to it
if comm.rank == 0:
    time.sleep(1.0)
    failed = threading.Event()
    got = []
    t = time.monotonic()
    req = comm.isend("never", dest=2, schedule=MPI.Schedule(failed=lambda r: (got.append(r.error), failed.set())))
    print(f"RETURNED {time.monotonic() - t:.3f}", flush=True)
    assert failed.wait(10), "no failed event"
    print(f"FAILED {time.monotonic() - t:.3f} {got[0].Get_error_class()} {got[0].Get_error_string()!r}", flush=True)
    t = time.monotonic()
    try:
        comm.send("again", dest=2)
        print("NOERROR")
    except MPI.Exception as e:
        print(f"SENDFAILED {time.monotonic() - t:.3f} {e.Get_error_class()}", flush=True)
""",
        env={"MPIWS_FAILURE_TIMEOUT": "2"},
        keep_going=True,
    )
    out = p.stdout
    returned = re.search(r"RETURNED ([\d.]+)", out)
    failed = re.search(r"FAILED ([\d.]+) (\d+) (.*)", out)
    again = re.search(r"SENDFAILED ([\d.]+) (\d+)", out)
    assert returned and failed and again, out + p.stderr
    assert float(returned.group(1)) < 0.5, out  # not the 2 s failure timeout
    assert float(failed.group(1)) < 2 + 3 and int(failed.group(2)) == 101 and "rank 2" in failed.group(3), out
    assert float(again.group(1)) < 0.5 and int(again.group(2)) == 101, out
