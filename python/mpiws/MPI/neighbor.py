"""Neighbourhood collectives of a process topology (mixed into ``Topocomm``,
MPI/topology.py).

Each rank exchanges blocks with its topology neighbours only: block i of
the send buffer goes to out-neighbour i, block j of the receive buffer
comes from in-neighbour j, in MPI's order (per Cartesian dimension the
neighbour in the negative direction, then the positive one; a graph's
adjacency list; a distributed graph's sources and destinations). The core
runs each call as one collective on the topology communicator (mpiws_core's
``collective/neighbor.rs``), given the neighbour lists and each edge's key
(the topology's ``send_tag``/``recv_tag``, which pair several edges
between the same two ranks); this file turns mpi4py's arguments into
blocks and the result blocks into objects or the receive buffer. A
``PROC_NULL`` neighbour moves nothing and its receive block is left as it
was. MPI allows no ``IN_PLACE`` here.

As with the other collectives, every call has a non-blocking form
(``Ineighbor_*``, and ``ineighbor_*`` for objects, an mpiws addition) and
a persistent one (``Neighbor_*_init``).
"""

from . import datatype, pickled
from .collectives import IN_PLACE, _dumps, _forms
from .exception import ERR_ARG, ERR_BUFFER, ERR_TRUNCATE, Exception as MPIException

PROC_NULL = -1


def _no_in_place(*bufs):
    if any(b is IN_PLACE for b in bufs):
        raise MPIException(ERR_BUFFER, "neighbourhood collectives take no IN_PLACE")


def _equal_blocks(view, n):
    """``view`` cut into ``n`` blocks of one size."""
    if n == 0:
        return []
    if view.nbytes % n:
        raise MPIException(ERR_ARG, f"a buffer of {view.nbytes} bytes does not split into {n} equal blocks")
    b = view.nbytes // n
    return [view[i * b : (i + 1) * b] for i in range(n)]


class Neighborhood:
    __slots__ = ()

    def _neighbors(self, blocks, post):
        """The core call: ``blocks[i]`` to out-neighbour i; ``post(j, block)``
        for each in-neighbour j that is not ``PROC_NULL``."""
        topo = self._state().topo
        sources = [(r, topo.recv_tag(j)) for j, r in enumerate(topo.inedges)]
        destinations = [(r, topo.send_tag(i)) for i, r in enumerate(topo.outedges)]

        def result(msg):
            blocks = msg.blocks()
            return [None if r == PROC_NULL else post(j, blocks[j]) for j, r in enumerate(topo.inedges)]

        return "neighbor", result, dict(blocks=blocks, sources=sources, destinations=destinations)

    def _degrees(self):
        topo = self._state().topo
        return len(topo.inedges), len(topo.outedges)

    def _into(self, views, blocks):
        """The call of a buffer form: each received block into its view."""

        def post(j, block):
            view = views[j]
            if len(block) > view.nbytes:
                raise MPIException(
                    ERR_TRUNCATE, f"message of {len(block)} bytes truncated: receive buffer holds {view.nbytes} bytes"
                )
            view[: len(block)] = block
            datatype.settle(view, len(block))  # a staged block (BOTTOM, a derived type) to its memory

        name, result, kw = self._neighbors(blocks, post)

        def done(msg):
            result(msg)  # into the buffers: nothing to return

        return name, done, kw

    # ---- objects -----------------------------------------------------------

    def _neighbor_allgather(self, sendobj):
        _, outdegree = self._degrees()
        return self._neighbors([_dumps(sendobj)] * outdegree, lambda j, b: pickled.pickle.loads(b))

    def _neighbor_alltoall(self, sendobj):
        _, outdegree = self._degrees()
        blocks = [_dumps(o) for o in pickled.items(sendobj, outdegree)]
        return self._neighbors(blocks, lambda j, b: pickled.pickle.loads(b))

    neighbor_allgather, ineighbor_allgather, _ = _forms(_neighbor_allgather)
    neighbor_alltoall, ineighbor_alltoall, _ = _forms(_neighbor_alltoall)

    # ---- buffers -----------------------------------------------------------

    def _Neighbor_allgather(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        send = datatype.parse(sendbuf)[0]
        views = _equal_blocks(datatype.parse(recvbuf, writable=True, blocks=indegree)[0], indegree)
        return self._into(views, [send] * outdegree)

    def _Neighbor_allgatherv(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        send = datatype.parse(sendbuf)[0]
        return self._into(datatype.blocks_v(recvbuf, indegree, writable=True), [send] * outdegree)

    def _Neighbor_alltoall(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        sends = _equal_blocks(datatype.parse(sendbuf, blocks=outdegree)[0], outdegree)
        views = _equal_blocks(datatype.parse(recvbuf, writable=True, blocks=indegree)[0], indegree)
        return self._into(views, sends)

    def _Neighbor_alltoallv(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        return self._into(datatype.blocks_v(recvbuf, indegree, writable=True), datatype.blocks_v(sendbuf, outdegree))

    def _Neighbor_alltoallw(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        sends = datatype.parse_w(sendbuf, outdegree)
        return self._into(datatype.parse_w(recvbuf, indegree, writable=True), sends)

    Neighbor_allgather, Ineighbor_allgather, Neighbor_allgather_init = _forms(_Neighbor_allgather)
    Neighbor_allgatherv, Ineighbor_allgatherv, Neighbor_allgatherv_init = _forms(_Neighbor_allgatherv)
    Neighbor_alltoall, Ineighbor_alltoall, Neighbor_alltoall_init = _forms(_Neighbor_alltoall)
    Neighbor_alltoallv, Ineighbor_alltoallv, Neighbor_alltoallv_init = _forms(_Neighbor_alltoallv)
    Neighbor_alltoallw, Ineighbor_alltoallw, Neighbor_alltoallw_init = _forms(_Neighbor_alltoallw)
