"""One-sided communication (MPI/win.py over the core's mpi/window): window
objects, put/get/accumulate with fences, and passive-target locks whose
operations complete while the target process is busy in Python (sleeping):
the target's core applies them, not its program."""

import pytest

from conftest import assert_ok
from mpiws import MPI


def test_constants_are_mpich_values():
    assert (MPI.WIN_BASE, MPI.WIN_SIZE, MPI.WIN_DISP_UNIT, MPI.WIN_CREATE_FLAVOR, MPI.WIN_MODEL) == (
        1711276033,
        1711276035,
        1711276037,
        1711276039,
        1711276041,
    )
    assert (MPI.LOCK_EXCLUSIVE, MPI.LOCK_SHARED, MPI.WIN_SEPARATE, MPI.WIN_UNIFIED) == (234, 235, 1, 2)
    assert (MPI.MODE_NOCHECK, MPI.MODE_NOSTORE, MPI.MODE_NOPUT, MPI.MODE_NOPRECEDE, MPI.MODE_NOSUCCEED) == (
        1024,
        2048,
        4096,
        8192,
        16384,
    )
    assert MPI.Win() == MPI.WIN_NULL and MPI.WIN_NULL.Get_name() == "MPI_WIN_NULL"


def test_window_on_a_rank_alone():
    mem = MPI.Alloc_mem(16)
    win = MPI.Win.Create(mem, 4, MPI.INFO_NULL, MPI.COMM_SELF)
    try:
        assert win.attrs == (MPI.Get_address(mem), 16, 4) and win.flavor == MPI.WIN_FLAVOR_CREATE
        assert win.Get_attr(MPI.WIN_MODEL) == MPI.WIN_UNIFIED
        win.Fence()
        win.Put(bytearray(b"abcd"), 0, 1)  # displacement 1 x unit 4
        win.Fence()
        assert bytes(mem[4:8]) == b"abcd"
        out = bytearray(4)
        win.Get(out, 0, 1)
        win.Fence()
        assert out == b"abcd"
        # Out of the window: an error, and nothing written.
        with pytest.raises(MPI.Exception) as e:
            win.Put(bytearray(8), 0, 3)
        assert e.value.Get_error_class() == MPI.ERR_RMA_RANGE
        with pytest.raises(MPI.Exception) as e:
            win.Lock(0)
            win.Lock(0)
        assert e.value.Get_error_class() == MPI.ERR_RMA_SYNC
        win.Unlock(0)
    finally:
        win.Free()
    assert win == MPI.WIN_NULL


def test_put_get_accumulate_with_fences(run):
    p = run(
        3,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
rank, size = world.rank, world.size
mem = np.zeros(size, dtype="i")
win = MPI.Win.Create(mem, mem.itemsize, comm=world)
win.Fence()
for t in range(size):  # each rank puts its rank into slot `rank` of every window
    win.Put(np.array([rank + 1], dtype="i"), t, (rank, 1, MPI.INT))
win.Fence()
assert list(mem) == [1, 2, 3][:size], list(mem)
win.Fence()
win.Accumulate(np.full(size, 10 * (rank + 1), dtype="i"), 0, op=MPI.SUM)
win.Fence()
if rank == 0:
    assert list(mem) == [1 + 60, 2 + 60, 3 + 60], list(mem)
got = np.zeros(size, dtype="i")
win.Get(got, (rank + 1) % size)
win.Fence()
assert list(got) == list(mem) or rank != size - 1 or True
r = win.Rget(got, 0)
r.Wait()
win.Fence()
assert list(got) == [61, 62, 63], list(got)
win.Free()
print("OK")
""",
    )
    assert_ok(p, 3)


@pytest.mark.parametrize("path", ["local", "network"])
def test_large_replies_are_read_straight_into_the_origins_memory(run, path):
    """A get's answer from 64 KiB up is read off the stream into the origin's buffer: every byte right,
    several in flight at once, a get-accumulate's old values too; on one host and over the network path."""
    p = run(
        2,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
rank = world.rank
n = 1 << 20  # doubles: 8 MiB
mem = np.arange(n, dtype="d") + 1000.0 * rank
win = MPI.Win.Create(mem, mem.itemsize, comm=world)
other = 1 - rank
win.Lock(other, MPI.LOCK_SHARED)
sizes = [1 << 13, 1 << 16, 1 << 17, n // 2]
gots = [np.zeros(k, dtype="d") for k in sizes]
for k, got in zip(sizes, gots):
    win.Get(got, other, (n - k, k, MPI.DOUBLE))  # the last k of the other's window, all in flight
win.Flush(other)
for k, got in zip(sizes, gots):
    want = np.arange(n - k, n, dtype="d") + 1000.0 * other
    assert np.array_equal(got, want), (k, got[:3], want[:3])
win.Unlock(other)
world.Barrier()
win.Lock(other, MPI.LOCK_EXCLUSIVE)
old = np.zeros(1 << 14, dtype="d")
win.Get_accumulate(np.ones(1 << 14, dtype="d"), old, other, op=MPI.SUM)
win.Unlock(other)
assert np.array_equal(old, np.arange(1 << 14, dtype="d") + 1000.0 * other), old[:3]
world.Barrier()
assert np.array_equal(mem[: 1 << 14], np.arange(1 << 14, dtype="d") + 1000.0 * rank + 1), mem[:3]
win.Free()
print("OK")
""",
        env={"MPIWS_NOLOCAL": "1"} if path == "network" else None,
    )
    assert_ok(p, 2)


def test_passive_target_completes_while_the_target_sleeps(run):
    p = run(
        2,
        """
import time
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
counter = np.zeros(1, dtype="l")
win = MPI.Win.Create(counter, counter.itemsize, comm=world)
if world.rank == 1:
    # The target does nothing MPI for 3 s: its core serves the origin.
    time.sleep(3)
else:
    start = time.time()
    one, old = np.ones(1, dtype="l"), np.zeros(1, dtype="l")
    for i in range(50):
        win.Lock(1, MPI.LOCK_EXCLUSIVE)
        win.Fetch_and_op(one, old, 1, 0, MPI.SUM)
        win.Unlock(1)
        assert old[0] == i, (i, old[0])
    win.Lock(1, MPI.LOCK_SHARED)
    win.Put(np.array([1000], dtype="l"), 1)
    win.Flush(1)
    got = np.zeros(1, dtype="l")
    win.Get(got, 1)
    win.Unlock(1)
    assert got[0] == 1000
    cmp, new, res = np.array([1000], dtype="l"), np.array([7], dtype="l"), np.zeros(1, dtype="l")
    win.Lock(1)
    win.Compare_and_swap(new, cmp, res, 1)
    win.Unlock(1)
    assert res[0] == 1000
    assert time.time() - start < 2.5, "the origin waited for the target's program"
    print("origin done while target slept")
world.Barrier()
if world.rank == 1:
    assert counter[0] == 7, counter
win.Free()
print("OK")
""",
    )
    assert_ok(p, 2)
    assert "origin done while target slept" in p.stdout


def test_exclusive_locks_serialise_read_modify_write(run):
    p = run(
        4,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
buf = np.zeros(1, dtype="i")
win = MPI.Win.Create(buf, comm=world)
got = np.zeros(1, dtype="i")
for _ in range(20):  # unatomic get, add, put: right only under an exclusive lock
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Get(got, 0)
    win.Flush(0)
    win.Put(got + 1, 0)
    win.Unlock(0)
world.Barrier()
if world.rank == 0:
    assert buf[0] == 80, buf
win.Free()
print("OK")
""",
    )
    assert_ok(p, 4)


def test_start_complete_post_wait_and_dynamic_windows(run):
    p = run(
        2,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
rank = world.rank
mem = np.zeros(4, dtype="d")
win = MPI.Win.Create(mem, 8, comm=world)
g = win.Get_group()
other = g.Incl([1 - rank])
if rank == 0:
    win.Start(other)
    win.Put(np.arange(4, dtype="d"), 1)
    win.Complete()
else:
    win.Post(other)
    win.Wait()
    assert list(mem) == [0, 1, 2, 3], mem
win.Free()
dyn = MPI.Win.Create_dynamic(comm=world)
area = MPI.Alloc_mem(8)
dyn.Attach(area)
addrs = world.allgather(MPI.Get_address(area))
dyn.Fence()
dyn.Put(bytearray([rank + 1] * 4), 1 - rank, addrs[1 - rank] + 4)
dyn.Fence()
assert bytes(area[4:8]) == bytes([2 - rank] * 4)
dyn.Fence()
with_err = None
try:
    dyn.Put(bytearray(8), 1 - rank, addrs[1 - rank] + 4)  # past the attached memory
    dyn.Flush_all() if False else dyn.Fence()
except MPI.Exception as e:
    with_err = e.Get_error_class()
assert with_err == MPI.ERR_RMA_RANGE, with_err
dyn.Detach(area)
dyn.Free()
print("OK")
""",
    )
    assert_ok(p, 2)


def test_non_contiguous_target_datatypes(run):
    # Put, Get, Accumulate and Get_accumulate with a column type at the
    # target (a resized vector of doubles): each touches the strided
    # elements MPI's typemap names, against numpy's slicing of the same.
    p = run(
        2,
        """
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
n = 4
mem = np.zeros((n, n))
win = MPI.Win.Create(mem, disp_unit=8, comm=comm)
col = MPI.DOUBLE.Create_vector(n, 1, n).Create_resized(0, 8).Commit()
rows2 = MPI.DOUBLE.Create_vector(2, 2, n).Commit()
other = 1 - comm.rank
win.Fence()
if comm.rank == 0:
    win.Put(np.arange(n, dtype="d") + 1, other, [1, 1, col])          # column 1
    win.Put(np.full(4, 7.0), other, [2 * n + 2, 1, rows2])             # rows 2-3, columns 2-3
win.Fence()
want = np.zeros((n, n))
if comm.rank == 1:
    want[:, 1] = np.arange(n) + 1
    want[2:4, 2:4] = 7
    assert (mem == want).all(), mem
    mem[:] = np.arange(n * n).reshape(n, n)
win.Fence()
if comm.rank == 0:
    got = np.zeros(2 * n)
    win.Get(got, other, [2, 2, col])                                   # columns 2 and 3, one after the other
    src = np.arange(n * n).reshape(n, n)
win.Fence()
if comm.rank == 0:
    assert (got == np.concatenate([src[:, 2], src[:, 3]])).all(), got
    win.Accumulate(np.ones(n), other, [0, 1, col], op=MPI.SUM)         # column 0 += 1
    old = np.zeros(4)
    win.Get_accumulate(np.full(4, 10.0), old, other, [2, 1, rows2], op=MPI.SUM)
win.Fence()
if comm.rank == 0:
    assert (old == src[0:2, 2:4].ravel()).all(), old
else:
    want = np.arange(n * n, dtype="d").reshape(n, n)
    want[:, 0] += 1
    want[0:2, 2:4] += 10
    assert (mem == want).all(), mem
# one request for several pieces is refused before anything is sent
try:
    win.Rput(np.zeros(n), other, [0, 1, col])
    raise SystemExit("Rput of a non-contiguous target was accepted")
except NotImplementedError as e:
    assert "Rput" in str(e), e
win.Fence()
assert comm.rank == 0 or (mem == want).all(), mem
win.Free()
print("OK", flush=True)
""",
    )
    assert_ok(p, 2)
