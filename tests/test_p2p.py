"""Point-to-point semantics on real domains of rank processes (mpiws run)."""

import functools
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, assert_ok

# Rank-to-rank traffic uses streams (HTTP upgrade) unless MPIWS_STREAMS=0,
# which keeps every message a plain HTTP store: test both channels.
# Ranks on one host stream through shared memory by default; the network path
# (MPIWS_NOLOCAL=1) and stores (no streams) are the other channels.
CHANNELS = pytest.mark.parametrize(
    "channel", [{}, {"MPIWS_NOLOCAL": "1"}, {"MPIWS_STREAMS": "0"}], ids=["same-host", "network", "stores"]
)

PRELUDE = """
import time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
"""


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_world_basics(run, n):
    p = run(
        n,
        PRELUDE
        + """
assert comm.rank == rank and comm.size == size == comm.Get_size()
assert MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF.Get_rank() == 0
assert isinstance(MPI.Get_processor_name(), str)
t = MPI.Wtime(); time.sleep(0.01); assert 0.005 < MPI.Wtime() - t < 5
assert MPI.COMM_WORLD == MPI.COMM_WORLD and MPI.COMM_WORLD != MPI.COMM_SELF
print("OK", rank, size)
""",
    )
    assert_ok(p, n)
    assert all(f"OK {r} {n}" in p.stdout for r in range(n))


@CHANNELS
def test_objects_tags_and_status(run, channel):
    run = functools.partial(run, env=channel)
    p = run(
        3,
        PRELUDE
        + """
if rank == 0:
    comm.send({"x": 1}, dest=1, tag=7)
    comm.send([1, 2, 3], dest=1, tag=8)
    comm.send(None, dest=2)
elif rank == 1:
    st = MPI.Status()
    # tag 8 first: tags select, whatever the arrival order
    assert comm.recv(source=0, tag=8, status=st) == [1, 2, 3]
    assert (st.source, st.tag, st.Get_source(), st.Get_tag()) == (0, 8, 0, 8)
    assert st.Get_count() > 0 and st.count == st.Get_count() and st.error == MPI.SUCCESS
    assert comm.recv(source=0, tag=7) == {"x": 1}
else:
    assert comm.recv(source=0) is None
print("OK")
""",
    )
    assert_ok(p, 3)


@CHANNELS
def test_thousands_of_isends_keep_order(run, channel):
    run = functools.partial(run, env=channel)
    p = run(
        3,
        PRELUDE
        + """
N = 3000
if rank != 0:
    reqs = [comm.isend((rank, i), dest=0, tag=i % 3) for i in range(N)]
    MPI.Request.waitall(reqs)
else:
    seen = {1: -1, 2: -1}
    for _ in range(2 * N):
        src, i = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
        assert i == seen[src] + 1, (src, i, seen[src])
        seen[src] = i
    # per tag, too: receives for tag 2 only see tag-2 messages, in order
print("OK")
""",
    )
    assert_ok(p, 3)


def test_non_overtaking_with_tag_selection(run):
    p = run(
        2,
        PRELUDE
        + """
if rank == 0:
    for i in range(200):
        comm.isend(i, dest=1, tag=i % 2)
    comm.send("end", dest=1, tag=9)
else:
    comm.recv(source=0, tag=9)  # everything has arrived by now
    odd = [comm.recv(source=0, tag=1) for _ in range(100)]
    even = [comm.recv(source=0, tag=0) for _ in range(100)]
    assert odd == list(range(1, 200, 2)) and even == list(range(0, 200, 2))
print("OK")
""",
    )
    assert_ok(p, 2)


def test_any_source_any_tag(run):
    p = run(
        5,
        PRELUDE
        + """
if rank == 0:
    got = {}
    for _ in range(size - 1):
        st = MPI.Status()
        v = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        assert v == st.source * 10 and st.tag == st.source + 100
        got[st.source] = v
    assert sorted(got) == [1, 2, 3, 4]
else:
    comm.send(rank * 10, dest=0, tag=rank + 100)
print("OK")
""",
    )
    assert_ok(p, 5)


def test_probe_and_iprobe(run):
    p = run(
        2,
        PRELUDE
        + """
if rank == 0:
    comm.recv(source=1, tag=1)            # rank 1 is ready
    comm.Send(np.arange(12, dtype="i"), dest=1, tag=3)
else:
    st = MPI.Status()
    assert comm.Iprobe(source=0, tag=3) is False
    assert comm.iprobe() is False
    comm.send("ready", dest=0, tag=1)
    assert comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st) is True
    assert (st.source, st.tag, st.Get_count(MPI.INT), st.Get_count(MPI.BYTE)) == (0, 3, 12, 48)
    assert comm.Iprobe(source=0, tag=3) and comm.probe(source=0)
    buf = np.empty(st.Get_count(MPI.INT), dtype="i")
    comm.Recv(buf, source=st.source, tag=st.tag)
    assert buf.tolist() == list(range(12))
    assert not comm.iprobe(source=0, tag=3)
print("OK")
""",
    )
    assert_ok(p, 2)


@CHANNELS
def test_ssend_completes_only_when_matched(run, channel):
    run = functools.partial(run, env=channel)
    p = run(
        2,
        PRELUDE
        + """
if rank == 0:
    t = time.monotonic()
    comm.ssend("sync", dest=1, tag=1)
    assert time.monotonic() - t > 0.4, "ssend returned before the receive was posted"
    req = comm.issend("again", dest=1, tag=2)
    time.sleep(0.3)
    assert req.Test() is False
    comm.send("go", dest=1, tag=3)
    req.wait()
    # a standard send completes without a matching receive (buffered at the receiver)
    t = time.monotonic()
    comm.send("eager", dest=1, tag=4)
    assert time.monotonic() - t < 0.4
    comm.Ssend(np.ones(3), dest=1, tag=5)
else:
    time.sleep(0.6)
    assert comm.recv(source=0, tag=1) == "sync"
    comm.recv(source=0, tag=3)
    assert comm.recv(source=0, tag=2) == "again"
    time.sleep(0.6)
    assert comm.recv(source=0, tag=4) == "eager"
    b = np.zeros(3); comm.Recv(b, source=0, tag=5); assert b.sum() == 3
print("OK")
""",
    )
    assert_ok(p, 2)


def test_self_messages(run):
    p = run(
        2,
        PRELUDE
        + """
comm.send(("me", rank), dest=rank, tag=4)
assert comm.recv(source=rank, tag=4) == ("me", rank)
r = comm.irecv(source=rank, tag=5)
comm.ssend("sync self", dest=rank, tag=6) if False else None
comm.Send(np.arange(4.0), dest=rank, tag=5) if False else comm.send("five", dest=rank, tag=5)
assert r.wait() == "five"
a = np.zeros(4)
r = comm.Irecv(a, source=rank, tag=7)
comm.Send(np.arange(4.0), dest=rank, tag=7)
r.Wait()
assert a.tolist() == [0, 1, 2, 3]
req = comm.issend("s", dest=rank, tag=8)
assert comm.recv(source=rank, tag=8) == "s"
req.wait()
assert MPI.COMM_SELF.sendrecv("x", dest=0, source=0) == "x"
print("OK")
""",
    )
    assert_ok(p, 2)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_exchanges_never_deadlock(run, n):
    p = run(
        n,
        PRELUDE
        + """
right, left = (rank + 1) % size, (rank - 1) % size
# everyone sends first, then receives: stores are served by the endpoint
comm.send(np.full(100000, rank), dest=right, tag=1)
assert (comm.recv(source=left, tag=1) == left).all()
assert comm.sendrecv(rank, dest=right, source=left) == left
out = np.full(1000, rank, dtype="i"); inb = np.empty(1000, dtype="i")
comm.Sendrecv(out, dest=right, sendtag=2, recvbuf=inb, source=left, recvtag=2)
assert (inb == left).all()
buf = np.full(10, rank, dtype="d")
st = MPI.Status()
comm.Sendrecv_replace(buf, dest=right, sendtag=3, source=left, recvtag=3, status=st)
assert (buf == left).all() and st.source == left
print("OK")
""",
    )
    assert_ok(p, n)


def test_buffer_forms_and_datatypes(run):
    p = run(
        2,
        PRELUDE
        + """
import array
if rank == 0:
    comm.Send(np.arange(5, dtype=np.int32), dest=1, tag=1)
    comm.Send([np.arange(10, dtype=np.float64), 4, MPI.DOUBLE], dest=1, tag=2)
    comm.Send([np.arange(6, dtype=np.int64), "q"], dest=1, tag=3)
    comm.Send(b"hello", dest=1, tag=4)
    comm.Send(bytearray(b"abc"), dest=1, tag=5)
    comm.Send(memoryview(b"xyz"), dest=1, tag=6)
    comm.Send(array.array("f", [1.5, 2.5]), dest=1, tag=7)
    comm.Send([np.arange(10, dtype="i"), (3, 2), MPI.INT], dest=1, tag=8)
    comm.Send(np.arange(6, dtype=np.complex128).reshape(2, 3), dest=1, tag=9)
    comm.Send(np.array([True, False]), dest=1, tag=10)
else:
    a = np.empty(5, dtype=np.int32); comm.Recv(a, source=0, tag=1); assert a.tolist() == [0, 1, 2, 3, 4]
    st = MPI.Status()
    b = np.zeros(10); comm.Recv([b, MPI.DOUBLE], source=0, tag=2, status=st)
    assert b[:4].tolist() == [0, 1, 2, 3] and b[4:].sum() == 0 and st.Get_count(MPI.DOUBLE) == 4
    c = np.empty(6, dtype=np.int64); comm.Recv([c, 6, "q"], source=0, tag=3); assert c.tolist() == list(range(6))
    d = bytearray(5); comm.Recv(d, source=0, tag=4); assert d == b"hello"
    e = bytearray(3); comm.Recv([e, MPI.BYTE], source=0, tag=5); assert e == b"abc"
    f = bytearray(3); comm.Recv(memoryview(f), source=0, tag=6); assert f == b"xyz"
    g = array.array("f", [0, 0]); comm.Recv(g, source=0, tag=7); assert g.tolist() == [1.5, 2.5]
    h = np.zeros(3, dtype="i"); comm.Recv(h, source=0, tag=8); assert h.tolist() == [2, 3, 4]
    z = np.empty((2, 3), dtype=np.complex128); comm.Recv(z, source=0, tag=9); assert z.ravel().tolist() == list(range(6))
    t = np.empty(2, dtype=bool); comm.Recv(t, source=0, tag=10); assert t.tolist() == [True, False]
    assert MPI.DOUBLE.Get_size() == 8 and MPI.INT.Get_size() == 4 and MPI.BYTE.Get_size() == 1
print("OK")
""",
    )
    assert_ok(p, 2)


def test_truncation_and_any_size_irecv(run):
    p = run(
        2,
        PRELUDE
        + """
if rank == 0:
    comm.Send(np.arange(100, dtype="d"), dest=1, tag=1)
    comm.send(list(range(100000)), dest=1, tag=2)
    comm.send("x" * 1000, dest=1, tag=3)
else:
    small = np.empty(10)
    try:
        comm.Recv(small, source=0, tag=1)
        raise AssertionError("no truncation error")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE, e
    assert comm.irecv(source=0, tag=2).wait() == list(range(100000))
    try:
        comm.irecv(bytearray(10), source=0, tag=3).wait()
        raise AssertionError("no truncation error")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
print("OK")
""",
    )
    assert_ok(p, 2)


@CHANNELS
def test_large_messages_256_mib(run, channel):
    run = functools.partial(run, env=channel)
    p = run(
        2,
        PRELUDE
        + """
n = 256 << 20
if rank == 0:
    a = np.arange(n // 8, dtype=np.int64)
    comm.Send(a, dest=1, tag=1)
    comm.send({"big": a[: 4 << 20]}, dest=1, tag=2)   # 32 MiB object, out of band
    assert comm.recv(source=1, tag=3) == "checked"
else:
    b = np.empty(n // 8, dtype=np.int64)
    comm.Recv(b, source=0, tag=1)
    assert b[0] == 0 and b[-1] == n // 8 - 1 and (b[::4096] == np.arange(0, n // 8, 4096)).all()
    o = comm.recv(source=0, tag=2)
    assert o["big"].flags.writeable and (o["big"][::1024] == np.arange(0, 4 << 20, 1024)).all()
    comm.send("checked", dest=0, tag=3)
print("OK")
""",
        timeout=300,
    )
    assert_ok(p, 2)


def test_requests(run):
    p = run(
        3,
        PRELUDE
        + """
assert not MPI.REQUEST_NULL and MPI.REQUEST_NULL.Test()
if rank == 0:
    r = comm.irecv(source=1, tag=1)
    assert r and r.test() == (False, None) and not r.Test() and r.Get_status() is False
    comm.send("go", dest=1, tag=0)
    assert r.wait() == "r1" and not r
    assert r.wait() is None                 # inactive: completes at once
    # waitany / testany
    reqs = [comm.irecv(source=1, tag=2), comm.irecv(source=2, tag=2)]
    comm.send("go", dest=2, tag=0)
    i, v = MPI.Request.waitany(reqs)
    assert (i, v) == (1, "r2"), (i, v)
    comm.send("go", dest=1, tag=0)
    st = MPI.Status()
    assert MPI.Request.Waitany(reqs, st) == 0 and st.source == 1
    assert MPI.Request.waitany(reqs) == (MPI.UNDEFINED, None)
    assert MPI.Request.testany(reqs) == (MPI.UNDEFINED, True, None)
    # waitsome / testsome / testall / waitall
    reqs = [comm.irecv(source=s, tag=3) for s in (1, 2)]
    assert MPI.Request.testsome(reqs) == ([], [])
    assert MPI.Request.testall(reqs) == (False, None) and MPI.Request.Testall(reqs) is False
    comm.send("go", dest=1, tag=0); comm.send("go", dest=2, tag=0)
    got = {}
    while any(reqs):
        idx, vals = MPI.Request.waitsome(reqs)
        got.update(zip(idx, vals))
    assert got == {0: 31, 1: 32}
    assert MPI.Request.waitsome(reqs) == (None, None) and MPI.Request.Waitsome(reqs) is None
    reqs = [comm.irecv(source=s, tag=4) for s in (1, 2)]
    comm.send("go", dest=1, tag=0); comm.send("go", dest=2, tag=0)
    statuses = []
    assert MPI.Request.waitall(reqs, statuses) == [41, 42]
    assert [s.source for s in statuses] == [1, 2]
    assert MPI.Request.Waitall(reqs) is True and MPI.Request.testall(reqs) == (True, [None, None])
    # cancel an unmatched receive
    r = comm.irecv(source=2, tag=77)
    r.Cancel()
    st = MPI.Status()
    r.Wait(st)
    assert st.Is_cancelled() and st.cancelled
    # Free forgets the request; the send still happens
    comm.isend("freed", dest=1, tag=5).Free()
    assert comm.recv(source=1, tag=6) == "got freed"
    # uppercase Test / Testany
    r = comm.Irecv(bytearray(2), source=1, tag=7)
    comm.send("go", dest=1, tag=0)
    while not r.Test():
        time.sleep(0.01)
    r = comm.Irecv(bytearray(2), source=1, tag=8)
    comm.send("go", dest=1, tag=0)
    while MPI.Request.Testany([r]) == (MPI.UNDEFINED, False):
        time.sleep(0.01)
elif rank == 1:
    comm.recv(source=0, tag=0); comm.send("r1", dest=0, tag=1)
    comm.recv(source=0, tag=0); comm.send("r1b", dest=0, tag=2)
    comm.recv(source=0, tag=0); comm.send(31, dest=0, tag=3)
    comm.recv(source=0, tag=0); comm.send(41, dest=0, tag=4)
    comm.send("got " + comm.recv(source=0, tag=5), dest=0, tag=6)
    comm.recv(source=0, tag=0); comm.Send(b"ab", dest=0, tag=7)
    comm.recv(source=0, tag=0); comm.Send(b"cd", dest=0, tag=8)
else:
    comm.recv(source=0, tag=0); comm.send("r2", dest=0, tag=2)
    comm.recv(source=0, tag=0); comm.send(32, dest=0, tag=3)
    comm.recv(source=0, tag=0); comm.send(42, dest=0, tag=4)
print("OK")
""",
    )
    assert_ok(p, 3)


def test_proc_null(run):
    p = run(
        2,
        PRELUDE
        + """
comm.send("void", dest=MPI.PROC_NULL)
st = MPI.Status()
assert comm.recv(source=MPI.PROC_NULL, status=st) is None and st.source == MPI.PROC_NULL
b = bytearray(b"keep"); comm.Recv(b, source=MPI.PROC_NULL); assert b == b"keep"
assert comm.sendrecv(1, dest=MPI.PROC_NULL, source=MPI.PROC_NULL) is None
print("OK")
""",
    )
    assert_ok(p, 2)


def test_dup_split_isolate_contexts(run):
    p = run(
        4,
        PRELUDE
        + """
dup = comm.Dup()
assert dup.Get_size() == size and dup.Get_rank() == rank and dup != comm
assert MPI.Comm.Compare(dup, comm) == MPI.CONGRUENT and MPI.Comm.Compare(comm, comm) == MPI.IDENT
clone = comm.Clone()
# same source and tag on three communicators: each receive sees only its own
if rank == 0:
    comm.send("world", dest=1, tag=1); dup.send("dup", dest=1, tag=1); clone.send("clone", dest=1, tag=1)
elif rank == 1:
    assert clone.recv(source=0, tag=1) == "clone"
    assert dup.recv(source=0, tag=1) == "dup"
    assert comm.recv(source=0, tag=1) == "world"
half = comm.Split(color=rank % 2, key=-rank)
assert half.Get_size() == 2
# key=-rank reverses the order inside each colour
assert half.Get_rank() == (1 if rank < 2 else 0)
peer = 1 - half.Get_rank()
assert half.sendrecv(rank, dest=peer, source=peer) == (rank + 2) % 4
none = comm.Split(MPI.UNDEFINED if rank == 3 else 0, rank)
assert (none == MPI.COMM_NULL) == (rank == 3)
if rank != 3:
    assert none.Get_size() == 3
    none.Free()
    try:
        none.Get_size(); raise AssertionError("freed comm still usable")
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_COMM
dup.Free()
try:
    MPI.COMM_WORLD.Free(); raise AssertionError("freed COMM_WORLD")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_COMM
print("OK")
""",
    )
    assert_ok(p, 4)


def test_bad_arguments(run):
    p = run(
        2,
        PRELUDE
        + """
def err_class(f):
    try:
        f()
    except MPI.Exception as e:
        return e.Get_error_class()
    raise AssertionError("no MPI.Exception")
assert err_class(lambda: comm.send(1, dest=2)) == MPI.ERR_RANK
assert err_class(lambda: comm.send(1, dest=-5)) == MPI.ERR_RANK
assert err_class(lambda: comm.recv(source=7)) == MPI.ERR_RANK
assert err_class(lambda: comm.send(1, dest=0, tag=-3)) == MPI.ERR_TAG
assert err_class(lambda: comm.Recv(bytearray(1), source=0, tag=-7)) == MPI.ERR_TAG
assert err_class(lambda: MPI.COMM_NULL.send(1, 0)) == MPI.ERR_COMM
e = MPI.Exception(MPI.ERR_RANK)
assert isinstance(e, RuntimeError) and e.Get_error_string().startswith("MPI_ERR_RANK")
for bad in (lambda: comm.Send(object(), dest=0), lambda: comm.Recv(b"readonly", source=0)):
    try:
        bad(); raise AssertionError("accepted a bad buffer")
    except TypeError:
        pass
try:
    comm.Send([np.zeros(2), 5, MPI.DOUBLE], dest=0); raise AssertionError("count beyond buffer")
except ValueError:
    pass
try:
    comm.Send([np.zeros(2), "not-a-type"], dest=0); raise AssertionError("bad typecode")
except KeyError as e:  # as mpi4py: the typecode is looked up in MPI._typedict
    assert "not-a-type" in str(e)
try:
    comm.Split("red"); raise AssertionError("string colour")
except TypeError:
    pass
print("OK")
""",
    )
    assert_ok(p, 2)


@CHANNELS
def test_a_message_to_an_ended_rank_is_reported_not_lost(run, channel):
    run = functools.partial(run, env=channel)
    p = run(
        2,
        PRELUDE
        + """
if rank == 1:
    raise SystemExit(0)          # rank 1 ends at once
time.sleep(1.0)
try:
    comm.send("too late", dest=1, tag=1)   # may return once written (eager) ...
    MPI.Finalize()                         # ... but then the loss surfaces here
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_PROC_FAILED, e
    print("REPORTED", e)
""",
    )
    assert p.returncode == 0, p.stderr
    assert "REPORTED" in p.stdout and "rank 1" in p.stdout


def test_sendrecv_objects_buffers_wildcards_proc_null_and_timeout(run):
    """Sendrecv sends once this thread reads the peer's stream (core
    sendrecv): objects with out-of-band buffers, ANY_SOURCE with a status,
    PROC_NULL, and a receive that times out while its send still arrives."""
    assert_ok(
        run(
            2,
            """
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
r, p = comm.rank, 1 - comm.rank
big = np.arange(300000, dtype=np.float64) * (r + 1)
got = comm.sendrecv({"a": big, "r": r}, dest=p, sendtag=3, source=p, recvtag=3)
assert got["r"] == p and np.array_equal(got["a"], np.arange(300000) * (p + 1))
st = MPI.Status()
out = np.zeros(5)
comm.Sendrecv(np.full(5, float(r)), dest=p, sendtag=4, recvbuf=out, source=MPI.ANY_SOURCE, recvtag=4, status=st)
assert st.Get_source() == p and (out == p).all()
assert comm.sendrecv("x", dest=MPI.PROC_NULL, source=MPI.PROC_NULL) is None
try:
    comm.sendrecv("y", dest=p, sendtag=5, source=p, recvtag=6, timeout=0.3)
    raise SystemExit("no timeout")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_TIMEOUT
comm.Barrier()
assert comm.recv(source=p, tag=5) == "y"
print("OK", flush=True)
""",
        ),
        2,
    )


SAME_HOST = """
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
peer = 1 - comm.rank
# Both ranks at once, more than a ring holds (1 MiB): a send made while
# this thread holds its peer's stream must not wait for room only it makes.
for size in (8, 600 << 10, 3 << 20, 5 << 20):  # the first opens both streams; the last goes by reference
    buf = (np.arange(size) % 251).astype(np.uint8)
    got = np.empty_like(buf)
    comm.Sendrecv(buf, dest=peer, recvbuf=got, source=peer, timeout=30)
    assert (got == buf).all()
with open("/proc/self/maps") as f:
    rings = "mpiws-local" in f.read()
print("RINGS", rings, flush=True)
"""


@pytest.mark.parametrize("nolocal", [False, True], ids=["default", "MPIWS_NOLOCAL"])
def test_ranks_on_one_host_share_memory_unless_told_not_to(run, nolocal):
    p = run(2, SAME_HOST, env={"MPIWS_NOLOCAL": "1"} if nolocal else {})
    assert_ok(p, 2, "RINGS")
    assert p.stdout.count(f"RINGS {not nolocal}") == 2, p.stdout


PULLED = """
import time
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
big = lambda k: (np.arange(4 << 20) % (251 - k)).astype(np.uint8)  # 4 MiB: by reference
if comm.rank == 0:
    comm.Send(big(0), dest=1, tag=1)  # a receive waits for it
    comm.send({"a": big(1), "b": big(2)}, dest=1, tag=2)  # an object with two buffers
    MPI.Request.Waitall([comm.Isend(big(3), dest=1, tag=3), comm.Isend(big(4), dest=1, tag=4)])
    comm.Send(big(5), dest=1, tag=5)  # received late
else:
    got = np.empty(4 << 20, np.uint8)
    comm.Recv(got, source=0, tag=1)
    assert (got == big(0)).all()
    o = comm.recv(source=0, tag=2)
    assert (o["a"] == big(1)).all() and (o["b"] == big(2)).all()
    comm.Recv(got, source=0, tag=4)  # tags select: 4 before 3
    assert (got == big(4)).all()
    comm.Recv(got, source=0, tag=3)
    assert (got == big(3)).all()
    time.sleep(0.5)
    comm.Recv(got, source=0, tag=5)
    assert (got == big(5)).all()
print("OK", flush=True)
"""


@pytest.mark.parametrize("pull", ["1", "0"], ids=["by-reference", "MPIWS_LOCAL_PULL=0"])
def test_large_payloads_between_ranks_on_one_host_are_copied_once_from_the_sender(tmp_path, pull):
    """A large payload between ranks on one host is copied by its receiver
    straight from the sender's memory (process_vm_readv), one system call per
    message, into the receive waiting for it or aside; with the pull off it
    crosses the rings. Either way every byte arrives, tags select, a late
    receive gets its message (counted under strace)."""
    from netns import install_packages

    install_packages(strace="strace")
    script = tmp_path / "pulled.py"
    script.write_text(PULLED)
    trace = tmp_path / "trace"
    env = dict(os.environ, MPIWS_LOCAL_PULL=pull)
    cmd = [sys.executable, "-m", "mpiws", "run", "-n", "2", "-l", str(script)]
    p = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=process_vm_readv", "-o", str(trace), *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert_ok(p, 2)
    copied = [int(m) for m in re.findall(r"process_vm_readv\(.*\) = (\d+)", trace.read_text())]
    payloads = [n for n in copied if n >= 4 << 20]
    if pull == "1":
        # Five messages, each one call (the object's two buffers in one).
        assert len(payloads) == 5 and sum(payloads) >= 6 * (4 << 20), copied
    else:
        assert copied == [], copied
