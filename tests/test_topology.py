"""Process topologies and neighbourhood collectives (MPI/topology.py,
MPI/neighbor.py): Cartesian coordinates and shifts, graphs, distributed
graphs, and what each neighbour receives, on real domains of rank
processes and on a rank's own communicator."""

import pytest

from conftest import assert_ok
from mpiws import MPI


def test_compute_dims_balances_as_mpich_does():
    assert MPI.Compute_dims(12, 2) == [4, 3]
    assert MPI.Compute_dims(72, 2) == [9, 8]
    assert MPI.Compute_dims(128, 3) == [8, 4, 4]
    assert MPI.Compute_dims(120, 4) == [5, 4, 3, 2]
    assert MPI.Compute_dims(12, [0, 2, 0]) == [3, 2, 2]
    assert MPI.Compute_dims(5, 2) == [5, 1]
    with pytest.raises(MPI.Exception) as e:
        MPI.Compute_dims(7, [2, 0])
    assert e.value.Get_error_class() == MPI.ERR_DIMS


def test_constants_and_classes():
    assert (MPI.GRAPH, MPI.CART, MPI.DIST_GRAPH) == (1, 2, 3)  # MPICH's values
    assert issubclass(MPI.Cartcomm, MPI.Topocomm) and issubclass(MPI.Topocomm, MPI.Intracomm)
    assert MPI.Cartcomm(MPI.COMM_NULL) == MPI.COMM_NULL
    assert MPI.COMM_SELF.Get_topology() == MPI.UNDEFINED and not MPI.COMM_SELF.is_topo
    with pytest.raises(TypeError):
        MPI.Topocomm(MPI.COMM_SELF)


def test_topology_on_a_rank_alone():
    cart = MPI.COMM_SELF.Create_cart([1], periods=[True])
    try:
        assert cart.topology == MPI.CART and cart.topo == ([1], [1], [0])
        assert cart.Shift(0, 1) == (0, 0)
        assert type(cart.Dup()) is MPI.Cartcomm and type(MPI.Comm.fromhandle(cart.handle)) is MPI.Cartcomm
        with pytest.raises(TypeError):
            MPI.Graphcomm(cart)
        # A periodic dimension of 1: both neighbours are this rank; the block
        # sent to the positive neighbour arrives as the negative one's.
        assert cart.neighbor_alltoall(["to -", "to +"]) == ["to +", "to -"]
    finally:
        cart.Free()
    line = MPI.COMM_SELF.Create_cart([1], periods=False)
    recv = bytearray(b"xxxx")
    line.Neighbor_allgather(bytearray(b"ab"), recv)
    assert line.inedges == [MPI.PROC_NULL] * 2 and recv == b"xxxx"  # PROC_NULL blocks untouched
    assert line.neighbor_allgather(1) == [None, None]
    line.Free()
    dist = MPI.COMM_SELF.Create_dist_graph([0], [2], [0, 0], [5, 6])
    assert dist.Get_dist_neighbors() == ([0, 0], [0, 0], ([5, 6], [5, 6]))
    assert dist.neighbor_alltoall(["a", "b"]) == ["a", "b"]  # two edges between the same ranks match in order
    dist.Free()
    with pytest.raises(ValueError):
        MPI.COMM_SELF.Create_dist_graph_adjacent([0], [0], MPI.WEIGHTS_EMPTY, MPI.WEIGHTS_EMPTY)


def test_cartesian_grid_of_four(run):
    p = run(
        4,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
rank = world.rank
cart = world.Create_cart([2, 2], periods=[True, False])
assert type(cart) is MPI.Cartcomm and cart.dims == [2, 2] and cart.periods == [1, 0]
assert cart.coords == [rank // 2, rank % 2] == cart.Get_coords(rank)
assert cart.Get_cart_rank([3, 1]) == 3  # periodic: 3 is 1 along dimension 0
assert cart.Shift(0, 1) == ((rank + 2) % 4, (rank + 2) % 4)
along = cart.Shift(1, 1)
assert along == ((MPI.PROC_NULL, rank + 1) if rank % 2 == 0 else (rank - 1, MPI.PROC_NULL)), along
nbrs = [(rank + 2) % 4, (rank + 2) % 4, *along]
assert cart.inoutedges == (nbrs, nbrs) and cart.degrees == (4, 4)

# Block i to out-neighbour i; block j from in-neighbour j, which sent it
# towards this rank: -1 for a neighbour that is PROC_NULL (left untouched).
send = np.array([100 * rank + i for i in range(4)], dtype="i")
recv = np.full(4, -1, dtype="i")
cart.Neighbor_alltoall(send, recv)
want = [100 * nbrs[j] + (j ^ 1) if nbrs[j] != MPI.PROC_NULL else -1 for j in range(4)]
assert list(recv) == want, (list(recv), want)
recv[:] = -1
cart.Ineighbor_alltoall(send, recv).Wait()
assert list(recv) == want
gathered = np.full((4, 2), -1, dtype="d")
req = cart.Neighbor_allgather_init(np.array([rank, rank + 0.5]), gathered)
for _ in range(2):
    req.Start()
    req.Wait()
    assert [list(row) for row in gathered] == [[n, n + 0.5] if n >= 0 else [-1, -1] for n in nbrs]
req.Free()
assert cart.neighbor_allgather(rank) == [n if n >= 0 else None for n in nbrs]

row = cart.Sub([False, True])
assert row.size == 2 and row.dims == [2] and row.coords == [rank % 2] and row.periods == [0]
col = cart.Sub([True, False])
assert col.dims == [2] and col.rank == rank // 2
for c in (row, col, cart):
    c.Free()
print("OK")
""",
    )
    assert_ok(p, 4)


def test_graphs_of_three(run):
    p = run(
        3,
        """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
rank, n = world.rank, world.size
# A ring with one-way edges: rank r sends to r+1, receives from r-1.
dist = world.Create_dist_graph_adjacent([(rank - 1) % n], [(rank + 1) % n], [rank], [rank + 10])
assert dist.topology == MPI.DIST_GRAPH and dist.Get_dist_neighbors_count() == (1, 1, True)
assert dist.neighbor_alltoall([f"from {rank}"]) == [f"from {(rank - 1) % n}"]
got = np.full(3, -1, dtype="i")
dist.Neighbor_alltoallv([np.array([rank, 7, 7], dtype="i"), [1], [0], MPI.INT], [got, [1], [2], MPI.INT])
assert list(got) == [-1, -1, (rank - 1) % n]
# The same ring, each rank naming the edge out of the next one.
named = world.Create_dist_graph([(rank + 1) % n], [1], [(rank + 2) % n])
assert named.Get_dist_neighbors() == ([(rank - 1) % n], [(rank + 1) % n], None)
edges = [e for i in range(n) for e in ((i - 1) % n, (i + 1) % n)]
graph = world.Create_graph([2, 4, 6], edges)  # a ring both ways
ring = [(rank - 1) % n, (rank + 1) % n]
assert graph.topo == ([2, 4, 6], edges) and graph.neighbors == ring and graph.Get_neighbors(0) == [2, 1]
assert graph.neighbor_allgather(rank) == ring
for c in (dist, named, graph):
    c.Free()
print("OK")
""",
    )
    assert_ok(p, 3)


TORUS = """
import numpy as np
from mpiws import MPI
world = MPI.COMM_WORLD
dims = MPI.Compute_dims(world.size, 2)
torus = world.Create_cart(dims, periods=[True, True])
rank = torus.rank
# Each rank's four neighbours (-x, +x, -y, +y): what it must receive from them.
nbrs = [n for d in range(2) for n in torus.Shift(d, 1)]
send = np.array([1000 * rank + i for i in range(4)], dtype="i8")
recv = np.full(4, -1, dtype="i8")
# Blocking, non-blocking and persistent (two rounds) forms agree.
torus.Neighbor_alltoall(send, recv)
want = [1000 * nbrs[j] + (j ^ 1) for j in range(4)]
assert list(recv) == want, (list(recv), want)
req = torus.Neighbor_alltoall_init(send, recv)
for round_ in range(2):
    send += 1
    recv[:] = -1
    req.Start()
    req.Wait()
    assert list(recv) == [w + round_ + 1 for w in want]
req.Free()
recv[:] = -1
torus.Ineighbor_allgather(np.array([rank], dtype="i8"), recv).Wait()
assert list(recv) == nbrs
assert torus.neighbor_alltoall([(rank, j) for j in range(4)]) == [(nbrs[j], j ^ 1) for j in range(4)]
print("OK")
"""


@pytest.mark.parametrize("n", range(1, 9))
def test_torus_neighbour_collectives_on_1_to_8_ranks(run, n):
    assert_ok(run(n, TORUS), n)
