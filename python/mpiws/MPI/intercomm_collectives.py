"""Collective operations of an intercommunicator (mixed into ``Intercomm``).

MPI's rules: a rooted call has its root in one group, which passes
``ROOT`` there (``PROC_NULL`` on its other ranks), while the other group
passes the root's rank in the remote group; the data goes from one group to
the other (``allgather``: each group gets the other's blocks; ``allreduce``:
the reduction of the other group's contributions).

Each call is composed of the local group's own collectives (on the hidden
local intracommunicator, MPI/intercomm.py) and messages between the two
leaders (local rank 0) or to and from the root, on the wire with the
call's own tag. The calls of one intercommunicator run one after another,
in the order they were started (every rank starts them in the same order,
as MPI requires, so the local collectives inside them match): a blocking
call runs at once on the caller's thread when none is pending, a
non-blocking one on a thread of the intercommunicator's (``Runner``).
Arguments are read and checked when the call is made.
"""

import functools
import threading
from collections import deque

from .._core import TAG_UB
from . import datatype, pickled
from . import timeout as timeout_
from .exception import ERR_BUFFER, ERR_COMM, ERR_ROOT, ERR_TRUNCATE, Exception as MPIException
from .collectives import IN_PLACE
from .comm import PROC_NULL
from .op import SUM, as_op
from .persistent import Prequest
from .request import _CALL, Request

ROOT = -3  # MPI.ROOT


class _Deferred:
    """One call queued on a runner, in the shape of a core request (what
    ``Request`` waits for and takes)."""

    cancelled = False

    def __init__(self, fn):
        self._fn, self._out, self._watchers = fn, None, []
        self._done = threading.Event()
        self._lock = threading.Lock()

    def run(self):
        try:
            self._out = (True, self._fn())
        except BaseException as e:  # noqa: BLE001 - raised again where the request completes
            self._out = (False, e)
        with self._lock:
            self._done.set()
            watchers, self._watchers = self._watchers, []
        for events, token in watchers:
            events.push(token)

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        return self._done.wait(timeout)

    def take(self):
        ok, self.value = self._out
        if not ok:
            raise self.value
        return self

    def watch(self, events, token):
        """Push ``token`` to ``events`` when done (the handler thread's watch)."""
        with self._lock:
            if not self._done.is_set():
                self._watchers.append((events, token))
                return
        events.push(token)

    def peek(self):
        return None

    def cancel(self):
        return False  # a collective cannot be cancelled

    withdraw = cancel


class Runner:
    """Runs an intercommunicator's calls in the order they are started; a
    thread runs the queued ones while there are any."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs = deque()
        self._busy = False

    def submit(self, job):
        with self._lock:
            self._jobs.append(job)
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._drain, name="mpiws-intercomm", daemon=True).start()

    def _drain(self):
        while True:
            with self._lock:
                if not self._jobs:
                    self._busy = False
                    return
                job = self._jobs.popleft()
            job.run()

    def idle(self):
        with self._lock:
            return not self._busy

    def then(self, fn):
        """Run ``fn`` once the calls started so far are done."""
        if self.idle():
            fn()
        else:
            self.submit(_Deferred(fn))


class _Call:
    """One call's traffic: the local group's collectives, the wire under the
    call's tag, within the call's time limit."""

    __slots__ = ("local", "wire", "tag", "end", "lead", "rsize")

    def __init__(self, st, end):
        self.local, self.wire, self.end = st.local, st.wire, end
        self.tag = st.calls % (TAG_UB + 1)
        st.calls += 1
        self.lead = st.local._core.rank == 0
        self.rsize = len(st.remote)

    def t(self):
        """What is left of the time limit (``inf``: none, whatever the defaults)."""
        left = timeout_.left(self.end)
        return float("inf") if left is None else left

    # the wire, under the call's tag
    def send(self, obj, dest):
        self.wire.send(obj, dest, self.tag, timeout=self.t())

    def recv(self, source):
        return self.wire.recv(None, source, self.tag, timeout=self.t())

    def Send(self, buf, dest):
        self.wire.Send(buf, dest, self.tag, timeout=self.t())

    def Recv(self, buf, source):
        self.wire.Recv(buf, source, self.tag, timeout=self.t())

    def trade(self, obj):
        """The remote group's ``obj`` (its leader's), on every local rank."""
        theirs = self.wire.sendrecv(obj, 0, self.tag, None, 0, self.tag, timeout=self.t()) if self.lead else None
        return self.local.bcast(theirs, root=0, timeout=self.t())

    def Trade(self, sendbuf, recvbuf):
        """The leaders swap buffers; ``recvbuf`` is then the remote leader's on every local rank."""
        if self.lead:
            self.wire.Sendrecv(sendbuf, 0, self.tag, recvbuf, 0, self.tag, timeout=self.t())
        self.local.Bcast(recvbuf, root=0, timeout=self.t())

    def reduced(self, sview, dt, op):
        """The local group's reduction of ``sview`` at the leader (None elsewhere)."""
        tmp = bytearray(sview.nbytes) if self.lead else None
        self.local.Reduce([sview, dt], None if tmp is None else [tmp, dt], op, root=0, timeout=self.t())
        return tmp

    def exchange(self, sends, recvs):
        """Block j of ``sends`` to remote rank j, block j of ``recvs`` from it (alltoall)."""
        reqs = [self.wire.Irecv(v, j, self.tag) for j, v in enumerate(recvs)]
        reqs += [self.wire.Isend(v, j, self.tag) for j, v in enumerate(sends)]
        Request.Waitall(reqs, timeout=self.t())


def _where(root, rsize):
    """Which side of a rooted call this rank is on: "root", "null" (the root's
    group, not the root) or "remote" (the other group; ``root`` names the root)."""
    if not isinstance(root, int) or isinstance(root, bool):
        raise TypeError(f"root must be an int, got {type(root).__name__}")
    if root == ROOT:
        return "root"
    if root == PROC_NULL:
        return "null"
    if 0 <= root < rsize:
        return "remote"
    raise MPIException(ERR_ROOT, f"invalid root {root} (remote group size {rsize}; or ROOT, PROC_NULL)")


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


def _place(raw, offsets, sizes, blocks):
    """Copy block i (bytes another group sent) to byte ``offsets[i]`` of
    ``raw``; each must be ``sizes[i]`` long."""
    if not isinstance(blocks, list) or len(blocks) != len(sizes):
        raise MPIException(
            ERR_TRUNCATE, f"{len(blocks) if isinstance(blocks, list) else 'no'} blocks for {len(sizes)} ranks"
        )
    for i, (at, size, b) in enumerate(zip(offsets, sizes, blocks)):
        if not isinstance(b, bytes) or len(b) != size:
            raise MPIException(ERR_TRUNCATE, f"block from remote rank {i} has {len(b)} bytes, expected {size}")
        raw[at : at + size] = b


def _v_blocks(raw, dt, counts, displs):
    """(byte offsets, byte sizes) of a vector specification's blocks."""
    size = dt.Get_size()
    return [d * size for d in displs], [k * size for k in counts]


def _forms(compose):
    """From ``compose(self, ...) -> (name, run)``, ``run(call)`` doing the
    communication: the blocking, non-blocking and persistent method."""

    @functools.wraps(compose)
    def blocking(self, *args, timeout=None, **kwargs):
        _, run = compose(self, *args, **kwargs)
        return self._run(run, timeout)

    @functools.wraps(compose)
    def nonblocking(self, *args, timeout=None, schedule=None, **kwargs):
        name, run = compose(self, *args, **kwargs)
        req = self._start(run, timeout)
        return req._describe(call=name, source=self._core.rank)._schedule(schedule)

    @functools.wraps(compose)
    def persistent(self, *args, info=None, timeout=None, **kwargs):
        self._state()  # a null or freed communicator fails here, not at Start
        return Prequest._persistent(lambda: nonblocking(self, *args, timeout=timeout, **kwargs))

    return blocking, nonblocking, persistent


def _undefined(name):
    def call(self, *args, **kwargs):
        self._state()
        raise MPIException(ERR_COMM, f"{name} is not defined on an intercommunicator")

    call.__name__ = name
    return call


class InterCollectives:
    __slots__ = ()

    def _call(self, timeout):
        st = self._inter()
        return st, _Call(st, timeout_.deadline(self._limit(timeout)))

    def _run(self, run, timeout=None):
        """Run ``run(call)`` now, after the calls still pending."""
        st, call = self._call(timeout)
        if st.runner.idle():
            return run(call)
        job = _Deferred(lambda: run(call))
        st.runner.submit(job)
        job.wait()
        return job.take().value

    def _start(self, run, timeout=None):
        st, call = self._call(timeout)
        job = _Deferred(lambda: run(call))
        st.runner.submit(job)
        return Request(job, _CALL, lambda d: d.value, deadline=call.end)

    # ---- objects -----------------------------------------------------------

    def _barrier(self):
        def run(call):
            call.local.Barrier(timeout=call.t())  # all here have entered ...
            call.trade(None)  # ... and, once the leaders swapped word, all there

        return "barrier", run

    def _bcast(self, obj=None, root=0):
        where = _where(root, self.Get_remote_size())

        def run(call):
            if where == "root":
                call.send(obj, 0)
            elif where == "remote":
                return call.local.bcast(call.recv(root) if call.lead else None, root=0, timeout=call.t())
            return None

        return "bcast", run

    def _gather(self, sendobj=None, root=0):
        where = _where(root, self.Get_remote_size())

        def run(call):
            if where == "root":
                return call.recv(0)
            if where == "remote":
                got = call.local.gather(sendobj, root=0, timeout=call.t())
                if call.lead:
                    call.send(got, root)
            return None

        return "gather", run

    def _scatter(self, sendobj=None, root=0):
        rsize = self.Get_remote_size()
        where = _where(root, rsize)
        if where == "root":
            sendobj = pickled.items(sendobj, rsize)

        def run(call):
            if where == "root":
                call.send(sendobj, 0)
            elif where == "remote":
                return call.local.scatter(call.recv(root) if call.lead else None, root=0, timeout=call.t())
            return None

        return "scatter", run

    def _allgather(self, sendobj):
        def run(call):
            return call.trade(call.local.gather(sendobj, root=0, timeout=call.t()))

        return "allgather", run

    def _alltoall(self, sendobj):
        rsize = self.Get_remote_size()
        sendobj = pickled.items(sendobj, rsize)

        def run(call):
            reqs = [call.wire.isend(o, j, call.tag) for j, o in enumerate(sendobj)]
            got = [call.recv(j) for j in range(rsize)]
            Request.Waitall(reqs, timeout=call.t())
            return got

        return "alltoall", run

    def _reduce(self, sendobj=None, op=SUM, root=0):
        where = _where(root, self.Get_remote_size())
        op = as_op(op)

        def run(call):
            if where == "root":
                return call.recv(0)
            if where == "remote":
                value = call.local.reduce(sendobj, op, root=0, timeout=call.t())
                if call.lead:
                    call.send(value, root)
            return None

        return "reduce", run

    def _allreduce(self, sendobj, op=SUM):
        op = as_op(op)

        def run(call):
            return call.trade(call.local.reduce(sendobj, op, root=0, timeout=call.t()))

        return "allreduce", run

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
        where = _where(root, self.Get_remote_size())
        view = None if where == "null" else datatype.parse(buf, writable=where == "remote")[0]

        def run(call):
            if where == "root":
                call.Send(view, 0)
            elif where == "remote":
                if call.lead:
                    call.Recv(view, root)
                call.local.Bcast(view, root=0, timeout=call.t())

        return "bcast", run

    def _Gather(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        where = _where(root, rsize)
        if where == "root":
            rview = datatype.parse(recvbuf, writable=True, blocks=rsize)[0]
        elif where == "remote":
            sview = datatype.parse(_no_in_place(sendbuf))[0]

        def run(call):
            if where == "root":
                call.Recv(rview, 0)
            elif where == "remote":
                tmp = bytearray(sview.nbytes * call.local._core.size) if call.lead else None
                call.local.Gather(sview, tmp, root=0, timeout=call.t())
                if call.lead:
                    call.Send(tmp, root)

        return "gather", run

    def _Gatherv(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        where = _where(root, rsize)
        if where == "root":
            raw, dt, counts, displs = datatype.parse_v(recvbuf, rsize, writable=True)
            offsets, sizes = _v_blocks(raw, dt, counts, displs)
        elif where == "remote":
            sview = datatype.parse(_no_in_place(sendbuf))[0]

        def run(call):
            if where == "root":
                _place(raw, offsets, sizes, call.recv(0))
            elif where == "remote":
                got = call.local.gather(bytes(sview), root=0, timeout=call.t())
                if call.lead:
                    call.send(got, root)

        return "gatherv", run

    def _Scatter(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        where = _where(root, rsize)
        if where == "root":
            sview = datatype.parse(sendbuf, blocks=rsize)[0]
            _blocks(sview, rsize)
        elif where == "remote":
            rview = datatype.parse(_no_in_place(recvbuf), writable=True)[0]

        def run(call):
            if where == "root":
                call.Send(sview, 0)
            elif where == "remote":
                tmp = None
                if call.lead:
                    tmp = bytearray(rview.nbytes * call.local._core.size)
                    call.Recv(tmp, root)
                call.local.Scatter(tmp, rview, root=0, timeout=call.t())

        return "scatter", run

    def _Scatterv(self, sendbuf, recvbuf=None, root=0):
        rsize = self.Get_remote_size()
        where = _where(root, rsize)
        if where == "root":
            raw, dt, counts, displs = datatype.parse_v(sendbuf, rsize)
            blocks = [bytes(raw[at : at + n]) for at, n in zip(*_v_blocks(raw, dt, counts, displs))]
        elif where == "remote":
            rview = datatype.parse(_no_in_place(recvbuf), writable=True)[0]

        def run(call):
            if where == "root":
                call.send(blocks, 0)
            elif where == "remote":
                mine = call.local.scatter(call.recv(root) if call.lead else None, root=0, timeout=call.t())
                _place(rview, [0], [rview.nbytes], [mine])

        return "scatterv", run

    def _Allgather(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sview = datatype.parse(_no_in_place(sendbuf))[0]
        rview = datatype.parse(recvbuf, writable=True, blocks=rsize)[0]
        n = len(_blocks(rview, rsize)[0]) if rsize else 0

        def run(call):
            got = call.trade(call.local.gather(bytes(sview), root=0, timeout=call.t()))
            _place(rview, [i * n for i in range(rsize)], [n] * rsize, got)

        return "allgather", run

    def _Allgatherv(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sview = datatype.parse(_no_in_place(sendbuf))[0]
        raw, dt, counts, displs = datatype.parse_v(recvbuf, rsize, writable=True)
        offsets, sizes = _v_blocks(raw, dt, counts, displs)

        def run(call):
            _place(raw, offsets, sizes, call.trade(call.local.gather(bytes(sview), root=0, timeout=call.t())))

        return "allgatherv", run

    def _Alltoall(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sends = _blocks(datatype.parse(_no_in_place(sendbuf), blocks=rsize)[0], rsize)
        recvs = _blocks(datatype.parse(recvbuf, writable=True, blocks=rsize)[0], rsize)
        return "alltoall", lambda call: call.exchange(sends, recvs)

    def _Alltoallv(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()

        def views(spec, writable):
            raw, dt, counts, displs = datatype.parse_v(spec, rsize, writable=writable)
            return [raw[at : at + n] for at, n in zip(*_v_blocks(raw, dt, counts, displs))]

        sends, recvs = views(_no_in_place(sendbuf), False), views(recvbuf, True)
        return "alltoallv", lambda call: call.exchange(sends, recvs)

    def _Alltoallw(self, sendbuf, recvbuf):
        rsize = self.Get_remote_size()
        sends = datatype.parse_w(_no_in_place(sendbuf), rsize)
        recvs = datatype.parse_w(recvbuf, rsize, writable=True)
        return "alltoallw", lambda call: call.exchange(sends, recvs)

    def _Reduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        where = _where(root, self.Get_remote_size())
        op = as_op(op)
        if where == "root":
            rview = datatype.parse(recvbuf, writable=True)[0]
        elif where == "remote":
            sview, dt, _ = datatype.parse(_no_in_place(sendbuf))

        def run(call):
            if where == "root":
                call.Recv(rview, 0)
            elif where == "remote":
                tmp = call.reduced(sview, dt, op)
                if call.lead:
                    call.Send(tmp, root)

        return "reduce", run

    def _Allreduce(self, sendbuf, recvbuf, op=SUM):
        op = as_op(op)
        sview, dt, _ = datatype.parse(_no_in_place(sendbuf))
        rview = datatype.parse(recvbuf, writable=True)[0]

        def run(call):
            call.Trade(call.reduced(sview, dt, op), rview)

        return "allreduce", run

    def _Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=SUM):
        """The local group's reduction (``sendbuf``: as many elements as the
        remote group receives in all) goes to the other group, scattered
        there by its ``recvcounts``."""
        op = as_op(op)
        sview, dt, _ = datatype.parse(_no_in_place(sendbuf))
        rview = datatype.parse(recvbuf, writable=True)[0]
        size = dt.Get_size()
        lsize = self._core.size
        counts = None if recvcounts is None else [int(k) for k in recvcounts]
        if counts is not None and len(counts) != lsize:
            raise ValueError(f"recvcounts needs one entry per local rank ({lsize})")

        def run(call):
            nonlocal counts
            if counts is None:  # each rank's own receive count, gathered (as mpi4py does)
                counts = call.local.allgather(rview.nbytes // size if size else 0, timeout=call.t())
            mine = counts[call.local._core.rank] * size
            if mine > rview.nbytes:
                raise MPIException(ERR_TRUNCATE, f"{mine} bytes for a buffer of {rview.nbytes} bytes")
            tmp = call.reduced(sview, dt, op)
            got = None
            if call.lead:
                got = bytearray(sum(counts) * size)
                call.wire.Sendrecv(tmp, 0, call.tag, got, 0, call.tag, timeout=call.t())
            call.local.Scatterv(None if got is None else [got, counts, dt], rview[:mine], root=0, timeout=call.t())

        return "reduce_scatter", run

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
