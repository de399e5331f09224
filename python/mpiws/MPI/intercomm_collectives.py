"""Collective operations of an intercommunicator (mixed into ``Intercomm``).

MPI's rules: a rooted call has its root in one group, which passes
``ROOT`` there (``PROC_NULL`` on its other ranks), while the other group
passes the root's rank in the remote group; the data goes from one group to
the other (``allgather``: each group gets the other's blocks; ``allreduce``:
the reduction of the other group's contributions).

The core runs each call on the intercommunicator itself (mpiws_core's
``collective/inter.rs``), numbered with the intracommunicator collectives'
sequence, and checks the root; as ``collectives.py`` does for
intracommunicators, this file only turns mpi4py's arguments into blocks of
bytes and the result blocks back into objects or into the receive buffer.
Which side of a rooted call a rank is on decides what it prepares: the
root its receive (or send) buffer, the other group its send (or receive)
buffer, the root's other ranks nothing. Object reductions, and buffer
reductions with an op the core has no arithmetic for, gather the other
group's contributions and fold them here in rank order.
"""

from . import datatype, pickled
from .collectives import (
    IN_PLACE,
    _dumps,
    _first_object,
    _forms,
    _into,
    _into_blocks_v,
    _into_each,
    _nothing,
    _objects_or_none,
    _placed,
    _root,
)
from .exception import ERR_BUFFER, ERR_COMM, Exception as MPIException
from .op import SUM, as_op, fold, folded_here

ROOT = -3  # MPI.ROOT
PROC_NULL = -1


def _side(root, rsize):
    """Which side of a rooted call this rank is on: "root", "null" (the root's
    group, not the root) or "remote" (the other group; ``root`` names the
    root). A root that is none of these prepares nothing: the core refuses
    it (ERR_ROOT) before any message."""
    if _root(root) == ROOT:
        return "root"
    if root == PROC_NULL:
        return "null"
    return "remote" if 0 <= root < rsize else None


def _no_in_place(buf):
    if buf is None or (isinstance(buf, int) and buf == IN_PLACE):
        raise MPIException(ERR_BUFFER, "IN_PLACE (or no send buffer) is not allowed on an intercommunicator")
    return buf


def _blocks(view, n):
    """``view`` split into ``n`` equal blocks."""
    if n and view.nbytes % n:
        raise MPIException(ERR_BUFFER, f"a buffer of {view.nbytes} bytes does not split into {n} equal blocks")
    b = view.nbytes // n if n else 0
    return [view[i * b : (i + 1) * b] for i in range(n)]


def _folded(op):
    """The post of an object reduction: the other group's objects, folded."""
    return lambda msg: (lambda v: None if v is None else fold(v, op))(_objects_or_none(msg))


def _undefined(name):
    def call(self, *args, **kwargs):
        self._state()
        raise MPIException(ERR_COMM, f"{name} is not defined on an intercommunicator")

    call.__name__ = name
    return call


class InterCollectives:
    __slots__ = ()

    # ---- objects -----------------------------------------------------------

    def _barrier(self):
        return "barrier", _nothing, {}

    def _bcast(self, obj=None, root=0):
        side = _side(root, self.Get_remote_size())
        data = _dumps(obj) if side == "root" else None
        return "bcast", _first_object if side == "remote" else _nothing, dict(root=root, data=data)

    def _gather(self, sendobj=None, root=0):
        side = _side(root, self.Get_remote_size())
        data = _dumps(sendobj) if side == "remote" else None
        return "gather", _objects_or_none, dict(root=root, data=data)

    def _scatter(self, sendobj=None, root=0):
        rsize = self.Get_remote_size()
        side = _side(root, rsize)
        blocks = [_dumps(o) for o in pickled.items(sendobj, rsize)] if side == "root" else None
        return "scatter", _first_object if side == "remote" else _nothing, dict(root=root, blocks=blocks)

    def _allgather(self, sendobj):
        return "allgather", _objects_or_none, dict(data=_dumps(sendobj))

    def _alltoall(self, sendobj):
        blocks = [_dumps(o) for o in pickled.items(sendobj, self.Get_remote_size())]
        return "alltoall", _objects_or_none, dict(blocks=blocks)

    def _reduce(self, sendobj=None, op=SUM, root=0):
        side = _side(root, self.Get_remote_size())
        op = as_op(op)
        data = _dumps(sendobj) if side == "remote" else None
        return "gather", _folded(op), dict(root=root, data=data)

    def _allreduce(self, sendobj, op=SUM):
        return "allgather", _folded(as_op(op)), dict(data=_dumps(sendobj))

    barrier, ibarrier, _ = _forms(_barrier)
    bcast, ibcast, _ = _forms(_bcast)
    gather, igather, _ = _forms(_gather)
    scatter, iscatter, _ = _forms(_scatter)
    allgather, iallgather, _ = _forms(_allgather)
    alltoall, ialltoall, _ = _forms(_alltoall)
    reduce, ireduce, _ = _forms(_reduce)
    allreduce, iallreduce, _ = _forms(_allreduce)

    # ---- buffers -----------------------------------------------------------

    def _Bcast(self, buf, root=0):
        side = _side(root, self.Get_remote_size())
        if side == "root":
            view = datatype.parse(buf)[0]  # packed, if its type needs it
            return "bcast", _nothing, dict(root=root, data=view, length=view.nbytes)
        if side == "remote":
            view = datatype.parse(buf, writable=True)[0]
            return "bcast", _into(view), dict(root=root, length=view.nbytes)
        return "bcast", _nothing, dict(root=root)

    def _Gather(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        side = _side(root, rsize)
        if side == "root":
            rview = datatype.parse(recvbuf, writable=True, blocks=rsize)[0]
            n = len(_blocks(rview, rsize)[0]) if rsize else 0
            return "gather", _placed(rview, [i * n for i in range(rsize)], [n] * rsize), dict(root=root)
        data = datatype.parse(_no_in_place(sendbuf))[0] if side == "remote" else None
        return "gather", _nothing, dict(root=root, data=data)

    def _Gatherv(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        side = _side(root, rsize)
        if side == "root":
            return "gather", _into_blocks_v(recvbuf, rsize), dict(root=root)
        data = datatype.parse(_no_in_place(sendbuf))[0] if side == "remote" else None
        return "gather", _nothing, dict(root=root, data=data)

    def _Scatter(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        side = _side(root, rsize)
        if side == "root":
            blocks = _blocks(datatype.parse(sendbuf, blocks=rsize)[0], rsize)
            return "scatter", _nothing, dict(root=root, blocks=blocks)
        if side == "remote":
            rview = datatype.parse(_no_in_place(recvbuf), writable=True)[0]
            return "scatter", _into(rview), dict(root=root)
        return "scatter", _nothing, dict(root=root)

    def _Scatterv(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        side = _side(root, rsize)
        if side == "root":
            return "scatter", _nothing, dict(root=root, blocks=datatype.blocks_v(sendbuf, rsize))
        if side == "remote":
            rview = datatype.parse(_no_in_place(recvbuf), writable=True)[0]
            return "scatter", _into(rview), dict(root=root)
        return "scatter", _nothing, dict(root=root)

    def _Allgather(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sview = datatype.parse(_no_in_place(sendbuf))[0]
        rview = datatype.parse(recvbuf, writable=True, blocks=rsize)[0]
        n = len(_blocks(rview, rsize)[0]) if rsize else 0
        return "allgather", _placed(rview, [i * n for i in range(rsize)], [n] * rsize), dict(data=sview)

    def _Allgatherv(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sview = datatype.parse(_no_in_place(sendbuf))[0]
        return "allgather", _into_blocks_v(recvbuf, rsize), dict(data=sview)

    def _Alltoall(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sends = _blocks(datatype.parse(_no_in_place(sendbuf), blocks=rsize)[0], rsize)
        rview = datatype.parse(recvbuf, writable=True, blocks=rsize)[0]
        n = len(_blocks(rview, rsize)[0]) if rsize else 0
        return "alltoall", _placed(rview, [i * n for i in range(rsize)], [n] * rsize), dict(blocks=sends)

    def _Alltoallv(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sends = datatype.blocks_v(_no_in_place(sendbuf), rsize)
        return "alltoall", _into_blocks_v(recvbuf, rsize), dict(blocks=sends)

    def _Alltoallw(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sends = datatype.parse_w(_no_in_place(sendbuf), rsize)
        recvs = datatype.parse_w(recvbuf, rsize, writable=True)
        return "alltoall", _into_each(recvs), dict(blocks=sends)

    def _Reduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        side = _side(root, self.Get_remote_size())
        op = as_op(op)
        if side == "root":
            rview, dt, _ = datatype.parse(recvbuf, writable=True)
            if here := folded_here(op, dt):
                return self._user_op("reduce", b"", dt, rview, here, root)
            return "reduce", _into(rview), dict(root=root, op=(op._core, datatype.reduce_code(dt)))
        if side == "remote":
            sview, dt, _ = datatype.parse(_no_in_place(sendbuf))
            if here := folded_here(op, dt):
                return self._user_op("reduce", sview, dt, None, here, root)
            return "reduce", _nothing, dict(root=root, data=sview, op=(op._core, datatype.reduce_code(dt)))
        return "gather", _nothing, dict(root=root)  # no part in it, whatever the op

    def _Allreduce(self, sendbuf, recvbuf, op=SUM):
        op = as_op(op)
        sview, dt, _ = datatype.parse(_no_in_place(sendbuf))
        rview = datatype.parse(recvbuf, writable=True)[0]
        if here := folded_here(op, dt):
            return self._user_op("allreduce", sview, dt, rview, here)
        return "allreduce", _into(rview), dict(data=sview, op=(op._core, datatype.reduce_code(dt)))

    def _Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        """The local group's reduction (``sendbuf``: as many elements as the
        remote group receives in all) goes to the other group, scattered
        there by its ``recvcounts``."""
        op = as_op(op)
        sview, dt, _ = datatype.parse(_no_in_place(sendbuf))
        rview = datatype.parse(recvbuf, writable=True)[0]
        size = dt.Get_size()
        lsize, rank = self._core.size, self._core.rank
        if recvcounts is None:  # each rank's own receive count, gathered (as mpi4py does)
            recvcounts = self._inter().local.allgather(rview.nbytes // size if size else 0)
        counts = [int(k) * size for k in recvcounts]
        if len(counts) != lsize:
            raise ValueError(f"recvcounts needs one entry per local rank ({lsize})")
        target = rview[: counts[rank]]  # shorter than its block: ERR_TRUNCATE once the call is done
        if here := folded_here(op, dt):
            return self._user_op("reduce_scatter", sview, dt, target, here, counts=counts)
        return "reduce_scatter", _into(target), dict(data=sview, counts=counts, op=(op._core, datatype.reduce_code(dt)))

    def _Reduce_scatter_block(self, sendbuf, recvbuf, op=SUM):
        _, _, count = datatype.parse(recvbuf, writable=True)
        return self._Reduce_scatter(sendbuf, recvbuf, [count] * self._core.size, op)

    Barrier, Ibarrier, Barrier_init = _forms(_barrier)
    Bcast, Ibcast, Bcast_init = _forms(_Bcast)
    Gather, Igather, Gather_init = _forms(_Gather)
    Gatherv, Igatherv, Gatherv_init = _forms(_Gatherv)
    Scatter, Iscatter, Scatter_init = _forms(_Scatter)
    Scatterv, Iscatterv, Scatterv_init = _forms(_Scatterv)
    Allgather, Iallgather, Allgather_init = _forms(_Allgather)
    Allgatherv, Iallgatherv, Allgatherv_init = _forms(_Allgatherv)
    Alltoall, Ialltoall, Alltoall_init = _forms(_Alltoall)
    Alltoallv, Ialltoallv, Alltoallv_init = _forms(_Alltoallv)
    Alltoallw, Ialltoallw, Alltoallw_init = _forms(_Alltoallw)
    Reduce, Ireduce, Reduce_init = _forms(_Reduce)
    Allreduce, Iallreduce, Allreduce_init = _forms(_Allreduce)
    Reduce_scatter, Ireduce_scatter, Reduce_scatter_init = _forms(_Reduce_scatter)
    Reduce_scatter_block, Ireduce_scatter_block, Reduce_scatter_block_init = _forms(_Reduce_scatter_block)

    # MPI defines no prefix reductions on intercommunicators.
    scan, iscan, exscan, iexscan = map(_undefined, ("scan", "iscan", "exscan", "iexscan"))
    Scan, Iscan, Scan_init = map(_undefined, ("Scan", "Iscan", "Scan_init"))
    Exscan, Iexscan, Exscan_init = map(_undefined, ("Exscan", "Iexscan", "Exscan_init"))
