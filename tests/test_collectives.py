"""Collectives on real domains of 1 to 8 rank processes: every call, every
algorithm, every root, objects and buffers of several datatypes, each
checked against the result computed serially (every rank can compute every
rank's input)."""

import pytest

from conftest import assert_ok

RANKS = [1, 2, 3, 4, 5, 7, 8]

PRELUDE = """
import numpy as np
from mpiws import MPI
from mpiws import _core
comm = MPI.COMM_WORLD
rank, n = comm.rank, comm.size
ALGOS = _core.ALGORITHMS

def each_algorithm(*names):
    # every algorithm of the named collectives, one after the other
    combos = [[]]
    for name in names:
        combos = [c + [(name, a)] for c in combos for a in ALGOS[name]]
    for combo in combos:
        for name, a in combo:
            comm.Set_algorithm(name, a)
        yield dict(combo)
    for name in names:
        comm.Set_algorithm(name, "auto")

def vec(r, k=6, dtype="d"):
    return ((np.arange(k) * 3 + 1) * (r + 1) % 11 + r).astype(dtype)
"""


@pytest.mark.parametrize("n", RANKS)
def test_object_collectives(run, n):
    p = run(
        n,
        PRELUDE
        + """
objs = [{"rank": r, "data": list(range(r + 1))} for r in range(n)]
for algo in each_algorithm("bcast", "gather", "scatter", "allgather"):
    for root in range(n):
        assert comm.bcast(objs[root] if rank == root else None, root=root) == objs[root], algo
        g = comm.gather(objs[rank], root=root)
        assert g == (objs if rank == root else None), (algo, root, g)
        s = comm.scatter([("to", r, root) for r in range(n)] if rank == root else None, root=root)
        assert s == ("to", rank, root)
    assert comm.allgather(objs[rank]) == objs, algo
assert comm.alltoall([(rank, d) for d in range(n)]) == [(s, rank) for s in range(n)]

ops = [(MPI.SUM, sum), (MPI.PROD, lambda v: np.prod(v).item()), (MPI.MAX, max), (MPI.MIN, min)]  # ops are unhashable, as in mpi4py
vals = [r * 3 - 4 for r in range(n)]
for op, f in ops:
    assert comm.allreduce(vals[rank], op=op) == f(vals), op
    for root in range(n):
        assert comm.reduce(vals[rank], op=op, root=root) == (f(vals) if rank == root else None)
    assert comm.scan(vals[rank], op=op) == f(vals[: rank + 1])
    assert comm.exscan(vals[rank], op=op) == (f(vals[:rank]) if rank else None)
bits = [r | 4 for r in range(n)]
assert comm.allreduce(bits[rank], op=MPI.BAND) == np.bitwise_and.reduce(bits)
assert comm.allreduce(bits[rank], op=MPI.BOR) == np.bitwise_or.reduce(bits)
assert comm.allreduce(bits[rank], op=MPI.BXOR) == np.bitwise_xor.reduce(bits)
assert comm.allreduce(rank > 0, op=MPI.LAND) == all(r > 0 for r in range(n))
assert bool(comm.allreduce(rank == 1, op=MPI.LOR)) == (n > 1)
assert comm.allreduce(True, op=MPI.LXOR) == (n % 2 == 1)
pairs = [(v % 5, r) for r, v in enumerate(vals)]
assert comm.allreduce(pairs[rank], op=MPI.MAXLOC) == max(pairs, key=lambda p: (p[0], -p[1]))
assert comm.allreduce(pairs[rank], op=MPI.MINLOC) == min(pairs, key=lambda p: (p[0], p[1]))
assert comm.allreduce(rank, op=MPI.REPLACE) == n - 1
assert comm.allreduce(rank, op=MPI.NO_OP) == 0
assert comm.allreduce([rank], op=lambda a, b: a + b) == list(range(n))  # any callable, in rank order
# numpy arrays with a builtin op are reduced in the core, with every algorithm
for algo in each_algorithm("allreduce"):
    for k in (1, 7, 5000):
        got = comm.allreduce(vec(rank, k))
        assert got.dtype == np.float64 and got.shape == (k,)
        assert np.allclose(got, sum(vec(r, k) for r in range(n))), algo
# non-blocking forms (mpiws)
reqs = [comm.ibcast("hello" if rank == 0 else None), comm.iallreduce(rank), comm.iallgather(rank), comm.ibarrier()]
assert MPI.Request.waitall(reqs) == ["hello", sum(range(n)), list(range(n)), None]
comm.barrier()
print("OK")
""",
    )
    assert_ok(p, n)


@pytest.mark.parametrize("n", RANKS)
def test_buffer_collectives(run, n):
    p = run(
        n,
        PRELUDE
        + """
for dtype, mpitype in (("d", MPI.DOUBLE), ("i", MPI.INT), ("f", MPI.FLOAT), ("q", MPI.INT64_T)):
    for algo in each_algorithm("bcast", "gather", "scatter", "allgather"):
        for root in range(n):
            for k in (0, 5, 70000 // n):
                b = vec(root, k, dtype) if rank == root else np.zeros(k, dtype)
                comm.Bcast([b, mpitype], root=root)
                assert np.array_equal(b, vec(root, k, dtype)), (algo, root, k)
            g = np.zeros((n, 4), dtype) if rank == root else None
            comm.Gather(vec(rank, 4, dtype), g, root=root)
            if rank == root:
                assert np.array_equal(g, np.array([vec(r, 4, dtype) for r in range(n)])), algo
            s = np.zeros(3, dtype)
            comm.Scatter(np.array([vec(r, 3, dtype) for r in range(n)]) if rank == root else None, s, root=root)
            assert np.array_equal(s, vec(rank, 3, dtype))
            counts = [r % 3 + 1 for r in range(n)]
            displs = [sum(counts[:r]) + r for r in range(n)]  # with gaps
            gv = np.full(sum(counts) + n, -1, dtype) if rank == root else None
            comm.Gatherv(vec(rank, counts[rank], dtype), [gv, counts, displs, mpitype] if rank == root else None, root=root)
            if rank == root:
                for r in range(n):
                    assert np.array_equal(gv[displs[r]:displs[r] + counts[r]], vec(r, counts[r], dtype))
            sv = np.zeros(counts[rank], dtype)
            src = np.concatenate([np.append(vec(r, counts[r], dtype), np.array([-1], dtype)) for r in range(n)]) if rank == root else None
            comm.Scatterv([src, counts, displs, mpitype] if rank == root else None, sv, root=root)
            assert np.array_equal(sv, vec(rank, counts[rank], dtype))
        ag = np.zeros((n, 5), dtype)
        comm.Allgather(vec(rank, 5, dtype), ag)
        assert np.array_equal(ag, np.array([vec(r, 5, dtype) for r in range(n)]))
        ag[:] = 0
        ag[rank] = vec(rank, 5, dtype)
        comm.Allgather(MPI.IN_PLACE, ag)
        assert np.array_equal(ag, np.array([vec(r, 5, dtype) for r in range(n)]))
        counts = [r + 1 for r in range(n)]
        agv = np.zeros(sum(counts), dtype)
        comm.Allgatherv(vec(rank, counts[rank], dtype), [agv, counts, None, mpitype])
        assert np.array_equal(agv, np.concatenate([vec(r, counts[r], dtype) for r in range(n)]))
    send = np.array([vec(rank * n + d, 2, dtype) for d in range(n)])
    recv = np.zeros_like(send)
    comm.Alltoall(send, recv)
    assert np.array_equal(recv, np.array([vec(s * n + rank, 2, dtype) for s in range(n)]))
    scounts = [(rank + d) % 3 for d in range(n)]
    rcounts = [(s + rank) % 3 for s in range(n)]
    sbuf = np.concatenate([vec(rank * n + d, scounts[d], dtype) for d in range(n)])
    rbuf = np.zeros(sum(rcounts), dtype)
    comm.Alltoallv([sbuf, scounts, None, mpitype], [rbuf, rcounts, None, mpitype])
    assert np.array_equal(rbuf, np.concatenate([vec(s * n + rank, rcounts[s], dtype) for s in range(n)]))

    ops = [(MPI.SUM, np.sum), (MPI.MAX, np.max), (MPI.MIN, np.min), (MPI.PROD, np.prod)]
    for algo in each_algorithm("reduce", "allreduce"):
        for op, f in ops:
            for k in (1, 9, 40000):
                expect = f(np.array([vec(r, k, dtype) for r in range(n)]), axis=0).astype(dtype)
                out = np.zeros(k, dtype)
                comm.Allreduce(vec(rank, k, dtype), out, op=op)
                assert np.allclose(out, expect), (algo, op, k)
                out = vec(rank, k, dtype)
                comm.Allreduce(MPI.IN_PLACE, out, op=op)
                assert np.allclose(out, expect), (algo, op, k, "in place")
            for root in range(n):
                out = np.zeros(9, dtype) if rank == root else None
                comm.Reduce(vec(rank, 9, dtype), out, op=op, root=root)
                if rank == root:
                    assert np.allclose(out, f(np.array([vec(r, 9, dtype) for r in range(n)]), axis=0)), (algo, op, root)
    total = np.sum([vec(r, 3 * n, dtype) for r in range(n)], axis=0)
    out = np.zeros(3, dtype)
    comm.Reduce_scatter_block(vec(rank, 3 * n, dtype), out)
    assert np.allclose(out, total[3 * rank:3 * rank + 3])
    counts = [r + 1 for r in range(n)]
    full = np.sum([vec(r, sum(counts), dtype) for r in range(n)], axis=0)
    out = np.zeros(counts[rank], dtype)
    comm.Reduce_scatter(vec(rank, sum(counts), dtype), out, counts)
    assert np.allclose(out, full[sum(counts[:rank]):sum(counts[:rank + 1])])
    out = np.zeros(4, dtype)
    comm.Scan(vec(rank, 4, dtype), out)
    assert np.allclose(out, np.sum([vec(r, 4, dtype) for r in range(rank + 1)], axis=0))
    out = np.full(4, 99, dtype)
    comm.Exscan(vec(rank, 4, dtype), out, op=MPI.MAX)
    if rank:
        assert np.allclose(out, np.max([vec(r, 4, dtype) for r in range(rank)], axis=0))
ints = np.array([rank | 8, rank * 5], "i")
for op, f in ((MPI.BAND, np.bitwise_and), (MPI.BOR, np.bitwise_or), (MPI.BXOR, np.bitwise_xor), (MPI.LAND, np.logical_and), (MPI.LOR, np.logical_or)):
    out = np.zeros(2, "i")
    comm.Allreduce(ints, out, op=op)
    expect = f.reduce([np.array([r | 8, r * 5], "i") for r in range(n)])
    if op in (MPI.LAND, MPI.LOR):  # logical results: any non-zero is true
        out, expect = out != 0, expect != 0
    assert np.array_equal(out, expect), op
pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
mine = np.array([((rank * 7) % 4, rank)], pair)
out = np.zeros(1, pair)
comm.Allreduce([mine, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MAXLOC)
best = max(range(n), key=lambda r: ((r * 7) % 4, -r))
assert out["v"][0] == (best * 7) % 4 and out["i"][0] == best
# a user op on buffers: folded in rank order
def concat_max(invec, inoutvec, datatype):
    for i in range(len(inoutvec)):
        inoutvec[i] = max(invec[i], inoutvec[i]) * 2
out = np.zeros(2, "d")
comm.Allreduce(np.array([rank, -rank], "d"), out, op=MPI.Op.Create(concat_max, commute=False))
acc = np.array([0.0, 0.0])
for r in range(1, n):
    acc = np.maximum(acc, [r, -r]) * 2
assert np.array_equal(out, acc), (out, acc)
# user ops: non-blocking, at a root, prefix forms and Reduce_scatter
uop = MPI.Op.Create(concat_max, commute=False)
prefix = [np.array([0.0, 0.0])]
for r in range(1, n):
    prefix.append(np.maximum(prefix[-1], [r, -r]) * 2)
mine = np.array([rank, -rank], "d")
a, s, e = np.zeros(2), np.zeros(2), np.full(2, -7.0)
root_out = np.zeros(2) if rank == n - 1 else None
reqs = [comm.Iallreduce(mine, a, op=uop), comm.Iscan(mine, s, op=uop), comm.Iexscan(mine, e, op=uop),
        comm.Ireduce(mine, root_out, op=uop, root=n - 1)]
MPI.Request.Waitall(reqs)
assert np.array_equal(a, acc) and np.array_equal(s, prefix[rank]), (a, s)
assert np.array_equal(e, prefix[rank - 1] if rank else [-7.0, -7.0]), e
assert root_out is None or np.array_equal(root_out, acc)
def add(invec, inoutvec, datatype):
    for i in range(len(inoutvec)):
        inoutvec[i] += invec[i]
rs = np.zeros(2)
blocks = np.concatenate([[r, -r] for r in range(n)]).astype("d") + rank
comm.Reduce_scatter(blocks, rs, [2] * n, op=MPI.Op.Create(add))
assert np.array_equal(rs, np.array([rank, -rank]) * n + sum(range(n))), rs
# non-blocking forms
a, b = np.zeros(3), np.arange(3.0) if rank == 0 else np.zeros(3)
reqs = [comm.Iallreduce(np.ones(3), a), comm.Ibcast(b, root=0), comm.Ibarrier()]
MPI.Request.Waitall(reqs)
assert list(a) == [n] * 3 and list(b) == [0, 1, 2]
print("OK")
""",
        timeout=300,
    )
    assert_ok(p, n)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_bad_arguments_raise_instead_of_hanging(run, n):
    p = run(
        n,
        PRELUDE
        + """
def fails(cls, f, *a, **k):
    try:
        f(*a, **k)
    except MPI.Exception as e:
        assert e.Get_error_class() == cls, (e.Get_error_class(), cls, str(e))
        return str(e)
    raise AssertionError(f"{f.__name__} did not fail")

fails(MPI.ERR_ROOT, comm.bcast, 1, root=n)
fails(MPI.ERR_ROOT, comm.Reduce, np.ones(2), np.ones(2), root=-1)
fails(MPI.ERR_ROOT, comm.gather, 1, root=n + 5)
fails(MPI.ERR_OP, comm.Allreduce, np.ones(2), np.ones(2), op=MPI.BAND)
fails(MPI.ERR_TYPE, comm.Allreduce, [np.ones(2, "B"), MPI.CHAR], [np.ones(2, "B"), MPI.CHAR])
half = np.zeros(2, "e")  # no arithmetic in the core: folded with numpy
comm.Allreduce(np.ones(2, "e"), half)
assert (half == n).all(), half
comm.Set_algorithm("bcast", "telepathy")
fails(MPI.ERR_ARG, comm.bcast, 1)
comm.Set_algorithm("bcast", "auto")
# sizes that differ between ranks: an error on every rank, not a hang
try:
    comm.Allreduce(np.ones(3 + (rank == 1)), np.ones(3 + (rank == 1)))
    raise AssertionError("mismatched Allreduce succeeded")
except MPI.Exception as e:
    pass
b = np.zeros(4 + (rank == 1))
if rank == 0:
    b[:] = 1
try:
    comm.Bcast(b, root=0)
    assert rank != 1, "a broadcast into a buffer of the wrong size succeeded"
except MPI.Exception as e:
    assert rank == 1 and e.Get_error_class() == MPI.ERR_TRUNCATE
# the communicator still works afterwards
assert comm.allreduce(1) == n
print("OK")
""",
        timeout=120,
    )
    assert_ok(p, n)


@pytest.mark.parametrize("n", [3, 4, 8])
def test_collectives_on_subcommunicators_in_flight_together(run, n):
    p = run(
        n,
        PRELUDE
        + """
dup = comm.Dup()
half = comm.Split(rank % 2, -rank)  # reversed order inside each half
hr, hn = half.rank, half.size
members = [r for r in range(n) if r % 2 == rank % 2][::-1]
assert members[hr] == rank
a, b, c = np.zeros(4), np.zeros(4), np.zeros(hn)
reqs = [
    comm.Iallreduce(np.full(4, rank, "d"), a),
    dup.Iallreduce(np.full(4, 10.0 * rank), b),
    half.Iallgather(np.array([float(rank)]), c),
    half.ibcast(("root of half", members[0]) if hr == 0 else None, root=0),
    dup.iallgather(rank),
]
vals = MPI.Request.waitall(reqs[::-1])[::-1]
assert list(a) == [sum(range(n))] * 4 and list(b) == [10.0 * sum(range(n))] * 4
assert list(c) == [float(m) for m in members]
assert vals[3] == ("root of half", members[0]) and vals[4] == list(range(n))
assert half.allreduce(rank) == sum(members)
assert half.gather(rank, root=hn - 1) == (members if hr == hn - 1 else None)
print("OK")
""",
    )
    assert_ok(p, n)


@pytest.mark.parametrize("n", [1, 4, 5])
def test_groups_and_communicators_made_from_them(run, n):
    p = run(
        n,
        PRELUDE
        + """
world = comm.Get_group()
assert world.size == n and world.rank == rank
evens = world.Incl(list(range(0, n, 2)))
odds = world.Excl(list(range(0, n, 2)))
assert evens.size + odds.size == n
assert evens.rank == (rank // 2 if rank % 2 == 0 else MPI.UNDEFINED)
assert world.Translate_ranks(list(range(n)), evens) == [r // 2 if r % 2 == 0 else MPI.UNDEFINED for r in range(n)]
rev = world.Incl(list(range(n))[::-1])
assert rev.Compare(world) == (MPI.IDENT if n == 1 else MPI.SIMILAR) and evens.Compare(world) == (MPI.IDENT if n == 1 else MPI.UNEQUAL)
assert MPI.Group.Union(evens, odds).Compare(world) in (MPI.IDENT, MPI.SIMILAR)
try:
    world.Incl([n])
    raise AssertionError("Incl accepted a rank out of range")
except MPI.Exception as e:
    assert e.Get_error_class() == MPI.ERR_RANK

# Create: collective over comm, COMM_NULL outside the group
ec = comm.Create(evens)
if rank % 2 == 0:
    assert ec != MPI.COMM_NULL and ec.size == evens.size and ec.rank == rank // 2
    assert ec.allreduce(rank) == sum(range(0, n, 2))
    assert ec.Get_group().Translate_ranks(None, world) == list(range(0, n, 2))
else:
    assert ec == MPI.COMM_NULL
# Create_group: only the members call it; reversed order ranks them backwards
if rank % 2 == 1:
    oc = comm.Create_group(odds.Incl(list(range(odds.size))[::-1]), tag=7)
    assert oc.size == odds.size and oc.rank == odds.size - 1 - rank // 2
    got = oc.allgather(rank)
    assert got == list(range(1, n, 2))[::-1], got
    oc.Barrier()
# Split_type: every local rank shares one host here
shared = comm.Split_type(MPI.COMM_TYPE_SHARED, key=-rank)
assert shared.size == n and shared.rank == n - 1 - rank
assert shared.bcast(rank, root=0) == n - 1
comm.Barrier()
print("OK")
""",
    )
    assert_ok(p, n)
