"""Time limits: timeout= on blocking calls, non-blocking calls and waits,
the communicator's default and MPIWS_TIMEOUT; expiry raises ERR_TIMEOUT and
withdraws the receive (nothing is lost). And waiting costs no CPU."""

import pytest
from conftest import assert_ok

CALLS = """
import time, numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
rank = comm.rank
# a receive that times out is withdrawn: the late message goes to the next receive
if rank == 0:
    t = time.monotonic()
    try:
        comm.recv(source=1, tag=5, timeout=0.3)
        raise SystemExit("no timeout")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TIMEOUT, e
        assert 0.25 < time.monotonic() - t < 2, time.monotonic() - t
    comm.send("go", dest=1)
    assert comm.recv(source=1, tag=5) == "late"
else:
    assert comm.recv(source=0) == "go"
    comm.send("late", dest=0, tag=5)
comm.Barrier()
# non-blocking with a time limit, then waited
req = comm.irecv(source=1 - rank, tag=9, timeout=0.2)
try:
    req.wait()
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
assert not req
# wait(timeout=) and the waitall family
req = comm.Irecv(np.zeros(3), source=1 - rank, tag=10)
try:
    MPI.Request.Waitall([req], timeout=0.1)
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
r2 = comm.irecv(source=1 - rank, tag=11)
try:
    MPI.Request.waitany([r2], timeout=0.1)
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
comm.Barrier()  # neither rank sends until both have timed out
comm.send(rank, dest=1 - rank, tag=11)
assert MPI.Request.waitany([r2], timeout=5) == (0, 1 - rank)
# the communicator's default, and probe
comm.Set_timeout(0.2)
assert comm.Get_timeout() == 0.2
try:
    comm.probe(source=1 - rank, tag=12)
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
comm.Set_timeout(None)
# a collective that one rank never joins
if rank == 0:
    try:
        comm.bcast("x", root=1, timeout=0.3)
        raise SystemExit("no timeout")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TIMEOUT, e
dup = comm.Dup()
assert dup.allreduce(1, timeout=5) == 2
print("OK", flush=True)
"""


def test_timeouts(run):
    assert_ok(run(2, CALLS), 2)


def test_timeout_from_environment(run):
    p = run(
        2,
        """
import time
from mpiws import MPI
comm = MPI.COMM_WORLD
assert comm.Get_timeout() == 0.25
t = time.monotonic()
try:
    comm.recv(source=1 - comm.rank, tag=3)
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
    assert time.monotonic() - t < 3
comm.Barrier(timeout=10)  # both are past their receive before either ends
# float("inf"): no limit for this one call, whatever the defaults
if comm.rank == 0:
    time.sleep(0.5)
    comm.send("late", dest=1)
else:
    assert comm.recv(source=0, timeout=float("inf")) == "late"
print("OK")
""",
        env={"MPIWS_TIMEOUT": "0.25"},
    )
    assert_ok(p, 2)


def test_waiting_uses_no_cpu(run):
    """A rank blocked in recv for 10 s uses under 2% of a core (all its threads)."""
    p = run(
        2,
        """
import resource, time
from mpiws import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    time.sleep(10)
    comm.send("wake up", dest=0)
else:
    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime
    c0, t0 = cpu(), time.monotonic()
    assert comm.recv(source=1) == "wake up"
    used, wall = cpu() - c0, time.monotonic() - t0
    assert wall > 9, wall
    print(f"CPU {used:.3f} s over {wall:.1f} s = {100 * used / wall:.2f}% of a core")
    assert used / wall < 0.02, (used, wall)
print("OK")
""",
    )
    assert_ok(p, 2)


WITHDRAWN = """
import threading, time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.rank == 0:
    # blocking and non-blocking synchronous sends nobody receives in time
    for call in ("ssend", "Ssend", "issend"):
        t = time.monotonic()
        try:
            if call == "ssend":
                comm.ssend("stale ssend", dest=1, tag=1, timeout=0.3)
            elif call == "Ssend":
                comm.Ssend(np.full(4, 7.0), dest=1, tag=1, timeout=0.3)
            else:
                fired = threading.Event()
                r = comm.issend("stale issend", dest=1, tag=1, timeout=0.3,
                                schedule=MPI.Schedule(timed_out=lambda r: fired.set(), completed=lambda r: fired.clear()))
                r.wait()
            raise SystemExit("no timeout: " + call)
        except MPI.Exception as e:
            assert e.Get_error_class() == MPI.ERR_TIMEOUT, (call, e)
            assert 0.25 < time.monotonic() - t < 3, (call, time.monotonic() - t)
    assert fired.wait(5), "timed_out never fired"
    comm.send("fresh", dest=1, tag=1)
    comm.Barrier()
    # a synchronous send the receiver takes before its limit completes
    comm.ssend("in time", dest=1, tag=2, timeout=10)
    time.sleep(0.3)
    assert fired.is_set(), "completed fired after timed_out"
else:
    time.sleep(1.5)   # all three sends timed out meanwhile
    # none of them is received: the first message on tag 1 is the one sent after
    assert comm.recv(source=0, tag=1) == "fresh"
    assert not comm.iprobe(source=0, tag=1)
    comm.Barrier()
    assert comm.recv(source=0, tag=2) == "in time"
print("OK", flush=True)
"""


@pytest.mark.parametrize("channel", ["streams", "stores"])
def test_a_send_that_times_out_is_withdrawn_never_received(run, channel):
    env = {"MPIWS_STREAMS": "0"} if channel == "stores" else {}
    assert_ok(run(2, WITHDRAWN, env=env), 2)
