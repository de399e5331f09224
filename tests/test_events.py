"""Progressive messages: events with schedules and request.on (on the
handler thread, once each, receipts with wildcards resolved), message
handlers, asyncio forms, and the failed event of a send to a dead rank."""

import pytest
from conftest import assert_ok

PROGRAM = """
import asyncio, threading, time
import numpy as np
from mpiws import MPI
Schedule = MPI.Schedule
comm = MPI.COMM_WORLD
rank, other = comm.rank, 1 - comm.rank
seen = []
lock = threading.Lock()
def log(r):
    with lock:
        seen.append((r.event, r.tag, r.source, r.dest, r.size, threading.current_thread().name))
sch = Schedule(submitted=log, completed=log, matched=log, failed=log, timed_out=log)
s = comm.isend({"x": rank}, dest=other, tag=4, schedule=sch)
r = comm.irecv(source=MPI.ANY_SOURCE, tag=4, schedule=sch)
assert r.wait() == {"x": other}
s.wait()
ss = comm.issend("sync", dest=other, tag=5, schedule=sch)
assert comm.recv(source=other, tag=5) == "sync"
ss.wait()
t = comm.irecv(source=other, tag=99, timeout=0.2, schedule=sch)
time.sleep(0.6)
comm.Barrier()
time.sleep(0.3)
with lock:
    print(rank, sorted(seen), flush=True)
    evs = [(e, tag) for e, tag, *_ in seen]
assert ("submitted", 4) in evs and ("completed", 4) in evs, evs
assert evs.count(("completed", 4)) == 2, evs   # the send stored + the receive delivered
assert ("matched", 5) in evs and ("timed_out", 99) in evs, evs
assert ("submitted", 99) in evs, evs   # a receive is submitted once posted, then times out
# a cancelled receive fails (it never completes); Cancel after a time-out is harmless
fate = []
c = comm.irecv(source=other, tag=77, schedule=Schedule(completed=lambda r: fate.append("completed"), failed=lambda r: fate.append(r.error.Get_error_class())))
c.Cancel()
st = MPI.Status()
c.Wait(st)
assert st.Is_cancelled()
time.sleep(0.3)
assert fate == [MPI.ERR_CANCELLED], fate
t2 = comm.irecv(source=other, tag=78, timeout=0.1, schedule=Schedule(timed_out=lambda r: r.request.Cancel()))
time.sleep(0.4)
t2.Cancel()
# "matched" for a standard send: once the receiver's application took it, not before
took = threading.Event()
if rank == 0:
    m = comm.isend("standard", dest=1, tag=6, schedule=Schedule(matched=lambda r: took.set()))
    m.wait()                                  # completed: written, not yet received
    assert not took.wait(0.5), "matched before the receiver received"
    comm.send("go", dest=1, tag=8)
    assert took.wait(10), "matched never reported"
else:
    assert comm.recv(source=0, tag=8) == "go"
    assert comm.recv(source=0, tag=6) == "standard"
assert all(name == "mpiws-handlers" for *_, name in seen)
recv_receipt = [x for x in seen if x[0] == "completed" and x[3] == rank and x[1] == 4]
assert recv_receipt and recv_receipt[0][2] == other, seen   # wildcard source resolved
try:
    t.wait()
    raise SystemExit("expected timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
# message handlers
got = []
done = threading.Event()
def on_msg(r):
    got.append((r.source, r.tag, r.value))
    if len(got) == 3:
        done.set()
comm.on_message(on_msg, source=other, tag=7)
comm.Barrier()
for i in range(3):
    comm.send(i, dest=other, tag=7)
assert done.wait(10), got
comm.off_message(on_msg, source=other, tag=7)
assert got == [(other, 7, 0), (other, 7, 1), (other, 7, 2)], got
# asyncio
async def main():
    a = comm.asend(rank * 10, dest=other, tag=8)
    b = comm.arecv(source=other, tag=8)
    _, v = await asyncio.gather(a, b)
    total = await comm.aallreduce(rank + 1)
    x = await comm.abcast("hi" if rank == 0 else None, root=0)
    return v, total, x
v, total, x = asyncio.run(main())
assert v == other * 10 and total == 3 and x == "hi", (v, total, x)
req = comm.Iallreduce(np.ones(2), out := np.zeros(2))
req.on("completed", log)
req.Wait()
print("OK", flush=True)
"""


def test_events_handlers_async(run):
    assert_ok(run(2, PROGRAM), 2)


def test_failed_event(run):
    p = run(
        2,
        """
import os, signal, threading, time
from mpiws import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(0.5)
failed = threading.Event()
receipts = []
def on_failed(r):
    receipts.append(r)
    failed.set()
req = comm.irecv(source=1, schedule=MPI.Schedule(failed=on_failed))
assert failed.wait(20), "no failed event"
r = receipts[0]
assert r.event == "failed" and r.error.Get_error_class() == MPI.ERR_PROC_FAILED, r
assert "rank 1" in r.error.Get_error_string()
try:
    req.wait()
    raise SystemExit("no error")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_PROC_FAILED
print("OK")
""",
        env={"MPIWS_FAILURE_TIMEOUT": "1"},
        keep_going=True,
    )
    assert "[0] OK" in p.stdout, p.stdout + p.stderr


def test_testing_a_receive_while_its_handler_takes_the_message_gives_the_message(run):
    # A watched receive is settled on the handler thread when it completes; a test() on
    # the owner's thread meanwhile (here: for all of a slow unpickling) once saw the
    # request inactive and answered (True, None): the message lost.
    p = run(
        2,
        """
import time
from mpiws import MPI
comm = MPI.COMM_WORLD
class Slow:
    def __reduce__(self):
        return (make, (), )
def make():
    time.sleep(1.5)
    return "slow value"
if comm.rank == 0:
    comm.send(Slow(), dest=1, tag=1)
else:
    r = comm.irecv(source=0, tag=1, schedule=MPI.Schedule(completed=lambda r: None))
    time.sleep(0.5)  # the message is here, and the handler thread is unpickling it
    while True:
        done, v = r.test()
        if done:
            break
    assert v == "slow value", v
print("OK", flush=True)
""",
    )
    assert_ok(p, 2)


def test_timed_out_fires_when_the_owners_wait_reaches_the_deadline_first(run):
    # The handler thread is busy in another handler past the deadline: the owner's
    # wait withdraws the operation, and timed_out still fires (once, afterwards).
    p = run(
        2,
        """
import threading, time
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.rank == 0:
    idle = threading.Event()
    comm.irecv(source=0, tag=8, schedule=MPI.Schedule(completed=lambda r: (time.sleep(1.5), idle.set())))
    comm.send("occupy the handler thread", dest=0, tag=8)
    fired = {k: [] for k in ("issend", "irecv")}
    for call in fired:
        schedule = MPI.Schedule(timed_out=fired[call].append, completed=fired[call].append)
        if call == "issend":
            r = comm.issend("nobody takes it", dest=1, tag=1, timeout=0.3, schedule=schedule)
        else:
            r = comm.irecv(source=1, tag=2, timeout=0.3, schedule=schedule)
        try:
            r.wait()
            raise SystemExit("no timeout: " + call)
        except MPI.Exception as e:
            assert e.Get_error_class() == MPI.ERR_TIMEOUT, (call, e)
    assert idle.wait(10)
    time.sleep(0.3)
    for call, receipts in fired.items():
        assert [r.event for r in receipts] == ["timed_out"], (call, receipts)
comm.Barrier()
print("OK", flush=True)
""",
    )
    assert_ok(p, 2)


MATCHED = """
import threading, time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.rank == 0:
    # asked at the start (schedule=), and asked late (request.on after the call)
    took = {k: threading.Event() for k in ("start", "late", "late_done", "self", "big")}
    a = comm.isend("at start", dest=1, tag=1, schedule=MPI.Schedule(matched=lambda r: took["start"].set()))
    b = comm.isend("late", dest=1, tag=2)
    b.on("matched", lambda r: took["late"].set())
    c = comm.Isend(np.arange(1 << 18, dtype=np.float64), dest=1, tag=4)   # 2 MiB: not eager
    c.on("matched", lambda r: took["big"].set())
    d = comm.isend("to myself", dest=0, tag=3)
    d.on("matched", lambda r: took["self"].set())
    for r in (a, b, c):
        r.wait()
    time.sleep(0.5)
    assert not any(e.is_set() for e in took.values()), "matched before any receive took it"
    e = comm.isend("after wait", dest=1, tag=5, schedule=MPI.Schedule(completed=lambda r: None))
    e.wait()
    e.on("matched", lambda r: took["late_done"].set())   # still watched: may ask after the wait
    assert comm.recv(source=0, tag=3) == "to myself"
    assert took["self"].wait(10)
    comm.send("go", dest=1, tag=9)
    for k in ("start", "late", "big", "late_done"):
        assert took[k].wait(10), k + " matched never reported"
else:
    assert comm.recv(source=0, tag=9) == "go"
    assert comm.recv(source=0, tag=5) == "after wait"
    assert comm.recv(source=0, tag=2) == "late"
    assert comm.recv(source=0, tag=1) == "at start"
    buf = np.empty(1 << 18)
    comm.Recv(buf, source=0, tag=4)
print("OK", flush=True)
"""


@pytest.mark.parametrize("channel", ["streams", "stores"])
def test_matched_of_a_standard_send_asked_at_the_start_or_late(run, channel):
    env = {"MPIWS_STREAMS": "0"} if channel == "stores" else {}
    assert_ok(run(2, MATCHED, env=env), 2)


@pytest.mark.parametrize("channel", ["same-host", "network"])
def test_a_message_handler_and_a_blocking_receive_from_one_peer_share_its_stream(run, channel):
    # The handler thread reads the stream of the receive it watches while it
    # waits (Events.next(reading=...)); the main thread's receives from that
    # peer are then filed by it: both get every message, once, in order.
    p = run(
        2,
        """
import threading
from mpiws import MPI
comm = MPI.COMM_WORLD
N = 300
if comm.rank == 0:
    for i in range(N):
        comm.send(i, dest=1, tag=1)
        comm.send(-i, dest=1, tag=2)
    assert comm.recv(source=1, tag=3) == "done"
else:
    got, done = [], threading.Event()
    def arrived(r):
        got.append(r.value)
        if len(got) == N:
            done.set()
    comm.on_message(arrived, source=0, tag=1)
    main = [comm.recv(source=0, tag=2) for _ in range(N)]
    assert done.wait(30), len(got)
    comm.off_message(arrived, source=0, tag=1)
    assert got == list(range(N)), got[:20]
    assert main == [-i for i in range(N)], main[:20]
    comm.send("done", dest=0, tag=3)
print("OK", flush=True)
""",
        env={"MPIWS_NOLOCAL": "1"} if channel == "network" else {},
    )
    assert_ok(p, 2)
