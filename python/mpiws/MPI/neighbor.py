"""Neighbourhood collectives of a process topology (mixed into ``Topocomm``,
MPI/topology.py).

Each rank exchanges blocks with its topology neighbours only: block i of
the send buffer goes to out-neighbour i, block j of the receive buffer
comes from in-neighbour j, in MPI's order (per Cartesian dimension the
neighbour in the negative direction, then the positive one; a graph's
adjacency list; a distributed graph's sources and destinations). The data
moves by the core's point-to-point ``isend``/``irecv`` on the topology's
hidden duplicate communicator, so it never matches the application's own
messages; a ``PROC_NULL`` neighbour moves nothing and its receive block is
left as it was. MPI allows no ``IN_PLACE`` here.

As with the other collectives, every call has a non-blocking form
(``Ineighbor_*``, and ``ineighbor_*`` for objects, an mpiws addition) and
a persistent one (``Neighbor_*_init``).
"""

import functools

from . import datatype, pickled
from . import timeout as timeout_
from .collectives import IN_PLACE
from .exception import ERR_ARG, ERR_BUFFER, Exception as MPIException
from .persistent import Prequest
from .received import received_object
from .request import _CALL, Request

PROC_NULL = -1


class _Exchange:
    """One neighbourhood collective's sends and receives as one request
    (``Request`` drives it as it drives a core request): done when all are;
    ``take`` completes them all (raising the first error) and hands the
    received messages, by receive block, to the call's ``post``."""

    __slots__ = ("sends", "recvs", "messages", "cancelled")

    def __init__(self, sends, recvs):
        self.sends, self.recvs, self.messages, self.cancelled = sends, recvs, None, False

    def _all(self):
        return self.sends + [r for _, r in self.recvs]

    def done(self):
        return all(r.done() for r in self._all())

    def wait(self, timeout=None):
        end = timeout_.deadline(timeout)
        return all(r.wait(timeout_.left(end)) for r in self._all())

    def take(self):
        for r in self.sends:
            r.take()
        self.messages = {j: r.take() for j, r in self.recvs}
        return self

    def peek(self):
        return None

    def cancel(self):
        return False  # a collective is not cancelled

    def withdraw(self):
        return all(r.cancel() for _, r in self.recvs)


def _forms(prepare):
    """From ``prepare(self, ...) -> (sends, recvs, post)``: the blocking, the
    non-blocking and the persistent method. ``sends``: per out-neighbour,
    the buffers of its message; ``recvs``: per in-neighbour, the buffer to
    receive into (None: an object); ``post(messages)`` makes the result."""

    @functools.wraps(prepare)
    def nonblocking(self, *args, timeout=None, **kwargs):
        sends, recvs, post = prepare(self, *args, **kwargs)
        return self._exchange(sends, recvs, post, timeout)

    @functools.wraps(prepare)
    def blocking(self, *args, timeout=None, **kwargs):
        return nonblocking(self, *args, timeout=timeout, **kwargs).wait()

    @functools.wraps(prepare)
    def persistent(self, *args, info=None, timeout=None, **kwargs):
        self._state()  # a null or freed communicator fails here, not at Start
        return Prequest._persistent(lambda: nonblocking(self, *args, timeout=timeout, **kwargs))

    return blocking, nonblocking, persistent


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


def _vector_blocks(spec, n, writable=False):
    raw, dt, counts, displs = datatype.parse_v(spec, n, writable=writable)
    size = dt.Get_size()
    return [raw[d * size : (d + k) * size] for k, d in zip(counts, displs)]


def _into(blocks):
    """The post of a buffer call: each message into its receive block."""

    def post(messages):
        for j, msg in messages.items():
            msg.copy_into(blocks[j])
            datatype.settle(blocks[j])  # a staged block (BOTTOM, a derived type) to its memory

    return post


def _objects(indegree):
    def post(messages):
        return [received_object(messages[j], None) if j in messages else None for j in range(indegree)]

    return post


class Neighborhood:
    __slots__ = ()

    def _exchange(self, sends, recvs, post, timeout):
        """Post the receives from the in-neighbours, then the sends to the
        out-neighbours, on the hidden duplicate; one request for them all."""
        st = self._state()
        topo, hidden = st.topo, st.hidden
        limit = self._limit(timeout)
        rq = [
            (j, hidden.irecv(src, topo.recv_tag(j), buf))
            for j, (src, buf) in enumerate(zip(topo.inedges, recvs))
            if src != PROC_NULL
        ]
        sq = [
            hidden.isend(dst, topo.send_tag(i), parts, split=len(parts) > 1)
            for i, (dst, parts) in enumerate(zip(topo.outedges, sends))
            if dst != PROC_NULL
        ]
        req = Request(_Exchange(sq, rq), _CALL, lambda ex: post(ex.messages), deadline=timeout_.deadline(limit))
        return req._describe(call="neighbor", source=self._core.rank)

    def _degrees(self):
        topo = self._state().topo
        return len(topo.inedges), len(topo.outedges)

    # ---- objects -----------------------------------------------------------

    def _neighbor_allgather(self, sendobj):
        indegree, outdegree = self._degrees()
        parts = pickled.dumps(sendobj)
        return [parts] * outdegree, [None] * indegree, _objects(indegree)

    def _neighbor_alltoall(self, sendobj):
        indegree, outdegree = self._degrees()
        return [pickled.dumps(o) for o in pickled.items(sendobj, outdegree)], [None] * indegree, _objects(indegree)

    neighbor_allgather, ineighbor_allgather, _ = _forms(_neighbor_allgather)
    neighbor_alltoall, ineighbor_alltoall, _ = _forms(_neighbor_alltoall)

    # ---- buffers -----------------------------------------------------------

    def _Neighbor_allgather(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        send = datatype.parse(sendbuf)[0]
        blocks = _equal_blocks(datatype.parse(recvbuf, writable=True, blocks=indegree)[0], indegree)
        return [[send]] * outdegree, blocks, _into(blocks)

    def _Neighbor_allgatherv(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        send = datatype.parse(sendbuf)[0]
        blocks = _vector_blocks(recvbuf, indegree, writable=True)
        return [[send]] * outdegree, blocks, _into(blocks)

    def _Neighbor_alltoall(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        sends = _equal_blocks(datatype.parse(sendbuf, blocks=outdegree)[0], outdegree)
        blocks = _equal_blocks(datatype.parse(recvbuf, writable=True, blocks=indegree)[0], indegree)
        return [[s] for s in sends], blocks, _into(blocks)

    def _Neighbor_alltoallv(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        sends = _vector_blocks(sendbuf, outdegree)
        blocks = _vector_blocks(recvbuf, indegree, writable=True)
        return [[s] for s in sends], blocks, _into(blocks)

    def _Neighbor_alltoallw(self, sendbuf, recvbuf):
        _no_in_place(sendbuf, recvbuf)
        indegree, outdegree = self._degrees()
        sends = datatype.parse_w(sendbuf, outdegree)
        blocks = datatype.parse_w(recvbuf, indegree, writable=True)
        return [[s] for s in sends], blocks, _into(blocks)

    Neighbor_allgather, Ineighbor_allgather, Neighbor_allgather_init = _forms(_Neighbor_allgather)
    Neighbor_allgatherv, Ineighbor_allgatherv, Neighbor_allgatherv_init = _forms(_Neighbor_allgatherv)
    Neighbor_alltoall, Ineighbor_alltoall, Neighbor_alltoall_init = _forms(_Neighbor_alltoall)
    Neighbor_alltoallv, Ineighbor_alltoallv, Neighbor_alltoallv_init = _forms(_Neighbor_alltoallv)
    Neighbor_alltoallw, Ineighbor_alltoallw, Neighbor_alltoallw_init = _forms(_Neighbor_alltoallw)
