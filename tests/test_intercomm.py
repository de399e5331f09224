"""Intercommunicators (MPI/intercomm.py): Create_intercomm between the even
and the odd ranks, point-to-point naming the remote group's ranks, the
collectives' root rules and directions, Merge, Dup, Split, Create and
Create_from_groups; mpi4py's test_comm_inter and test_cco_*_inter pass on
top of them (docs/mpi4py-compat.md)."""

from conftest import assert_ok

PRELUDE = """
import numpy as np
from mpiws import MPI

world = MPI.COMM_WORLD
wrank, n = world.Get_rank(), world.Get_size()
color = wrank % 2
local = world.Split(color, key=wrank)
# leaders: world ranks 0 (evens) and 1 (odds)
inter = local.Create_intercomm(0, world, 1 - color)
rank, size, rsize = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
evens, odds = list(range(0, n, 2)), list(range(1, n, 2))
mine, theirs = (evens, odds) if color == 0 else (odds, evens)
"""


def test_create_point_to_point_and_groups(run):
    p = run(
        4,
        PRELUDE
        + """
assert isinstance(inter, MPI.Intercomm) and inter.Is_inter() and not inter.is_intra
assert (rank, size, rsize) == (wrank // 2, 2, 2)
assert inter.Get_group().Translate_ranks() == mine
assert inter.Get_remote_group().Translate_ranks() == theirs
assert inter.remote_group.Get_rank() == MPI.UNDEFINED
assert type(MPI.Comm.fromhandle(inter.tohandle())) is MPI.Intercomm
for bad in (lambda: MPI.Intracomm(inter), lambda: MPI.Intercomm(local)):
    try:
        bad()
        raise AssertionError("no TypeError")
    except TypeError:
        pass

# dest and source are ranks of the remote group: even rank k talks to odd rank k
st = MPI.Status()
if color == 0:
    inter.send(("from", wrank), dest=rank, tag=3)
    got = inter.recv(source=MPI.ANY_SOURCE, tag=4, status=st)
    assert got == ("back", theirs[rank]) and st.Get_source() == rank, (got, st.Get_source())
else:
    got = inter.recv(source=rank, tag=3)
    assert got == ("from", theirs[rank]), got
    inter.send(("back", wrank), dest=rank, tag=4)
buf = np.zeros(3, "i")
prev = (rank - 1) % rsize
req = inter.Irecv(buf, source=prev, tag=5)
inter.Send(np.arange(3, dtype="i") + wrank, dest=(rank + 1) % rsize, tag=5)
req.Wait(st)
assert list(buf) == list(np.arange(3) + theirs[prev]) and st.Get_source() == prev
# out of range names the remote group's size
try:
    inter.send(None, dest=rsize)
    raise AssertionError("sent to a rank past the remote group")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_RANK

dup = inter.Dup()
assert MPI.Comm.Compare(inter, dup) == MPI.CONGRUENT and inter.Compare(inter) == MPI.IDENT
assert MPI.Comm.Compare(inter, local) == MPI.UNEQUAL
# a message on the duplicate is not the original's
if color == 0:
    dup.send("dup", dest=rank, tag=7)
    inter.send("orig", dest=rank, tag=7)
else:
    assert inter.recv(source=rank, tag=7) == "orig"
    assert dup.recv(source=rank, tag=7) == "dup"
dup.Free()
print("OK", flush=True)
""",
    )
    assert_ok(p, 4)


def test_collectives_follow_the_root_rules(run):
    p = run(
        4,
        PRELUDE
        + """
# bcast from even rank 1 (local) to all odd ranks
for root_group in (0, 1):
    for r in range(2):
        if color == root_group:
            root = MPI.ROOT if rank == r else MPI.PROC_NULL
            assert inter.bcast({"from": wrank} if rank == r else None, root=root) is None
            b = np.arange(4, dtype="d") * (r + 1) if rank == r else None
            inter.Bcast(b, root=root)
        else:
            assert inter.bcast(None, root=r) == {"from": theirs[r]}
            b = np.zeros(4, "d")
            inter.Bcast(b, root=r)
            assert list(b) == [0, r + 1, 2 * (r + 1), 3 * (r + 1)]

# gather and reduce: the other group's values at the root
if color == 0:
    assert inter.gather(None, root=MPI.ROOT if rank == 0 else MPI.PROC_NULL) == ([("v", w) for w in theirs] if rank == 0 else None)
    assert inter.reduce(None, op=MPI.SUM, root=MPI.ROOT if rank == 0 else MPI.PROC_NULL) == (sum(theirs) if rank == 0 else None)
    g = np.zeros((rsize, 2), "i") if rank == 0 else None
    inter.Gather(None, g, root=MPI.ROOT if rank == 0 else MPI.PROC_NULL)
    if rank == 0:
        assert g.tolist() == [[w, -w] for w in theirs]
else:
    assert inter.gather(("v", wrank), root=0) is None
    assert inter.reduce(wrank, op=MPI.SUM, root=0) is None
    inter.Gather(np.array([wrank, -wrank], "i"), None, root=0)

# a bad root is ERR_ROOT, before any message
try:
    inter.bcast(None, root=rsize)
    raise AssertionError("no error")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_ROOT

# all-to-all kinds: each group receives the other's data
assert inter.allgather(wrank) == theirs
assert inter.allreduce(wrank, op=MPI.SUM) == sum(theirs)
assert inter.alltoall([(wrank, j) for j in range(rsize)]) == [(w, rank) for w in theirs]
r = np.zeros(3, "d")
inter.Allreduce(np.full(3, wrank, "d"), r, op=MPI.MAX)
assert list(r) == [max(theirs)] * 3
ag = np.zeros((rsize, 2), "i")
inter.Allgather(np.array([wrank, 1], "i"), ag)
assert ag.tolist() == [[w, 1] for w in theirs]
# Reduce_scatter_block: the other group's sum, one element per local rank
out = np.zeros(1, "i")
inter.Reduce_scatter_block(np.arange(rsize, dtype="i") + wrank, out, op=MPI.SUM)
assert out[0] == sum(theirs) + rank * rsize, out

# non-blocking forms return requests, completed in the order started
reqs = [inter.ibarrier(), inter.iallgather(wrank * 10), inter.Ibarrier()]
assert isinstance(reqs[1], MPI.Request)
assert MPI.Request.waitall(reqs) == [None, [w * 10 for w in theirs], None]
x = np.zeros(2, "i")
req = inter.Iallreduce(np.array([wrank, 1], "i"), x, op=MPI.SUM)
req.Wait()
assert x.tolist() == [sum(theirs), rsize]
print("OK", flush=True)
""",
    )
    assert_ok(p, 4)


def test_merge_split_create_and_from_groups(run):
    p = run(
        4,
        PRELUDE
        + """
# Merge: the high=False group first, each in its local order
merged = inter.Merge(high=(color == 1))
assert merged.Get_group().Translate_ranks() == evens + odds
assert merged.Get_rank() == (evens + odds).index(wrank)
assert merged.allreduce(1) == n
flipped = inter.Merge(high=(color == 0))
assert flipped.Get_group().Translate_ranks() == odds + evens

# Split: each colour's local ranks with the remote ranks of the same colour
part = inter.Split(rank, key=0)
assert part.Get_size() == 1 and part.Get_remote_size() == 1
assert part.Get_remote_group().Translate_ranks() == [theirs[rank]]
assert part.allgather(wrank) == [theirs[rank]]
none = inter.Split(MPI.UNDEFINED)
assert none == MPI.COMM_NULL

# Create: the local rank 0s only
sub = inter.Create(inter.Get_group().Incl([0]))
if rank == 0:
    assert sub.Get_remote_group().Translate_ranks() == [theirs[0]]
    assert sub.bcast(wrank if color == 0 else None, root=MPI.ROOT if color == 0 else 0) == (None if color == 0 else 0)
else:
    assert sub == MPI.COMM_NULL

# Create_from_groups: the same groups, made without a peer communicator
g = world.Get_group()
made = MPI.Intercomm.Create_from_groups(g.Incl(mine), 0, g.Incl(theirs), 0)
assert MPI.Comm.Compare(made, inter) == MPI.CONGRUENT
assert made.allgather(wrank) == theirs
for c in (merged, flipped, part, made):
    c.Free()
if sub != MPI.COMM_NULL:
    sub.Free()
inter.Free()
assert inter == MPI.COMM_NULL
print("OK", flush=True)
""",
    )
    assert_ok(p, 4)
