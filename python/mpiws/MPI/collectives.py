"""Collective operations of a communicator (mixed into ``Comm``).

The core moves the data and applies builtin ops to numeric buffers; this
file only turns mpi4py's arguments into blocks of bytes and the result
blocks back into objects or into the receive buffer. Every call has a
non-blocking form returning a ``Request`` (``Ibcast``, ``ibcast``, ...);
mpi4py has none for objects, mpiws has them too.

Algorithms are picked by the core from the message size and the number of
ranks; ``comm.Set_algorithm("bcast", "binomial")`` (or the environment,
``MPIWS_ALGO_BCAST=binomial``) forces one; ``mpiws_core``'s collective
module lists the names.
"""

import functools

from . import datatype, pickled
from .commctx import _comm_lock
from .exception import ERR_ARG, ERR_TRUNCATE, Exception as MPIException
from .op import SUM, as_op, fold, folded_here
from .persistent import Prequest
from .request import _CALL, Request

IN_PLACE = -1

# numpy dtype codes the core reduces.
_CORE_TYPES = {"i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "c8", "c16", "b1"}


def _dumps(obj):
    return pickled.pickle.dumps(obj)


def _nothing(msg):
    return None


def _first_object(msg):
    return pickled.pickle.loads(msg.blocks()[0])


def _objects_or_none(msg):
    blocks = msg.blocks()
    return [pickled.pickle.loads(b) for b in blocks] if blocks else None


def _into(view):
    """Copy a one-block result into ``view``, which it must fill exactly."""

    def post(msg):
        if msg.parts and msg.nbytes != view.nbytes:
            raise MPIException(ERR_TRUNCATE, f"received {msg.nbytes} bytes for a buffer of {view.nbytes} bytes")
        msg.copy_into(view)
        datatype.settle(view)

    return post


def _placed(view, offsets, sizes):
    """Copy result block i to byte ``offsets[i]`` of ``view``; each must be ``sizes[i]`` long."""

    def post(msg):
        got = list(msg.parts)
        if got != list(sizes):
            bad = next(i for i, (g, s) in enumerate(zip(got + [None] * len(sizes), sizes)) if g != s)
            raise MPIException(
                ERR_TRUNCATE,
                f"block from rank {bad} has {got[bad] if bad < len(got) else 0} bytes, expected {sizes[bad]}",
            )
        msg.copy_into(view, offsets)
        datatype.settle(view)

    return post


def _into_blocks_v(spec, n):
    """Copy result block i where the vector specification ``spec`` puts rank i's."""
    raw, dt, counts, displs = datatype.parse_v(spec, n, writable=True)
    if not datatype.is_plain(dt):
        return _into_each(datatype.blocks_v(spec, n, writable=True))
    size = dt.Get_size()
    return _placed(raw, [d * size for d in displs], [k * size for k in counts])


def _into_each(views):
    """Copy result block i into ``views[i]``, which it must fill exactly."""

    def post(msg):
        for i, (got, view) in enumerate(zip(msg.split(), views)):
            if len(got) != view.nbytes:
                raise MPIException(ERR_TRUNCATE, f"block from rank {i} has {len(got)} bytes, expected {view.nbytes}")
            view[:] = got
            datatype.settle(view)

    return post


def _numeric_array(obj):
    """A numpy array a builtin op can reduce in the core, else None."""
    if type(obj).__module__ != "numpy" or not hasattr(obj, "dtype") or obj.dtype.kind not in "iufcb":
        return None
    import numpy

    return numpy.ascontiguousarray(obj)


def _user_fold(chunks, dt, op):
    """Fold raw buffers in rank order with a user op ``f(invec, inoutvec, datatype)``."""
    acc = bytearray(chunks[0])
    for c in chunks[1:]:
        out = bytearray(c)
        op._fn(datatype.typed(acc, dt), datatype.typed(out, dt), dt)
        acc = out
    return acc


def _forms(prepare):
    """From ``prepare(self, ...) -> (name, post, kwargs)``: the blocking, the
    non-blocking and the persistent (``*_init``) method. A persistent
    collective reads its arguments again at each ``Start``, as MPI's reads
    the buffers then."""

    @functools.wraps(prepare)
    def blocking(self, *args, timeout=None, **kwargs):
        name, post, kw = prepare(self, *args, **kwargs)
        if prepare.__name__[1].isupper():
            return self._collective(name, post, False, kw, timeout)
        with _comm_lock(self, name):  # objects: one call of a kind at a time per communicator, as mpi4py
            return self._collective(name, post, False, kw, timeout)

    @functools.wraps(prepare)
    def nonblocking(self, *args, timeout=None, schedule=None, **kwargs):
        name, post, kw = prepare(self, *args, **kwargs)
        req = self._collective(name, post, True, kw, timeout)
        return req._describe(call=name, source=self._core.rank)._schedule(schedule)

    @functools.wraps(prepare)
    def persistent(self, *args, info=None, timeout=None, **kwargs):
        self._state()  # a null or freed communicator fails here, not at Start
        return Prequest._persistent(lambda: nonblocking(self, *args, timeout=timeout, **kwargs))

    return blocking, nonblocking, persistent


def _in_place(buf):
    """``IN_PLACE``, or None where a buffer collective takes it (as mpi4py does)."""
    return buf is None or buf is IN_PLACE


def _root(root):
    if not isinstance(root, int) or isinstance(root, bool):
        raise TypeError(f"root must be an int, got {type(root).__name__}")
    return root


class Collectives:
    __slots__ = ()

    def _collective(self, name, post, nonblocking, kw, timeout):
        c = self._core
        algorithm = self._state().settings.algorithms.get(name)
        r = c.collective(name, algorithm=algorithm, nonblocking=nonblocking, timeout=self._limit(timeout), **kw)
        req = Request(r, _CALL, post)
        return req if nonblocking else req.wait()

    def Set_algorithm(self, collective, algorithm):
        """Force the algorithm of one collective on this communicator (mpiws)."""
        self._state().settings.algorithms[collective] = algorithm

    def Get_algorithm(self, collective):
        return self._state().settings.algorithms.get(collective, "auto")

    # ---- objects -----------------------------------------------------------

    def _barrier(self):
        return "barrier", _nothing, {}

    def _bcast(self, obj=None, root=0):
        data = _dumps(obj) if self._core.rank == _root(root) else None
        return "bcast", _first_object, dict(root=root, data=data)

    def _gather(self, sendobj, root=0):
        return "gather", _objects_or_none, dict(root=_root(root), data=_dumps(sendobj))

    def _scatter(self, sendobj=None, root=0):
        blocks = None
        if self._core.rank == _root(root):
            blocks = [_dumps(o) for o in pickled.items(sendobj, self._core.size)]
        return "scatter", _first_object, dict(root=root, blocks=blocks)

    def _allgather(self, sendobj):
        return "allgather", _objects_or_none, dict(data=_dumps(sendobj))

    def _alltoall(self, sendobj):
        return "alltoall", _objects_or_none, dict(blocks=[_dumps(o) for o in pickled.items(sendobj, self._core.size)])

    def _reduction(self, name, sendobj, op, root=0):
        """Numpy arrays with a builtin op reduce in the core; anything else is
        gathered and folded in rank order with the op's Python function."""
        op = as_op(op)
        arr = _numeric_array(sendobj) if op._core and op._core not in ("maxloc", "minloc") else None
        code = arr is not None and arr.dtype.str[1:]
        if code in _CORE_TYPES:

            def post(msg):
                if not msg.parts:
                    return None
                import numpy

                return numpy.frombuffer(bytearray(msg.view()), dtype=arr.dtype).reshape(arr.shape)

            return name, post, dict(root=root, data=arr, op=(op._core, code))
        rank = self._core.rank
        if name == "reduce":
            return (
                "gather",
                lambda m: (lambda v: None if v is None else fold(v, op))(_objects_or_none(m)),
                dict(root=root, data=_dumps(sendobj)),
            )
        if name == "allreduce":
            return "allgather", lambda m: fold(_objects_or_none(m), op), dict(data=_dumps(sendobj))
        if name == "scan":
            return "allgather", lambda m: fold(_objects_or_none(m)[: rank + 1], op), dict(data=_dumps(sendobj))
        return "allgather", lambda m: fold(_objects_or_none(m)[:rank], op) if rank else None, dict(data=_dumps(sendobj))

    def _reduce(self, sendobj, op=SUM, root=0):
        return self._reduction("reduce", sendobj, op, _root(root))

    def _allreduce(self, sendobj, op=SUM):
        return self._reduction("allreduce", sendobj, op)

    def _scan(self, sendobj, op=SUM):
        return self._reduction("scan", sendobj, op)

    def _exscan(self, sendobj, op=SUM):
        return self._reduction("exscan", sendobj, op)

    barrier, ibarrier, _ = _forms(_barrier)
    bcast, ibcast, _ = _forms(_bcast)
    gather, igather, _ = _forms(_gather)
    scatter, iscatter, _ = _forms(_scatter)
    allgather, iallgather, _ = _forms(_allgather)
    alltoall, ialltoall, _ = _forms(_alltoall)
    reduce, ireduce, _ = _forms(_reduce)
    allreduce, iallreduce, _ = _forms(_allreduce)
    scan, iscan, _ = _forms(_scan)
    exscan, iexscan, _ = _forms(_exscan)

    # ---- buffers -----------------------------------------------------------

    def _Bcast(self, buf, root=0):
        at_root = self._core.rank == _root(root)
        view, _, _ = datatype.parse(buf, writable=not at_root)  # the root's packed, if its type needs it
        post = _nothing if at_root else _into(view)
        return "bcast", post, dict(root=root, data=view if at_root else None, length=view.nbytes)

    def _blocks_of(self, view):
        n = self._core.size
        if view.nbytes % n:
            raise MPIException(ERR_ARG, f"a buffer of {view.nbytes} bytes does not split into {n} equal blocks")
        b = view.nbytes // n
        return [view[i * b : (i + 1) * b] for i in range(n)]

    def _Gather(self, sendbuf, recvbuf=None, root=0):
        c = self._core
        n, at_root = c.size, c.rank == _root(root)
        post, rview = _nothing, None
        if at_root:
            rview, _, _ = datatype.parse(recvbuf, writable=True, blocks=c.size)
            blocks = self._blocks_of(rview)
            post = _placed(rview, [i * len(blocks[0]) for i in range(n)], [len(b) for b in blocks])
        send = bytes(blocks[c.rank]) if _in_place(sendbuf) and at_root else datatype.parse(sendbuf)[0]
        return "gather", post, dict(root=root, data=send, hint=len(send))

    def _Gatherv(self, sendbuf, recvbuf=None, root=0):
        c = self._core
        post = _nothing
        at_root = c.rank == _root(root)
        if at_root:
            post = _into_blocks_v(recvbuf, c.size)
            if _in_place(sendbuf):
                sendbuf = bytes(datatype.blocks_v(recvbuf, c.size)[c.rank])
        send = datatype.parse(sendbuf)[0]
        return "gather", post, dict(root=root, data=send)

    def _Scatter(self, sendbuf, recvbuf=None, root=0):
        c = self._core
        at_root = c.rank == _root(root)
        blocks = self._blocks_of(datatype.parse(sendbuf, blocks=c.size)[0]) if at_root else None
        if at_root and _in_place(recvbuf):
            return "scatter", _nothing, dict(root=root, blocks=blocks)
        rview, _, _ = datatype.parse(recvbuf, writable=True)
        return "scatter", _into(rview), dict(root=root, blocks=blocks, hint=rview.nbytes)

    def _Scatterv(self, sendbuf, recvbuf=None, root=0):
        c = self._core
        at_root = c.rank == _root(root)
        blocks = None
        if at_root:
            blocks = datatype.blocks_v(sendbuf, c.size)
            if _in_place(recvbuf):
                return "scatter", _nothing, dict(root=root, blocks=blocks)
        rview, _, _ = datatype.parse(recvbuf, writable=True)
        return "scatter", _into(rview), dict(root=root, blocks=blocks)

    def _Allgather(self, sendbuf, recvbuf):
        c = self._core
        rview, _, _ = datatype.parse(recvbuf, writable=True, blocks=c.size)
        blocks = self._blocks_of(rview)
        send = bytes(blocks[c.rank]) if _in_place(sendbuf) else datatype.parse(sendbuf)[0]
        post = _placed(rview, [i * len(blocks[0]) for i in range(c.size)], [len(b) for b in blocks])
        return "allgather", post, dict(data=send, hint=len(send))

    def _Allgatherv(self, sendbuf, recvbuf):
        c = self._core
        if _in_place(sendbuf):
            sendbuf = bytes(datatype.blocks_v(recvbuf, c.size)[c.rank])
        return "allgather", _into_blocks_v(recvbuf, c.size), dict(data=datatype.parse(sendbuf)[0])

    def _Alltoall(self, sendbuf, recvbuf):
        rview, _, _ = datatype.parse(recvbuf, writable=True, blocks=self._core.size)
        send = bytes(rview) if _in_place(sendbuf) else datatype.parse(sendbuf, blocks=self._core.size)[0]
        blocks = self._blocks_of(send if isinstance(send, memoryview) else memoryview(send))
        sizes = [len(b) for b in self._blocks_of(rview)]
        post = _placed(rview, [i * sizes[0] for i in range(len(sizes))], sizes)
        return "alltoall", post, dict(blocks=blocks)

    def _Alltoallv(self, sendbuf, recvbuf):
        n = self._core.size
        if _in_place(sendbuf):
            blocks = [bytes(b) for b in datatype.blocks_v(recvbuf, n)]
        else:
            blocks = datatype.blocks_v(sendbuf, n)
        return "alltoall", _into_blocks_v(recvbuf, n), dict(blocks=blocks)

    def _Alltoallw(self, sendbuf, recvbuf):
        n = self._core.size
        rviews = datatype.parse_w(recvbuf, n, writable=True)
        sblocks = (
            [bytes(v) for v in datatype.parse_w(recvbuf, n)] if _in_place(sendbuf) else datatype.parse_w(sendbuf, n)
        )
        return "alltoall", _into_each(rviews), dict(blocks=sblocks)

    def _reduce_buffers(self, name, sendbuf, recvbuf, op, root=0):
        """(send view, datatype, receive view or None, op) for a buffer reduction."""
        op = as_op(op)
        if _in_place(sendbuf):
            sendbuf = recvbuf
            if recvbuf is None:
                raise MPIException(ERR_ARG, f"{name} with IN_PLACE needs a receive buffer")
        send, dt, scount = datatype.parse(sendbuf)
        wants = recvbuf is not None and (name != "reduce" or self._core.rank == root)
        rview = rcount = None
        if wants:
            rview, rdt, rcount = datatype.parse(recvbuf, writable=True)
            if sendbuf is not recvbuf:  # as mpi4py checks a reduction's two buffers
                if rdt != dt:
                    raise ValueError("mismatch in send and receive MPI datatypes")
                if name != "reduce_scatter" and rcount != scount:
                    raise ValueError(f"mismatch in send count {scount} and receive count {rcount}")
        if sendbuf is recvbuf:
            send = bytes(send)  # the result will land where the data is
        return send, dt, rview, op, scount, rcount

    def _user_op(self, name, send, dt, rview, op, root=0, counts=None):
        """A user op on buffers: the core gathers the raw buffers (to the
        root, or to all) and the fold runs here once they are in, so the
        non-blocking forms work as well. ``counts``: Reduce_scatter's
        per-rank byte counts (each rank keeps its slice of the fold)."""
        rank = self._core.rank
        upto = {"scan": rank + 1, "exscan": rank}.get(name)

        def post(msg):
            blocks = msg.blocks()
            if not blocks or upto == 0:
                return None
            folded = _user_fold(blocks[:upto], dt, op)
            if counts is not None:
                start = sum(counts[:rank])
                folded = folded[start : start + counts[rank]]
            if len(folded) != rview.nbytes:
                raise MPIException(ERR_TRUNCATE, f"result of {len(folded)} bytes for a buffer of {rview.nbytes} bytes")
            rview[:] = folded
            return None

        if name == "reduce":
            return "gather", post, dict(root=root, data=bytes(send))
        return "allgather", post, dict(data=bytes(send))

    def _Reduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        _root(root)
        send, dt, rview, op, _, _ = self._reduce_buffers("reduce", sendbuf, recvbuf, op, root)
        if here := folded_here(op, dt):
            return self._user_op("reduce", send, dt, rview, here, root)
        post = _into(rview) if rview is not None else _nothing
        return "reduce", post, dict(root=root, data=send, op=(op._core, datatype.reduce_code(dt)))

    def _Allreduce(self, sendbuf, recvbuf, op=SUM):
        send, dt, rview, op, _, _ = self._reduce_buffers("allreduce", sendbuf, recvbuf, op)
        if here := folded_here(op, dt):
            return self._user_op("allreduce", send, dt, rview, here)
        return "allreduce", _into(rview), dict(data=send, op=(op._core, datatype.reduce_code(dt)))

    def _Scan(self, sendbuf, recvbuf, op=SUM):
        send, dt, rview, op, _, _ = self._reduce_buffers("scan", sendbuf, recvbuf, op)
        if here := folded_here(op, dt):
            return self._user_op("scan", send, dt, rview, here)
        return "scan", _into(rview), dict(data=send, op=(op._core, datatype.reduce_code(dt)))

    def _Exscan(self, sendbuf, recvbuf, op=SUM):
        send, dt, rview, op, _, _ = self._reduce_buffers("exscan", sendbuf, recvbuf, op)
        if here := folded_here(op, dt):
            return self._user_op("exscan", send, dt, rview, here)
        post = _into(rview)
        return (
            "exscan",
            (lambda m: post(m) if m.parts else None),
            dict(data=send, op=(op._core, datatype.reduce_code(dt))),
        )

    def _Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        n = self._core.size
        send, dt, rview, op, scount, rcount = self._reduce_buffers("reduce_scatter", sendbuf, recvbuf, op)
        size = dt.Get_size()
        if recvcounts is None and _in_place(sendbuf):
            recvcounts = [len(send) // size // n] * n
        elif recvcounts is None:  # each rank's own receive count, gathered (as mpi4py does)
            recvcounts = self.allgather(rview.nbytes // size if size else 0)
        if len(recvcounts) != n:
            raise ValueError(f"recvcounts needs one entry per rank ({n})")
        if _in_place(sendbuf) or sendbuf is recvbuf:
            if scount != sum(recvcounts):
                raise ValueError(f"mismatch in receive count {scount} and sum(recvcounts) {sum(recvcounts)}")
        else:
            if scount != sum(recvcounts):
                raise ValueError(f"mismatch in send count {scount} and sum(recvcounts) {sum(recvcounts)}")
            if rcount != recvcounts[self._core.rank]:
                raise ValueError(
                    f"mismatch in receive count {rcount} and recvcounts[{self._core.rank}] {recvcounts[self._core.rank]}"
                )
        counts = [int(k) * size for k in recvcounts]
        mine = counts[self._core.rank]
        target = rview[:mine] if _in_place(sendbuf) or sendbuf is recvbuf else rview
        if here := folded_here(op, dt):
            return self._user_op("reduce_scatter", send, dt, target, here, counts=counts)
        return "reduce_scatter", _into(target), dict(data=send, counts=counts, op=(op._core, datatype.reduce_code(dt)))

    def _Reduce_scatter_block(self, sendbuf, recvbuf, op=SUM):
        n = self._core.size
        if _in_place(sendbuf):
            view = datatype.parse(recvbuf, writable=True)[0]
            return self._Reduce_scatter(
                IN_PLACE, recvbuf, [view.nbytes // n // datatype.parse(recvbuf)[1].Get_size()] * n, op
            )
        _, _, count = datatype.parse(recvbuf, writable=True)
        return self._Reduce_scatter(sendbuf, recvbuf, [count] * n, op)

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
    Scan, Iscan, Scan_init = _forms(_Scan)
    Exscan, Iexscan, Exscan_init = _forms(_Exscan)
