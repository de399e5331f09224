"""Process topologies: ``Topocomm`` and its ``Cartcomm``, ``Graphcomm`` and
``Distgraphcomm``, made by ``Intracomm.Create_cart`` & co. (which delegate
here), and ``Compute_dims``.

A topology communicator is a new communicator, its core context derived
as ``Dup`` derives one, whose handle state also holds its topology: the
kind (``CART``, ...), its description, and this rank's in- and
out-neighbours, worked out once at creation. Ranks are never reordered
(``reorder`` is accepted and ignored, as MPI allows). Its neighbourhood
collectives (MPI/neighbor.py) are the core's collectives on it, given the
neighbour lists.
"""

import json
import math
import operator
from functools import cache, lru_cache

from .comm import Comm, Intracomm, _Context, constructor
from .exception import ERR_ARG, ERR_DIMS, ERR_RANK, ERR_TOPOLOGY, Exception as MPIException
from .handle import _table
from .neighbor import Neighborhood
from .status import UNDEFINED

PROC_NULL = -1

# MPICH's values (mpi.h).
GRAPH, CART, DIST_GRAPH = 1, 2, 3

# The weights arguments that are no list, told apart by identity as mpi4py
# does (its values are addresses; any distinct ints do).
UNWEIGHTED = 0x7FFF_FFF0_0001
WEIGHTS_EMPTY = 0x7FFF_FFF0_0002


def _ints(seq):
    return [operator.index(x) for x in seq]


def _exactly(seq, n):
    """``seq`` as ``n`` ints (mpi4py's ValueError for another length)."""
    items = _ints(seq)
    if len(items) != n:
        raise ValueError(f"expecting {n} items, got {len(items)}")
    return items


def _periods(periods, ndim):
    if periods is None:
        periods = False
    if isinstance(periods, bool):
        return [periods] * ndim
    return [bool(p) for p in _exactly(periods, ndim)]


def _weights(weights, n):
    """A weights argument as a list, or None when unweighted."""
    if weights is None or weights is UNWEIGHTED:
        return None
    if weights is WEIGHTS_EMPTY:
        if n:
            raise ValueError("empty weights but nonzero degree")
        return []
    weights = _exactly(weights, n)
    if any(w < 0 for w in weights):
        raise MPIException(ERR_TOPOLOGY, f"negative edge weight in {weights}")
    return weights


def _graph_index(index, edges):
    """mpi4py's extension: an index starting at 0 and ending at the number
    of edges is the 'standard' adjacency array, one longer than MPI's."""
    index, edges = _ints(index), _ints(edges)
    if index and index[0] == 0 and index[-1] == len(edges):
        index = index[1:]
    return index, edges


def _check_ranks(ranks, size):
    for r in ranks:
        if not (0 <= r < size or r == PROC_NULL):
            raise MPIException(ERR_RANK, f"invalid rank {r} in a topology over {size} processes")


# ---- what a topology is (one rank's view) -----------------------------------


class _Topology:
    """Its kind, and this rank's in- and out-neighbours (``inedges``,
    ``outedges``). Neighbourhood collectives key block i sent with
    ``send_tag(i)`` and block j received with ``recv_tag(j)``: several
    edges between two ranks pair in order, key by key (the core's
    ``collective/neighbor.rs``), so the keys tell them apart where order
    alone would not."""

    @staticmethod
    def send_tag(i):
        return 0

    recv_tag = send_tag


class _Cart(_Topology):
    kind = CART

    def __init__(self, dims, periods, rank):
        self.dims, self.periods = dims, periods
        self.coords = self.coords_of(rank)
        self.inedges = self.outedges = [r for d in range(len(dims)) for r in self.shift(d, 1)]

    def coords_of(self, rank):
        """Row-major: the last dimension varies fastest."""
        out = []
        for d in reversed(self.dims):
            rank, c = divmod(rank, d)
            out.append(c)
        return out[::-1]

    def rank_of(self, coords):
        rank = 0
        for c, d, p in zip(coords, self.dims, self.periods):
            if p:
                c %= d
            elif not 0 <= c < d:
                raise MPIException(ERR_ARG, f"coordinate {c} outside a non-periodic dimension of {d}")
            rank = rank * d + c
        return rank

    def shift(self, direction, disp):
        """(source, dest) of a shift by ``disp`` along ``direction``."""
        d, p, at = self.dims[direction], self.periods[direction], self.coords[direction]

        def step(by):
            c = at + by
            if not p and not 0 <= c < d:
                return PROC_NULL
            coords = list(self.coords)
            coords[direction] = c % d
            return self.rank_of(coords)

        return step(-disp), step(disp)

    # A message to the positive neighbour arrives as that neighbour's
    # negative one (block 2d+1 sent is block 2d received): with a periodic
    # dimension of 1 or 2 both neighbours are the same rank, and the key
    # tells the two blocks apart.
    @staticmethod
    def send_tag(i):
        return i

    @staticmethod
    def recv_tag(j):
        return j ^ 1


class _Graph(_Topology):
    kind = GRAPH

    def __init__(self, index, edges, rank):
        self.index, self.edges = index, edges
        self.inedges = self.outedges = self.neighbors(rank) if rank < len(index) else []

    def neighbors(self, rank):
        if not 0 <= rank < len(self.index):
            raise MPIException(ERR_RANK, f"invalid rank {rank} in a graph of {len(self.index)} nodes")
        return self.edges[self.index[rank - 1] if rank else 0 : self.index[rank]]


class _DistGraph(_Topology):
    kind = DIST_GRAPH

    def __init__(self, sources, destinations, sourceweights, destweights):
        self.inedges, self.outedges = sources, destinations
        self.sourceweights, self.destweights = sourceweights, destweights


class _TopoContext(_Context):
    """A topology communicator's handle state: its core, name, info, and
    its topology."""

    __slots__ = ("topo",)

    def __init__(self, core, topo):
        super().__init__(core)
        self.topo = topo

    @property
    def kind(self):
        return self.topo.kind

    @property
    def cls(self):
        """The class of this communicator's handles (``Comm.fromhandle``)."""
        return _CLASSES[self.topo.kind]


def _make(cls, core, topo):
    """A new topology communicator of ``cls`` over ``core`` (None: not a member)."""
    return cls() if core is None else cls._new(_TopoContext(core, topo))


def _adopt(comm, topo):
    """Make the communicator just made for ``comm`` (by Dup, Split) a topology communicator."""
    old = comm._state()
    st = _TopoContext(old.core, topo)
    st.name, st.info, st.settings = old.name, old.info, old.settings
    _table[comm.tohandle()] = st
    return comm


def _first(comm, n):
    """A communicator over the first ``n`` ranks of ``comm`` (collective;
    None on the others)."""
    c = comm._core
    if n > c.size:
        raise MPIException(ERR_ARG, f"a topology of {n} processes on a communicator of {c.size}")
    context = c.next_context(0)
    return c.derive(context, list(c.group[:n]))


# ---- constructors (Intracomm's methods, in MPI/comm.py, call these) ----------


@constructor
def create_cart(comm, dims, periods=None, reorder=False):
    dims = _ints(dims)
    periods = _periods(periods, len(dims))
    if any(d < 0 for d in dims):
        raise MPIException(ERR_DIMS, f"negative dimension in {dims}")
    core = _first(comm, math.prod(dims))
    return _make(Cartcomm, core, None if core is None else _Cart(dims, periods, core.rank))


@constructor
def create_graph(comm, index, edges, reorder=False):
    index, edges = _graph_index(index, edges)
    if any(b < a for a, b in zip([0] + index, index)) or (index and index[-1] > len(edges)):
        raise MPIException(ERR_TOPOLOGY, f"invalid graph index {index} for {len(edges)} edges")
    _check_ranks(edges, len(index))
    core = _first(comm, len(index))
    return _make(Graphcomm, core, None if core is None else _Graph(index, edges, core.rank))


@constructor
def create_dist_graph_adjacent(
    comm, sources, destinations, sourceweights=None, destweights=None, info=None, reorder=False
):
    sources = [] if sources is None else _ints(sources)
    destinations = [] if destinations is None else _ints(destinations)
    sw, dw = _weights(sourceweights, len(sources)), _weights(destweights, len(destinations))
    if (sw is None) != (dw is None) and (sources if sw is None else destinations):
        raise MPIException(ERR_TOPOLOGY, "the sources and the destinations are not both weighted")
    _check_ranks(sources + destinations, comm.Get_size())
    if sw is not None or dw is not None:
        sw, dw = sw or [], dw or []
    core = _first(comm, comm.Get_size())
    return _make(Distgraphcomm, core, _DistGraph(sources, destinations, sw, dw))


@constructor
def create_dist_graph(comm, sources, degrees, destinations, weights=None, info=None, reorder=False):
    sources = _ints(sources)
    degrees = _exactly(degrees, len(sources))
    destinations = _exactly(destinations, sum(degrees))
    weights = _weights(weights, len(destinations))
    _check_ranks(sources + destinations, comm.Get_size())
    froms = [s for s, k in zip(sources, degrees) for _ in range(k)]
    edges = [[s, d, 1 if weights is None else w] for s, d, w in zip(froms, destinations, weights or destinations)]
    # Each rank names some edges: every rank learns all, and keeps its own.
    c = comm._core
    everyone = [json.loads(b) for b in c.allgather_bytes(json.dumps([edges, weights is not None]).encode())]
    me = c.rank
    ins = [(s, w) for named, _ in everyone for s, d, w in named if d == me]
    outs = [(d, w) for named, _ in everyone for s, d, w in named if s == me]
    weighted = any(flag for _, flag in everyone)
    topo = _DistGraph(
        [s for s, _ in ins],
        [d for d, _ in outs],
        [w for _, w in ins] if weighted else None,
        [w for _, w in outs] if weighted else None,
    )
    return _make(Distgraphcomm, _first(comm, c.size), topo)


@constructor
def cart_map(comm, dims, periods=None):
    dims = _ints(dims)
    _periods(periods, len(dims))
    n = math.prod(dims)
    if n > comm.Get_size():
        raise MPIException(ERR_ARG, f"a topology of {n} processes on a communicator of {comm.Get_size()}")
    return comm.Get_rank() if comm.Get_rank() < n else UNDEFINED


@constructor
def graph_map(comm, index, edges):
    index, _ = _graph_index(index, edges)
    return comm.Get_rank() if comm.Get_rank() < len(index) else UNDEFINED


# ---- the classes ------------------------------------------------------------


class Topocomm(Neighborhood, Intracomm):
    """A communicator with a process topology."""

    __slots__ = ()
    _kind = None
    _expecting = "expecting a topology communicator"

    def __new__(cls, comm=None):
        self = super().__new__(cls, comm)
        if self:
            kind = self.Get_topology()
            if kind == UNDEFINED:
                raise TypeError(Topocomm._expecting)
            if cls._kind not in (None, kind):
                raise TypeError(cls._expecting)
        return self

    def _topo(self):
        return self._state().topo

    def Dup(self, info=None):
        """Dup(self, info=None)

        A duplicate with the same topology.
        """
        return _adopt(super().Dup(info), self._topo())

    Clone = Dup

    @property
    def degrees(self):
        t = self._topo()
        return len(t.inedges), len(t.outedges)

    @property
    def indegree(self):
        return self.degrees[0]

    @property
    def outdegree(self):
        return self.degrees[1]

    @property
    def inoutedges(self):
        t = self._topo()
        return list(t.inedges), list(t.outedges)

    @property
    def inedges(self):
        return self.inoutedges[0]

    @property
    def outedges(self):
        return self.inoutedges[1]


class Cartcomm(Topocomm):
    """A communicator on a Cartesian grid."""

    __slots__ = ()
    _kind = CART
    _expecting = "expecting a Cartesian communicator"

    def Get_dim(self):
        """Get_dim(self)

        Return number of dimensions.
        """
        return len(self._topo().dims)

    dim = ndim = property(Get_dim)

    def Get_topo(self):
        """Get_topo(self)

        Return information on the cartesian topology.
        """
        t = self._topo()
        return list(t.dims), [int(p) for p in t.periods], list(t.coords)

    topo = property(Get_topo)
    dims = property(lambda self: self.Get_topo()[0])
    periods = property(lambda self: self.Get_topo()[1])
    coords = property(lambda self: self.Get_topo()[2])

    def Get_cart_rank(self, coords):
        """Get_cart_rank(self, coords)

        Translate logical coordinates to ranks.
        """
        t = self._topo()
        return t.rank_of(_exactly(coords, len(t.dims)))

    def Get_coords(self, rank):
        """Get_coords(self, rank)

        Translate ranks to logical coordinates.
        """
        rank = operator.index(rank)
        if not 0 <= rank < self.Get_size():
            raise MPIException(ERR_RANK, f"invalid rank {rank} (communicator size {self.Get_size()})")
        return self._topo().coords_of(rank)

    def Shift(self, direction, disp):
        """Shift(self, direction, disp)

        Return a process ranks for data shifting with `Sendrecv`.
        """
        t = self._topo()
        direction, disp = operator.index(direction), operator.index(disp)
        if not 0 <= direction < len(t.dims):
            raise MPIException(ERR_ARG, f"invalid direction {direction} in {len(t.dims)} dimensions")
        return t.shift(direction, disp)

    def Sub(self, remain_dims):
        """Sub(self, remain_dims)

        The sub-grid of the kept dimensions through this rank (collective).
        """
        t = self._topo()
        keep = [bool(k) for k in _exactly(remain_dims, len(t.dims))]
        color = 0
        for k, d, c in zip(keep, t.dims, t.coords):
            if not k:
                color = color * d + c
        sub = Comm.Split(self, color, self.Get_rank())
        dims = [d for k, d in zip(keep, t.dims) if k]
        periods = [p for k, p in zip(keep, t.periods) if k]
        return Cartcomm.fromhandle(_adopt(sub, _Cart(dims, periods, sub.Get_rank())).tohandle())


class Graphcomm(Topocomm):
    """A communicator on a general graph, which every rank knows whole."""

    __slots__ = ()
    _kind = GRAPH
    _expecting = "expecting a general graph communicator"

    def Get_dims(self):
        """Get_dims(self)

        Return the number of nodes and edges.
        """
        t = self._topo()
        return len(t.index), len(t.edges)

    dims = property(Get_dims)
    nnodes = property(lambda self: self.Get_dims()[0])
    nedges = property(lambda self: self.Get_dims()[1])

    def Get_topo(self):
        """Get_topo(self)

        Return index and edges.
        """
        t = self._topo()
        return list(t.index), list(t.edges)

    topo = property(Get_topo)
    index = property(lambda self: self.Get_topo()[0])
    edges = property(lambda self: self.Get_topo()[1])

    def Get_neighbors_count(self, rank):
        """Get_neighbors_count(self, rank)

        Return number of neighbors of a process.
        """
        return len(self._topo().neighbors(operator.index(rank)))

    def Get_neighbors(self, rank):
        """Get_neighbors(self, rank)

        Return list of neighbors of a process.
        """
        return list(self._topo().neighbors(operator.index(rank)))

    nneighbors = property(lambda self: self.Get_neighbors_count(self.Get_rank()))
    neighbors = property(lambda self: self.Get_neighbors(self.Get_rank()))


class Distgraphcomm(Topocomm):
    """A communicator on a graph of which each rank knows its own edges."""

    __slots__ = ()
    _kind = DIST_GRAPH
    _expecting = "expecting a distributed graph communicator"

    def Get_dist_neighbors_count(self):
        """Get_dist_neighbors_count(self)

        Return adjacency information for a distributed graph topology.
        """
        t = self._topo()
        return len(t.inedges), len(t.outedges), t.sourceweights is not None

    def Get_dist_neighbors(self):
        """Get_dist_neighbors(self)

        Return adjacency information for a distributed graph topology.
        """
        t = self._topo()
        weights = None if t.sourceweights is None else (list(t.sourceweights), list(t.destweights))
        return list(t.inedges), list(t.outedges), weights


_CLASSES = {CART: Cartcomm, GRAPH: Graphcomm, DIST_GRAPH: Distgraphcomm}


# ---- Compute_dims -------------------------------------------------------------


def Compute_dims(nnodes, dims):
    """Compute_dims(nnodes, dims)

    Return a balanced distribution of processes per coordinate direction.

    A balanced grid of ``nnodes`` processes (MPI_Dims_create): the 0s of
    ``dims`` (or ``dims`` 0s, for an int) filled so that the grid's sides
    differ as little as they can, in non-increasing order.
    """
    nnodes = operator.index(nnodes)
    try:
        dims = _ints(dims)
    except TypeError:
        dims = [0] * operator.index(dims)
    if nnodes < 0:
        raise MPIException(ERR_ARG, f"invalid number of nodes {nnodes}")
    if not dims:
        return []
    if any(d < 0 for d in dims):
        raise MPIException(ERR_DIMS, f"negative dimension in {dims}")
    fixed = math.prod(d for d in dims if d)
    free = [i for i, d in enumerate(dims) if d == 0]
    if nnodes % fixed or (not free and fixed != nnodes):
        raise MPIException(ERR_DIMS, f"{nnodes} processes do not fill the fixed dimensions {dims}")
    for i, side in zip(free, _balanced(nnodes // fixed, len(free))):
        dims[i] = side
    return dims


@lru_cache(maxsize=256)
def _balanced(n, k):
    """``n`` as ``k`` non-increasing factors whose largest and smallest
    differ least (the smaller largest one on a tie), as MPICH picks."""
    if k == 0:
        return ()
    if n == 0:
        return (0,) * k
    divisors = [f for f in range(1, math.isqrt(n) + 1) if n % f == 0]
    divisors = sorted(set(divisors + [n // f for f in divisors]), reverse=True)

    @cache
    def best(m, k, cap):
        if k == 1:
            return (m,) if m <= cap else None
        found = None
        for f in divisors:
            if f > min(m, cap) or m % f:
                continue
            if f**k < m:  # the largest factor cannot be smaller than the k-th root
                break
            rest = best(m // f, k - 1, f)
            if rest is not None:
                cand = (f,) + rest
                if found is None or (cand[0] - cand[-1], cand[0]) < (found[0] - found[-1], found[0]):
                    found = cand
        return found

    return best(n, k, n)
